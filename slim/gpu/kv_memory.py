"""vLLM's KV-cache memory: the one model of how much KV cache a server reserves, what a batch
cap needs, what is saved, and the server flags that reserve only what is needed (paper
Section VII-B3, Fig. 13).

The reservation (vLLM V0's memory profiling, the values its server log prints; per
tensor-parallel rank ``t``)::

    kv_cache_bytes   = gpu_memory_utilization x usable memory - peak_torch - non_torch
    peak_torch       = weights / t + activation peak of the profile run
    activation peak  = logits_bytes x max_num_seqs x vocab + act_bytes x max_num_batched_tokens x D
    num_gpu_blocks   = floor(kv_cache_bytes / (block_size x kv_bytes_per_token / t))

The simulator (`slim.sim.memory`) evaluates it with the profile measured on the public
traces (`VllmMemoryProfile`); the advisor, which has no profile of the target server, uses
the nominal memory, no activation peak and one lumped overhead
(`DEFAULT_ACTIVATION_OVERHEAD_BYTES`) in place of ``non_torch``
(`default_kv_reservation_bytes`), or the ``num_gpu_blocks`` a trace reports.

vLLM (PagedAttention) stores KV in blocks of `block_size` tokens (16 by default); a
sequence of ``IL + OL`` tokens holds ``ceil((IL + OL) / block_size)`` blocks:

    kv_bytes_needed    = B_cap x ceil((IL + OL) / bs) x bs x kv_bytes_per_token
    kv_bytes_per_token = 2 (K, V) x L x D_kv x b_kv
    weight_bytes       = n_params x 2                                    (fp16/bf16)
    memory saved       = reservation - kv_bytes_needed

Pass ``block_size=1`` for the unrounded ``B_cap (IL + OL) kv_bytes_per_token``.

Modern models (beyond the paper; `slim.gpu.decode_step`): weights are priced at their formats
(`Architecture.weight_bytes`), ``b_kv`` is the KV dtype (``--kv-cache-dtype``), MLA caches one
latent per token and layer that every rank holds whole, and a sliding-window layer holds at most
its window. Blocks (``num_gpu_blocks``) count ``bs`` tokens of every layer; with sliding-window
layers they count as vLLM V1's hybrid allocator does (`KvCacheGroups`): a block is ``bs`` tokens
of one group of layers, a full-attention group holds a sequence's whole context and a sliding
group its window's blocks plus one, so ``--num-gpu-blocks-override`` and the reservation a trace's
block count implies follow that count (`blocks_per_sequence_of`, `block_bytes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from slim.errors import AdvisorError
from slim.gpu import decode_step
from slim.specs.architecture import Architecture
from slim.specs.hardware import GIB, Hardware

VLLM_BLOCK_SIZE_TOKENS = 16

DEFAULT_ACTIVATION_OVERHEAD_BYTES = 1 * GIB
"""Memory vLLM keeps outside weights and KV: the activation peak of its profiling
forward pass plus non-torch allocations (CUDA context, NCCL). On the public H100
traces (vLLM V0, early 2025) the server log reports, for OPT-1.3B, peak_torch_memory
3.40 GiB with 2.45 GiB of weights and 0.10 GiB non-torch at max_num_seqs = 512
(1.05 GiB overhead) but only 2.51 GiB peak at max_num_seqs = 1 (0.16 GiB): the
overhead grows with max_num_seqs (sampler buffers) and with the vocabulary. 1 GiB is
a round, conservative value for small and mid models at large caps; pass the
measured figure where known. It excludes CUDA graphs, which vLLM V0 captures after
sizing the cache and are covered by the (1 - gpu_memory_utilization) slack."""


# --- the reservation -------------------------------------------------------------------

def kv_cache_bytes(usable_memory_bytes: float, gpu_memory_utilization: float, peak_torch_bytes: float,
                   non_torch_bytes: float) -> float:
    """KV cache vLLM reserves on one rank:
    ``gpu_memory_utilization x usable memory - peak_torch - non_torch`` (module docstring)."""
    return gpu_memory_utilization * usable_memory_bytes - peak_torch_bytes - non_torch_bytes


def kv_dim_per_rank(arch: Architecture, tensor_parallel: int) -> int:
    """KV width held by one rank: ``D_kv / t``, but at least one head (heads are replicated)."""
    return decode_step.kv_heads_per_rank(arch, tensor_parallel) * arch.head_dim


def kv_bytes_per_token_per_rank(arch: Architecture, tensor_parallel: int) -> int:
    """``2 (K, V) x L x D_kv,rank x b_kv`` (MLA: ``L (r_kv + d_rope) b_kv`` on every rank;
    `slim.gpu.decode_step.kv_bytes_per_token`)."""
    return decode_step.kv_bytes_per_token(arch, tensor_parallel)


@dataclass(frozen=True)
class VllmMemoryProfile:
    """What vLLM V0's memory profiling finds besides weights and KV cache, and its cache layout."""

    device_reserved_bytes: float                 # memory the driver does not expose
    non_torch_memory_bytes: float                # CUDA context, NCCL
    logits_bytes_per_vocab_entry_per_seq: float  # the profile run's sampler buffers
    activation_bytes_per_token_per_hidden: float  # the profile run's hidden activations
    max_num_batched_tokens: int                  # tokens of the profile run
    block_size: int                              # tokens per KV block

    def activation_peak_bytes(self, arch: Architecture, max_num_seqs: int) -> float:
        """Activation peak of the profile run: ``max_num_batched_tokens`` tokens over
        ``max_num_seqs`` sequences, with several fp32 copies of every sequence's logits (why
        the real logs show a KV cache that shrinks slightly as ``--max-num-seqs`` grows)."""
        return (self.logits_bytes_per_vocab_entry_per_seq * max_num_seqs * arch.vocab_size
                + self.activation_bytes_per_token_per_hidden * self.max_num_batched_tokens * arch.hidden_dim)


