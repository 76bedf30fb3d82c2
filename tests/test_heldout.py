"""Held-out evaluation on the real public traces: quality bars, headline checks, tables."""

import re

import numpy as np
import pandas as pd
import pytest
import yaml

from slim import columns as col
from slim.paper.headlines import check_headlines, load_expected
from slim.paper.heldout import (
    IMAI,
    LLMVISOR,
    SIM,
    SLIM,
    SLIM_PREDICTED_BATCH,
    average_mape_reduction_pct,
    evaluate_setting,
    mape_table,
)
from slim.paper.mape_intervals import average_mape_reduction_interval, curve_labels, mape_intervals, with_intervals
from slim.paper.splits import load_settings
from slim.paper.table_format import number_cell
from slim.paper.tables import (
    COVERAGE_NOTE,
    RANGE_NOTE,
    UNDETERMINED_NOTE,
    identifiability_notes,
    table3,
    to_booktabs,
    to_markdown,
)
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware

# Every setting of the real traces evaluated, SIM included: the simulator runs every real run.
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def public_evaluations(public_clean, public_schedules) -> list:
    catalog = load_architectures()
    _, clean = public_clean
    hardware = load_hardware()["h100-64gb"]
    settings = load_settings("config/settings/h100-public.yaml")
    return [evaluate_setting(clean, s, catalog, hardware, public_schedules) for s in settings if s.applicable]


@pytest.fixture(scope="module")
def public_mapes(public_evaluations) -> pd.DataFrame:
    return mape_table(pd.concat([e.predictions for e in public_evaluations], ignore_index=True),
                      pd.concat([e.identifiability for e in public_evaluations], ignore_index=True))


def test_every_public_mape_lies_inside_its_bootstrap_interval(public_evaluations, public_clean, public_mapes):
    _, clean = public_clean
    predictions = pd.concat([e.predictions for e in public_evaluations], ignore_index=True)
    curves = curve_labels(clean)
    intervals, comparisons = mape_intervals(predictions, curves)
    table = with_intervals(public_mapes, intervals)
    for metric in col.MAPE_METRICS:
        shown = table[table[metric.mape].notna()]
        assert shown[metric.mape_ci_low].notna().all()
        assert (shown[metric.mape_ci_low] <= shown[metric.mape]).all()
        assert (shown[metric.mape] <= shown[metric.mape_ci_high]).all()
    # Same curve spans the 12 public curves (resampled whole); each transfer validates on one curve.
    resampled = table.drop_duplicates(col.SETTING).set_index(col.SETTING)[col.CI_RESAMPLED]
    assert resampled["same_curve"] == "curves" and resampled["model"] == "runs within curves"
    # Every must-beat of the record holds beyond the paired interval, not just on the point estimates.
    assert check_headlines(public_mapes, load_expected("config/headlines.yaml", "h100-public"), comparisons) == []
    settings = ["same_curve", "model", "output_length", "model_output_length"]
    reduction = average_mape_reduction_interval(predictions, curves, settings)
    assert reduction.estimate_pct == pytest.approx(average_mape_reduction_pct(public_mapes, settings))
    assert reduction.ci_low_pct <= reduction.estimate_pct <= reduction.ci_high_pct


def _mape(mapes: pd.DataFrame, setting: str, predictor: str, metric: str = "mape_throughput_pct") -> float:
    return float(mapes[(mapes["setting"] == setting) & (mapes["predictor"] == predictor)][metric].iloc[0])


def test_slim_meets_the_quality_bars_on_the_public_traces(public_mapes):
    assert _mape(public_mapes, "output_length", SLIM) <= 5.0
    assert _mape(public_mapes, "model", SLIM) <= 15.0
    assert _mape(public_mapes, "same_curve", SLIM) <= 12.0


def test_recorded_headlines_still_hold(public_mapes):
    problems = check_headlines(public_mapes, load_expected("config/headlines.yaml", "h100-public"))
    assert problems == []


def test_headline_check_fails_on_drift_and_on_a_lost_win(public_mapes):
    expected = load_expected("config/headlines.yaml", "h100-public")
    drifted = yaml.safe_load(yaml.safe_dump(expected))
    drifted["mape_pct"]["model"][SLIM]["throughput"] += 5.0
    assert any("drifted" in problem for problem in check_headlines(public_mapes, drifted))
    demanding = dict(expected, slim_must_beat={"model": [IMAI]})
    assert any("does not beat IMAI" in problem for problem in check_headlines(public_mapes, demanding))


