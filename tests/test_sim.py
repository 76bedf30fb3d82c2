"""slim.sim engine and cost model: conservation, KV limits, preemption, jump == step,
emergent batch size, and the cost model's hand-checkable values."""

from dataclasses import replace

import numpy as np
import pytest

from slim.errors import ConfigError
from slim.sim import SimConstants, StepCostModel, kv_cache_plan, simulate_run, step_cost_breakdown


def tiny_kv_constants(arch, hw, consts, blocks, max_num_seqs):
    """Constants whose KV cache holds about ``blocks`` blocks (more reserved device memory)."""
    plan = kv_cache_plan(arch, hw, consts, max_num_seqs)
    block_bytes = plan.kv_cache_bytes / plan.num_gpu_blocks
    extra = (plan.kv_cache_bytes - (blocks + 0.5) * block_bytes) / hw.gpu_memory_utilization
    return replace(consts, device_reserved_bytes=consts.device_reserved_bytes + extra)


def test_conservation_every_request_completes_once(catalog, h100):
    il, ol, n = 100, 37, 60
    result = simulate_run(catalog["opt-125m"], h100, SimConstants(), il, ol, 8, n, seed=1)
    assert result.status == "ok" and result.completed == n
    assert len(result.e2e_s) == n and np.all(result.e2e_s > result.ttft_s) and np.all(result.ttft_s > 0)
    last = result.samples.iloc[-1]
    assert last["request_success_total"] == n + 1          # + the client's test prompt
    assert last["generation_tokens_total"] == (n + 1) * ol
    assert last["prompt_tokens_total"] == (n + 1) * il
    assert last["num_requests_running"] == 0 and last["num_requests_waiting"] == 0
    assert len(result.itl_s) == n * (ol - 1)
    summary = result.benchmark_summary()
    assert summary["total_input_tokens"] == n * il and summary["total_output_tokens"] == n * ol


def test_tiny_kv_cache_forces_preemption_but_never_overflows(catalog, h100):
    arch = catalog["opt-125m"]
    consts = tiny_kv_constants(arch, h100, SimConstants(), blocks=140, max_num_seqs=16)
    result = simulate_run(arch, h100, consts, 100, 200, 16, 40, seed=2, max_model_len=512)
    assert result.plan.num_gpu_blocks == 140
    assert result.num_preemptions > 0
    assert result.completed == 40
    assert result.samples["gpu_cache_usage_perc"].max() <= 1.0
    # The KV cache, not the flag, caps the batch: far fewer than 16 sequences fit on average.
    assert result.mean_batch_size < 12
    # Recomputed prompts are counted as prompt tokens, so more than (N + 1) x IL were prefilled.
    assert result.samples["prompt_tokens_total"].iloc[-1] > 41 * 100


def test_no_preemption_when_the_kv_cache_is_ample(catalog, h100):
    result = simulate_run(catalog["opt-125m"], h100, SimConstants(), 100, 200, 16, 40, seed=2)
    assert result.num_preemptions == 0


@pytest.mark.parametrize("model, il, ol, batch, n, tiny", [
    ("opt-1.3b", 242, 130, 4, 40, False),
    ("opt-125m", 100, 40, 512, 300, False),
    ("opt-125m", 100, 200, 16, 40, True),
    # Identical waves (B IL <= 512: B prompts admitted and prefilled in one step) advanced at once.
    ("opt-1.3b", 256, 130, 1, 50, False),
    ("opt-2.7b", 128, 33, 2, 41, False),
    ("opt-125m", 128, 3, 4, 30, False),
])
def test_jump_equals_step_by_step(catalog, h100, model, il, ol, batch, n, tiny):
    arch = catalog[model]
    consts = tiny_kv_constants(arch, h100, SimConstants(), 140, batch) if tiny else SimConstants()
    jumped, stepped = (simulate_run(arch, h100, consts, il, ol, batch, n, seed=5, jump=jump, max_model_len=512)
                       for jump in (True, False))
    assert jumped.benchmark_summary() == stepped.benchmark_summary()
    assert jumped.samples.equals(stepped.samples) and jumped.samples.dtypes.equals(stepped.samples.dtypes)
    assert np.array_equal(jumped.itl_s, stepped.itl_s)
    assert np.array_equal(jumped.ttft_s, stepped.ttft_s) and np.array_equal(jumped.e2e_s, stepped.e2e_s)
    assert (jumped.prefill_time_s, jumped.decode_time_s, jumped.num_preemptions) == (
        stepped.prefill_time_s, stepped.decode_time_s, stepped.num_preemptions)