@dataclass(frozen=True)
class KvCachePlan:
    """Memory plan of one rank at server start; ``failure`` names vLLM's startup error when it cannot serve."""

    total_gpu_memory_bytes: float
    weights_bytes_per_rank: float
    peak_torch_bytes: float
    kv_cache_bytes: float
    num_gpu_blocks: int
    block_size: int
    max_model_len: int
    failure: str | None     # None, "cuda_oom", "no_cache_memory" or "max_model_len"

    @property
    def kv_capacity_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size


def plan_kv_cache(arch: Architecture, hw: Hardware, profile: VllmMemoryProfile, max_num_seqs: int,
                  max_model_len: int, tensor_parallel: int = 1) -> KvCachePlan:
    """KV blocks per rank after weights and the profile run (module docstring), and whether
    vLLM starts: the weights fit, some cache block is left, and one sequence of
    `max_model_len` tokens fits the cache."""
    total = hw.memory_bytes - profile.device_reserved_bytes
    weights = arch.weight_bytes() / tensor_parallel
    peak = weights + profile.activation_peak_bytes(arch, max_num_seqs)
    kv_bytes = kv_cache_bytes(total, hw.gpu_memory_utilization, peak, profile.non_torch_memory_bytes)
    block_bytes = profile.block_size * kv_bytes_per_token_per_rank(arch, tensor_parallel)
    blocks = max(int(math.floor(kv_bytes / block_bytes)), 0)
    longest = float(decode_step.kv_bytes_per_sequence(arch, max_model_len, tensor_parallel, profile.block_size))
    if weights >= total:
        failure = "cuda_oom"
    elif blocks <= 0:
        failure = "no_cache_memory"
    elif blocks * block_bytes < longest:      # dense: blocks x bs < max_model_len
        failure = "max_model_len"
    else:
        failure = None
    return KvCachePlan(total, weights, peak, kv_bytes, blocks, profile.block_size, max_model_len, failure)