def test_slim_beats_llmvisor_on_the_model_transfers(public_mapes):
    for setting in ("model", "model_output_length"):
        assert _mape(public_mapes, setting, SLIM) < _mape(public_mapes, setting, LLMVISOR)


def test_table3_has_one_row_per_setting_and_marks_missing_settings(public_mapes):
    settings = load_settings("config/settings/h100-public.yaml")
    table = table3(public_mapes, settings)
    assert list(table.index) == [s.label for s in settings]
    latex = to_booktabs(table, "caption", "tab:x")
    assert "\\toprule" in latex and "n/a: no input-length sweep in this dataset" in latex


def test_tables_print_counts_as_integers_and_measures_at_fixed_precision():
    frame = pd.DataFrame({"runs": np.array([9, 10]), "MAPE": [2.25, np.nan]}, index=["a", "b"])
    latex = to_booktabs(frame, "caption", "tab:x")
    assert "a & 9 & 2.2 \\\\" in latex and "b & 10 & -- \\\\" in latex
    assert [number_cell(v, 1) for v in (np.int64(3), 3.0, True, None)] == ["3", "3.0", "1.0", "--"]


def test_average_reduction_is_computed_from_the_table(public_mapes):
    settings = ["model", "output_length"]
    reduction = average_mape_reduction_pct(public_mapes, settings)
    by_hand = []
    for metric in ("mape_throughput_pct", "mape_e2e_pct"):
        slim_mean = sum(_mape(public_mapes, s, SLIM, metric) for s in settings) / 2
        for baseline in (LLMVISOR, IMAI):
            by_hand.append(1 - slim_mean / (sum(_mape(public_mapes, s, baseline, metric) for s in settings) / 2))
    assert reduction == pytest.approx(100 * sum(by_hand) / 4)


def test_table3_shows_what_the_training_data_cannot_decide(public_mapes):
    settings = load_settings("config/settings/h100-public.yaml")
    table = table3(public_mapes, settings)
    model_row = table.loc["Model (Llama-2-7B, OL 390)"]
    slim_cell, imai_cell = model_row[(SLIM, "Thr.")], model_row[(IMAI, "Thr.")]
    # SLIM's range over its equivalent fits, then the coverage of its conformal intervals
    assert re.fullmatch(r"[0-9.]+ \[[0-9.]+-[0-9.]+\] cov\. [0-9]+%", slim_cell), slim_cell
    assert isinstance(imai_cell, str) and imai_cell.endswith("*")   # IMAI has no conformal interval
    assert re.fullmatch(r"[0-9.]+ cov\. [0-9]+%", table.loc["Same curve"][(SLIM, "Thr.")])   # identified
    assert identifiability_notes(table) == [RANGE_NOTE, UNDETERMINED_NOTE, COVERAGE_NOTE]
    markdown = to_markdown(table)
    assert slim_cell in markdown and imai_cell in markdown


def test_sim_and_slim_at_sims_batch_join_every_real_setting(public_mapes):
    settings = load_settings("config/settings/h100-public.yaml")
    for setting in (s.name for s in settings if s.applicable):
        for predictor in (SIM, SLIM_PREDICTED_BATCH):
            batch_error = _mape(public_mapes, setting, predictor, "mape_mean_batch_pct")
            assert 0 <= batch_error < 2.0, (setting, predictor)
        assert pd.isna(_mape(public_mapes, setting, SLIM, "mape_mean_batch_pct"))   # SLIM is given the batch
    table = table3(public_mapes, settings)
    assert (SIM, "Batch") in table.columns and (SLIM_PREDICTED_BATCH, "Thr.") in table.columns


def test_sim_beats_slims_pick_and_llmvisor_on_the_real_model_transfers(public_mapes):
    for setting in ("model", "model_output_length"):
        for metric in ("mape_throughput_pct", "mape_e2e_pct"):
            sim = _mape(public_mapes, setting, SIM, metric)
            assert sim < _mape(public_mapes, setting, SLIM, metric) and sim < _mape(public_mapes, setting, LLMVISOR,
                                                                                 metric)
    assert _mape(public_mapes, "output_length", SIM) <= 5.0


