"""The predictor contract: every registered predictor fits on a frame of runs and predicts any frame of
configurations, with its interval where it has one and its range over the training-equivalent fits."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.errors import FitError
from slim.model.equations import SlimParams, predict_frame
from slim.paper.predictor_tables import table3_labels, table4_labels
from slim.predictors import (
    IMAI,
    LLMVISOR,
    REGISTRY,
    SIM,
    SLIM,
    SLIM_PREDICTED_BATCH,
    TrainingRuns,
    advise_predictors,
    registered,
    tune_predictors,
)
from slim.predictors.contract import E2E, MEAN_BATCH, THROUGHPUT
from slim.predictors.slim_model import FittedSlim, ideal_slim_params
from slim.sim import SimConstants
from slim.sim.schedule_costs import prediction_costs
from slim.sim.schedules import ScheduleKey, ScheduleTable, simulate_schedules
from slim.specs.architecture import MODELS_FILE, load_architectures
from slim.specs.hardware import HARDWARE_FILE, load_hardware
from slim.tune.belief import tune_prior

CATALOG = load_architectures(MODELS_FILE)
H100 = load_hardware(HARDWARE_FILE)["h100-64gb"]
TRUTH = SlimParams(eta_compute=0.55, eta_memory=0.7, batch_offset=6.0, alpha_s_per_token=1.2e-3,
                   gamma_s_per_token=15e-6, t_fixed_s=0.08)


def synthetic_runs(seed: int = 0) -> pd.DataFrame:
    """Runs whose throughput is SLIM's at `TRUTH` with 2% seeded noise, in the clean table's columns."""
    grid = list(itertools.product(("opt-1.3b", "mistral-7b"), (128.0, 512.0), (64.0, 256.0), (1, 4, 16, 64)))
    frame = pd.DataFrame(grid, columns=[col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.MAX_NUM_SEQS])
    frame[col.MEAN_BATCH_SIZE] = frame[col.MAX_NUM_SEQS].astype(float) * 0.9
    _, throughput = predict_frame(CATALOG, H100, TRUTH, frame)
    noise = 1 + 0.02 * np.random.default_rng(seed).standard_normal(len(frame))
    frame[col.TOTAL_TOKEN_THROUGHPUT] = throughput * noise
    frame[col.E2E_LATENCY_S] = (frame[col.MEAN_BATCH_SIZE] * (frame[col.INPUT_LEN_MEAN] + frame[col.OUTPUT_LEN_MEAN])
                                / frame[col.TOTAL_TOKEN_THROUGHPUT])
    frame[col.MEAN_ITL_MS] = 1000 * frame[col.E2E_LATENCY_S] / frame[col.OUTPUT_LEN_MEAN]
    frame[col.INPUT_LEN_NOMINAL] = frame[col.INPUT_LEN_MEAN].astype(int)
    frame[col.OUTPUT_LEN_NOMINAL] = frame[col.OUTPUT_LEN_MEAN].astype(int)
    frame[col.TENSOR_PARALLEL] = 1
    frame[col.RUN_ID] = [f"run-{index}" for index in range(len(frame))]
    return frame


def test_the_registry_names_every_predictor_once_in_table_order():
    names = [entry.name for entry in REGISTRY]
    assert len(names) == len(set(names))
    assert table3_labels(set()) == (SLIM, LLMVISOR, IMAI)
    assert table3_labels({SIM, SLIM_PREDICTED_BATCH}) == (SLIM, LLMVISOR, IMAI, SIM, SLIM_PREDICTED_BATCH)
    assert table4_labels()[0] == SLIM and len(table4_labels()) == 3
    assert set(advise_predictors()) == {"slim", "sim"}
    with pytest.raises(KeyError, match="registered: SLIM"):
        registered("no such predictor")


@pytest.mark.parametrize("name", [SLIM, "SLIM w/o KV scan", "SLIM w/o dense decode", LLMVISOR, IMAI])
def test_each_predictor_fits_runs_and_predicts_configurations(name):
    runs = synthetic_runs()
    train, configs = runs[runs[col.MAX_NUM_SEQS] < 64], runs[runs[col.MAX_NUM_SEQS] == 64]
    fitted = registered(name).predictor.fit(TrainingRuns(train, CATALOG, H100, label="synthetic"))
    prediction = fitted.predict(configs, confidence=0.9)
    assert prediction.throughput_per_s.shape == (len(configs),)
    assert np.isfinite(prediction.throughput_per_s).all() and np.isfinite(prediction.e2e_latency_s).all()
    # The batch is an input of these predictors: they do not predict it.
    assert np.isnan(prediction.mean_batch).all()
    # Eq. 6 ties the two metrics at the measured batch.
    tokens = configs[col.MEAN_BATCH_SIZE] * (configs[col.INPUT_LEN_MEAN] + configs[col.OUTPUT_LEN_MEAN])
    np.testing.assert_allclose(prediction.throughput_per_s * prediction.e2e_latency_s, tokens, rtol=1e-9)
    frame = prediction.to_frame(configs.index)
    for metric in (THROUGHPUT, E2E):
        low, high = frame[f"{metric}_range_low"], frame[f"{metric}_range_high"]
        assert (low <= frame[metric] * (1 + 1e-12)).all() and (frame[metric] <= high * (1 + 1e-12)).all()
    if prediction.e2e_interval is not None:
        assert prediction.e2e_interval.confidence == 0.9
        assert (prediction.e2e_interval.low <= prediction.e2e_latency_s).all()
        assert (prediction.e2e_latency_s <= prediction.e2e_interval.high).all()
        assert (prediction.throughput_interval.low <= prediction.throughput_per_s * (1 + 1e-12)).all()
    refit = fitted.refit(TrainingRuns(train[train[col.MODEL] == "opt-1.3b"], CATALOG, H100, label="one model"))
    assert refit is not None and np.isfinite(refit.predict(configs).throughput_per_s).all()


def test_slim_has_an_interval_and_the_baselines_say_what_the_data_determine():
    runs = synthetic_runs()
    train, configs = runs[runs[col.MAX_NUM_SEQS] < 64], runs[runs[col.MAX_NUM_SEQS] == 64]
    training = TrainingRuns(train, CATALOG, H100, label="synthetic")
    slim = registered(SLIM).predictor.fit(training).predict(configs, 0.9)
    assert slim.e2e_interval is not None and (slim.e2e_interval.high > slim.e2e_interval.low).all()
    assert slim.alternatives and slim.determined is None
    llmvisor = registered(LLMVISOR).predictor.fit(training).predict(configs, 0.9)
    assert llmvisor.e2e_interval is None and llmvisor.determined is not None
    # Without an asked confidence there is no interval at all.
    assert registered(SLIM).predictor.fit(training).predict(configs).e2e_interval is None


def test_llmvisor_without_inter_token_latencies_is_not_fitted_and_says_why():
    runs = synthetic_runs().drop(columns=[col.MEAN_ITL_MS])
    fitted = registered(LLMVISOR).predictor.fit(TrainingRuns(runs, CATALOG, H100))
    prediction = fitted.predict(runs)
    assert np.isnan(prediction.throughput_per_s).all()
    assert "inter-token latency" in prediction.not_fitted


def test_slim_without_a_measured_batch_predicts_at_the_batch_the_cap_allows():
    fitted = FittedSlim.at_constants(SLIM, TRUTH, CATALOG, H100)
    configs = pd.DataFrame({col.MODEL: ["opt-1.3b"] * 3, col.INPUT_LEN_MEAN: [128.0] * 3,
                            col.OUTPUT_LEN_MEAN: [64.0] * 3, col.MAX_NUM_SEQS: [8, 64, 512],
                            col.NUM_PROMPTS: [1000, 1000, 100], col.KV_CAPACITY_TOKENS: [1e9, 192.0 * 40, 1e9],
                            col.BENCHMARK_MODE: [col.BenchmarkMode.ONLINE] * 3})
    prediction = fitted.predict(configs)
    # the cap; the KV capacity (40 sequences of 192 tokens); the prompts.
    np.testing.assert_array_equal(prediction.mean_batch, [8.0, 40.0, 100.0])
    at_batch = configs.assign(**{col.MEAN_BATCH_SIZE: prediction.mean_batch})
    np.testing.assert_allclose(fitted.predict(at_batch).throughput_per_s, prediction.throughput_per_s, rtol=1e-12)


@pytest.fixture(scope="module")
def sim_runs() -> tuple[pd.DataFrame, ScheduleTable]:
    """Runs of SIM's own making at known constants, with their cached schedules."""
    keys = [ScheduleKey(model, 128, 64, batch, 60) for model in ("opt-125m", "opt-1.3b") for batch in (1, 8, 32)]
    truth = SimConstants().with_fitted({"gemm_compute_efficiency": 0.45, "gemm_memory_efficiency": 0.85})
    schedules = simulate_schedules(keys, CATALOG, H100, truth)
    frame = pd.DataFrame({col.MODEL: [key.model for key in keys], col.INPUT_LEN_MEAN: 128.0,
                          col.OUTPUT_LEN_MEAN: 64.0, col.MAX_NUM_SEQS: [key.max_num_seqs for key in keys],
                          col.NUM_PROMPTS: 60})
    simulated = prediction_costs(frame, schedules, CATALOG, H100).predict(truth)
    frame[col.TOTAL_TOKEN_THROUGHPUT] = simulated.throughput_per_s
    frame[col.MEAN_BATCH_SIZE] = simulated.mean_batch_size
    return frame, schedules


