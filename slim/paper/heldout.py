"""Fit every predictor on a held-out setting's training rows and predict its validation rows.

Predictors: SLIM (full and its two ablations) and the two regression baselines,
LLMVisor-Agg and IMAI OOD-LR, which all take each validation run's *measured* mean batch
as an input; and, given the cached simulator schedules of a real dataset, SIM (the
calibrated simulator, `slim.sim`, calibrated on the training runs only and predicting each
validation run from its configuration alone: model, IL, OL, ``--max-num-seqs``, prompts)
and "SLIM (predicted batch)", SLIM fed with SIM's predicted mean batch instead of the
measured one, as a user without the run would have to. All are judged on the same measured
quantities: total-token throughput and the Little's-law E2E latency of each validation run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.model.metrics import mape_pct
from slim.paper.splits import HeldOutSetting, Split, select_rows, split_setting

# Light: each registered predictor imports its fitting code (scikit-learn, SciPy's optimiser and
# scipy.stats, about 2 CPU-s) only when it fits, which table and figure jobs never do.
from slim.predictors import IMAI, LLMVISOR, REGISTRY, SIM, SLIM, SLIM_PREDICTED_BATCH, TrainingRuns
from slim.predictors.contract import throughput_band_from_e2e
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware

if TYPE_CHECKING:
    from slim.model.calibration import CalibrationResult
    from slim.predictors import FittedPredictor, RegisteredPredictor
    from slim.predictors.contract import Prediction
    from slim.sim.schedules import ScheduleTable

MAIN_PREDICTORS = (SLIM, LLMVISOR, IMAI)
SIM_PREDICTORS = (SIM, SLIM_PREDICTED_BATCH)
"""Predictors that need the simulator's cached schedules (real datasets only: on simulated
data SIM would predict its own output)."""

BAND_CONFIDENCE = 0.9
NO_RUNS_NOTE = "n/a: no such runs in this dataset"
_IDENTIFIABILITY_DTYPES = {col.SETTING: "str", col.PREDICTOR: "str", col.VALIDATION_DETERMINED: "bool",
                           col.UNIDENTIFIED: "str", col.N_EQUIVALENT_SOLUTIONS: "int64"}
"""The types of the identifiability table's columns that are not floats (an empty table keeps them)."""
"""Confidence of the prediction bands in the prediction tables (Figs. 9 and 10): two-sided,
``kind="curve"`` (the uncertainty of the predicted curve, `slim.model.uncertainty`) for SLIM
and its ablations, statsmodels' band of the fitted line (``obs=False``) for IMAI OOD-LR."""

PREDICTION_DETERMINED_TOLERANCE = 1e-3
"""Relative change of a validation prediction across the training-equivalent SLIM fits up
to which the training data count as determining it (0.1%, far below run-to-run noise;
the equivalent fits themselves differ by up to about 3e-5 on the training rows)."""


@dataclass(frozen=True)
class SettingEvaluation:
    """Predictions of every predictor on one setting, the calibrations behind them (by their
    registry `fit_key`: ``full``, ``no_kv_scan``, ``no_dense_decode``, ``sim``), and what the
    training data leave undecided (`identifiability`, columns `columns.IDENTIFIABILITY_COLUMNS`,
    one row per predictor)."""

    predictions: pd.DataFrame
    calibrations: dict[str, CalibrationResult]
    identifiability: pd.DataFrame
    no_runs: str | None = None
    """Why nothing was fitted (`missing_runs_note`), or None."""

    def fits_as_dict(self) -> dict[str, Any]:
        """Each calibration's `to_dict` by its key; where the dataset has no runs for the setting,
        the reason (key ``no_runs``)."""
        if self.no_runs is not None:
            return {"no_runs": self.no_runs}
        return {key: calibration.to_dict() for key, calibration in self.calibrations.items()}


