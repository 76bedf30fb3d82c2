"""slim tune's core: the corrected belief and its conformal intervals, the decision certificate, the
next measurement, and the replay of every policy on synthetic static-batch curves."""

import json
import os
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from slim import columns as col
from slim.decision.candidates import CandidateView, Constraint, Estimates
from slim.decision.certificate import certify
from slim.paper.replay.curves import RunNoise, e2e_kind, expected_range_of_normals, repeat_scatter, replay_curves
from slim.paper.replay.dataset import ReplayOptions, replay_dataset
from slim.paper.replay.priors import slim_replay_prior
from slim.paper.replay.scoring import PER_DATASET, PER_WORKLOAD, REPLAY_COLUMNS
from slim.paper.replay.searches import model_free_caps
from slim.paper.replay.summary import summarise, summary_markdown, tuning_goals
from slim.specs.hardware import load_hardware
from slim.specs.slo import IN_BATCH_E2E
from slim.tune.belief import (
    CONFIG_COLUMNS,
    THROUGHPUT,
    PriorPrediction,
    ResidualKernel,
    ResidualProcess,
    belief,
    conformal_multiplier,
    prior_prediction,
    slim_prior,
)
from slim.tune.loop import run_loop
from slim.tune.measurement import Measurement
from slim.tune.session import TuneSession
from slim.tune.workload import WORKLOAD, Workload

CAPS = (1.0, 16.0, 32.0, 64.0)


def synthetic_runs(knee_by_model: dict[str, float], lengths=(128, 512)) -> pd.DataFrame:
    """Offline static batches of a made-up accelerator: ``T(B) = T1 B / (1 + B / knee)`` with a
    per-model knee and ``T1`` falling with the length; E2E is the batch's latency."""
    rows = []
    for model, knee in knee_by_model.items():
        for length in lengths:
            t_one = 40.0 * 2048 / (length + 512) * (2.0 if model == "opt-125m" else 1.0)
            for cap in CAPS:
                throughput = t_one * cap / (1.0 + cap / knee)
                latency = cap * 2 * length / throughput
                rows.append({col.MODEL: model, col.INPUT_LEN_NOMINAL: float(length),
                             col.OUTPUT_LEN_NOMINAL: float(length), col.INPUT_LEN_MEAN: float(length),
                             col.OUTPUT_LEN_MEAN: float(length), col.MAX_NUM_SEQS: cap, col.NUM_PROMPTS: cap,
                             col.BENCHMARK_MODE: col.BenchmarkMode.OFFLINE_STATIC_BATCH, col.TENSOR_PARALLEL: 1,
                             col.KV_CAPACITY_TOKENS: np.nan, col.TOTAL_TOKEN_THROUGHPUT: throughput,
                             col.E2E_LATENCY_S: latency, col.DURATION_S: latency, col.MEAN_BATCH_SIZE: cap,
                             col.INPUT_LEN_MEAN + "_": 0, col.NUM_GPU_BLOCKS: np.nan, col.BLOCK_SIZE: np.nan,
                             col.MEASUREMENT_SPREAD_PCT: np.nan})
    return pd.DataFrame(rows).drop(columns=[col.INPUT_LEN_MEAN + "_"])


@pytest.fixture(scope="module")
def hardware():
    return load_hardware()["h100-64gb"]


# --- the belief ----------------------------------------------------------------------------

def test_conformal_multiplier_takes_the_rank_and_falls_back_to_the_largest_score():
    scores = np.arange(1, 20, dtype=float) / 10          # 19 scores: rank ceil(20 x 0.9) = 18
    assert conformal_multiplier(scores, 0.9) == pytest.approx(1.8)
    assert conformal_multiplier(np.array([0.5, 3.0]), 0.9) == 3.0          # too few: the largest
    assert conformal_multiplier(np.array([0.1]), 0.9) == pytest.approx(1.6448536)   # or the normal quantile
    assert conformal_multiplier(np.zeros(0), 0.5) == pytest.approx(0.6744898)
    reference = np.linspace(0.1, 2.0, 199)                # out-of-sample scores: rank 180 of 199 -> 1.81
    assert conformal_multiplier(np.array([0.5, 3.0]), 0.9, reference) == 3.0
    assert conformal_multiplier(np.array([0.5]), 0.9, reference) == pytest.approx(reference[179])
    assert conformal_multiplier(scores / 2, 0.9, reference) == pytest.approx(reference[179]), \
        "a session's own scores never narrow the intervals below the out-of-sample rank"


