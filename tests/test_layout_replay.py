"""The layout decision replayed on curves at several layouts (slim.paper.replay.layouts): the best
(layout, cap) per GPU, each policy's runs and GPU time, GPUs charged per server, the tabled prior."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.paper.replay.curves import RunNoise, SloKind
from slim.paper.replay.layout_summary import layout_goals, layout_summary
from slim.paper.replay.layouts import LayoutReplayInputs, layout_truth, layout_workloads, replay_layouts
from slim.paper.replay.priors import TabledPrior, tabled_replay_prior
from slim.tune.belief import CONFIG_COLUMNS
from slim.tune.session import TuneSettings

CAPS = (4, 8, 16, 32, 64, 128)
TPOT_25 = SloKind("tpot_25", ("mean_tpot_ms=25",))


def curve_rows(tp: int, dp: int, per_gpu_peak: float, tpot_at_4: float, model: str = "llama-3.1-70b-fp8",
               hardware: str = "h100-sxm-80gb") -> pd.DataFrame:
    """A synthetic online curve at one layout: throughput saturating at `per_gpu_peak` x its GPUs,
    TPOT growing with the cap from `tpot_at_4` ms."""
    gpus = tp * dp
    rows = []
    for i, cap in enumerate(CAPS):
        throughput = per_gpu_peak * gpus * cap / (cap + 24.0)
        tpot = tpot_at_4 * (cap / 4.0) ** 0.35
        prompts = 10 * cap
        tokens = prompts * 2048.0
        rows.append({col.RUN_ID: f"{model}-tp{tp}-dp{dp}-{cap}", col.HARDWARE: hardware, col.MODEL: model,
                     col.INPUT_LEN_NOMINAL: 1024.0, col.OUTPUT_LEN_NOMINAL: 1024.0, col.INPUT_LEN_MEAN: 1024.0,
                     col.OUTPUT_LEN_MEAN: 1024.0, col.MAX_NUM_SEQS: float(cap), col.MAX_CONCURRENCY: float(cap),
                     col.TOTAL_TOKEN_THROUGHPUT: throughput, col.MEAN_TPOT_MS: tpot,
                     col.MEAN_TTFT_MS: 50.0 + i, col.E2E_LATENCY_S: (50.0 + 1023 * tpot) / 1e3,
                     col.MEAN_BATCH_SIZE: float(cap), col.DURATION_S: tokens / throughput,
                     col.KV_CAPACITY_TOKENS: 1e6, col.NUM_GPU_BLOCKS: np.nan, col.BLOCK_SIZE: 16.0,
                     col.NUM_PROMPTS: float(prompts), col.BENCHMARK_MODE: col.BenchmarkMode.ONLINE,
                     col.TENSOR_PARALLEL: float(tp), col.DATA_PARALLEL: float(dp),
                     col.GPUS_PER_SERVER: float(gpus), col.STATUS: "ok"})
    return pd.DataFrame(rows)


@pytest.fixture
def two_layouts() -> pd.DataFrame:
    """TP 2 makes the most tokens per GPU but is slow per token; TP 4 is faster per token."""
    return pd.concat([curve_rows(2, 1, 1000.0, 14.0), curve_rows(4, 1, 800.0, 8.0)], ignore_index=True)


def inputs(prior=None) -> LayoutReplayInputs:
    return LayoutReplayInputs(prior, TuneSettings(margin=0.5), {}, {}, 0.02)


def test_the_best_layout_is_the_one_of_most_tokens_per_gpu_within_the_slo(two_layouts):
    [workload], skipped = layout_workloads(two_layouts, TPOT_25)
    assert skipped == [] and [lc.layout for lc in workload.layouts] == ["TP 2", "TP 4"]
    truth = layout_truth(workload, 0.1)
    # TP 2 reaches 25 ms at a smaller cap than TP 4, whose per-GPU throughput there is higher.
    tp2, tp4 = (lc.curve for lc in workload.layouts)
    tp2_cap = max(c for c in CAPS if tp2.recorded(c, col.MEAN_TPOT_MS) <= 25)
    tp4_cap = max(c for c in CAPS if tp4.recorded(c, col.MEAN_TPOT_MS) <= 25)
    per_gpu = {"TP 2": tp2.recorded(tp2_cap, col.TOTAL_TOKEN_THROUGHPUT) / 2,
               "TP 4": tp4.recorded(tp4_cap, col.TOTAL_TOKEN_THROUGHPUT) / 4}
    best = max(per_gpu, key=per_gpu.get)
    assert workload.layouts[truth.layout].layout == best
    assert truth.per_gpu == pytest.approx(per_gpu[best])
    unbounded = layout_truth(layout_workloads(two_layouts, SloKind("none", ()))[0][0], 0.1)
    assert workload.layouts[unbounded.layout].layout == "TP 2"     # without the SLO TP 2's peak wins


def test_each_policy_pays_for_its_own_runs_and_the_exhaustive_sweep_has_no_regret(two_layouts):
    table, caps, notes = replay_layouts(two_layouts, [TPOT_25], 0.1, [RunNoise()], inputs())
    by_policy = table.set_index("policy")
    every = sum(two_layouts[col.DURATION_S] * two_layouts[col.GPUS_PER_SERVER])
    assert by_policy.loc["exhaustive", "gpu_seconds"] == pytest.approx(every)
    assert by_policy.loc["exhaustive", "regret_pct"] == pytest.approx(0.0)
    assert by_policy.loc["exhaustive", "runs"] == len(two_layouts)
    assert by_policy.loc["floor", "runs"] == 1
    assert (by_policy.loc["floor", "gpu_seconds"] <= by_policy.loc["hindsight_layout", "gpu_seconds"]
            <= by_policy.loc["bisection_per_layout", "gpu_seconds"] < every)
    bisection = caps[caps["policy"] == "bisect"]["gpu_seconds"].sum()
    assert by_policy.loc["bisection_per_layout", "gpu_seconds"] == pytest.approx(bisection)
    assert "tune_per_layout" not in by_policy.index
    assert any("no out-of-sample prior" in line for line in notes)


def test_a_server_of_several_data_parallel_ranks_is_charged_every_gpu():
    frame = pd.concat([curve_rows(4, 1, 900.0, 9.0), curve_rows(4, 2, 900.0, 9.0)], ignore_index=True)
    [workload], _ = layout_workloads(frame, TPOT_25)
    single, double = workload.layouts
    assert (single.layout, double.layout, double.gpus) == ("TP 4", "TP 4 x DP 2", 8)
    assert double.curve.run_gpu_seconds(16.0) == pytest.approx(
        float(frame[(frame[col.DATA_PARALLEL] == 2) & (frame[col.MAX_NUM_SEQS] == 16)][col.DURATION_S].iloc[0]) * 8)
    # the same tokens/s per GPU: the tie goes to the layout of fewer GPUs
    assert workload.layouts[layout_truth(workload, 0.1).layout].layout == "TP 4"


def test_a_workload_at_one_layout_is_counted_not_replayed():
    frame = pd.concat([curve_rows(2, 1, 1000.0, 14.0), curve_rows(2, 1, 1000.0, 14.0, model="qwen3-32b")],
                      ignore_index=True)
    table, _, notes = replay_layouts(frame, [TPOT_25], 0.1, [RunNoise()], inputs())
    assert table.empty
    assert any(line.startswith("2 workload(s) with a curve at fewer than two layouts") for line in notes)


def test_runs_of_another_vllm_version_are_another_workload_not_one_curve(two_layouts):
    """A cap measured on another engine (or one that records no version) joins neither the curve nor its
    truth: the faster engine's run at cap 128 would otherwise be the best of the vLLM 0.18.0 curve."""
    frame = two_layouts.assign(**{col.VLLM_VERSION: "0.18.0"})
    other = frame[frame[col.MAX_NUM_SEQS] >= 64].assign(**{col.VLLM_VERSION: "0.11.2"})
    other[col.TOTAL_TOKEN_THROUGHPUT] *= 5.0
    other[col.MEAN_TPOT_MS] /= 4.0
    unrecorded = frame[frame[col.MAX_NUM_SEQS] <= 8].assign(**{col.VLLM_VERSION: None})
    mixed = pd.concat([frame[frame[col.MAX_NUM_SEQS] < 64], other, unrecorded], ignore_index=True)
    workloads, _ = layout_workloads(mixed, TPOT_25)
    labels = [w.label for w in workloads]
    assert labels == ["llama-3.1-70b-fp8 IL 1024 OL 1024 on h100-sxm-80gb (vLLM version not recorded)",
                      "llama-3.1-70b-fp8 IL 1024 OL 1024 on h100-sxm-80gb (vLLM 0.11.2)",
                      "llama-3.1-70b-fp8 IL 1024 OL 1024 on h100-sxm-80gb (vLLM 0.18.0)"]
    newest = workloads[2]
    assert all(set(lc.curve.caps) == {4.0, 8.0, 16.0, 32.0} for lc in newest.layouts)
    assert layout_truth(newest, 0.1).cap <= 32.0
    # one version throughout: the label is the workload's alone
    [single], _ = layout_workloads(frame, TPOT_25)
    assert single.label == "llama-3.1-70b-fp8 IL 1024 OL 1024 on h100-sxm-80gb"