def missing_runs_note(clean: pd.DataFrame, setting: HeldOutSetting) -> str | None:
    """`NO_RUNS_NOTE` naming the empty part where the setting's training or validation selector
    matches no run of this dataset (an accelerator without TP 2 runs, say); None otherwise."""
    empty = [part for part, selector in (("training", setting.train), ("validation", setting.validate))
             if setting.applicable and select_rows(clean, selector).empty]
    return f"{NO_RUNS_NOTE} (the {' and '.join(empty)} selector matches none)" if empty else None


def with_no_runs_noted(settings: list[HeldOutSetting], predictions: pd.DataFrame) -> list[HeldOutSetting]:
    """The settings, those applicable ones the predictions hold no row of (the dataset has no such
    runs: `missing_runs_note`) marked not applicable with `NO_RUNS_NOTE`."""
    present = set(predictions[col.SETTING])
    return [replace(s, not_applicable=NO_RUNS_NOTE) if s.applicable and s.name not in present else s
            for s in settings]


def prediction_rows(setting: str, predictor: str, rows: pd.DataFrame, role: str,
                     throughput: np.ndarray, e2e_s: np.ndarray,
                     predicted_batch: np.ndarray | None = None,
                     e2e_band_s: tuple[np.ndarray, np.ndarray] | None = None,
                     conformal: dict[str, np.ndarray] | None = None) -> pd.DataFrame:
    """One prediction table (`columns.PREDICTION_COLUMNS`) for `rows`; `e2e_band_s` is the
    ``(low, high)`` E2E band (NaN columns without one), the throughput band follows by Eq. 6
    (``T = B (IL + OL) / E2E``: the low E2E gives the high throughput; NaN where that E2E is <= 0);
    `conformal` maps the conformal interval's columns to their values (`conformal_intervals`)."""
    frame = rows[[col.RUN_ID, col.MODEL, col.MAX_NUM_SEQS, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN,
                  col.OUTPUT_LEN_NOMINAL, col.MEAN_BATCH_SIZE]].copy()
    frame.insert(0, col.PREDICTOR, predictor)
    frame.insert(0, col.SETTING, setting)
    frame[col.PREDICTED_MEAN_BATCH_SIZE] = np.nan if predicted_batch is None else predicted_batch
    frame[col.MEASURED_THROUGHPUT] = rows[col.TOTAL_TOKEN_THROUGHPUT].to_numpy()
    frame[col.PREDICTED_THROUGHPUT] = throughput
    frame[col.MEASURED_E2E_S] = rows[col.E2E_LATENCY_S].to_numpy()
    frame[col.PREDICTED_E2E_S] = e2e_s
    frame[col.ROLE] = role
    low_s, high_s = (np.full(len(rows), np.nan),) * 2 if e2e_band_s is None else e2e_band_s
    frame[col.PREDICTED_THROUGHPUT_LOW], frame[col.PREDICTED_THROUGHPUT_HIGH] = throughput_band_from_e2e(
        rows, low_s, high_s)
    frame[col.PREDICTED_E2E_LOW_S] = low_s
    frame[col.PREDICTED_E2E_HIGH_S] = high_s
    for metric in col.PREDICTION_METRICS:
        for name in (metric.conformal_low, metric.conformal_high):
            frame[name] = np.nan if conformal is None else conformal[name]
    return frame[list(col.PREDICTION_COLUMNS)]


def conformal_intervals(split: Split, fit_predict, throughput: np.ndarray, e2e_s: np.ndarray) -> dict[str, np.ndarray]:
    """The conformal interval at `BAND_CONFIDENCE` of the validation predictions `throughput` and
    `e2e_s`, from the predictor's scores on the training runs: each curve left out, and each step of
    the setting's own extrapolation (`slim.model.conformal`)."""
    from slim.model.conformal import conformal_bounds, curve_folds, extrapolation_folds, fold_scores

    folds = curve_folds(split.train) + extrapolation_folds(split.train, split.validate)
    throughput_scores, e2e_scores = fold_scores(folds, fit_predict)
    t_low, t_high = conformal_bounds(throughput, throughput_scores, BAND_CONFIDENCE)
    e_low, e_high = conformal_bounds(e2e_s, e2e_scores, BAND_CONFIDENCE)
    return {col.PREDICTED_THROUGHPUT_CONFORMAL_LOW: t_low, col.PREDICTED_THROUGHPUT_CONFORMAL_HIGH: t_high,
            col.PREDICTED_E2E_CONFORMAL_LOW_S: e_low, col.PREDICTED_E2E_CONFORMAL_HIGH_S: e_high}