def window_equivalent_blocks(arch: Architecture, num_gpu_blocks: int, context_tokens: float,
                             tensor_parallel: int = 1, block_size: int = VLLM_BLOCK_SIZE_TOKENS) -> int:
    """Blocks of every layer's KV (what a block manager giving each sequence ``ceil(ctx / bs)`` blocks of
    every layer counts) that hold as many sequences of `context_tokens` as the same memory holds under
    vLLM V1's hybrid allocator, where sliding-window layers keep only their window
    (`hybrid_sequences`); `num_gpu_blocks` for a model without sliding-window layers. Exact at a
    sequence's final length; a shorter sequence holds less of its window's saving, so mid-run the
    count is generous."""
    if arch.sliding_window is None or not arch.n_sliding_layers:
        return int(num_gpu_blocks)
    memory = int(num_gpu_blocks) * block_size * _kv_bytes_per_token(arch, tensor_parallel)
    sequences = hybrid_sequences(arch, memory, context_tokens, 0.0, tensor_parallel, block_size)
    return int(math.floor(sequences * float(blocks_per_sequence(context_tokens, 0.0, block_size))))


def hybrid_sequences(arch: Architecture, kv_bytes: float, input_len: float, output_len: float,
                     tensor_parallel: int = 1, block_size: int = VLLM_BLOCK_SIZE_TOKENS) -> float:
    """Sequences of ``IL + OL`` tokens `kv_bytes` of cache hold at their end under vLLM V1's hybrid
    allocator: ``(kv_bytes / block_bytes) / blocks_per_sequence_of(IL + OL)``."""
    blocks = float(kv_bytes) / block_bytes(arch, tensor_parallel, block_size)
    return blocks / float(blocks_per_sequence_of(arch, input_len, output_len, block_size))


# --- a batch cap's need against the reservation ----------------------------------------

@dataclass(frozen=True)
class KvMemoryPlan:
    """KV memory of one batch cap against vLLM's default reservation (bytes, on each of
    `tensor_parallel` ranks: vLLM sizes every worker's cache alike)."""

    model: str
    batch_cap: int
    input_len: float
    output_len: float
    block_size: int
    kv_bytes_needed: float
    kv_reservation_bytes: float
    memory_saved_bytes: float
    weight_bytes: float
    activation_overhead_bytes: float
    gpu_memory_utilization_needed: float   # value for --gpu-memory-utilization
    num_gpu_blocks_override: int           # value for --num-gpu-blocks-override
    tensor_parallel: int = 1               # ranks the weights and KV heads are split over


def _check_positive(name: str, value: ArrayLike) -> np.ndarray:
    array = np.asarray(value, dtype=float)
    if array.size == 0 or not np.all(np.isfinite(array)) or np.any(array <= 0):
        raise AdvisorError(f"{name} must be finite and > 0, got {value!r}")
    return array


def _check_block_size(block_size: int) -> int:
    if int(block_size) != block_size or block_size < 1:
        raise AdvisorError(f"block_size must be a positive integer, got {block_size}")
    return int(block_size)


def blocks_per_sequence(input_len: ArrayLike, output_len: ArrayLike,
                        block_size: int = VLLM_BLOCK_SIZE_TOKENS) -> np.ndarray:
    """KV blocks one sequence occupies at its end: ``ceil((IL + OL) / block_size)``."""
    block_size = _check_block_size(block_size)
    tokens = _check_positive("input_len + output_len",
                             np.asarray(input_len, dtype=float) + np.asarray(output_len, dtype=float))
    return np.ceil(tokens / block_size)


@dataclass(frozen=True)
class KvCacheGroups:
    """How vLLM V1's hybrid allocator groups the KV cache of a model with full-attention and
    sliding-window layers (``vllm/v1/core/kv_cache_utils.py``, ``_get_kv_cache_groups_uniform_page_size``):
    each attention type's layers are split into groups of `group_size` layers, the smaller type's
    count, or the larger's where it is under 1.5 x the smaller's, the last group padded up. A block of
    the shared pool is ``bs`` tokens of one group's `group_size` layers; a full group holds a sequence's
    whole context, a sliding group at most ``ceil((W - 1) / bs) + 1`` blocks (the blocks left behind the
    window are freed). A model of one attention type is one group of every layer."""

    group_size: int
    full_groups: int
    sliding_groups: int
    window_tokens: int | None = None


