"""Fit every predictor on a held-out setting's training rows and predict its validation rows.

Predictors: SLIM (full and its two ablations) and the two regression baselines,
LLMVisor-Agg and IMAI OOD-LR. All are judged on the same measured quantities:
total-token throughput and the Little's-law E2E latency of each validation run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from slim import columns as col
from slim.model.equations import ABLATIONS, FULL, predict_frame
from slim.model.fit import SlimFit, fit_slim
from slim.model.metrics import mape_pct
from slim.paper.splits import HeldOutSetting, split_setting
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware

SLIM = "SLIM"
LLMVISOR = "LLMVisor-Agg"
IMAI = "IMAI OOD-LR"
MAIN_PREDICTORS = (SLIM, LLMVISOR, IMAI)
ABLATION_LABELS = {"no_kv_scan": "SLIM w/o KV scan", "no_dense_decode": "SLIM w/o dense decode"}

PREDICTION_DETERMINED_TOLERANCE = 1e-3
"""Relative change of a validation prediction across the training-equivalent SLIM fits up
to which the training data count as determining it (0.1%, far below run-to-run noise;
the equivalent fits themselves differ by up to about 3e-5 on the training rows)."""


@dataclass(frozen=True)
class SettingEvaluation:
    """Predictions of every predictor on one setting, the SLIM fits behind them, and what
    the training data leave undecided (`identifiability`, columns
    `columns.IDENTIFIABILITY_COLUMNS`, one row per predictor)."""

    predictions: pd.DataFrame
    slim_fits: dict[str, SlimFit]
    identifiability: pd.DataFrame

    def fits_as_dict(self) -> dict[str, Any]:
        return {name: fit.to_dict() for name, fit in self.slim_fits.items()}


def prediction_rows(setting: str, predictor: str, rows: pd.DataFrame, role: str,
                     throughput: np.ndarray, e2e_s: np.ndarray) -> pd.DataFrame:
    frame = rows[[col.RUN_ID, col.MODEL, col.MAX_NUM_SEQS, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN,
                  col.OUTPUT_LEN_NOMINAL, col.MEAN_BATCH_SIZE]].copy()
    frame.insert(0, col.PREDICTOR, predictor)
    frame.insert(0, col.SETTING, setting)
    frame[col.MEASURED_THROUGHPUT] = rows[col.TOTAL_TOKEN_THROUGHPUT].to_numpy()
    frame[col.PREDICTED_THROUGHPUT] = throughput
    frame[col.MEASURED_E2E_S] = rows[col.E2E_LATENCY_S].to_numpy()
    frame[col.PREDICTED_E2E_S] = e2e_s
    frame[col.ROLE] = role
    return frame[list(col.PREDICTION_COLUMNS)]


def evaluate_setting(clean: pd.DataFrame, setting: HeldOutSetting, catalog: ArchitectureCatalog,
                     hw: Hardware) -> SettingEvaluation:
    """Fit SLIM (full + ablations) and both baselines on the setting's training rows.

    Returns predictions for the validation rows (role ``validate``) and, for SLIM,
    for the training rows too (role ``train``, used by the figures).
    """
    # The baselines (scikit-learn estimators) are imported here, not at the top: importing
    # scikit-learn costs about 1 s, which every table and figure job importing this module for
    # `mape_table` or the predictor names would pay without fitting anything.
    from baselines import ImaiOodLr
    from baselines.features import add_architecture_columns

    frames, fits, identifiability = [], {}, []
    split = split_setting(clean, setting)
    for ablation_name, ablation in ABLATIONS.items():
        fit = fit_slim(split.train, catalog, hw, ablation=ablation, split_name=setting.name)
        fits[ablation_name] = fit
        predictor = SLIM if ablation == FULL else ABLATION_LABELS[ablation_name]
        roles = [("validate", split.validate)] + ([("train", split.train)] if ablation == FULL else [])
        for role, rows in roles:
            e2e_s, throughput = predict_frame(catalog, hw, fit.params, rows, ablation)
            frames.append(prediction_rows(setting.name, predictor, rows, role, throughput, e2e_s))
        identifiability.append(_slim_identifiability(setting.name, predictor, fit, split.validate, catalog, hw))
    train_x = add_architecture_columns(split.train, catalog)
    validate_x = add_architecture_columns(split.validate, catalog)
    llmvisor_throughput, llmvisor_e2e_s, llmvisor_determined = _llmvisor_predictions(train_x, validate_x)
    frames.append(prediction_rows(setting.name, LLMVISOR, split.validate, "validate",
                                   llmvisor_throughput, llmvisor_e2e_s))
    identifiability.append(_baseline_identifiability(setting.name, LLMVISOR, frames[-1], llmvisor_determined))
    imai = ImaiOodLr().fit(train_x, train_x[col.E2E_LATENCY_S].to_numpy())
    frames.append(prediction_rows(setting.name, IMAI, split.validate, "validate",
                                   imai.predict_throughput(validate_x), imai.predict(validate_x)))
    identifiability.append(_baseline_identifiability(setting.name, IMAI, frames[-1],
                                                     imai.prediction_determined(validate_x)))
    return SettingEvaluation(pd.concat(frames, ignore_index=True), fits,
                             pd.DataFrame.from_records(identifiability, columns=list(col.IDENTIFIABILITY_COLUMNS)))


def _slim_identifiability(setting: str, predictor: str, fit: SlimFit, validate: pd.DataFrame,
                          catalog: ArchitectureCatalog, hw: Hardware) -> dict[str, Any]:
    """The validation MAPEs' range over the fit and its training-equivalent solutions."""
    measured = {col.THROUGHPUT_METRIC.name: validate[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float),
                col.E2E_METRIC.name: validate[col.E2E_LATENCY_S].to_numpy(dtype=float)}
    mapes = {metric.name: [] for metric in col.PREDICTION_METRICS}
    largest_change = 0.0
    reference = None
    for params in (fit.params, *fit.identifiability.equivalent_params):
        e2e_s, throughput = predict_frame(catalog, hw, params, validate, fit.ablation)
        predicted = {col.THROUGHPUT_METRIC.name: throughput, col.E2E_METRIC.name: e2e_s}
        reference = throughput if reference is None else reference
        largest_change = max(largest_change, float(np.max(np.abs(throughput / reference - 1.0))))
        for metric in col.PREDICTION_METRICS:
            mapes[metric.name].append(mape_pct(predicted[metric.name], measured[metric.name]))
    record: dict[str, Any] = {
        col.SETTING: setting, col.PREDICTOR: predictor,
        col.VALIDATION_DETERMINED: largest_change <= PREDICTION_DETERMINED_TOLERANCE,
        col.UNIDENTIFIED: fit.identifiability.describe(),
        col.N_EQUIVALENT_SOLUTIONS: len(fit.identifiability.equivalent_params),
    }
    for metric in col.PREDICTION_METRICS:
        record[metric.mape_low] = min(mapes[metric.name])
        record[metric.mape_high] = max(mapes[metric.name])
    return record


