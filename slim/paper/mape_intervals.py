"""Bootstrap confidence intervals of the held-out MAPEs (Tables III and IV), of the paired
differences between predictors, and of the average-MAPE-reduction headline (Section VI-F).

A MAPE is the mean of one absolute percentage error per validation run, and the runs of one
measured curve (one ``--max-num-seqs`` sweep: same model, IL, OL and GPU) share most of their
error: a fit that is off on a curve is off on all its caps. The resampling unit is therefore
the **curve** wherever a setting's validation runs span at least `MIN_CURVES_FOR_CURVE_RESAMPLING`
curves (the same-curve setting): whole curves are drawn with replacement, and the interval is
for the MAPE on curves like these. A transfer setting validates on one curve (or a few); there,
the **runs** of each curve are resampled within the curve (curves kept at their own number of
runs), and the interval is conditional on those curves: it says how much the MAPE depends on
which caps were measured, not how the predictor would do on another unseen model. The unit
each row used is in the column `columns.CI_RESAMPLED`.

Every interval of one setting comes from the same resamples (one `scipy.stats.bootstrap` call
whose statistic returns every predictor's MAPE and every pairwise difference), so differences
are paired: SLIM and a baseline are always scored on the same resampled runs. The
headline resamples every applicable setting at once (settings are independent strata; the
same draw feeds SLIM and both baselines), so its interval reflects the comparison, not two
independent noises. (Settings whose validation runs overlap, e.g. a transfer's target curve
and the same-curve setting's caps of it, are resampled independently; the overlap is small.)

Intervals are `CONFIDENCE_LEVEL` BCa intervals (`BOOTSTRAP_METHOD`: bias-corrected and
accelerated, second-order accurate for skewed statistics such as a mean of absolute errors)
from `N_RESAMPLES` resamples, seeded by `BOOTSTRAP_SEED`, so the output is byte-identical
run to run. Degenerate cases are explicit: a statistic that is the same in every resample
(e.g. equal errors on every run) gets a zero-width interval, and one computed from a single
validation run gets NaN; both say so in `columns.CI_NOTE`.

**Ties are exact, so the intervals do not depend on the machine.** BCa's bias correction
(Efron & Tibshirani 1993, Section 14.3) is ``z0 = Phi^-1(share of replicates below the estimate)``,
scipy counting a replicate equal to the estimate as half. A replicate that redraws the original
runs (each once) equals the estimate exactly, and on a small curve that is common: 7!/7^7 = 0.6%
of resamples of a 7-run curve, about 60 of 9,999. Summed in floating point in another order,
such a replicate comes out one rounding step above or below the estimate, so it counts 0 or 1
instead of 1/2, and which one depends on the last bits of the errors: the fits' BLAS kernel moved
LLMVisor-Agg's throughput bound on ``model_output_length`` by 0.18 points. Every per-run error
is therefore rounded to `APE_RESOLUTION_PCT_POINTS` and resampled as a whole number of those
steps (`errors_in_steps`); integer sums do not depend on the order of summation, so a replicate
is a function of the multiset of runs (or curves) it drew, equal multisets give equal bits, and
a tie is counted as the tie it is. This is neither a tolerance on the comparison nor a widening:
it moves each error, and so each replicate, by at most half a step (5e-7 points), and the
interval is the one exact arithmetic gives for errors known to a millionth of a point; the
estimates stay the plain means.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import SlimError
from slim.paper.heldout import IMAI, LLMVISOR, SLIM, reduction_from_means

CONFIDENCE_LEVEL = 0.95
N_RESAMPLES = 9999
BOOTSTRAP_METHOD = "BCa"
BOOTSTRAP_SEED = 15
"""Seed of the `numpy.random.Generator` each bootstrap call starts from, so the bytes repeat; every call
starts afresh, so one setting's interval does not depend on which settings came before it."""
MIN_CURVES_FOR_CURVE_RESAMPLING = 5
"""Fewest validation curves for which whole curves are resampled: with fewer, a curve bootstrap
has too few distinct resamples (3 for two curves) to give an interval, so runs are resampled
within each curve instead."""
CONSTANT_TOLERANCE = 1e-12
"""Relative spread below which the headline's bootstrap distribution counts as constant
(zero-width interval); per-setting means use `APE_RESOLUTION_PCT_POINTS` instead."""
APE_RESOLUTION_PCT_POINTS = 1e-6
"""Resolution (percentage points) of the per-run absolute percentage errors that are resampled:
every error is a whole number of these steps, summed exactly as integers (see the module note on
ties). A millionth of a point is 5 x 10^4 below the 0.05-point tolerance to which the tables must
agree across machines and 10^5 below the 0.1 points they print, so rounding to it changes no
reported number; and it is about 100 times the change of a per-run error between BLAS kernels
(about 1e-8 points) and 10^7 times the rounding error of a double near 100, so the noise of the
fits flips an error by one step only rarely, and then moves a bound by a step, not by a tie.
A per-unit mean that varies by less than one step counts as constant (zero-width interval)."""

