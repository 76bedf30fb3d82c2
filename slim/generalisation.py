"""Paper Fig. 11: SLIM fitted only on single-GPU OPT runs, predicting models it never saw.

The targets are an unseen attention architecture (Mistral-7B, grouped-query
attention: SLIM sees it only through ``D_kv = H_kv d_h`` in Eqs. 8 and 11) and
larger models served with tensor parallelism (Qwen2.5-32B on 2 GPUs, Qwen2-72B on
4). As in the paper, SLIM does **not** model tensor parallelism: every target is
predicted as the whole model on one GPU (one GPU's ``F_max`` and ``BW_max``), so a
sharded model is treated as a uniformly larger one. The paper reports this as a
limitation (it overestimates the gap between Qwen-32B/TP2 and Qwen-72B/TP4); the
figure is meant to show it, not to hide it.

The fit and the prediction reuse the held-out machinery: the training and target
rows are a `HeldOutSetting` cut by `split_setting`, SLIM is `fit_slim`, and the
prediction rows are those of `slim.evaluate` (x = the measured mean batch size).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from slim import columns as col
from slim.config import DatasetConfig
from slim.errors import ConfigError
from slim.evaluate import SLIM, prediction_rows
from slim.model.equations import ArchitectureLookup, predict_frame
from slim.model.fit import SlimFit, fit_slim
from slim.model.metrics import mape_pct
from slim.plots import E2E, THROUGHPUT, PlotInputError, check_columns, curve_colors, curves
from slim.specs.hardware import Hardware
from slim.splits import HeldOutSetting, split_setting
from slim.tables import to_booktabs, to_markdown

SECTION = "generalisation"
SETTING_NAME = "generalisation"
TARGET_ROLE = "target"
TENSOR_PARALLEL = col.TENSOR_PARALLEL
"""GPUs a run's model is sharded over (vLLM ``--tensor-parallel-size``; 1 = single GPU), from ingest."""

PREDICTION_COLUMNS = (
    col.RUN_ID, col.MODEL, TENSOR_PARALLEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.OUTPUT_LEN_NOMINAL,
    col.MAX_NUM_SEQS, col.MEAN_BATCH_SIZE, THROUGHPUT[0], THROUGHPUT[1], E2E[0], E2E[1],
)
"""Columns of `fig11_predictions.csv`: one row per target run."""

MAPE_COLUMNS = (col.MODEL, TENSOR_PARALLEL, "n_runs", THROUGHPUT[2], E2E[2])


# ------------------------------------------------------------------ configuration

@dataclass(frozen=True)
class GeneralisationConfig:
    """The `generalisation` section of config.yaml, checked against the datasets."""

    dataset: str
    train_models: tuple[str, ...]
    target_models: tuple[str, ...]


def generalisation_config(config: Mapping[str, Any], datasets: Mapping[str, DatasetConfig]) -> GeneralisationConfig:
    """Check the `generalisation` section against the resolved `datasets` (those of run_datasets).

    Raises `ConfigError` naming ``generalisation.<key>`` when the section is
    missing, its dataset is not in run_datasets, a model is not one of the
    dataset's models, or a model is both trained on and predicted.
    """
    section = config.get(SECTION)
    if not section:
        raise ConfigError(f"`{SECTION}` is missing from the config; add dataset, train_models and target_models")
    name = section["dataset"]
    if name not in datasets:
        raise ConfigError(f"{SECTION}.dataset = '{name}' is not listed in run_datasets "
                          f"(listed: {', '.join(datasets)}); add it there or choose one of them")
    models = datasets[name].models
    for key in ("train_models", "target_models"):
        for position, model in enumerate(section[key]):
            if model not in models:
                raise ConfigError(f"{SECTION}.{key}[{position}] = '{model}' is not a model of "
                                  f"datasets.{name}.models (known: {', '.join(models)})")
    for position, model in enumerate(section["target_models"]):
        if model in section["train_models"]:
            raise ConfigError(f"{SECTION}.target_models[{position}] = '{model}' is also in "
                              f"{SECTION}.train_models; a target must be unseen")
    return GeneralisationConfig(name, tuple(section["train_models"]), tuple(section["target_models"]))


