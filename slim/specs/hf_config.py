"""A model described by its Hugging Face ``config.json`` instead of an entry of the models file.

SLIM needs the symbols of Section VI-A (``L``, ``D``, ``H_q``, ``H_kv``, ``D_ff`` and the FFN
kind), the vocabulary and the parameter count (weight memory). A ``config.json`` gives all but
the last; the parameter count is computed from the shapes the config implies:

    embeddings      V D_e (+ V D_e for an untied LM head) (+ (P + 2) D for OPT's learned positions;
                    D_e = word_embed_proj_dim, plus the two D x D_e projections where D_e != D)
    per layer       attention: D (D + 2 D_kv) + D D (Q, K, V, O) + biases where the family has them
                    FFN:       2 D D_ff (two matrices) or 3 D D_ff (gated: SwiGLU, GeGLU) + biases
                    norms:     2 D (RMSNorm) or 4 D (LayerNorm with bias)
    final norm      D or 2 D (none for OPT-350M's post-norm layout, do_layer_norm_before false)

which reproduces the models file's count exactly for OPT, Llama-2, Mistral and Qwen2.5
(`tests/test_hf_config.py`). Mixture-of-experts configs (routed experts, e.g. Mixtral-8x7B) and
configs with a per-layer number of KV heads (``num_key_value_heads_per_layer``, DeciLM-7B) are refused
with `UnsupportedArchitectureError`; quantised and non-16-bit configs, and configs whose head
dimension is not ``D / H_q``, with `ConfigError`: SLIM's byte and FLOP counts assume a dense 16-bit
model with one ``H_kv`` for every layer and ``d_h = D / H_q``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slim.errors import ConfigError, UnsupportedArchitectureError
from slim.specs.architecture import Architecture, FfnKind


@dataclass(frozen=True)
class _Family:
    """How a ``model_type`` lays out its weights (what the parameter count needs)."""

    ffn_kind: FfnKind
    ffn_key: str = "intermediate_size"
    norm_has_bias: bool = False      # LayerNorm (weight and bias) rather than RMSNorm (weight)
    qkv_bias: bool = False
    output_bias: bool = False        # bias on the attention output and on the FFN matrices
    learned_positions: bool = False  # OPT: (max_position_embeddings + 2) x D position embeddings


_FAMILIES: dict[str, _Family] = {
    "opt": _Family("two_matrix", ffn_key="ffn_dim", norm_has_bias=True, qkv_bias=True, output_bias=True,
                   learned_positions=True),
    "llama": _Family("swiglu"),
    "mistral": _Family("swiglu"),
    "qwen2": _Family("swiglu", qkv_bias=True),
    "qwen3": _Family("swiglu"),
    "granite": _Family("swiglu"),
    "gemma": _Family("swiglu"),
    "gemma2": _Family("swiglu"),
}
"""Families whose layout is known; another ``model_type`` is read as a Llama-style decoder
(gated FFN for a SiLU activation, else two matrices), with the config's ``attention_bias`` and
``mlp_bias``."""

_GATED_ACTIVATIONS = ("silu", "swish")
_SIXTEEN_BIT_DTYPES = ("float16", "bfloat16", "float32")   # vLLM serves float32 checkpoints in 16 bits
_MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_intermediate_size")
_PER_LAYER_KV_HEADS_KEY = "num_key_value_heads_per_layer"   # DeciLM: variable grouped-query attention


def _text_config(raw: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of a multimodal config (``text_config``), else the config itself."""
    if "hidden_size" not in raw and isinstance(raw.get("text_config"), dict):
        return {**raw["text_config"], **{k: v for k, v in raw.items() if k == "_name_or_path"}}
    return raw


def _integer(raw: dict[str, Any], key: str, source: Path) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        problem = "is missing" if value is None else f"is {value!r}, not a positive integer"
        raise ConfigError(f"{source}: '{key}' {problem}; SLIM needs it to describe the model")
    return value


def _check_supported(raw: dict[str, Any], source: Path) -> None:
    moe = [key for key in _MOE_KEYS if raw.get(key)]
    if moe:
        raise UnsupportedArchitectureError(
            f"{source}: a mixture-of-experts model ({moe[0]} = {raw[moe[0]]}): each token runs only its routed "
            "experts, so SLIM's dense FLOP and weight-byte counts (Eqs. 7-10) do not describe it")
    per_layer = raw.get(_PER_LAYER_KV_HEADS_KEY)
    if isinstance(per_layer, list) and len(set(per_layer)) > 1:
        raise UnsupportedArchitectureError(
            f"{source}: {_PER_LAYER_KV_HEADS_KEY} varies by layer ({sorted(set(per_layer))}): variable "
            "grouped-query attention, while SLIM's KV-scan term (Eq. 11) has one H_kv for every layer")
    if raw.get("quantization_config"):
        raise ConfigError(f"{source}: a quantised checkpoint (quantization_config); SLIM counts 16-bit weights")
    dtype = raw.get("torch_dtype", raw.get("dtype"))
    if dtype is not None and str(dtype) not in _SIXTEEN_BIT_DTYPES:
        raise ConfigError(f"{source}: torch_dtype '{dtype}'; SLIM counts 16-bit weights and KV cache "
                          f"(supported: {', '.join(_SIXTEEN_BIT_DTYPES)}, served as 16-bit)")