RESAMPLED_CURVES = "curves"
RESAMPLED_RUNS = "runs within curves"


class IntervalError(SlimError):
    """The predictions cannot be bootstrapped as asked (predictors scored on different runs)."""


def interval_note(method: str = BOOTSTRAP_METHOD, level: float = CONFIDENCE_LEVEL) -> str:
    """What ``(CI a-b)`` means, for table notes and the results page."""
    return (f"(CI a-b): {100 * level:.0f}% {method} bootstrap confidence interval of the MAPE ({N_RESAMPLES} "
            f"resamples, seed {BOOTSTRAP_SEED}; slim.paper.mape_intervals): whole curves (one batch-cap sweep "
            f"each) are resampled where the validation runs span at least {MIN_CURVES_FOR_CURVE_RESAMPLING} "
            "curves (the same-curve setting), otherwise runs within each curve, so a transfer's interval is "
            "conditional on its target curve (which caps were measured), not on which model was held out.")


@dataclass(frozen=True)
class Resampling:
    """How one setting's validation runs are resampled: the unit, and per unit (a curve, or a
    run within a curve) the rows of the predictions it stands for."""

    unit: str
    groups: tuple[np.ndarray, ...]
    """Curve resampling: one array of row positions per curve. Run resampling: one array per
    curve as well, each element a stratum of its own."""

    @property
    def n_units(self) -> int:
        return len(self.groups) if self.unit == RESAMPLED_CURVES else sum(len(g) for g in self.groups)


def curve_labels(runs: pd.DataFrame) -> pd.Series:
    """Run id -> its curve (`columns.WORKLOAD_KEYS`: model, nominal IL and OL; one dataset has
    one GPU), from the cleaned run table."""
    col.require_columns(runs, (col.RUN_ID, *col.WORKLOAD_KEYS), "the cleaned run table", IntervalError)
    labels = runs[list(col.WORKLOAD_KEYS)].astype(str).agg(" / ".join, axis=1)
    return pd.Series(labels.to_numpy(), index=runs[col.RUN_ID].to_numpy())


def setting_resampling(curves: np.ndarray) -> Resampling:
    """The resampling of one setting's validation runs, from each run's curve label (in row
    order): curves if there are at least `MIN_CURVES_FOR_CURVE_RESAMPLING`, else runs within
    each curve."""
    order = pd.unique(pd.Series(curves))
    groups = tuple(np.flatnonzero(curves == curve) for curve in sorted(order))
    unit = RESAMPLED_CURVES if len(groups) >= MIN_CURVES_FOR_CURVE_RESAMPLING else RESAMPLED_RUNS
    return Resampling(unit, groups)


