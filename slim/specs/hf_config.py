"""A model described by its Hugging Face checkpoint (``config.json``, and ModelOpt's
``hf_quant_config.json`` beside it) as vLLM reads it, instead of by an entry of the models file.

From the config come SLIM's symbols (Section VI-A: ``L``, ``D``, ``H_q``, ``H_kv``, ``D_ff`` and the
FFN kind), the vocabulary, and what modern families add: an explicit ``head_dim`` (Qwen3, gpt-oss,
Gemma-3), routed experts (``num_local_experts`` / ``num_experts`` / ``n_routed_experts``, with
DeepSeek's shared experts and ``first_k_dense_replace`` dense layers, Qwen-MoE's
``decoder_sparse_step`` and ``mlp_only_layers``), multi-head latent attention (``kv_lora_rank``),
sliding-window layers (``layer_types``; Gemma's ``sliding_window_pattern``; Qwen2's
``use_sliding_window`` and ``max_window_layers``; otherwise a ``sliding_window`` applies to every
layer, as vLLM's cache config applies it to Mistral-7B-v0.1), gpt-oss's attention sinks, and the
weight formats (`slim.specs.quantization`). The parameter count follows from the shapes
(`slim.specs.parameter_count`). A multi-token-prediction layer (DeepSeek's ``num_nextn_predict_layers``)
is left out: vLLM loads it only for speculative decoding.

A feature not modelled is refused in one line naming the key: `UnsupportedArchitectureError` for
per-layer KV heads (DeciLM-7B) and the attention variants listed in `_UNSUPPORTED_KEYS`,
`UnsupportedQuantizationError` for a quantisation method or format not modelled (both are
`NotModelledError`s: `slim tune` still measures such a model), `ConfigError` for a non-16-bit dtype
without a quantisation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from slim.errors import ConfigError, UnsupportedArchitectureError
from slim.specs.parameter_count import LayerExtras, count_parameter_classes
from slim.specs.quantization import weight_formats_from_config
from slim.specs.transformer import Architecture, FfnKind, MlaSpec, MoeSpec, SlidingWindow

HF_QUANT_CONFIG = "hf_quant_config.json"


@dataclass(frozen=True)
class _Family:
    """How a ``model_type`` lays out its weights and attention beyond what its keys say."""

    ffn_kind: FfnKind
    ffn_key: str = "intermediate_size"
    extras: LayerExtras = LayerExtras()
    window_rule: str = "every_layer"   # or "qwen" (use_sliding_window, max_window_layers), "pattern" (Gemma)
    default_window_pattern: int = 0    # Gemma-2: alternate; Gemma-3: 5 local : 1 global
    attention_sinks: bool = False
    learned_positions: bool = False    # OPT: (max_position_embeddings + 2) x D position embeddings
    defaults: dict[str, Any] = field(default_factory=dict)   # keys a published config may leave to the class


_GEMMA3_TEXT = _Family("swiglu", extras=LayerExtras(norms_per_layer=4, qk_norm="head"), window_rule="pattern",
                       default_window_pattern=6,
                       defaults={"vocab_size": 262208, "tie_word_embeddings": True, "max_position_embeddings": 131072})
"""Gemma3TextConfig's defaults (transformers): google/gemma-3-*-it's ``text_config`` omits them."""
_DEEPSEEK = _Family("swiglu")
_DEEPSEEK_V3 = _Family("swiglu", extras=LayerExtras(router_score_bias=True))

_FAMILIES: dict[str, _Family] = {
    "opt": _Family("two_matrix", ffn_key="ffn_dim",
                   extras=LayerExtras(norm_has_bias=True, qkv_bias=True, output_bias=True), learned_positions=True),
    "llama": _Family("swiglu"),
    "mistral": _Family("swiglu"),
    "mixtral": _Family("swiglu"),
    "qwen2": _Family("swiglu", extras=LayerExtras(qkv_bias=True), window_rule="qwen"),
    "qwen2_moe": _Family("swiglu", extras=LayerExtras(qkv_bias=True, shared_expert_gate=True), window_rule="qwen"),
    "qwen3": _Family("swiglu", extras=LayerExtras(qk_norm="head"), window_rule="qwen"),
    "qwen3_moe": _Family("swiglu", extras=LayerExtras(qk_norm="head"), window_rule="qwen"),
    "granite": _Family("swiglu"),
    "gemma": _Family("swiglu"),
    "gemma2": _Family("swiglu", extras=LayerExtras(norms_per_layer=4), window_rule="pattern",
                      default_window_pattern=2),
    "gemma3_text": _GEMMA3_TEXT,
    "gemma3": _GEMMA3_TEXT,
    "gpt_oss": _Family("swiglu", extras=LayerExtras(qkv_bias=True, o_proj_bias=True, expert_bias=True,
                                                    router_bias=True), attention_sinks=True),
    "deepseek_v2": _DEEPSEEK,
    "deepseek_v3": _DEEPSEEK_V3,
    "kimi_k2": _DEEPSEEK_V3,
    "minimax_m2": _Family("swiglu", extras=LayerExtras(qk_norm="whole", router_score_bias=True)),
}
"""Families whose layout is known; another ``model_type`` is read as a Llama-style decoder
(gated FFN for a SiLU activation, else two matrices), with the config's ``attention_bias`` and
``mlp_bias``."""

_GATED_ACTIVATIONS = ("silu", "swish")
_SIXTEEN_BIT_DTYPES = ("float16", "bfloat16", "float32")   # vLLM serves float32 checkpoints in 16 bits
_PER_LAYER_KV_HEADS_KEY = "num_key_value_heads_per_layer"   # DeciLM: variable grouped-query attention
_UNSUPPORTED_KEYS = {
    "interleave_moe_layer_step": "MoE layers interleaved with dense ones by a step (Llama-4)",
    "attention_chunk_size": "chunked local attention (Llama-4)",
    "linear_attn_config": "linear-attention layers (Kimi-Linear)",
    "full_attention_interval": "linear-attention (Gated DeltaNet) layers between the full-attention ones (Qwen3-Next)",
    "linear_num_value_heads": "linear-attention (Gated DeltaNet) layers (Qwen3-Next)",
    "hybrid_override_pattern": "Mamba layers (Nemotron-H)",
    "index_topk": "sparse attention with an indexer cache (DeepSeek-V3.2)",
    "o_lora_rank": "compressed attention (DeepSeek-V4)",
}
"""Keys naming an attention or layer variant the KV and weight counts here do not describe (Llama-4's
interleaving step where it is above one: at one every layer is a mixture of experts)."""
_LAYER_TYPES = ("full_attention", "sliding_attention")
_EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_topk")


def _text_config(raw: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of a multimodal config (``text_config``, with the checkpoint-wide
    keys of the top level), else the config itself."""
    if "hidden_size" not in raw and isinstance(raw.get("text_config"), dict):
        shared = ("_name_or_path", "quantization_config", "torch_dtype", "dtype")
        return {**{k: raw[k] for k in shared if k in raw}, **raw["text_config"]}
    return raw


