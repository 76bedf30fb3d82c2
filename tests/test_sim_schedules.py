"""Cached simulator schedules (slim.sim.schedules) and the cost of a schedule as a function of
the fitted constants (slim.sim.linear_cost): the schedule ignores the fitted constants, the
linear form reproduces the simulator's durations exactly, and the mean batch follows."""

import numpy as np
import pandas as pd
import pytest

from slim.sim import SimConstants, StepCostModel, simulate_run
from slim.sim.linear_cost import LinearCost, StatsMatrix, constants_at, coordinates_of
from slim.sim.schedule_costs import ScheduleCosts
from slim.sim.schedules import ScheduleKey, ScheduleTable, simulate_schedule, simulate_schedules

OTHER = SimConstants().with_fitted({"gemm_compute_efficiency": 0.25, "gemm_memory_efficiency": 0.95,
                                    "attention_memory_efficiency": 0.7, "kernel_latency_s": 9e-6,
                                    "step_overhead_base_s": 0.3e-3, "step_overhead_per_seq_s": 20e-6,
                                    "tensor_parallel_step_overhead_s": 0.7e-3})


KEYS = (ScheduleKey("opt-125m", 300, 40, 16, 150), ScheduleKey("opt-1.3b", 900, 64, 64, 120),
        ScheduleKey("mistral-7b", 200, 30, 8, 40, 2))


def test_the_schedule_does_not_depend_on_the_fitted_constants(catalog, h100):
    for key in KEYS[:2]:
        first, second = simulate_schedule(key, catalog, h100, SimConstants()), simulate_schedule(key, catalog, h100,
                                                                                               OTHER)
        for part in ("main", "test"):
            a, b = getattr(first, part), getattr(second, part)
            for stats_a, stats_b in ((a, b), (a.running_weighted, b.running_weighted)):
                assert np.array_equal(stats_a.w_tokens, stats_b.w_tokens)
                assert np.array_equal(stats_a.w_sampled, stats_b.w_sampled)
                assert (stats_a.s_context, stats_a.s_pairs, stats_a.s_seqs, stats_a.w_steps) == (
                    stats_b.s_context, stats_b.s_pairs, stats_b.s_seqs, stats_b.w_steps)


@pytest.mark.parametrize("key", KEYS)
def test_the_linear_form_is_the_simulators_duration(key, catalog, h100):
    arch, schedule = catalog[key.model], simulate_schedule(key, catalog, h100, SimConstants())
    for consts in (SimConstants(), OTHER):
        u = coordinates_of(consts)
        form = LinearCost(arch, h100, consts, key.tensor_parallel).form(StatsMatrix.stack([schedule.main]))
        duration, gradient = form.duration_s(u)
        expected = schedule.main.duration_s(StepCostModel(arch, h100, consts, key.tensor_parallel))
        assert duration[0] == pytest.approx(expected, rel=1e-12)
        # The coefficients are the gradient: a small step along each coordinate moves D by G . du.
        for j in range(len(u)):
            step = np.zeros(len(u))
            step[j] = 1e-7 * max(u[j], 1e-6)
            moved = form.duration_s(u + step)[0][0]
            assert moved - duration[0] == pytest.approx(gradient[0, j] * step[j], rel=1e-5, abs=1e-15)
        again = constants_at(consts, u)
        assert again.to_dict() == pytest.approx(consts.to_dict(), rel=1e-15)
        result = simulate_run(arch, h100, consts, key.input_len, key.output_len, key.max_num_seqs, key.num_prompts,
                              0, key.tensor_parallel)
        assert result.duration_s == pytest.approx(expected, rel=1e-12)


def test_roofline_sides_switch_once_in_the_rows(catalog, h100):
    cost = LinearCost(catalog["llama-2-7b"], h100, SimConstants())
    for compute_s, memory_s in (*cost.gemm_s, cost.lm_head_s):
        ratio = compute_s[1:] / memory_s[1:]
        assert np.all(np.diff(ratio) > 0)


def test_predicted_mean_batch_and_preemptions_match_a_full_simulation(catalog, h100):
    key = ScheduleKey("opt-125m", 200, 150, 32, 1500)
    table = simulate_schedules([key], catalog, h100, SimConstants())
    prediction = ScheduleCosts(list(table), catalog, h100, SimConstants()).predict(OTHER)
    result = simulate_run(catalog[key.model], h100, OTHER, key.input_len, key.output_len, key.max_num_seqs,
                          key.num_prompts, 0)
    assert prediction.throughput_per_s[0] == pytest.approx(result.total_token_throughput_per_s, rel=1e-12)
    # The time average is what the once-a-second scrapes estimate (here only some 25 scrapes,
    # one of them inside the half-second test prompt).
    assert prediction.mean_batch_size[0] == pytest.approx(result.mean_batch_size, rel=0.05)
    assert prediction.num_preemptions[0] == result.num_preemptions
    assert prediction.e2e_latency_s[0] == pytest.approx(
        prediction.mean_batch_size[0] * result.duration_s / result.completed, rel=1e-12)


def test_the_table_round_trips_through_a_frame(catalog, h100, tmp_path):
    table = simulate_schedules(KEYS[:2] + KEYS[:1], catalog, h100, SimConstants(), workers=2)
    assert len(table) == 2
    path = tmp_path / "schedules.parquet"
    table.to_frame().to_parquet(path)
    again = ScheduleTable.from_frame(pd.read_parquet(path), SimConstants())
    frame = pd.DataFrame({"model": [k.model for k in KEYS[:2]], "input_len_mean": [k.input_len for k in KEYS[:2]],
                          "output_len_mean": [k.output_len for k in KEYS[:2]],
                          "max_num_seqs": [k.max_num_seqs for k in KEYS[:2]],
                          "num_prompts": [k.num_prompts for k in KEYS[:2]]})
    for first, second in zip(table.for_frame(frame), again.for_frame(frame)):
        assert first.key == second.key and first.completed == second.completed
        assert np.array_equal(first.main.running_weighted.w_tokens, second.main.running_weighted.w_tokens)
        assert first.test.s_context == second.test.s_context
    assert again.to_frame().equals(table.to_frame())


@pytest.mark.parametrize("batch", [1, 2])
def test_identical_waves_record_the_same_statistics_as_single_steps(catalog, h100, batch):
    """Small caps run as identical waves (`ServingEngine.run_identical_waves`); their step
    statistics equal those of the step-by-step path up to the order of summation."""
    arch = catalog["opt-125m"]
    runs = [simulate_run(arch, h100, SimConstants(), 200, 20, batch, 60, 3, record_stats=True, jump=jump)
            for jump in (True, False)]
    for fast, slow in ((runs[0].stats, runs[1].stats), (runs[0].stats.running_weighted,
                                                        runs[1].stats.running_weighted)):
        np.testing.assert_allclose(fast.w_tokens, slow.w_tokens, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fast.w_sampled, slow.w_sampled, rtol=1e-12, atol=1e-12)
        for name in ("s_context", "s_pairs", "s_seqs", "w_steps"):
            assert getattr(fast, name) == pytest.approx(getattr(slow, name), rel=1e-12), name
        assert fast.n_steps == slow.n_steps
    assert runs[0].stats.duration_s(StepCostModel(arch, h100, OTHER)) == pytest.approx(
        runs[1].stats.duration_s(StepCostModel(arch, h100, OTHER)), rel=1e-12)