@dataclass(frozen=True)
class MeanIntervals:
    """`bootstrap_means`'s answer, one entry per column: the mean, its interval, why an interval
    is zero-width or missing ("" otherwise), and the bootstrap distribution of each resampled
    column (shape (columns, resamples); NaN rows for columns not resampled)."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    notes: list[str]
    distribution: np.ndarray


def errors_in_steps(errors_pct: np.ndarray, n_summed: int) -> np.ndarray:
    """Per-run errors (percentage points) as whole numbers of `APE_RESOLUTION_PCT_POINTS`
    (int64), so that any sum of them is exact and independent of the order of summation.

    `n_summed` is the most errors one resample adds up; raises IntervalError for a non-finite
    error or one so large that such a sum could overflow.
    """
    errors_pct = np.asarray(errors_pct, dtype=float)
    if not np.isfinite(errors_pct).all():
        raise IntervalError("a per-run error to bootstrap is NaN or infinite (a measured value of zero or a "
                            "missing prediction); drop that run from the predictions or fix its measurement")
    steps = np.rint(errors_pct / APE_RESOLUTION_PCT_POINTS)
    if float(np.max(np.abs(steps), initial=0.0)) * max(n_summed, 1) >= 2.0 ** 62:
        raise IntervalError(f"a per-run error of {np.max(np.abs(errors_pct)):.3g} points is too large to sum "
                            f"exactly in steps of {APE_RESOLUTION_PCT_POINTS:g} points")
    return steps.astype(np.int64)


def sum_of_drawn(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``values[index].sum(axis=index.ndim - 1)``: for each draw (the last axis of `index`), the sum
    of the rows of `values` it drew, from how often it drew each row (a product with the counts),
    without the copy of every drawn row that indexing makes (9,999 resamples x curves x columns).
    Equal to the indexed sum where the sums are exact (whole numbers: `errors_in_steps`, counts)."""
    draws = index.reshape(-1, index.shape[-1])
    n_rows = values.shape[0]
    cells = draws + n_rows * np.arange(len(draws))[:, None]
    counts = np.bincount(cells.ravel(), minlength=len(draws) * n_rows).reshape(len(draws), n_rows)
    sums = counts @ values.reshape(n_rows, -1)
    return sums.reshape(index.shape[:-1] + values.shape[1:])