def test_leave_one_out_scores_equal_refitting_without_the_run():
    kernel = ResidualKernel()
    rng = np.random.default_rng(5)
    coordinates = rng.normal(size=(7, 3))
    models = np.array(["a", "a", "a", "b", "b", "a", "c"])
    curves = np.array([0, 0, 1, 1, 2, 3, 4])
    residuals = rng.normal(scale=0.2, size=7)
    noise = np.full(7, 0.03)
    scores = ResidualProcess(kernel, coordinates, models, residuals, curves, noise).leave_one_out_scores()
    for i in range(7):
        keep = np.arange(7) != i
        rest = ResidualProcess(kernel, coordinates[keep], models[keep], residuals[keep], curves[keep], noise[keep])
        mean, sd = rest.predict(coordinates[i:i + 1], models[i:i + 1], 0.03)
        np.testing.assert_allclose(scores[i], np.abs(residuals[i] - mean[0]) / sd[0], rtol=1e-9)


def test_leave_one_curve_out_scores_equal_refitting_without_the_curve():
    kernel = ResidualKernel()
    rng = np.random.default_rng(7)
    coordinates = rng.normal(size=(9, 3))
    models = np.array(["a", "a", "a", "b", "b", "b", "a", "c", "c"])
    curves = np.array([0, 0, 1, 1, 2, 2, 3, 4, 4])
    residuals = rng.normal(scale=0.2, size=9)
    noise = np.full(9, 0.03)
    scores = ResidualProcess(kernel, coordinates, models, residuals, curves, noise).leave_one_curve_out_scores()
    for curve in np.unique(curves):
        keep, out = curves != curve, curves == curve
        rest = ResidualProcess(kernel, coordinates[keep], models[keep], residuals[keep], curves[keep], noise[keep])
        mean, sd = rest.predict(coordinates[out], models[out], 0.03)
        np.testing.assert_allclose(scores[out], np.abs(residuals[out] - mean) / sd, rtol=1e-9)


def _candidates(runs: pd.DataFrame) -> pd.DataFrame:
    candidates = runs[list(CONFIG_COLUMNS)].copy()
    candidates[WORKLOAD] = (runs[col.MODEL] + " IL " + runs[col.INPUT_LEN_NOMINAL].map("{:g}".format) + " OL "
                            + runs[col.OUTPUT_LEN_NOMINAL].map("{:g}".format))
    return candidates.reset_index(drop=True)


def test_a_measured_candidate_is_its_measurement_and_informs_its_neighbours_most():
    runs = synthetic_runs({"opt-125m": 24.0, "opt-1.3b": 12.0}, lengths=(128,))
    candidates = _candidates(runs)
    prior = PriorPrediction.of(np.full(len(runs), 100.0), np.full(len(runs), 1.0))
    measured = int(np.flatnonzero((candidates[col.MODEL] == "opt-125m") & (candidates[col.MAX_NUM_SEQS] == 16))[0])
    b = belief(candidates, prior, {THROUGHPUT: {measured: 150.0}, IN_BATCH_E2E: {measured: 800.0}},
               {measured: 0.01}, 0.9)
    assert b.throughput_per_s[measured] == 150.0 and b.e2e_latency_s[measured] == 0.8
    same_model = int(np.flatnonzero((candidates[col.MODEL] == "opt-125m") & (candidates[col.MAX_NUM_SEQS] == 32))[0])
    other_model = int(np.flatnonzero((candidates[col.MODEL] == "opt-1.3b") & (candidates[col.MAX_NUM_SEQS] == 32))[0])
    assert 100.0 < b.throughput_per_s[other_model] < b.throughput_per_s[same_model] < 150.0
    width = np.log(b.throughput_high) - np.log(b.throughput_low)
    assert width[same_model] < width[other_model]


