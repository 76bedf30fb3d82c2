"""How well each predictor predicts the SLO metrics users state, on models it was not calibrated on.

For every model of a dataset in turn, SIM and SLIM are calibrated on the other models' runs (leave one
model out) and predict the held-out model's runs: throughput and every SLO metric of `SLO_METRICS`
under the client each run used (`slim.predictors.contract.predict_slo_metrics`; SIM simulates each
run's requests, SLIM gives the in-batch E2E of Eq. 5 and the mean TPOT, Eq. 5 over OL, and nothing
else). A prediction's 90 % interval is cross-conformal (`slim.model.conformal`): the
``|log(measured / predicted)|`` scores of the same predictor and metric on the *other* models' runs,
each predicted by its own held-out fit, so no model's interval has seen its own runs. NaN where the
predictor cannot give the metric (SLIM's percentiles, SIM's ITL tail: `slim.predictors.simulator.
measure_only`), where the run did not record it (the public format has no E2EL), or where the
simulated server cannot start or preempts.

`slo_predictions` is the per-run table (``measured_<metric>``, ``<predictor>_<metric>`` with ``_low``
and ``_high``); `slo_accuracy` is per metric and predictor: runs, MAPE and the coverage and width of
the intervals; `slo_accuracy_markdown` prints it with why a cell is empty.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import FitError
from slim.model.conformal import conformal_bounds
from slim.predictors import SIM, SLIM, registered
from slim.predictors.contract import TrainingRuns, predict_slo_metrics
from slim.predictors.simulator import measure_only
from slim.predictors.slim_model import SLIM_SLO_METRICS
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware
from slim.specs.slo import IN_BATCH_E2E, SloMetric

SLO_METRICS = ("mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
               "median_itl_ms", "p99_itl_ms", "mean_e2el_ms", "p99_e2el_ms", IN_BATCH_E2E)
"""The SLO metrics the table reports (vLLM's names, and the paper's in-batch E2E)."""
PREDICTORS = (SIM, SLIM)
THROUGHPUT = "throughput"
"""The table's name for total token throughput (tokens/s), measured and predicted."""
RUN_KEYS = (col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.MAX_NUM_SEQS, col.TENSOR_PARALLEL,
            col.GPUS_PER_SERVER)


def measured_value(runs: pd.DataFrame, name: str) -> np.ndarray:
    """A run's recorded value of an SLO metric or of throughput (NaN where it recorded none)."""
    if name == THROUGHPUT:
        return runs[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float)
    if name == IN_BATCH_E2E:
        return 1e3 * runs[col.E2E_LATENCY_S].to_numpy(dtype=float)
    return runs[name].to_numpy(dtype=float) if name in runs else np.full(len(runs), np.nan)


def _held_out_predictions(runs: pd.DataFrame, training: TrainingRuns, predictor: str,
                          metrics: Sequence[SloMetric]) -> dict[str, np.ndarray] | None:
    """`predictor` fitted on `training` predicting `runs`: throughput and every metric; None where it
    cannot be fitted on those runs."""
    try:
        fitted = registered(predictor).predictor.fit(training)
    except FitError:
        return None
    prediction = fitted.predict(runs)
    values = predict_slo_metrics(fitted, runs, metrics)
    refused = (np.asarray(prediction.refused, dtype=bool) if prediction.refused is not None
               else np.zeros(len(runs), dtype=bool))
    out = {THROUGHPUT: np.asarray(prediction.throughput_per_s, dtype=float).copy()}
    out.update({name: np.asarray(value, dtype=float).copy() for name, value in values.items()})
    for value in out.values():
        value[refused] = np.nan
    return out


def slo_predictions(runs: pd.DataFrame, catalog: ArchitectureCatalog, hardware: Hardware, schedules,
                    confidence: float = 0.9, metric_names: Sequence[str] = SLO_METRICS,
                    predictors: Sequence[str] = PREDICTORS) -> pd.DataFrame:
    """Per run: its keys, each measured value, and each predictor's leave-one-model-out prediction with
    its cross-conformal interval at `confidence` (module docstring). Rows in the order of `runs`."""
    metrics = [SloMetric.parse(name) for name in metric_names]
    names = [THROUGHPUT, *metric_names]
    runs = runs.reset_index(drop=True)
    table = runs.reindex(columns=list(RUN_KEYS)).copy()
    for name in names:
        table[f"measured_{name}"] = measured_value(runs, name)
    models = sorted(set(runs[col.MODEL]))
    base = TrainingRuns(runs, catalog, hardware, schedules, "slo predictions", sample_valley=False)
    for predictor in predictors:
        predicted = {name: np.full(len(runs), np.nan) for name in names}
        for model in models if len(models) > 1 else []:
            held_out = runs.index[runs[col.MODEL] == model]
            training = base.with_runs(runs.drop(index=held_out), f"slo predictions without {model}")
            values = _held_out_predictions(runs.loc[held_out], training, predictor, metrics)
            for name in names if values is not None else []:
                predicted[name][held_out.to_numpy()] = values[name]
        for name in names:
            table[f"{predictor}_{name}"] = predicted[name]
            low, high = np.full(len(runs), np.nan), np.full(len(runs), np.nan)
            measured = table[f"measured_{name}"].to_numpy(dtype=float)
            scores = np.abs(np.log(measured / predicted[name]))
            for model in models:
                mine = (runs[col.MODEL] == model).to_numpy()
                others = ~mine & np.isfinite(scores)
                if others.any():
                    low[mine], high[mine] = conformal_bounds(predicted[name][mine], scores[others], confidence)
            table[f"{predictor}_{name}_low"], table[f"{predictor}_{name}_high"] = low, high
    return table


