"""The held-out predictors, named in one registry: every evaluation and table loops over `PREDICTORS`.

A predictor is fitted on a setting's training runs and predicts its validation runs
(`HeldOutPredictor.evaluate`), writing prediction rows (`slim.paper.heldout.prediction_rows`) and
one identifiability record per label it predicts under. Adding one is one `HeldOutPredictor` and
one line in `PREDICTORS` (or `register` it): the held-out evaluation, Table III and the figures
that list predictors pick it up from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import FitError
from slim.model.equations import ABLATIONS, FULL, predict_frame
from slim.model.metrics import mape_pct
from slim.paper.heldout import (
    ABLATION_LABELS,
    BAND_CONFIDENCE,
    IMAI,
    LLMVISOR,
    LLMVISOR_WITHOUT_ITL,
    SIM,
    SLIM,
    SLIM_PREDICTED_BATCH,
    conformal_intervals,
    llmvisor_predictions,
    prediction_rows,
    range_record,
    records_inter_token_latency,
)
from slim.paper.splits import Split
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware

if TYPE_CHECKING:
    from slim.model.fit import SlimFit
    from slim.sim.schedule_fit import SimCalibration
    from slim.sim.schedules import ScheduleTable


@dataclass
class HeldOutContext:
    """One setting's split and everything a predictor may use; `slim_fits` and `sim_calibration`
    are filled by the predictors that fit them (SLIM before those that use its fit)."""

    setting: str
    split: Split
    catalog: ArchitectureCatalog
    hw: Hardware
    schedules: ScheduleTable | None = None
    slim_fits: dict[str, SlimFit] = field(default_factory=dict)
    sim_calibration: SimCalibration | None = None


@dataclass
class HeldOutPredictions:
    """What one predictor wrote: prediction tables and identifiability records."""

    frames: list[pd.DataFrame] = field(default_factory=list)
    identifiability: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class HeldOutPredictor:
    """A predictor of the held-out evaluation.

    `labels` are the predictor names it writes (a SLIM fit writes its ablations too); `in_table3`
    those Table III shows; `needs_schedules` marks predictors that run only with the simulator's
    cached schedules (real datasets: on simulated data SIM would predict its own output), whose
    labels Table III shows only where they were evaluated.
    """

    labels: tuple[str, ...]
    evaluate: Callable[[HeldOutContext], HeldOutPredictions]
    in_table3: tuple[str, ...] = ()
    needs_schedules: bool = False


def _slim_refit(fit: SlimFit, catalog: ArchitectureCatalog, hw: Hardware, setting: str):
    """SLIM refitted on some training runs (one refinement from `fit`), predicting others at their
    measured mean batch; None where those runs cannot determine its free parameters."""
    from slim.model.fit import fit_slim, start_at

    def fit_predict(train: pd.DataFrame, rows: pd.DataFrame):
        if len(train) < len(fit.free_parameters):
            return None
        try:
            refit = fit_slim(train, catalog, hw, split_name=f"{setting} (one curve left out)",
                             starts=start_at(fit.params), sample_valley=False)
        except FitError:
            return None
        e2e_s, throughput = predict_frame(catalog, hw, refit.params, rows)
        return throughput, e2e_s

    return fit_predict


def _sim_refit(calibration: SimCalibration, schedules: ScheduleTable, catalog: ArchitectureCatalog, hw: Hardware,
               setting: str):
    """SIM recalibrated on some training runs (one refinement from `calibration`), predicting others
    from their configuration; None where the recalibration does not converge."""
    from slim.sim.schedule_costs import prediction_costs
    from slim.sim.schedule_fit import calibrate_on_rows

    start = [[getattr(calibration.constants, name) for name in col.SIM_FITTED_CONSTANTS]]

    def fit_predict(train: pd.DataFrame, rows: pd.DataFrame):
        try:
            refit = calibrate_on_rows(train, schedules, catalog, hw, split_name=f"{setting} (one curve left out)",
                                      starts=start, sample_valley=False)
        except FitError:
            return None
        predicted = prediction_costs(rows, schedules, catalog, hw).predict(refit.constants)
        return predicted.throughput_per_s, predicted.e2e_latency_s

    return fit_predict


def _sim_predictions(setting: str, split: Split, slim_fit: SlimFit, schedules: ScheduleTable,
                     catalog: ArchitectureCatalog,
                     hw: Hardware) -> tuple[SimCalibration, list[pd.DataFrame], list[dict[str, Any]]]:
    """SIM calibrated on the training runs, predicting the validation runs from their
    configurations, and SLIM at SIM's predicted mean batch; with the MAPE ranges over both
    predictors' training-equivalent solutions."""
    from slim.sim.schedule_costs import prediction_costs
    from slim.sim.schedule_fit import calibrate_on_rows

    calibration = calibrate_on_rows(split.train, schedules, catalog, hw, split_name=setting)
    validate = split.validate
    costs = prediction_costs(validate, schedules, catalog, hw)
    predictions = [costs.predict(consts) for consts in (calibration.constants,
                                                        *calibration.identifiability.equivalent)]
    chosen = predictions[0]

    def slim_at(params, batch: np.ndarray) -> dict[str, np.ndarray]:
        rows = validate.assign(**{col.MEAN_BATCH_SIZE: batch})
        e2e_s, throughput = predict_frame(catalog, hw, params, rows, slim_fit.ablation)
        return {col.THROUGHPUT_METRIC.name: throughput, col.E2E_METRIC.name: e2e_s,
                col.MEAN_BATCH_METRIC.name: batch}

    sim_alternatives = [{col.THROUGHPUT_METRIC.name: p.throughput_per_s, col.E2E_METRIC.name: p.e2e_latency_s,
                         col.MEAN_BATCH_METRIC.name: p.mean_batch_size} for p in predictions]
    # SLIM (predicted batch) is open along both fits' valleys: SLIM's equivalent fits at SIM's
    # chosen batch, and SLIM's chosen fit at each equivalent SIM calibration's batch.
    slim_alternatives = ([slim_at(slim_fit.params, chosen.mean_batch_size)]
                         + [slim_at(params, chosen.mean_batch_size)
                            for params in slim_fit.identifiability.equivalent]
                         + [slim_at(slim_fit.params, p.mean_batch_size) for p in predictions[1:]])
    frames, records = [], []
    unidentified = {SIM: calibration.identifiability.describe(),
                    SLIM_PREDICTED_BATCH: (f"SLIM: {slim_fit.identifiability.describe()}; "
                                           f"SIM: {calibration.identifiability.describe()}")}
    for predictor, alternatives in ((SIM, sim_alternatives), (SLIM_PREDICTED_BATCH, slim_alternatives)):
        first = alternatives[0]
        conformal = (conformal_intervals(split, _sim_refit(calibration, schedules, catalog, hw, setting),
                                         first[col.THROUGHPUT_METRIC.name], first[col.E2E_METRIC.name])
                     if predictor == SIM else None)
        frames.append(prediction_rows(setting, predictor, validate, "validate", first[col.THROUGHPUT_METRIC.name],
                                      first[col.E2E_METRIC.name], first[col.MEAN_BATCH_METRIC.name],
                                      conformal=conformal))
        records.append(range_record(setting, predictor, validate, alternatives, unidentified[predictor]))
    return calibration, frames, records