def test_a_quantity_the_prior_cannot_predict_is_unknown_until_measured():
    runs = synthetic_runs({"opt-125m": 24.0}, lengths=(128,))
    candidates = _candidates(runs)
    prior = PriorPrediction.of(np.full(len(runs), 100.0), np.full(len(runs), 1.0),
                               p99_itl_ms=np.full(len(runs), np.nan))
    b = belief(candidates, prior, {THROUGHPUT: {1: 150.0}, IN_BATCH_E2E: {1: 800.0}, "p99_itl_ms": {1: 40.0}},
               {1: 0.02}, 0.9)
    itl = b["p99_itl_ms"]
    assert itl.mean[1] == 40.0 and itl.measured[1] and itl.low[1] < 40.0 < itl.high[1]
    assert np.isnan(itl.mean[2]) and itl.low[2] == 0.0 and itl.high[2] == np.inf and not itl.measured[2]


# --- the certificate -----------------------------------------------------------------------

def estimates(measured, values, bounds, log_sd=None) -> Estimates:
    measured = np.array(measured)
    values = np.array(values, dtype=float)
    low, high = (np.array([b[i] for b in bounds], dtype=float) for i in (0, 1))
    sd = np.zeros(len(values)) if log_sd is None else np.where(measured, log_sd, 0.0)
    return Estimates(measured, np.where(measured, values, np.nan), (low + high) / 2, low, high, sd)


def view(measured, t_measured, e_measured, t_bounds, e_bounds, caps=CAPS, slo_s=2.0, log_sd=None):
    """A view with the in-batch E2E as its one SLO (E2E in seconds, as the bound)."""
    scale = 1e3
    e = estimates(measured, np.array(e_measured, float) * scale, [(lo * scale, hi * scale) for lo, hi in e_bounds],
                  log_sd)
    return CandidateView(np.array(caps), np.zeros(len(caps), bool), estimates(measured, t_measured, t_bounds),
                         (Constraint(IN_BATCH_E2E, slo_s * scale, e),))


NAN = np.nan


def test_settled_when_no_unmeasured_cap_can_beat_the_measured_choice():
    certificate = certify(view([True, False, True, False], [10, NAN, 200, NAN], [1.0, NAN, 1.6, NAN],
                               [(10, 10), (90, 150), (200, 200), (150, 260)],
                               [(1, 1), (1.1, 1.3), (1.6, 1.6), (2.5, 3)]), epsilon=0.1)
    assert certificate.settled and certificate.batch_cap == 32.0
    reasons = {e.cap: e.reason for e in certificate.exclusions}
    assert "throughput upper bound" in reasons[16.0] and "mean_in_batch_e2e_ms lower bound" in reasons[64.0]


def test_open_while_an_unmeasured_cap_could_beat_it_by_more_than_the_tolerance():
    certificate = certify(view([True, False, True, False], [10, NAN, 200, NAN], [1.0, NAN, 1.6, NAN],
                               [(10, 10), (90, 150), (200, 200), (150, 260)],
                               [(1, 1), (1.1, 1.3), (1.6, 1.6), (1.7, 3)]), epsilon=0.1)
    assert not certificate.settled and certificate.challengers == (64.0,) and certificate.batch_cap == 32.0
    within = certify(view([True, False, True, False], [10, NAN, 200, NAN], [1.0, NAN, 1.6, NAN],
                          [(10, 10), (90, 150), (200, 200), (150, 201)], [(1, 1), (1.1, 1.3), (1.6, 1.6), (1.7, 3)]),
                     epsilon=0.1, tolerance=0.01)
    assert within.settled, "a cap that can beat the choice by at most 1 % does not keep it open"


def test_the_efficiency_floor_waits_for_t_of_one_when_its_bound_decides():
    # T(1) unknown within [1, 100]: at cap 64, 500 / (64 x 100) = 0.08 <= 0.1 could fail the floor
    certificate = certify(view([False, False, False, True], [NAN, NAN, NAN, 500], [NAN, NAN, NAN, 1.0],
                               [(1, 100), (10, 60), (20, 120), (500, 500)], [(0.5, 3), (3, 4), (3, 4), (1, 1)]),
                          epsilon=0.1)
    assert not certificate.settled and certificate.needs_throughput_at_one and not certificate.feasible