def kv_cache_groups(arch: Architecture) -> KvCacheGroups:
    """`arch`'s KV cache groups under vLLM V1's hybrid allocator (`KvCacheGroups`)."""
    n_sliding = arch.n_sliding_layers
    n_full = arch.n_layers - n_sliding
    window = arch.sliding_window.window_tokens if arch.sliding_window is not None and n_sliding else None
    if not n_sliding or not n_full:
        return KvCacheGroups(arch.n_layers, int(n_full > 0), int(n_sliding > 0), window)
    fewer, more = min(n_full, n_sliding), max(n_full, n_sliding)
    size = more if more < 1.5 * fewer else fewer
    return KvCacheGroups(size, math.ceil(n_full / size), math.ceil(n_sliding / size), window)


def blocks_per_sequence_of(arch: Architecture, input_len: ArrayLike, output_len: ArrayLike,
                           block_size: int = VLLM_BLOCK_SIZE_TOKENS) -> np.ndarray:
    """Blocks one sequence of ``IL + OL`` tokens holds at its end: ``ceil((IL + OL) / bs)``, or with
    sliding-window layers ``G_full ceil((IL + OL) / bs) + G_sliding min(ceil((IL + OL) / bs),
    ceil((W - 1) / bs) + 1)`` over the hybrid allocator's groups (`KvCacheGroups`)."""
    whole = blocks_per_sequence(input_len, output_len, block_size)
    groups = kv_cache_groups(arch)
    if groups.window_tokens is None:
        return whole
    window = math.ceil((groups.window_tokens - 1) / block_size) + 1
    return groups.full_groups * whole + groups.sliding_groups * np.minimum(whole, window)


def block_bytes(arch: Architecture, tensor_parallel: int = 1, block_size: int = VLLM_BLOCK_SIZE_TOKENS,
                bytes_per_element: int | None = None) -> int:
    """Bytes of one block on one rank: ``bs x kv_bytes_per_token_per_rank``, or with sliding-window
    layers ``bs`` tokens of one group's layers (`KvCacheGroups`)."""
    groups = kv_cache_groups(arch)
    if groups.window_tokens is None:
        return block_size * _kv_bytes_per_token(arch, tensor_parallel, bytes_per_element)
    return groups.group_size * block_size * decode_step.kv_bytes_per_token_per_layer(arch, tensor_parallel,
                                                                                   bytes_per_element)


def _kv_bytes_per_token(arch: Architecture, tensor_parallel: int, bytes_per_element: int | None = None) -> int:
    """KV bytes one token adds on one of `tensor_parallel` ranks (the model's own count at one rank)."""
    if tensor_parallel == 1:
        return arch.kv_bytes_per_token(bytes_per_element)
    return decode_step.kv_bytes_per_token(arch, tensor_parallel, bytes_per_element)


def kv_bytes_needed(arch: Architecture, batch_cap: ArrayLike, input_len: ArrayLike,
                    output_len: ArrayLike, block_size: int = VLLM_BLOCK_SIZE_TOKENS,
                    bytes_per_element: int | None = None, tensor_parallel: int = 1) -> np.ndarray:
    """KV bytes for ``B_cap`` concurrent sequences of ``IL + OL`` tokens on each of ``t`` ranks,
    block-rounded: ``ceil(B_cap) x ceil((IL + OL) / bs) x bs x kv_bytes_per_token_per_rank``
    (``b_kv`` the model's KV dtype unless given); with sliding-window layers ``ceil(B_cap) x
    blocks_per_sequence_of(IL + OL) x block_bytes``, the blocks vLLM's hybrid allocator holds.

    A cap is a count of sequences, so a fractional (mean) batch is rounded up.
    """
    sequences = np.ceil(_check_positive("batch_cap", batch_cap))
    blocks = blocks_per_sequence(input_len, output_len, block_size)
    if arch.sliding_window is None:
        return sequences * blocks * block_size * _kv_bytes_per_token(arch, tensor_parallel, bytes_per_element)
    return (sequences * blocks_per_sequence_of(arch, input_len, output_len, block_size)
            * block_bytes(arch, tensor_parallel, block_size, bytes_per_element))


