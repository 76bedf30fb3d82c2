"""The decode-step physics (slim.gpu.decode_step) and what builds on it (the generalised knee, the
memory plan, the per-dtype tensor peaks) recover hand-computed values for dense, mixture-of-experts,
latent-attention, sliding-window and quantised models, and reduce to the knee note's for dense ones."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from slim.errors import ConfigError
from slim.gpu.decode_step import (
    active_matmul_params,
    attention_flops_per_token,
    decode_flops_per_token,
    decode_step_weight_bytes,
    expected_distinct_experts,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    kv_bytes_per_token_per_layer,
)
from slim.gpu.kv_memory import (
    VllmMemoryProfile,
    default_kv_reservation_bytes,
    kv_bytes_needed,
    kv_bytes_per_token_per_rank,
    plan_kv_cache,
)
from slim.gpu.roofline import knee_batch_size, kv_bytes_per_seq, recommend_knee
from slim.specs.hardware import GIB, HARDWARE_FILE, load_hardware


@pytest.fixture(scope="module")
def hardware():
    return load_hardware(HARDWARE_FILE)


# --- routed experts -----------------------------------------------------------------------------

def test_expected_distinct_experts_by_hand_and_by_simulation():
    # One token touches k experts; two Mixtral tokens 8 (1 - 0.75^2) = 3.5; many tokens every expert.
    np.testing.assert_allclose(expected_distinct_experts(8, 2, [0, 1, 2, 1e6]), [0, 2, 3.5, 8])
    assert float(expected_distinct_experts(128, 4, 1, expert_parallel=4)) == pytest.approx(1.0)
    np.testing.assert_allclose(expected_distinct_experts(256, 8, 64, expert_parallel=8),
                               expected_distinct_experts(256, 8, 64) / 8)
    # Uniform routing of k distinct experts per token, simulated: the formula is its exact mean.
    rng = np.random.default_rng(7)
    experts, k, tokens, trials = 16, 3, 5, 20000
    picks = np.argsort(rng.random((trials, tokens, experts)), axis=2)[:, :, :k]
    touched = np.array([len(np.unique(trial)) for trial in picks])
    assert touched.mean() == pytest.approx(float(expected_distinct_experts(experts, k, tokens)), rel=0.01)
    with pytest.raises(ConfigError, match="does not divide"):
        expected_distinct_experts(8, 2, 4, expert_parallel=3)
    with pytest.raises(ConfigError, match="experts per token"):
        expected_distinct_experts(8, 9, 4)


def test_weight_bytes_of_a_step(catalog):
    dense = catalog["llama-3-8b"]
    np.testing.assert_array_equal(decode_step_weight_bytes(dense, [1, 64, 512]), [dense.n_params * 2] * 3)
    assert float(decode_step_weight_bytes(dense, 8, tensor_parallel=2)) == dense.n_params
    assert float(decode_step_weight_bytes(dense, 8, count_input_embedding=False)) == (
        dense.n_params - 128256 * 4096) * 2
    mixtral = catalog.architecture("mixtral-8x7b")
    expert = 3 * 4096 * 14336 * 2                              # one expert's bytes
    non_expert = (mixtral.n_params - 32 * 8 * 3 * 4096 * 14336) * 2
    assert float(decode_step_weight_bytes(mixtral, 1)) == non_expert + 32 * 2 * expert == 25_759_850_496
    assert float(decode_step_weight_bytes(mixtral, 2)) == pytest.approx(non_expert + 32 * 3.5 * expert)
    assert float(decode_step_weight_bytes(mixtral, 1e6)) == pytest.approx(mixtral.weight_bytes())
    # gpt-oss-120b on 4 GPUs with expert parallelism: a quarter of the dense part, 32 whole MXFP4 experts each.
    oss = catalog.architecture("gpt-oss-120b")
    mxfp4_expert = 3 * 2880 * 2880 * 4.25 / 8
    dense_part = oss.weight_bytes() - 36 * 128 * mxfp4_expert
    expected = dense_part / 4 + 36 * 32 * (1 - (1 - 4 / 128) ** 16) * mxfp4_expert
    assert float(decode_step_weight_bytes(oss, 16, tensor_parallel=4, expert_parallel=4)) == pytest.approx(expected)
    # Without expert parallelism every GPU holds a quarter of every expert.
    assert float(decode_step_weight_bytes(oss, 16, tensor_parallel=4)) == pytest.approx(
        dense_part / 4 + 36 * 128 * (1 - (1 - 4 / 128) ** 16) * mxfp4_expert / 4)


# --- FLOPs --------------------------------------------------------------------------------------

def test_flops_per_token(catalog):
    llama = catalog["llama-3-8b"]
    matrices = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 128256 * 4096
    assert active_matmul_params(llama) == matrices
    assert float(decode_flops_per_token(llama, 2048)) == 2 * matrices + 32 * 4 * 32 * 128 * 2048
    opt = catalog["opt-1.3b"]               # tied: the LM head multiplies by the embedding table
    assert active_matmul_params(opt) == 24 * (4 * 2048**2 + 2 * 2048 * 8192) + 50272 * 2048
    mixtral = catalog.architecture("mixtral-8x7b")
    assert active_matmul_params(mixtral) == (32 * (4096 * 6144 + 4096 * 4096) + 32000 * 4096
                                             + 0.25 * 32 * 8 * 3 * 4096 * 14336)
    # MLA, absorbed: scores over the 576-element latent, the weighted sum over its 512.
    deepseek = catalog.architecture("deepseek-v3")
    assert float(attention_flops_per_token(deepseek, 1000)) == 61 * 2 * 128 * (576 + 512) * 1000
    # gpt-oss: half the layers attend to 128 tokens at most.
    oss = catalog.architecture("gpt-oss-120b")
    assert float(attention_flops_per_token(oss, 8192)) == 2 * 64 * 128 * (18 * 8192 + 18 * 128)
    np.testing.assert_allclose(attention_flops_per_token(oss, [100, 128]), [2 * 64 * 128 * 36 * 100,
                                                                            2 * 64 * 128 * 36 * 128])


# --- KV cache -----------------------------------------------------------------------------------

def test_kv_bytes_per_rank(catalog):
    llama = catalog["llama-3.1-70b"]
    assert kv_bytes_per_token_per_layer(llama) == 2 * 8 * 128 * 2
    assert kv_bytes_per_token_per_layer(llama, 8) == kv_bytes_per_token_per_layer(llama, 16) == 2 * 1 * 128 * 2
    assert kv_bytes_per_token(llama, 16) == 80 * 512 == kv_bytes_per_token_per_rank(llama, 16)
    assert kv_bytes_per_token(llama, 1, bytes_per_element=1) == llama.kv_bytes_per_token() // 2
    deepseek = catalog.architecture("deepseek-v3")
    # Every rank holds the whole latent (vLLM's get_num_kv_heads is 1 for MLA).
    assert kv_bytes_per_token_per_rank(deepseek, 8) == kv_bytes_per_token(deepseek, 1) == 61 * 576 * 2


def test_kv_bytes_per_sequence(catalog):
    llama = catalog["llama-3-8b"]
    np.testing.assert_array_equal(kv_bytes_per_sequence(llama, [372.45, 2048]),
                                  llama.kv_bytes_per_token() * np.array([372.45, 2048]))
    assert float(kv_bytes_per_sequence(llama, 372.45, block_size=16)) == 384 * llama.kv_bytes_per_token()
    oss = catalog.architecture("gpt-oss-120b")
    per_layer = 2 * 8 * 64 * 2
    assert float(kv_bytes_per_sequence(oss, 8192)) == 18 * per_layer * 8192 + 18 * per_layer * 128 == 306_708_480
    assert float(kv_bytes_per_sequence(oss, 8200, block_size=16)) == 18 * per_layer * (8208 + 128)
    assert float(kv_bytes_per_sequence(oss, 100)) == 36 * per_layer * 100      # inside the window
    gemma = catalog.architecture("gemma-3-27b")
    assert float(kv_bytes_per_seq(gemma, 8192)) == (10 * 8192 + 52 * 1024) * 2 * 16 * 128 * 2


# --- the generalised knee ------------------------------------------------------------------------

def test_the_knee_of_a_dense_model_is_the_notes_closed_form_with_formats_folded_in(catalog):
    llama = catalog["llama-3-8b"]
    knee = float(knee_batch_size(llama, 2048))
    assert knee == llama.n_params * 2 / (llama.kv_bytes_per_token() * 2048)
    assert float(knee_batch_size(llama.served(kv_cache_dtype="fp8"), 2048)) == 2 * knee
    fp8 = llama.served(quantization="fp8")
    assert float(knee_batch_size(fp8, 2048)) == pytest.approx(fp8.weight_bytes() / llama.weight_bytes() * knee)
    # Eight ranks split weights and the 8 KV heads alike; sixteen replicate the heads, halving the knee.
    assert float(knee_batch_size(llama, 2048, tensor_parallel=8)) == pytest.approx(knee)
    assert float(knee_batch_size(llama, 2048, tensor_parallel=16)) == pytest.approx(knee / 2)


def test_the_knee_of_a_mixture_of_experts_solves_w_of_b_equal_b_kv(catalog):
    from scipy.optimize import brentq

    for model, tp, ep in [("mixtral-8x7b", 1, 1), ("qwen3-30b-a3b", 1, 1), ("gpt-oss-120b", 4, 4),
                          ("deepseek-v3", 8, 8)]:
        arch = catalog.architecture(model)
        ctx = np.array([1024.0, 4096.0, 16384.0])
        knees = knee_batch_size(arch, ctx, tensor_parallel=tp, expert_parallel=ep)
        kv = kv_bytes_per_seq(arch, ctx, tensor_parallel=tp)
        for knee, per_seq in zip(knees, kv):
            def excess(batch, per_seq=per_seq):
                return float(decode_step_weight_bytes(arch, batch, tensor_parallel=tp, expert_parallel=ep)) \
                    - batch * per_seq
            assert knee == pytest.approx(brentq(excess, 1e-9, 1e9, xtol=1e-12), rel=1e-9), model
            low = float(decode_step_weight_bytes(arch, 1e-12, tensor_parallel=tp, expert_parallel=ep)) / per_seq
            assert low < knee <= arch.weight_bytes() / tp / per_seq * (1 + 1e-12)   # equal: all experts read
        assert np.all(np.diff(knees) < 0)       # longer contexts, earlier knee
    # MLA's latent is not split: per GPU, eight ranks read an eighth of the weights but the whole KV.
    deepseek = catalog.architecture("deepseek-v3")
    assert float(kv_bytes_per_seq(deepseek, 4096, tensor_parallel=8)) == 61 * 576 * 2 * 4096


def test_recommend_knee_uses_the_generalised_knee(catalog, hardware):
    oss, hw = catalog.architecture("gpt-oss-120b"), hardware["h100-sxm-80gb"]
    rec = recommend_knee(oss, hw, 2048, tensor_parallel=2)
    assert rec.b_knee == float(knee_batch_size(oss, 2048, tensor_parallel=2))
    assert rec.model_bytes == pytest.approx(rec.b_knee * rec.kv_bytes_per_seq)
    batches = np.asarray(rec.batch_sizes, dtype=float)
    steps = decode_step_weight_bytes(oss, batches, tensor_parallel=2) + batches * rec.kv_bytes_per_seq
    np.testing.assert_allclose(rec.tpot_s, steps / hw.hbm_bandwidth_bytes_per_s)
    assert rec.low <= rec.suggested_max_num_seqs <= max(rec.high, math.ceil(rec.low))


# --- memory plan ---------------------------------------------------------------------------------

def test_the_memory_plan_prices_formats_windows_and_latents(catalog, hardware):
    oss = catalog.architecture("gpt-oss-120b")
    per_layer = 2 * 8 * 64 * 2
    # vLLM's hybrid allocator: one group of the 18 full layers (512 blocks of 8,192 tokens) and one of the 18
    # sliding ones, holding ceil((128 - 1) / 16) + 1 = 9 blocks of its window of 128.
    assert float(kv_bytes_needed(oss, 4, 8000, 192)) == 4 * 18 * per_layer * 16 * (512 + 9)
    hw = hardware["h100-sxm-80gb"]
    assert default_kv_reservation_bytes(oss, hw) == pytest.approx(0.9 * 80 * GIB - oss.weight_bytes() - GIB)
    assert oss.weight_bytes() < 0.55 * oss.n_params * 2          # MXFP4 experts
    deepseek = catalog.architecture("deepseek-v3")
    profile = VllmMemoryProfile(0.0, 0.0, 0.0, 0.0, 8192, 16)
    plan = plan_kv_cache(deepseek, hardware["h200"], profile, max_num_seqs=64, max_model_len=32768,
                         tensor_parallel=8)
    assert plan.weights_bytes_per_rank == deepseek.weight_bytes() / 8
    assert plan.num_gpu_blocks == int(plan.kv_cache_bytes // (16 * 61 * 576 * 2)) and plan.failure is None
    # A sliding layer holds at most its window, so a long max_model_len needs fewer blocks.
    oss_plan = plan_kv_cache(oss, hw, profile, 64, 131072, tensor_parallel=2)
    assert oss_plan.failure is None


# --- per-dtype peaks and links -------------------------------------------------------------------

def test_tensor_peaks_by_compute_dtype_fall_back_to_16_bit(hardware):
    h100, a100, mi250, mi300x = (hardware[name] for name in ("h100-sxm-80gb", "a100-80gb", "mi250", "mi300x"))
    assert h100.peak_flops_for("fp8") == 1.979e15 and h100.peak_flops_for("bf16") == 9.89e14
    assert h100.peak_flops_for("fp4") == h100.peak_flops_per_s               # Hopper has no FP4 tensor cores
    assert a100.peak_flops_for("fp8") == a100.peak_flops_per_s and a100.peak_flops_for("int8") == 6.24e14
    assert mi250.peak_flops_for("fp8") == mi250.peak_flops_per_s and mi300x.peak_flops_for("fp8") == 2.6149e15
    assert h100.interconnect == "NVLink 4" and h100.interconnect_bandwidth_bytes_per_s == 4.5e11
    assert a100.interconnect_bandwidth_bytes_per_s == 3.0e11 and hardware["l40s"].interconnect.startswith("PCIe")
    with pytest.raises(ConfigError, match="compute dtype 'fp6'"):
        h100.peak_flops_for("fp6")


def test_a_hardware_file_without_the_new_keys_still_loads(tmp_path):
    path = tmp_path / "hardware.yaml"
    entry = {"peak_flops_per_s": 1e14, "hbm_bandwidth_bytes_per_s": 1e12, "memory_bytes": 2**34,
             "gpu_memory_utilization": 0.9}
    path.write_text(yaml.safe_dump({"gpu": entry}))
    gpu = load_hardware(path)["gpu"]
    assert gpu.peak_fp8_flops_per_s is None and gpu.interconnect_bandwidth_bytes_per_s is None
    assert gpu.peak_flops_for("fp8") == 1e14
    path.write_text(yaml.safe_dump({"gpu": {**entry, "peak_fp8_flops_per_s": -1}}))
    with pytest.raises(ConfigError, match="peak_fp8_flops_per_s must be a number > 0"):
        load_hardware(path)


def test_every_catalog_entry_cites_its_tensor_peaks(hardware):
    text = Path(HARDWARE_FILE).read_text()
    for name, hw in hardware.items():
        if hw.peak_fp8_flops_per_s or hw.peak_int8_ops_per_s:
            block = text.split(f"\n{name}:\n", 1)[1].split("\n", 1)[1]
            block = block.split("peak_fp8_flops_per_s" if hw.peak_fp8_flops_per_s else "peak_int8_ops_per_s")[0]
            assert "# " in block.split("gpu_memory_utilization")[-1], name