def test_settled_infeasible_when_every_cap_is_excluded_by_the_slo():
    certificate = certify(view([True, False, False, False], [10, NAN, NAN, NAN], [3.0, NAN, NAN, NAN],
                               [(10, 10), (90, 150), (150, 220), (150, 260)], [(3, 3), (3.1, 4), (3.5, 5), (4, 6)]),
                          epsilon=0.1)
    assert certificate.settled and not certificate.feasible


def test_a_cap_above_one_measured_over_an_slo_is_excluded_without_a_bound():
    # Nothing predicts p99 ITL (interval 0 to inf): 32 measured over its SLO rules 64 out, as a bisection would.
    itl = Estimates(np.array([True, True, True, False]), np.array([10.0, 20.0, 60.0, NAN]), np.full(4, NAN),
                    np.zeros(4), np.full(4, np.inf), np.zeros(4))
    throughput = estimates([True, True, True, False], [10, 150, 200, NAN], [(10, 10), (150, 150), (200, 200),
                                                                            (150, 300)])
    certificate = certify(CandidateView(np.array(CAPS), np.zeros(4, bool), throughput,
                                        (Constraint("p99_itl_ms", 50.0, itl),)), epsilon=0.1)
    assert certificate.settled and certificate.batch_cap == 16.0
    reasons = {e.cap: e.reason for e in certificate.exclusions}
    assert reasons[32.0].startswith("measured p99_itl_ms 60") and "smaller cap 32" in reasons[64.0]


# --- the loop and the replay ---------------------------------------------------------------

def test_the_loop_measures_until_settled_and_respects_a_run_budget(catalog, hardware):
    runs = synthetic_runs({"opt-125m": 24.0, "opt-1.3b": 12.0})
    candidates = _candidates(runs)
    prior = prior_prediction(slim_prior(catalog, hardware), candidates)
    first_e2e = runs[runs[col.MAX_NUM_SEQS] == 1].groupby(candidates[WORKLOAD])[col.E2E_LATENCY_S].first()
    workloads = [Workload.in_batch(m, il, ol, 4.0 * first_e2e[label])
                 for label, (m, il, ol) in candidates.groupby(WORKLOAD)[[col.MODEL, col.INPUT_LEN_NOMINAL,
                                                                         col.OUTPUT_LEN_NOMINAL]].first().iterrows()]

    def oracle(proposal):
        run = runs.iloc[proposal.candidate]
        return Measurement(run[col.TOTAL_TOKEN_THROUGHPUT], run[col.E2E_LATENCY_S], run[col.DURATION_S])

    outcome = run_loop(TuneSession(workloads, candidates, prior), oracle)
    assert outcome.stopped == "settled"
    assert all(c.settled and np.isfinite(c.batch_cap) for c in outcome.certificates.values())
    assert len(outcome.steps) < len(runs)
    limited = run_loop(TuneSession(workloads, candidates, prior), oracle, budget_runs=2)
    assert len(limited.steps) == 2 and limited.stopped == "run budget"
    failing = run_loop(TuneSession(workloads, candidates, prior), lambda proposal: None, budget_runs=50)
    assert not any(s.usable for s in failing.steps)
    assert len({s.candidate for s in failing.steps}) == len(failing.steps), "a failed run is never retried"


def test_model_free_doubles_until_the_gain_falls_under_epsilon():
    # T(B) ~ B / (1 + B / 2): 16 -> 32 gains 6 % < 10 %, so the search stops at 32; 32's efficiency
    # T(32) / (32 T(1)) = 0.088 is under the floor, so it chooses 16
    runs = synthetic_runs({"opt-125m": 2.0}, lengths=(128,))
    curves, _ = replay_curves(runs, e2e_kind(100.0))
    measured, chosen = model_free_caps(curves[0], epsilon=0.1)
    assert measured == [1.0, 16.0, 32.0]
    assert chosen == 16.0


def test_descend_stops_at_the_largest_cap_within_the_slo_and_bisect_halves_the_caps():
    # knee 24: E2E(B) / E2E(1) = 1 + B / 24, so under an SLO of 2.5 x E2E(1) caps up to 32 (2.33x) hold
    runs = synthetic_runs({"opt-125m": 24.0}, lengths=(128,))
    curve = replay_curves(runs, e2e_kind(2.5))[0][0]
    assert model_free_caps(curve, 0.1, "descend") == ([1.0, 64.0, 32.0], 32.0)
    assert model_free_caps(curve, 0.1, "bisect") == ([1.0, 32.0, 64.0], 32.0)
    assert curve.gpu_seconds([1.0]) == 0.0, "the SLO's reference run is free"
    assert curve.gpu_seconds([1.0, 32.0]) == pytest.approx(curve.recorded(32.0, col.DURATION_S))


