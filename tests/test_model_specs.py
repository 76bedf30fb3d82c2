"""Modern checkpoints read as vLLM reads them (slim.specs.hf_config, slim.specs.quantization): the
hand-written public configs of tests/data/hf_configs parse to the published shapes, weight formats,
bits per weight, KV bytes per token and parameter counts, computed here by hand; the catalog's
entries are the same architectures; served forms, formats and refusals name what they change or
lack."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from slim.errors import ConfigError, UnsupportedArchitectureError
from slim.specs.architecture import load_architectures, vllm_model_argument
from slim.specs.formats import KV_CACHE_DTYPE_BYTES, SIXTEEN_BIT
from slim.specs.hf_config import architecture_from_hf_config
from slim.specs.transformer import MlaSpec, MoeSpec, ParameterCounts, SlidingWindow

HF_CONFIGS = Path(__file__).resolve().parent / "data" / "hf_configs"


def _parse(name: str):
    return architecture_from_hf_config(HF_CONFIGS / name / "config.json", name=name)


def _within(value: float, published: float, rounded_to: float) -> bool:
    """`value` prints as `published` at the precision it was published with, rounded to the nearest
    or truncated (Qwen's "3.3B activated" for 3.35B)."""
    return abs(value - published) <= rounded_to / 2 or published <= value < published + rounded_to


# --- each fixture, by hand ------------------------------------------------------------------

def test_mixtral_8x7b():
    arch = _parse("mixtral-8x7b")
    assert (arch.n_layers, arch.hidden_dim, arch.n_q_heads, arch.n_kv_heads, arch.head_dim) == (32, 4096, 32, 8, 128)
    assert arch.moe == MoeSpec(8, 2, 14336) and arch.sliding_window is None and arch.formats.is_sixteen_bit
    attention = 4096 * (4096 + 2 * 1024) + 4096 * 4096
    routed = 32 * 8 * 3 * 4096 * 14336
    other = 32 * (2 * 4096 + 8 * 4096) + 4096           # two norms and the router per layer, final norm
    assert arch.parameters == ParameterCounts(32000 * 4096, 32000 * 4096, 32 * attention, routed, other)
    assert arch.n_params == 46_702_792_704 and _within(arch.n_params, 46.7e9, 0.1e9)
    assert arch.active_params_per_token == 46_702_792_704 - 0.75 * routed == 12_879_925_248
    assert _within(arch.active_params_per_token, 12.9e9, 0.1e9)
    assert arch.kv_bytes_per_token() == 32 * 2 * 8 * 128 * 2 == 131_072
    assert arch.served(kv_cache_dtype="fp8").kv_bytes_per_token() == 65_536


def test_qwen3_30b_a3b():
    arch = _parse("qwen3-30b-a3b")
    assert arch.head_dim == 128 and arch.q_dim == 4096 != arch.hidden_dim
    assert arch.moe == MoeSpec(128, 8, 768) and arch.ffn_dim == 768
    attention = 2048 * (4096 + 2 * 512) + 4096 * 2048
    routed = 48 * 128 * 3 * 2048 * 768
    other = 48 * (2 * 2048 + 2 * 128 + 128 * 2048) + 2048   # norms, q/k norms, router; final norm
    assert arch.parameters == ParameterCounts(151936 * 2048, 151936 * 2048, 48 * attention, routed, other)
    assert arch.n_params == 30_532_122_624 and _within(arch.n_params, 30.5e9, 0.1e9)
    assert arch.active_params_per_token == 3_353_032_704 and _within(arch.active_params_per_token, 3.3e9, 0.1e9)
    assert arch.kv_bytes_per_token() == 48 * 2 * 4 * 128 * 2 == 98_304


def test_gpt_oss_120b():
    arch = _parse("gpt-oss-120b")
    assert (arch.n_layers, arch.hidden_dim, arch.head_dim, arch.q_dim) == (36, 2880, 64, 4096)
    assert arch.moe == MoeSpec(128, 4, 2880) and arch.sliding_window == SlidingWindow(128, 18)
    assert arch.attention_sinks
    assert arch.formats.method == "mxfp4" and arch.formats.dense == SIXTEEN_BIT
    assert arch.formats.routed_experts.bits_per_weight == 4 + 8 / 32 == 4.25
    routed = 36 * 128 * 3 * 2880 * 2880
    per_layer_other = (2 * 2880 + (4096 + 2 * 512) + 2880 + 64       # norms, q/k/v and o biases, sinks
                       + 128 * (2 * 2880 + 2880) + 128 * 2880 + 128)  # expert biases, router and its bias
    assert arch.parameters == ParameterCounts(201088 * 2880, 201088 * 2880,
                                              36 * (2880 * (4096 + 1024) + 4096 * 2880), routed,
                                              36 * per_layer_other + 2880)
    assert arch.n_params == 116_829_156_672 and _within(arch.n_params, 116.83e9, 0.01e9)
    # The model card's 5.13B active leaves out the embedding table and the biases of the 124 unrouted
    # experts (36 x 124 x 8,640 = 38.6M), which this count keeps in `other`.
    active_without_table = arch.active_params_per_token - 201088 * 2880
    assert active_without_table == 5_171_418_432
    assert active_without_table - 36 * 124 * 8640 == pytest.approx(5.13e9, abs=0.005e9)
    # MXFP4 experts, the rest 16-bit: 60.8 GiB, the size of the published checkpoint.
    assert arch.weight_bytes() == routed * 4.25 / 8 + (arch.n_params - routed) * 2
    assert arch.weight_bytes() / 2**30 == pytest.approx(60.8, abs=0.05)
    # Learned sink logits are parameters: the cache holds K and V of the 8 KV heads only.
    assert arch.kv_bytes_per_token() == 36 * 2 * 8 * 64 * 2 == 73_728


def test_deepseek_v3():
    arch = _parse("deepseek-v3")
    assert arch.mla == MlaSpec(512, 1536, 64, 128, 128) and arch.mla.latent_dim == 576
    assert arch.moe == MoeSpec(256, 8, 2048, n_shared_experts=1, shared_expert_ffn_dim=2048, n_dense_layers=3)
    assert arch.ffn_dim == 18432 and arch.n_moe_layers == 58 and arch.head_dim == 192
    attention = (7168 * 1536 + 1536 * 128 * 192          # q_a, q_b
                 + 7168 * 576 + 512 * 128 * (128 + 128)   # kv_a (latent and rotary key), kv_b
                 + 128 * 128 * 7168)                      # o
    expert = 3 * 7168 * 2048
    dense = 61 * attention + 3 * 3 * 7168 * 18432 + 58 * expert
    other = 61 * (1536 + 512 + 2 * 7168) + 58 * (256 * 7168 + 256) + 7168   # norms; router and score bias
    assert arch.parameters == ParameterCounts(129280 * 7168, 129280 * 7168, dense, 58 * 256 * expert, other)
    assert arch.n_params == 671_026_419_200 and _within(arch.n_params, 671e9, 1e9)
    assert arch.active_params_per_token == 37_552_297_472
    assert abs(arch.active_params_per_token / 37e9 - 1) < 0.02       # "37B activated", rounded
    block_bits = 8 + 32 / (128 * 128)
    assert arch.formats.method == "fp8" and arch.formats.dense.bits_per_weight == block_bits == 8.001953125
    assert arch.formats.dense.compute_dtype == arch.formats.routed_experts.compute_dtype == "fp8"
    p = arch.parameters
    assert arch.weight_bytes() == pytest.approx((p.dense + p.routed_experts) * block_bits / 8
                                                 + (p.embedding + p.lm_head + p.other) * 2, rel=1e-15)
    # One latent of 512 + 64 per token and layer: no K/V pair.
    assert arch.kv_bytes_per_token() == 61 * 576 * 2 == 70_272
    assert arch.served(kv_cache_dtype="fp8_e4m3").kv_bytes_per_token() == 35_136


def test_llama_3_1_70b_fp8_compressed_tensors():
    arch = _parse("llama-3.1-70b-fp8")
    assert arch.formats.method == "compressed-tensors"
    assert (arch.formats.dense.bits_per_weight, arch.formats.dense.compute_dtype) == (8.0, "fp8")
    assert arch.formats.embeddings == SIXTEEN_BIT and arch.kv_bytes_per_token() == 80 * 2 * 8 * 128 * 2
    dense = 80 * (8192 * (8192 + 2 * 1024) + 8192 * 8192 + 3 * 8192 * 28672)
    assert arch.parameters.dense == dense and arch.n_params == 70_553_706_496
    assert _within(arch.n_params, 70.6e9, 0.1e9)
    assert arch.weight_bytes() == dense + (arch.n_params - dense) * 2 == 72_656_371_712
    # The catalog's fp8 served form of the 16-bit checkpoint weighs the same.
    assert load_architectures().architecture("llama-3.1-70b-fp8").weight_bytes() == 72_656_371_712


def test_qwen2_5_32b_awq():
    arch = _parse("qwen2.5-32b-awq")
    bits = 4 + (16 + 4) / 128           # fp16 scale and 4-bit zero point per 128 weights
    assert (arch.formats.method, arch.formats.dense.bits_per_weight, arch.formats.dense.compute_dtype) == (
        "awq", bits, "bf16")
    assert arch.n_params == load_architectures()["qwen2.5-32b"].n_params
    dense = arch.parameters.dense
    assert arch.weight_bytes() == dense * bits / 8 + (arch.n_params - dense) * 2 == 19_328_804_864


def test_gemma_3_27b_from_its_multimodal_config():
    arch = _parse("gemma-3-27b")
    assert (arch.n_layers, arch.hidden_dim, arch.n_q_heads, arch.n_kv_heads, arch.head_dim) == (62, 5376, 32, 16, 128)
    assert arch.vocab_size == 262208 and arch.tied_embeddings      # Gemma3TextConfig's defaults
    assert arch.sliding_window == SlidingWindow(1024, 52)            # 5 local : 1 global
    per_layer = 5376 * (4096 + 2 * 2048) + 4096 * 5376 + 3 * 5376 * 21504
    assert arch.parameters == ParameterCounts(262208 * 5376, 0, 62 * per_layer, 0, 62 * (4 * 5376 + 2 * 128) + 5376)
    assert arch.n_params == 27_009_346_304 and _within(arch.n_params, 27.0e9, 0.1e9)
    assert arch.kv_bytes_per_token() == 62 * 2 * 16 * 128 * 2


def test_a_model_folder_reads_modelopt_hf_quant_config():
    arch = architecture_from_hf_config(HF_CONFIGS / "qwen3-30b-a3b-nvfp4")
    assert arch.name == "qwen3-30b-a3b-nvfp4" and arch.hf_id == "nvidia/Qwen3-30B-A3B-NVFP4"
    assert arch.formats.method == "modelopt_fp4" and arch.formats.kv_cache_scheme == "fp8"
    assert arch.formats.dense == arch.formats.routed_experts
    assert (arch.formats.dense.bits_per_weight, arch.formats.dense.compute_dtype) == (4 + 8 / 16, "fp4")
    # --kv-cache-dtype auto is the checkpoint's fp8; bfloat16 overrides it.
    assert arch.kv_bytes_per_token() == 48 * 2 * 4 * 128 * 1
    assert arch.served(kv_cache_dtype="bfloat16").kv_bytes_per_token() == 48 * 2 * 4 * 128 * 2


# --- the catalog ----------------------------------------------------------------------------

CATALOG_FIXTURES = ["mixtral-8x7b", "qwen3-30b-a3b", "gpt-oss-120b", "deepseek-v3", "gemma-3-27b",
                    "opt-350m", "opt-1.3b", "llama-2-7b", "qwen2.5-32b"]
SHAPE_FIELDS = ("n_layers", "hidden_dim", "n_q_heads", "n_kv_heads", "ffn_dim", "ffn_kind", "n_params",
                "vocab_size", "embed_proj_dim", "head_dim", "tied_embeddings", "moe", "mla", "sliding_window",
                "attention_sinks", "formats", "parameters", "kv_cache_dtype")


@pytest.mark.parametrize("model", CATALOG_FIXTURES + ["mistral-7b"])
def test_catalog_entries_are_their_published_configs(catalog, model):
    parsed, entry = _parse(model), catalog.architecture(model)
    if model == "mistral-7b":
        # The catalog keeps every layer full; config.json's window of 4,096 applies to every layer.
        assert parsed.sliding_window == SlidingWindow(4096, 32) and entry.sliding_window is None
        parsed = replace(parsed, sliding_window=None)
    assert {f: getattr(parsed, f) for f in SHAPE_FIELDS} == {f: getattr(entry, f) for f in SHAPE_FIELDS}


@pytest.mark.parametrize("hf_id, key", [
    ("Qwen/Qwen3-32B", "qwen3-32b"), ("Qwen/Qwen3-32B-FP8", "qwen3-32b-fp8"),
    ("meta-llama/Llama-3.1-70B", "llama-3.1-70b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"), ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b"),
    ("Qwen/Qwen3-8B", "qwen3-8b"), ("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"), ("Qwen/Qwen3-235B-A22B", "qwen3-235b-a22b"),
    ("mistralai/Mixtral-8x7B-v0.1", "mixtral-8x7b"), ("openai/gpt-oss-20b", "gpt-oss-20b"),
    ("openai/gpt-oss-120b", "gpt-oss-120b"), ("deepseek-ai/DeepSeek-V3", "deepseek-v3"),
    ("google/gemma-3-27b-it", "gemma-3-27b"), ("google/gemma-3-12b-it", "gemma-3-12b"),
    ("MiniMaxAI/MiniMax-M2.5", "minimax-m2.5"), ("facebook/opt-1.3b", "opt-1.3b"),
    ("meta-llama/Llama-2-7b-hf", "llama-2-7b"),
])
def test_hugging_face_ids_and_short_keys_resolve(catalog, hf_id, key):
    assert catalog.resolve_name(hf_id) == catalog.resolve_name(hf_id.lower()) == catalog.resolve_name(key) == key
    assert catalog.architecture(key).hf_id.lower() == hf_id.lower() or key == "llama-3.1-8b"
    assert key == key.lower() and "/" not in key


def test_every_entry_has_a_hugging_face_id_and_the_published_configs_cite_their_source(catalog):
    text = Path(catalog.source).read_text()
    for name in catalog.names:
        assert catalog.architecture(name).hf_id, name
    for name, entry in yaml.safe_load(text).items():
        if "hf_config" in entry:
            comment = text.split(f"\n{name}:\n", 1)[1].split("display_name")[0]
            assert comment.strip().startswith("#") and "https://" in comment, name


@pytest.mark.parametrize("model, total, active, rounded_to", [
    ("qwen3-32b", 32.8e9, None, 0.1e9),
    ("qwen3-8b", 8.2e9, None, 0.1e9),
    ("qwen3-235b-a22b", 235e9, 22e9, 1e9),
    ("llama-3.1-70b", 70.6e9, None, 0.1e9),
    ("gpt-oss-20b", 20.9e9, None, 0.1e9),
    ("minimax-m2.5", 229e9, None, 1e9),
])
def test_catalog_totals_match_the_published_figures(catalog, model, total, active, rounded_to):
    arch = catalog.architecture(model)
    assert _within(arch.n_params, total, rounded_to), arch.n_params
    if active is not None:
        assert _within(arch.active_params_per_token, active, rounded_to), arch.active_params_per_token


def test_models_beyond_the_dense_formula_are_served_and_say_why(catalog):
    for model, reason in [("mixtral-8x7b", "mixture of experts (8 experts, 2 routed per token)"),
                          ("deepseek-v3", "mixture of experts (256 experts, 8 routed per token, 1 shared)"),
                          ("qwen3-32b", "head_dim 128 differs from D / H_q = 80"),
                          ("llama-3.1-70b-fp8", "quantised weights, fp8"),
                          ("gemma-3-27b", "head_dim 128 differs")]:
        assert model in catalog and catalog.unsupported(model) is None
        assert catalog[model].dense_formula_gap.startswith(reason)      # SLIM's terms beyond the paper serve it
        assert catalog[model] is catalog.architecture(model)
    for model in ("llama-3.1-70b", "qwen3-8b", "llama-3-8b", "mistral-7b"):
        assert model in catalog and catalog[model] is catalog.architecture(model)
        assert catalog[model].dense_formula_gap is None
    with pytest.raises(UnsupportedArchitectureError, match="variable grouped-query"):
        catalog.architecture("decilm-7b")


# --- serving flags --------------------------------------------------------------------------

def test_served_forms(catalog):
    arch = catalog.architecture("llama-3.1-70b")
    fp8 = arch.served(quantization="fp8", kv_cache_dtype="fp8")
    assert (fp8.formats.method, fp8.formats.dense.bits_per_weight, fp8.formats.dense.compute_dtype) == ("fp8", 8, "fp8")
    assert fp8.formats.embeddings == SIXTEEN_BIT and fp8.kv_bytes_per_token() == arch.kv_bytes_per_token() // 2
    assert arch.served() == arch and arch.served(kv_cache_dtype="auto").kv_bytes_per_element == 2
    assert all(arch.served(kv_cache_dtype=dtype).kv_bytes_per_element in (1, 2) for dtype in KV_CACHE_DTYPE_BYTES)
    with pytest.raises(ConfigError, match="--quantization int3 is not modelled .*known: fp8"):
        arch.served(quantization="int3")
    with pytest.raises(ConfigError, match="--kv-cache-dtype 'fp4' is not modelled; known: auto, bfloat16"):
        arch.served(kv_cache_dtype="fp4")
    qwen_fp8 = catalog.architecture("qwen3-32b-fp8")
    # The checkpoint's own method: the same weights, and the serve line keeps the flag the user gave.
    assert qwen_fp8.served(quantization="fp8") == replace(qwen_fp8, quantization="fp8")
    assert catalog.architecture("llama-3.1-70b-fp8").quantization == "fp8" and arch.quantization is None
    with pytest.raises(ConfigError, match="quantised with 'fp8'"):
        qwen_fp8.served(quantization="awq")
    awq = _parse("qwen2.5-32b-awq")
    assert awq.served(quantization="awq_marlin") == replace(awq, quantization="awq_marlin")  # a kernel for its method


# --- formats and refusals of config variants --------------------------------------------------

def _variant(tmp_path: Path, fixture: str, **changes) -> Path:
    raw = json.loads((HF_CONFIGS / fixture / "config.json").read_text())
    raw.update(changes)
    path = tmp_path / f"{fixture}-variant" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(raw))
    return path


