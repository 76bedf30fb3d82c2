"""What `slim tune`'s replay believes before it measures: the residual kernel chosen by the evidence
(recovered from draws of a known kernel, the same under reordering and a 1e-9 perturbation, never
fitted on the dataset it replays) and priors that are out of sample on every replayed dataset (no
prior predicts a model's curves after being fitted on that model's runs of the dataset)."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from slim import columns as col
from slim.errors import SplitError
from slim.paper.advisor_study_config import load_bca_config
from slim.paper.replay.dataset import ReplayOptions, replay_dataset
from slim.paper.replay.priors import (
    PriorSource,
    ReplayPrior,
    constants_fitted_on,
    run_keys,
    sim_replay_prior,
    slim_replay_prior,
)
from slim.sim.constants import SIM_CONSTANTS_FILE
from slim.tune.belief import PriorPrediction, ResidualKernel
from slim.tune.kernel import (
    RESIDUAL_COLUMNS,
    ResidualSet,
    fit_kernels,
    fit_residual_kernel,
    load_kernels,
    negative_log_evidence,
    residual_sets,
    residual_table,
)
from slim.tune.measurement import Measurement
from slim.tune.proposals import propose
from slim.tune.session import TuneSession, TuneSettings
from slim.tune.workload import Workload

TRUE_KERNEL = ResidualKernel(offset_sd=0.3, slope_sd_per_doubling=0.06, model_offset_sd=0.1,
                             model_slope_sd_per_doubling=0.02, smooth_sd=0.12, length_scale_log2=1.5,
                             cross_model_correlation=0.5)


def residual_table_of_draws(kernel: ResidualKernel, datasets: int, seed: int = 3) -> pd.DataFrame:
    """`datasets` independent draws of the residual process on a grid of two models, three lengths
    and five caps (throughput and E2E drawn independently), as a residual table."""
    rng = np.random.default_rng(seed)
    grid = pd.DataFrame([(model, il, cap) for model in ("a", "b") for il in (128.0, 512.0, 2048.0)
                         for cap in (1.0, 4.0, 16.0, 64.0, 256.0)],
                        columns=[col.MODEL, col.INPUT_LEN_MEAN, col.MAX_NUM_SEQS])
    grid[col.OUTPUT_LEN_MEAN] = grid[col.INPUT_LEN_MEAN]
    coordinates, models = kernel.coordinates(grid), grid[col.MODEL].to_numpy()
    covariance = kernel.covariance(coordinates, models, coordinates, models) + 0.02 ** 2 * np.eye(len(grid))
    factor = np.linalg.cholesky(covariance)
    frames = []
    for d in range(datasets):
        draws = factor @ rng.standard_normal((len(grid), 2))
        frames.append(grid.assign(dataset=f"d{d}", policy="tune_sim",
                                  curve=grid[col.MODEL] + " IL " + grid[col.INPUT_LEN_MEAN].astype(str), scatter=0.02,
                                  log_residual_throughput=draws[:, 0], log_residual_e2e=draws[:, 1]))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def draws() -> pd.DataFrame:
    return residual_table_of_draws(TRUE_KERNEL, datasets=40)


def test_the_residual_table_names_each_runs_curve_and_its_log_residuals():
    """What rule tuning_residuals writes: one row per run, its curve, and log(measured / prior)."""
    runs = pd.DataFrame({col.MODEL: ["m", "m"], col.MAX_NUM_SEQS: [8.0, 16.0], col.INPUT_LEN_MEAN: [256.0, 256.0],
                         col.INPUT_LEN_NOMINAL: [256, 256], col.OUTPUT_LEN_NOMINAL: [128, 128],
                         col.OUTPUT_LEN_MEAN: [128.0, 128.0], col.TOTAL_TOKEN_THROUGHPUT: [1000.0, 1800.0],
                         col.E2E_LATENCY_S: [2.0, 3.0]})
    table = residual_table(runs, PriorPrediction.of(np.array([1000.0, 2000.0]), np.array([1.0, 3.0])), "d", "sim",
                           0.02)
    assert list(table.columns) == list(RESIDUAL_COLUMNS) and table["curve"].nunique() == 1
    np.testing.assert_allclose(table["log_residual_throughput"], [0.0, np.log(0.9)])
    np.testing.assert_allclose(table["log_residual_e2e"], [np.log(2.0), 0.0])


def test_the_evidence_recovers_the_scales_of_a_known_kernel(draws):
    fitted = fit_residual_kernel(residual_sets(draws))
    for name in ("offset_sd", "slope_sd_per_doubling", "smooth_sd", "length_scale_log2"):
        assert getattr(fitted, name) == pytest.approx(getattr(TRUE_KERNEL, name), rel=0.35), name
    sets = residual_sets(draws)
    assert negative_log_evidence(fitted, sets) < negative_log_evidence(ResidualKernel(), sets)


def test_the_fitted_kernel_is_the_same_under_reordering_and_a_1e_9_perturbation(draws):
    subset = draws[draws["dataset"].isin([f"d{d}" for d in range(8)])]
    reference = fit_residual_kernel(residual_sets(subset))
    moved = subset.sample(frac=1.0, random_state=4).copy()
    moved["log_residual_e2e"] += 1e-9 * np.random.default_rng(2).uniform(-1, 1, len(moved))
    assert fit_residual_kernel(residual_sets(moved)) == reference


def test_kernels_are_fitted_without_the_excluded_dataset_and_round_trip(draws, tmp_path):
    subset = draws[draws["dataset"].isin(["d0", "d1", "d2"])]
    kernels = fit_kernels(subset, {"tune_sim": "sim"}, exclude=["d1"])
    assert kernels.fitted_on == ("d0", "d2") and set(kernels.kernels) == {"sim"}
    assert kernels.kernel("slim") == ResidualKernel(), "a prior without evidence keeps the hand-set kernel"
    path = tmp_path / "kernels.yaml"
    path.write_text(kernels.to_yaml())
    assert load_kernels(path) == kernels


def test_the_shipped_kernels_name_the_real_datasets_they_were_fitted_on():
    shipped = load_kernels()
    assert set(shipped.kernels) == {"sim", "slim"} and shipped.fitted_on
    assert all(name.endswith("(real)") for name in shipped.fitted_on), "a simulated dataset is no evidence"
    assert shipped.kernel("slim").offset_sd > shipped.kernel("sim").offset_sd, \
        "the ideal roofline is further from the runs than the calibrated simulator"


# --- the proposal rule ------------------------------------------------------------------------

TIGHT_KERNEL = ResidualKernel(offset_sd=0.05, slope_sd_per_doubling=0.005, model_offset_sd=0.01,
                              model_slope_sd_per_doubling=0.001, smooth_sd=0.01)

def test_the_cap_most_likely_to_be_the_decision_is_measured_before_cheaper_ones():
    caps = np.array([1.0, 16.0, 32.0, 64.0])
    candidates = pd.DataFrame({col.MODEL: "opt-125m", col.INPUT_LEN_NOMINAL: 128.0, col.OUTPUT_LEN_NOMINAL: 128.0,
                               col.INPUT_LEN_MEAN: 128.0, col.OUTPUT_LEN_MEAN: 128.0, col.MAX_NUM_SEQS: caps,
                               col.NUM_PROMPTS: caps, col.BENCHMARK_MODE: col.BenchmarkMode.OFFLINE_STATIC_BATCH,
                               col.TENSOR_PARALLEL: 1, col.KV_CAPACITY_TOKENS: np.nan, "workload": "w"})
    throughput = 100.0 * caps / (1.0 + caps / 48.0)
    e2e = caps * 256 / throughput
    workload = Workload.in_batch("opt-125m", 128, 128, slo_s=float(e2e[2] * 1.1), epsilon=0.1)
    session = TuneSession([workload], candidates.assign(workload=workload.label),
                          PriorPrediction.of(throughput, e2e), TuneSettings(kernel=TIGHT_KERNEL))
    session.record(0, Measurement(throughput[0], e2e[0], 0.0))
    chances = session.decision_probabilities(workload)
    assert chances.sum() == pytest.approx(1.0) and int(np.argmax(chances)) == 2
    assert propose(session)[0].max_num_seqs == 32.0, "not the cheapest cap: the likeliest decision"


# --- out-of-sample priors ------------------------------------------------------------------------

def test_every_prior_of_the_home_traces_is_fitted_without_the_model_it_predicts(public_clean, public_schedules,
                                                                                catalog, h100):
    _, clean = public_clean
    frame = load_bca_config(REPO / "config/bca/h100-public.yaml").study_rows(clean)
    shipped = constants_fitted_on(SIM_CONSTANTS_FILE, h100.name)
    assert shipped & run_keys(frame, h100.name), "the shipped constants were fitted on these traces"
    prior = sim_replay_prior(frame, catalog, h100, public_schedules, shipped)
    assert set(prior.by_model) == set(frame[col.MODEL]) and not prior.missing
    for model, source in prior.by_model.items():
        assert not source.fitted_on & run_keys(frame[frame[col.MODEL] == model], h100.name), model
        assert source.fitted_on, f"{model}: refitted on the other models"
    prior.check_out_of_sample(frame)
    in_sample = ReplayPrior("tune_sim", {m: PriorSource(s.predictor, shipped, "shipped") for m, s in
                                         prior.by_model.items()}, h100.name)
    with pytest.raises(SplitError, match="out-of-sample"):
        in_sample.check_out_of_sample(frame)
    assert not any(source.fitted_on for source in slim_replay_prior(frame, catalog, h100).by_model.values())


def test_the_shipped_constants_saw_none_of_the_other_accelerators_runs(shared_traces_dir):
    import yaml

    from slim.pipeline.config import check_config, with_catalog_defaults
    from slim.specs.architecture import load_architectures
    from slim.traces.clean import clean_runs
    from slim.traces.ingest import ingest_traces

    if not (shared_traces_dir.parent / "llm-inference-bench").is_dir():
        pytest.skip("LLM-Inference-Bench is not beside the checkout")
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    names = yaml.safe_load((REPO / "config" / "accelerators.yaml").read_text())["cross_accelerator"]["datasets"] \
        if "cross_accelerator" in yaml.safe_load((REPO / "config" / "accelerators.yaml").read_text()) \
        else raw["cross_accelerator"]["datasets"]
    raw["run_datasets"], raw["default_dataset"] = names, names[0]
    for section in ("characterisation", "simulator", "batch_scaling", "length_sweeps", "generalisation"):
        raw.pop(section, None)
    datasets = check_config(with_catalog_defaults(raw), REPO)
    for name in names:
        dataset = datasets[name]
        runs = ingest_traces(REPO / dataset.trace_dir, name, load_architectures(), dataset.ingest_options)
        usable = clean_runs(runs)[0]
        shipped = constants_fitted_on(SIM_CONSTANTS_FILE, dataset.hardware.name)
        assert len(usable) and not shipped & run_keys(usable, dataset.hardware.name), name


def test_a_replay_refuses_a_kernel_fitted_on_the_dataset_it_replays(catalog, h100):
    from test_tune import synthetic_runs

    runs = synthetic_runs({"opt-125m": 24.0}, lengths=(128,))
    kernels = fit_kernels(pd.DataFrame({"dataset": ["synthetic"], "policy": ["tune_slim"]}).iloc[:0], {})
    kernels = replace(kernels, fitted_on=("synthetic",))
    with pytest.raises(SplitError, match="other datasets only"):
        replay_dataset(runs, catalog, h100, 0.1, 3.0, None, None, {"tune_slim": slim_replay_prior(runs, catalog, h100)},
                       ReplayOptions(kernels=kernels, seeds=0), "synthetic")


def test_a_residual_set_carries_its_scatter_at_least_the_kernels_noise():
    table = residual_table_of_draws(TRUE_KERNEL, datasets=1).assign(scatter=0.001)
    sets = residual_sets(table)
    assert len(sets) == 2 and isinstance(sets[0], ResidualSet) and (sets[0].scatter == 0.02).all()