class GeneralisationInputs:
    """Snakemake input and params functions of the Fig. 11 rules.

    The config is checked when a Fig. 11 target is planned, not when the
    workflow is parsed, so a run whose run_datasets omit the generalisation
    dataset can still build everything else; asking for Fig. 11 then fails
    before any job runs, naming ``generalisation.dataset``.
    """

    def __init__(self, config: Mapping[str, Any], datasets: Mapping[str, DatasetConfig]):
        self._config, self._datasets = config, datasets

    def resolved(self) -> tuple[GeneralisationConfig, DatasetConfig]:
        checked = generalisation_config(self._config, self._datasets)
        return checked, self._datasets[checked.dataset]

    def clean_table(self, wildcards) -> str:
        return f"results/{self.resolved()[0].dataset}/clean.parquet"

    def dataset_name(self, wildcards) -> str:
        return self.resolved()[0].dataset

    def dataset_label(self, wildcards) -> str:
        return self.resolved()[1].label

    def hardware_name(self, wildcards) -> str:
        return self.resolved()[1].hardware.name

    def train_models(self, wildcards) -> list[str]:
        return list(self.resolved()[0].train_models)

    def target_models(self, wildcards) -> list[str]:
        return list(self.resolved()[0].target_models)

    def report_category(self) -> str:
        """``Generalisation (simulated)`` or ``(real)``, read from the raw config (never fails)."""
        name = self._config.get(SECTION, {}).get("dataset")
        kind = self._config.get("datasets", {}).get(name, {}).get("kind", "unknown")
        return f"Generalisation ({kind})"


# ------------------------------------------------------------------ data

def training_input_len(clean: pd.DataFrame, train_models: Sequence[str]) -> float:
    """The most common nominal input length of the training models' runs (the smallest on a tie)."""
    lengths = clean.loc[clean[col.MODEL].isin(train_models), col.INPUT_LEN_NOMINAL]
    counts = lengths.value_counts()
    return float(counts[counts == counts.max()].index.min())


def generalisation_setting(clean: pd.DataFrame, config: GeneralisationConfig) -> HeldOutSetting:
    """Training = every run of the train models at their common input length; targets = every
    run of the target models. Raises `ConfigError` naming the key of a model without runs."""
    present = set(clean[col.MODEL])
    for key, models in (("train_models", config.train_models), ("target_models", config.target_models)):
        for position, model in enumerate(models):
            if model not in present:
                raise ConfigError(f"{SECTION}.{key}[{position}] = '{model}' has no clean run in dataset "
                                  f"'{config.dataset}'; check its traces and cleaning report")
    il = training_input_len(clean, config.train_models)
    return HeldOutSetting(
        SETTING_NAME, f"SLIM fitted on {', '.join(config.train_models)} (IL {il:g})",
        train={col.MODEL: list(config.train_models), col.INPUT_LEN_NOMINAL: [il]},
        validate={col.MODEL: list(config.target_models)},
    )


# ------------------------------------------------------------------ fit and predict

@dataclass(frozen=True)
class GeneralisationResult:
    """SLIM's fit on the training models and its predictions for every target run."""

    predictions: pd.DataFrame     # PREDICTION_COLUMNS, in target-model, OL, max_num_seqs order
    fit: SlimFit
    setting: HeldOutSetting
    n_train_runs: int

    @property
    def train_input_len(self) -> float:
        """The nominal input length of the training runs."""
        return float(self.setting.train[col.INPUT_LEN_NOMINAL][0])