def weight_bytes(arch: Architecture, bytes_per_param: float | None = None) -> float:
    """Every weight at its format (`Architecture.weight_bytes`: ``n_params x 2`` for a 16-bit model),
    or ``n_params x bytes_per_param``."""
    return float(arch.weight_bytes(bytes_per_param))


def _utilization_and_total(hw: Hardware, gpu_memory_utilization: float | None,
                           total_memory_bytes: float | None) -> tuple[float, float]:
    """``(gpu_memory_utilization, total memory)``: the arguments, else the hardware's values."""
    utilization = hw.gpu_memory_utilization if gpu_memory_utilization is None else gpu_memory_utilization
    if not 0 < utilization <= 1:
        raise AdvisorError(f"gpu_memory_utilization must lie in (0, 1], got {utilization}")
    total = hw.memory_bytes if total_memory_bytes is None else total_memory_bytes
    return utilization, float(_check_positive("total_memory_bytes", total))


def default_kv_reservation_bytes(arch: Architecture, hw: Hardware,
                                 activation_overhead_bytes: float = DEFAULT_ACTIVATION_OVERHEAD_BYTES,
                                 gpu_memory_utilization: float | None = None,
                                 total_memory_bytes: float | None = None, tensor_parallel: int = 1) -> float:
    """vLLM's default KV reservation as the advisor estimates it without a memory profile, on each
    of ``t`` ranks: ``gpu_memory_utilization x total - weights / t - activation overhead``
    (`kv_cache_bytes` with the rank's weights as the whole torch peak and the overhead in place of
    non-torch memory).

    `total_memory_bytes` defaults to ``hw.memory_bytes``; vLLM itself uses the total
    the driver reports, which can be lower (63.43 GiB on the traces' "64 GB" H100).
    """
    if activation_overhead_bytes < 0:
        raise AdvisorError(f"activation_overhead_bytes must be >= 0, got {activation_overhead_bytes}")
    utilization, total = _utilization_and_total(hw, gpu_memory_utilization, total_memory_bytes)
    return kv_cache_bytes(total, utilization, weight_bytes(arch) / tensor_parallel, float(activation_overhead_bytes))


def kv_reservation_from_blocks(arch: Architecture, num_gpu_blocks: ArrayLike,
                               block_size: int = VLLM_BLOCK_SIZE_TOKENS,
                               bytes_per_element: int | None = None, tensor_parallel: int = 1) -> np.ndarray:
    """Reservation reported by a trace, per rank: ``num_gpu_blocks x block_bytes`` (``bs x
    kv_bytes_per_token_per_rank`` without sliding-window layers)."""
    block_size = _check_block_size(block_size)
    blocks = _check_positive("num_gpu_blocks", num_gpu_blocks)
    return blocks * block_bytes(arch, tensor_parallel, block_size, bytes_per_element)


def implied_activation_overhead_bytes(arch: Architecture, hw: Hardware, num_gpu_blocks: ArrayLike,
                                      block_size: int = VLLM_BLOCK_SIZE_TOKENS,
                                      gpu_memory_utilization: float | None = None,
                                      total_memory_bytes: float | None = None) -> np.ndarray:
    """Overhead that makes the default reservation give `num_gpu_blocks` (`kv_cache_bytes` solved
    for it): ``gpu_memory_utilization x total - weights - num_gpu_blocks x bs x kv_bytes_per_token``."""
    utilization, total = _utilization_and_total(hw, gpu_memory_utilization, total_memory_bytes)
    return kv_cache_bytes(total, utilization, weight_bytes(arch),
                          kv_reservation_from_blocks(arch, num_gpu_blocks, block_size))


def gpu_memory_utilization_for(arch: Architecture, hw: Hardware, kv_bytes: float,
                               activation_overhead_bytes: float = DEFAULT_ACTIVATION_OVERHEAD_BYTES,
                               total_memory_bytes: float | None = None, tensor_parallel: int = 1) -> float:
    """``--gpu-memory-utilization`` that leaves exactly `kv_bytes` of KV cache on each rank:
    ``(kv_bytes + weights / t + overhead) / total``. Above 1 means it cannot fit."""
    total = float(hw.memory_bytes if total_memory_bytes is None else total_memory_bytes)
    return (float(kv_bytes) + weight_bytes(arch) / tensor_parallel + float(activation_overhead_bytes)) / total