def _integer(raw: dict[str, Any], key: str, source: Path) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        problem = "is missing" if value is None else f"is {value!r}, not a positive integer"
        raise ConfigError(f"{source}: '{key}' {problem}; SLIM needs it to describe the model")
    return value


def _first(raw: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((key for key in keys if raw.get(key)), None)


def _check_supported(raw: dict[str, Any], source: Path) -> None:
    per_layer = raw.get(_PER_LAYER_KV_HEADS_KEY)
    if isinstance(per_layer, list) and len(set(per_layer)) > 1:
        raise UnsupportedArchitectureError(
            f"{source}: {_PER_LAYER_KV_HEADS_KEY} varies by layer ({sorted(set(per_layer))}): variable "
            "grouped-query attention, while SLIM's KV-scan term (Eq. 11) has one H_kv for every layer")
    for key, feature in _UNSUPPORTED_KEYS.items():
        if raw.get(key) and not (key == "interleave_moe_layer_step" and raw[key] == 1):
            raise UnsupportedArchitectureError(f"{source}: {key} = {raw[key]!r}: {feature} is not modelled")
    attention_types = raw.get("attn_type_list")
    if isinstance(attention_types, list) and set(attention_types) - {1}:
        raise UnsupportedArchitectureError(f"{source}: attn_type_list has linear-attention layers (0): "
                                           "only softmax attention is modelled")
    dtype = raw.get("torch_dtype", raw.get("dtype"))
    if dtype is not None and str(dtype) not in _SIXTEEN_BIT_DTYPES and not raw.get("quantization_config"):
        raise ConfigError(f"{source}: torch_dtype '{dtype}'; SLIM counts 16-bit weights and KV cache "
                          f"(supported: {', '.join(_SIXTEEN_BIT_DTYPES)}, served as 16-bit, or a quantization_config)")


def _family(raw: dict[str, Any]) -> _Family:
    known = _FAMILIES.get(str(raw.get("model_type", "")).lower())
    if known is not None:
        return known
    activation = str(raw.get("hidden_act", raw.get("activation_function", ""))).lower()
    return _Family("swiglu" if activation in _GATED_ACTIVATIONS else "two_matrix",
                   extras=LayerExtras(qkv_bias=bool(raw.get("attention_bias", False)),
                                      output_bias=bool(raw.get("mlp_bias", False))))


def _moe(raw: dict[str, Any], n_layers: int, source: Path) -> MoeSpec | None:
    count_key = _first(raw, _EXPERT_COUNT_KEYS)
    if count_key is None:
        return None
    n_experts = _integer(raw, count_key, source)
    top_k_key = _first(raw, _TOP_K_KEYS)
    if top_k_key is None:
        raise ConfigError(f"{source}: {count_key} = {n_experts} but no experts per token "
                          f"({' / '.join(_TOP_K_KEYS)})")
    width_key = "moe_intermediate_size" if raw.get("moe_intermediate_size") else "intermediate_size"
    expert_width = _integer(raw, width_key, source)
    if "first_k_dense_replace" in raw or "moe_layer_freq" in raw:      # DeepSeek
        first_dense, every = int(raw.get("first_k_dense_replace") or 0), int(raw.get("moe_layer_freq") or 1)
        moe_layers = sum(1 for i in range(n_layers) if i >= first_dense and i % every == 0)
    else:                                                                # Qwen-MoE (defaults: every layer)
        step, dense_only = int(raw.get("decoder_sparse_step") or 1), set(raw.get("mlp_only_layers") or ())
        moe_layers = sum(1 for i in range(n_layers) if i not in dense_only and (i + 1) % step == 0)
    n_shared, shared_width = 0, 0
    if raw.get("n_shared_experts"):
        n_shared, shared_width = int(raw["n_shared_experts"]), expert_width
    elif raw.get("shared_expert_intermediate_size"):
        n_shared, shared_width = 1, int(raw["shared_expert_intermediate_size"])
    return MoeSpec(n_experts, _integer(raw, top_k_key, source), expert_width, n_shared, shared_width,
                   n_layers - moe_layers)


def _mla(raw: dict[str, Any], source: Path) -> MlaSpec | None:
    if not raw.get("kv_lora_rank"):
        return None
    return MlaSpec(_integer(raw, "kv_lora_rank", source), raw.get("q_lora_rank") or None,
                   _integer(raw, "qk_rope_head_dim", source), _integer(raw, "qk_nope_head_dim", source),
                   _integer(raw, "v_head_dim", source))


def _sliding_window(raw: dict[str, Any], family: _Family, n_layers: int, source: Path) -> SlidingWindow | None:
    """Which layers attend within ``sliding_window`` tokens (module docstring); None when none do, or
    when the window is no shorter than the longest context (Qwen2.5's 131,072)."""
    window = raw.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        return None
    if window >= int(raw.get("max_position_embeddings") or window + 1):
        return None
    layer_types = raw.get("layer_types")
    if isinstance(layer_types, list):
        unknown = sorted(set(layer_types) - set(_LAYER_TYPES))
        if unknown:
            raise UnsupportedArchitectureError(f"{source}: layer_types has {', '.join(unknown)}: only "
                                               f"{' and '.join(_LAYER_TYPES)} layers are modelled")
        sliding = sum(1 for kind in layer_types if kind == "sliding_attention")
    elif family.window_rule == "qwen":
        sliding = n_layers - int(raw.get("max_window_layers") or 0) if raw.get("use_sliding_window") else 0
    elif family.window_rule == "pattern":
        pattern = int(raw.get("sliding_window_pattern") or raw.get("_sliding_window_pattern")
                      or family.default_window_pattern)
        sliding = n_layers - n_layers // pattern     # every pattern-th layer attends globally
    else:
        sliding = n_layers
    return SlidingWindow(window, sliding) if sliding > 0 else None


HF_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
"""The form of a Hugging Face model id, ``org/name`` (a relative two-part path has it too)."""
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.gguf", "*.safetensors.index.json")
"""Files of a checkpoint's weights: a folder holding one is a model vLLM loads as ``vllm serve DIR``."""


def read_checkpoint(path: str | Path) -> tuple[dict[str, Any], dict[str, Any] | None, Path]:
    """``(config, hf_quant_config or None, config path)`` of a ``config.json`` or of a model folder
    (vLLM's ``--model DIR``: ``DIR/config.json``), with ModelOpt's ``hf_quant_config.json`` where the
    folder has one."""
    path = Path(path)
    source = path / "config.json" if path.is_dir() else path
    raw = _read_json(source, "model config")
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a JSON object (a Hugging Face config.json)")
    quant_path = source.parent / HF_QUANT_CONFIG
    quant = _read_json(quant_path, "ModelOpt quantisation config") if quant_path.is_file() else None
    if quant is not None and not isinstance(quant, dict):
        raise ConfigError(f"{quant_path}: expected a JSON object")
    return raw, quant, source


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise ConfigError(f"{what} not found: {path}") from error
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path}: not a readable JSON {what} ({error})") from error


