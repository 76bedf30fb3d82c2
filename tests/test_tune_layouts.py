"""`slim tune` across parallel layouts on synthetic static-batch curves at tensor-parallel sizes 1, 2
and 4: with a prior wrong by 2x per doubling of the size (either way), the loop's GPU time stays
within (1 + margin) x a bisection over the caps at every layout, and its decision is the one made on
every (layout, cap) measured; the belief carries a run at one layout to the others with wider
intervals; the layouts' workloads, their pooled bound and what the decision excludes."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.decision.candidates import THROUGHPUT, Estimates, candidate_view
from slim.decision.certificate import certify
from slim.decision.layouts import Layout, LayoutCandidate, decide_layouts
from slim.specs.slo import IN_BATCH_E2E
from slim.tune.belief import CONFIG_COLUMNS, LayoutUncertainty, PriorPrediction, belief
from slim.tune.guard import ShadowBisection
from slim.tune.layouts import all_settled, layout_decisions, layout_groups, open_workloads, pooled_account
from slim.tune.loop import run_loop
from slim.tune.measurement import Measurement, Unusable
from slim.tune.session import TuneSession, TuneSettings
from slim.tune.workload import WORKLOAD, Workload

CAPS = (1.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
SIZES = (1, 2, 4)
LENGTH = 256
MODEL = "opt-1.3b"
EPSILON = 0.1
MARGIN = 0.5


def true_curve(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Throughput (tokens/s per server) and a static batch's latency (s) per cap: ``T = T1 B / (1 + B /
    16)`` with ``T1 = 50 t^0.8`` (a larger layout is faster per sequence but gives less per GPU)."""
    caps = np.array(CAPS)
    throughput = 50.0 * size ** 0.8 * caps / (1.0 + caps / 16.0)
    return throughput, caps * 2 * LENGTH / throughput


def candidates_table() -> pd.DataFrame:
    rows = []
    for size in SIZES:
        for cap in CAPS:
            rows.append({col.MODEL: MODEL, col.INPUT_LEN_NOMINAL: float(LENGTH), col.OUTPUT_LEN_NOMINAL: float(LENGTH),
                         col.INPUT_LEN_MEAN: float(LENGTH), col.OUTPUT_LEN_MEAN: float(LENGTH),
                         col.MAX_NUM_SEQS: cap, col.NUM_PROMPTS: cap,
                         col.BENCHMARK_MODE: col.BenchmarkMode.OFFLINE_STATIC_BATCH, col.TENSOR_PARALLEL: size,
                         col.KV_CAPACITY_TOKENS: np.nan})
    table = pd.DataFrame(rows)[list(CONFIG_COLUMNS)]
    table[WORKLOAD] = [f"{MODEL} IL {LENGTH} OL {LENGTH} TP {size}" for size in table[col.TENSOR_PARALLEL]]
    return table


def workloads(slo_s: float) -> list[Workload]:
    base = Workload.in_batch(MODEL, LENGTH, LENGTH, slo_s, EPSILON)
    return [Workload(base.model, base.input_len, base.output_len, base.slos, EPSILON, tensor_parallel=size)
            for size in SIZES]