W4A16 = {"config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None,
                                       "weights": {"num_bits": 4, "type": "int", "strategy": "group",
                                                   "group_size": 128, "symmetric": True}}},
         "ignore": ["lm_head"], "quant_method": "compressed-tensors", "format": "pack-quantized"}


@pytest.mark.parametrize("quant, bits, compute", [
    (W4A16, 4 + 16 / 128, "bf16"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}, 4 + 20 / 128, "bf16"),
    ({"quant_method": "gptq", "bits": 8, "group_size": -1}, 8, "bf16"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
      "bnb_4bit_use_double_quant": True}, 4 + 8 / 64 + 32 / (64 * 256), "bf16"),
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, 4.5, "bf16"),
    ({"quant_method": "bitsandbytes", "load_in_8bit": True}, 8, "int8"),
    ({"quant_method": "fbgemm_fp8", "modules_to_not_convert": ["lm_head"]}, 8, "fp8"),
    ({"quant_method": "fp8", "activation_scheme": "static"}, 8, "fp8"),
])
def test_quantisation_methods_give_their_bits_per_weight(tmp_path, quant, bits, compute):
    arch = architecture_from_hf_config(_variant(tmp_path, "llama-2-7b", quantization_config=quant))
    assert arch.formats.dense.bits_per_weight == pytest.approx(bits, rel=1e-15)
    assert arch.formats.dense.compute_dtype == compute and arch.formats.embeddings == SIXTEEN_BIT
    assert arch.weight_bytes() == pytest.approx(arch.parameters.dense * bits / 8
                                                + (arch.n_params - arch.parameters.dense) * 2, rel=1e-15)