def default_model_name(raw: dict[str, Any], source: Path) -> str:
    """The name a config describes: its ``_name_or_path``'s last part, else its folder's name."""
    name = str(raw.get("_name_or_path") or "").rstrip("/").rsplit("/", 1)[-1]
    return (name or source.resolve().parent.name).lower()


def folder_without_weights(model: str) -> str | None:
    """Why ``vllm serve MODEL`` will not load `model`, where it names a local folder holding a
    ``config.json`` but no weights (`WEIGHT_FILES`), or None."""
    folder = Path(model)
    if not (folder / "config.json").is_file() or any(any(folder.glob(pattern)) for pattern in WEIGHT_FILES):
        return None
    return (f"{model} holds a config.json but no weights: vllm serve {model} will not load it; name the "
            "checkpoint (--model ORG/NAME, or a folder holding its weights) for the commands")


def served_model_of_config(path: str | Path) -> str:
    """The model as ``vllm serve`` names the checkpoint a ``config.json`` (or model folder) describes
    when no name is given: its folder, as an absolute path, where the folder holds weights (a local
    checkpoint, whose ``_name_or_path`` often records the model it was tuned from); else the Hugging
    Face id its ``_name_or_path`` records (``org/name``, not a local path); else its folder."""
    raw, _, source = read_checkpoint(path)
    folder = source.parent.resolve()
    if any(any(folder.glob(pattern)) for pattern in WEIGHT_FILES):
        return str(folder)
    recorded = str(raw.get("_name_or_path") or "").strip().rstrip("/")
    if HF_ID.fullmatch(recorded) and ".." not in recorded.split("/") and not Path(recorded).exists():
        return recorded
    return str(folder)