def evaluate_setting(clean: pd.DataFrame, setting: HeldOutSetting, catalog: ArchitectureCatalog,
                     hw: Hardware, sim_schedules: ScheduleTable | None = None) -> SettingEvaluation:
    """Fit every registered predictor (`slim.predictors.REGISTRY`: SLIM with its ablations, both
    baselines and, with `sim_schedules`, the cached simulator schedules of every run of `clean`,
    SIM and "SLIM (predicted batch)") on the setting's training rows.

    Returns predictions for the validation rows (role ``validate``) and, for the predictors that
    ask for it (SLIM), for the training rows too (role ``train``, used by the figures).
    """
    missing = missing_runs_note(clean, setting)
    if missing is not None:   # this dataset has no such runs: an empty evaluation, Table III says n/a
        nothing = np.zeros(0)
        identified = pd.DataFrame({name: pd.Series(dtype=_IDENTIFIABILITY_DTYPES.get(name, "float64"))
                                   for name in col.IDENTIFIABILITY_COLUMNS})
        return SettingEvaluation(prediction_rows(setting.name, SLIM, clean.iloc[:0], "validate", nothing, nothing),
                                 {}, identified, missing)
    split = split_setting(clean, setting)
    training = TrainingRuns(split.train, catalog, hw, sim_schedules, setting.name)
    frames, identifiability, calibrations = [], [], {}
    for entry in REGISTRY:
        if entry.needs_schedules and sim_schedules is None:
            continue
        entry_frames, record = evaluate_predictor(entry, training, split, setting.name)
        frames += entry_frames
        identifiability.append(record)
        calibration = training.fits[entry.name].calibration
        if entry.fit_key is not None and calibration is not None:
            calibrations[entry.fit_key] = calibration
    return SettingEvaluation(pd.concat(frames, ignore_index=True), calibrations,
                             pd.DataFrame.from_records(identifiability, columns=list(col.IDENTIFIABILITY_COLUMNS)))


def evaluate_predictor(entry: RegisteredPredictor, training: TrainingRuns, split: Split,
                       setting: str) -> tuple[list[pd.DataFrame], dict[str, Any]]:
    """One registered predictor fitted on the split's training runs (`training`): its prediction
    tables (validation runs, and training runs where it asks for them; bands at
    `BAND_CONFIDENCE`, the conformal interval where it asks for one) and its identifiability
    record on the validation runs."""
    fitted = training.fitted(entry.predictor)
    roles = [("validate", split.validate)] + ([("train", split.train)] if entry.predicts_training_rows else [])
    frames, record = [], {}
    for role, rows in roles:
        prediction = fitted.predict(rows, BAND_CONFIDENCE)
        conformal = None
        if entry.conformal and role == "validate":
            conformal = conformal_intervals(split, _refit_predict(fitted, training, setting),
                                            prediction.throughput_per_s, prediction.e2e_latency_s)
        band = None if prediction.e2e_interval is None else (prediction.e2e_interval.low, prediction.e2e_interval.high)
        frames.append(prediction_rows(setting, entry.name, rows, role, prediction.throughput_per_s,
                                      prediction.e2e_latency_s, prediction.mean_batch, e2e_band_s=band,
                                      conformal=conformal))
        if role == "validate":
            record = identifiability_record(setting, entry.name, rows, prediction)
    return frames, record