def _family(raw: dict[str, Any]) -> _Family:
    known = _FAMILIES.get(str(raw.get("model_type", "")).lower())
    if known is not None:
        return known
    activation = str(raw.get("hidden_act", raw.get("activation_function", ""))).lower()
    return _Family("swiglu" if activation in _GATED_ACTIVATIONS else "two_matrix",
                   qkv_bias=bool(raw.get("attention_bias", False)), output_bias=bool(raw.get("mlp_bias", False)))


def count_parameters(arch: Architecture, *, tied_embeddings: bool, family_has: dict[str, bool],
                     max_position_embeddings: int = 0) -> int:
    """Parameters of a dense decoder with `arch`'s shapes (module docstring); `family_has` names the
    optional parts: ``qkv_bias``, ``output_bias``, ``norm_has_bias``, ``learned_positions``, ``final_norm``."""
    d, d_kv, d_ff, vocab = arch.hidden_dim, arch.kv_dim, arch.ffn_dim, arch.vocab_size
    d_embed = arch.embed_proj_dim or d
    embeddings = vocab * d_embed * (1 if tied_embeddings else 2)
    if d_embed != d:
        embeddings += 2 * d * d_embed                      # project_in and project_out
    if family_has["learned_positions"]:
        embeddings += (max_position_embeddings + 2) * d    # OPT's offset of 2
    attention = d * (d + 2 * d_kv) + d * d
    if family_has["qkv_bias"]:
        attention += d + 2 * d_kv
    ffn_matrices = 3 if arch.ffn_kind == "swiglu" else 2
    ffn = ffn_matrices * d * d_ff
    if family_has["output_bias"]:
        attention += d
        ffn += (ffn_matrices - 1) * d_ff + d
    norm = 2 * d if family_has["norm_has_bias"] else d
    return embeddings + arch.n_layers * (attention + ffn + 2 * norm) + (norm if family_has["final_norm"] else 0)


def default_model_name(raw: dict[str, Any], source: Path) -> str:
    """The name a config describes: its ``_name_or_path``'s last part, else its folder's name."""
    name = str(raw.get("_name_or_path") or "").rstrip("/").rsplit("/", 1)[-1]
    return (name or source.resolve().parent.name).lower()


def architecture_from_hf_config(path: str | Path, name: str | None = None) -> Architecture:
    """The `Architecture` a Hugging Face ``config.json`` describes, named `name` (default
    `default_model_name`). Raises `ConfigError` naming the file and the key at fault."""
    source = Path(path)
    try:
        raw = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise ConfigError(f"model config not found: {source}") from error
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{source}: not a readable JSON model config ({error})") from error
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a JSON object (a Hugging Face config.json)")
    raw = _text_config(raw)
    _check_supported(raw, source)
    family = _family(raw)
    hidden, heads = _integer(raw, "hidden_size", source), _integer(raw, "num_attention_heads", source)
    if hidden % heads:
        raise ConfigError(f"{source}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
    head_dim = raw.get("head_dim")
    if head_dim is not None and head_dim != hidden // heads:
        raise ConfigError(f"{source}: head_dim {head_dim} differs from hidden_size / num_attention_heads "
                          f"({hidden // heads}); SLIM assumes d_h = D / H_q")
    kv_heads = _integer(raw, "num_key_value_heads", source) if "num_key_value_heads" in raw else heads
    ffn_key = family.ffn_key if family.ffn_key in raw else "intermediate_size"
    embed_proj = raw.get("word_embed_proj_dim")
    model_name = (name or default_model_name(raw, source)).strip().lower()
    arch = Architecture(
        name=model_name, display_name=str(raw.get("_name_or_path") or model_name),
        n_layers=_integer(raw, "num_hidden_layers", source), hidden_dim=hidden, n_q_heads=heads,
        n_kv_heads=kv_heads, ffn_dim=_integer(raw, ffn_key, source), ffn_kind=family.ffn_kind, n_params=0,
        vocab_size=_integer(raw, "vocab_size", source),
        embed_proj_dim=int(embed_proj) if embed_proj and embed_proj != hidden else None)
    n_params = count_parameters(
        arch, tied_embeddings=bool(raw.get("tie_word_embeddings", True)),
        family_has={"qkv_bias": family.qkv_bias, "output_bias": family.output_bias,
                    "norm_has_bias": family.norm_has_bias, "learned_positions": family.learned_positions,
                    "final_norm": bool(raw.get("do_layer_norm_before", True))},
        max_position_embeddings=int(raw.get("max_position_embeddings", 0)))
    return Architecture(**{**arch.__dict__, "n_params": n_params})
