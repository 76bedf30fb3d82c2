"""Bootstrap intervals of the held-out MAPEs (slim.paper.mape_intervals): determinism, coverage of the point
estimate, known cases (constant errors, one run, clear separation, overlap), curve resampling, the headline,
and the claims the tables state from the intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.paper.heldout import IMAI, LLMVISOR, SLIM, average_mape_reduction_pct, mape_table
from slim.paper.mape_intervals import (
    APE_RESOLUTION_PCT_POINTS,
    BETTER,
    MIN_CURVES_FOR_CURVE_RESAMPLING,
    N_RESAMPLES,
    RESAMPLED_CURVES,
    RESAMPLED_RUNS,
    UNDECIDED,
    WORSE,
    IntervalError,
    average_mape_reduction_interval,
    bootstrap_means,
    comparison_verdict,
    curve_labels,
    errors_in_steps,
    mape_intervals,
    setting_resampling,
    with_intervals,
)
from slim.paper.splits import HeldOutSetting
from slim.paper.tables import claims_matrix, heldout_tables, mape_cell, to_html_page


def _predictions(setting: str, errors: dict[str, np.ndarray], curves: list[str]) -> pd.DataFrame:
    """Validation rows of one setting: every predictor over the same runs, its throughput off by
    `errors[predictor]` (signed relative errors) and its E2E by the same, measured values 100."""
    frames = []
    for predictor, error in errors.items():
        n = len(error)
        frames.append(pd.DataFrame({
            col.SETTING: setting, col.PREDICTOR: predictor, col.RUN_ID: [f"{setting}/run{i}" for i in range(n)],
            col.MODEL: "m", col.MAX_NUM_SEQS: np.arange(n) + 1, col.INPUT_LEN_MEAN: 100.0,
            col.OUTPUT_LEN_MEAN: 100.0, col.OUTPUT_LEN_NOMINAL: 100, col.MEAN_BATCH_SIZE: 1.0,
            col.PREDICTED_MEAN_BATCH_SIZE: np.nan, col.MEASURED_THROUGHPUT: 100.0,
            col.PREDICTED_THROUGHPUT: 100.0 * (1 + np.asarray(error)), col.MEASURED_E2E_S: 100.0,
            col.PREDICTED_E2E_S: 100.0 * (1 - np.asarray(error)), col.ROLE: "validate",
            **dict.fromkeys((col.PREDICTED_THROUGHPUT_LOW, col.PREDICTED_THROUGHPUT_HIGH, col.PREDICTED_E2E_LOW_S,
                             col.PREDICTED_E2E_HIGH_S, col.PREDICTED_THROUGHPUT_CONFORMAL_LOW,
                             col.PREDICTED_THROUGHPUT_CONFORMAL_HIGH, col.PREDICTED_E2E_CONFORMAL_LOW_S,
                             col.PREDICTED_E2E_CONFORMAL_HIGH_S), np.nan)}))
    predictions = pd.concat(frames, ignore_index=True)[list(col.PREDICTION_COLUMNS)]
    return predictions


def _curves(setting: str, curves: list[str]) -> pd.Series:
    return pd.Series(curves, index=[f"{setting}/run{i}" for i in range(len(curves))])


RNG = np.random.default_rng(3)
SLIM_ERRORS = RNG.uniform(0.01, 0.03, 12)
SEPARATED = {SLIM: SLIM_ERRORS, LLMVISOR: RNG.uniform(0.30, 0.40, 12), IMAI: SLIM_ERRORS[::-1].copy()}
"""SLIM's errors 1-3%, LLMVisor's 30-40% (clearly apart), IMAI's SLIM's in reverse run order (same MAPE)."""
ONE_CURVE = ["c0"] * 12


def test_same_input_gives_the_same_bytes():
    predictions = _predictions("s", SEPARATED, ONE_CURVE)
    first = [frame.to_csv(index=False) for frame in mape_intervals(predictions, _curves("s", ONE_CURVE))]
    second = [frame.to_csv(index=False) for frame in mape_intervals(predictions, _curves("s", ONE_CURVE))]
    assert first == second


def test_the_interval_contains_the_point_estimate_and_joins_beside_each_mape():
    predictions = _predictions("s", SEPARATED, ONE_CURVE)
    intervals, _ = mape_intervals(predictions, _curves("s", ONE_CURVE))
    table = with_intervals(mape_table(predictions), intervals)
    assert list(table.columns[:len(col.MAPE_CI_TABLE_ORDER)]) == list(col.MAPE_CI_TABLE_ORDER)
    for metric in col.PREDICTION_METRICS:
        assert (table[metric.mape_ci_low] < table[metric.mape]).all()
        assert (table[metric.mape] < table[metric.mape_ci_high]).all()
    assert table[col.MAPE_MEAN_BATCH_CI_LOW_PCT].isna().all()  # nobody predicts the batch here
    assert set(table[col.CI_RESAMPLED]) == {RESAMPLED_RUNS}


def test_constant_errors_give_a_zero_width_interval_and_one_run_none():
    constant = {SLIM: np.full(6, 0.05), LLMVISOR: np.linspace(0.1, 0.3, 6)}
    intervals, _ = mape_intervals(_predictions("s", constant, ["c"] * 6), _curves("s", ["c"] * 6))
    slim = intervals.set_index(col.PREDICTOR).loc[SLIM]
    assert slim[col.MAPE_THROUGHPUT_CI_LOW_PCT] == pytest.approx(5.0)
    assert slim[col.MAPE_THROUGHPUT_CI_HIGH_PCT] == pytest.approx(5.0)
    assert "zero-width" in slim[col.CI_NOTE]
    single = {SLIM: np.array([0.05]), LLMVISOR: np.array([0.2])}
    intervals, comparisons = mape_intervals(_predictions("s", single, ["c"]), _curves("s", ["c"]))
    assert intervals[col.MAPE_THROUGHPUT_CI_LOW_PCT].isna().all()
    assert intervals[col.CI_NOTE].str.contains("one validation run").all()
    assert set(comparisons[col.VERDICT]) == {UNDECIDED}


def test_clear_separation_is_claimed_and_overlap_is_not():
    predictions = _predictions("s", SEPARATED, ONE_CURVE)
    _, comparisons = mape_intervals(predictions, _curves("s", ONE_CURVE))
    verdicts = comparisons.set_index([col.PREDICTOR, col.OTHER_PREDICTOR, col.METRIC])[col.VERDICT]
    assert verdicts[(SLIM, LLMVISOR, "throughput")] == BETTER
    assert verdicts[(LLMVISOR, IMAI, "e2e")] == WORSE
    # SLIM's and IMAI's errors are the same values on other runs: no verdict.
    assert verdicts[(SLIM, IMAI, "throughput")] == UNDECIDED
    settings = [HeldOutSetting("s", "Setting S")]
    claims = claims_matrix(mape_table(predictions), comparisons, settings)
    assert claims.loc["Setting S", f"{SLIM} vs {LLMVISOR}"] == f"{SLIM} better"
    assert claims.loc["Setting S", f"{SLIM} vs {IMAI}"] == "undecided"


def test_comparison_verdict_needs_the_whole_interval_on_one_side():
    assert comparison_verdict(-3.0, -0.1) == BETTER
    assert comparison_verdict(0.1, 3.0) == WORSE
    assert comparison_verdict(-0.1, 3.0) == UNDECIDED
    assert comparison_verdict(np.nan, np.nan) == UNDECIDED


def test_curves_are_resampled_whole_where_there_are_enough():
    n_curves, runs_per_curve = 6, 3
    curves = np.repeat([f"c{k}" for k in range(n_curves)], runs_per_curve)
    resampling = setting_resampling(curves)
    assert resampling.unit == RESAMPLED_CURVES and resampling.n_units == n_curves
    assert setting_resampling(curves[: runs_per_curve * (MIN_CURVES_FOR_CURVE_RESAMPLING - 1)]).unit == RESAMPLED_RUNS
    # Every run of curve k has error 10 k: a resample of whole curves has a mean that is a multiple of
    # 10 / 6; resampling runs (18 of them) would also give multiples of 10 / 18.
    values = (10.0 * np.repeat(np.arange(n_curves), runs_per_curve))[:, None]
    result = bootstrap_means(values, resampling)
    draws = result.distribution[0] * n_curves / 10.0
    assert result.distribution.shape == (1, N_RESAMPLES)
    np.testing.assert_allclose(draws, np.round(draws), atol=1e-9)
    assert np.ptp(draws) > 0
    # Four curves are too few: runs are resampled within each curve (strata), and since these errors
    # do not vary within a curve, every resample has the same mean (pooled runs would not).
    few = runs_per_curve * (MIN_CURVES_FOR_CURVE_RESAMPLING - 1)
    within = bootstrap_means(values[:few], setting_resampling(curves[:few]))
    assert within.low[0] == within.high[0] == pytest.approx(values[:few].mean())
    assert "zero-width" in within.notes[0]


def test_a_resample_of_the_original_runs_ties_exactly_so_noise_cannot_move_the_bounds():
    """On a 7-run curve, 7!/7^7 = 0.6% of resamples redraw every run once: their mean is the
    estimate, and BCa's bias correction counts them as ties only if they are bit-for-bit equal
    (summed in another order in floating point they were not, and a 1e-9 change of the errors
    moved a bound by 0.09 points)."""
    errors = 100.0 * np.abs(np.random.default_rng(7).normal(0.0, 0.3, 7))
    resampling = setting_resampling(np.array(["c"] * 7))
    reference = bootstrap_means(errors[:, None], resampling)
    draws = reference.distribution[0]
    ties = draws[np.abs(draws - errors.mean()) <= APE_RESOLUTION_PCT_POINTS]
    assert 30 < ties.size < 100 and np.unique(ties).size == 1
    for seed in range(5):
        noise = np.random.default_rng(100 + seed).uniform(-1.0, 1.0, errors.size)
        moved = bootstrap_means((errors * (1.0 + 1e-9 * noise))[:, None], resampling)
        assert abs(moved.low[0] - reference.low[0]) <= 10 * APE_RESOLUTION_PCT_POINTS
        assert abs(moved.high[0] - reference.high[0]) <= 10 * APE_RESOLUTION_PCT_POINTS
    # Rounding to the resolution moves the bounds by no more than the resolution.
    assert abs(reference.low[0] - 5.846982) < 1e-5 and abs(reference.high[0] - 21.921482) < 1e-5


def test_errors_are_resampled_in_whole_steps_and_bad_ones_are_refused():
    steps = errors_in_steps(np.array([1.0, 2.5e-7, 12.3456789]), n_summed=3)
    assert steps.dtype == np.int64 and list(steps) == [1_000_000, 0, 12_345_679]
    with pytest.raises(IntervalError, match="NaN or infinite"):
        errors_in_steps(np.array([1.0, np.nan]), n_summed=2)
    with pytest.raises(IntervalError, match="too large"):
        errors_in_steps(np.array([1e12]), n_summed=10_000)
    # A column with a non-finite error gets no interval (and says why); the others are unaffected.
    values = np.column_stack([np.linspace(1.0, 7.0, 7), np.r_[np.linspace(1.0, 6.0, 6), np.inf]])
    result = bootstrap_means(values, setting_resampling(np.array(["c"] * 7)))
    assert result.low[0] < 4.0 < result.high[0] and np.isnan(result.low[1]) and np.isnan(result.high[1])
    assert result.notes == ["", "a per-run error is NaN or infinite: no interval"]


def test_curve_labels_come_from_the_workload_keys():
    runs = pd.DataFrame({col.RUN_ID: ["a", "b", "c"], col.MODEL: ["m", "m", "n"],
                         col.INPUT_LEN_NOMINAL: [256, 256, 256], col.OUTPUT_LEN_NOMINAL: [128, 128, 128]})
    labels = curve_labels(runs)
    assert labels["a"] == labels["b"] != labels["c"]


def test_predictors_on_different_runs_are_refused():
    predictions = _predictions("s", SEPARATED, ONE_CURVE)
    dropped = predictions.drop(index=predictions.index[-1])
    with pytest.raises(IntervalError, match="other runs"):
        mape_intervals(dropped, _curves("s", ONE_CURVE))


def test_the_headline_interval_is_paired_and_contains_its_estimate():
    frames, curves = [], []
    for setting in ("a", "b"):
        frames.append(_predictions(setting, SEPARATED, ONE_CURVE))
        curves.append(_curves(setting, ONE_CURVE))
    predictions = pd.concat(frames, ignore_index=True)
    reduction = average_mape_reduction_interval(predictions, pd.concat(curves), ["a", "b"])
    assert reduction.estimate_pct == pytest.approx(average_mape_reduction_pct(mape_table(predictions), ["a", "b"]))
    assert reduction.ci_low_pct <= reduction.estimate_pct <= reduction.ci_high_pct
    assert reduction.n_settings == 2
    frame = reduction.to_frame()
    assert list(frame.columns) == list(col.MAPE_REDUCTION_COLUMNS)


def test_cells_and_html_show_the_interval_apart_from_the_range():
    row = pd.Series({col.MAPE_THROUGHPUT_PCT: 11.4, col.VALIDATION_DETERMINED: False,
                     col.MAPE_THROUGHPUT_LOW_PCT: 6.3, col.MAPE_THROUGHPUT_HIGH_PCT: 17.3,
                     col.MAPE_THROUGHPUT_CI_LOW_PCT: 8.7, col.MAPE_THROUGHPUT_CI_HIGH_PCT: 15.3})
    assert mape_cell(row, col.THROUGHPUT_METRIC) == "11.4 [6.3-17.3] (CI 8.7-15.3)"
    page = to_html_page(pd.DataFrame({"SLIM": ["11.4 [6.3-17.3] (CI 8.7-15.3)"]}, index=["Model"]),
                        "MAPE (\\%) of $H_{kv}$ runs", "Table III")
    assert "<table" in page and '<span class="ci">(CI 8.7-15.3)</span>' in page
    assert "MAPE (%) of H<sub>kv</sub> runs" in page and "\\" not in page
    assert page == to_html_page(pd.DataFrame({"SLIM": ["11.4 [6.3-17.3] (CI 8.7-15.3)"]}, index=["Model"]),
                                "MAPE (\\%) of $H_{kv}$ runs", "Table III")


def test_the_summary_states_only_supported_claims():
    predictions = _predictions("s", SEPARATED, ONE_CURVE)
    curves = _curves("s", ONE_CURVE)
    intervals, comparisons = mape_intervals(predictions, curves)
    mapes = with_intervals(mape_table(predictions), intervals)
    reduction = average_mape_reduction_interval(predictions, curves, ["s"])
    reference = {"table3": {}, "headline_mape_reduction_pct": 79.3}
    tables = heldout_tables(mapes, [HeldOutSetting("s", "Setting S")], reference, "toy", (), reduction, comparisons)
    assert "| Setting S | SLIM better | undecided |" in tables.summary_markdown
    assert "(CI " in tables.table3_latex and "\\%" in tables.table3_latex
    assert "<table" in tables.table3_html


def test_sum_of_drawn_equals_the_indexed_sum():
    # The bootstrap's statistic sums the drawn rows through counts; on whole numbers (error steps,
    # curve sizes) that is exactly the indexed sum, whatever the shapes.
    from slim.paper.mape_intervals import sum_of_drawn

    rng = np.random.default_rng(0)
    for shape in [(43, 5), (10, 3, 2), (7,)]:
        steps = rng.integers(-10**9, 10**9, size=shape)
        sizes = rng.integers(1, 20, size=shape).astype(float)
        for index_shape in [(shape[0],), (999, shape[0]), (4, 5, shape[0] - 1)]:
            index = rng.integers(0, shape[0], size=index_shape)
            for values in (steps, sizes):
                expected = values[index].sum(axis=index.ndim - 1)
                summed = sum_of_drawn(values, index)
                assert summed.dtype == expected.dtype and np.array_equal(summed, expected)
