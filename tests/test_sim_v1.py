"""vLLM V1's scheduler in the simulator (`slim.sim.scheduler_v1`): step composition on hand-built
cases, exact block accounting, preemption, async scheduling's hold, conservation, determinism and
jump == step by step; and V1 schedules kept apart from V0's (`slim.sim.schedules`)."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.errors import ConfigError
from slim.gpu.kv_memory import KvCachePlan
from slim.sim import SimConstants, simulate_run
from slim.sim.constants import load_sim_constants
from slim.sim.scheduler_v1 import SchedulerV1
from slim.sim.schedules import ScheduleTable, key_of_row, simulate_schedules

BLOCK = 16


def v1_scheduler(usable_blocks: int, budget: int, il: int, ol: int, max_num_seqs: int,
                 async_scheduling: bool = False) -> SchedulerV1:
    consts = replace(SimConstants(), scheduler_engine="v1", max_num_batched_tokens=budget,
                     async_scheduling=async_scheduling)
    plan = KvCachePlan(0.0, 0.0, 0.0, 0.0, usable_blocks + 1, BLOCK, 4096, None)   # + vLLM's null block
    return SchedulerV1(plan, consts, il, ol, max_num_seqs)


def advance(scheduler: SchedulerV1, step: int):
    """One engine step, booked as `slim.sim.engine.ServingEngine.run_step` books it (no clock)."""
    batch = scheduler.schedule(step, 0.0)
    scheduler.decode_context_tokens += batch.n_decode
    for r, chunk in batch.chunks:
        request = scheduler.requests[r]
        request.prefilled += chunk
        if request.prefilled == request.prompt_len:
            request.generated += 1
            scheduler.end_prefill(r, step)
    scheduler.finish_decodes(step)
    return batch


def expected_blocks(scheduler: SchedulerV1, step: int) -> int:
    """Blocks held after `step`, from each request's computed tokens: a prefilling request's
    chunks so far, a decoding one's tokens but the one it sampled last, the async hold's."""
    held = 0
    for r in scheduler.running:
        request = scheduler.requests[r]
        if r in scheduler.prefilling:
            computed = request.prefilled
        else:
            computed = request.decode_start_tokens - 1 + step - request.decode_start_step
        held += -(-computed // BLOCK)
    return held + sum(blocks for _, blocks in scheduler.finishing)


def test_decodes_first_then_one_budget_shared_by_chunks():
    scheduler = v1_scheduler(100, 64, 40, 5, 4)
    scheduler.submit(6)
    first = advance(scheduler, 0)
    assert first.n_decode == 0 and first.chunks == [(0, 40), (1, 24)]     # the budget chunks the second prompt
    second = advance(scheduler, 1)
    # r0 decodes, r1 finishes its prompt, then r2 whole and r3 chunked to the 7 tokens left.
    assert second.n_decode == 1 and second.chunks == [(1, 16), (2, 40), (3, 7)]
    assert second.tokens == 64 and second.n_finishing_prefill == 2
    assert list(scheduler.prefilling) == [3] and list(scheduler.running)[-1] == 3


def test_long_prompt_is_chunked_across_steps():
    scheduler = v1_scheduler(100, 64, 150, 4, 2)
    scheduler.submit(2)
    chunks = [advance(scheduler, step).chunks for step in range(3)]
    assert chunks == [[(0, 64)], [(0, 64)], [(0, 22), (1, 42)]]
    assert scheduler.requests[0].generated == 1 and scheduler.requests[1].prefilled == 42


def test_admission_stops_at_max_num_seqs():
    scheduler = v1_scheduler(100, 512, 10, 8, 2)
    scheduler.submit(5)
    batch = advance(scheduler, 0)
    assert batch.chunks == [(0, 10), (1, 10)] and len(scheduler.waiting) == 3


def test_admission_needs_blocks_for_the_chunk_only():
    # Three free blocks: the first prompt (40 tokens) takes three; the next one's 24-token chunk needs two.
    scheduler = v1_scheduler(3, 64, 40, 5, 4)
    scheduler.submit(3)
    assert advance(scheduler, 0).chunks == [(0, 40)]
    # A 48-token chunk of a 100-token prompt is admitted on its three blocks where V0 would want seven.
    scheduler = v1_scheduler(3, 48, 100, 5, 4)
    scheduler.submit(1)
    assert advance(scheduler, 0).chunks == [(0, 48)] and scheduler.used_blocks == 3


def test_preemption_of_the_youngest_and_no_admission_that_step():
    scheduler = v1_scheduler(4, 64, 16, 40, 4)
    scheduler.submit(6)
    assert advance(scheduler, 0).chunks == [(r, 16) for r in range(4)]
    batch = advance(scheduler, 1)   # every decode starts a second block: r0 and r1 take r3's and r2's
    assert batch.n_decode == 2 and batch.chunks == []
    assert scheduler.preemptions == 2 and list(scheduler.running) == [0, 1]
    assert list(scheduler.waiting)[:2] == [2, 3]                 # back at the front, the older first
    assert scheduler.requests[2].prompt_len == 17 and scheduler.requests[2].prefilled == 0
    assert scheduler.used_blocks == 4


def test_preemption_frees_a_partial_prompt_s_chunks_only():
    scheduler = v1_scheduler(2, 20, 16, 30, 2)
    scheduler.submit(3)
    assert advance(scheduler, 0).chunks == [(0, 16), (1, 4)]     # r1 holds one block for its first chunk
    batch = advance(scheduler, 1)                                # r0's decode needs a block: r1 goes
    assert batch.n_decode == 1 and batch.chunks == [] and scheduler.preemptions == 1
    assert list(scheduler.waiting)[0] == 1 and scheduler.requests[1].prefilled == 0 and scheduler.used_blocks == 2


def test_async_scheduling_holds_a_finished_request_s_seat_for_one_step():
    def third_step(async_scheduling: bool):
        scheduler = v1_scheduler(100, 12, 8, 3, 2, async_scheduling)
        scheduler.submit(4)
        return [advance(scheduler, step) for step in range(4)]

    sync, held = third_step(False), third_step(True)
    assert [b.chunks for b in sync[:3]] == [b.chunks for b in held[:3]]
    assert sync[3].chunks == [(2, 8)] and held[3].chunks == []       # r0 finished in step 2
    assert held[3].n_decode == 1


def test_block_accounting_is_exact_through_preemptions():
    for async_scheduling in (False, True):
        scheduler = v1_scheduler(40, 96, 70, 45, 8, async_scheduling)
        scheduler.submit(30)
        step = 0
        while scheduler.running or scheduler.waiting or scheduler.finishing:
            batch = advance(scheduler, step)
            assert scheduler.used_blocks == expected_blocks(scheduler, step) <= scheduler.num_blocks
            assert batch.tokens <= 96 and batch.sequences <= 8
            step += 1
            if not batch.tokens:
                break
        assert scheduler.preemptions > 0
        assert all(request.generated == 45 for request in scheduler.requests)


def test_conservation_and_determinism(catalog, h100):
    il, ol, n = 1500, 300, 200
    for version in ("0.11.0", "0.14.0"):
        first = simulate_run(catalog["llama-2-7b"], h100, SimConstants(), il, ol, 256, n, seed=2, vllm_version=version)
        again = simulate_run(catalog["llama-2-7b"], h100, SimConstants(), il, ol, 256, n, seed=2, vllm_version=version)
        assert first.status == "ok" and first.completed == n and first.num_preemptions > 0
        last = first.samples.iloc[-1]
        assert last["request_success_total"] == n + 1 and last["generation_tokens_total"] == (n + 1) * ol
        assert last["prompt_tokens_total"] > (n + 1) * il                     # the preempted recompute theirs
        assert last["num_requests_running"] == 0 and last["num_requests_waiting"] == 0
        assert np.array_equal(first.e2e_s, again.e2e_s) and first.samples.equals(again.samples)


@pytest.mark.parametrize("version", ["0.11.0", "0.14.0"])
@pytest.mark.parametrize("il, ol, max_num_seqs, n", [(100, 37, 8, 60), (1000, 200, 256, 300), (64, 20, 32, 200)])
def test_jump_equals_step_by_step(catalog, h100, version, il, ol, max_num_seqs, n):
    runs = [simulate_run(catalog["llama-2-7b"], h100, SimConstants(), il, ol, max_num_seqs, n, seed=4, jump=jump,
                         record_stats=True, vllm_version=version) for jump in (True, False)]
    jumped, stepped = runs
    assert np.array_equal(jumped.e2e_s, stepped.e2e_s) and np.array_equal(jumped.itl_s, stepped.itl_s)
    assert jumped.samples.equals(stepped.samples) and jumped.step_counts == stepped.step_counts
    assert jumped.benchmark_summary() == stepped.benchmark_summary()
    assert jumped.num_preemptions == stepped.num_preemptions
    # The statistics add the same steps in another order (waves are summed as arrays).
    assert np.allclose(jumped.stats.w_tokens, stepped.stats.w_tokens, rtol=1e-12, atol=0)
    assert np.isclose(jumped.stats.s_context, stepped.stats.s_context, rtol=1e-12, atol=0)


def test_v1_budget_and_memory_profile_follow_the_version(catalog, h100):
    v0 = simulate_run(catalog["llama-2-7b"], h100, SimConstants(), 200, 50, 64, 100)
    v1 = simulate_run(catalog["llama-2-7b"], h100, SimConstants(), 200, 50, 64, 100, vllm_version="0.11.0")
    # The 64 GB H100 is below 70 GiB: a 2048-token budget, whose profile run reserves more activations.
    assert v1.plan.peak_torch_bytes > v0.plan.peak_torch_bytes
    assert v1.plan.num_gpu_blocks < v0.plan.num_gpu_blocks
    with pytest.raises(ConfigError, match="exceeds max_num_batched_tokens"):
        simulate_run(catalog["llama-2-7b"], h100, SimConstants(), 200, 50, 600, 10)        # V0: 512
    assert simulate_run(catalog["opt-125m"], h100, SimConstants(), 20, 5, 600, 10, vllm_version="0.11.0").status == "ok"


def test_constants_name_the_engine(tmp_path):
    assert "scheduler_engine" not in SimConstants().to_dict() and "async_scheduling" not in SimConstants().to_dict()
    v1 = replace(SimConstants(), scheduler_engine="v1", async_scheduling=True)
    assert v1.to_dict()["scheduler_engine"] == "v1" and v1.to_dict()["async_scheduling"] is True
    path = tmp_path / "v1.yaml"
    path.write_text("constants:\n  scheduler_engine: v1\n  async_scheduling: true\n  max_num_batched_tokens: 2048\n")
    assert load_sim_constants(path) == replace(SimConstants(), scheduler_engine="v1", async_scheduling=True,
                                               max_num_batched_tokens=2048)
    with pytest.raises(ConfigError, match="scheduler_engine"):
        replace(SimConstants(), scheduler_engine="v2")
    with pytest.raises(ConfigError, match="V1 mode"):
        replace(SimConstants(), async_scheduling=True)
    path.write_text("constants:\n  scheduler_engine: v1\n  async_scheduling: 'no'\n")
    with pytest.raises(ConfigError, match="true or false"):
        load_sim_constants(path)


def test_schedule_keys_keep_engines_apart(catalog, h100):
    row = pd.Series({col.MODEL: "opt-125m", col.INPUT_LEN_MEAN: 100.2, col.OUTPUT_LEN_MEAN: 20.0,
                     col.MAX_NUM_SEQS: 8, col.NUM_PROMPTS: 40})
    unknown = key_of_row(row)
    assert unknown.vllm_version == ""
    assert key_of_row(pd.concat([row, pd.Series({col.VLLM_VERSION: np.nan})])) == unknown
    known = key_of_row(pd.concat([row, pd.Series({col.VLLM_VERSION: "0.11.0"})]))
    # A key names the first release of its scheduler: 0.11.0 shares 0.10.1's rules.
    assert known == unknown._replace(vllm_version="0.10.1")
    # A release before 0.6.5 runs the constants' own V0 scheduler: one schedule with the unknown version.
    assert key_of_row(pd.concat([row, pd.Series({col.VLLM_VERSION: "0.5.2.dev1210+g6f078ea3c"})])) == unknown
    table = simulate_schedules([unknown, known], catalog, h100, SimConstants())
    assert len(table) == 2 and table.get(unknown).main.n_steps != table.get(known).main.n_steps
    frame = table.to_frame()
    back = ScheduleTable.from_frame(frame, SimConstants())
    assert sorted(s.key for s in back) == sorted([unknown, known])
    # Written before versions were known: no column, and every key reads as of unknown version.
    plain = simulate_schedules([unknown], catalog, h100, SimConstants()).to_frame()
    assert "vllm_version" not in plain.columns
    assert [s.key for s in ScheduleTable.from_frame(plain, SimConstants())] == [unknown]


def test_v1_schedules_give_the_simulated_throughput(catalog, h100):
    # A V1 budget (2048) is wider than the constants' own (512): the costs take each schedule's width.
    from slim.sim.schedule_costs import ScheduleCosts

    v0 = key_of_row(pd.Series({col.MODEL: "llama-2-7b", col.INPUT_LEN_MEAN: 600, col.OUTPUT_LEN_MEAN: 80,
                               col.MAX_NUM_SEQS: 64, col.NUM_PROMPTS: 150}))
    v1 = v0._replace(vllm_version="0.14.0")
    table = simulate_schedules([v0, v1], catalog, h100, SimConstants())
    predicted = ScheduleCosts([table.get(v0), table.get(v1)], catalog, h100, SimConstants()).predict(SimConstants())
    for key, throughput in zip((v0, v1), predicted.throughput_per_s):
        run = simulate_run(catalog[key.model], h100, SimConstants(), key.input_len, key.output_len, key.max_num_seqs,
                           key.num_prompts, vllm_version=key.vllm_version or None)
        assert throughput == pytest.approx(run.completed * (key.input_len + key.output_len) / run.duration_s,
                                           rel=1e-9)