def bootstrap_means(values: np.ndarray, resampling: Resampling, seed: int = BOOTSTRAP_SEED) -> MeanIntervals:
    """Point estimate and CI of the mean over rows of each column of `values` (rows = the
    setting's validation runs, columns = quantities such as one predictor's absolute percentage
    error, in percentage points), every column from the same resamples.

    The resamples' means are computed from the errors in whole steps of
    `APE_RESOLUTION_PCT_POINTS` (`errors_in_steps`), so that a replicate that redraws the
    original runs ties with the estimate exactly; the estimate itself is the plain mean.
    A column that varies by less than one step between resampled units gets a zero-width
    interval; with a single run there is no interval (NaN); both say so in `MeanIntervals.notes`.
    """
    values = np.asarray(values, dtype=float)
    n_rows, n_columns = values.shape
    estimate = values.mean(axis=0)
    low, high = np.full(n_columns, np.nan), np.full(n_columns, np.nan)
    notes = [""] * n_columns
    distribution = np.full((n_columns, N_RESAMPLES), np.nan)
    if n_rows < 2:
        return MeanIntervals(estimate, low, high, ["one validation run: no interval"] * n_columns, distribution)
    finite = np.isfinite(values).all(axis=0)
    for k in np.flatnonzero(~finite):
        notes[k] = "a per-run error is NaN or infinite: no interval"
    steps = errors_in_steps(np.where(finite, values, 0.0), n_rows * len(resampling.groups))
    if resampling.unit == RESAMPLED_CURVES:
        unit_sums = np.stack([steps[rows].sum(axis=0) for rows in resampling.groups])
        unit_counts = np.array([len(rows) for rows in resampling.groups], dtype=float)
        unit_means = unit_sums / unit_counts[:, None]
        spread = unit_means.max(axis=0) - unit_means.min(axis=0)
    else:   # runs are drawn within their curve: a column is constant if it is so within every curve
        spread = np.max([steps[rows].max(axis=0) - steps[rows].min(axis=0) for rows in resampling.groups], axis=0)
    constant = finite & (spread < 1)   # in steps of APE_RESOLUTION_PCT_POINTS
    for k in np.flatnonzero(constant):
        low[k] = high[k] = estimate[k]
        notes[k] = f"the same on every resampled {_unit_word(resampling)}: zero-width interval"
    varying = np.flatnonzero(finite & ~constant)
    if varying.size == 0:
        return MeanIntervals(estimate, low, high, notes, distribution)
    if resampling.unit == RESAMPLED_CURVES:
        sums, counts = unit_sums[:, varying], unit_counts

        def statistic(index: np.ndarray, axis: int = -1) -> np.ndarray:
            index = np.moveaxis(index, axis, -1)
            mean_steps = sum_of_drawn(sums, index) / sum_of_drawn(counts, index)[..., None]
            return np.moveaxis(mean_steps * APE_RESOLUTION_PCT_POINTS, -1, 0)

        data: tuple[np.ndarray, ...] = (np.arange(len(resampling.groups)),)
    else:
        data, fixed = _run_strata(resampling)
        columns = steps[:, varying]
        fixed_sum = columns[fixed].sum(axis=0) if fixed.size else np.zeros(varying.size, dtype=np.int64)

        def statistic(*indices: np.ndarray, axis: int = -1) -> np.ndarray:
            total = fixed_sum.copy()
            count = float(fixed.size)
            for index in indices:
                index = np.moveaxis(index, axis, -1)
                total = total + sum_of_drawn(columns, index)
                count = count + index.shape[-1]
            return np.moveaxis(total / count * APE_RESOLUTION_PCT_POINTS, -1, 0)

    # Imported here: scipy.stats costs about 0.9 CPU-s to import, which the jobs that only read
    # this module's names (the headline check) would pay without resampling anything.
    from scipy import stats

    with warnings.catch_warnings():
        # A degenerate BCa (NaN) is reported per column below, not as a warning.
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(data, statistic, n_resamples=N_RESAMPLES, vectorized=True, paired=False,
                                 confidence_level=CONFIDENCE_LEVEL, method=BOOTSTRAP_METHOD,
                                 rng=np.random.default_rng(seed))
    low[varying] = np.atleast_1d(result.confidence_interval.low)
    high[varying] = np.atleast_1d(result.confidence_interval.high)
    distribution[varying] = np.reshape(result.bootstrap_distribution, (varying.size, N_RESAMPLES))
    for k in varying:
        if not (np.isfinite(low[k]) and np.isfinite(high[k])):
            notes[k] = f"{BOOTSTRAP_METHOD} interval undefined (degenerate bootstrap distribution)"
    return MeanIntervals(estimate, low, high, notes, distribution)


def _unit_word(resampling: Resampling) -> str:
    return "curve" if resampling.unit == RESAMPLED_CURVES else "run"