def evaluate_generalisation(clean: pd.DataFrame, config: GeneralisationConfig, catalog: ArchitectureLookup,
                            hw: Hardware) -> GeneralisationResult:
    """Fit SLIM on the training models and predict every target run (Eqs. 5 and 6).

    `clean` needs the ingested `TENSOR_PARALLEL` column. Training
    runs must be single-GPU (the paper fits on single-GPU OPT runs). Targets are
    predicted with one GPU's ``F_max`` and ``BW_max`` from `hw` and the *whole*
    model's ``L, D, D_kv, r_ff``: no tensor-parallel sharding is modelled, as in
    the paper. The x value is each run's measured mean batch size, as in the
    held-out evaluation (`slim.model.equations.predict_frame`).
    """
    if TENSOR_PARALLEL not in clean.columns:
        raise ConfigError(f"the cleaned table lacks the '{TENSOR_PARALLEL}' column; "
                          "re-run ingest (snakemake --forcerun ingest)")
    setting = generalisation_setting(clean, config)
    split = split_setting(clean, setting)
    sharded = split.train[split.train[TENSOR_PARALLEL] != 1]
    if not sharded.empty:
        raise ConfigError(f"{SECTION}.train_models: run '{sharded[col.RUN_ID].iloc[0]}' uses tensor parallelism "
                          f"{int(sharded[TENSOR_PARALLEL].iloc[0])}; SLIM is fitted on single-GPU runs only")
    fit = fit_slim(split.train, catalog, hw, split_name=SETTING_NAME)
    order = {model: position for position, model in enumerate(config.target_models)}
    targets = split.validate.sort_values([col.MODEL, col.OUTPUT_LEN_NOMINAL, col.MAX_NUM_SEQS, col.RUN_ID],
                                         key=lambda values: values.map(order) if values.name == col.MODEL else values)
    e2e_s, throughput = predict_frame(catalog, hw, fit.params, targets)
    rows = prediction_rows(SETTING_NAME, SLIM, targets, TARGET_ROLE, throughput, e2e_s)
    rows[TENSOR_PARALLEL] = targets[TENSOR_PARALLEL].to_numpy()
    predictions = rows[list(PREDICTION_COLUMNS)].reset_index(drop=True)
    return GeneralisationResult(predictions, fit, setting, len(split.train))


def generalisation_mapes(predictions: pd.DataFrame) -> pd.DataFrame:
    """MAPE (%) of throughput and E2E latency per target model, over all its runs."""
    check_columns(predictions, PREDICTION_COLUMNS, "Fig. 11 predictions")
    records = []
    for model, rows in predictions.groupby(col.MODEL, sort=False):
        records.append({
            col.MODEL: model, TENSOR_PARALLEL: _tensor_parallel_label(rows), "n_runs": len(rows),
            THROUGHPUT[2]: mape_pct(rows[THROUGHPUT[1]], rows[THROUGHPUT[0]]),
            E2E[2]: mape_pct(rows[E2E[1]], rows[E2E[0]]),
        })
    return pd.DataFrame.from_records(records, columns=list(MAPE_COLUMNS))


def _tensor_parallel_label(rows: pd.DataFrame) -> str:
    """``"4"``, or ``"2/4"`` should one model have been served at several sizes."""
    return "/".join(str(size) for size in sorted(set(rows[TENSOR_PARALLEL].astype(int))))


def table_fig11_display(mapes: pd.DataFrame) -> pd.DataFrame:
    """Per target model: GPUs, runs, throughput and E2E MAPE (%)."""
    return pd.DataFrame({
        "GPUs (TP)": mapes[TENSOR_PARALLEL].astype(str).to_numpy(),
        "Runs": mapes["n_runs"].astype(int).astype(str).to_numpy(),
        "Thr. MAPE": mapes[THROUGHPUT[2]].to_numpy(),
        "E2E MAPE": mapes[E2E[2]].to_numpy(),
    }, index=pd.Index(mapes[col.MODEL], name="Target model"))


def table_fig11_caption(dataset_label: str, train_models: Sequence[str], train_il: float, n_train_runs: int) -> str:
    return (f"Fig. 11 companion, {dataset_label} data: MAPE (%) of SLIM fitted only on single-GPU runs of "
            f"{', '.join(train_models)} ({n_train_runs} runs, IL {train_il:g}) and predicting models it never "
            "saw. SLIM does not model tensor parallelism: each target is predicted as the whole model on one "
            "GPU. The paper reports no numbers for this figure, only curves.")