def test_batch_emerges_from_the_token_budget(catalog, h100):
    """With budget 512 tokens and max_num_seqs 512, decodes R and prefill admissions balance at
    R / (OL - 1) = (512 - R) / IL completions per step: about 178 for IL 242, OL 130 (the real
    trace saturates at about 180 with the prefilling sequences)."""
    il, ol = 242, 130
    result = simulate_run(catalog["opt-1.3b"], h100, SimConstants(), il, ol, 512, 1500, seed=0)
    balance = 512 * (ol - 1) / (il + ol - 1)
    running = result.samples["num_requests_running"]
    assert abs(running[running > 0].median() - balance) < 0.05 * balance
    assert result.samples["gpu_cache_usage_perc"].max() < 0.25


def test_stats_give_the_exact_duration(catalog, h100):
    arch = catalog["opt-350m"]
    consts = SimConstants()
    result = simulate_run(arch, h100, consts, 128, 50, 32, 200, seed=3, record_stats=True)
    other = consts.with_fitted({"gemm_compute_efficiency": 0.3, "step_overhead_per_seq_s": 60e-6})
    replay = simulate_run(arch, h100, other, 128, 50, 32, 200, seed=3)
    assert result.stats.duration_s(StepCostModel(arch, h100, consts)) == pytest.approx(result.duration_s, rel=1e-9)
    assert result.stats.duration_s(StepCostModel(arch, h100, other)) == pytest.approx(replay.duration_s, rel=1e-9)


def test_kv_plan_matches_the_real_server_logs(catalog, h100):
    """The public traces' logs: OPT-1.3B 18293 blocks at max_num_seqs 512, 18597 at 1;
    Llama-2-7B 5608 at 512, 5677 at 1 (our memory model is within 0.2 %)."""
    consts = SimConstants()
    for model, batch, blocks in (("opt-1.3b", 512, 18293), ("opt-1.3b", 1, 18597),
                                 ("llama-2-7b", 512, 5608), ("llama-2-7b", 1, 5677)):
        plan = kv_cache_plan(catalog[model], h100, consts, batch)
        assert plan.failure is None
        assert plan.num_gpu_blocks == pytest.approx(blocks, rel=2e-3)


def test_cost_breakdown_roofline_facts(catalog, h100):
    consts = SimConstants()
    mistral = catalog["mistral-7b"]
    parts = step_cost_breakdown(mistral, h100, consts, n_decode_seqs=4, decode_context_tokens=2048,
                                n_prefill_tokens=0)
    # Decode attention: 4 D FLOPs per 2 D_kv b_kv bytes per layer -> H_q / H_kv = 4 FLOP/B.
    assert parts["attention_decode_flops"] / parts["attention_decode_bytes"] == pytest.approx(4.0)
    assert parts["attention_decode_bytes"] == pytest.approx(2048 * mistral.kv_bytes_per_token())
    # Small-batch decode is weight-bound: GEMM + LM head bytes ~ all weights.
    weight_bytes = parts["gemm_bytes"] + parts["lm_head_bytes"]
    assert weight_bytes == pytest.approx(mistral.weight_bytes(), rel=0.05)
    assert parts["total_s"] == pytest.approx(parts["gpu_s"] + parts["overhead_s"])
    tp2 = step_cost_breakdown(mistral, h100, consts, 4, 2048, 0, tensor_parallel=2)
    assert tp2["attention_decode_bytes"] == pytest.approx(parts["attention_decode_bytes"] / 2)
    assert tp2["allreduce_s"] > 0 and parts["allreduce_s"] == 0
    # Vectorised over arrays; prefill attention grows with chunk x context.
    prefill = step_cost_breakdown(mistral, h100, consts, 0, 0, np.array([128, 512]))
    assert prefill["attention_prefill_flops"][1] > 10 * prefill["attention_prefill_flops"][0]


def test_configurations_vllm_refuses(catalog, h100):
    with pytest.raises(ConfigError):
        simulate_run(catalog["opt-125m"], h100, SimConstants(), 10, 10, 1024, 5)
    oom = simulate_run(catalog["qwen2-72b"], h100, SimConstants(), 256, 128, 8, 10)
    assert oom.status == "cuda_oom" and oom.completed == 0
    assert simulate_run(catalog["qwen2-72b"], h100, SimConstants(), 256, 32, 8, 20, tensor_parallel=4).status == "ok"