def architecture_from_hf_mapping(raw: dict[str, Any], source: Path, name: str | None = None,
                                 hf_quant_config: dict[str, Any] | None = None) -> Architecture:
    """The `Architecture` a parsed ``config.json`` (and ``hf_quant_config.json``) describes (module
    docstring); `source` names the file in errors."""
    raw = _text_config(raw)
    family = _family(raw)
    raw = {**family.defaults, **raw}
    _check_supported(raw, source)
    hidden, heads = _integer(raw, "hidden_size", source), _integer(raw, "num_attention_heads", source)
    head_dim = raw.get("head_dim")
    if head_dim is None and hidden % heads:
        raise ConfigError(f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
    n_layers = _integer(raw, "num_hidden_layers", source)
    kv_heads = _integer(raw, "num_key_value_heads", source) if "num_key_value_heads" in raw else heads
    moe, mla = _moe(raw, n_layers, source), _mla(raw, source)
    if mla is not None:
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    elif head_dim is not None:
        head_dim = _integer(raw, "head_dim", source)
    ffn_key = family.ffn_key if family.ffn_key in raw else "intermediate_size"
    if moe is not None and (moe.n_dense_layers == 0 or not raw.get(ffn_key)):
        ffn_dim = moe.expert_ffn_dim          # no dense FFN: the width of one expert
    else:
        ffn_dim = _integer(raw, ffn_key, source)
    embed_proj = raw.get("word_embed_proj_dim")
    model_name = (name or default_model_name(raw, source)).strip().lower()
    arch = Architecture(
        name=model_name, display_name=str(raw.get("_name_or_path") or model_name),
        n_layers=n_layers, hidden_dim=hidden, n_q_heads=heads, n_kv_heads=kv_heads, ffn_dim=ffn_dim,
        ffn_kind=family.ffn_kind, n_params=0, vocab_size=_integer(raw, "vocab_size", source),
        embed_proj_dim=int(embed_proj) if embed_proj and embed_proj != hidden else None,
        hf_id=str(raw["_name_or_path"]) if raw.get("_name_or_path") else None,
        explicit_head_dim=head_dim if head_dim and (mla is not None or head_dim != hidden // heads) else None,
        tied_embeddings=bool(raw.get("tie_word_embeddings", True)), moe=moe, mla=mla,
        sliding_window=_sliding_window(raw, family, n_layers, source), attention_sinks=family.attention_sinks)
    has_dense_ffn = moe is None or moe.n_dense_layers > 0 or moe.n_shared_experts > 0
    formats = weight_formats_from_config(raw.get("quantization_config"), hf_quant_config, source,
                                         has_dense_ffn=has_dense_ffn, has_experts=moe is not None)
    extras = replace(family.extras, final_norm=bool(raw.get("do_layer_norm_before", True)),
                     learned_positions=int(raw.get("max_position_embeddings", 0)) + 2
                     if family.learned_positions else 0)
    counts = count_parameter_classes(arch, extras)
    return replace(arch, n_params=counts.total, parameter_counts=counts, formats=formats)


def architecture_from_hf_config(path: str | Path, name: str | None = None) -> Architecture:
    """The `Architecture` a Hugging Face ``config.json``, or a model folder holding one (and ModelOpt's
    ``hf_quant_config.json``), describes, named `name` (default `default_model_name`). Raises
    `ConfigError` naming the file and the key at fault."""
    raw, hf_quant_config, source = read_checkpoint(path)
    return architecture_from_hf_mapping(raw, source, name, hf_quant_config)