def test_noise_is_the_same_run_for_every_policy_of_a_seed_and_another_for_another_seed():
    runs = synthetic_runs({"opt-125m": 24.0}, lengths=(128,))
    curve = replay_curves(runs, e2e_kind(2.5))[0][0]
    first, again, other = RunNoise(0.02, 1), RunNoise(0.02, 1), RunNoise(0.02, 2)
    assert first.observe(curve, 32.0) == again.observe(curve, 32.0) != other.observe(curve, 32.0)
    observed = first.observe(curve, 32.0)
    assert observed[THROUGHPUT] / curve.recorded(32.0, col.TOTAL_TOKEN_THROUGHPUT) == pytest.approx(
        1e3 * curve.recorded(32.0, col.E2E_LATENCY_S) / observed[IN_BATCH_E2E]), "a slower run is slower in both"
    assert RunNoise().observe(curve, 32.0) == {THROUGHPUT: curve.recorded(32.0, col.TOTAL_TOKEN_THROUGHPUT),
                                               IN_BATCH_E2E: 1e3 * curve.recorded(32.0, col.E2E_LATENCY_S)}


def test_the_repeat_scatter_is_the_spread_over_the_expected_range():
    assert expected_range_of_normals(2) == pytest.approx(2 / np.sqrt(np.pi), rel=1e-6)
    frame = pd.DataFrame({col.N_MEASUREMENTS: [1, 2, 2, 3], col.MEASUREMENT_SPREAD_PCT: [np.nan, 1.128379, 3.0, 1.693]})
    scatter, source = repeat_scatter(frame)
    assert scatter == pytest.approx(0.01, rel=1e-3) and "median of 3 repeated" in source
    assert repeat_scatter(frame.iloc[:1]) == (0.02, "2% (no repeated runs)")


def replay(runs, catalog, hardware, seeds=2):
    priors = {"tune_slim": slim_replay_prior(runs, catalog, hardware)}
    return replay_dataset(runs, catalog, hardware, 0.1, 3.0, None, None, priors, ReplayOptions(seeds=seeds),
                          "synthetic")


def test_the_replay_charges_what_each_policy_measures_and_scores_its_regret(catalog, hardware):
    runs = synthetic_runs({"opt-125m": 24.0, "opt-1.3b": 12.0, "opt-2.7b": 6.0})
    table, calibration, notes = replay(runs, catalog, hardware)
    assert list(table.columns) == list(REPLAY_COLUMNS)
    assert set(table["seed"]) == {0, 1, 2} and set(table.loc[table["seed"] == 0, "noise"]) == {0.0}
    assert set(table.loc[table["seed"] > 0, "noise"]) == {0.02}, "2 % where the dataset has no repeats"
    assert set(table["policy"]) == {"full_profile", "descend", "bisect", "doubling", "tune_slim"}
    assert set(table.loc[table["policy"] == "tune_slim", "session"]) == {PER_WORKLOAD, PER_DATASET}
    clean = table[table["seed"] == 0]
    full = clean[clean["policy"] == "full_profile"]
    assert (full["gpu_seconds"] == full["full_profile_gpu_seconds"]).all() and (full["regret_pct"] == 0).all()
    assert (table["floor_gpu_seconds"] <= table["full_profile_gpu_seconds"]).all()
    measured_only_choice = table[(table["policy"] != "full_profile") & (table["regret_pct"] <= 0)]
    assert (measured_only_choice["gpu_seconds"] >= measured_only_choice["floor_gpu_seconds"] - 1e-9).all()
    tuned = clean[clean["policy"] == "tune_slim"]
    assert not tuned["slo_violated"].any() and not any("open" in line for line in notes)
    assert (tuned["regret_pct"] <= 1.0 + 1e-9).all()
    for session in (PER_WORKLOAD, PER_DATASET):
        assert tuned.loc[tuned["session"] == session, "gpu_seconds"].sum() < full["gpu_seconds"].sum()
    assert any("paper_plan" in line for line in notes) and any("tune_sim" in line for line in notes)
    summary = summarise({"synthetic": table})
    assert {"mean_curve_gpu_pct", "mean_curve_floor_pct", "regret_over_1pct_pct"} <= set(summary.columns)
    calibration = calibration.assign(dataset="synthetic")
    text = summary_markdown(summary, calibration, {"synthetic": notes}, ["synthetic"])
    assert "| tune_slim | per_workload |" in text and "Not replayed" not in text and "relied_on" in text
    goals = tuning_goals(summary, calibration, ["synthetic"])
    assert list(goals["policy"]) == ["tune_slim"]
    noisy = summary[summary["noisy"] & (summary["session"] == PER_WORKLOAD)
                    & summary["policy"].isin(["descend", "bisect", "doubling"])]
    cheapest = noisy[noisy["within_1pct_share"] >= 0.95].sort_values("gpu_seconds").iloc[0]
    assert goals["best_model_free"].iloc[0] == cheapest["policy"]
    assert goals["model_free_gpu_time_pct"].iloc[0] == pytest.approx(cheapest["gpu_time_pct_of_full"])