def _run_strata(resampling: Resampling) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Run resampling within curves: the strata scipy resamples (curves of two or more runs,
    each an array of row positions) and the rows of single-run curves, which every resample
    keeps as they are."""
    strata = tuple(rows for rows in resampling.groups if len(rows) >= 2)
    fixed = np.concatenate([rows for rows in resampling.groups if len(rows) < 2] or [np.array([], dtype=int)])
    return strata, fixed.astype(int)


# --- per setting: every predictor's MAPE and every paired difference --------------------

def _ape_pct(rows: pd.DataFrame, metric: col.PredictionMetric) -> np.ndarray:
    predicted = rows[metric.predicted].to_numpy(dtype=float)
    measured = rows[metric.measured].to_numpy(dtype=float)
    return 100.0 * np.abs(predicted - measured) / np.abs(measured)


def _setting_errors(validation: pd.DataFrame,
                    setting: str) -> tuple[list[str], np.ndarray, dict[tuple[str, str], np.ndarray]]:
    """(predictors in table order, run ids, absolute percentage errors per (predictor, metric))
    of one setting; raises IntervalError when predictors were scored on different runs."""
    rows = validation[validation[col.SETTING] == setting]
    predictors = list(pd.unique(rows[col.PREDICTOR]))
    run_ids = rows.loc[rows[col.PREDICTOR] == predictors[0], col.RUN_ID].to_numpy()
    errors = {}
    for predictor in predictors:
        own = rows[rows[col.PREDICTOR] == predictor].set_index(col.RUN_ID)
        if sorted(own.index) != sorted(run_ids):
            raise IntervalError(f"setting '{setting}': {predictor} was validated on other runs than {predictors[0]}; "
                                "paired intervals need the same validation runs for every predictor")
        own = own.loc[run_ids]
        for metric in col.MAPE_METRICS:
            if own[metric.predicted].notna().all():
                errors[(predictor, metric.name)] = _ape_pct(own, metric)
    return predictors, run_ids, errors


def _curves_of(run_ids: np.ndarray, curves: pd.Series, setting: str) -> np.ndarray:
    missing = [run for run in run_ids if run not in curves.index]
    if missing:
        raise IntervalError(f"setting '{setting}': validation run(s) {', '.join(map(str, missing[:3]))} are not in "
                            "the cleaned run table; rebuild results/<dataset>/clean.parquet")
    return curves.loc[run_ids].to_numpy()


def mape_intervals(predictions: pd.DataFrame, curves: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Intervals of every (setting, predictor) MAPE and of every paired MAPE difference.

    `predictions`: the held-out prediction table (role ``validate`` rows are used); `curves`:
    run id -> curve (`curve_labels`). Returns (intervals, comparisons): intervals with columns
    `columns.MAPE_INTERVAL_COLUMNS` (one row per setting and predictor, to join onto the MAPE
    table), comparisons with `columns.MAPE_COMPARISON_COLUMNS` (one row per setting, ordered
    pair of predictors and metric: the MAPE of `predictor` minus that of `other`, its paired
    interval, and the verdict `comparison_verdict` draws from it; each unordered pair once, in
    table order: the reverse comparison is the negation).
    """
    validation = predictions[predictions[col.ROLE] == "validate"]
    interval_rows, comparison_rows = [], []
    for setting in pd.unique(validation[col.SETTING]):
        predictors, run_ids, errors = _setting_errors(validation, setting)
        resampling = setting_resampling(_curves_of(run_ids, curves, setting))
        keys = list(errors)
        pairs = [(a, b, metric) for a, b in itertools.combinations(predictors, 2)
                 for metric in (m.name for m in col.MAPE_METRICS) if (a, metric) in errors and (b, metric) in errors]
        matrix = np.column_stack([errors[k] for k in keys] + [errors[(a, m)] - errors[(b, m)] for a, b, m in pairs])
        means = bootstrap_means(matrix, resampling)
        estimate, low, high, notes = means.estimate, means.low, means.high, means.notes
        by_key = {key: i for i, key in enumerate(keys)}
        for predictor in predictors:
            record = {col.SETTING: setting, col.PREDICTOR: predictor, col.CI_RESAMPLED: resampling.unit,
                      col.CI_N_UNITS: resampling.n_units}
            predictor_notes = []
            for metric in col.MAPE_METRICS:
                i = by_key.get((predictor, metric.name))
                record[metric.mape_ci_low] = np.nan if i is None else low[i]
                record[metric.mape_ci_high] = np.nan if i is None else high[i]
                if i is not None and notes[i]:
                    predictor_notes.append(f"{metric.name}: {notes[i]}")
            record[col.CI_NOTE] = "; ".join(predictor_notes)
            interval_rows.append(record)
        for j, (a, b, metric) in enumerate(pairs, start=len(keys)):
            comparison_rows.append({
                col.SETTING: setting, col.PREDICTOR: a, col.OTHER_PREDICTOR: b, col.METRIC: metric,
                col.MAPE_DIFFERENCE_PCT: estimate[j], col.MAPE_DIFFERENCE_CI_LOW: low[j],
                col.MAPE_DIFFERENCE_CI_HIGH: high[j], col.VERDICT: comparison_verdict(low[j], high[j]),
                col.CI_RESAMPLED: resampling.unit, col.CI_N_UNITS: resampling.n_units})
    return (pd.DataFrame.from_records(interval_rows, columns=list(col.MAPE_INTERVAL_COLUMNS)),
            pd.DataFrame.from_records(comparison_rows, columns=list(col.MAPE_COMPARISON_COLUMNS)))


