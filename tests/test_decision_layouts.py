"""The decision across parallel layouts (`slim.decision.layouts`) on hand-built views: the choice by
objective per GPU, the exclusion by a layout's ceiling per GPU or by having no feasible cap, and when
it is settled."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from slim.decision.candidates import CandidateView, Constraint, Estimates
from slim.decision.certificate import certify
from slim.decision.layouts import Layout, LayoutCandidate, decide_layouts
from slim.specs.slo import IN_BATCH_E2E

CAPS = np.array([1.0, 8.0, 16.0, 32.0])
EPSILON = 0.1


def _estimates(measured, values, low=None, high=None) -> Estimates:
    measured = np.asarray(measured, dtype=bool)
    values = np.asarray(values, dtype=float)
    low = values * 0.9 if low is None else np.asarray(low, dtype=float)
    high = values * 1.1 if high is None else np.asarray(high, dtype=float)
    return Estimates(measured, np.where(measured, values, np.nan), values, np.where(measured, values, low),
                     np.where(measured, values, high), np.where(measured, 0.0, 0.05))


def layout(tp: int, throughput, measured, e2e_ms, slo_ms=1000.0, high=None) -> LayoutCandidate:
    """A layout whose throughput (tokens/s per server) and E2E are given per cap: measured where
    `measured`, else predicted with +-10 % intervals (`high`: another upper bound of throughput)."""
    view = CandidateView(CAPS, np.zeros(len(CAPS), dtype=bool), _estimates(measured, throughput, high=high),
                         (Constraint(IN_BATCH_E2E, slo_ms, _estimates(measured, e2e_ms)),))
    return LayoutCandidate(Layout.of_tensor_parallel(tp), view, certify(view, EPSILON))


ALL = [True] * 4
E2E = [100.0, 400.0, 800.0, 1600.0]    # cap 32 is over the 1,000 ms SLO at every layout


def test_the_layout_of_most_throughput_per_gpu_is_chosen_and_the_others_excluded_by_measurement():
    tp1 = layout(1, [100.0, 700.0, 1200.0, 2000.0], ALL, E2E)       # cap 16: 1,200 per GPU
    tp2 = layout(2, [180.0, 1300.0, 2200.0, 3800.0], ALL, E2E)      # cap 16: 1,100 per GPU
    decision = decide_layouts([tp2, tp1], tolerance=0.01)
    assert decision.settled and decision.chosen.layout == Layout(1, 1) and decision.chosen.batch_cap == 16
    assert decision.chosen.objective_per_gpu == 1200.0
    other = decision.verdict(Layout(2, 2))
    assert other.excluded and "1,100 tokens/s per GPU <= 1.01 x the chosen TP 1's 1,200" in other.reason
    assert decision.open_layouts == ()
    assert [v.layout.tensor_parallel for v in decision.verdicts] == [1, 2]


def test_a_layout_whose_upper_bound_per_gpu_could_beat_the_choice_stays_open():
    tp1 = layout(1, [100.0, 700.0, 1200.0, 2000.0], ALL, E2E)
    # TP 2 measured only at cap 1; cap 16's upper bound 2,640 tokens/s is 1,320 per GPU > 1.01 x 1,200.
    tp2 = layout(2, [180.0, 1300.0, 2400.0, 3800.0], [True, False, False, False], E2E)
    decision = decide_layouts([tp1, tp2], tolerance=0.01)
    assert not decision.settled and decision.chosen.layout.tensor_parallel == 1
    verdict = decision.verdict(Layout(2, 2))
    assert not verdict.excluded and verdict.ceiling_per_gpu == pytest.approx(1320.0)
    assert decision.open_layouts == (Layout(2, 2),)


def test_an_upper_bound_under_the_choice_per_gpu_excludes_a_layout_without_a_run():
    tp1 = layout(1, [100.0, 700.0, 1200.0, 2000.0], ALL, E2E)
    # TP 2's best upper bound within its own certificate: cap 16 at 2,200 x 1.1 = 2,420, i.e. 1,210 per GPU.
    tp2 = layout(2, [180.0, 1300.0, 2200.0, 3800.0], [False] * 4, E2E)
    assert decide_layouts([tp1, tp2], tolerance=0.01).verdict(Layout(2, 2)).excluded
    assert not decide_layouts([tp1, tp2], tolerance=0.0).verdict(Layout(2, 2)).excluded, \
        "1,210 > 1,200: the tolerance is what excludes it"


def test_an_unpredicted_candidate_keeps_its_layout_open():
    tp1 = layout(1, [100.0, 700.0, 1200.0, 2000.0], ALL, E2E)
    high = [np.inf, 0.0, 0.0, 0.0]
    tp2 = layout(2, [np.nan, 10.0, 10.0, 10.0], [False] * 4, [np.nan, 10.0, 10.0, 10.0], high=high)
    verdict = decide_layouts([tp1, tp2]).verdict(Layout(2, 2))
    assert not verdict.excluded and math.isinf(verdict.ceiling_per_gpu) and verdict.reason.startswith("nothing")


def test_a_layout_settled_with_no_feasible_cap_is_excluded_and_all_infeasible_settles_on_none():
    over = [2000.0, 4000.0, 8000.0, 9000.0]
    tp1 = layout(1, [100.0, 700.0, 1200.0, 2000.0], ALL, E2E)
    tp4 = layout(4, [400.0, 2800.0, 4800.0, 8000.0], ALL, over)
    decision = decide_layouts([tp1, tp4])
    assert decision.settled and decision.verdict(Layout(4, 4)).reason.startswith("no cap meets")
    none = decide_layouts([tp4, layout(2, [180.0, 1300.0, 2200.0, 3800.0], ALL, over)])
    assert none.settled and none.chosen is None


def test_the_choice_waits_for_its_own_certificate():
    # TP 1's incumbent (cap 8) is measured, but cap 16 is not: its own decision is open.
    tp1 = layout(1, [100.0, 700.0, 1200.0, 2000.0], [True, True, False, True], E2E)
    tp2 = layout(2, [180.0, 600.0, 700.0, 900.0], ALL, E2E)
    decision = decide_layouts([tp1, tp2])
    assert decision.chosen.layout.tensor_parallel == 1 and not decision.settled
    assert decision.verdict(Layout(2, 2)).excluded and decision.open_layouts == (Layout(1, 1),)


def test_a_tie_per_gpu_goes_to_fewer_gpus_and_data_parallel_divides_by_every_gpu():
    tp1 = layout(1, [100.0, 700.0, 1200.0, 2000.0], ALL, E2E)
    tp2 = layout(2, [200.0, 1400.0, 2400.0, 4000.0], ALL, E2E)
    decision = decide_layouts([tp2, tp1], tolerance=0.0)
    assert decision.chosen.layout.tensor_parallel == 1 and decision.verdict(Layout(2, 2)).excluded
    replicated = LayoutCandidate(Layout(1, 2), tp2.view, tp2.certificate)    # TP 1 x DP 2: 2 GPUs
    assert replicated.incumbent_per_gpu == 1200.0 and replicated.layout.label == "TP 1 x DP 2"
    with pytest.raises(ValueError):
        decide_layouts([tp1, tp1])


def test_a_pipelined_server_and_a_data_parallel_one_of_as_many_gpus_are_two_layouts_named_apart():
    """TP 4 x PP 4 and TP 4 x DP 4 both occupy 16 GPUs: the data-parallel size tells them apart."""
    tp4 = layout(4, [400.0, 2800.0, 4800.0, 8000.0], ALL, E2E)
    pipelined = LayoutCandidate(Layout(4, 16, data_parallel=1), tp4.view, tp4.certificate)
    replicated = LayoutCandidate(Layout(4, 16, data_parallel=4), tp4.view, tp4.certificate)
    decision = decide_layouts([replicated, pipelined], tolerance=0.0)
    assert [verdict.layout.label for verdict in decision.verdicts] == ["TP 4", "TP 4 x DP 4"]
    assert decision.chosen.layout == pipelined.layout and decision.verdict(replicated.layout).excluded


def test_an_expert_parallel_layout_names_its_size_and_serves_with_the_flag():
    """vLLM's --enable-expert-parallel spreads the experts over all t x d GPUs of a replica."""
    plain, spread = Layout.of_sizes(4, 4), Layout.of_sizes(4, 4, expert_parallel=True)
    assert (plain.label, spread.label) == ("TP 4 x DP 4", "TP 4 x DP 4 (EP 16)")
    assert Layout.of_sizes(8, 1, True).label == "TP 8 (EP 8)"
    assert plain.parallel_flags() == ["--tensor-parallel-size", "4", "--data-parallel-size", "4"]
    assert spread.parallel_flags() == plain.parallel_flags() + ["--enable-expert-parallel"]
    assert plain != spread and spread.gpus == 16 and spread.per_rank_cap(64) == 16


