"""KV-cache capacity of a simulated vLLM server: vLLM's reservation model
(`slim.gpu.kv_memory.plan_kv_cache`) with the memory profile of the public traces' server
logs (`SimConstants.memory_profile`)."""

from __future__ import annotations

from slim.gpu.kv_memory import KvCachePlan, plan_kv_cache
from slim.sim.constants import SimConstants
from slim.specs.architecture import Architecture
from slim.specs.hardware import Hardware

__all__ = ["KvCachePlan", "kv_cache_plan"]


def kv_cache_plan(arch: Architecture, hw: Hardware, consts: SimConstants, max_num_seqs: int,
                  tensor_parallel: int = 1, max_model_len: int | None = None) -> KvCachePlan:
    """KV blocks per rank after weights and the profiling run; `max_model_len` defaults to
    ``consts.default_max_model_len``."""
    return plan_kv_cache(arch, hw, consts.memory_profile, max_num_seqs,
                         max_model_len or consts.default_max_model_len, tensor_parallel)
