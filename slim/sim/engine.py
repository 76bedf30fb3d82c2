"""Step-level simulation of a vLLM server under the benchmark client at request rate ``inf``:
V0 with ``--enable-chunked-prefill`` (`slim.sim.scheduler`, the default) or V1
(`slim.sim.scheduler_v1`), as `SimConstants.scheduler_engine` says or a run's vLLM version
selects (`slim.sim.vllm_defaults`).

V0's scheduler, one engine step at a time (vLLM V0 ``_schedule_chunked_prefill``):

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

V1 shares rule 4 and replaces rules 1-3 by one token budget for every running request, then
FCFS admission with blocks for the admitted chunk only (`slim.sim.scheduler_v1`).

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

from dataclasses import replace

import numpy as np
import pandas as pd

from slim.errors import ConfigError
from slim.gpu.kv_memory import KvCachePlan, window_equivalent_blocks
from slim.sim.constants import SimConstants
from slim.sim.cost import StepCostModel
from slim.sim.jitter import StepJitter
from slim.sim.memory import kv_cache_plan
from slim.sim.metrics import METRICS_COLUMNS, SAMPLE_PERIOD_S, ServerMetrics, running_totals
from slim.sim.result import SimResult
from slim.sim.scheduler import MAX_STRETCH_STEPS, Request, Scheduler
from slim.sim.scheduler_v1 import SchedulerV1
from slim.sim.step_timer import StepTimer
from slim.sim.vllm_defaults import constants_for_vllm_version
from slim.specs.architecture import Architecture
from slim.specs.hardware import Hardware

TEST_PROMPT_AT_S = 1.0         # the client's initial single-prompt test run
CLIENT_GAP_S = 0.05            # client: end of test run -> main benchmark start
TAIL_SAMPLES = 10              # scrapes after the last completion

SCHEDULERS: dict[str, type[Scheduler]] = {"v0": Scheduler, "v1": SchedulerV1}
"""The scheduler of each engine (`slim.sim.constants.ENGINES`)."""


class ServingEngine:
    """A simulated vLLM server: its scheduler, step timer and metrics on one clock."""

    def __init__(self, cost: StepCostModel, plan: KvCachePlan, consts: SimConstants, input_len: int,
                 output_len: int, max_num_seqs: int, seed: int, jump: bool):
        self.jump = jump
        self.scheduler = SCHEDULERS[consts.scheduler_engine](plan, consts, input_len, output_len, max_num_seqs)
        budget = consts.max_num_batched_tokens
        self.timer = StepTimer(cost, StepJitter(seed, consts.jitter_rel_sigma), budget, max_num_seqs)
        self.metrics = ServerMetrics(self.scheduler, (budget + 1, len(self.timer.gpu_by_sampled)))
        self.now_s = 0.0
        self.step = 0

    def run_step(self) -> bool:
        """One engine step (rules 1-4 of the module docstring); False when nothing could run."""
        step, scheduler, now_s = self.step, self.scheduler, self.now_s
        gauges_before = (scheduler.used_blocks, len(scheduler.running), len(scheduler.waiting),
                         scheduler.preemptions)
        batch = scheduler.schedule(step, now_s)
        if batch.tokens == 0:
            return False
        context_tokens = scheduler.decode_context_tokens
        timer = self.timer
        time = timer.step(step, batch, context_tokens)
        self.metrics.record_step(now_s, batch, time, gauges_before, context_tokens, timer.prefill_s_per_pair)
        end_s = now_s + time.duration_s
        scheduler.decode_context_tokens = context_tokens + batch.n_decode
        requests = scheduler.requests
        for r, chunk in batch.chunks:
            request = requests[r]
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
        finished = self.scheduler.finish_decodes(step)
        if finished:
            requests, now_s = self.scheduler.requests, self.now_s
            for r in finished:
                requests[r].finished_at_s = now_s
            self.metrics.successes += len(finished)

    def run_decode_stretch(self, steps: int) -> None:
        """`steps` pure-decode steps at once (see `Scheduler.decode_stretch_length`)."""
        step, scheduler = self.step, self.scheduler
        n_decode = scheduler.n_decoding
        demand = scheduler.stretch_block_demand(step)
        context = scheduler.decode_context_tokens + n_decode * np.arange(steps)
        gpu, cpu, jit, durations = self.timer.decode_stretch(step, steps, n_decode, context)
        ends = running_totals(self.now_s, durations.copy())
        self.metrics.record_decode_stretch(ends, gpu, cpu, jit, durations, demand, context, n_decode)
        self.now_s = float(ends[-1])
        scheduler.advance_stretch(steps, demand)
        self._finish_decodes(step + steps - 1)
        self.step = step + steps

    def run_until_idle(self) -> None:
        scheduler, jump = self.scheduler, self.jump
        while scheduler.running or scheduler.waiting:
            if jump and not scheduler.running and self.run_identical_waves():
                continue
            steps = scheduler.decode_stretch_length(self.step) if jump else 0
            if steps >= 2:
                self.run_decode_stretch(steps)
            elif not self.run_step():
                break
        scheduler.settle()

    # -- identical waves -----------------------------------------------------------------------
    def _wave_fits(self) -> bool:
        """Whether the next `max_num_seqs` waiting requests form a wave: with nothing running,
        all of them are admitted and prefilled in one step and decode together, without a
        preemption, to finish in one step (``B IL <= budget``, their KV blocks always free)."""
        scheduler = self.scheduler
        batch, il, ol = scheduler.max_num_seqs, scheduler.input_len, scheduler.output_len
        if scheduler.running or len(scheduler.waiting) < 2 * batch or ol < 3 or ol - 1 > MAX_STRETCH_STEPS:
            return False
        if scheduler.async_scheduling:
            return False   # a wave's requests hold their seats into the next wave's first step
        if scheduler.preemptions or scheduler.used_blocks:
            return False   # any recompute in the queue takes the exact path
        if batch * il > scheduler.token_budget:
            return False
        held = batch * -(-(il + ol) // scheduler.block_size)
        return scheduler.num_blocks - held >= scheduler.watermark_blocks

    def run_identical_waves(self) -> bool:
        """Advance every wave but the last one at once; False (nothing done) unless `_wave_fits`.

        A wave is one prefill step that admits and prefills ``B`` requests, then a stretch of
        ``OL - 1`` decode steps after which all of them finish, leaving the scheduler as it
        found it. Since the schedule does not depend on time, all such waves are the same
        steps; only their jitter differs. They are laid out as arrays and every counter,
        sample and request time is computed with the same floating-point expressions, in the
        same order, as `run_step` and `run_decode_stretch` would (see
        `tests/test_sim.py::test_jump_equals_step_by_step`). The last wave runs step by step,
        so that what follows it (a shorter wave, the end of the run) is simulated as usual.
        """
        if not self._wave_fits():
            return False
        scheduler, timer, metrics = self.scheduler, self.timer, self.metrics
        batch, il, ol = scheduler.max_num_seqs, scheduler.input_len, scheduler.output_len
        waves = len(scheduler.waiting) // batch - 1
        steps_per_wave = ol
        total = waves * steps_per_wave
        jit = timer.jitter.factors(self.step, total)
        prefill_at = np.arange(0, total, steps_per_wave)
        decode_mask = np.ones(total, dtype=bool)
        decode_mask[prefill_at] = False

        # The prefill step: B prompts of IL tokens from position 0, all sampling a first token.
        prefill_tokens = batch * il
        pairs = batch * (il * (2 * 0 + il + 1) // 2)
        prefill_fixed = timer.gpu_by_tokens[prefill_tokens] + timer.gpu_by_sampled[batch]
        prefill_gpu = prefill_fixed + 0 * timer.attention_s_per_context_token + pairs * timer.prefill_s_per_pair
        prefill_cpu = timer.cpu_by_sequences[batch]
        # The decode stretch: B sequences whose context grows by B tokens a step.
        context = batch * (il + 1) + batch * np.arange(ol - 1)
        decode_fixed = timer.gpu_by_tokens[batch] + timer.gpu_by_sampled[batch]
        decode_gpu = decode_fixed + context * timer.attention_s_per_context_token
        decode_cpu = timer.cpu_by_sequences[batch]

        gpu = np.empty(total)
        gpu[prefill_at] = prefill_gpu
        gpu.reshape(waves, steps_per_wave)[:, 1:] = decode_gpu
        cpu = np.where(decode_mask, decode_cpu, prefill_cpu)
        durations = (gpu + cpu) * jit
        ends = np.add.accumulate(np.concatenate(([self.now_s], durations)))[1:]
        scheduler_times = np.add.accumulate(np.concatenate(([metrics.scheduler_time_s], cpu * jit)))
        forward_times = np.add.accumulate(np.concatenate(([metrics.forward_time_s], gpu * jit)))
        prefill_parts = jit[prefill_at] * ((prefill_fixed + prefill_cpu) * (prefill_tokens / prefill_tokens)
                                           + pairs * timer.prefill_s_per_pair)
        decode_increments = durations.copy()
        decode_increments[prefill_at] = durations[prefill_at] - prefill_parts

        # The samples inside the waves see the state before the step they fall in (step k: the
        # k-th of the waves), computed for those steps only.
        sample_times = []
        while metrics.next_sample_s < ends[-1]:
            sample_times.append(metrics.next_sample_s)
            metrics.next_sample_s += SAMPLE_PERIOD_S
        k = np.searchsorted(ends, np.asarray(sample_times, dtype=float), side="right")
        wave_of, offset = np.divmod(k, steps_per_wave)
        decoding = offset > 0
        blocks_per_prompt = -(-il // scheduler.block_size)
        new_blocks = ((np.arange(ol - 1) + il) % scheduler.block_size == 0) * batch
        blocks_before_decode = np.concatenate(([0], np.cumsum(new_blocks)))
        used_before = np.where(decoding, batch * blocks_per_prompt + blocks_before_decode[np.maximum(offset - 1, 0)], 0)
        generation_before = metrics.generation_tokens + wave_of * batch * ol + decoding * (batch + batch * (offset - 1))
        rows = zip(sample_times, scheduler_times[k].tolist(), forward_times[k].tolist(),
                   (used_before / scheduler.num_blocks).tolist(), (decoding * batch).tolist(),
                   (len(scheduler.waiting) - wave_of * batch - decoding * batch).tolist(),
                   (metrics.successes + wave_of * batch).tolist(),
                   (metrics.prompt_tokens + (wave_of + decoding) * prefill_tokens).tolist(),
                   generation_before.tolist())
        metrics.samples.extend((time, sched, forward, usage, running, waiting, scheduler.preemptions, successes, prompt,
                                generation)
                               for time, sched, forward, usage, running, waiting, successes, prompt, generation in rows)

        metrics.scheduler_time_s = float(scheduler_times[-1])
        metrics.forward_time_s = float(forward_times[-1])
        metrics.prefill_time_s = float(np.add.accumulate(np.concatenate(([metrics.prefill_time_s],
                                                                           prefill_parts)))[-1])
        metrics.decode_time_s = float(np.add.accumulate(np.concatenate(([metrics.decode_time_s],
                                                                          decode_increments)))[-1])
        metrics.step_counts["prefill_only"] += waves
        metrics.step_counts["decode_only"] += total - waves
        metrics.generation_tokens += waves * batch * ol
        metrics.prompt_tokens += waves * prefill_tokens
        metrics.successes += waves * batch
        metrics.add_inter_token_gaps(durations[decode_mask], np.full(total - waves, batch, dtype=np.int64))
        if metrics.recording:
            metrics.record_wave_stats(jit, decode_mask, batch, prefill_tokens, pairs, context)

        first_token_at = ends[prefill_at].tolist()
        finished_at = ends[prefill_at + steps_per_wave - 1].tolist()
        for wave in range(waves):
            for _ in range(batch):
                request = scheduler.requests[scheduler.waiting.popleft()]
                request.prefilled, request.generated = il, ol
                request.first_token_at_s = first_token_at[wave]
                request.finished_at_s = finished_at[wave]
        self.now_s = float(ends[-1])
        self.step += total
        return True


def simulate_run(arch: Architecture, hw: Hardware, sim_constants: SimConstants, il: int, ol: int,
                 max_num_seqs: int, num_prompts: int = 2000, seed: int = 0, tensor_parallel: int = 1, *,
                 jump: bool = True, include_test_prompt: bool = True, max_model_len: int | None = None,
                 record_stats: bool = False, vllm_version: str | None = None) -> SimResult:
    """Simulate one benchmark run: ``num_prompts`` requests of ``il`` prompt and ``ol`` output
    tokens sent at once (after the client's single test prompt) to a server with
    ``--max-num-seqs=max_num_seqs``; with `vllm_version`, a server of that vLLM release, whose
    engine, token budget and async scheduling replace those of `sim_constants`
    (`slim.sim.vllm_defaults.constants_for_vllm_version`).

    Returns a `SimResult`; when the configuration cannot start (weights or KV cache do not
    fit) its ``status`` is the failure code and it holds no measurements.
    """
    if il < 1 or ol < 1 or num_prompts < 1 or max_num_seqs < 1:
        raise ConfigError(f"il, ol, num_prompts and max_num_seqs must be >= 1 (got {il}, {ol}, {num_prompts}, "
                          f"{max_num_seqs})")
    sim_constants = constants_for_vllm_version(sim_constants, vllm_version, hw, max_num_seqs, max_model_len)
    if max_num_seqs > sim_constants.max_num_batched_tokens:
        raise ConfigError(f"max_num_seqs={max_num_seqs} exceeds max_num_batched_tokens="
                          f"{sim_constants.max_num_batched_tokens}: vLLM refuses this configuration")
    plan = kv_cache_plan(arch, hw, sim_constants, max_num_seqs, tensor_parallel, max_model_len)
    result = SimResult(arch.name, il, ol, max_num_seqs, num_prompts, tensor_parallel, seed, plan,
                       status=plan.failure or "ok")
    if plan.failure:
        return result
    cost = StepCostModel(arch, hw, sim_constants, tensor_parallel, input_len=il, output_len=ol)
    # The block manager holds every layer's KV for a sequence's whole context; sliding-window layers keep
    # only their window, so it counts the blocks that hold as many whole sequences (`window_equivalent_blocks`).
    blocks = window_equivalent_blocks(arch, plan.num_gpu_blocks, il + ol, tensor_parallel, plan.block_size)
    engine_plan = plan if blocks == plan.num_gpu_blocks else replace(plan, num_gpu_blocks=blocks)
    engine = ServingEngine(cost, engine_plan, sim_constants, il, ol, max_num_seqs, seed, jump)
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
    itl = metrics.inter_token_gaps_s()
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
