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
rows are a `HeldOutSetting` cut by `split_setting`, SLIM is the registry's (`slim.predictors`), and the
prediction rows are those of `slim.paper.heldout` (x = the measured mean batch size).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from slim import columns as col
from slim.errors import ConfigError, PlotInputError
from slim.model.equations import ArchitectureLookup
from slim.model.fit import SlimFit
from slim.model.metrics import mape_pct
from slim.paper.generalisation_config import SECTION, GeneralisationConfig
from slim.paper.heldout import SLIM, prediction_rows
from slim.paper.splits import HeldOutSetting, split_setting
from slim.paper.table_format import to_booktabs, to_html_page, to_markdown
from slim.predictors import TrainingRuns, registered
from slim.specs.hardware import Hardware

SETTING_NAME = "generalisation"
TARGET_ROLE = "target"


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

    predictions: pd.DataFrame     # columns.GENERALISATION_PREDICTION_COLUMNS, in target-model, OL, max_num_seqs order
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

    `clean` needs the ingested `columns.TENSOR_PARALLEL` column. Training
    runs must be single-GPU (the paper fits on single-GPU OPT runs). Targets are
    predicted with one GPU's ``F_max`` and ``BW_max`` from `hw` and the *whole*
    model's ``L, D, D_kv, r_ff``: no tensor-parallel sharding is modelled, as in
    the paper. The x value is each run's measured mean batch size, as in the
    held-out evaluation (the registry's SLIM, `slim.predictors`).
    """
    col.require_columns(clean, (col.TENSOR_PARALLEL,), "the cleaned table", ConfigError,
                        fix="re-run ingest (snakemake --forcerun ingest)")
    setting = generalisation_setting(clean, config)
    split = split_setting(clean, setting)
    sharded = split.train[split.train[col.TENSOR_PARALLEL] != 1]
    if not sharded.empty:
        raise ConfigError(f"{SECTION}.train_models: run '{sharded[col.RUN_ID].iloc[0]}' uses tensor parallelism "
                          f"{int(sharded[col.TENSOR_PARALLEL].iloc[0])}; SLIM is fitted on single-GPU runs only")
    fitted = registered(SLIM).predictor.fit(TrainingRuns(split.train, catalog, hw, label=SETTING_NAME))
    order = {model: position for position, model in enumerate(config.target_models)}
    targets = split.validate.sort_values([col.MODEL, col.OUTPUT_LEN_NOMINAL, col.MAX_NUM_SEQS, col.RUN_ID],
                                         key=lambda values: values.map(order) if values.name == col.MODEL else values)
    prediction = fitted.predict(targets)
    rows = prediction_rows(SETTING_NAME, SLIM, targets, TARGET_ROLE, prediction.throughput_per_s,
                           prediction.e2e_latency_s)
    rows[col.TENSOR_PARALLEL] = targets[col.TENSOR_PARALLEL].to_numpy()
    predictions = rows[list(col.GENERALISATION_PREDICTION_COLUMNS)].reset_index(drop=True)
    return GeneralisationResult(predictions, fitted.calibration, setting, len(split.train))


def generalisation_mapes(predictions: pd.DataFrame) -> pd.DataFrame:
    """MAPE (%) of throughput and E2E latency per target model, over all its runs."""
    col.require_columns(predictions, col.GENERALISATION_PREDICTION_COLUMNS, "the Fig. 11 predictions table",
                        PlotInputError)
    records = []
    for model, rows in predictions.groupby(col.MODEL, sort=False):
        records.append({
            col.MODEL: model, col.TENSOR_PARALLEL: _tensor_parallel_label(rows), col.N_RUNS: len(rows),
            **{metric.mape: mape_pct(rows[metric.predicted], rows[metric.measured])
               for metric in col.PREDICTION_METRICS},
        })
    return pd.DataFrame.from_records(records, columns=list(col.GENERALISATION_MAPE_COLUMNS))


def _tensor_parallel_label(rows: pd.DataFrame) -> str:
    """``"4"``, or ``"2/4"`` should one model have been served at several sizes."""
    return "/".join(str(size) for size in sorted(set(rows[col.TENSOR_PARALLEL].astype(int))))


def table_fig11_display(mapes: pd.DataFrame) -> pd.DataFrame:
    """Per target model: GPUs, runs, throughput and E2E MAPE (%)."""
    return pd.DataFrame({
        "GPUs (TP)": mapes[col.TENSOR_PARALLEL].astype(str).to_numpy(),
        "Runs": mapes[col.N_RUNS].astype(int).astype(str).to_numpy(),
        "Thr. MAPE": mapes[col.THROUGHPUT_METRIC.mape].to_numpy(),
        "E2E MAPE": mapes[col.E2E_METRIC.mape].to_numpy(),
    }, index=pd.Index(mapes[col.MODEL], name="Target model"))


SIM_TENSOR_PARALLEL_NOTE = (
    "SIM (the calibrated simulator as a predictor) has no row here: these targets are the simulator's own output, "
    "so its score would be circular, and on the home GPU its tensor-parallel constants (NVLink bandwidth, "
    "all-reduce latency, the TP step overhead, zero) are assumptions: the public H100 traces have no multi-GPU run "
    "to fit them, and any SIM prediction of a tensor-parallel configuration there inherits them untested (on "
    "LLM-Inference-Bench's accelerators, the TP step overhead is fitted where training has TP rows).")
"""Fig. 11's statement about SIM: why it has no row, and what its tensor-parallel constants rest on."""


def table_fig11_caption(dataset_label: str, train_models: Sequence[str], train_il: float, n_train_runs: int) -> str:
    return (f"Fig. 11 companion, {dataset_label} data: MAPE (%) of SLIM fitted only on single-GPU runs of "
            f"{', '.join(train_models)} ({n_train_runs} runs, IL {train_il:g}) and predicting models it never "
            "saw. SLIM does not model tensor parallelism: each target is predicted as the whole model on one "
            f"GPU. The paper reports no numbers for this figure, only curves. {SIM_TENSOR_PARALLEL_NOTE}")


def table_fig11_latex(mapes: pd.DataFrame, dataset_label: str, train_models: Sequence[str], train_il: float,
                      n_train_runs: int) -> str:
    """Booktabs table of `table_fig11_display` with `table_fig11_caption`."""
    caption = table_fig11_caption(dataset_label, train_models, train_il, n_train_runs).replace("%", "\\%")
    return to_booktabs(table_fig11_display(mapes), caption, "tab:fig11")


def table_fig11_html(mapes: pd.DataFrame, dataset_label: str, train_models: Sequence[str], train_il: float,
                     n_train_runs: int) -> str:
    """The same table as an HTML page (`tables.to_html_page`), for the Snakemake report."""
    caption = table_fig11_caption(dataset_label, train_models, train_il, n_train_runs).replace("%", "\\%")
    return to_html_page(table_fig11_display(mapes), caption, "Fig. 11 table")


def table_fig11_markdown(mapes: pd.DataFrame, dataset_label: str, train_models: Sequence[str], train_il: float,
                         n_train_runs: int) -> str:
    """The same table for the results page (docs/results.md), its caption as the lead paragraph."""
    caption = table_fig11_caption(dataset_label, train_models, train_il, n_train_runs)
    return f"{caption}\n\n{to_markdown(table_fig11_display(mapes), index_label='target model')}"
