"""vLLM V0's scheduler with chunked prefill (``_schedule_chunked_prefill``), one engine step at a
time: which requests run, how many prompt tokens each computes, and the KV blocks they hold.
The rules are listed in `slim.sim.engine`'s module docstring.

Block accounting is exact without per-sequence block lists: a decoding sequence needs a new
block at the steps where its token count crosses a multiple of the block size, so the
decodes are binned by that phase (``step mod block_size``) and a step's block demand is the
size of its bin.
"""

from __future__ import annotations

import heapq
import itertools
from bisect import bisect_right
from collections import deque
from typing import NamedTuple

from slim.gpu.kv_memory import KvCachePlan
from slim.sim.constants import SimConstants

MAX_STRETCH_STEPS = 1 << 16
"""The longest pure-decode stretch advanced in one vectorised jump."""

NOT_YET = float("nan")
"""A request time that has not happened."""


class Request:
    """One request's progress. Times are on the server clock (NaN until they happen)."""

    __slots__ = ("prompt_len", "prefilled", "generated", "decode_start_step", "decode_start_tokens",
                 "first_token_at_s", "finished_at_s", "last_token_at_s")

    def __init__(self, prompt_len: int):
        self.prompt_len = prompt_len          # tokens to prefill: IL, or IL + generated after a preemption
        self.prefilled = 0                    # prompt tokens computed so far
        self.generated = 0                    # output tokens sampled so far
        self.decode_start_step = -1           # step that sampled the token before its first decode
        self.decode_start_tokens = 0          # IL + generated at that step
        self.first_token_at_s = NOT_YET
        self.finished_at_s = NOT_YET
        self.last_token_at_s = NOT_YET        # when it was preempted, for the next inter-token gap


class ScheduledBatch(NamedTuple):
    """What one step runs: every decoding sequence and the prompt chunks, and the totals the
    step's cost and accounting read."""

    n_decode: int                        # decoding sequences, one token each
    chunks: list[tuple[int, int]]        # (request id, prompt tokens computed this step)
    prefill_tokens: int
    attention_pairs: int                 # causal (query, key) pairs of the prompt chunks
    n_finishing_prefill: int             # chunks that complete their prompt (and sample a token)
    tokens: int                          # n_decode + prefill_tokens
    sequences: int                       # n_decode + len(chunks)
    sampled: int                         # n_decode + n_finishing_prefill
    kind: str                            # "decode_only", "prefill_only" or "mixed"


class StretchBlockDemand:
    """The new KV blocks a stretch of pure-decode steps needs, cumulated step by step.

    The decodes' demand repeats with the block-size period (`Scheduler`'s module docstring), so the
    running totals over one period give the total after any number of steps without an array as
    long as the stretch."""

    def __init__(self, period_totals: list[int]) -> None:
        self.period_totals = period_totals
        """The cumulative demand after 1, 2, ..., block-size steps."""

    def after(self, steps: int) -> int:
        """The blocks needed by the first `steps` steps."""
        periods, rest = divmod(steps, len(self.period_totals))
        return periods * self.period_totals[-1] + (self.period_totals[rest - 1] if rest else 0)

    def affordable_steps(self, free: int) -> int:
        """How many steps the demand stays within `free` blocks (`MAX_STRETCH_STEPS` when it never
        grows): the number of steps whose cumulative demand is at most `free`."""
        period = self.period_totals
        if period[-1] == 0:
            return MAX_STRETCH_STEPS
        periods, left = divmod(free, period[-1])
        return periods * len(period) + bisect_right(period, left)


