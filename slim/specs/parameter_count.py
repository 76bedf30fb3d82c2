"""Parameters of a decoder from the shapes its config implies, by tensor class (`ParameterCounts`).

Per model, with ``m`` matrices per FFN (3 gated, 2 otherwise), ``q_dim = H_q d_h``::

    embedding       V D_e (+ the two D x D_e projections where D_e != D, OPT-350M)
    lm_head         V D_e, untied only
    per layer
      attention     D (q_dim + 2 D_kv) + q_dim D                                    (Q, K, V, O)
        MLA         D r_q + r_q H (d_nope + d_rope) + D (r_kv + d_rope) + r_kv H (d_nope + d_v) + H d_v D
                    (without a q LoRA: D H (d_nope + d_rope) for Q)
      dense FFN     m D D_ff
      MoE layer     E m D D_e (routed experts) + n_s m D D_s (shared experts) + E D (router)
    other           norms (D, or 2 D with a bias; 2 per layer, 4 for Gemma-2/3), the final norm,
                    q/k norms (d_h each, or q_dim and D_kv for MiniMax-M2), MLA's r_q and r_kv norms,
                    biases where the family has them, router biases, gpt-oss's H_q attention sinks,
                    OPT's (P + 2) D learned positions

which reproduces the models file's counts exactly for OPT, Llama-2, Mistral and Qwen2.5 and the
published totals of the modern families (`tests/test_model_specs.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from slim.specs.transformer import Architecture, ParameterCounts


@dataclass(frozen=True)
class LayerExtras:
    """What a family adds to a layer beyond the matrices of `Architecture`'s shapes."""

    qkv_bias: bool = False
    output_bias: bool = False       # attention output and FFN matrices (OPT; Llama-style ``mlp_bias``)
    o_proj_bias: bool = False       # attention output only (gpt-oss's ``attention_bias`` covers Q, K, V and O)
    norm_has_bias: bool = False     # LayerNorm (weight and bias) rather than RMSNorm (weight)
    norms_per_layer: int = 2
    final_norm: bool = True
    qk_norm: str | None = None      # "head": d_h each for Q and K; "whole": q_dim and D_kv (MiniMax-M2)
    learned_positions: int = 0      # OPT: max_position_embeddings + 2 rows of D
    expert_bias: bool = False       # gpt-oss: biases on every expert's matrices
    router_bias: bool = False       # gpt-oss: a bias of E on the router
    router_score_bias: bool = False  # DeepSeek-V3, MiniMax-M2: e_score_correction_bias, E per layer
    shared_expert_gate: bool = False  # Qwen2-MoE: a D x 1 gate on the shared expert


def _attention_matrices(arch: Architecture) -> tuple[int, int]:
    """``(matrices, norms)`` of one layer's attention."""
    d = arch.hidden_dim
    if arch.mla is None:
        return d * (arch.q_dim + 2 * arch.kv_dim) + arch.q_dim * d, 0
    mla, heads = arch.mla, arch.n_q_heads
    qk_width = heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim)
    query = d * qk_width if mla.q_lora_rank is None else d * mla.q_lora_rank + mla.q_lora_rank * qk_width
    kv = d * mla.latent_dim + mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim)
    norms = mla.kv_lora_rank + (mla.q_lora_rank or 0)
    return query + kv + heads * mla.v_head_dim * d, norms


def count_parameter_classes(arch: Architecture, extras: LayerExtras) -> ParameterCounts:
    """Parameters of `arch` by tensor class (module docstring)."""
    d, d_kv, vocab, m = arch.hidden_dim, arch.kv_dim, arch.vocab_size, arch.ffn_matrices
    d_embed = arch.embed_proj_dim or d
    embedding = vocab * d_embed + (2 * d * d_embed if d_embed != d else 0)
    lm_head = 0 if arch.tied_embeddings else vocab * d_embed
    norm = 2 * d if extras.norm_has_bias else d

    attention, attention_norms = _attention_matrices(arch)
    attention_other = attention_norms + extras.norms_per_layer * norm
    if extras.qkv_bias:
        attention_other += arch.q_dim + 2 * d_kv
    if extras.output_bias or extras.o_proj_bias:
        attention_other += d
    if extras.qk_norm == "head":
        attention_other += 2 * arch.head_dim
    elif extras.qk_norm == "whole":
        attention_other += arch.q_dim + d_kv
    if arch.attention_sinks:
        attention_other += arch.n_q_heads

    dense_ffn = m * d * arch.ffn_dim
    dense_ffn_bias = (m - 1) * arch.ffn_dim + d if extras.output_bias else 0
    moe, n_moe = arch.moe, arch.n_moe_layers
    n_dense = arch.n_layers - n_moe
    dense = arch.n_layers * attention + n_dense * dense_ffn
    other = arch.n_layers * attention_other + n_dense * dense_ffn_bias + extras.learned_positions * d
    routed = 0
    if moe is not None:
        routed = n_moe * moe.n_routed_experts * m * d * moe.expert_ffn_dim
        dense += n_moe * moe.n_shared_experts * m * d * moe.shared_expert_ffn_dim
        per_layer = moe.n_routed_experts * d
        if extras.expert_bias:
            per_layer += moe.n_routed_experts * ((m - 1) * moe.expert_ffn_dim + d)
        if extras.router_bias:
            per_layer += moe.n_routed_experts
        if extras.router_score_bias:
            per_layer += moe.n_routed_experts
        if extras.shared_expert_gate:
            per_layer += d
        other += n_moe * per_layer
    if extras.final_norm:
        other += norm
    return ParameterCounts(embedding, lm_head, dense, routed, other)


def count_parameters(arch: Architecture, extras: LayerExtras) -> int:
    """Total parameters of `arch` (`count_parameter_classes`)."""
    return count_parameter_classes(arch, extras).total