BETTER, WORSE, UNDECIDED = "better", "worse", "undecided"


def comparison_verdict(low: float, high: float) -> str:
    """``better`` when the whole interval of MAPE(predictor) - MAPE(other) lies below zero,
    ``worse`` when it lies above, else ``undecided`` (also when there is no interval)."""
    if np.isfinite(high) and high < 0:
        return BETTER
    if np.isfinite(low) and low > 0:
        return WORSE
    return UNDECIDED


def with_intervals(mapes: pd.DataFrame, intervals: pd.DataFrame) -> pd.DataFrame:
    """`mapes` (`heldout.mape_table`, joined with identifiability or not) with each MAPE's
    interval beside it (`columns.MAPE_CI_TABLE_ORDER`), then the remaining columns."""
    joined = mapes.merge(intervals, on=[col.SETTING, col.PREDICTOR], how="left", validate="one_to_one")
    first = [name for name in col.MAPE_CI_TABLE_ORDER if name in joined.columns]
    return joined[first + [name for name in joined.columns if name not in first]]


# --- the headline: average MAPE reduction, paired across predictors --------------------

@dataclass(frozen=True)
class ReductionInterval:
    """The average-MAPE-reduction headline (%) with its paired bootstrap interval."""

    estimate_pct: float
    ci_low_pct: float
    ci_high_pct: float
    n_settings: int
    note: str

    def to_frame(self) -> pd.DataFrame:
        """One row, `columns.MAPE_REDUCTION_COLUMNS` (``mape_reduction.csv``)."""
        return pd.DataFrame([{col.MAPE_REDUCTION_PCT: self.estimate_pct, col.MAPE_REDUCTION_CI_LOW: self.ci_low_pct,
                              col.MAPE_REDUCTION_CI_HIGH: self.ci_high_pct, col.N_SETTINGS: self.n_settings,
                              col.CONFIDENCE_LEVEL: CONFIDENCE_LEVEL, col.CI_METHOD: BOOTSTRAP_METHOD,
                              col.CI_N_RESAMPLES: N_RESAMPLES, col.CI_SEED: BOOTSTRAP_SEED, col.CI_NOTE: self.note}],
                            columns=list(col.MAPE_REDUCTION_COLUMNS))

    def describes_a_reduction(self) -> bool | None:
        """True if the interval lies above zero (SLIM's MAPE is lower on average), False if
        below (higher), None if it contains zero or there is none."""
        if np.isfinite(self.ci_low_pct) and self.ci_low_pct > 0:
            return True
        if np.isfinite(self.ci_high_pct) and self.ci_high_pct < 0:
            return False
        return None


REDUCTION_BASELINES = (LLMVISOR, IMAI)