def predictions_of(frame: pd.DataFrame, factor: float) -> pd.DataFrame:
    return pd.DataFrame({col.RUN_ID: frame[col.RUN_ID],
                         "zero_shot_total_token_throughput": frame[col.TOTAL_TOKEN_THROUGHPUT] * factor,
                         "zero_shot_mean_tpot_ms": frame[col.MEAN_TPOT_MS] / factor,
                         "zero_shot_mean_ttft_ms": frame[col.MEAN_TTFT_MS] / factor})


def test_the_tabled_prior_reads_each_layout_and_data_parallel_size_back():
    frame = pd.concat([curve_rows(4, 1, 900.0, 9.0), curve_rows(4, 2, 700.0, 9.0)], ignore_index=True)
    prior = TabledPrior(frame.assign(prior_total_token_throughput=frame[col.TOTAL_TOKEN_THROUGHPUT],
                                     prior_mean_tpot_ms=frame[col.MEAN_TPOT_MS],
                                     prior_mean_ttft_ms=frame[col.MEAN_TTFT_MS]))
    configs = frame[list(CONFIG_COLUMNS) + [col.DATA_PARALLEL]]
    predicted = prior.predict(configs)
    np.testing.assert_allclose(predicted.throughput_per_s, frame[col.TOTAL_TOKEN_THROUGHPUT])
    unknown = configs.assign(**{col.MAX_NUM_SEQS: 3.0})
    assert np.isnan(prior.predict(unknown).throughput_per_s).all()
    offline = configs.assign(**{col.BENCHMARK_MODE: col.BenchmarkMode.OFFLINE_STATIC_BATCH})
    expected = offline[col.MAX_NUM_SEQS] * 2048.0 / frame[col.TOTAL_TOKEN_THROUGHPUT]
    np.testing.assert_allclose(prior.predict(offline).e2e_latency_s, expected)