class Scheduler:
    """Queues, KV blocks and per-request progress of one simulated server."""

    def __init__(self, plan: KvCachePlan, consts: SimConstants, input_len: int, output_len: int,
                 max_num_seqs: int):
        self.input_len, self.output_len, self.max_num_seqs = input_len, output_len, max_num_seqs
        self.block_size = consts.block_size
        self.token_budget = consts.max_num_batched_tokens
        self.num_blocks = plan.num_gpu_blocks
        self.watermark_blocks = int(consts.watermark_fraction * plan.num_gpu_blocks)
        self.used_blocks = 0
        self.requests: list[Request] = []
        self.running: dict[int, None] = {}        # request ids in admission order (an ordered set)
        self.prefilling: dict[int, None] = {}     # the running ones still in prefill
        self.waiting: deque[int] = deque()
        self.ignored: list[int] = []              # prompts that can never fit (AllocStatus.NEVER)
        self.n_decoding = 0
        self.decode_context_tokens = 0            # sum over decoding sequences of their tokens
        self.block_demand_by_phase = [0] * self.block_size
        self.completions_at_step: dict[int, list[int]] = {}
        self.completion_heap: list[int] = []
        self.preemptions = 0
        self.async_scheduling = False             # V0 processes each step's output before the next

    def submit(self, count: int) -> list[int]:
        """Queue `count` new requests of ``input_len`` prompt tokens; their ids."""
        ids = list(range(len(self.requests), len(self.requests) + count))
        input_len = self.input_len
        self.requests.extend([Request(input_len) for _ in ids])
        self.waiting.extend(ids)
        return ids

    def _blocks_of(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def _decode_phase(self, request: Request) -> int:
        return (request.decode_start_step + 2 - request.decode_start_tokens) % self.block_size

    # -- preemption -------------------------------------------------------------------------
    def _preempt(self, r: int, step: int, now_s: float) -> None:
        """Free ``r``'s blocks and reset it for recompute (vLLM PreemptionMode.RECOMPUTE)."""
        request = self.requests[r]
        if r in self.prefilling:
            del self.prefilling[r]
            self.used_blocks -= self._blocks_of(request.prompt_len)
        else:
            tokens = request.decode_start_tokens + (step - 1 - request.decode_start_step)
            self.used_blocks -= self._blocks_of(tokens - 1)
            self.n_decoding -= 1
            self.decode_context_tokens -= tokens
            self.block_demand_by_phase[self._decode_phase(request)] -= 1
            finish_step = request.decode_start_step + self.output_len - (request.decode_start_tokens
                                                                          - self.input_len)
            self.completions_at_step[finish_step].remove(r)
            request.generated = tokens - self.input_len
            request.prompt_len = tokens
            request.last_token_at_s = now_s
        del self.running[r]
        request.prefilled = 0
        self.preemptions += 1

    def _allocate_decode_blocks_with_preemption(self, step: int, now_s: float) -> list[int]:
        # A preemption changes no other request's phase and admits nothing, so the decodes that
        # start a block now are known before the first one is served.
        size, requests, prefilling = self.block_size, self.requests, self.prefilling
        phase_now = step % size
        needy = [r for r in self.running if r not in prefilling
                 and (requests[r].decode_start_step + 2 - requests[r].decode_start_tokens) % size == phase_now]
        preempted: list[int] = []
        running = self.running
        for r in needy:
            if r not in running:
                continue
            self._preempt_for(r, 1, step, now_s, preempted)
            if r in running:
                self.used_blocks += 1
        return preempted

    def _preempt_for(self, r: int, blocks: int, step: int, now_s: float, preempted: list[int]) -> bool:
        """Preempt from the youngest running request until `blocks` blocks are free, appending each
        victim to `preempted`; False when ``r`` itself had to go."""
        while self.num_blocks - self.used_blocks < blocks:
            victim = next(reversed(self.running))
            self._preempt(victim, step, now_s)
            preempted.append(victim)
            if victim == r:
                return False
        return True

    def _reserve_decode_blocks(self, step: int, now_s: float) -> list[int]:
        """The blocks this step's decodes start, preempting the youngest where none is free; the
        requests preempted."""
        need = self.block_demand_by_phase[step % self.block_size]
        if need > self.num_blocks - self.used_blocks:
            return self._allocate_decode_blocks_with_preemption(step, now_s)
        self.used_blocks += need
        return []

    def _batch(self, n_decode: int, chunks: list[tuple[int, int]], budget: int,
               preempted: list[int]) -> ScheduledBatch:
        """The step's batch: `n_decode` decodes and the prompt `chunks` (request, tokens) within the
        budget left; the `preempted` requests go back to the front of the queue."""
        if preempted:
            self.waiting.extendleft(preempted)
        requests = self.requests
        pairs = 0
        finishing = 0
        for r, c in chunks:
            request = requests[r]
            done = request.prefilled
            pairs += c * (2 * done + c + 1) // 2
            if done + c == request.prompt_len:
                finishing += 1
        prefill_tokens = self.token_budget - n_decode - budget
        if n_decode:
            kind = "mixed" if prefill_tokens else "decode_only"
        else:
            kind = "prefill_only"
        return ScheduledBatch(n_decode, chunks, prefill_tokens, pairs, finishing, n_decode + prefill_tokens,
                              n_decode + len(chunks), n_decode + finishing, kind)

    # -- one step -----------------------------------------------------------------------------
    def schedule(self, step: int, now_s: float) -> ScheduledBatch:
        """Rules 1-3: blocks for every decode (preempting the youngest when none is free), the
        next chunks of running prefills, then FCFS admission while budget and blocks last."""
        preempted = self._reserve_decode_blocks(step, now_s)
        n_decode = self.n_decoding
        budget = self.token_budget - n_decode
        requests, prefilling = self.requests, self.prefilling
        chunks: list[tuple[int, int]] = []
        for r in prefilling:
            if budget <= 0:
                break
            request = requests[r]
            c = min(request.prompt_len - request.prefilled, budget)
            chunks.append((r, c))
            budget -= c
        waiting, running = self.waiting, self.running
        if budget > 0 and waiting and len(running) < self.max_num_seqs:
            num_blocks, watermark, block_size = self.num_blocks, self.watermark_blocks, self.block_size
            while budget > 0 and waiting and len(running) < self.max_num_seqs:
                r = waiting[0]
                request = requests[r]
                blocks = -(-request.prompt_len // block_size)
                if num_blocks - blocks < watermark:                      # AllocStatus.NEVER: vLLM ignores it
                    waiting.popleft()
                    self.ignored.append(r)
                    continue
                if num_blocks - self.used_blocks - blocks < watermark:   # AllocStatus.LATER
                    break
                waiting.popleft()
                self.used_blocks += blocks
                running[r] = None
                prefilling[r] = None
                c = min(request.prompt_len, budget)
                chunks.append((r, c))
                budget -= c
        return self._batch(n_decode, chunks, budget, preempted)

    def end_prefill(self, r: int, step: int) -> bool:
        """``r``'s prompt is computed and its next token was sampled in `step` (rule 4): it
        finishes if that was its last token (True), else it starts decoding."""
        del self.prefilling[r]
        request = self.requests[r]
        generated = request.generated
        if generated >= self.output_len:
            self.used_blocks -= -(-request.prompt_len // self.block_size)
            del self.running[r]
            return True
        tokens = self.input_len + generated
        request.decode_start_step = step
        request.decode_start_tokens = tokens
        self.block_demand_by_phase[(step + 2 - tokens) % self.block_size] += 1
        self.n_decoding += 1
        self.decode_context_tokens += tokens
        finish_step = step + self.output_len - generated
        finishing_then = self.completions_at_step.get(finish_step)
        if finishing_then is None:
            self.completions_at_step[finish_step] = [r]
            heapq.heappush(self.completion_heap, finish_step)
        else:
            finishing_then.append(r)
        return False

    def finish_decodes(self, step: int) -> list[int]:
        """Free the sequences whose last token was produced in `step` (rule 4); their ids."""
        finished = self.completions_at_step.pop(step, None)
        if not finished:
            return []
        requests, running, by_phase = self.requests, self.running, self.block_demand_by_phase
        block_size, output_len = self.block_size, self.output_len
        freed_blocks = context_tokens = 0
        for r in finished:
            request = requests[r]
            start_step, start_tokens = request.decode_start_step, request.decode_start_tokens
            tokens = start_tokens + (step - start_step)
            freed_blocks += -(-(tokens - 1) // block_size)
            context_tokens += tokens
            by_phase[(start_step + 2 - start_tokens) % block_size] -= 1
            del running[r]
            request.generated = output_len
        self.used_blocks -= freed_blocks
        self.decode_context_tokens -= context_tokens
        self.n_decoding -= len(finished)
        return finished

    def settle(self) -> None:
        """The server is idle; V0 has nothing left in flight."""

    # -- pure-decode stretches -----------------------------------------------------------------
    def _next_completion_step(self) -> int:
        heap = self.completion_heap
        while heap and not self.completions_at_step.get(heap[0]):
            heapq.heappop(heap)
        return heap[0] if heap else -1

    def decode_stretch_length(self, step: int) -> int:
        """How many steps from `step` on are pure decode with nothing to admit, no completion
        before the last of them and every needed block free (0 when fewer than two)."""
        if self.prefilling or self.n_decoding == 0:
            return 0
        free = self.num_blocks - self.used_blocks
        need = self.block_demand_by_phase[step % self.block_size]
        if need > free:
            return 0
        if self._admits_during_stretch(free - need):
            return 0
        finish = self._next_completion_step()
        limit = min(finish - step + 1, MAX_STRETCH_STEPS) if finish >= 0 else MAX_STRETCH_STEPS
        if limit < 2:
            return 0
        return min(limit, self._affordable_steps(step, free))

    def _admits_during_stretch(self, free_after_decodes: int) -> bool:
        """Whether the first waiting request would be admitted now, or dropped as one that can
        never fit (either ends a stretch); with `free_after_decodes` blocks left after the
        decodes' blocks. Fewer free blocks later in the stretch admit no more."""
        if not self.waiting or len(self.running) >= self.max_num_seqs or self.n_decoding >= self.token_budget:
            return False
        blocks = self._blocks_of(self.requests[self.waiting[0]].prompt_len)
        return self.num_blocks - blocks < self.watermark_blocks or free_after_decodes - blocks >= self.watermark_blocks

    def _affordable_steps(self, step: int, free: int) -> int:
        """How many steps from `step` on the decodes' cumulative block demand stays within `free`
        blocks (`StretchBlockDemand.affordable_steps`)."""
        return self.stretch_block_demand(step).affordable_steps(free)

    def stretch_block_demand(self, step: int) -> StretchBlockDemand:
        """The new blocks the decodes need over the steps from `step` on, cumulated."""
        start = step % self.block_size
        by_phase = self.block_demand_by_phase
        return StretchBlockDemand(list(itertools.accumulate(by_phase[start:] + by_phase[:start])))

    def advance_stretch(self, steps: int, demand: StretchBlockDemand) -> None:
        """Hold the stretch's blocks and its decode tokens (`demand` from `stretch_block_demand`)."""
        self.used_blocks += demand.after(steps)
        self.decode_context_tokens += self.n_decoding * steps