def why_empty(predictor: str, name: str, measured: int) -> str:
    """Why a metric has no accuracy figure for a predictor."""
    if measured == 0:
        return "the runs do not record it"
    if predictor == SLIM and name != THROUGHPUT and name not in SLIM_SLO_METRICS:
        return "SLIM's equations give the in-batch E2E and the mean TPOT only"
    if predictor == SIM and name != THROUGHPUT and measure_only(SloMetric.parse(name)):
        return "measured only: the tail is made outside the engine step"
    return "no held-out prediction"


def slo_accuracy(table: pd.DataFrame, confidence: float = 0.9, predictors: Sequence[str] = PREDICTORS,
                 metric_names: Sequence[str] = SLO_METRICS) -> pd.DataFrame:
    """Per metric and predictor: runs measured, runs predicted, MAPE (%), the share of runs inside the
    interval (%) and its mean width (upper / lower - 1, %), and why a figure is empty."""
    rows = []
    for name in (THROUGHPUT, *metric_names):
        measured = table[f"measured_{name}"].to_numpy(dtype=float)
        for predictor in predictors:
            predicted = table[f"{predictor}_{name}"].to_numpy(dtype=float)
            low = table[f"{predictor}_{name}_low"].to_numpy(dtype=float)
            high = table[f"{predictor}_{name}_high"].to_numpy(dtype=float)
            both = np.isfinite(measured) & np.isfinite(predicted) & (measured > 0)
            banded = both & np.isfinite(low) & np.isfinite(high)
            rows.append({
                "metric": name, "predictor": predictor, "confidence_pct": 100.0 * confidence,
                "runs_measured": int(np.isfinite(measured).sum()), "runs_predicted": int(both.sum()),
                "mape_pct": (float(100 * np.mean(np.abs(predicted[both] / measured[both] - 1))) if both.any()
                             else math.nan),
                "coverage_pct": (float(100 * np.mean((measured[banded] >= low[banded])
                                                     & (measured[banded] <= high[banded])))
                                 if banded.any() else math.nan),
                "mean_width_pct": float(100 * np.mean(high[banded] / low[banded] - 1)) if banded.any() else math.nan,
                "note": "" if both.any() else why_empty(predictor, name, int(np.isfinite(measured).sum())),
            })
    return pd.DataFrame(rows)


def slo_accuracy_markdown(accuracy: pd.DataFrame, dataset: str) -> str:
    """The accuracy table: one row per metric, per predictor its MAPE and interval coverage."""
    from slim.paper.table_format import to_markdown

    level = f"{accuracy['confidence_pct'].iloc[0]:.0f}%" if len(accuracy) else "90%"
    cells = {}
    for _, row in accuracy.iterrows():
        text = (f"{row['mape_pct']:.1f}% ({row['runs_predicted']} runs; {level} interval covers "
                f"{row['coverage_pct']:.0f}%, width {row['mean_width_pct']:.0f}%)" if row["runs_predicted"]
                else f"-- ({row['note']})")
        cells.setdefault(row["metric"], {})[row["predictor"]] = text
    frame = pd.DataFrame.from_dict(cells, orient="index")
    frame.index.name = "metric"
    return (f"### SLO metrics, each model left out of the calibration: {dataset}\n\n"
            f"Per SLO metric (vLLM's names; `{IN_BATCH_E2E}` is the paper's in-batch E2E), leave one model out: "
            f"MAPE of each predictor calibrated on the other "
            f"models' runs, and how often its cross-conformal {level} interval covers the recorded value "
            f"(`results/<dataset>/slo_predictions.csv`). Throughput and every metric of one run come from one "
            f"simulated run of its configuration under the run's own client.\n\n"
            + to_markdown(frame, index_label="metric") + "\n")