def test_a_model_with_an_unpredicted_run_has_no_tabled_prior(two_layouts):
    predictions = predictions_of(two_layouts, 1.0)
    predictions.loc[0, "zero_shot_total_token_throughput"] = math.nan
    prior = tabled_replay_prior(predictions, two_layouts, "zero_shot_", "h100-sxm-80gb", "test")
    assert prior.by_model == {} and "1 of its 12 runs" in prior.missing["llama-3.1-70b-fp8"]


def test_tune_per_layout_replays_from_the_tabled_prior_and_the_goals_are_judged(two_layouts, catalog, h100):
    prior = tabled_replay_prior(predictions_of(two_layouts, 0.8), two_layouts, "zero_shot_", "h100-sxm-80gb",
                                "test")
    hardware = {"h100-sxm-80gb": h100}
    tuning = LayoutReplayInputs(prior, TuneSettings(margin=0.5), catalog, hardware, 0.02)
    table, caps, _ = replay_layouts(two_layouts, [TPOT_25], 0.1, [RunNoise(), RunNoise(0.02, 1)], tuning)
    tuned = table[table["policy"] == "tune_per_layout"]
    assert len(tuned) == 2
    per_layout = caps[caps["policy"] == "tune_sim"]
    assert sorted(per_layout["layout"].unique()) == ["TP 2", "TP 4"]
    assert tuned["gpu_seconds"].sum() == pytest.approx(per_layout["gpu_seconds"].sum())
    summary = layout_summary(table.assign(dataset="d"))
    goals = layout_goals(summary, pd.DataFrame(columns=["dataset", "policy"]))
    assert set(goals["goal"]) >= {"tune_per_layout: within 1% regret per GPU",
                                  "tune_per_layout: GPU time vs the bisection per layout"}
    same, _, _ = replay_layouts(two_layouts, [TPOT_25], 0.1, [RunNoise(), RunNoise(0.02, 1)], tuning)
    pd.testing.assert_frame_equal(table, same)


def test_tune_across_layouts_replays_data_parallel_layouts_beside_one_tensor_parallel_size(catalog, h100):
    """TP 4, TP 4 x DP 4 and TP 8: two layouts at TP 4, the data-parallel one the most per GPU."""
    frame = pd.concat([curve_rows(4, 1, 900.0, 12.0), curve_rows(4, 4, 1000.0, 9.0), curve_rows(8, 1, 700.0, 7.0)],
                      ignore_index=True)
    [workload], _ = layout_workloads(frame, TPOT_25)
    assert [lc.layout for lc in workload.layouts] == ["TP 4", "TP 8", "TP 4 x DP 4"]
    prior = tabled_replay_prior(predictions_of(frame, 0.8), frame, "zero_shot_", "h100-sxm-80gb", "test")
    tuning = LayoutReplayInputs(prior, TuneSettings(margin=0.5), catalog, {"h100-sxm-80gb": h100}, 0.02)
    table, _, _ = replay_layouts(frame, [TPOT_25], 0.1, [RunNoise()], tuning)
    [across] = table[table["policy"] == "tune_layouts"].to_dict("records")
    [exhaustive] = table[table["policy"] == "exhaustive"].to_dict("records")
    assert across["best_layout"] == "TP 4 x DP 4"
    assert (across["chosen_layout"], across["chosen_cap"]) == (exhaustive["chosen_layout"], exhaustive["chosen_cap"])
    assert across["regret_pct"] == pytest.approx(0.0) and 0 < across["gpu_seconds"] < exhaustive["gpu_seconds"]
    assert across["gpu_seconds"] <= 1.5 * across["bisection_gpu_seconds"] * (1 + 1e-9)
