"""A data-parallel server predicted from its ranks (`slim.predictors.data_parallel`): a row at TP t x DP
d and cap B is d ranks at TP t, each holding its share of the B requests in flight, so SIM and SLIM
predict d x the throughput of one rank at B / d with that rank's latencies; rows at DP 1 (or NaN, or
without the column) are predicted exactly as before; `slim tune`'s prior and `slim advise` use it."""

import json

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.decision.layouts import Layout
from slim.predictors import tune_predictors
from slim.predictors.data_parallel import rank_rows
from slim.sim.constants import SIM_CONSTANTS_FILE, load_sim_constants
from slim.sim.schedules import ScheduleTable
from slim.specs.architecture import load_architectures
from slim.specs.data_parallel import RankShare, per_rank_cap, rank_shares
from slim.specs.hardware import load_hardware
from slim.specs.slo import SloMetric, Slos
from slim.tune.belief import prior_prediction, tune_prior

MODEL = "opt-1.3b"
METRICS = tuple(SloMetric.parse(name) for name in ("mean_in_batch_e2e_ms", "mean_tpot_ms", "p99_tpot_ms",
                                                    "mean_ttft_ms", "median_e2el_ms"))


def row(tensor_parallel: int, data_parallel, cap: float, prompts: float) -> dict:
    return {col.MODEL: MODEL, col.INPUT_LEN_NOMINAL: 256.0, col.OUTPUT_LEN_NOMINAL: 128.0,
            col.INPUT_LEN_MEAN: 256.0, col.OUTPUT_LEN_MEAN: 128.0, col.MAX_NUM_SEQS: float(cap),
            col.NUM_PROMPTS: float(prompts), col.BENCHMARK_MODE: col.BenchmarkMode.ONLINE,
            col.TENSOR_PARALLEL: tensor_parallel, col.DATA_PARALLEL: data_parallel,
            col.KV_CAPACITY_TOKENS: np.nan, col.MAX_CONCURRENCY: float(cap)}


@pytest.fixture(scope="module", params=["sim", "slim"])
def prior(request):
    """`slim tune`'s prior (SIM at its shipped constants, SLIM at the ideal roofline) on an A100 80 GB."""
    entry = tune_predictors()[request.param]
    schedules = ScheduleTable([], load_sim_constants(SIM_CONSTANTS_FILE)) if entry.needs_schedules else None
    return tune_prior(entry, load_architectures(), load_hardware()["a100-80gb"], schedules)


def test_the_share_rule_splits_the_requests_in_flight_as_vllms_load_balancer_does():
    assert rank_shares(64, 4) == (RankShare(16, 4),)
    assert rank_shares(63, 4) == (RankShare(16, 3), RankShare(15, 1))
    assert rank_shares(2, 4) == (RankShare(1, 2),), "idle ranks hold nothing"
    assert rank_shares(16, 1) == (RankShare(16, 1),)
    assert per_rank_cap(63, 4) == per_rank_cap(64, 4) == 16
    assert Layout.of_sizes(4, 4).per_rank_cap(63) == 16 and Layout.of_sizes(4, 1).per_rank_cap(63) == 63


