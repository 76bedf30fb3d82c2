"""KV-cache capacity of a simulated vLLM server, following vLLM V0's memory profiling.

Per tensor-parallel rank (the values the server log prints)::

    total_gpu_memory = memory_bytes - device_reserved
    peak_torch       = weights / t + activations(profile run)
    activations      = logits_bytes x max_num_seqs x vocab + act_bytes x max_num_batched_tokens x D
    kv_cache_size    = gpu_memory_utilization x total_gpu_memory - peak_torch - non_torch
    num_gpu_blocks   = floor(kv_cache_size / (block_size x kv_bytes_per_token / t))

The profile run processes ``max_num_batched_tokens`` tokens split over ``max_num_seqs``
sequences, and the sampler keeps several fp32 copies of every sequence's logits, which
is why the real logs show a KV cache that shrinks slightly as ``--max-num-seqs`` grows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slim.sim.constants import SimConstants
from slim.sim.cost import kv_bytes_per_token_per_rank
from slim.specs.architecture import Architecture
from slim.specs.hardware import Hardware


@dataclass(frozen=True)
class KvCachePlan:
    """Memory plan of one rank; ``failure`` names vLLM's startup error when it cannot serve."""

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


def kv_cache_plan(arch: Architecture, hw: Hardware, consts: SimConstants, max_num_seqs: int,
                  tensor_parallel: int = 1, max_model_len: int | None = None) -> KvCachePlan:
    """KV blocks per rank after weights and the profiling run (module docstring)."""
    max_model_len = max_model_len or consts.default_max_model_len
    total = hw.memory_bytes - consts.device_reserved_bytes
    weights = arch.weight_bytes() / tensor_parallel
    activations = (consts.logits_bytes_per_vocab_entry_per_seq * max_num_seqs * arch.vocab_size
                   + consts.activation_bytes_per_token_per_hidden * consts.max_num_batched_tokens * arch.hidden_dim)
    peak = weights + activations
    kv_bytes = hw.gpu_memory_utilization * total - peak - consts.non_torch_memory_bytes
    block_bytes = consts.block_size * kv_bytes_per_token_per_rank(arch, tensor_parallel)
    blocks = max(int(math.floor(kv_bytes / block_bytes)), 0)
    if weights >= total:
        failure = "cuda_oom"
    elif blocks <= 0:
        failure = "no_cache_memory"
    elif blocks * consts.block_size < max_model_len:
        failure = "max_model_len"
    else:
        failure = None
    return KvCachePlan(total, weights, peak, kv_bytes, blocks, consts.block_size, max_model_len, failure)


