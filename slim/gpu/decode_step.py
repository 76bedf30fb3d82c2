"""The physics of one decode step, in one place: weight bytes read, KV bytes held and read, and FLOPs,
for dense, mixture-of-experts, latent-attention, sliding-window and quantised models, per GPU under
tensor and expert parallelism. The knee (`slim.gpu.roofline`), the memory plan (`slim.gpu.kv_memory`)
and the simulator build on these. These formulas go beyond the SLIM paper (docs/methods.md, "Modern
models"); for a dense 16-bit model they reduce to the paper's and the knee note's.

Symbols: ``B`` sequences in the step, ``ctx`` tokens each attends to, ``t`` tensor-parallel ranks,
``ep`` expert-parallel ranks (each holding ``E / ep`` whole experts), ``t_e`` ranks splitting each
expert's matrices (vLLM: ``t_e = t`` without ``--enable-expert-parallel``, 1 with it), ``b_kv``
bytes per KV element, ``k`` of ``E`` routed experts per token. Every function is vectorised over
numpy arrays of ``B`` and ``ctx`` and does no I/O.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from slim.errors import ConfigError
from slim.specs.transformer import Architecture


def _as_array(name: str, value: ArrayLike, allow_zero: bool = False) -> np.ndarray:
    array = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(array)) or np.any(array < 0) or (not allow_zero and np.any(array == 0)):
        raise ConfigError(f"{name} must be finite and {'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return array


def _check_ranks(name: str, value: int) -> int:
    if int(value) != value or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value}")
    return int(value)


# --- routed experts ---------------------------------------------------------------------------

def expected_distinct_experts(n_experts: int, experts_per_token: int, tokens: ArrayLike,
                              expert_parallel: int = 1) -> np.ndarray:
    """Experts of one MoE layer that at least one of `tokens` routed tokens runs, on one GPU:

        E_touched(T) = (E / ep) (1 - (1 - k / E)^T)

    Each token picks ``k`` of ``E`` experts; with routing uniform and independent across tokens an
    expert is missed by one token with probability ``1 - k / E``, by all ``T`` with ``(1 - k/E)^T``.
    A GPU holding ``E / ep`` experts expects that share of them. Real routers are skewed, which
    touches fewer experts: this is the upper bound of uniform routing. ``T = B`` in a decode step
    (summed over attention data-parallel ranks, whose tokens meet at the experts)."""
    if not 0 < experts_per_token <= n_experts:
        raise ConfigError(f"experts per token must lie in 1..{n_experts}, got {experts_per_token}")
    ep = _check_ranks("expert_parallel", expert_parallel)
    if n_experts % ep:
        raise ConfigError(f"expert_parallel {ep} does not divide the {n_experts} experts")
    count = _as_array("tokens", tokens, allow_zero=True)
    return (n_experts / ep) * (1.0 - (1.0 - experts_per_token / n_experts) ** count)


def _expert_layout(arch: Architecture, tensor_parallel: int, expert_parallel: int,
                   expert_tensor_parallel: int | None) -> tuple[int, int, int]:
    t = _check_ranks("tensor_parallel", tensor_parallel)
    ep = _check_ranks("expert_parallel", expert_parallel)
    t_e = (t if ep == 1 else 1) if expert_tensor_parallel is None else _check_ranks("expert_tensor_parallel",
                                                                                     expert_tensor_parallel)
    return t, ep, t_e


def decode_step_weight_bytes(arch: Architecture, batch_size: ArrayLike, *, tensor_parallel: int = 1,
                             expert_parallel: int = 1, expert_tensor_parallel: int | None = None,
                             count_input_embedding: bool = True) -> np.ndarray:
    """Weight bytes one GPU reads in one decode step of ``B`` sequences:

        W(B) = (W_total - W_routed) / t  +  L_moe E_touched(B) w_expert / t_e

    ``W_total`` is every weight at its format (`Architecture.weight_bytes`), ``W_routed`` the routed
    experts' part, ``w_expert`` one routed expert's matrices, ``L_moe`` the MoE layers. The dense part
    (attention, dense FFNs, shared experts, norms, the LM head) is read whole every step and split over
    the ``t`` ranks. A dense model reads ``W_total / t`` at any ``B``.

    `count_input_embedding` keeps the input embedding table in ``W_total`` (the knee note's
    ``n_params x 2``); a step reads only the ``B`` rows of its tokens, so False leaves an untied table
    out (a tied one is the LM head's matrix and is read)."""
    t, ep, t_e = _expert_layout(arch, tensor_parallel, expert_parallel, expert_tensor_parallel)
    batch = _as_array("batch_size", batch_size)
    classes = arch.weight_bytes_by_class()
    dense = arch.weight_bytes() - classes["routed_experts"]
    if not count_input_embedding and arch.parameters.lm_head:
        dense -= classes["embedding"]
    if arch.moe is None:
        return np.broadcast_to(np.asarray(dense / t if t > 1 else dense, dtype=float), batch.shape).copy()
    expert_bytes = arch.params_per_routed_expert * arch.formats.routed_experts.bytes_per_weight
    touched = expected_distinct_experts(arch.moe.n_routed_experts, arch.moe.experts_per_token, batch, ep)
    return dense / t + arch.n_moe_layers * touched * expert_bytes / t_e


# --- FLOPs ----------------------------------------------------------------------------------

def attention_widths(arch: Architecture) -> tuple[int, int]:
    """``(d_score, d_value)``: elements per head and context token that the scores and the weighted sum
    multiply. Standard attention: ``(d_h, d_h)``. MLA in vLLM's absorbed decode form (the key and value
    up-projections folded into the query and output): ``(r_kv + d_rope, r_kv)``, over the cached latent."""
    if arch.mla is not None:
        return arch.mla.latent_dim, arch.mla.kv_lora_rank
    return arch.head_dim, arch.head_dim


def attended_tokens(arch: Architecture, ctx_len: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``(full, sliding)`` context per layer kind: ``ctx`` on full-attention layers, ``min(ctx, W)`` on
    the sliding-window ones (``ctx`` where there are none)."""
    ctx = _as_array("ctx_len", ctx_len)
    if arch.sliding_window is None:
        return ctx, ctx
    return ctx, np.minimum(ctx, float(arch.sliding_window.window_tokens))


def attention_flops_per_token(arch: Architecture, ctx_len: ArrayLike) -> np.ndarray:
    """Attention FLOPs of one decoded token over every layer:

        F_att = sum over layers  2 H_q (d_score + d_value) ctx_l

    with ``ctx_l`` the layer's attended context (`attended_tokens`) and the widths of
    `attention_widths`; ``4 H_q d_h ctx`` per layer for standard attention (Table I's count)."""
    d_score, d_value = attention_widths(arch)
    full, sliding = attended_tokens(arch, ctx_len)
    per_token = 2.0 * arch.n_q_heads * (d_score + d_value)
    n_sliding = arch.n_sliding_layers
    return per_token * ((arch.n_layers - n_sliding) * full + n_sliding * sliding)


def active_matmul_params(arch: Architecture) -> float:
    """Matrix parameters one token multiplies by: the dense part, the LM head's matrix, and ``k / E``
    of the routed experts (the embedding lookup and norms are no matmul)."""
    p = arch.parameters
    routed = p.routed_experts * (arch.moe.routed_fraction if arch.moe is not None else 0.0)
    return float(p.dense + p.lm_head_matrix + routed)


def decode_flops_per_token(arch: Architecture, ctx_len: ArrayLike) -> np.ndarray:
    """FLOPs of one decoded token: ``2 N_active + F_att(ctx)`` (`active_matmul_params`,
    `attention_flops_per_token`). MLA's absorbed form multiplies by the key/value up-projections once
    per token, so they count among ``N_active`` as any matrix does. Summed over the GPUs."""
    return 2.0 * active_matmul_params(arch) + attention_flops_per_token(arch, ctx_len)


# --- KV cache -------------------------------------------------------------------------------

def kv_heads_per_rank(arch: Architecture, tensor_parallel: int = 1) -> int:
    """KV heads one rank holds: ``max(H_kv // t, 1)`` (heads are replicated when ``t > H_kv``); MLA's one
    latent is held whole by every rank (vLLM's ``get_num_kv_heads`` returns 1)."""
    t = _check_ranks("tensor_parallel", tensor_parallel)
    return 1 if arch.mla is not None else max(arch.n_kv_heads // t, 1)


def kv_bytes_per_token_per_layer(arch: Architecture, tensor_parallel: int = 1,
                                 bytes_per_element: int | None = None) -> int:
    """Bytes one token adds to one layer's cache on one rank: ``2 H_kv,rank d_h b_kv`` (K and V), or
    MLA's ``(r_kv + d_rope) b_kv`` (not split over ranks)."""
    b_kv = arch.kv_bytes_per_element if bytes_per_element is None else bytes_per_element
    if arch.mla is not None:
        return arch.mla.latent_dim * b_kv
    return 2 * kv_heads_per_rank(arch, tensor_parallel) * arch.head_dim * b_kv


def kv_bytes_per_token(arch: Architecture, tensor_parallel: int = 1, bytes_per_element: int | None = None) -> int:
    """Bytes one token adds on one rank over every layer: ``L x kv_bytes_per_token_per_layer`` (the
    cost of a token every layer still holds; a sliding layer drops it after ``W`` tokens)."""
    return arch.n_layers * kv_bytes_per_token_per_layer(arch, tensor_parallel, bytes_per_element)


def kv_bytes_per_sequence(arch: Architecture, ctx_len: ArrayLike, tensor_parallel: int = 1,
                          block_size: int | None = None, bytes_per_element: int | None = None) -> np.ndarray:
    """KV bytes one sequence of ``ctx`` tokens holds (and a decode step reads) on one rank:

        kv_seq(ctx) = kv_layer (L_full tok(ctx) + L_sliding min(tok(ctx), tok(W)))

    ``tok(x) = ceil(x / bs) bs`` with vLLM's paged blocks of `block_size` tokens (None: ``x``,
    unrounded), ``kv_layer`` = `kv_bytes_per_token_per_layer`. vLLM frees a sliding layer's blocks
    once they leave the window; a dense model holds ``kv_bytes_per_token x ctx``."""
    ctx = _as_array("ctx_len", ctx_len)
    per_layer = kv_bytes_per_token_per_layer(arch, tensor_parallel, bytes_per_element)
    if block_size is None:
        def tokens(x):
            return x
    else:
        bs = _check_ranks("block_size", block_size)

        def tokens(x):
            return np.ceil(x / bs) * bs
    n_sliding = arch.n_sliding_layers
    held = (arch.n_layers - n_sliding) * per_layer * tokens(ctx)
    if n_sliding:
        window = tokens(np.asarray(float(arch.sliding_window.window_tokens)))
        held = held + n_sliding * per_layer * np.minimum(tokens(ctx), window)
    return held