def truth(table: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    throughput, latency = np.empty(len(table)), np.empty(len(table))
    for size in SIZES:
        rows = np.flatnonzero(table[col.TENSOR_PARALLEL].to_numpy() == size)
        throughput[rows], latency[rows] = true_curve(size)
    return throughput, latency


def wrong_prior(table: pd.DataFrame, per_doubling: float) -> PriorPrediction:
    """The truth x 1.3 (off by itself) x ``per_doubling^(log2 t)``: wrong by that factor per doubling of
    the tensor-parallel size, and by a trend across caps."""
    throughput, latency = truth(table)
    caps = table[col.MAX_NUM_SEQS].to_numpy(dtype=float)
    sizes = table[col.TENSOR_PARALLEL].to_numpy(dtype=float)
    factor = 1.3 * per_doubling ** np.log2(sizes) * (caps / 16.0) ** 0.1
    return PriorPrediction.of(throughput * factor, latency / factor)


def decision_on_every_run(slo_s: float):
    """The decision across layouts with every (layout, cap) measured."""
    candidates = []
    for size in SIZES:
        throughput, latency = true_curve(size)
        view = candidate_view(np.array(CAPS), lambda name: Estimates.facts(throughput if name == THROUGHPUT
                                                                           else 1e3 * latency),
                              {IN_BATCH_E2E: 1e3 * slo_s})
        candidates.append(LayoutCandidate(Layout.of_tensor_parallel(size), view, certify(view, EPSILON)))
    return decide_layouts(candidates, TuneSettings().tolerance)


def bisection_gpu_seconds(slo_s: float) -> float:
    """A plain search over the layouts: a bisection over the caps at each, each run charged its
    duration x its size."""
    total = 0.0
    for size in SIZES:
        _, latency = true_curve(size)
        probes, _, _, _ = ShadowBisection(len(CAPS)).follow(lambda p: bool(latency[p] <= slo_s))
        total += sum(latency[p] * size for p in probes)
    return total


def session_of(slo_s: float, per_doubling: float) -> TuneSession:
    table = candidates_table()
    return TuneSession(workloads(slo_s), table, wrong_prior(table, per_doubling),
                       TuneSettings(margin=MARGIN, layouts=LayoutUncertainty()))


def oracle_of(table: pd.DataFrame):
    throughput, latency = truth(table)
    sizes = table[col.TENSOR_PARALLEL].to_numpy(dtype=float)

    def measure(proposal) -> Measurement:
        i = proposal.candidate
        seconds = latency[i] * sizes[i]
        if proposal.limit_gpu_seconds is not None:     # a run past its limit is stopped there, unusable
            if seconds > proposal.limit_gpu_seconds:
                return Unusable(proposal.limit_gpu_seconds)
        return Measurement(throughput[i], latency[i], seconds)
    return measure


@pytest.mark.parametrize("slo_s", [30.0, 12.0])
@pytest.mark.parametrize("per_doubling", [2.0, 0.5])
def test_a_prior_wrong_by_2x_per_doubling_of_tp_keeps_the_bound_and_the_decision_of_every_run(slo_s, per_doubling):
    expected = decision_on_every_run(slo_s)
    assert expected.settled and expected.chosen.layout.tensor_parallel == (2 if slo_s == 30.0 else 4)
    session = session_of(slo_s, per_doubling)
    outcome = run_loop(session, oracle_of(session.candidates))
    assert outcome.stopped == "settled" and all_settled(session)
    decision = layout_decisions(session)[f"{MODEL} IL {LENGTH} OL {LENGTH}"]
    assert decision.settled
    assert (decision.chosen.layout, decision.chosen.batch_cap) == (expected.chosen.layout, expected.chosen.batch_cap)
    spent = sum(step.gpu_seconds for step in outcome.steps)
    assert spent <= (1 + MARGIN) * bisection_gpu_seconds(slo_s) * (1 + 1e-9)
    assert len(outcome.steps) < len(CAPS) * len(SIZES), "not every (layout, cap) is measured"


def test_trusting_the_priors_scaling_across_sizes_settles_on_the_wrong_layout():
    table = candidates_table()
    trusting = TuneSession(workloads(30.0), table, wrong_prior(table, 0.5), TuneSettings(margin=MARGIN))
    run_loop(trusting, oracle_of(table))
    decision = layout_decisions(trusting)[f"{MODEL} IL {LENGTH} OL {LENGTH}"]
    assert decision.settled and decision.chosen.layout != decision_on_every_run(30.0).chosen.layout


def test_a_layout_the_decision_excludes_takes_no_more_runs():
    session = session_of(30.0, 2.0)
    measure = oracle_of(session.candidates)
    outcome = run_loop(session, measure)
    steps_by_size = {size: [s for s in outcome.steps if s.workload.endswith(f"TP {size}")] for size in SIZES}
    decision = layout_decisions(session)[f"{MODEL} IL {LENGTH} OL {LENGTH}"]
    excluded = [v for v in decision.verdicts if v.excluded]
    assert excluded and all(v.reason for v in excluded)
    assert open_workloads(session, {f"{MODEL} IL {LENGTH} OL {LENGTH}": decision}) == []
    assert sum(len(steps) for steps in steps_by_size.values()) == len(outcome.steps)


def test_the_bound_is_pooled_over_a_curves_layouts():
    session = session_of(30.0, 2.0)
    measure = oracle_of(session.candidates)
    run_loop(session, measure, budget_runs=4)
    own = [session.account(w) for w in session.workloads]
    pooled = pooled_account(session, session.workloads[0])
    assert pooled.lower_bound_gpu_seconds == pytest.approx(sum(a.lower_bound_gpu_seconds for a in own))
    assert pooled.extra_gpu_seconds == pytest.approx(sum(a.extra_gpu_seconds for a in own))
    assert pooled.next_probe == own[0].next_probe
    assert pooled.limit_gpu_seconds == pytest.approx(
        max(MARGIN * pooled.lower_bound_gpu_seconds - pooled.extra_gpu_seconds, 0.0))


def test_a_run_at_one_layout_informs_the_others_with_wider_intervals_the_further_they_are():
    table = candidates_table()
    prior = PriorPrediction.of(np.full(len(table), 100.0), np.full(len(table), 1.0))
    at = int(np.flatnonzero((table[col.TENSOR_PARALLEL] == 1) & (table[col.MAX_NUM_SEQS] == 16))[0])
    measured = {THROUGHPUT: {at: 150.0}, IN_BATCH_E2E: {at: 800.0}}
    across = belief(table, prior, measured, {at: 0.01}, 0.9, layouts=LayoutUncertainty())
    trusting = belief(table, prior, measured, {at: 0.01}, 0.9)
    same_cap = [int(np.flatnonzero((table[col.TENSOR_PARALLEL] == size) & (table[col.MAX_NUM_SEQS] == 16))[0])
                for size in SIZES]
    assert all(100.0 < across.throughput_per_s[i] < 150.0 for i in same_cap[1:]), "the run informs every layout"
    width = np.log(across.throughput_high) - np.log(across.throughput_low)
    trusted_width = np.log(trusting.throughput_high) - np.log(trusting.throughput_low)
    assert width[same_cap[0]] == trusted_width[same_cap[0]] == 0 or width[same_cap[0]] < width[same_cap[1]]
    assert width[same_cap[1]] < width[same_cap[2]], "a layout further away is trusted less"
    assert width[same_cap[2]] > trusted_width[same_cap[2]], "wider than trusting the prior's scaling"
    one_size = table[table[col.TENSOR_PARALLEL] == 1].reset_index(drop=True)
    alone = belief(one_size, prior.take(np.arange(len(one_size))), {THROUGHPUT: {3: 150.0}, IN_BATCH_E2E: {3: 800.0}},
                   {3: 0.01}, 0.9, layouts=LayoutUncertainty())
    plain = belief(one_size, prior.take(np.arange(len(one_size))), {THROUGHPUT: {3: 150.0}, IN_BATCH_E2E: {3: 800.0}},
                   {3: 0.01}, 0.9)
    np.testing.assert_array_equal(alone.throughput_high, plain.throughput_high)
    assert not math.isnan(alone.throughput_per_s[0])


# --- slim tune --tensor-parallel-sizes end to end ------------------------------------------

def _tune(capsys, traces, *arguments, model: str = "facebook/opt-125m"):
    import json

    from slim.cli import main

    code = main(["tune", "--traces", str(traces), "--workload", f"{model}:128:32", "--hardware",
                 "a100-sxm-40gb", "--num-prompts", "64", "--candidates", "1,4,16,64", "--slo-ms", "150",
                 *arguments, "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def _layout_template() -> str:
    import sys

    from conftest import REPO

    return " ".join([sys.executable, str(REPO / "tests" / "fake_vllm_bench.py"),
                     "--model {model} --random-input-len {input_len} --random-output-len {output_len}",
                     "--max-concurrency {max_concurrency} --num-prompts {num_prompts} --result-dir {result_dir}",
                     "--result-filename {result_filename} --tensor-parallel-size {tensor_parallel_size}",
                     "--metadata max_num_seqs={server_max_num_seqs} tensor_parallel_size={tensor_parallel}",
                     "--hardware a100-sxm-40gb"])


def test_the_gpus_alone_compare_the_default_sizes_up_to_them(tmp_path, capsys):
    # As slim advise does: --gpus without a size compares 1, 2, 4, 8 up to the GPUs.
    assert _tune(capsys, tmp_path, "--gpus", "4")[1]["tensor_parallel_sizes"] == [1, 2, 4]
    code, body, _ = _tune(capsys, tmp_path, "--gpus", "16")
    assert code == 0 and body["tensor_parallel_sizes"] == [1, 2, 4, 8]
    sizes = {entry["tensor_parallel_size"]: entry for entry in body["layouts"][0]["layouts"]}
    # OPT-125M's 12 heads do not split over 8 ranks: vLLM refuses that server, so it takes no run.
    assert sizes[8]["status"] == "excluded" and "12 attention heads" in sizes[8]["reason"]
    # A size given with the GPUs (or a rate) is the one layout whose deployment they size.
    alone = _tune(capsys, tmp_path, "--gpus", "4", "--tensor-parallel-size", "2")[1]
    assert alone["tensor_parallel_sizes"] == [2]
    assert "--tensor-parallel-size 2" in alone["next"][0]["commands"]["server"]
    rated = _tune(capsys, tmp_path, "--request-rate", "5", "--tensor-parallel-size", "2")[1]
    assert rated["tensor_parallel_sizes"] == [2] and rated["request_rate"] == 5
    assert _tune(capsys, tmp_path, "--request-rate", "5")[1]["tensor_parallel_sizes"] == [1, 2, 4, 8]
    # --data-parallel-sizes with the GPUs keeps deciding them at --tensor-parallel-size.
    assert _tune(capsys, tmp_path, "--gpus", "8", "--data-parallel-sizes", "1,2")[1]["tensor_parallel_sizes"] == [1]
    assert _tune(capsys, tmp_path)[1]["layouts"] is None
    assert _tune(capsys, tmp_path, "--tensor-parallel-size", "2")[1]["layouts"] is None


def test_the_plan_across_layouts_names_each_layout_and_excludes_one_needing_more_gpus(tmp_path, capsys):
    code, body, _ = _tune(capsys, tmp_path, "--tensor-parallel-sizes", "1,2,4", "--gpus", "2")
    assert code == 0 and body["status"] == "open" and body["tensor_parallel_sizes"] == [1, 2, 4]
    [curve] = body["layouts"]
    sizes = {entry["tensor_parallel_size"]: entry for entry in curve["layouts"]}
    assert sizes[4]["status"] == "excluded" and sizes[4]["reason"] == "needs 4 GPUs, 2 available (--gpus)"
    assert {w["workload"] for w in body["workloads"]} == {"opt-125m IL 128 OL 32 TP 1", "opt-125m IL 128 OL 32 TP 2"}
    tp2 = next(run for run in body["next"] if run["workload"].endswith("TP 2"))
    assert "--tensor-parallel-size 2" in tp2["commands"]["server"]
    assert "tensor_parallel_size=2" in tp2["commands"]["benchmark"] and "_tp2" in tp2["commands"]["benchmark"]
    single = _tune(capsys, tmp_path, "--tensor-parallel-size", "2")[1]
    assert single["layouts"] is None and single["workloads"][0]["workload"] == "opt-125m IL 128 OL 32"


@pytest.mark.integration
def test_the_loop_across_layouts_settles_a_layout_and_a_rerun_runs_nothing(tmp_path, capsys):
    traces = tmp_path / "runs"
    arguments = ("--tensor-parallel-sizes", "1,2", "--gpus", "4", "--run", _layout_template())
    code, body, err = _tune(capsys, traces, *arguments)
    assert code == 0 and body["status"] == "settled", err
    [curve] = body["layouts"]
    deployment = curve["deployment"]
    chosen = next(entry for entry in curve["layouts"] if entry["status"] == "chosen")
    assert deployment["replicas"] == 4 // chosen["tensor_parallel_size"]
    assert isinstance(deployment["max_num_seqs"], int) and deployment["max_num_seqs"] == chosen["max_num_seqs"]
    assert f"--tensor-parallel-size {chosen['tensor_parallel_size']}" in deployment["command"]
    assert all(entry["status"] == "excluded" for entry in curve["layouts"] if entry is not chosen)
    folders = {p.name for p in (traces / "slim-tune").iterdir() if p.is_dir()}
    assert any(name.endswith("_tp1") for name in folders) or any(name.endswith("_tp2") for name in folders)
    again, resumed, _ = _tune(capsys, traces, *arguments)
    assert again == 0 and resumed["loop"]["runs"] == 0 and resumed["status"] == "settled"
    assert resumed["layouts"][0]["deployment"] == deployment
    # A request rate sizes the deployment from the chosen cap's measured throughput: each replica
    # completes total_token_throughput / (IL + OL) requests per second.
    chosen_run = next(w for w in resumed["workloads"] if w["workload"] == chosen["workload"])
    per_replica = chosen_run["certificate"]["measured"]["total_token_throughput"] / (128 + 32)
    rate = 2.5 * per_replica
    _, sized, _ = _tune(capsys, traces, "--tensor-parallel-sizes", "1,2", "--gpus", "4", "--request-rate",
                        f"{rate:.6f}")
    for_rate = sized["layouts"][0]["deployment"]
    assert for_rate["replicas"] == 3 and for_rate["gpus_needed"] == 3 * chosen["gpus"]
    assert for_rate["requests_per_replica"] == pytest.approx(per_replica)
    assert for_rate["headroom"] == pytest.approx(3 / 2.5 - 1, rel=1e-5)
    from slim.cli import main

    assert main(["tune", "--traces", str(traces), "--workload", "facebook/opt-125m:128:32", "--hardware",
                 "a100-sxm-40gb", "--num-prompts", "64", "--candidates", "1,4,16,64", "--slo-ms", "150",
                 "--tensor-parallel-sizes", "1,2", "--gpus", "4", "--request-rate", f"{rate:.6f}"]) == 0
    text = capsys.readouterr().out
    assert f"For {rate:g} requests/s: 3 replica(s) x {chosen['layout']} = {3 * chosen['gpus']} GPUs" in text


def test_a_curve_no_layout_of_which_can_run_is_not_reported_settled(monkeypatch):
    """Every other decision settled, one curve with every layout excluded: no cap, exit 3, not 0."""
    from types import SimpleNamespace

    import slim.tune.layouts as layouts
    from slim.tune import cli as tune_cli

    monkeypatch.setattr(layouts, "all_settled", lambda session: True)
    monkeypatch.setattr(layouts, "layout_decisions", lambda session: {})
    plan = SimpleNamespace(session=None, workloads=[],
                           layout_exclusions={"big IL 256 OL 256": {8: "needs 8 GPUs, 4 available (--gpus)"}})
    assert tune_cli.tune_exit_code(plan, ran=True) == tune_cli.EXIT_INFEASIBLE
    assert tune_cli.tune_exit_code(SimpleNamespace(session=None, workloads=[], layout_exclusions={}), ran=True) == 0


# --- data-parallel layouts -------------------------------------------------------------------------

DP_LAYOUTS = ((4, 1), (8, 1), (4, 4))
"""TP 4, TP 8 and TP 4 x DP 4: two layouts at one tensor-parallel size, and one of as many GPUs as no other."""
DP_CURVE = f"{MODEL} IL {LENGTH} OL {LENGTH}"


def dp_true_curve(tensor_parallel: int, data_parallel: int) -> tuple[np.ndarray, np.ndarray]:
    """A server of `data_parallel` ranks, each serving ``B / d`` of the cap's requests at ``T_t(B / d)``
    (`true_curve`'s rank of `tensor_parallel` GPUs; with data parallelism 1.2 x that, no all-reduce
    across the ranks): its throughput (tokens/s) and a static batch's latency (s) per cap."""
    caps = np.array(CAPS)
    per_rank = caps / data_parallel
    rank = 50.0 * tensor_parallel ** 0.8 * per_rank / (1.0 + per_rank / 16.0) * (1.2 if data_parallel > 1 else 1.0)
    throughput = data_parallel * rank
    return throughput, caps * 2 * LENGTH / throughput


def dp_candidates_table() -> pd.DataFrame:
    table = pd.concat([candidates_table().iloc[:len(CAPS)]] * len(DP_LAYOUTS), ignore_index=True)
    table[col.TENSOR_PARALLEL] = np.repeat([t for t, _ in DP_LAYOUTS], len(CAPS))
    table[col.DATA_PARALLEL] = np.repeat([d for _, d in DP_LAYOUTS], len(CAPS))
    table[WORKLOAD] = [w.label for w in dp_workloads(30.0) for _ in CAPS]
    return table


def dp_workloads(slo_s: float) -> list[Workload]:
    base = Workload.in_batch(MODEL, LENGTH, LENGTH, slo_s, EPSILON)
    return [Workload(base.model, base.input_len, base.output_len, base.slos, EPSILON, tensor_parallel=t,
                     data_parallel=d) for t, d in DP_LAYOUTS]


def dp_truth() -> tuple[np.ndarray, np.ndarray]:
    curves = [dp_true_curve(t, d) for t, d in DP_LAYOUTS]
    return np.concatenate([c[0] for c in curves]), np.concatenate([c[1] for c in curves])


def dp_session(slo_s: float, off_at_data_parallel: float) -> TuneSession:
    """A session whose prior is the truth x 1.3 x a trend across caps, and `off_at_data_parallel`
    times that at TP 4 x DP 4."""
    table = dp_candidates_table()
    throughput, latency = dp_truth()
    factor = (1.3 * (table[col.MAX_NUM_SEQS].to_numpy(dtype=float) / 16.0) ** 0.1
              * np.where(table[col.DATA_PARALLEL].to_numpy() > 1, off_at_data_parallel, 1.0))
    table[WORKLOAD] = [w.label for w in dp_workloads(slo_s) for _ in CAPS]
    return TuneSession(dp_workloads(slo_s), table, PriorPrediction.of(throughput * factor, latency / factor),
                       TuneSettings(margin=MARGIN, layouts=LayoutUncertainty()))


def dp_oracle():
    throughput, latency = dp_truth()
    gpus = np.repeat([t * d for t, d in DP_LAYOUTS], len(CAPS))

    def measure(proposal) -> Measurement:
        i = proposal.candidate
        seconds = latency[i] * gpus[i]       # a run is charged its server's t x d GPUs
        if proposal.limit_gpu_seconds is not None and seconds > proposal.limit_gpu_seconds:
            return Unusable(proposal.limit_gpu_seconds)
        return Measurement(throughput[i], latency[i], seconds)
    return measure


def dp_decision_on_every_run(slo_s: float):
    candidates = []
    for t, d in DP_LAYOUTS:
        throughput, latency = dp_true_curve(t, d)
        view = candidate_view(np.array(CAPS), lambda name: Estimates.facts(throughput if name == THROUGHPUT
                                                                           else 1e3 * latency),
                              {IN_BATCH_E2E: 1e3 * slo_s})
        candidates.append(LayoutCandidate(Layout.of_sizes(t, d), view, certify(view, EPSILON)))
    return decide_layouts(candidates, TuneSettings().tolerance)


def dp_bisection_gpu_seconds(slo_s: float) -> float:
    """A plain search: a bisection over the caps at each layout, each run charged its duration x t x d."""
    total = 0.0
    for t, d in DP_LAYOUTS:
        _, latency = dp_true_curve(t, d)
        probes, _, _, _ = ShadowBisection(len(CAPS)).follow(lambda p: bool(latency[p] <= slo_s))
        total += sum(latency[p] * t * d for p in probes)
    return total


@pytest.mark.parametrize("slo_s, chosen", [(12.0, (4, 4)), (40.0, (4, 1))])
@pytest.mark.parametrize("off_at_data_parallel", [2.0, 0.5])
def test_a_prior_2x_off_at_a_data_parallel_layout_keeps_the_bound_and_the_decision_of_every_run(
        slo_s, chosen, off_at_data_parallel):
    expected = dp_decision_on_every_run(slo_s)
    assert expected.settled and expected.chosen.layout == Layout.of_sizes(*chosen)
    session = dp_session(slo_s, off_at_data_parallel)
    outcome = run_loop(session, dp_oracle())
    assert outcome.stopped == "settled" and all_settled(session)
    decision = layout_decisions(session)[DP_CURVE]
    assert decision.settled and len(decision.verdicts) == len(DP_LAYOUTS)
    assert (decision.chosen.layout, decision.chosen.batch_cap) == (expected.chosen.layout, expected.chosen.batch_cap)
    spent = sum(step.gpu_seconds for step in outcome.steps)
    assert spent <= (1 + MARGIN) * dp_bisection_gpu_seconds(slo_s) * (1 + 1e-9)
    assert len(outcome.steps) < len(CAPS) * len(DP_LAYOUTS), "not every (layout, cap) is measured"


def test_two_layouts_at_one_tensor_parallel_size_are_never_one():
    session = dp_session(12.0, 2.0)
    labels = [w.label for w in session.workloads]
    assert labels == [f"{DP_CURVE} TP 4", f"{DP_CURVE} TP 8", f"{DP_CURVE} TP 4 x DP 4"]
    assert len({w.layout for w in session.workloads}) == len(DP_LAYOUTS)
    assert [w.layout.gpus for w in layout_groups(session)[DP_CURVE]] == [4, 8, 16]
    outcome = run_loop(session, dp_oracle(), budget_runs=6)
    pooled = pooled_account(session, session.workloads[0])
    own = [session.account(w) for w in session.workloads]
    assert pooled.lower_bound_gpu_seconds == pytest.approx(sum(a.lower_bound_gpu_seconds for a in own))
    for workload, account in zip(session.workloads, own):     # each layout's account holds its own runs only
        spent = sum(step.gpu_seconds for step in outcome.steps if step.workload == workload.label)
        assert account.on_path_gpu_seconds + account.extra_gpu_seconds == pytest.approx(spent)
    assert {step.workload for step in outcome.steps} >= {labels[0], labels[2]}
    decision = layout_decisions(session)[DP_CURVE]
    assert {v.layout.label for v in decision.verdicts} == {"TP 4", "TP 8", "TP 4 x DP 4"}


def test_the_belief_spaces_layouts_by_doublings_of_gpus_with_an_offset_per_layout():
    table = pd.DataFrame({col.TENSOR_PARALLEL: [4, 8, 4, 4, 8], col.DATA_PARALLEL: [1, 1, 2, 4, 1]})
    coordinates = LayoutUncertainty.coordinates(table)
    np.testing.assert_array_equal(coordinates[:, 0], [0, 1, 1, 2, 1])
    keys = coordinates[:, 1]
    assert keys[0] == 0 and keys[1] == keys[4] and len({keys[1], keys[2], keys[3]}) == 3 and (keys[1:] > 0).all()
    across = LayoutUncertainty(slope_sd_per_doubling=0.5, offset_sd=0.3)
    covariance = across.covariance(coordinates, coordinates)
    assert covariance[1, 2] == pytest.approx(0.25), "TP 8 and TP 4 x DP 2: as many GPUs, not one offset"
    assert covariance[1, 4] == pytest.approx(0.25 + 0.09)
    np.testing.assert_allclose(across.variance(coordinates), np.diag(covariance))
    # A run at TP 4 informs TP 4 x DP 4 less than it does TP 4's own other caps.
    dp_table = dp_candidates_table()
    prior = PriorPrediction.of(np.full(len(dp_table), 100.0), np.full(len(dp_table), 1.0))
    at = 3       # TP 4, cap 16
    measured = {THROUGHPUT: {at: 150.0}, IN_BATCH_E2E: {at: 800.0}}
    b = belief(dp_table, prior, measured, {at: 0.01}, 0.9, layouts=LayoutUncertainty())
    width = np.log(b.throughput_high) - np.log(b.throughput_low)
    tp4_cap32, dp_cap16 = at + 1, 2 * len(CAPS) + 3
    assert width[tp4_cap32] < width[dp_cap16]


# --- slim tune --data-parallel-sizes end to end ------------------------------------------------------

def _dp_template() -> str:
    return _layout_template().replace(
        "--tensor-parallel-size {tensor_parallel_size}",
        "--tensor-parallel-size {tensor_parallel_size} --data-parallel-size {data_parallel_size}").replace(
        "tensor_parallel_size={tensor_parallel}", "tensor_parallel_size={tensor_parallel} "
        "data_parallel_size={data_parallel_size}")


def test_the_plan_names_a_data_parallel_layout_with_its_run_line_and_gpus(tmp_path, capsys):
    code, body, _ = _tune(capsys, tmp_path, "--tensor-parallel-sizes", "4,8", "--data-parallel-sizes", "1,4",
                          "--gpus", "16", model="facebook/opt-1.3b")
    assert code == 0 and body["data_parallel_sizes"] == [1, 4]
    [curve] = body["layouts"]
    by_label = {entry["layout"]: entry for entry in curve["layouts"]}
    assert set(by_label) == {"TP 4", "TP 8", "TP 4 x DP 4", "TP 8 x DP 4"}
    assert by_label["TP 4 x DP 4"]["gpus"] == 16 and by_label["TP 4 x DP 4"]["status"] != "excluded"
    assert by_label["TP 8 x DP 4"]["reason"] == "needs 32 GPUs, 16 available (--gpus)"
    dp = next(run for run in body["next"] if run["workload"].endswith("TP 4 x DP 4"))
    server = dp["commands"]["server"]
    assert "--tensor-parallel-size 4 --data-parallel-size 4" in server and "--max-num-seqs 16" in server
    benchmark = dp["commands"]["benchmark"]
    assert "tensor_parallel_size=4 data_parallel_size=4" in benchmark and "_tp4_dp4" in benchmark
    assert "max_num_seqs=64" in benchmark, "the result records the server's cap over all its ranks"
    tp4 = next(run for run in body["next"] if run["workload"].endswith("TP 4"))
    assert "--data-parallel-size" not in tp4["commands"]["server"] and "_tp4_dp" not in tp4["commands"]["benchmark"]


def test_gpus_exclude_a_data_parallel_server_needing_more(tmp_path, capsys):
    code, body, _ = _tune(capsys, tmp_path, "--tensor-parallel-sizes", "4,8", "--data-parallel-sizes", "1,4",
                          "--gpus", "8", model="facebook/opt-1.3b")
    assert code == 0
    [curve] = body["layouts"]
    by_label = {entry["layout"]: entry for entry in curve["layouts"]}
    assert by_label["TP 4 x DP 4"]["status"] == "excluded"
    assert by_label["TP 4 x DP 4"]["reason"] == "needs 16 GPUs, 8 available (--gpus)"
    assert by_label["TP 8"]["status"] != "excluded"
    assert {w["workload"] for w in body["workloads"]} == {"opt-1.3b IL 128 OL 32 TP 4", "opt-1.3b IL 128 OL 32 TP 8"}


def test_a_data_parallel_size_the_runs_record_is_a_layout_without_the_flag(tmp_path, capsys):
    from fake_vllm_bench import main as fake_bench

    traces = tmp_path / "runs"
    assert fake_bench(["--model", "facebook/opt-1.3b", "--random-input-len", "128", "--random-output-len", "32",
                       "--max-concurrency", "16", "--num-prompts", "64", "--result-dir", str(traces / "dp4"),
                       "--result-filename", "result.json", "--tensor-parallel-size", "4", "--data-parallel-size", "4",
                       "--hardware", "a100-sxm-40gb", "--metadata", "max_num_seqs=64", "tensor_parallel_size=4",
                       "data_parallel_size=4"]) == 0
    capsys.readouterr()
    code, body, _ = _tune(capsys, traces, "--tensor-parallel-sizes", "4,8", model="facebook/opt-1.3b")
    assert code == 0 and body["data_parallel_sizes"] is None
    labels = [entry["layout"] for entry in body["layouts"][0]["layouts"]]
    assert labels == ["TP 4", "TP 8", "TP 4 x DP 4"]
    dp = next(w for w in body["workloads"] if w["workload"].endswith("TP 4 x DP 4"))
    measured = [c for c in dp["candidates"] if c["runs"]]
    assert [c["max_num_seqs"] for c in measured] == [16], "the DP 4 run is TP 4 x DP 4's, not TP 4's"
    tp4 = next(w for w in body["workloads"] if w["workload"].endswith("TP 4"))
    assert not any(c["runs"] for c in tp4["candidates"])


@pytest.mark.integration
def test_the_loop_across_data_parallel_layouts_settles_and_a_rerun_runs_nothing(tmp_path, capsys):
    traces = tmp_path / "runs"
    arguments = ("--tensor-parallel-sizes", "1", "--data-parallel-sizes", "1,2", "--gpus", "4",
                 "--run", _dp_template())
    code, body, err = _tune(capsys, traces, *arguments, model="facebook/opt-1.3b")
    assert code == 0 and body["status"] == "settled", err
    [curve] = body["layouts"]
    assert [entry["layout"] for entry in curve["layouts"]] == ["TP 1", "TP 1 x DP 2"]
    deployment = curve["deployment"]
    assert deployment["replicas"] == 4 // deployment["gpus_per_replica"]
    ranks = deployment["data_parallel_size"]
    assert deployment["max_num_seqs_per_rank"] == -(-deployment["max_num_seqs"] // ranks)
    assert f"--max-num-seqs {deployment['max_num_seqs_per_rank']} " in deployment["command"]
    assert ("--data-parallel-size" in deployment["command"]) == (ranks > 1)
    folders = {p.name for p in (traces / "slim-tune").iterdir() if p.is_dir()}
    assert any(name.endswith("_tp1_dp2") for name in folders)
    again, resumed, _ = _tune(capsys, traces, *arguments, model="facebook/opt-1.3b")
    assert again == 0 and resumed["loop"]["runs"] == 0 and resumed["status"] == "settled"
    assert resumed["layouts"][0]["deployment"] == deployment


def test_a_pipeline_parallel_run_is_no_measurement_of_its_tensor_parallel_layout():
    """A run at TP 4 x PP 2 (a server of 8 GPUs) measured the workload, but not at the TP 4 layout of 4 GPUs:
    tune leaves it out of that layout's runs instead of charging and judging it per GPU of 4."""
    from slim.tune.plan import _matches

    runs = pd.DataFrame({col.MODEL: ["m", "m", "m"], col.INPUT_LEN_NOMINAL: [1024] * 3,
                         col.OUTPUT_LEN_NOMINAL: [1024] * 3, col.TENSOR_PARALLEL: [4, 4, np.nan],
                         col.PIPELINE_PARALLEL: [1, 2, np.nan], col.DATA_PARALLEL: [1, 1, np.nan]})
    assert _matches(runs, "m", 1024, 1024, Layout.of_sizes(4)).tolist() == [True, False, False]
    assert _matches(runs, "m", 1024, 1024, Layout.of_sizes(1)).tolist() == [False, False, True]


MOE = "mistralai/Mixtral-8x7B-v0.1"


def _fake_run(traces, name: str, *metadata: str, concurrency: int = 16, model: str = MOE) -> None:
    from fake_vllm_bench import main as fake_bench

    assert fake_bench(["--model", model, "--random-input-len", "128", "--random-output-len", "32",
                       "--max-concurrency", str(concurrency), "--num-prompts", "64", "--result-dir",
                       str(traces / name), "--result-filename", "result.json", "--tensor-parallel-size", "4",
                       "--hardware", "a100-sxm-40gb", "--metadata", "max_num_seqs=64", "tensor_parallel_size=4",
                       *metadata]) == 0


def test_a_layout_whose_runs_spread_the_experts_keeps_the_flag_in_its_runs_and_answer(tmp_path, capsys):
    """Runs recorded with --enable-expert-parallel make their layout an expert-parallel one: named with its
    expert-parallel size, its next server started with the flag and its benchmark recording it."""
    traces = tmp_path / "runs"
    _fake_run(traces, "ep", "enable_expert_parallel=true")
    capsys.readouterr()
    code, body, _ = _tune(capsys, traces, "--tensor-parallel-sizes", "4,8", model=MOE)
    assert code == 0
    labels = [entry["layout"] for entry in body["layouts"][0]["layouts"]]
    assert labels == ["TP 4 (EP 4)", "TP 8"]
    flags = {entry["layout"]: entry["enable_expert_parallel"] for entry in body["layouts"][0]["layouts"]}
    assert flags == {"TP 4 (EP 4)": True, "TP 8": False}
    ep = next(w for w in body["workloads"] if w["workload"].endswith("TP 4 (EP 4)"))
    assert [c["max_num_seqs"] for c in ep["candidates"] if c["runs"]] == [16]
    for proposal in body["next"]:
        spread = proposal["workload"].endswith("(EP 4)")
        assert ("--enable-expert-parallel" in proposal["commands"]["server"]) == spread
        assert ("enable_expert_parallel=true" in proposal["commands"]["benchmark"]) == spread


def test_a_dense_model_has_no_experts_to_spread_whatever_its_flag(tmp_path, capsys):
    traces = tmp_path / "runs"
    _fake_run(traces, "ep", "enable_expert_parallel=true", model="facebook/opt-1.3b")
    capsys.readouterr()
    code, body, _ = _tune(capsys, traces, "--tensor-parallel-sizes", "4", model="facebook/opt-1.3b")
    assert code == 0 and [entry["layout"] for entry in body["layouts"][0]["layouts"]] == ["TP 4"]


def test_runs_with_and_without_expert_parallelism_at_one_layout_are_refused_as_one_curve(tmp_path, capsys):
    traces = tmp_path / "runs"
    _fake_run(traces, "ep", "enable_expert_parallel=true")
    _fake_run(traces, "tp", concurrency=4)
    capsys.readouterr()
    from slim.cli import main

    code = main(["tune", "--traces", str(traces), "--workload", f"{MOE}:128:32", "--hardware",
                 "a100-sxm-40gb", "--num-prompts", "64", "--candidates", "1,4,16,64", "--slo-ms", "150",
                 "--tensor-parallel-sizes", "4"])
    err = capsys.readouterr().err
    assert code == 2 and "mix servers with and without --enable-expert-parallel (1 with, 1 without)" in err


def test_the_expert_parallel_switch_of_a_template_adds_the_flag_or_nothing():
    from pathlib import Path

    from slim.specs.slo import Slos
    from slim.tune.commands import placeholders
    from slim.tune.request import TuneRequest, WorkloadSpec
    from slim.tune.runner import render_template

    request = TuneRequest(Path("runs"), (WorkloadSpec("m", 128, 32),), "a100-sxm-40gb", Slos.of(["mean_tpot_ms=50"]),
                          tensor_parallel_sizes=(4,))
    spec = request.workloads[0]
    template = "vllm serve {model} --tensor-parallel-size {tensor_parallel_size} {expert_parallel_flag} --port 1"
    on = placeholders(request, spec, 16, layout=Layout.of_sizes(4, 1, True))
    off = placeholders(request, spec, 16, layout=Layout.of_sizes(4))
    assert render_template(template, on) == ["vllm", "serve", "m", "--tensor-parallel-size", "4",
                                             "--enable-expert-parallel", "--port", "1"]
    assert render_template(template, off) == ["vllm", "serve", "m", "--tensor-parallel-size", "4", "--port", "1"]
    assert render_template("sh -c 'vllm serve {model} {expert_parallel_flag} --port 1'", off) == [
        "sh", "-c", "vllm serve m  --port 1"]
    # The model's precision flags: several arguments where the placeholder stands alone, shell-quoted in a script.
    fp8 = placeholders(request, spec, 16, layout=Layout.of_sizes(4), model_flags=["--quantization", "fp8"])
    assert render_template("vllm serve {model} {serving_flags} --port 1", fp8) == [
        "vllm", "serve", "m", "--quantization", "fp8", "--port", "1"]
    assert render_template("vllm serve {model} {serving_flags} --port 1", off) == ["vllm", "serve", "m", "--port", "1"]
    assert render_template("sh -c 'vllm serve {model} {serving_flags} --port 1'", fp8) == [
        "sh", "-c", "vllm serve m --quantization fp8 --port 1"]


def test_a_layout_that_splits_block_fp8_experts_into_part_blocks_serves_them_whole(tmp_path, capsys):
    """MiniMax-M2.5's fp8 experts (128 x 128 blocks, width 1536) split over 8 ranks give 192 rows each,
    which vLLM refuses to load: unmeasured, TP 8 is planned with --enable-expert-parallel; TP 4 (384) is
    split as it is."""
    from slim.cli import main

    code = main(["tune", "--traces", str(tmp_path), "--hardware", "h100-sxm-80gb", "--model", "minimax-m2.5",
                 "--input-len", "1024", "--output-len", "1024", "--slo", "p99_tpot_ms=50", "--tensor-parallel-sizes",
                 "4,8", "--gpus", "8", "--results", str(tmp_path / "runs"), "--json"])
    body = json.loads(capsys.readouterr().out)
    assert code == 0
    servers = {run["workload"]: run["commands"]["server"] for run in body["next"]}
    assert any(label.endswith("TP 8 (EP 8)") for label in servers)
    for label, server in servers.items():
        assert ("--enable-expert-parallel" in server) == label.endswith("(EP 8)"), label


def test_a_data_parallel_cap_is_worded_as_the_servers_requests_and_each_ranks_flag():
    from slim.specs.data_parallel import cap_words

    assert cap_words(64, 1) == "--max-num-seqs 64"
    assert cap_words(256.0, 2) == "256 requests in flight (--max-num-seqs 128 per rank)"
    assert cap_words(30, 4) == "30 requests in flight (--max-num-seqs 8 per rank)"