def num_gpu_blocks_override_for(batch_cap: float, input_len: float, output_len: float,
                                block_size: int = VLLM_BLOCK_SIZE_TOKENS,
                                max_model_len: int | None = None, arch: Architecture | None = None) -> int:
    """``--num-gpu-blocks-override``: ``ceil(B_cap) x ceil((IL + OL) / bs)`` blocks, with `arch`'s
    sliding-window layers ``ceil(B_cap) x blocks_per_sequence_of(IL + OL)`` (vLLM's hybrid allocator
    counts blocks per layer group).

    vLLM refuses to start when the cache cannot hold one sequence of `max_model_len`
    tokens, so, given `max_model_len`, at least the blocks of one such sequence.
    """
    sequences = float(np.ceil(_check_positive("batch_cap", batch_cap)))
    if arch is None:
        def per_sequence(tokens: float, more: float) -> float:
            return float(blocks_per_sequence(tokens, more, block_size))
    else:
        def per_sequence(tokens: float, more: float) -> float:
            return float(blocks_per_sequence_of(arch, tokens, more, block_size))
    blocks = int(sequences * per_sequence(input_len, output_len))
    if max_model_len is not None:
        blocks = max(blocks, int(per_sequence(_check_positive("max_model_len", max_model_len), 0.0)))
    return blocks


@dataclass(frozen=True)
class StaticBatchFit:
    """Whether one static batch of ``B`` sequences of ``IL + OL`` tokens fits vLLM's default KV
    reservation on each of ``t`` tensor-parallel ranks (`static_batch_fit`); token counts per rank."""

    kv_tokens_needed: int          # B x ceil((IL + OL) / bs) x bs
    kv_capacity_tokens: int        # floor(reservation per rank / (bs x kv_bytes_per_token_per_rank)) x bs
    weights_fit: bool              # weights / t below gpu_memory_utilization x memory - overhead

    @property
    def fits(self) -> bool:
        return self.weights_fit and self.kv_tokens_needed <= self.kv_capacity_tokens


def static_batch_fit(arch: Architecture, hw: Hardware, batch_size: int, input_len: float, output_len: float,
                     tensor_parallel: int = 1,
                     activation_overhead_bytes: float = DEFAULT_ACTIVATION_OVERHEAD_BYTES,
                     block_size: int = VLLM_BLOCK_SIZE_TOKENS) -> StaticBatchFit:
    """Whether vLLM can run a static batch (`vllm bench latency`: ``B`` requests at once) as one batch.

    Per rank, the default reservation is ``kv_cache_bytes(memory, gpu_memory_utilization,
    weights / t, overhead)`` (the advisor's estimate, `default_kv_reservation_bytes`, with the
    weights split over the ``t`` ranks) and it holds ``floor(reservation / (bs x
    kv_bytes_per_token_per_rank)) x bs`` tokens; the batch needs ``B x ceil((IL + OL) / bs) x bs``.
    Where it does not fit, vLLM admits only part of the batch (or preempts as sequences grow), so
    the mean running batch is below ``B``.
    """
    block_size = _check_block_size(block_size)
    if int(tensor_parallel) != tensor_parallel or tensor_parallel < 1:
        raise AdvisorError(f"tensor_parallel must be a positive integer, got {tensor_parallel}")
    sequences = int(np.ceil(float(_check_positive("batch_size", batch_size))))
    needed = sequences * int(blocks_per_sequence(input_len, output_len, block_size)) * block_size
    reservation = kv_cache_bytes(float(hw.memory_bytes), hw.gpu_memory_utilization,
                                 weight_bytes(arch) / tensor_parallel, float(activation_overhead_bytes))
    block_bytes = block_size * kv_bytes_per_token_per_rank(arch, int(tensor_parallel))
    capacity = max(int(math.floor(reservation / block_bytes)), 0) * block_size
    return StaticBatchFit(needed, capacity, reservation > 0)


