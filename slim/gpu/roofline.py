"""Zero-parameter roofline models of LLM decode: the knee note's batch-size knee and the
decode-attention arithmetic intensity (paper Section V, Table I).

Knee note (`shared/paper/bknee-note.txt`). Per decode step the GPU reads

    bytes(B)         = model_bytes + B kv_bytes_per_seq
    model_bytes      = n_params x 2                                   (bf16)
    kv_bytes_per_seq = L x 2 x H_kv x d_h x 2 x ctx                   (K and V, bf16)
    TPOT(B)          = bytes(B) / BW
    T_tokens(B)      = B / TPOT(B)                                    (decode tokens/s)
    B_knee           = model_bytes / kv_bytes_per_seq
    max_num_seqs     in [1.0, 1.5] x B_knee                           (recommended)

GB is 1e9 bytes and TB/s 1e12 B/s. The note rounds Llama-3-8B to 16 GB and
Llama-3-70B to 140 GB; pass those through ``model_bytes``. Every function returns
unrounded floats: the note prints its values at mixed conventions (some rounded,
some truncated), so rounding is left to the caller.

Generalised knee (beyond the note; docs/methods.md, "Modern models"). The bytes come from
`slim.gpu.decode_step`: ``model_bytes`` is every weight at its format (fp8, 4-bit, ...), a
mixture of experts reads only the experts its batch routes to, so its weight bytes grow with
``B``, ``W(B)``; ``kv_bytes_per_seq`` holds the KV dtype, MLA's latent and sliding windows. Per
GPU under ``t`` tensor-parallel ranks, the knee is where ``W(B) = B kv_bytes_per_seq``: the note's
closed form where ``W`` is constant, solved numerically where it grows (`knee_batch_size`). For a
dense 16-bit model every number is the note's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from slim.errors import ConfigError
from slim.gpu.decode_step import decode_step_weight_bytes, kv_bytes_per_sequence
from slim.specs.architecture import BYTES_PER_FP16, Architecture
from slim.specs.hardware import Hardware

DEFAULT_REPORT_BATCH_SIZES = (1, 8, 16, 32, 64, 128, 256, 512)
RECOMMENDED_LOW_FACTOR = 1.0
RECOMMENDED_HIGH_FACTOR = 1.5


def _positive_array(name: str, value: ArrayLike) -> np.ndarray:
    array = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise ConfigError(f"{name} must be finite and > 0, got {value!r}")
    return array


def model_bytes_of(arch: Architecture, model_bytes: float | None = None,
                   bytes_per_param: float | None = None) -> float:
    """``model_bytes``: every weight at its format (`Architecture.weight_bytes`; a 16-bit model:
    ``n_params x 2``), or ``n_params x bytes_per_param``, unless an override is given.

    The override exists because the note uses rounded sizes (Llama-3-8B = 16 GB,
    Llama-3-70B = 140 GB) rather than the exact parameter counts.
    """
    if model_bytes is not None:
        return float(_positive_array("model_bytes", model_bytes))
    return float(arch.weight_bytes(bytes_per_param))


def kv_bytes_per_seq(arch: Architecture, ctx_len: ArrayLike, bytes_per_element: int | None = None,
                     tensor_parallel: int = 1) -> np.ndarray:
    """``kv_bytes_per_seq = L x 2 x H_kv x d_h x b_kv x ctx`` (K and V of one sequence; ``b_kv`` the
    model's KV dtype unless given), per rank, with MLA's latent and sliding windows
    (`slim.gpu.decode_step.kv_bytes_per_sequence`)."""
    ctx = _positive_array("ctx_len", ctx_len)
    return kv_bytes_per_sequence(arch, ctx, tensor_parallel, bytes_per_element=bytes_per_element)


def _weight_bytes_read(arch: Architecture, batch: np.ndarray, model_bytes: float | None,
                       tensor_parallel: int, expert_parallel: int) -> np.ndarray | float:
    """``W(B)`` per GPU: the override (split over the ranks) or `decode_step_weight_bytes`, which is
    constant but for a mixture of experts."""
    if model_bytes is not None or arch.moe is None:
        size = model_bytes_of(arch, model_bytes)
        return size / tensor_parallel if tensor_parallel > 1 else size
    return decode_step_weight_bytes(arch, batch, tensor_parallel=tensor_parallel, expert_parallel=expert_parallel)


def decode_step_bytes(arch: Architecture, batch_size: ArrayLike, ctx_len: ArrayLike,
                      model_bytes: float | None = None, tensor_parallel: int = 1,
                      expert_parallel: int = 1) -> np.ndarray:
    """Bytes one GPU reads in one decode step: ``W(B) + B kv_bytes_per_seq`` (``W`` = ``model_bytes``
    for a dense model)."""
    batch = _positive_array("batch_size", batch_size)
    weights = _weight_bytes_read(arch, batch, model_bytes, tensor_parallel, expert_parallel)
    return weights + batch * kv_bytes_per_seq(arch, ctx_len, tensor_parallel=tensor_parallel)


def roofline_tpot_s(arch: Architecture, hw: Hardware, batch_size: ArrayLike,
                    ctx_len: ArrayLike, model_bytes: float | None = None, tensor_parallel: int = 1,
                    expert_parallel: int = 1) -> np.ndarray:
    """Roofline time per output token: ``TPOT(B) = (W(B) + B kv_bytes_per_seq) / BW``."""
    return decode_step_bytes(arch, batch_size, ctx_len, model_bytes, tensor_parallel,
                             expert_parallel) / hw.hbm_bandwidth_bytes_per_s


def roofline_throughput_tokens_per_s(arch: Architecture, hw: Hardware, batch_size: ArrayLike,
                                     ctx_len: ArrayLike,
                                     model_bytes: float | None = None, tensor_parallel: int = 1,
                                     expert_parallel: int = 1) -> np.ndarray:
    """Aggregate decode throughput ``B / TPOT(B) = B BW / (W(B) + B kv_bytes_per_seq)``."""
    batch = _positive_array("batch_size", batch_size)
    return batch / roofline_tpot_s(arch, hw, batch, ctx_len, model_bytes, tensor_parallel, expert_parallel)


KNEE_BISECTION_STEPS = 200
"""Halvings of the knee's bracket: enough to reach the float resolution of any bracket."""


def knee_batch_size(arch: Architecture, ctx_len: ArrayLike,
                    model_bytes: float | None = None, tensor_parallel: int = 1,
                    expert_parallel: int = 1) -> np.ndarray:
    """``B_knee`` where the weight and KV reads of a step are equal, ``W(B) = B kv_bytes_per_seq``.

    With ``W`` constant (a dense model, or an override): ``B_knee = model_bytes / kv_bytes_per_seq``.
    A mixture of experts reads ``W(B) = A + C (1 - (1 - k/E)^B)`` (`decode_step_weight_bytes`: ``A``
    the dense part, ``C`` every routed expert on the GPU), concave in ``B``, so ``W(B) - B kv`` falls
    through zero once, between ``A / kv`` and ``(A + C) / kv``: found by bisection.

    Independent of bandwidth: a faster GPU lowers TPOT but does not move the knee.
    """
    kv = kv_bytes_per_seq(arch, ctx_len, tensor_parallel=tensor_parallel)
    if model_bytes is not None or arch.moe is None:
        size = model_bytes_of(arch, model_bytes)
        return (size / tensor_parallel if tensor_parallel > 1 else size) / kv

    def excess(batch: np.ndarray) -> np.ndarray:
        return decode_step_weight_bytes(arch, batch, tensor_parallel=tensor_parallel,
                                        expert_parallel=expert_parallel) - batch * kv

    low = decode_step_weight_bytes(arch, np.full(kv.shape, 1e-300), tensor_parallel=tensor_parallel,
                                   expert_parallel=expert_parallel) / kv
    high = decode_step_weight_bytes(arch, np.full(kv.shape, 1e18), tensor_parallel=tensor_parallel,
                                    expert_parallel=expert_parallel) / kv
    for _ in range(KNEE_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        above = excess(middle) > 0
        low, high = np.where(above, middle, low), np.where(above, high, middle)
    return 0.5 * (low + high)


@dataclass(frozen=True)
class KneeRecommendation:
    """The note's advice for one (model, context length, GPU)."""

    model: str
    hardware: str
    ctx_len: float
    model_bytes: float               # weight bytes a step reads at the knee, per GPU
    kv_bytes_per_seq: float
    b_knee: float                    # unrounded; model_bytes / kv_bytes_per_seq
    low: float                       # RECOMMENDED_LOW_FACTOR x b_knee
    high: float                      # RECOMMENDED_HIGH_FACTOR x b_knee
    suggested_max_num_seqs: int      # smallest power of two in [low, high], else ceil(low)
    batch_sizes: tuple[int, ...]
    tpot_s: tuple[float, ...]
    throughput_tokens_per_s: tuple[float, ...]


def suggest_max_num_seqs(low: float, high: float) -> int:
    """Smallest power of two in ``[low, high]`` (the note: B_knee 60 -> 64, 15 -> 16);
    ``ceil(low)`` when the range holds no power of two."""
    if not (math.isfinite(low) and math.isfinite(high)) or low <= 0 or high < low:
        raise ConfigError(f"need 0 < low <= high, got low={low}, high={high}")
    power = 2 ** math.ceil(math.log2(low))
    return int(power) if power <= high else int(math.ceil(low))


def recommend_knee(arch: Architecture, hw: Hardware, ctx_len: float,
                   model_bytes: float | None = None,
                   batch_sizes: tuple[int, ...] = DEFAULT_REPORT_BATCH_SIZES,
                   low_factor: float = RECOMMENDED_LOW_FACTOR,
                   high_factor: float = RECOMMENDED_HIGH_FACTOR, tensor_parallel: int = 1,
                   expert_parallel: int = 1) -> KneeRecommendation:
    """Knee (`knee_batch_size`), recommended ``max_num_seqs`` range ``[low_factor, high_factor] x
    B_knee`` and roofline TPOT / throughput at `batch_sizes`, per GPU of ``t`` tensor-parallel ranks.
    `KneeRecommendation.model_bytes` is the weight bytes a step reads at the knee (all of them for a
    dense model)."""
    if not 0 < low_factor <= high_factor:
        raise ConfigError(f"need 0 < low_factor <= high_factor, got {low_factor}, {high_factor}")
    knee = float(knee_batch_size(arch, ctx_len, model_bytes, tensor_parallel, expert_parallel))
    size = float(_weight_bytes_read(arch, np.asarray(knee), model_bytes, tensor_parallel, expert_parallel))
    batches = np.asarray(batch_sizes, dtype=float)
    tpot = roofline_tpot_s(arch, hw, batches, ctx_len, model_bytes, tensor_parallel, expert_parallel)
    return KneeRecommendation(
        model=arch.name,
        hardware=hw.name,
        ctx_len=float(ctx_len),
        model_bytes=size,
        kv_bytes_per_seq=float(kv_bytes_per_seq(arch, ctx_len, tensor_parallel=tensor_parallel)),
        b_knee=knee,
        low=low_factor * knee,
        high=high_factor * knee,
        suggested_max_num_seqs=suggest_max_num_seqs(low_factor * knee, high_factor * knee),
        batch_sizes=tuple(int(b) for b in batch_sizes),
        tpot_s=tuple(float(t) for t in tpot),
        throughput_tokens_per_s=tuple(float(t) for t in batches / tpot),
    )


# --- Decode-attention arithmetic intensity (paper Section V, Table I) ----------------

def decode_context_len(input_len: ArrayLike, output_len: ArrayLike,
                       step: ArrayLike | None = None) -> np.ndarray:
    """Context one sequence attends to at decode step ``j`` (1-based): ``IL + j``.

    Default ``j = OL``: the last step, ``IL + OL``, which is how Table I states the
    active context (``B (IL + OL)``, e.g. (4, 256, 256) -> 2,048).
    """
    il = np.asarray(input_len, dtype=float)
    ol = np.asarray(output_len, dtype=float)
    j = ol if step is None else np.asarray(step, dtype=float)
    return il + j


def decode_attention_flops_per_layer(arch: Architecture, batch_size: ArrayLike,
                                     ctx_len: ArrayLike) -> np.ndarray:
    """FLOPs of ``Q K^T`` and ``P V`` for one decode step of one layer.

    Each of ``B`` sequences has ``H_q`` query heads attending over ``ctx`` cached
    tokens of width ``d_h``: ``Q K^T`` is ``H_q ctx d_h`` multiply-adds and ``P V``
    the same, at 2 FLOP per multiply-add: ``F = 4 B H_q d_h ctx``. Softmax is
    neglected (a few FLOP per score against ``4 d_h`` per score for the matmuls).
    """
    batch = _positive_array("batch_size", batch_size)
    ctx = _positive_array("ctx_len", ctx_len)
    return 4.0 * batch * arch.n_q_heads * arch.head_dim * ctx


def decode_attention_bytes_per_layer(arch: Architecture, batch_size: ArrayLike,
                                     ctx_len: ArrayLike,
                                     bytes_per_element: int = BYTES_PER_FP16,
                                     include_query_output_bytes: bool = False) -> np.ndarray:
    """DRAM bytes of one decode step of one layer's attention.

    KV read: ``2 B H_kv d_h ctx b_kv`` (each KV head is read once and shared by its
    ``H_q / H_kv`` query heads). Optionally the query read and output write,
    ``2 B H_q d_h b``, which matter only for very short contexts.
    """
    batch = _positive_array("batch_size", batch_size)
    ctx = _positive_array("ctx_len", ctx_len)
    kv = 2.0 * batch * arch.n_kv_heads * arch.head_dim * ctx * bytes_per_element
    if include_query_output_bytes:
        kv = kv + 2.0 * batch * arch.n_q_heads * arch.head_dim * bytes_per_element
    return kv


def decode_attention_intensity(arch: Architecture, batch_size: ArrayLike, input_len: ArrayLike,
                               output_len: ArrayLike, step: ArrayLike | None = None,
                               bytes_per_element: int = BYTES_PER_FP16,
                               include_query_output_bytes: bool = False) -> np.ndarray:
    """Arithmetic intensity (FLOP/byte) of decode attention for ``(B, IL, OL)``.

    ``AI = 4 B H_q d_h ctx / (2 B H_kv d_h ctx b_kv) = 2 H_q / (H_kv b_kv)``, i.e.
    ``H_q / H_kv`` for fp16 KV, independent of B, IL and OL (the paper's Section V
    finding behind the throughput plateau). Batch and context cancel per layer, so
    this is also the whole-model figure.
    """
    ctx = decode_context_len(input_len, output_len, step)
    flops = decode_attention_flops_per_layer(arch, batch_size, ctx)
    read = decode_attention_bytes_per_layer(arch, batch_size, ctx, bytes_per_element,
                                            include_query_output_bytes)
    return flops / read


def attainable_flops_per_s(hw: Hardware, intensity_flop_per_byte: ArrayLike) -> np.ndarray:
    """Roofline ceiling: ``min(F_max, AI x BW_max)``."""
    intensity = _positive_array("intensity_flop_per_byte", intensity_flop_per_byte)
    return np.minimum(hw.peak_flops_per_s, intensity * hw.hbm_bandwidth_bytes_per_s)


def ridge_point_flop_per_byte(hw: Hardware) -> float:
    """Intensity where the roofline turns compute-bound: ``F_max / BW_max``."""
    return hw.peak_flops_per_s / hw.hbm_bandwidth_bytes_per_s