def test_the_server_log_states_expert_parallelism_in_its_non_default_args():
    from slim.traces.server_log import find_expert_parallel_in_log

    line = "INFO 12-05 08:00:00 [api_server.py:1] non-default args: {'tensor_parallel_size': 4, " \
           "'enable_expert_parallel': True}"
    assert find_expert_parallel_in_log(line) is True
    assert find_expert_parallel_in_log(line.replace("True", "False")) is None
    assert find_expert_parallel_in_log("non-default args: {'tensor_parallel_size': 4}") is None


def test_a_request_rate_needs_the_replicas_that_carry_it():
    from slim.decision.layouts import rate_deployment
    from slim.errors import AdvisorError

    # 4,000 tokens/s at 2,000 tokens a request: 2 requests/s a replica of 4 GPUs.
    exact = rate_deployment(6.0, 4000.0, 2000.0, 4)
    assert (exact.replicas, exact.gpus_needed, exact.requests_per_replica, exact.headroom) == (3, 12, 2.0, 0.0)
    over = rate_deployment(6.5, 4000.0, 2000.0, 4)
    assert over.replicas == 4 and over.headroom == pytest.approx(8 / 6.5 - 1)
    assert rate_deployment(0.1, 4000.0, 2000.0, 1).replicas == 1
    for throughput in (0.0, float("nan")):
        with pytest.raises(AdvisorError, match="sizes no deployment"):
            rate_deployment(6.0, throughput, 2000.0, 4)


def test_vllm_refuses_a_size_that_does_not_divide_the_heads_or_widths():
    from slim.specs.formats import WeightFormats
    from slim.specs.transformer import tensor_parallel_refusal

    dense = {"moe": None, "formats": WeightFormats()}     # 16-bit: no blocks to split
    arch = SimpleNamespace(n_q_heads=12, hidden_dim=768, ffn_dim=3072, **dense)
    assert tensor_parallel_refusal(arch, 4) is None
    assert "12 attention heads" in tensor_parallel_refusal(arch, 8)
    wide = SimpleNamespace(n_q_heads=16, hidden_dim=2040, ffn_dim=3072, **dense)
    assert "hidden size 2040" in tensor_parallel_refusal(wide, 16)