def test_the_attention_backend_is_the_one_the_public_servers_logged(catalog, shared_traces_dir):
    """vLLM V0 serves head sizes FlashAttention-2 lacks with XFormers: every server log of the
    public traces that got as far as loading the model says 'Using XFormers backend' exactly for
    the models `attention_backend` puts there (two servers that never started log two lines)."""
    from slim.sim.cost import XFORMERS, attention_backend

    seen = {}
    for log in sorted((shared_traces_dir / "output_length").glob("_*/*/_*/server_out.log")):
        model, text = log.parent.parent.name, log.read_text(errors="replace")
        if "Loading model weights" not in text:
            continue
        seen.setdefault(model, set()).add("Using XFormers backend" in text)
    assert set(seen) == {"opt-1.3b", "opt-2.7b", "llama-2-7b"}
    for model, xformers_logged in seen.items():
        assert xformers_logged == {attention_backend(catalog[model]) == XFORMERS}, model
    assert catalog["opt-2.7b"].head_dim == 80


def test_the_xformers_latency_is_paid_per_layer_and_step_by_xformers_models_only(catalog, h100):
    consts = SimConstants(xformers_attention_latency_s=7e-6)
    for name, pays in (("opt-1.3b", False), ("opt-2.7b", True), ("llama-2-7b", False)):
        arch = catalog[name]
        with_latency = StepCostModel(arch, h100, consts).attention_latency_s(np.array([0, 1, 300]))
        without = StepCostModel(arch, h100, replace(consts, xformers_attention_latency_s=0.0)).attention_latency_s(
            np.array([0, 1, 300]))
        extra = arch.n_layers * 7e-6 if pays else 0.0
        np.testing.assert_allclose(with_latency - without, [0.0, extra, extra], rtol=1e-12, atol=0.0)


def test_jitter_drawn_in_pieces_equals_whole_blocks():
    # Blocks are drawn as far as steps need them; the factors must be those of one draw per block.
    from slim.sim.jitter import JITTER_BLOCK_BITS, StepJitter

    block = 1 << JITTER_BLOCK_BITS
    whole = [1.0 + 0.02 * np.clip(np.random.default_rng([7, b]).standard_normal(block), -3.0, 3.0) for b in (0, 1)]
    jitter = StepJitter(7, 0.02)
    assert jitter.factor(5) == whole[0][5]
    assert np.array_equal(jitter.factors(10, 5000), whole[0][10:5010])
    assert jitter.factor(40_000) == whole[0][40_000]
    assert np.array_equal(jitter.factors(block - 3, 10), np.concatenate((whole[0][-3:], whole[1][:7])))


def test_stretch_block_demand_matches_the_demand_cumulated_step_by_step():
    from slim.sim.scheduler import MAX_STRETCH_STEPS, Scheduler

    rng = np.random.default_rng(3)
    scheduler = Scheduler.__new__(Scheduler)   # only the block accounting is exercised
    scheduler.block_size = 16
    for _ in range(2000):
        scheduler.block_demand_by_phase = [int(v) for v in rng.choice([0, 0, 1, 2, 5, 30], size=16)]
        step, free = int(rng.integers(0, 10**6)), int(rng.integers(0, 5000))
        start = step % 16
        cumulative = np.cumsum(np.resize(np.roll(scheduler.block_demand_by_phase, -start), MAX_STRETCH_STEPS))
        demand = scheduler.stretch_block_demand(step)
        affordable = min(MAX_STRETCH_STEPS, scheduler._affordable_steps(step, free))
        assert affordable == int(np.searchsorted(cumulative, free, side="right"))
        steps = int(rng.integers(1, MAX_STRETCH_STEPS + 1))
        assert demand.after(steps) == cumulative[steps - 1]


def test_a_sliding_window_model_holds_the_sequences_its_windows_leave_room_for(h100):
    """Gemma-3-27B on the 64 GB H100 at 2,048 + 512 tokens: counting every layer as full the cache holds about
    5 sequences; its five-in-six window layers leave room for about 9, so 8 run without preempting."""
    from pathlib import Path

    from slim.gpu.kv_memory import kv_capacity_sequences, kv_capacity_tokens_or_default
    from slim.specs.hf_config import architecture_from_hf_config

    gemma = architecture_from_hf_config(Path(__file__).parent / "data" / "hf_configs" / "gemma-3-27b" / "config.json")
    tokens, _ = kv_capacity_tokens_or_default(float("nan"), gemma, h100)
    assert kv_capacity_sequences(tokens, 2048, 512) < 8 < kv_capacity_sequences(tokens, 2048, 512, gemma)
    result = simulate_run(gemma, h100, SimConstants(), 2048, 512, 8, 24, seed=3, max_model_len=2560)
    assert result.status == "ok" and result.num_preemptions == 0