def test_compressed_tensors_kv_scheme_and_exclusions(tmp_path):
    with_kv = {**W4A16, "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor"}}
    assert architecture_from_hf_config(_variant(tmp_path, "llama-2-7b", quantization_config=with_kv)
                                       ).kv_bytes_per_element == 1
    # Attention left 16-bit: the dense part of a model whose FFNs are all experts is 16-bit.
    attention_kept = {**W4A16, "ignore": ["lm_head", "re:.*self_attn.*", "re:.*block_sparse_moe.gate"]}
    mixtral = architecture_from_hf_config(_variant(tmp_path, "mixtral-8x7b", quantization_config=attention_kept))
    assert mixtral.formats.dense == SIXTEEN_BIT and mixtral.formats.routed_experts.bits_per_weight == 4.125
    with pytest.raises(ConfigError, match="gives attention and the dense FFN different formats"):
        architecture_from_hf_config(_variant(tmp_path, "llama-2-7b", quantization_config=attention_kept))
    layer_zero = {"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": ["model.layers.0."]}
    with pytest.raises(ConfigError, match="modules_to_not_convert names single layers"):
        architecture_from_hf_config(_variant(tmp_path, "mixtral-8x7b", quantization_config=layer_zero))


@pytest.mark.parametrize("changes, count", [
    ({"first_k_dense_replace": 3, "moe_layer_freq": 2}, sum(1 for i in range(61) if i >= 3 and i % 2 == 0)),
    ({"first_k_dense_replace": 0}, 61),
])
def test_deepseek_moe_layers(tmp_path, changes, count):
    assert architecture_from_hf_config(_variant(tmp_path, "deepseek-v3", **changes)).n_moe_layers == count


