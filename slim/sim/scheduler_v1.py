"""vLLM V1's scheduler (``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``), one engine
step at a time, with the same interface as V0's (`slim.sim.scheduler.Scheduler`), whose request
bookkeeping it shares (decodes binned by block phase, completions by step, pure-decode stretches).

V1 has no prefill or decode phase: each step has one token budget (``max_num_batched_tokens``) and
every request is asked for the tokens it lacks. As read in vLLM 0.11.0-0.18.0 (0.8.5-0.10.x have
the same ``if not preempted_reqs``, ``self.running.pop()`` and null block; `slim.sim.vllm_defaults`
cites the versions):

1. Running requests first, in admission order, while budget is left: each is given
   ``min(tokens it lacks, budget left)`` (a decode one token, a partly prefilled prompt the rest
   of it) and the KV blocks those tokens need (``KVCacheManager.allocate_slots``: blocks for
   ``computed + new`` tokens, granted only while the free blocks cover them, no watermark).
   When they are not free, the most recently admitted running request is preempted
   (``self.running.pop()``: recompute, its blocks freed, back to the front of the waiting queue),
   until the blocks are free or the request itself was preempted, which ends the step's
   running requests.
2. Only if nothing was preempted in this step, waiting requests are admitted FCFS while budget
   is left and fewer than ``max_num_seqs`` run: each gets ``min(its tokens, budget left)``
   (a resumed request recomputes its prompt and the tokens it had generated) and blocks for
   that chunk only; the first one whose blocks are not free stops admission.
3. A request whose last prompt chunk runs samples a token in that step (as V0).

A prompt chunked to what the budget leaves uses it all, so no request is admitted after it in
that step: at most one running request is partly prefilled, and it is the last admitted. The
decodes before it therefore always run (``max_num_seqs <= max_num_batched_tokens``, which vLLM
enforces), and step 1 is: every decode, then the partial prompt's next chunk.

Blocks are held per computed token, not per prompt as V0 allocates them at admission: a
prefilling request holds ``ceil(prefilled / block_size)`` blocks, a decoding one
``ceil((tokens - 1) / block_size)`` (the token sampled last is computed next step). One block of
the cache is vLLM's null block (``BlockPool.null_block``), never handed out.

Async scheduling (`SimConstants.async_scheduling`, vLLM's default from 0.14): the engine keeps
two steps in flight, so step ``n + 1`` is scheduled before step ``n``'s output is processed. A
request that produced its last token in step ``n`` still holds its seat and its blocks while
step ``n + 1`` is scheduled (it is given no token: ``AsyncScheduler``'s check that its last token
is on the way) and is freed after. Should that leave nothing to run, the engine processes the
output and schedules again, so no step is lost.
"""

from __future__ import annotations

from slim.gpu.kv_memory import KvCachePlan
from slim.sim.constants import SimConstants
from slim.sim.scheduler import ScheduledBatch, Scheduler


class SchedulerV1(Scheduler):
    """Queues, KV blocks and per-request progress of one simulated vLLM V1 server."""

    def __init__(self, plan: KvCachePlan, consts: SimConstants, input_len: int, output_len: int,
                 max_num_seqs: int):
        super().__init__(plan, consts, input_len, output_len, max_num_seqs)
        self.num_blocks = plan.num_gpu_blocks - 1      # the null block
        self.watermark_blocks = 0
        self.async_scheduling = consts.async_scheduling
        self.finishing: list[tuple[int, int]] = []     # (request id, blocks) of the requests that just finished

    # -- preemption -------------------------------------------------------------------------
    def _preempt(self, r: int, step: int, now_s: float) -> None:
        """Free ``r``'s blocks and reset it for recompute (``Scheduler._preempt_request``)."""
        request = self.requests[r]
        if r in self.prefilling:
            # V0's accounting frees a whole prompt's blocks; V1 holds only the computed chunks'.
            self.used_blocks -= self._blocks_of(request.prefilled) - self._blocks_of(request.prompt_len)
        super()._preempt(r, step, now_s)

    # -- one step -----------------------------------------------------------------------------
    def schedule(self, step: int, now_s: float) -> ScheduledBatch:
        """Rules 1-3 of the module docstring; with async scheduling, the requests that finished
        in the previous step are freed once this step is scheduled."""
        batch = self._schedule(step, now_s)
        if self.finishing:
            self._release_finishing()
            if batch.tokens == 0:
                batch = self._schedule(step, now_s)
        return batch

    def _schedule(self, step: int, now_s: float) -> ScheduledBatch:
        preempted = self._reserve_decode_blocks(step, now_s)
        n_decode = self.n_decoding
        budget = self.token_budget - n_decode
        requests = self.requests
        chunks: list[tuple[int, int]] = []
        # The partial prompt runs after the decodes (module docstring); a decode that had to
        # preempt itself was the youngest running request, so nothing is left to prefill then.
        for r in list(self.prefilling):
            if budget <= 0 or r not in self.running:
                break
            request = requests[r]
            c = min(request.prompt_len - request.prefilled, budget)
            blocks = self._blocks_of(request.prefilled + c) - self._blocks_of(request.prefilled)
            if not self._preempt_for(r, blocks, step, now_s, preempted):
                break
            self.used_blocks += blocks
            chunks.append((r, c))
            budget -= c
        waiting, running = self.waiting, self.running
        seats = self.max_num_seqs - len(self.finishing)
        while not preempted and budget > 0 and waiting and len(running) < seats:
            r = waiting[0]
            request = requests[r]
            c = min(request.prompt_len, budget)
            blocks = self._blocks_of(c)
            if blocks > self.num_blocks - self.used_blocks:
                break
            waiting.popleft()
            self.used_blocks += blocks
            running[r] = None
            self.prefilling[r] = None
            chunks.append((r, c))
            budget -= c
        return self._batch(n_decode, chunks, budget, preempted)

    # -- the end of a request -------------------------------------------------------------------
    def end_prefill(self, r: int, step: int) -> bool:
        finished = super().end_prefill(r, step)
        if finished and self.async_scheduling:
            self._hold(r, self._blocks_of(self.requests[r].prompt_len))
        return finished

    def finish_decodes(self, step: int) -> list[int]:
        finished = super().finish_decodes(step)
        if self.async_scheduling:
            for r in finished:
                request = self.requests[r]
                self._hold(r, self._blocks_of(request.decode_start_tokens + (step - request.decode_start_step) - 1))
        return finished

    def _hold(self, r: int, blocks: int) -> None:
        """Keep a finished request's seat and blocks until the next step is scheduled (async)."""
        self.used_blocks += blocks
        self.finishing.append((r, blocks))

    def _release_finishing(self) -> None:
        self.used_blocks -= sum(blocks for _, blocks in self.finishing)
        self.finishing.clear()

    def settle(self) -> None:
        """The server is idle: the outputs still in flight are processed and their requests freed."""
        self._release_finishing()

    # -- pure-decode stretches -----------------------------------------------------------------
    def decode_stretch_length(self, step: int) -> int:
        if self.finishing:
            return 0
        return super().decode_stretch_length(step)

    def _admits_during_stretch(self, free_after_decodes: int) -> bool:
        """Whether the first waiting request would be admitted now: a seat, budget after the
        decodes, and free blocks for the chunk the budget leaves it."""
        budget = self.token_budget - self.n_decoding
        if not self.waiting or len(self.running) >= self.max_num_seqs or budget <= 0:
            return False
        chunk = min(self.requests[self.waiting[0]].prompt_len, budget)
        return self._blocks_of(chunk) <= free_after_decodes
