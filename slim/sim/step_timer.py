"""How long one engine step takes: `StepCostModel`'s cost as lookup tables for the step loop,
times the step's jitter (`slim.sim.jitter`). A stretch of pure-decode steps is timed as one
vectorised array, with the same floating-point expressions as step by step."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from slim.sim.cost import StepCostModel
from slim.sim.jitter import StepJitter
from slim.sim.scheduler import ScheduledBatch


class StepTime(NamedTuple):
    """One step's cost: GPU seconds (of which `fixed_s` do not depend on the context or the
    prompt pairs), CPU-side overhead seconds, its jitter factor and its wall duration."""

    fixed_s: float
    gpu_s: float
    cpu_s: float
    jitter: float
    duration_s: float


class StepTimer:
    """Per-run lookup tables of the step cost (see `StepCostModel.gpu_fixed_table`)."""

    def __init__(self, cost: StepCostModel, jitter: StepJitter, token_budget: int, max_num_seqs: int):
        self.jitter = jitter
        self.gpu_by_tokens, self.gpu_by_sampled = cost.gpu_fixed_table(token_budget,
                                                                       max(max_num_seqs, token_budget))
        self.cpu_by_sequences = cost.overhead_s(np.arange(max_num_seqs + 1, dtype=float)).tolist()
        self.attention_s_per_context_token = cost.attention_s_per_context_token
        self.prefill_s_per_pair = cost.prefill_s_per_pair

    def step(self, step: int, batch: ScheduledBatch, decode_context_tokens: int) -> StepTime:
        """``duration = (gpu + cpu) x jitter_k`` with ``gpu = fixed(tokens, sampled)
        + context x attention_s_per_token + pairs x prefill_s_per_pair``."""
        fixed = self.gpu_by_tokens[batch.tokens] + self.gpu_by_sampled[batch.sampled]
        gpu = fixed + decode_context_tokens * self.attention_s_per_context_token \
            + batch.attention_pairs * self.prefill_s_per_pair
        cpu = self.cpu_by_sequences[batch.sequences]
        jit = self.jitter.factor(step)
        return StepTime(fixed, gpu, cpu, jit, (gpu + cpu) * jit)

    def decode_stretch(self, step: int, steps: int, n_decode: int,
                       context_tokens: np.ndarray) -> tuple[np.ndarray, float, np.ndarray, np.ndarray]:
        """(GPU seconds, CPU seconds, jitter factors, durations) of `steps` pure-decode steps of
        `n_decode` sequences from `step` on, the context of each step in `context_tokens`."""
        fixed = self.gpu_by_tokens[n_decode] + self.gpu_by_sampled[n_decode]
        gpu = fixed + context_tokens * self.attention_s_per_context_token
        cpu = self.cpu_by_sequences[n_decode]
        jit = self.jitter.factors(step, steps)
        return gpu, cpu, jit, (gpu + cpu) * jit