@pytest.mark.parametrize("tensor_parallel, data_parallel, cap", [(1, 4, 64), (2, 4, 64), (2, 2, 32), (1, 4, 4)])
def test_a_data_parallel_row_is_d_times_the_throughput_of_one_rank_at_its_share_with_its_latencies(
        prior, tensor_parallel, data_parallel, cap):
    prompts = 4 * cap
    share = cap // data_parallel
    server = pd.DataFrame([row(tensor_parallel, data_parallel, cap, prompts)])
    rank = pd.DataFrame([row(tensor_parallel, 1, share, prompts // data_parallel)])
    of_server, of_rank = (prior_prediction(prior, frame, METRICS).values for frame in (server, rank))
    assert of_server["throughput"] == pytest.approx(data_parallel * of_rank["throughput"], rel=1e-12)
    for name, values in of_server.items():
        if name != "throughput":
            np.testing.assert_array_equal(values, of_rank[name], err_msg=name)
    assert of_server["mean_in_batch_e2e_ms"][0] > 0


def test_rows_at_data_parallel_1_or_none_are_predicted_exactly_as_before(prior):
    """Byte for byte the prediction of the engine alone (`_predict_engines`, what `predict` was), in a
    frame of their own and beside data-parallel rows."""
    caps = (1, 8, 64)
    engines = pd.DataFrame([row(2, 1, cap, 4 * cap) for cap in caps]).drop(columns=col.DATA_PARALLEL)
    before = engines.assign(**{col.DATA_PARALLEL: 1})
    expected = prior._predict_engines(before)
    frames = {"no column": engines, "DP 1": before, "NaN": engines.assign(**{col.DATA_PARALLEL: np.nan}),
              "beside DP 4": pd.concat([before, pd.DataFrame([row(2, 4, 64, 256), row(2, 4, 63, 256)])],
                                       ignore_index=True)}
    for label, frame in frames.items():
        prediction = prior.predict(frame)
        for field in ("throughput_per_s", "e2e_latency_s", "mean_batch"):
            got = np.asarray(getattr(prediction, field), dtype=float)[:len(caps)]
            assert got.tobytes() == np.asarray(getattr(expected, field), dtype=float).tobytes(), (label, field)
    latencies = prior.predict_latencies(frames["beside DP 4"], METRICS)
    alone = prior._engine_latencies(before, METRICS, None)
    for name, values in alone.items():
        assert values.tobytes() == latencies[name][:len(caps)].tobytes(), name


def test_an_uneven_share_sums_the_two_rank_kinds_and_takes_the_worse_ranks_percentile(prior):
    server = pd.DataFrame([row(1, 4, 63, 252)])
    ranks = rank_rows(server)
    assert ranks.frame[col.MAX_NUM_SEQS].tolist() == [16.0, 15.0] and ranks.ranks.tolist() == [3.0, 1.0]
    assert ranks.frame[col.MAX_CONCURRENCY].tolist() == [16.0, 15.0]
    assert ranks.frame[col.NUM_PROMPTS].tolist() == [64.0, 60.0] and (ranks.frame[col.DATA_PARALLEL] == 1).all()
    of_server = prior_prediction(prior, server, METRICS).values
    high, low = (prior_prediction(prior, ranks.frame.iloc[[i]], METRICS).values for i in (0, 1))
    assert of_server["throughput"][0] == pytest.approx(3 * high["throughput"][0] + low["throughput"][0], rel=1e-12)
    for name in ("mean_in_batch_e2e_ms", "mean_tpot_ms"):
        lo, hi = sorted([high[name][0], low[name][0]])
        assert lo <= of_server[name][0] <= hi, name
    if np.isfinite(high["p99_tpot_ms"][0]):
        assert of_server["p99_tpot_ms"][0] == max(high["p99_tpot_ms"][0], low["p99_tpot_ms"][0])


# --- slim tune's prior and slim advise -------------------------------------------------------------------

def _tune_priors(capsys, tmp_path, predictor: str) -> dict[tuple[str, int], dict]:
    from slim.cli import main

    code = main(["tune", "--traces", str(tmp_path), "--workload", "facebook/opt-1.3b:128:32", "--hardware",
                 "a100-sxm-40gb", "--num-prompts", "64", "--candidates", "1,16,64", "--slo-ms", "150",
                 "--tensor-parallel-sizes", "4", "--data-parallel-sizes", "1,4", "--gpus", "16",
                 "--predictor", predictor, "--json"])
    body = json.loads(capsys.readouterr().out)
    assert code == 0
    return {(w["workload"].split(" TP ", 1)[1], c["max_num_seqs"]): c["prior"]
            for w in body["workloads"] for c in w["candidates"]}


def test_tunes_prior_of_tp4_x_dp4_at_cap_64_is_4_x_tp4_at_cap_16(tmp_path, capsys):
    """SLIM's prior reads the prompts only as a bound on the batch, so the two rows are exactly one rank
    and four (each rank gets 16 of the 64 prompts)."""
    priors = _tune_priors(capsys, tmp_path, "slim")
    server, rank = priors[("4 x DP 4", 64)], priors[("4", 16)]
    assert server["total_token_throughput"] == pytest.approx(4 * rank["total_token_throughput"], rel=1e-12)
    assert server["mean_in_batch_e2e_ms"] == pytest.approx(rank["mean_in_batch_e2e_ms"], rel=1e-12)
    assert priors[("4 x DP 4", 1)] == priors[("4", 1)], "one request in flight keeps one rank busy"


def test_tunes_sim_prior_of_a_data_parallel_layout_is_its_ranks(tmp_path, capsys):
    """SIM's rank at cap 16 serves 16 prompts where TP 4's cap 16 serves 64: close, not equal."""
    priors = _tune_priors(capsys, tmp_path, "sim")
    server, rank, one_engine = priors[("4 x DP 4", 64)], priors[("4", 16)], priors[("4", 64)]
    assert server["total_token_throughput"] == pytest.approx(4 * rank["total_token_throughput"], rel=0.1)
    assert server["total_token_throughput"] > 1.5 * one_engine["total_token_throughput"]
    assert server["mean_in_batch_e2e_ms"] < one_engine["mean_in_batch_e2e_ms"]


def test_advise_predicts_a_data_parallel_layout_from_its_ranks():
    """`predictor_advice` at 4 ranks predicts the candidates as their ranks: what it predicts at cap 64
    is 4 x (SLIM) its prediction at cap 16 and 1 rank."""
    from slim.advisor.predictions import predictor_advice
    from slim.advisor.request import AdviceRequest
    from slim.predictors import advise_predictors

    catalog, hw = load_architectures(), load_hardware()["a100-80gb"]
    request = AdviceRequest(traces=".", model=MODEL, hardware=hw.name, input_len=256.0, output_len=128.0,
                            slos=Slos.of(["mean_tpot_ms=50"]), candidates=(1, 16, 64), predictor="slim",
                            num_prompts=256)
    runs = pd.DataFrame(columns=[col.MODEL, col.MAX_NUM_SEQS, col.NUM_PROMPTS])

    def advise(data_parallel: int) -> dict[str, np.ndarray]:
        entry = advise_predictors()["slim"]
        return predictor_advice(entry, request, runs, catalog, hw, catalog[MODEL], float("nan"), runs,
                                throttled=True, tensor_parallel=1, data_parallel=data_parallel).predicted

    one, four = advise(1), advise(4)
    assert four["throughput"][2] == pytest.approx(4 * one["throughput"][1], rel=1e-12)
    assert four["mean_tpot_ms"][2] == pytest.approx(one["mean_tpot_ms"][1], rel=1e-12)
    assert four["throughput"][0] == one["throughput"][0]


def test_a_mixture_of_experts_server_steps_its_ranks_together_so_it_is_one_engine_with_every_request(prior):
    """vLLM shards MoE layers over all t x d GPUs, so the ranks step together: a MoE row at DP 4 is predicted
    as the engine carrying all B requests (as NVIDIA's MiniMax-M2.5 TP 4 x DP 4 runs measure), a dense one
    as its ranks."""
    from slim.predictors.data_parallel import moe_in_lockstep

    catalog = load_architectures()
    lockstep = moe_in_lockstep(catalog)
    assert lockstep("mixtral-8x7b") and lockstep("minimax-m2.5") and not lockstep(MODEL)
    assert not lockstep("no-such-model")
    moe = pd.DataFrame([{**row(4, 4, 64, 256), col.MODEL: "mixtral-8x7b"}, {**row(4, 4, 64, 256)}])
    ranks = rank_rows(moe, lockstep)
    assert list(ranks.split) == [False, True]
    assert ranks.frame[col.MAX_NUM_SEQS].tolist() == [64.0, 16.0]
    assert rank_rows(moe.iloc[:1], lockstep) is None


def test_a_dense_data_parallel_run_is_no_training_run_of_one_engine():
    """It measured the sum of its ranks, which no run splits: advise fits on DP 1 runs and on lockstep MoE runs."""
    from slim.predictors.data_parallel import moe_in_lockstep, one_engine_runs

    runs = pd.DataFrame([row(1, 1, 16, 64), row(1, 4, 64, 256), row(1, np.nan, 8, 32),
                         {**row(4, 4, 64, 256), col.MODEL: "mixtral-8x7b"}])
    assert one_engine_runs(runs, moe_in_lockstep(load_architectures())).tolist() == [True, False, True, True]
    assert one_engine_runs(runs).tolist() == [True, False, True, False]
    assert one_engine_runs(runs.iloc[:0]).tolist() == []