def _baseline_identifiability(setting: str, predictor: str, predictions: pd.DataFrame,
                              determined: np.ndarray) -> dict[str, Any]:
    """A linear baseline's verdict: its range is its MAPE where the training data determine
    every validation prediction, and unknown (NaN) where its minimal-norm choice decides."""
    all_determined = bool(np.all(determined))
    undetermined = int(np.size(determined) - np.count_nonzero(determined))
    record: dict[str, Any] = {
        col.SETTING: setting, col.PREDICTOR: predictor, col.VALIDATION_DETERMINED: all_determined,
        col.UNIDENTIFIED: ("identified" if all_determined else
                           f"{undetermined} of {np.size(determined)} validation predictions not determined by "
                           "the training data (minimal-norm fit)"),
        col.N_EQUIVALENT_SOLUTIONS: 0,
    }
    for metric in col.PREDICTION_METRICS:
        value = mape_pct(predictions[metric.predicted], predictions[metric.measured]) if all_determined else np.nan
        record[metric.mape_low] = value
        record[metric.mape_high] = value
    return record


def _llmvisor_predictions(train_x: pd.DataFrame,
                          validate_x: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LLMVisor-Agg's (throughput, E2E, prediction determined) for the validation rows.

    LLMVisor profiles one deployment: its features are token counts only, with
    no model characteristics. Where every validation model was profiled (the
    same-curve setting) it is therefore fitted per model, as its authors use it;
    pooling models would let the small input-length difference between
    tokenizers stand in for model identity and extrapolate wildly. Where the
    validation model is unseen (the model transfers) it can only be fitted on
    the pooled training rows.

    Coefficients are constrained non-negative: LLMVisor's terms are per-token
    and per-sequence costs. Unconstrained, a decode function fitted on
    B in {1, 4, 8} extrapolates to negative ITL at B = 512 (a third of the
    same-curve predictions were non-positive on the public traces).
    """
    from baselines import LLMVisorAgg  # see evaluate_setting

    per_model = set(validate_x[col.MODEL]) <= set(train_x[col.MODEL])
    groups = validate_x.groupby(col.MODEL, sort=False) if per_model else [(None, validate_x)]
    throughput = pd.Series(np.nan, index=validate_x.index)
    e2e_s = pd.Series(np.nan, index=validate_x.index)
    determined = pd.Series(False, index=validate_x.index)
    for model, validate_rows in groups:
        train_rows = train_x[train_x[col.MODEL] == model] if per_model else train_x
        estimator = LLMVisorAgg(nonnegative=True).fit(train_rows, train_rows[col.E2E_LATENCY_S].to_numpy())
        throughput[validate_rows.index] = estimator.predict_throughput(validate_rows)
        e2e_s[validate_rows.index] = estimator.predict(validate_rows)
        determined[validate_rows.index] = estimator.prediction_determined(validate_rows)
    return throughput.to_numpy(), e2e_s.to_numpy(), determined.to_numpy()


def mape_table(predictions: pd.DataFrame, identifiability: pd.DataFrame | None = None) -> pd.DataFrame:
    """MAPE (%) of throughput and E2E per setting and predictor, over the validation rows.

    With `identifiability` (`SettingEvaluation.identifiability` of the same settings), its
    columns are joined on (setting, predictor): the table of `table3.csv`.
    """
    validation = predictions[predictions[col.ROLE] == "validate"]
    records = []
    for (setting, predictor), rows in validation.groupby([col.SETTING, col.PREDICTOR], sort=False):
        records.append({
            col.SETTING: setting, col.PREDICTOR: predictor, col.N_VALIDATION: len(rows),
            **{metric.mape: mape_pct(rows[metric.predicted], rows[metric.measured])
               for metric in col.PREDICTION_METRICS},
        })
    mapes = pd.DataFrame.from_records(records, columns=list(col.MAPE_COLUMNS))
    if identifiability is None:
        return mapes
    return mapes.merge(identifiability, on=[col.SETTING, col.PREDICTOR], how="left", validate="one_to_one")


def applicable_setting_names(settings: list[HeldOutSetting]) -> list[str]:
    return [setting.name for setting in settings if setting.applicable]


def average_mape_reduction_pct(mapes: pd.DataFrame, settings: list[str]) -> float:
    """Headline (paper Section VI-F: 79.3% over Table III): mean over the two baselines and two metrics of
    ``1 - mean_SLIM / mean_baseline``, each mean taken over the applicable settings, in %."""
    chosen = mapes[mapes[col.SETTING].isin(settings)]
    reductions = []
    for metric in col.PREDICTION_METRICS:
        slim_mean = chosen.loc[chosen[col.PREDICTOR] == SLIM, metric.mape].mean()
        for baseline in (LLMVISOR, IMAI):
            reductions.append(1.0 - slim_mean / chosen.loc[chosen[col.PREDICTOR] == baseline, metric.mape].mean())
    return 100.0 * float(np.mean(reductions))
