"""The simulator's step cost for the models the paper's dense 16-bit cost model does not describe:
routed experts, latent attention, head dimensions other than ``D / H_q``, quantised weights and KV
caches, sliding windows (`Architecture.dense_formula_gap`). Same roofline as `slim.sim.cost`, same
fitted constants, built from the decode step's shapes and bytes (`slim.gpu.decode_step`).

Per layer and rank, the step's matrix multiplies are grouped (`GemmGroup`): the attention projections
(standard: Q, K, V then O; latent attention: the query path, the latent's down projection and up
projection, then O), the dense FFN of the dense layers, the shared experts and the routed experts of
the MoE layers, and the LM head. A group over ``T`` rows costs

    max(FLOPs(T) x F_16 / F_dtype / (eta_c F_16),  bytes(T) / (eta_m BW))

with its weights at their format's bytes (scales included) and its FLOPs at the peak of its compute
dtype (`Hardware.peak_flops_for`: fp8 on an H100 runs at twice the 16-bit peak). The routed experts
of a step of ``T`` tokens read the ``E_touched(T)`` experts the tokens route to
(`slim.gpu.decode_step.expected_distinct_experts`, this rank's ``E / ep``) and multiply ``T k / ep``
token-expert pairs. Decode attention reads each context token's KV (`kv_bytes_per_token_per_layer`:
the KV dtype, latent attention, heads per rank) on the full-attention layers, and on the sliding
ones the share of the context within the window (`window_share`, from the run's lengths: the mean
over a request's decode of ``min(ctx, W) / ctx``). Everything is vectorised over token counts, so the
calibration takes it apart along the same coordinates (`slim.sim.linear_cost`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slim.gpu import decode_step
from slim.specs.formats import BYTES_PER_FP16, TensorFormat
from slim.specs.hardware import Hardware
from slim.specs.transformer import Architecture

ACTIVATION_BYTES = BYTES_PER_FP16
"""Activations stay 16-bit under every weight format here (fp8 activations are quantised per GEMM)."""


@dataclass(frozen=True)
class GemmGroup:
    """`layers` GEMMs of one kind on one rank: ``T x in_features`` activations times
    ``in_features x out_features`` weights of `weights` format. A routed-expert group
    (`routed_experts` > 0) holds that many experts on the rank, each token running `experts_per_token`
    of the model's `total_experts`."""

    name: str
    layers: int
    in_features: int
    out_features: int
    weights: TensorFormat
    routed_experts: int = 0
    total_experts: int = 0
    experts_per_token: int = 0

    def work(self, hw: Hardware, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(FLOPs at the 16-bit peak's scale, bytes) of one layer's GEMM over `tokens` rows."""
        matrix = float(self.in_features) * float(self.out_features)
        scale = hw.peak_flops_per_s / hw.peak_flops_for(self.weights.compute_dtype)
        if not self.routed_experts:
            flops = 2.0 * tokens * matrix
            moved = self.weights.bytes_per_weight * matrix + ACTIVATION_BYTES * tokens * (self.in_features
                                                                                          + self.out_features)
            return flops * scale, moved
        ep = self.total_experts // self.routed_experts
        pairs = tokens * self.experts_per_token / ep
        touched = decode_step.expected_distinct_experts(self.total_experts, self.experts_per_token, tokens, ep)
        flops = 2.0 * pairs * matrix
        moved = (self.weights.bytes_per_weight * matrix * touched
                 + ACTIVATION_BYTES * pairs * (self.in_features + self.out_features))
        return flops * scale, moved


def gemm_groups(arch: Architecture, tensor_parallel: int = 1, expert_parallel: int = 1) -> tuple[GemmGroup, ...]:
    """The GEMM groups of one decoder layer stack on one rank (module docstring), LM head excluded."""
    t, d = tensor_parallel, arch.hidden_dim
    dense, experts = arch.formats.dense, arch.formats.routed_experts
    groups: list[GemmGroup] = []
    layers = arch.n_layers
    if arch.mla is not None:
        mla, heads = arch.mla, arch.n_q_heads
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        if mla.q_lora_rank:
            groups += [GemmGroup("q_down", layers, d, mla.q_lora_rank, dense),
                       GemmGroup("q_up", layers, mla.q_lora_rank, heads * qk // t, dense)]
        else:
            groups.append(GemmGroup("q", layers, d, heads * qk // t, dense))
        groups += [GemmGroup("kv_down", layers, d, mla.latent_dim, dense),
                   GemmGroup("kv_up", layers, mla.kv_lora_rank, heads * (mla.qk_nope_head_dim + mla.v_head_dim) // t,
                             dense),
                   GemmGroup("o", layers, heads * mla.v_head_dim // t, d, dense)]
    else:
        kv_heads = decode_step.kv_heads_per_rank(arch, t)
        groups += [GemmGroup("qkv", layers, d, arch.q_dim // t + 2 * kv_heads * arch.head_dim, dense),
                   GemmGroup("o", layers, arch.q_dim // t, d, dense)]
    up = arch.ffn_matrices - 1
    if arch.moe is None:
        groups += [GemmGroup("ffn_up", layers, d, up * arch.ffn_dim // t, dense),
                   GemmGroup("ffn_down", layers, arch.ffn_dim // t, d, dense)]
        return tuple(groups)
    moe, moe_layers = arch.moe, arch.n_moe_layers
    if moe.n_dense_layers:
        groups += [GemmGroup("ffn_up", moe.n_dense_layers, d, up * arch.ffn_dim // t, dense),
                   GemmGroup("ffn_down", moe.n_dense_layers, arch.ffn_dim // t, d, dense)]
    if moe.n_shared_experts:
        shared = moe.n_shared_experts * moe.shared_expert_ffn_dim
        groups += [GemmGroup("shared_up", moe_layers, d, up * shared // t, dense),
                   GemmGroup("shared_down", moe_layers, shared // t, d, dense)]
    # vLLM splits each expert's matrices over the ranks without expert parallelism, holds whole experts with it.
    split = t if expert_parallel == 1 else 1
    on_rank = moe.n_routed_experts // expert_parallel
    groups += [GemmGroup("experts_up", moe_layers, d, up * moe.expert_ffn_dim // split, experts, on_rank,
                         moe.n_routed_experts, moe.experts_per_token),
               GemmGroup("experts_down", moe_layers, moe.expert_ffn_dim // split, d, experts, on_rank,
                         moe.n_routed_experts, moe.experts_per_token)]
    return tuple(groups)


def lm_head_group(arch: Architecture, tensor_parallel: int = 1) -> GemmGroup:
    """The LM head on one rank: ``D x V / t`` at the embeddings' format."""
    return GemmGroup("lm_head", 1, arch.embed_proj_dim or arch.hidden_dim, -(-arch.vocab_size // tensor_parallel),
                     arch.formats.embeddings)


def window_share(arch: Architecture, input_len: float | None, output_len: float | None) -> float:
    """The share of a request's decode context a sliding layer attends to: ``sum_j min(IL + j, W) /
    sum_j (IL + j)`` over its decode steps (1 without sliding layers, or without the lengths)."""
    if arch.sliding_window is None or input_len is None or output_len is None:
        return 1.0
    window = float(arch.sliding_window.window_tokens)
    contexts = float(input_len) + np.arange(1.0, float(output_len) + 1.0)
    return float(np.minimum(contexts, window).sum() / contexts.sum())


def attention_per_context_token(arch: Architecture, tensor_parallel: int, share: float) -> tuple[float, float]:
    """(FLOPs, KV bytes) of decode attention per context token on one rank over every layer: the scores
    and the weighted sum of this rank's heads (`slim.gpu.decode_step.attention_widths`), and the KV each
    layer reads, the sliding layers at `share` of the context."""
    d_score, d_value = decode_step.attention_widths(arch)
    heads = arch.n_q_heads // tensor_parallel
    n_sliding = arch.n_sliding_layers
    layers = (arch.n_layers - n_sliding) + n_sliding * share
    flops = layers * 2.0 * heads * (d_score + d_value)
    return flops, layers * float(decode_step.kv_bytes_per_token_per_layer(arch, tensor_parallel))


def elementwise_bytes_per_token(arch: Architecture, tensor_parallel: int) -> float:
    """Bytes the norms, activations and residuals move per token over every layer (16-bit): the paper
    model's ``2 (4 D + 2 up)`` per layer, with ``up`` the widest FFN a token runs on this rank."""
    up = (arch.ffn_matrices - 1) * (arch.moe.expert_ffn_dim * arch.moe.experts_per_token if arch.moe is not None
                                    else arch.ffn_dim) // tensor_parallel
    return arch.n_layers * ACTIVATION_BYTES * (4.0 * arch.hidden_dim + 2.0 * up)