def test_qwen_moe_dense_layers_and_windows(tmp_path):
    arch = architecture_from_hf_config(_variant(tmp_path, "qwen3-30b-a3b", mlp_only_layers=[0, 47],
                                                decoder_sparse_step=1))
    assert arch.moe.n_dense_layers == 2 and arch.ffn_dim == 6144
    assert arch.parameters.dense == 48 * (2048 * (4096 + 1024) + 4096 * 2048) + 2 * 3 * 2048 * 6144
    windowed = architecture_from_hf_config(_variant(tmp_path, "qwen2.5-32b-awq", use_sliding_window=True,
                                                    sliding_window=4096, max_window_layers=40))
    assert windowed.sliding_window == SlidingWindow(4096, 64 - 40)
    assert architecture_from_hf_config(HF_CONFIGS / "qwen2.5-32b-awq").sliding_window is None


@pytest.mark.parametrize("changes, message", [
    ({"layer_types": ["sliding_attention", "linear_attention"] * 18}, "layer_types has linear_attention"),
    ({"attention_chunk_size": 8192}, "attention_chunk_size = 8192: chunked local attention"),
    # Llama-4 Scout: every layer a mixture of experts (step 1), its chunked attention what is not modelled
    ({"interleave_moe_layer_step": 1, "attention_chunk_size": 8192}, "attention_chunk_size = 8192"),
    ({"interleave_moe_layer_step": 2}, "interleave_moe_layer_step = 2: MoE layers interleaved"),
    ({"full_attention_interval": 4, "linear_num_value_heads": 32}, "full_attention_interval = 4: linear-attention"),
    ({"quantization_config": {"quant_method": "gguf"}}, "quant_method 'gguf' is not modelled; known: fp8, "),
    ({"num_experts_per_tok": 0, "experts_per_token": 0}, "no experts per token"),
])
def test_features_not_modelled_are_refused_in_one_line_naming_the_key(tmp_path, changes, message):
    with pytest.raises(ConfigError, match=message) as error:
        architecture_from_hf_config(_variant(tmp_path, "gpt-oss-120b", **changes))
    assert "\n" not in str(error.value) and "config.json" in str(error.value)