def test_sim_and_slim_at_sims_batch_predict_the_batch_too(sim_runs):
    runs, schedules = sim_runs
    training = TrainingRuns(runs, CATALOG, H100, schedules, label="simulated", sample_valley=False)
    configs = runs.drop(columns=[col.MEAN_BATCH_SIZE, col.TOTAL_TOKEN_THROUGHPUT])
    sim = training.fitted(registered(SIM).predictor).predict(configs)
    np.testing.assert_allclose(sim.throughput_per_s, runs[col.TOTAL_TOKEN_THROUGHPUT], rtol=1e-3)
    np.testing.assert_allclose(sim.mean_batch, runs[col.MEAN_BATCH_SIZE], rtol=1e-3)
    assert sim.alternatives[0][MEAN_BATCH] is not None and sim.e2e_interval is None
    both = registered(SLIM_PREDICTED_BATCH).predictor.fit(training)
    assert both.sim is training.fits[SIM]   # the fit is shared, not repeated
    np.testing.assert_array_equal(both.predict(configs).mean_batch, sim.mean_batch)


def test_sim_without_schedules_is_a_clear_error():
    with pytest.raises(FitError, match="cached simulator schedules"):
        registered(SIM).predictor.fit(TrainingRuns(synthetic_runs(), CATALOG, H100, label="no schedules"))


def test_slim_tune_starts_from_each_registered_prior_fitted_on_no_run(sim_runs):

    runs, schedules = sim_runs
    configs = runs.drop(columns=[col.MEAN_BATCH_SIZE, col.TOTAL_TOKEN_THROUGHPUT])
    assert list(tune_predictors()) == ["slim", "sim"]
    slim = tune_prior(tune_predictors()["slim"], CATALOG, H100).predict(configs)
    ideal = FittedSlim.at_constants(SLIM, ideal_slim_params(H100), CATALOG, H100).predict(configs)
    np.testing.assert_array_equal(slim.throughput_per_s, ideal.throughput_per_s)
    # SIM's prior runs at its schedule table's constants, not at any calibration.
    sim = tune_prior(tune_predictors()["sim"], CATALOG, H100, schedules).predict(configs)
    np.testing.assert_array_equal(
        sim.throughput_per_s, prediction_costs(configs, schedules, CATALOG, H100).predict(schedules.constants)
        .throughput_per_s)
    with pytest.raises(FitError, match="schedule table"):
        tune_prior(tune_predictors()["sim"], CATALOG, H100)