def test_sim_never_reads_the_validation_runs_measured_batch(public_clean, public_schedules):
    _, clean = public_clean
    setting = next(s for s in load_settings("config/settings/h100-public.yaml") if s.name == "model")
    catalog, hardware = load_architectures(), load_hardware()["h100-64gb"]
    validation = clean["model"] == "llama-2-7b"
    altered = clean.assign(mean_batch_size=clean["mean_batch_size"].where(~validation, clean["mean_batch_size"] * 3))
    predictions = [evaluate_setting(frame, setting, catalog, hardware, public_schedules).predictions
                   for frame in (clean, altered)]
    sim = [rows[rows["predictor"] == SIM] for rows in predictions]
    for column in ("predicted_throughput", "predicted_e2e_s", "predicted_mean_batch_size"):
        assert sim[0][column].tolist() == sim[1][column].tolist()


def test_sim_and_slim_carry_conformal_intervals_whose_coverage_table3_reports(public_evaluations, public_mapes):
    predictions = pd.concat([e.predictions for e in public_evaluations], ignore_index=True)
    validation = predictions[predictions[col.ROLE] == "validate"]
    for predictor in (SLIM, SIM):
        rows = validation[validation[col.PREDICTOR] == predictor]
        low, high = rows[col.PREDICTED_THROUGHPUT_CONFORMAL_LOW], rows[col.PREDICTED_THROUGHPUT_CONFORMAL_HIGH]
        assert (low < rows[col.PREDICTED_THROUGHPUT]).all() and (rows[col.PREDICTED_THROUGHPUT] < high).all()
        mapes = public_mapes[public_mapes[col.PREDICTOR] == predictor].set_index(col.SETTING)
        for setting, group in rows.groupby(col.SETTING):
            inside = ((group[col.PREDICTED_THROUGHPUT_CONFORMAL_LOW] <= group[col.MEASURED_THROUGHPUT])
                      & (group[col.MEASURED_THROUGHPUT] <= group[col.PREDICTED_THROUGHPUT_CONFORMAL_HIGH]))
            assert mapes.loc[setting, col.COVERAGE_THROUGHPUT_PCT] == pytest.approx(100 * inside.mean())
    others = validation[validation[col.PREDICTOR] == IMAI]
    assert others[col.PREDICTED_THROUGHPUT_CONFORMAL_LOW].isna().all()


def test_conformal_quantile_is_the_finite_sample_rank():
    from slim.model.conformal import conformal_bounds, conformal_quantile

    scores = np.arange(1.0, 10.0)                       # 9 scores: rank ceil(10 x 0.9) = 9
    assert conformal_quantile(scores, 0.9) == 9.0
    assert conformal_quantile(scores[:8], 0.9) == np.inf   # 8 scores cannot give 90 %
    low, high = conformal_bounds(np.array([10.0]), np.full(9, np.log(2.0)), 0.9)
    assert low[0] == pytest.approx(5.0) and high[0] == pytest.approx(20.0)
    assert np.isnan(conformal_bounds(np.array([10.0]), scores[:3], 0.9)[0]).all()


def test_extrapolation_folds_step_along_the_coordinate_the_setting_extrapolates():
    from slim.model.conformal import curve_folds, extrapolation_folds

    train = pd.DataFrame({col.MODEL: ["a"] * 3 + ["b"] * 3, col.INPUT_LEN_NOMINAL: [128.0] * 6,
                          col.OUTPUT_LEN_NOMINAL: [128.0, 256.0, 512.0] * 2, col.MAX_NUM_SEQS: [1.0] * 6,
                          col.TENSOR_PARALLEL: [1] * 6})
    longer = pd.DataFrame({col.MODEL: ["a"], col.INPUT_LEN_NOMINAL: [128.0], col.OUTPUT_LEN_NOMINAL: [1024.0],
                           col.MAX_NUM_SEQS: [1.0], col.TENSOR_PARALLEL: [2]})
    folds = extrapolation_folds(train, longer)
    # OL 256 from OL 128, OL 512 from 128 + 256; tensor parallelism has one training value: no fold
    assert [(sorted(set(fit[col.OUTPUT_LEN_NOMINAL])), sorted(set(rows[col.OUTPUT_LEN_NOMINAL])))
            for fit, rows in folds] == [([128.0], [256.0]), ([128.0, 256.0], [512.0])]
    other_model = longer.assign(**{col.MODEL: ["c"], col.OUTPUT_LEN_NOMINAL: [256.0], col.TENSOR_PARALLEL: [1]})
    assert [sorted(set(rows[col.MODEL])) for _, rows in extrapolation_folds(train, other_model)] == [["a"], ["b"]]
    assert len(curve_folds(train)) == 6
