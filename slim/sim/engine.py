"""Step-level simulation of a vLLM V0 server (``--enable-chunked-prefill``) under the
benchmark client at request rate ``inf``.

Scheduler, one engine step at a time (vLLM V0 ``_schedule_chunked_prefill``):

1. Decodes first: every running sequence that has finished its prompt gets one token.
   A sequence whose next token starts a new 16-token block needs a free block; when
   none is left the youngest running sequence is preempted (mode RECOMPUTE: its
   blocks are freed and it goes back to the front of the waiting queue with
   ``IL + generated`` tokens to prefill again), possibly the needy sequence itself.
2. Running sequences still in prefill get the next chunk of their prompt, oldest first,
   out of the token budget ``max_num_batched_tokens`` (512) minus the decodes.
3. Waiting requests are admitted FCFS while budget is left and ``running < max_num_seqs``;
   admission allocates blocks for the whole prompt and needs ``free - blocks >= watermark``
   (1 % of the blocks); the first request that does not fit stops admission.
   The last admitted prompt is chunked to the remaining budget.
4. A sequence whose last prompt chunk runs in a step samples its first token there; a
   sequence is freed at the end of the step that produced its ``OL``-th token.

The mean batch size is never set: it emerges from the token budget, ``max_num_seqs``
and the KV capacity. Step durations come from `slim.sim.cost.StepCostModel`, times a
per-step jitter (`slim.sim.jitter`).

The pieces, along the seams serving simulators keep apart: `slim.sim.scheduler` (queues,
blocks, per-request progress), `slim.sim.step_timer` (step durations from the cost model),
`slim.sim.metrics` (counters, scraped samples, accounting) and `slim.sim.result`; this
module runs them step by step and assembles the `SimResult`.

Speed: a stretch of pure-decode steps in which nothing can be admitted, nothing
completes before its last step and every needed block is free is advanced in one
vectorised jump (``jump=True``). Everything a stretch computes is the same
floating-point expression, evaluated in the same order, as the step-by-step path
(cumulative times via ``numpy.add.accumulate``), so both modes give identical output.

The schedule never depends on time (all requests arrive at once), which is why the
per-run `ScheduleStats` (jitter-weighted step histograms) give the exact benchmark
duration for any cost constants: `slim.sim.calibrate` fits on them without re-simulating.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slim.errors import ConfigError
from slim.gpu.kv_memory import KvCachePlan
from slim.sim.constants import SimConstants
from slim.sim.cost import StepCostModel
from slim.sim.jitter import StepJitter
from slim.sim.memory import kv_cache_plan
from slim.sim.metrics import METRICS_COLUMNS, SAMPLE_PERIOD_S, ServerMetrics
from slim.sim.result import SimResult
from slim.sim.scheduler import Request, Scheduler
from slim.sim.step_timer import StepTimer
from slim.specs.architecture import Architecture
from slim.specs.hardware import Hardware

TEST_PROMPT_AT_S = 1.0         # the client's initial single-prompt test run
CLIENT_GAP_S = 0.05            # client: end of test run -> main benchmark start
TAIL_SAMPLES = 10              # scrapes after the last completion


class ServingEngine:
    """A simulated vLLM server: its scheduler, step timer and metrics on one clock."""

    def __init__(self, cost: StepCostModel, plan: KvCachePlan, consts: SimConstants, input_len: int,
                 output_len: int, max_num_seqs: int, seed: int, jump: bool):
        self.jump = jump
        self.scheduler = Scheduler(plan, consts, input_len, output_len, max_num_seqs)
        budget = consts.max_num_batched_tokens
        self.timer = StepTimer(cost, StepJitter(seed, consts.jitter_rel_sigma), budget, max_num_seqs)
        self.metrics = ServerMetrics(self.scheduler, (budget + 1, len(self.timer.gpu_by_sampled)))
        self.now_s = 0.0
        self.step = 0

    def run_step(self) -> bool:
        """One engine step (rules 1-4 of the module docstring); False when nothing could run."""
        step, scheduler = self.step, self.scheduler
        gauges_before = (scheduler.used_blocks, len(scheduler.running), len(scheduler.waiting),
                         scheduler.preemptions)
        batch = scheduler.schedule(step, self.now_s)
        if batch.tokens == 0:
            return False
        context_tokens = scheduler.decode_context_tokens
        time = self.timer.step(step, batch, context_tokens)
        self.metrics.record_step(self.now_s, batch, time, gauges_before, context_tokens,
                                 self.timer.prefill_s_per_pair)
        end_s = self.now_s + time.duration_s
        scheduler.decode_context_tokens += batch.n_decode
        for r, chunk in batch.chunks:
            request = scheduler.requests[r]
            request.prefilled += chunk
            if request.prefilled == request.prompt_len:
                self._sample_after_prefill(r, request, step, end_s)
        self.now_s = end_s
        self._finish_decodes(step)
        self.step = step + 1
        return True

    def _sample_after_prefill(self, r: int, request: Request, step: int, end_s: float) -> None:
        """The step that computed ``r``'s last prompt chunk samples its next token."""
        metrics = self.metrics
        request.generated += 1
        metrics.generation_tokens += 1
        if request.generated == 1:
            request.first_token_at_s = end_s
        else:
            metrics.itl_after_preemption.append(end_s - request.last_token_at_s)
        if self.scheduler.end_prefill(r, step):
            request.finished_at_s = end_s
            metrics.successes += 1

    def _finish_decodes(self, step: int) -> None:
        for r in self.scheduler.finish_decodes(step):
            self.scheduler.requests[r].finished_at_s = self.now_s
            self.metrics.successes += 1

    def run_decode_stretch(self, steps: int) -> None:
        """`steps` pure-decode steps at once (see `Scheduler.decode_stretch_length`)."""
        step, scheduler = self.step, self.scheduler
        n_decode = scheduler.n_decoding
        demand = scheduler.stretch_block_demand(step, steps)
        context = scheduler.decode_context_tokens + n_decode * np.arange(steps)
        gpu, cpu, jit, durations = self.timer.decode_stretch(step, steps, n_decode, context)
        ends = np.add.accumulate(np.concatenate(([self.now_s], durations)))[1:]
        self.metrics.record_decode_stretch(ends, gpu, cpu, jit, durations, demand, context, n_decode)
        self.now_s = float(ends[-1])
        scheduler.advance_stretch(steps, demand)
        self._finish_decodes(step + steps - 1)
        self.step = step + steps

    def run_until_idle(self) -> None:
        while self.scheduler.running or self.scheduler.waiting:
            steps = self.scheduler.decode_stretch_length(self.step) if self.jump else 0
            if steps >= 2:
                self.run_decode_stretch(steps)
            elif not self.run_step():
                break