def table_fig11_latex(mapes: pd.DataFrame, dataset_label: str, train_models: Sequence[str], train_il: float,
                      n_train_runs: int) -> str:
    """Booktabs table of `table_fig11_display` with `table_fig11_caption`."""
    caption = table_fig11_caption(dataset_label, train_models, train_il, n_train_runs).replace("%", "\\%")
    return to_booktabs(table_fig11_display(mapes), caption, "tab:fig11")


def table_fig11_markdown(mapes: pd.DataFrame, dataset_label: str, train_models: Sequence[str], train_il: float,
                         n_train_runs: int) -> str:
    """The same table for the README, its caption as the lead paragraph."""
    caption = table_fig11_caption(dataset_label, train_models, train_il, n_train_runs)
    return f"{caption}\n\n{to_markdown(table_fig11_display(mapes), index_label='target model')}"


# ------------------------------------------------------------------ figure

MEASURED_STYLE = {"linestyle": "-", "marker": "o", "markersize": 4.5, "linewidth": 1.4}
PREDICTED_STYLE = {"linestyle": "-.", "linewidth": 1.6}


def plot_generalisation(predictions: pd.DataFrame, dataset_label: str, train_label: str) -> Figure:
    """Fig. 11: measured vs SLIM-predicted throughput (top) and E2E latency (bottom).

    One column per target model (in the order of `predictions`), x = measured
    mean batch size (log2). Each output length is a shade of the model's hue:
    solid lines with markers are the runs of `dataset_label`, dash-dot lines
    SLIM's predictions (fitted on `train_label` only, no tensor-parallel
    modelling). Each panel's title carries the model's MAPE of that metric.
    """
    check_columns(predictions, PREDICTION_COLUMNS, "Fig. 11 predictions")
    if predictions.empty:
        raise PlotInputError("plot_generalisation: no target run to plot")
    mapes = generalisation_mapes(predictions).set_index(col.MODEL)
    models = list(mapes.index)
    colors = curve_colors(predictions)
    figure = Figure(figsize=(3.9 * len(models), 7.4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, len(models), squeeze=False)
    for column, model in enumerate(models):
        rows = predictions[predictions[col.MODEL] == model]
        gpus = mapes.loc[model, TENSOR_PARALLEL]
        heading = f"{model}, " + ("1 GPU" if gpus == "1" else f"TP {gpus} ({gpus} GPUs)")
        for row, metric in enumerate((THROUGHPUT, E2E)):
            ax = axes[row, column]
            for key, curve in curves(rows):
                ax.plot(curve[col.MEAN_BATCH_SIZE], curve[metric[0]], color=colors[key], zorder=3, **MEASURED_STYLE)
                ax.plot(curve[col.MEAN_BATCH_SIZE], curve[metric[1]], color=colors[key], zorder=2,
                        **PREDICTED_STYLE)
            ax.set_xscale("log", base=2)
            ax.set_ylim(bottom=0)
            ax.grid(True, which="major", alpha=0.3)
            ax.set_title(f"{heading}\nSLIM MAPE {mapes.loc[model, metric[2]]:.1f} %", fontsize="medium")
            ax.set_ylabel(metric[3] if column == 0 else "")
            ax.set_xlabel("Mean batch size" if row == 1 else "")
        axes[0, column].legend(handles=[Line2D([], [], color=colors[key], label=f"OL {key[1]:g}", **MEASURED_STYLE)
                                        for key, _ in curves(rows)], fontsize="small", loc="upper left")
    figure.legend(handles=[
        Line2D([], [], color="black", label=f"Measured ({dataset_label})", **MEASURED_STYLE),
        Line2D([], [], color="black", label=f"SLIM, fitted on {train_label} only (no TP modelling)",
               **PREDICTED_STYLE),
    ], loc="outside lower center", ncol=2, frameon=False)
    figure.suptitle(f"Fig. 11: SLIM on unseen models, {dataset_label} data")
    return figure