def _slim_identifiability(setting: str, predictor: str, fit: SlimFit, validate: pd.DataFrame,
                          catalog: ArchitectureCatalog, hw: Hardware) -> dict[str, Any]:
    """The validation MAPEs' range over the fit and its training-equivalent solutions."""
    alternatives = []
    for params in (fit.params, *fit.identifiability.equivalent):
        e2e_s, throughput = predict_frame(catalog, hw, params, validate, fit.ablation)
        alternatives.append({col.THROUGHPUT_METRIC.name: throughput, col.E2E_METRIC.name: e2e_s})
    return range_record(setting, predictor, validate, alternatives, fit.identifiability.describe())


def _baseline_identifiability(setting: str, predictor: str, predictions: pd.DataFrame,
                              determined: np.ndarray, not_fitted: str | None = None) -> dict[str, Any]:
    """A linear baseline's verdict: its range is its MAPE where the training data determine
    every validation prediction, and unknown (NaN) where its minimal-norm choice decides or
    the baseline could not be fitted at all (`not_fitted`, the reason)."""
    all_determined = bool(np.all(determined))
    undetermined = int(np.size(determined) - np.count_nonzero(determined))
    record: dict[str, Any] = {
        col.SETTING: setting, col.PREDICTOR: predictor, col.VALIDATION_DETERMINED: all_determined,
        col.UNIDENTIFIED: (not_fitted if not_fitted else "identified" if all_determined else
                           f"{undetermined} of {np.size(determined)} validation predictions not determined by "
                           "the training data (minimal-norm fit)"),
        col.N_EQUIVALENT_SOLUTIONS: 0,
    }
    for metric in col.PREDICTION_METRICS:
        value = mape_pct(predictions[metric.predicted], predictions[metric.measured]) if all_determined else np.nan
        record[metric.mape_low] = value
        record[metric.mape_high] = value
    record[col.MEAN_BATCH_METRIC.mape_low] = record[col.MEAN_BATCH_METRIC.mape_high] = np.nan
    return record