def _refit_predict(fitted: FittedPredictor, training: TrainingRuns,
                   setting: str) -> Callable[[pd.DataFrame, pd.DataFrame], tuple[np.ndarray, np.ndarray] | None]:
    """``(train, rows) -> (throughput, E2E)`` of `fitted` refitted on `train` (one refinement from
    it), or None where those runs cannot determine it: a conformal fold's predictor."""

    def fit_predict(train: pd.DataFrame, rows: pd.DataFrame):
        refit = fitted.refit(training.with_runs(train, f"{setting} (one curve left out)"))
        if refit is None:
            return None
        prediction = refit.predict(rows)
        return prediction.throughput_per_s, prediction.e2e_latency_s

    return fit_predict


def identifiability_record(setting: str, predictor: str, validate: pd.DataFrame,
                           prediction: Prediction) -> dict[str, Any]:
    """What the training data leave undecided about a prediction of the validation runs: the range
    of every MAPE over the training-equivalent fits (`range_record`) or, for a predictor without
    such fits (a linear baseline), its MAPE where the data determine every prediction
    (`baseline_record`)."""
    if prediction.alternatives:
        return range_record(setting, predictor, validate, list(prediction.alternatives), prediction.unidentified)
    return baseline_record(setting, predictor, validate, prediction)


def baseline_record(setting: str, predictor: str, validate: pd.DataFrame, prediction: Prediction) -> dict[str, Any]:
    """A linear baseline's verdict: its range is its MAPE where the training data determine
    every validation prediction, and unknown (NaN) where its minimal-norm choice decides or
    the baseline could not be fitted at all (`Prediction.not_fitted`, the reason)."""
    determined = np.zeros(len(validate), dtype=bool) if prediction.determined is None else prediction.determined
    all_determined = bool(np.all(determined))
    undetermined = int(np.size(determined) - np.count_nonzero(determined))
    record: dict[str, Any] = {
        col.SETTING: setting, col.PREDICTOR: predictor, col.VALIDATION_DETERMINED: all_determined,
        col.UNIDENTIFIED: (prediction.not_fitted if prediction.not_fitted else "identified" if all_determined else
                           f"{undetermined} of {np.size(determined)} validation predictions not determined by "
                           "the training data (minimal-norm fit)"),
        col.N_EQUIVALENT_SOLUTIONS: 0,
    }
    predicted = {col.THROUGHPUT_METRIC.name: prediction.throughput_per_s, col.E2E_METRIC.name: prediction.e2e_latency_s}
    measured = {col.THROUGHPUT_METRIC.name: validate[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(),
                col.E2E_METRIC.name: validate[col.E2E_LATENCY_S].to_numpy()}
    for metric in col.PREDICTION_METRICS:
        value = mape_pct(predicted[metric.name], measured[metric.name]) if all_determined else np.nan
        record[metric.mape_low] = value
        record[metric.mape_high] = value
    record[col.MEAN_BATCH_METRIC.mape_low] = record[col.MEAN_BATCH_METRIC.mape_high] = np.nan
    return record


def evaluate_settings(clean: pd.DataFrame, settings: Sequence[HeldOutSetting], catalog: ArchitectureCatalog,
                      hw: Hardware, sim_schedules: ScheduleTable | None = None) -> list[SettingEvaluation]:
    """`evaluate_setting` of each of `settings`, in order (one process fits them all: the
    workflow evaluates a dataset in one job)."""
    return [evaluate_setting(clean, setting, catalog, hw, sim_schedules) for setting in settings]


def range_record(setting: str, predictor: str, validate: pd.DataFrame, alternatives: list[dict[str, np.ndarray]],
                  unidentified: str) -> dict[str, Any]:
    """Identifiability of a predictor from its chosen predictions (first) and those of its
    training-equivalent alternatives: every MAPE's range, and whether the training data
    determine the validation throughputs (to `PREDICTION_DETERMINED_TOLERANCE`)."""
    measured = {col.THROUGHPUT_METRIC.name: validate[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float),
                col.E2E_METRIC.name: validate[col.E2E_LATENCY_S].to_numpy(dtype=float),
                col.MEAN_BATCH_METRIC.name: validate[col.MEAN_BATCH_SIZE].to_numpy(dtype=float)}
    reference = alternatives[0][col.THROUGHPUT_METRIC.name]
    largest_change = max(float(np.max(np.abs(a[col.THROUGHPUT_METRIC.name] / reference - 1.0)))
                         for a in alternatives)
    record: dict[str, Any] = {
        col.SETTING: setting, col.PREDICTOR: predictor,
        col.VALIDATION_DETERMINED: largest_change <= PREDICTION_DETERMINED_TOLERANCE,
        col.UNIDENTIFIED: unidentified, col.N_EQUIVALENT_SOLUTIONS: len(alternatives) - 1,
    }
    for metric in col.MAPE_METRICS:
        if metric.name in alternatives[0]:
            values = [mape_pct(a[metric.name], measured[metric.name]) for a in alternatives]
            record[metric.mape_low], record[metric.mape_high] = min(values), max(values)
        else:   # a metric the predictor takes as an input
            record[metric.mape_low] = record[metric.mape_high] = np.nan
    return record


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
            **{metric.mape: _mape_or_nan(rows[metric.predicted], rows[metric.measured])
               for metric in col.MAPE_METRICS},
            **{metric.coverage: _coverage_pct(rows, metric) for metric in col.PREDICTION_METRICS},
        })
    mapes = pd.DataFrame.from_records(records, columns=list(col.MAPE_COLUMNS))
    if identifiability is None:
        return mapes
    return mapes.merge(identifiability, on=[col.SETTING, col.PREDICTOR], how="left", validate="one_to_one")