def average_mape_reduction_interval(predictions: pd.DataFrame, curves: pd.Series, settings: list[str],
                                    seed: int = BOOTSTRAP_SEED) -> ReductionInterval:
    """`heldout.average_mape_reduction_pct` with its interval: every applicable setting's runs
    (or curves, as in `setting_resampling`) are resampled as independent strata, and one draw
    scores SLIM and both baselines on the same runs (paired). As in `bootstrap_means`, the
    resamples' setting means come from the errors in whole steps of `APE_RESOLUTION_PCT_POINTS`,
    so equal draws give equal bits; the estimate is that of the plain means."""
    validation = predictions[predictions[col.ROLE] == "validate"]
    metrics = [m.name for m in col.PREDICTION_METRICS]
    predictors = (SLIM, *REDUCTION_BASELINES)
    blocks = []   # per setting: (resampling, errors[run, predictor, metric])
    for setting in settings:
        if not (validation[col.SETTING] == setting).any():
            continue
        names, run_ids, errors = _setting_errors(validation, setting)
        if not all((p, m) in errors for p in predictors for m in metrics):
            continue
        cube = np.stack([np.stack([errors[(p, m)] for m in metrics], axis=-1) for p in predictors], axis=1)
        blocks.append((setting_resampling(_curves_of(run_ids, curves, setting)), cube))
    if not blocks:
        return ReductionInterval(np.nan, np.nan, np.nan, 0, "no setting has SLIM and both baselines")

    def means_from(setting_means: list[np.ndarray]) -> np.ndarray:
        """(predictors, metrics, ...) -> the reduction, averaging over settings first."""
        average = np.mean(np.stack(setting_means), axis=0)
        return reduction_from_means(average[0], average[1:])

    point = means_from([cube.mean(axis=0) for _, cube in blocks])
    if not all(np.isfinite(cube).all() for _, cube in blocks):
        return ReductionInterval(point, np.nan, np.nan, len(blocks), "a per-run error is NaN or infinite: no interval")
    data, layout = [], []   # layout: per setting, how its samples map back to its mean
    for resampling, errors in blocks:
        cube = errors_in_steps(errors, len(errors) * len(resampling.groups))
        if resampling.unit == RESAMPLED_CURVES:
            sums = np.stack([cube[rows].sum(axis=0) for rows in resampling.groups])
            counts = np.array([len(rows) for rows in resampling.groups], dtype=float)
            layout.append(("curves", len(data), 1, (sums, counts)))
            data.append(np.arange(len(resampling.groups)))
        else:
            strata, fixed = _run_strata(resampling)
            layout.append(("runs", len(data), len(strata), (cube, fixed)))
            data.extend(strata)
    if not data:
        return ReductionInterval(point, np.nan, np.nan, len(blocks), "one validation run per setting: no interval")

    def statistic(*indices: np.ndarray, axis: int = -1) -> np.ndarray:
        indices = tuple(np.moveaxis(index, axis, -1) for index in indices)
        setting_means = []
        for kind, first, n_samples, arrays in layout:
            if kind == "curves":
                sums, counts = arrays
                index = indices[first]
                mean_steps = sum_of_drawn(sums, index) / sum_of_drawn(counts, index)[..., None, None]
            else:
                cube, fixed = arrays
                total = cube[fixed].sum(axis=0)
                count = float(fixed.size)
                for index in indices[first:first + n_samples]:
                    total = total + sum_of_drawn(cube, index)
                    count = count + index.shape[-1]
                mean_steps = total / count
            setting_means.append(np.moveaxis(mean_steps * APE_RESOLUTION_PCT_POINTS, (-2, -1), (0, 1)))
        return means_from(setting_means)

    from scipy import stats  # on use, as in `bootstrap_means`

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(tuple(data), statistic, n_resamples=N_RESAMPLES, vectorized=True, paired=False,
                                 confidence_level=CONFIDENCE_LEVEL, method=BOOTSTRAP_METHOD,
                                 rng=np.random.default_rng(seed))
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    note = (f"{100 * CONFIDENCE_LEVEL:.0f}% paired {BOOTSTRAP_METHOD} bootstrap over {len(blocks)} settings, one "
            "resample of each setting's runs or curves scoring SLIM and both baselines")
    if not (np.isfinite(low) and np.isfinite(high)):
        spread = result.bootstrap_distribution
        if np.ptp(spread) <= CONSTANT_TOLERANCE * max(abs(point), 1.0):
            low = high = point
            note += "; the same in every resample: zero-width interval"
        else:
            note += f"; {BOOTSTRAP_METHOD} interval undefined"
    return ReductionInterval(point, low, high, len(blocks), note)