def test_the_mla_and_window_counts_are_consistent(catalog):
    # Sanity of the physics' inputs: every catalog architecture's classes sum to its total.
    for name in catalog.names:
        arch = catalog.architecture(name)
        assert arch.parameters.total == arch.n_params, name
        assert math.isfinite(arch.weight_bytes()) and arch.kv_bytes_per_token() > 0


def test_the_catalog_serves_a_model_under_vllms_flags(catalog):
    assert catalog.serving("llama-3.1-70b") is catalog
    served = catalog.serving("meta-llama/Llama-3.1-70B", quantization="fp8", kv_cache_dtype="fp8")
    arch = served["llama-3.1-70b"]
    assert arch.formats.method == "fp8"
    assert arch.kv_bytes_per_token() == catalog["llama-3.1-70b"].kv_bytes_per_token() // 2
    assert served["meta-llama/Llama-3.1-70B"] is arch            # runs named by the Hugging Face id resolve to it
    assert catalog["llama-3.1-70b"].formats.is_sixteen_bit      # the catalog itself is unchanged
    with pytest.raises(ConfigError, match="--quantization int3 is not modelled"):
        catalog.serving("llama-3.1-70b", quantization="int3")


def test_vllm_loads_a_hub_id_or_a_folder_as_given_and_a_catalog_name_as_its_checkpoint(tmp_path, monkeypatch):
    catalog = load_architectures()
    assert vllm_model_argument("opt-2.7b", catalog["opt-2.7b"]) == "facebook/opt-2.7b"
    assert vllm_model_argument("llama-3.1-70b-fp8", catalog["llama-3.1-70b-fp8"]) == "meta-llama/Llama-3.1-70B"
    assert vllm_model_argument("facebook/opt-2.7b", catalog["opt-2.7b"]) == "facebook/opt-2.7b"
    assert vllm_model_argument("opt-2.7b", replace(catalog["opt-2.7b"], hf_id=None)) == "opt-2.7b"
    assert vllm_model_argument("my-model", None) == "my-model"
    (tmp_path / "opt-2.7b").mkdir()
    monkeypatch.chdir(tmp_path)           # a local folder of that name is what vLLM loads
    assert vllm_model_argument("opt-2.7b", catalog["opt-2.7b"]) == "opt-2.7b"