def simulate_run(arch: Architecture, hw: Hardware, sim_constants: SimConstants, il: int, ol: int,
                 max_num_seqs: int, num_prompts: int = 2000, seed: int = 0, tensor_parallel: int = 1, *,
                 jump: bool = True, include_test_prompt: bool = True, max_model_len: int | None = None,
                 record_stats: bool = False) -> SimResult:
    """Simulate one benchmark run: ``num_prompts`` requests of ``il`` prompt and ``ol`` output
    tokens sent at once (after the client's single test prompt) to a server with
    ``--max-num-seqs=max_num_seqs``.

    Returns a `SimResult`; when the configuration cannot start (weights or KV cache do not
    fit) its ``status`` is the failure code and it holds no measurements.
    """
    if il < 1 or ol < 1 or num_prompts < 1 or max_num_seqs < 1:
        raise ConfigError(f"il, ol, num_prompts and max_num_seqs must be >= 1 (got {il}, {ol}, {num_prompts}, "
                          f"{max_num_seqs})")
    if max_num_seqs > sim_constants.max_num_batched_tokens:
        raise ConfigError(f"max_num_seqs={max_num_seqs} exceeds max_num_batched_tokens="
                          f"{sim_constants.max_num_batched_tokens}: vLLM refuses this configuration")
    plan = kv_cache_plan(arch, hw, sim_constants, max_num_seqs, tensor_parallel, max_model_len)
    result = SimResult(arch.name, il, ol, max_num_seqs, num_prompts, tensor_parallel, seed, plan,
                       status=plan.failure or "ok")
    if plan.failure:
        return result
    cost = StepCostModel(arch, hw, sim_constants, tensor_parallel)
    engine = ServingEngine(cost, plan, sim_constants, il, ol, max_num_seqs, seed, jump)
    metrics, scheduler = engine.metrics, engine.scheduler
    if include_test_prompt:
        metrics.record_samples_before(TEST_PROMPT_AT_S)
        engine.now_s = max(engine.now_s, TEST_PROMPT_AT_S)
        scheduler.submit(1)
        engine.run_until_idle()
        start = engine.now_s + CLIENT_GAP_S
    else:
        start = TEST_PROMPT_AT_S
    metrics.record_samples_before(start)
    engine.now_s = start
    metrics.start_window(record_stats)
    ids = scheduler.submit(num_prompts)
    engine.run_until_idle()
    _fill_result(result, engine, ids, start, include_test_prompt)
    return result


def _fill_result(result: SimResult, engine: ServingEngine, ids: list[int], start_s: float,
                 include_test_prompt: bool) -> None:
    """The benchmark's view of the main window (requests `ids`, sent at `start_s`)."""
    metrics, requests = engine.metrics, engine.scheduler.requests
    finish = np.asarray([requests[r].finished_at_s for r in ids])
    done = np.isfinite(finish)
    end = float(np.max(finish[done])) if done.any() else start_s
    metrics.record_samples_before(end + SAMPLE_PERIOD_S * TAIL_SAMPLES)
    itl = np.repeat(np.asarray(metrics.itl_values), np.asarray(metrics.itl_weights, dtype=np.int64))
    if include_test_prompt and result.output_len > 1:
        itl = itl[result.output_len - 1:]                 # the test prompt's own inter-token gaps
    result.benchmark_start_s = start_s
    result.duration_s = end - start_s
    result.completed = int(done.sum())
    result.ttft_s = np.asarray([requests[r].first_token_at_s for r in ids])[done] - start_s
    result.e2e_s = finish[done] - start_s
    result.itl_s = np.concatenate([itl, np.asarray(metrics.itl_after_preemption)])
    result.samples = pd.DataFrame(metrics.samples, columns=list(METRICS_COLUMNS))
    result.num_preemptions = engine.scheduler.preemptions
    result.num_steps = sum(metrics.step_counts.values())
    result.prefill_time_s = metrics.prefill_time_s
    result.decode_time_s = metrics.decode_time_s
    result.step_counts = dict(metrics.step_counts)
    result.stats = metrics.stats if metrics.recording else None
