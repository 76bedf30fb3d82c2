"""SLIM beyond the paper: Eqs. 7-12 with the decode step's bytes and FLOPs of `slim.gpu.decode_step`,
so that one fit serves mixture-of-experts, quantised, latent-attention, sliding-window and
tensor-parallel deployments beside the paper's dense 16-bit models.

The paper's terms (`slim.model.equations`, Eqs. 5-12) stay as they are for the dense 16-bit models of
the reproduction. For every other model (`Architecture.dense_formula_gap`) or any tensor-parallel
size above one, the same constants (``eta_c``, ``eta_m``, ``B0``, ``alpha``, ``gamma``, ``t_fixed``)
multiply these terms instead:

    prefill (Eq. 8')      F_pre = B IL (2 N_active) + B IL sum_l 2 H_q (d_s + d_v) ctx_l(IL)
                          at the peak of the dense GEMMs' compute dtype, per GPU of ``t``
    dense decode (Eq. 10') T_d = alpha OL + gamma (W(B) / W_ref) OL + OL t_ar(B)
    KV scan (Eq. 11')     M_dec = sum_{j=1..OL} kv_seq(IL + j)   (bytes per rank)

``N_active`` are the matrix parameters a token multiplies by (routed experts at ``k / E``); the
attention widths and attended contexts are `slim.gpu.decode_step`'s (MLA's absorbed form, windows
capping a sliding layer's context). ``W(B)`` is the weight bytes one GPU reads in a decode step of
``B`` sequences (`decode_step_weight_bytes`: the dense part split over the ranks, plus the routed
experts the batch touches, at each tensor class's bits), and ``W_ref = 12 x 1024^2 x 2`` bytes, the
16-bit weights of the paper's reference layer (``D = 1024``), so that for a dense 16-bit model
``W(B) / W_ref`` is Eq. 10's ``L (D / 1024)^2`` up to the embeddings and the GQA shapes: ``gamma``
keeps its meaning. ``kv_seq`` counts the KV dtype, latent attention and sliding windows
(`kv_bytes_per_sequence`). ``t_ar(B)`` is the tensor-parallel all-reduce of a decode step, two per
layer of the activations of ``B`` tokens over the accelerator's link (`Hardware.interconnect_*`;
zero at ``t = 1`` or where the link is not described), a fixed term no constant scales.
"""

from __future__ import annotations

import numpy as np

from slim.gpu import decode_step
from slim.specs.hardware import Hardware
from slim.specs.transformer import Architecture

REFERENCE_LAYER_WEIGHT_BYTES = 12 * 1024**2 * 2
"""``W_ref``: the 16-bit weights of one dense layer of hidden size 1024 (Eq. 10's reference width)."""
ACTIVATION_BYTES = 2
"""Bytes per element of the activations tensor-parallel ranks all-reduce (16-bit)."""


def uses_modern_terms(arch: Architecture, tensor_parallel: int = 1) -> bool:
    """Whether SLIM evaluates `arch` with this module's terms: a model the paper's dense formula does not
    describe, or a tensor-parallel deployment (the paper's Eqs. have no tensor-parallel term)."""
    return arch.dense_formula_gap is not None or tensor_parallel > 1


def _summed_context(il: np.ndarray, ol: np.ndarray, cap: float | None) -> np.ndarray:
    """``sum_{j=1..OL} min(IL + j, cap)`` (``cap`` None: no cap; Eq. 12's ``C(IL, OL)``)."""
    full = ol * (il + 1.0) + ol * (ol - 1.0) / 2.0
    if cap is None:
        return full
    first = il + 1.0
    below = np.clip(cap - first + 1.0, 0.0, ol)             # terms with IL + j <= cap
    below_sum = below * first + below * (below - 1.0) / 2.0
    return below_sum + (ol - below) * cap


def prefill_flops(arch: Architecture, il, batch) -> np.ndarray:
    """``F_pre`` of Eq. 8' (module docstring), summed over the GPUs: matrix FLOPs of every prompt token
    and attention over the prompt (full layers over ``IL``, sliding ones over ``min(IL, W)``), as
    Eq. 8 counts them (``IL^2``, not the causal half)."""
    il, batch = np.asarray(il, dtype=float), np.asarray(batch, dtype=float)
    matmul = 2.0 * decode_step.active_matmul_params(arch)
    attention = decode_step.attention_flops_per_token(arch, np.maximum(il, 1.0))
    return batch * il * (matmul + attention)


def kv_bytes_read_per_request(arch: Architecture, il, ol, tensor_parallel: int = 1) -> np.ndarray:
    """``M_dec`` of Eq. 11': KV bytes one request reads on one rank over its decode, with the KV
    dtype, latent attention and sliding windows (module docstring)."""
    il, ol = np.asarray(il, dtype=float), np.asarray(ol, dtype=float)
    per_layer = float(decode_step.kv_bytes_per_token_per_layer(arch, tensor_parallel))
    n_sliding = arch.n_sliding_layers
    total = (arch.n_layers - n_sliding) * per_layer * _summed_context(il, ol, None)
    if n_sliding:
        total = total + n_sliding * per_layer * _summed_context(il, ol, float(arch.sliding_window.window_tokens))
    return total


def weight_factor(arch: Architecture, batch, tensor_parallel: int = 1) -> np.ndarray:
    """``W(B) / W_ref`` of Eq. 10' (module docstring): the decode step's weight bytes on one GPU in
    reference layers; the input embedding table is not read whole (a step reads only its tokens' rows)."""
    weights = decode_step.decode_step_weight_bytes(arch, np.maximum(np.asarray(batch, dtype=float), 1e-9),
                                                   tensor_parallel=tensor_parallel, count_input_embedding=False)
    return weights / REFERENCE_LAYER_WEIGHT_BYTES


def allreduce_s_per_step(arch: Architecture, hw: Hardware, batch, tensor_parallel: int = 1) -> np.ndarray:
    """``t_ar(B)``: two all-reduces per layer of ``B`` tokens' activations (``D`` elements of
    `ACTIVATION_BYTES`), each its latency plus a ring's ``2 (t - 1) / t`` of the payload over the link's
    bandwidth; zero at ``t = 1`` or where the accelerator's link is not described."""
    batch = np.asarray(batch, dtype=float)
    bandwidth = hw.interconnect_bandwidth_bytes_per_s
    if tensor_parallel <= 1 or bandwidth is None:
        return np.zeros_like(batch)
    latency = hw.interconnect_latency_s or 0.0
    payload = ACTIVATION_BYTES * batch * arch.hidden_dim
    per_allreduce = latency + 2.0 * (tensor_parallel - 1) / tensor_parallel * payload / bandwidth
    return 2.0 * arch.n_layers * per_allreduce


def compute_scale(arch: Architecture, hw: Hardware, tensor_parallel: int = 1) -> float:
    """How much faster than one GPU's 16-bit peak the dense GEMMs run: the compute dtype's peak over
    the 16-bit one, times the ranks sharing the work (Eq. 7' divides ``F_pre`` by it)."""
    return hw.peak_flops_for(arch.formats.dense.compute_dtype) / hw.peak_flops_per_s * tensor_parallel
