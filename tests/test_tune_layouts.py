"""`slim tune` across parallel layouts on synthetic static-batch curves at tensor-parallel sizes 1, 2
and 4: with a prior wrong by 2x per doubling of the size (either way), the loop's GPU time stays
within (1 + margin) x a bisection over the caps at every layout, and its decision is the one made on
every (layout, cap) measured; the belief carries a run at one layout to the others with wider
intervals; the layouts' workloads, their pooled bound and what the decision excludes."""

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
from slim.tune.layouts import all_settled, layout_decisions, open_workloads, pooled_account
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

def _tune(capsys, traces, *arguments):
    import json

    from slim.cli import main

    code = main(["tune", "--traces", str(traces), "--workload", "facebook/opt-125m:128:32", "--hardware",
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
