"""SLIM model (Eq. 5-12): hand-computed FLOPs and KV bytes, GQA, ablations, vectorisation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.errors import ConfigError, UnknownModelError
from slim.model.equations import (
    ABLATIONS,
    FULL,
    NO_DENSE_DECODE,
    NO_KV_SCAN,
    Ablation,
    SlimParams,
    decode_time_s,
    dense_decode_time_s,
    e2e_components_s,
    kv_bytes_read_per_request,
    kv_context_tokens,
    kv_scan_time_s,
    predict_e2e_s,
    predict_frame,
    predict_throughput_tokens_per_s,
    prefill_flops,
    prefill_time_s,
)
from slim.specs.architecture import MODELS_FILE, ArchitectureArrays, load_architectures
from slim.specs.hardware import HARDWARE_FILE, load_hardware

REPO = Path(__file__).resolve().parents[1]
CATALOG = load_architectures(MODELS_FILE)
H100 = load_hardware(HARDWARE_FILE)["h100-64gb"]
OPT_1_3B = CATALOG["opt-1.3b"]
MISTRAL_7B = CATALOG["mistral-7b"]
PARAMS = SlimParams(eta_compute=0.5, eta_memory=0.8, batch_offset=4.0,
                    alpha_s_per_token=1e-3, gamma_s_per_token=1e-5, t_fixed_s=0.05)


def test_kv_context_tokens_hand_computed():
    # C(242, 130) = 130 * 243 + 130 * 129 / 2 = 31590 + 8385
    assert kv_context_tokens(242, 130) == 39975
    # C(256, 256) = 256 * 257 + 256 * 255 / 2 = 65792 + 32640
    assert kv_context_tokens(256, 256) == 98432
    # One output token attends IL + 1 positions.
    assert kv_context_tokens(100, 1) == 101


def test_kv_context_tokens_equals_explicit_sum():
    il, ol = 37, 19
    assert kv_context_tokens(il, ol) == sum(il + j for j in range(1, ol + 1))


def test_prefill_flops_opt_1_3b_hand_computed():
    # OPT-1.3B: L = 24, D = D_kv = 2048, r_ff = 8192 / 2048 = 4.
    # Per token per layer: 4 D^2 + 4 D D_kv + 4 * 4 D^2 = 24 D^2 = 24 * 4194304 = 100663296.
    # B IL = 242: 100663296 * 242 = 24360517632; attention 4 * 242^2 * 2048 = 479756288.
    # F_pre = 24 * (24360517632 + 479756288) = 596166574080.
    assert prefill_flops(OPT_1_3B, 242, 1) == 596_166_574_080


def test_prefill_flops_mistral_7b_hand_computed():
    # Mistral-7B: L = 32, D = 4096, D_kv = 8 * 128 = 1024, SwiGLU r_ff = 1.5 * 14336 / 4096 = 5.25.
    # Per token per layer: D^2 (4 + 4 * 1024 / 4096 + 4 * 5.25) = 26 D^2 = 436207616.
    # B IL = 4 * 250 = 1000: 436207616000; attention 4 * 4 * 250^2 * 4096 = 4096000000.
    # F_pre = 32 * (436207616000 + 4096000000) = 14089715712000.
    assert MISTRAL_7B.kv_dim == 1024
    assert MISTRAL_7B.ffn_ratio == 5.25
    assert prefill_flops(MISTRAL_7B, 250, 4) == 14_089_715_712_000


def test_kv_bytes_hand_computed():
    # OPT-1.3B: M_dec = 2 * L * D_kv * b_kv * C = 2 * 24 * 2048 * 2 * 39975 = 196608 * 39975.
    assert kv_bytes_read_per_request(OPT_1_3B, 242, 130) == 7_859_404_800
    # Mistral-7B: 2 * 32 * 1024 * 2 * C(256, 256) = 131072 * 98432.
    assert kv_bytes_read_per_request(MISTRAL_7B, 256, 256) == 12_901_679_104
    # Per token this is the architecture's KV footprint.
    assert kv_bytes_read_per_request(OPT_1_3B, 0, 1) == OPT_1_3B.kv_bytes_per_token()


def test_gqa_reads_a_quarter_of_mha_kv_bytes():
    mistral_as_mha = dataclasses.replace(MISTRAL_7B, n_kv_heads=MISTRAL_7B.n_q_heads)
    ratio = kv_bytes_read_per_request(mistral_as_mha, 512, 128) / kv_bytes_read_per_request(MISTRAL_7B, 512, 128)
    assert ratio == pytest.approx(4.0, rel=1e-15)
    # Prefill differs only in the 4 D D_kv projection term (K and V are narrower).
    flops_difference = prefill_flops(mistral_as_mha, 512, 2) - prefill_flops(MISTRAL_7B, 512, 2)
    d = MISTRAL_7B.hidden_dim
    assert flops_difference == MISTRAL_7B.n_layers * 2 * 512 * 4 * d * (d - MISTRAL_7B.kv_dim)


def test_time_terms_hand_computed():
    # T_d = alpha OL + gamma L (D / 1024)^2 OL = 1e-3 * 130 + 1e-5 * 24 * 4 * 130 = 0.13 + 0.1248.
    assert dense_decode_time_s(OPT_1_3B, PARAMS, 130) == pytest.approx(0.2548, rel=1e-12)
    # T_pre = F_pre / (eta_c F_max).
    assert prefill_time_s(OPT_1_3B, H100, PARAMS, 242, 1) == pytest.approx(596_166_574_080 / (0.5 * 989e12))
    # KV scan = (B + B0) M_dec / (eta_m BW_max) with B = 16, B0 = 4.
    expected_kv_s = 20 * 7_859_404_800 / (0.8 * 1.62e12)
    assert kv_scan_time_s(OPT_1_3B, H100, PARAMS, 242, 130, 16) == pytest.approx(expected_kv_s)
    assert decode_time_s(OPT_1_3B, H100, PARAMS, 242, 130, 16) == pytest.approx(0.2548 + expected_kv_s)


def test_e2e_and_throughput_follow_eq_5_and_6():
    il, ol, batch = 242, 130, 16
    expected_e2e = (prefill_time_s(OPT_1_3B, H100, PARAMS, il, batch)
                    + decode_time_s(OPT_1_3B, H100, PARAMS, il, ol, batch) + PARAMS.t_fixed_s)
    e2e = predict_e2e_s(OPT_1_3B, H100, PARAMS, il, ol, batch)
    assert e2e == pytest.approx(expected_e2e, rel=1e-14)
    throughput = predict_throughput_tokens_per_s(OPT_1_3B, H100, PARAMS, il, ol, batch)
    assert throughput == pytest.approx(batch * (il + ol) / expected_e2e, rel=1e-14)


def test_ablations_remove_exactly_their_term():
    il, ol, batch = np.array([128, 512]), np.array([64, 256]), np.array([1, 64])
    full = e2e_components_s(OPT_1_3B, H100, PARAMS, il, ol, batch, FULL)
    no_kv = e2e_components_s(OPT_1_3B, H100, PARAMS, il, ol, batch, NO_KV_SCAN)
    no_dense = e2e_components_s(OPT_1_3B, H100, PARAMS, il, ol, batch, NO_DENSE_DECODE)
    assert np.all(full.kv_scan_s > 0) and np.all(full.dense_decode_s > 0)
    np.testing.assert_array_equal(no_kv.kv_scan_s, 0.0)
    np.testing.assert_array_equal(no_dense.dense_decode_s, 0.0)
    for kept in ("prefill_s", "fixed_s"):
        np.testing.assert_array_equal(getattr(no_kv, kept), getattr(full, kept))
        np.testing.assert_array_equal(getattr(no_dense, kept), getattr(full, kept))
    np.testing.assert_array_equal(no_kv.dense_decode_s, full.dense_decode_s)
    np.testing.assert_array_equal(no_dense.kv_scan_s, full.kv_scan_s)
    full_e2e = predict_e2e_s(OPT_1_3B, H100, PARAMS, il, ol, batch)
    np.testing.assert_allclose(full_e2e - predict_e2e_s(OPT_1_3B, H100, PARAMS, il, ol, batch, NO_KV_SCAN),
                               full.kv_scan_s, rtol=1e-12)
    np.testing.assert_allclose(full_e2e - predict_e2e_s(OPT_1_3B, H100, PARAMS, il, ol, batch, NO_DENSE_DECODE),
                               full.dense_decode_s, rtol=1e-12)


def test_ablated_prediction_ignores_the_removed_constants():
    other = dataclasses.replace(PARAMS, eta_memory=0.1, batch_offset=100.0)
    assert predict_e2e_s(OPT_1_3B, H100, PARAMS, 242, 130, 8, NO_KV_SCAN) == \
        predict_e2e_s(OPT_1_3B, H100, other, 242, 130, 8, NO_KV_SCAN)
    other = dataclasses.replace(PARAMS, alpha_s_per_token=1.0, gamma_s_per_token=1.0)
    assert predict_e2e_s(OPT_1_3B, H100, PARAMS, 242, 130, 8, NO_DENSE_DECODE) == \
        predict_e2e_s(OPT_1_3B, H100, other, 242, 130, 8, NO_DENSE_DECODE)


def test_ablation_names_round_trip():
    assert set(ABLATIONS) == {"full", "no_kv_scan", "no_dense_decode"}
    for ablation in ABLATIONS.values():
        assert Ablation.from_dict(ablation.to_dict()) == ablation


def test_params_round_trip_and_missing_key():
    assert SlimParams.from_dict(PARAMS.to_dict()) == PARAMS
    incomplete = PARAMS.to_dict()
    del incomplete["t_fixed_s"]
    with pytest.raises(ConfigError, match="t_fixed_s"):
        SlimParams.from_dict(incomplete)


def test_broadcasting_and_a_million_configurations():
    rng = np.random.default_rng(7)
    n = 1_000_000
    il, ol = rng.integers(1, 4096, n), rng.integers(1, 4096, n)
    batch = rng.uniform(1, 512, n)
    throughput = predict_throughput_tokens_per_s(OPT_1_3B, H100, PARAMS, il, ol, batch)
    assert throughput.shape == (n,) and np.isfinite(throughput).all() and (throughput > 0).all()
    grid = predict_e2e_s(OPT_1_3B, H100, PARAMS, np.array([128, 512])[:, None, None],
                         np.array([64, 128, 256])[None, :, None], np.array([1.0, 8.0, 64.0, 512.0]))
    assert grid.shape == (2, 3, 4)
    assert grid[1, 2, 3] == predict_e2e_s(OPT_1_3B, H100, PARAMS, 512, 256, 512.0)


def test_stacked_architectures_match_single_predictions():
    arrays = ArchitectureArrays.stack([OPT_1_3B, MISTRAL_7B])
    stacked = predict_e2e_s(arrays, H100, PARAMS, 300, 200, 32.0)
    singles = [predict_e2e_s(arch, H100, PARAMS, 300, 200, 32.0) for arch in (OPT_1_3B, MISTRAL_7B)]
    np.testing.assert_allclose(stacked, singles, rtol=1e-14)


def test_predict_frame_matches_per_row_predictions():
    frame = pd.DataFrame({
        col.MODEL: ["opt-1.3b", "mistral-7b", "facebook/opt-1.3b", "opt-6.7b"],
        col.INPUT_LEN_MEAN: [242.0, 250.0, 512.0, 128.0],
        col.OUTPUT_LEN_MEAN: [130.0, 261.0, 64.0, 384.0],
        col.MEAN_BATCH_SIZE: [15.2, 3.9, 100.0, 1.0],
        col.MAX_NUM_SEQS: [16, 4, 128, 1],
    })
    e2e_s, throughput = predict_frame(CATALOG, H100, PARAMS, frame, NO_DENSE_DECODE)
    for index, row in enumerate(frame.itertuples(index=False)):
        arch = CATALOG[row.model]
        expected = predict_e2e_s(arch, H100, PARAMS, row.input_len_mean, row.output_len_mean,
                                 row.mean_batch_size, NO_DENSE_DECODE)
        assert e2e_s[index] == pytest.approx(expected, rel=1e-14)
        assert throughput[index] == pytest.approx(
            row.mean_batch_size * (row.input_len_mean + row.output_len_mean) / expected, rel=1e-14)


def test_predict_frame_accepts_a_plain_mapping_and_names_unknown_models():
    frame = pd.DataFrame({col.MODEL: ["opt-1.3b"], col.INPUT_LEN_MEAN: [242.0],
                          col.OUTPUT_LEN_MEAN: [130.0], col.MEAN_BATCH_SIZE: [8.0]})
    from_mapping, _ = predict_frame({"opt-1.3b": OPT_1_3B}, H100, PARAMS, frame)
    from_catalog, _ = predict_frame(CATALOG, H100, PARAMS, frame)
    np.testing.assert_array_equal(from_mapping, from_catalog)
    with pytest.raises(UnknownModelError, match="gpt-5"):
        predict_frame(CATALOG, H100, PARAMS, frame.assign(**{col.MODEL: "gpt-5"}))
    with pytest.raises(ConfigError, match="gpt-5"):
        predict_frame({"opt-1.3b": OPT_1_3B}, H100, PARAMS, frame.assign(**{col.MODEL: "gpt-5"}))
    with pytest.raises(ConfigError, match=col.MEAN_BATCH_SIZE):
        predict_frame(CATALOG, H100, PARAMS, frame.drop(columns=col.MEAN_BATCH_SIZE))


def test_a_fine_tuned_variant_resolves_to_its_base_architecture_and_an_unknown_one_names_the_nearest():
    from slim.errors import UnknownModelError
    from slim.specs.architecture import load_architectures

    catalog = load_architectures()
    assert catalog.resolve_name("meta-llama/Meta-Llama-3-8B-Instruct") == "llama-3-8b"
    assert catalog.resolve_name("mistralai/Mistral-7B-Instruct-v0.1") == "mistral-7b"
    assert catalog.resolve_name("Llama-2-7b-chat-hf") == "llama-2-7b"
    assert catalog.resolve_name("opt-2.7b-instructor") is None, "only whole words of a fine-tune's name go"
    assert catalog.resolve_name("meta-llama/Llama-3.1-8B-Instruct") == "llama-3.1-8b"
    with pytest.raises(UnknownModelError, match="The nearest known: llama-3-8b") as error:
        catalog["meta-llama/Meta-Llama-3-9B-Instruct"]
    assert "--model-config" in str(error.value)
