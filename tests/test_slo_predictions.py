"""The SLO metrics' held-out accuracy: each model predicted by a fit that never saw it, intervals from the
other models' errors only, and the frontier of every curve."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.model.equations import SlimParams, predict_frame
from slim.paper.figures.frontier import curve_file_name, dataset_frontiers, measured_choice
from slim.paper.slo_predictions import slo_accuracy, slo_accuracy_markdown, slo_predictions
from slim.predictors import SLIM
from slim.specs.architecture import MODELS_FILE, load_architectures
from slim.specs.hardware import HARDWARE_FILE, load_hardware
from slim.specs.slo import Slos

CATALOG = load_architectures(MODELS_FILE)
H100 = load_hardware(HARDWARE_FILE)["h100-64gb"]
TRUTH = SlimParams(eta_compute=0.55, eta_memory=0.7, batch_offset=6.0, alpha_s_per_token=1.2e-3,
                   gamma_s_per_token=15e-6, t_fixed_s=0.08)
METRICS = ("mean_tpot_ms", "p99_tpot_ms", "mean_e2el_ms", "mean_in_batch_e2e_ms")


def runs(models=("opt-1.3b", "opt-2.7b", "mistral-7b"), seed: int = 0) -> pd.DataFrame:
    grid = list(itertools.product(models, (128.0, 512.0), (64.0, 256.0), (1, 4, 16, 64)))
    frame = pd.DataFrame(grid, columns=[col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.MAX_NUM_SEQS])
    frame[col.MEAN_BATCH_SIZE] = frame[col.MAX_NUM_SEQS].astype(float) * 0.9
    _, throughput = predict_frame(CATALOG, H100, TRUTH, frame)
    noise = 1 + 0.03 * np.random.default_rng(seed).standard_normal(len(frame))
    frame[col.TOTAL_TOKEN_THROUGHPUT] = throughput * noise
    frame[col.E2E_LATENCY_S] = (frame[col.MEAN_BATCH_SIZE] * (frame[col.INPUT_LEN_MEAN] + frame[col.OUTPUT_LEN_MEAN])
                                / frame[col.TOTAL_TOKEN_THROUGHPUT])
    frame["mean_tpot_ms"] = 1e3 * frame[col.E2E_LATENCY_S] / frame[col.OUTPUT_LEN_MEAN]
    frame["p99_tpot_ms"] = 1.3 * frame["mean_tpot_ms"]
    frame[col.INPUT_LEN_NOMINAL] = frame[col.INPUT_LEN_MEAN].astype(int)
    frame[col.OUTPUT_LEN_NOMINAL] = frame[col.OUTPUT_LEN_MEAN].astype(int)
    frame[col.TENSOR_PARALLEL] = 1
    frame[col.RUN_ID] = [f"run-{index}" for index in range(len(frame))]
    return frame


def predictions(frame: pd.DataFrame) -> pd.DataFrame:
    return slo_predictions(frame, CATALOG, H100, None, 0.9, METRICS, (SLIM,))


def test_a_model_is_predicted_by_a_fit_that_never_saw_its_runs():
    frame = runs()
    reference = predictions(frame)
    moved = frame.copy()
    mine = moved[col.MODEL] == "opt-2.7b"
    moved.loc[mine, col.TOTAL_TOKEN_THROUGHPUT] *= 3.0
    moved.loc[mine, col.E2E_LATENCY_S] /= 3.0
    changed = predictions(moved)
    # Its own predictions do not move: none of its runs was in their fit ...
    np.testing.assert_allclose(changed.loc[mine, f"{SLIM}_throughput"], reference.loc[mine, f"{SLIM}_throughput"],
                               rtol=1e-6)
    # ... but the other models' do (it is in theirs), and so do its intervals' widths (the others' errors).
    assert not np.allclose(changed.loc[~mine, f"{SLIM}_throughput"], reference.loc[~mine, f"{SLIM}_throughput"],
                           rtol=1e-3)


def test_the_accuracy_reports_mape_coverage_and_why_a_cell_is_empty():
    table = predictions(runs())
    accuracy = slo_accuracy(table, 0.9, (SLIM,), METRICS).set_index("metric")
    measured, predicted = table["measured_mean_tpot_ms"], table[f"{SLIM}_mean_tpot_ms"]
    assert accuracy.loc["mean_tpot_ms", "mape_pct"] == pytest.approx(100 * np.mean(np.abs(predicted / measured - 1)))
    inside = (measured >= table[f"{SLIM}_mean_tpot_ms_low"]) & (measured <= table[f"{SLIM}_mean_tpot_ms_high"])
    assert accuracy.loc["mean_tpot_ms", "coverage_pct"] == pytest.approx(100 * inside.mean())
    assert 60 <= accuracy.loc["mean_tpot_ms", "coverage_pct"] <= 100
    assert accuracy.loc["p99_tpot_ms", "runs_predicted"] == 0
    assert "mean TPOT only" in accuracy.loc["p99_tpot_ms", "note"]
    assert accuracy.loc["mean_e2el_ms", "note"] == "the runs do not record it"
    text = slo_accuracy_markdown(accuracy.reset_index(), "synthetic")
    assert "| p99_tpot_ms | -- (SLIM's equations" in text and "interval covers" in text


def test_one_model_alone_has_no_held_out_prediction():
    table = predictions(runs(models=("opt-1.3b",)))
    assert table[f"{SLIM}_throughput"].isna().all()
    accuracy = slo_accuracy(table, 0.9, (SLIM,), METRICS).set_index("metric")
    assert accuracy.loc["throughput", "note"] == "no held-out prediction"


def test_each_frontier_marks_the_measured_choice_within_the_bound():
    table = predictions(runs())
    frontiers = dataset_frontiers(table, Slos.of(["p99_tpot_ms=2x"]), SLIM)
    assert len(frontiers) == 3 * 2 * 2
    frontier = frontiers[0]
    rows = table[(table[col.MODEL] == "mistral-7b") & (table[col.INPUT_LEN_MEAN] == 128)
                 & (table[col.OUTPUT_LEN_MEAN] == 64)]
    limit = 2 * float(rows.loc[rows[col.MAX_NUM_SEQS] == 1, "measured_p99_tpot_ms"].iloc[0])
    within = rows[rows["measured_p99_tpot_ms"] <= limit]
    assert frontier.chosen_cap == within.loc[within["measured_throughput"].idxmax(), col.MAX_NUM_SEQS]
    assert frontier.bounds[0][0] == pytest.approx(1000 / limit)
    assert curve_file_name(frontier) == "mistral-7b_il128_ol64"
    assert {p.measured for p in frontier.points} == {True, False}


def test_a_curve_without_its_reference_run_has_no_bound():
    table = predictions(runs())
    table = table[table[col.MAX_NUM_SEQS] > 1]
    frontier = dataset_frontiers(table, Slos.of(["p99_tpot_ms=2x"]), SLIM)[0]
    assert frontier.bounds == () and math.isnan(frontier.chosen_cap) and "no run at cap 1" in frontier.note
    assert math.isnan(measured_choice(table.iloc[:3], {"p99_tpot_ms": 0.0}))