def _coverage_pct(rows: pd.DataFrame, metric: col.PredictionMetric) -> float:
    """Share (%) of the runs whose measurement lies in their conformal interval; NaN without one."""
    low, high = rows[metric.conformal_low].to_numpy(dtype=float), rows[metric.conformal_high].to_numpy(dtype=float)
    known = np.isfinite(low) & np.isfinite(high)
    if not known.any():
        return np.nan
    measured = rows[metric.measured].to_numpy(dtype=float)[known]
    return 100.0 * float(np.mean((low[known] <= measured) & (measured <= high[known])))


def _mape_or_nan(predicted: pd.Series, measured: pd.Series) -> float:
    """MAPE, or NaN where the predictor predicts nothing (the mean batch of SLIM and the baselines)."""
    return np.nan if predicted.isna().all() else mape_pct(predicted, measured)


def applicable_setting_names(settings: list[HeldOutSetting]) -> list[str]:
    return [setting.name for setting in settings if setting.applicable]


def reduction_from_means(slim: np.ndarray, baselines: np.ndarray) -> np.ndarray:
    """Section VI-F's headline from setting-averaged MAPEs: ``100 mean_(b, m) (1 - slim_m /
    baseline_(b, m))``; `slim` has shape (metrics, ...), `baselines` (baselines, metrics, ...)."""
    return 100.0 * np.mean(1.0 - slim[None] / baselines, axis=(0, 1))


def average_mape_reduction_pct(mapes: pd.DataFrame, settings: list[str]) -> float:
    """Headline (paper Section VI-F: 79.3% over Table III): mean over the two baselines and two metrics of
    ``1 - mean_SLIM / mean_baseline``, each mean taken over the applicable settings, in %."""
    chosen = mapes[mapes[col.SETTING].isin(settings)]

    def setting_means(predictor: str) -> np.ndarray:
        rows = chosen[chosen[col.PREDICTOR] == predictor]
        return np.array([rows[metric.mape].mean() for metric in col.PREDICTION_METRICS])

    return float(reduction_from_means(setting_means(SLIM),
                                      np.stack([setting_means(LLMVISOR), setting_means(IMAI)])))