def test_vllm_refuses_a_block_fp8_ffn_split_into_part_blocks(tmp_path):
    """vLLM loads fp8 128 x 128 blocks only where each rank's share of a split FFN is whole blocks: an
    MoE model's experts of width 768 split over 8 ranks (96 each) are refused, and loaded whole on each
    rank with --enable-expert-parallel; the dense FFN is split either way."""
    from slim.specs.transformer import block_split_refusal, tensor_parallel_refusal

    block_fp8 = {"quant_method": "fp8", "weight_block_size": [128, 128], "activation_scheme": "dynamic"}
    moe = architecture_from_hf_config(_variant(tmp_path, "qwen3-30b-a3b", quantization_config=block_fp8))
    assert moe.moe.expert_ffn_dim == 768 and moe.formats.routed_experts.block == (128, 128)
    assert tensor_parallel_refusal(moe, 2) is None and tensor_parallel_refusal(moe, 4) is not None
    refused = tensor_parallel_refusal(moe, 8)
    assert "768 / 8 = 96 is not a multiple of 128" in refused and "--enable-expert-parallel" in refused
    assert tensor_parallel_refusal(moe, 8, expert_parallel=True) is None
    per_tensor = architecture_from_hf_config(_variant(tmp_path, "qwen3-30b-a3b",
                                                      quantization_config={"quant_method": "fp8"}))
    assert block_split_refusal(per_tensor, 8) is None                  # one scale per tensor: no blocks
    dense = architecture_from_hf_config(_variant(tmp_path, "llama-2-7b", quantization_config=block_fp8))
    assert tensor_parallel_refusal(dense, 8) is not None              # 11008 / 8 = 1376: not whole blocks
    assert tensor_parallel_refusal(dense, 8, expert_parallel=True) is not None