def _evaluate_slim(context: HeldOutContext) -> HeldOutPredictions:
    """SLIM (full and each ablation) at the validation runs' measured mean batch, with its curve
    band, and for the full fit the training rows and the conformal interval."""
    from slim.model.fit import fit_slim
    from slim.model.uncertainty import prediction_band_frame

    out, split, catalog, hw = HeldOutPredictions(), context.split, context.catalog, context.hw
    for ablation_name, ablation in ABLATIONS.items():
        fit = fit_slim(split.train, catalog, hw, ablation=ablation, split_name=context.setting)
        context.slim_fits[ablation_name] = fit
        predictor = SLIM if ablation == FULL else ABLATION_LABELS[ablation_name]
        roles = [("validate", split.validate)] + ([("train", split.train)] if ablation == FULL else [])
        for role, rows in roles:
            e2e_s, throughput = predict_frame(catalog, hw, fit.params, rows, ablation)
            band = prediction_band_frame(fit, catalog, hw, rows, BAND_CONFIDENCE, kind="curve")
            conformal = (conformal_intervals(split, _slim_refit(fit, catalog, hw, context.setting), throughput, e2e_s)
                         if ablation == FULL and role == "validate" else None)
            out.frames.append(prediction_rows(context.setting, predictor, rows, role, throughput, e2e_s,
                                              e2e_band_s=(band.e2e_low_s, band.e2e_high_s), conformal=conformal))
        out.identifiability.append(_slim_identifiability(context.setting, predictor, fit, split.validate, catalog, hw))
    return out


def _baseline_features(context: HeldOutContext) -> tuple[pd.DataFrame, pd.DataFrame]:
    from baselines.features import add_architecture_columns

    return (add_architecture_columns(context.split.train, context.catalog),
            add_architecture_columns(context.split.validate, context.catalog))


def _evaluate_llmvisor(context: HeldOutContext) -> HeldOutPredictions:
    """LLMVisor-Agg (`slim.paper.heldout.llmvisor_predictions`); without inter-token latencies in
    the training runs (offline static batches), NaN predictions and the reason."""
    out, validate = HeldOutPredictions(), context.split.validate
    if records_inter_token_latency(context.split.train):
        throughput, e2e_s, determined = llmvisor_predictions(*_baseline_features(context))
        out.frames.append(prediction_rows(context.setting, LLMVISOR, validate, "validate", throughput, e2e_s))
        out.identifiability.append(_baseline_identifiability(context.setting, LLMVISOR, out.frames[-1], determined))
    else:
        nothing = np.full(len(validate), np.nan)
        out.frames.append(prediction_rows(context.setting, LLMVISOR, validate, "validate", nothing, nothing))
        out.identifiability.append(_baseline_identifiability(context.setting, LLMVISOR, out.frames[-1],
                                                             np.zeros(len(validate), dtype=bool),
                                                             LLMVISOR_WITHOUT_ITL))
    return out


def _evaluate_imai(context: HeldOutContext) -> HeldOutPredictions:
    """IMAI OOD-LR (`baselines.variants.MAIN_IMAI`) with statsmodels' band of the fitted line."""
    from sklearn.base import clone

    from baselines.variants import MAIN_IMAI

    train_x, validate_x = _baseline_features(context)
    imai = clone(MAIN_IMAI).fit(train_x, train_x[col.E2E_LATENCY_S].to_numpy())
    out = HeldOutPredictions([prediction_rows(context.setting, IMAI, context.split.validate, "validate",
                                              imai.predict_throughput(validate_x), imai.predict(validate_x),
                                              e2e_band_s=imai.predict_band(validate_x, BAND_CONFIDENCE))])
    out.identifiability.append(_baseline_identifiability(context.setting, IMAI, out.frames[-1],
                                                         imai.prediction_determined(validate_x)))
    return out


def _evaluate_sim(context: HeldOutContext) -> HeldOutPredictions:
    """SIM calibrated on the training runs, and SLIM at SIM's predicted mean batch."""
    calibration, frames, records = _sim_predictions(context.setting, context.split, context.slim_fits["full"],
                                                    context.schedules, context.catalog, context.hw)
    context.sim_calibration = calibration
    return HeldOutPredictions(frames, records)


PREDICTORS: list[HeldOutPredictor] = [
    HeldOutPredictor((SLIM, *ABLATION_LABELS.values()), _evaluate_slim, in_table3=(SLIM,)),
    HeldOutPredictor((LLMVISOR,), _evaluate_llmvisor, in_table3=(LLMVISOR,)),
    HeldOutPredictor((IMAI,), _evaluate_imai, in_table3=(IMAI,)),
    HeldOutPredictor((SIM, SLIM_PREDICTED_BATCH), _evaluate_sim, in_table3=(SIM, SLIM_PREDICTED_BATCH),
                     needs_schedules=True),
]
"""Every held-out predictor, in the order of the evaluation's rows and of Table III's columns."""


def register(predictor: HeldOutPredictor) -> None:
    """Add a predictor to the held-out evaluation and, with `in_table3`, to Table III."""
    PREDICTORS.append(predictor)


def table3_labels(present: set[str]) -> tuple[str, ...]:
    """Table III's predictors, in registry order: every one that runs on every dataset, and those
    that need the simulator's schedules where they were evaluated (`present`)."""
    return tuple(label for predictor in PREDICTORS for label in predictor.in_table3
                 if not predictor.needs_schedules or label in present)