def plan_kv_memory(arch: Architecture, hw: Hardware, batch_cap: float, input_len: float,
                   output_len: float, *, num_gpu_blocks: int | None = None,
                   activation_overhead_bytes: float = DEFAULT_ACTIVATION_OVERHEAD_BYTES,
                   block_size: int = VLLM_BLOCK_SIZE_TOKENS,
                   total_memory_bytes: float | None = None,
                   max_model_len: int | None = None, tensor_parallel: int = 1) -> KvMemoryPlan:
    """Needed vs reserved KV memory for one cap on each of ``t`` tensor-parallel ranks, and the
    flags that reserve only the need (every figure is one rank's: vLLM splits the weights and the
    KV heads over the ranks and sizes each worker's cache alike).

    The reservation is ``num_gpu_blocks x bs x kv_bytes_per_token_per_rank`` when the trace
    reports `num_gpu_blocks`, else `default_kv_reservation_bytes`. Memory saved can be
    negative: the cap needs more KV than the default reservation holds.
    """
    needed = float(kv_bytes_needed(arch, batch_cap, input_len, output_len, block_size,
                                   tensor_parallel=tensor_parallel))
    if num_gpu_blocks is None:
        reservation = default_kv_reservation_bytes(arch, hw, activation_overhead_bytes,
                                                   total_memory_bytes=total_memory_bytes,
                                                   tensor_parallel=tensor_parallel)
    else:
        reservation = float(kv_reservation_from_blocks(arch, num_gpu_blocks, block_size,
                                                       tensor_parallel=tensor_parallel))
    return KvMemoryPlan(
        model=arch.name,
        batch_cap=int(np.ceil(batch_cap)),
        input_len=float(input_len),
        output_len=float(output_len),
        block_size=int(block_size),
        kv_bytes_needed=needed,
        kv_reservation_bytes=reservation,
        memory_saved_bytes=reservation - needed,
        weight_bytes=weight_bytes(arch) / tensor_parallel,
        activation_overhead_bytes=float(activation_overhead_bytes),
        gpu_memory_utilization_needed=gpu_memory_utilization_for(
            arch, hw, needed, activation_overhead_bytes, total_memory_bytes, tensor_parallel),
        num_gpu_blocks_override=num_gpu_blocks_override_for(
            batch_cap, input_len, output_len, block_size, max_model_len, arch),
        tensor_parallel=int(tensor_parallel),
    )


def kv_capacity_sequences(kv_capacity_tokens: float, input_len: float, output_len: float,
                          arch: Architecture | None = None, tensor_parallel: int = 1) -> float:
    """Sequences the KV cache holds at their full length: ``kv_capacity_tokens / (IL + OL)``; with
    `arch`'s sliding-window layers, which hold at most their window, the capacity's bytes (tokens of
    every layer) as vLLM V1's hybrid allocator fills them (`hybrid_sequences`)."""
    if arch is None or arch.sliding_window is None or not arch.n_sliding_layers:
        return float(kv_capacity_tokens) / (float(input_len) + float(output_len))
    capacity_bytes = float(kv_capacity_tokens) * _kv_bytes_per_token(arch, tensor_parallel)
    return hybrid_sequences(arch, capacity_bytes, input_len, output_len, tensor_parallel)


def kv_capacity_tokens_or_default(recorded_tokens: float, arch: Architecture, hw: Hardware,
                                  tensor_parallel: int = 1) -> tuple[float, str]:
    """``(KV capacity in tokens, where it came from)``: what the server recorded (a cache config or
    its log), else, for traces that record none, vLLM's default reservation as
    `slim.gpu.kv_memory.default_kv_reservation_bytes` estimates it for `arch` on `hw` at
    `tensor_parallel` ranks (every rank holds every token's share of the KV heads)."""
    if np.isfinite(recorded_tokens) and recorded_tokens > 0:
        return float(recorded_tokens), "traces"
    return (default_kv_reservation_bytes(arch, hw, tensor_parallel=tensor_parallel)
            / _kv_bytes_per_token(arch, tensor_parallel), "default reservation")
