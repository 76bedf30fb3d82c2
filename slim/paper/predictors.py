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
from slim.model.equations import ABLATIONS, FULL, predict_frame
from slim.paper.heldout import (
    ABLATION_LABELS,
    BAND_CONFIDENCE,
    IMAI,
    LLMVISOR,
    LLMVISOR_WITHOUT_ITL,
    SIM,
    SLIM,
    SLIM_PREDICTED_BATCH,
    _baseline_identifiability,
    _sim_predictions,
    _slim_identifiability,
    _slim_refit,
    conformal_intervals,
    llmvisor_predictions,
    prediction_rows,
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