def test_the_replay_is_the_same_under_a_1e_9_perturbation_and_a_shuffled_table(catalog, hardware):
    runs = synthetic_runs({"opt-125m": 24.0, "opt-1.3b": 12.0})
    reference, _, _ = replay(runs, catalog, hardware)
    moved = runs.copy()
    factor = 1.0 + 1e-9 * np.random.default_rng(1).uniform(-1, 1, len(runs))
    moved[col.TOTAL_TOKEN_THROUGHPUT] *= factor
    moved[col.E2E_LATENCY_S] /= factor
    moved = moved.sample(frac=1.0, random_state=3)
    other, _, _ = replay(moved, catalog, hardware)
    keys = ["curve", "policy", "runs", "chosen_cap", "full_profile_cap"]
    pd.testing.assert_frame_equal(reference[keys], other[keys])


REPLAY_SCRIPT = """
import json, sys
import pandas as pd
from threadpoolctl import threadpool_info
sys.path.insert(0, {tests!r})
from test_tune import synthetic_runs, replay
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware
table, _, _ = replay(synthetic_runs({{"opt-125m": 24.0, "opt-1.3b": 12.0}}), load_architectures(),
                     load_hardware()["h100-64gb"])
print(json.dumps(table[["curve", "policy", "runs", "chosen_cap"]].astype(str).values.tolist()))
print(json.dumps([i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"]))
"""


@pytest.mark.integration
def test_the_replay_is_the_same_under_every_blas_kernel(tmp_path):
    from test_fit_invariance import supported_kernels

    kernels = supported_kernels()
    if not kernels:
        pytest.skip("no x86-64 OpenBLAS kernels to compare on this CPU")
    script = tmp_path / "replay.py"
    script.write_text(REPLAY_SCRIPT.format(tests=str(REPO / "tests")))
    outputs = {}
    for kernel in [None, *kernels]:
        env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_CORETYPE"}
        if kernel is not None:
            env["OPENBLAS_CORETYPE"] = kernel
        result = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        outputs[kernel] = json.loads(result.stdout.splitlines()[-2])
    reference = outputs[None]
    for kernel, decisions in outputs.items():
        assert decisions == reference, f"the replay differs under OPENBLAS_CORETYPE={kernel}"


# --- what a dataset cannot support is absent, with a line ------------------------------------

def _clean(runs: pd.DataFrame) -> pd.DataFrame:
    clean = runs.copy()
    clean[col.RUN_ID] = [f"run{i}" for i in range(len(clean))]
    clean[col.MEAN_TTFT_MS] = clean[col.MEAN_TPOT_MS] = clean[col.MEAN_ITL_MS] = np.nan
    return clean


def test_a_setting_without_runs_in_the_dataset_reads_n_a_in_table3(catalog, hardware):
    from slim.paper.advisor_study import table6
    from slim.paper.heldout import NO_RUNS_NOTE, evaluate_setting, mape_table
    from slim.paper.splits import HeldOutSetting
    from slim.paper.tables import mape_matrix

    clean = _clean(synthetic_runs({"opt-125m": 24.0, "opt-1.3b": 12.0}))
    transfer = HeldOutSetting("model", "Model", train={col.MODEL: ["opt-125m"]}, validate={col.MODEL: ["opt-1.3b"]})
    tensor_parallel = HeldOutSetting("tensor_parallel", "TP", train={col.TENSOR_PARALLEL: [1]},
                                     validate={col.TENSOR_PARALLEL: [2, 4]})
    empty = evaluate_setting(clean, tensor_parallel, catalog, hardware)
    assert empty.predictions.empty and empty.no_runs.startswith(NO_RUNS_NOTE)
    assert "validation selector" in empty.no_runs and empty.fits_as_dict() == {"no_runs": empty.no_runs}
    full = evaluate_setting(clean, transfer, catalog, hardware)
    predictions = pd.concat([full.predictions, empty.predictions], ignore_index=True)
    assert predictions[col.PREDICTED_THROUGHPUT].dtype == float
    matrix = mape_matrix(mape_table(predictions, pd.concat([full.identifiability, empty.identifiability])),
                         [transfer, tensor_parallel], ("SLIM",))
    assert matrix.loc["TP"].iloc[0] == NO_RUNS_NOTE and matrix.loc["Model"].iloc[0] not in (NO_RUNS_NOTE, "")
    cost = table6(clean, [transfer, tensor_parallel])
    assert list(cost["setting"]) == ["Model", "Mean"]


def test_a_curve_the_dataset_lacks_is_absent_from_table5_and_fig13():
    from slim.paper.advisor_study import available_curves, available_experiments
    from slim.paper.advisor_study_config import CurveSelection, Table5Experiment

    clean = _clean(synthetic_runs({"opt-125m": 24.0}))
    present = CurveSelection("OPT-125M", {col.MODEL: ["opt-125m"], col.INPUT_LEN_NOMINAL: [128]})
    missing = CurveSelection("Mistral-7B", {col.MODEL: ["mistral-7b"], col.INPUT_LEN_NOMINAL: [128]})
    kept, lines = available_curves(clean, (present, missing), "Fig. 13")
    assert kept == (present,) and len(lines) == 1 and "'Mistral-7B' is absent" in lines[0]
    training = (CurveSelection("OPT-125M 512", {col.MODEL: ["opt-125m"], col.INPUT_LEN_NOMINAL: [512]}),)
    experiments = (Table5Experiment(present, training), Table5Experiment(missing, training),
                   Table5Experiment(present, (missing,)))
    kept, lines = available_experiments(clean, experiments)
    assert kept == experiments[:1] and len(lines) == 2


def test_fig9_lists_a_setting_without_runs_as_n_a():
    from slim.paper.heldout import NO_RUNS_NOTE, with_no_runs_noted
    from slim.paper.splits import HeldOutSetting

    settings = [HeldOutSetting("model", "Model", train={col.MODEL: ["a"]}, validate={col.MODEL: ["b"]}),
                HeldOutSetting("tp", "TP", train={col.TENSOR_PARALLEL: [1]}, validate={col.TENSOR_PARALLEL: [2]})]
    noted = with_no_runs_noted(settings, pd.DataFrame({col.SETTING: ["model", "model"]}))
    assert noted[0] == settings[0] and noted[1].not_applicable == NO_RUNS_NOTE


# --- measurements under run-to-run noise ----------------------------------------------------------

def noisy_view(e2e_measured, repeatable=(True, True, True, True), sd=0.02):
    base = view([True, False, True, True], [10, NAN, 200, 260], e2e_measured,
                [(10, 10), (90, 150), (200, 200), (260, 260)], [(1, 1), (1.1, 1.3), (1.6, 1.6), (2.5, 2.5)], log_sd=sd)
    return replace(base, repeatable=np.array(repeatable))


def test_a_measurement_within_the_noise_of_the_slo_is_repeated_where_its_side_decides():
    # the incumbent (32) measured 1 % under the SLO: with 2 % scatter it may truly break it
    close = certify(noisy_view([1.0, NAN, 1.98, 3.0]), epsilon=0.1, noise_z=1.2816)
    assert close.batch_cap == 32.0 and not close.settled and close.repeat == (32.0,)
    assert certify(noisy_view([1.0, NAN, 1.98, 3.0]), epsilon=0.1).settled, "exact without noise_z"
    spent = certify(noisy_view([1.0, NAN, 1.98, 3.0], repeatable=(True, True, False, True)), 0.1, noise_z=1.2816)
    assert spent.settled and spent.repeat == (), "a cap run its maximum times is taken as measured"
    # 64 measured 1 % over the SLO would beat 32 if it met it: it may truly meet it
    over = certify(noisy_view([1.0, NAN, 1.5, 2.02]), epsilon=0.1, noise_z=1.2816)
    assert over.batch_cap == 32.0 and over.repeat == (64.0,) and not over.settled
    far = certify(noisy_view([1.0, NAN, 1.5, 3.0]), epsilon=0.1, noise_z=1.2816)
    assert far.settled and far.repeat == ()


def test_repeated_runs_of_a_cap_combine_into_one_measurement_of_smaller_scatter():
    first, second = Measurement(100.0, 2.0, 10.0, 0.02), Measurement(121.0, 2.42, 12.0, 0.02)
    both = first.combined(second)
    assert both.runs == 2 and both.gpu_seconds == 22.0
    assert both.throughput_per_s == pytest.approx(110.0) and both.e2e_latency_s == pytest.approx(2.2)
    assert both.log_sd == pytest.approx(0.02 / np.sqrt(2))


def test_the_oracle_draws_a_new_run_for_each_repeat_and_charges_it(catalog, hardware):
    from slim.paper.replay.scoring import ReplayRun
    from slim.paper.replay.tune_policy import oracle
    from slim.tune.proposals import Proposal

    runs = synthetic_runs({"opt-125m": 24.0}, lengths=(128,))
    curve = replay_curves(runs, e2e_kind(2.5))[0][0]
    measure = oracle([curve], RunNoise(0.02, 3))
    ask = Proposal(0, curve.label, 32.0, 1.0, 0.0, 0.0, 0.0, "test")
    first, again = measure(ask), measure(ask)
    assert first.throughput_per_s != again.throughput_per_s and first.gpu_seconds == again.gpu_seconds > 0
    observed = RunNoise(0.02, 3).observe(curve, 32.0)
    assert first.throughput_per_s == observed[THROUGHPUT], "the first run is every policy's"
    assert curve.gpu_seconds([1.0, 32.0, 32.0]) == pytest.approx(2 * first.gpu_seconds)
    assert ReplayRun("tune_sim").session == PER_WORKLOAD


@pytest.mark.parametrize("wrong", ["bandwidth and compute x0.5", "bandwidth and compute x2", "biased across caps"])
def test_a_prior_wrong_by_2x_never_costs_more_than_bisect_plus_the_margin(catalog, hardware, wrong):
    from slim.paper.replay.priors import CapBiasedPrior, PriorSource, scaled_hardware
    from slim.tune.session import TuneSettings

    runs = synthetic_runs({"opt-125m": 24.0, "opt-1.3b": 6.0, "opt-2.7b": 96.0})
    if wrong.startswith("bandwidth"):
        prior = slim_replay_prior(runs, catalog, scaled_hardware(hardware, 0.5 if "x0.5" in wrong else 2.0))
    else:
        honest = slim_replay_prior(runs, catalog, hardware)
        prior = replace(honest, by_model={model: PriorSource(CapBiasedPrior("biased", source.predictor, 0.5),
                                                             source.fitted_on, "SLIM biased (cap / 16)^0.5")
                                          for model, source in honest.by_model.items()})
    margin = 0.5
    table, _, _ = replay_dataset(runs, catalog, hardware, 0.1, 2.5, None, None, {"tune_slim": prior},
                                 ReplayOptions(TuneSettings(margin=margin), seeds=3), "synthetic")
    per_curve = table[table["session"] == "per_workload"].pivot_table(
        index=["curve", "seed"], columns="policy", values="gpu_seconds", aggfunc="first")
    assert len(per_curve) == 6 * 4
    assert (per_curve["tune_slim"] <= (1 + margin) * per_curve["bisect"] * (1 + 1e-9)).all(), per_curve
    tuned = table[(table["policy"] == "tune_slim") & (table["session"] == "per_workload")]
    assert not tuned["slo_violated"].any()
