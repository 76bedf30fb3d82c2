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
per-step jitter ``1 + sigma z_k``; ``z_k`` is a function of (seed, global step index k)
only (counter-based: block ``k >> 16`` of ``numpy.random.default_rng([seed, block])``),
so stepping and jumping draw exactly the same numbers.

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

import heapq
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from slim.errors import ConfigError
from slim.sim.constants import SimConstants
from slim.sim.cost import StepCostModel
from slim.sim.memory import KvCachePlan, kv_cache_plan
from slim.specs.architecture import Architecture
from slim.specs.hardware import Hardware

SAMPLE_PERIOD_S = 1.0          # metrics scraper period (the real CSVs: about 1 s)
SAMPLE_OFFSET_S = 0.13         # first scrape after server start
TEST_PROMPT_AT_S = 1.0         # the client's initial single-prompt test run
CLIENT_GAP_S = 0.05            # client: end of test run -> main benchmark start
TAIL_SAMPLES = 10              # scrapes after the last completion
MAX_STRETCH_STEPS = 1 << 16
_JITTER_BLOCK_BITS = 16

METRICS_COLUMNS = (
    "time [s]", "scheduler_total_time", "model_forward_total_time", "gpu_cache_usage_perc",
    "num_requests_running", "num_requests_waiting", "num_preemptions_total",
    "request_success_total", "prompt_tokens_total", "generation_tokens_total",
)


class _Jitter:
    """Counter-based per-step jitter factors ``1 + sigma clip(z_k, -3, 3)``."""

    def __init__(self, seed: int, sigma: float):
        self.seed, self.sigma = int(seed), float(sigma)
        self._arrays: dict[int, np.ndarray] = {}
        self._lists: dict[int, list[float]] = {}
        self.mask = (1 << _JITTER_BLOCK_BITS) - 1

    def _block(self, block: int) -> np.ndarray:
        if block not in self._arrays:
            normal = np.random.default_rng([self.seed, block]).standard_normal(1 << _JITTER_BLOCK_BITS)
            self._arrays[block] = 1.0 + self.sigma * np.clip(normal, -3.0, 3.0)
            self._lists[block] = self._arrays[block].tolist()
        return self._arrays[block]

    def factor(self, step: int) -> float:
        block = step >> _JITTER_BLOCK_BITS
        if block not in self._lists:
            self._block(block)
        return self._lists[block][step & self.mask]

    def factors(self, start: int, count: int) -> np.ndarray:
        pieces, step, left = [], start, count
        while left > 0:
            offset = step & self.mask
            take = min(left, (1 << _JITTER_BLOCK_BITS) - offset)
            pieces.append(self._block(step >> _JITTER_BLOCK_BITS)[offset:offset + take])
            step, left = step + take, left - take
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


@dataclass
class ScheduleStats:
    """Jitter-weighted sufficient statistics of the main benchmark window.

    ``duration = sum_T W_tokens[T] gpu_fixed(T) + sum_n W_sampled[n] lm_head(n)
    + S_context x attention_s_per_token + S_pairs x prefill_s_per_pair
    + W_steps x overhead_base + S_seqs x overhead_per_seq`` (all jitter-weighted).
    """

    w_tokens: np.ndarray
    w_sampled: np.ndarray
    s_context: float = 0.0
    s_pairs: float = 0.0
    s_seqs: float = 0.0
    w_steps: float = 0.0
    n_steps: int = 0

    def duration_s(self, model: StepCostModel) -> float:
        tokens_table, sampled_table = model.gpu_fixed_table(len(self.w_tokens) - 1, len(self.w_sampled) - 1)
        consts = model.consts
        return float(np.dot(self.w_tokens, tokens_table) + np.dot(self.w_sampled, sampled_table)
                     + self.s_context * model.attention_s_per_context_token
                     + self.s_pairs * model.prefill_s_per_pair
                     + self.w_steps * consts.step_overhead_base_s + self.s_seqs * consts.step_overhead_per_seq_s)


@dataclass
class SimResult:
    """One simulated benchmark run: per-request times, metrics samples and summaries."""

    model: str
    input_len: int
    output_len: int
    max_num_seqs: int
    num_prompts: int
    tensor_parallel: int
    seed: int
    plan: KvCachePlan
    status: str                               # "ok" or the plan's failure code
    benchmark_start_s: float = float("nan")   # t0 on the server clock
    duration_s: float = float("nan")
    completed: int = 0
    ttft_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    e2e_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    itl_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    samples: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(METRICS_COLUMNS)))
    num_preemptions: int = 0
    num_steps: int = 0
    prefill_time_s: float = 0.0
    decode_time_s: float = 0.0
    step_counts: dict = field(default_factory=dict)
    stats: ScheduleStats | None = None

    @property
    def total_input_tokens(self) -> int:
        return self.input_len * self.completed

    @property
    def total_output_tokens(self) -> int:
        return self.output_len * self.completed

    @property
    def total_token_throughput_per_s(self) -> float:
        return (self.total_input_tokens + self.total_output_tokens) / self.duration_s

    @property
    def mean_batch_size(self) -> float:
        """Mean of sampled ``num_requests_running`` over samples with running + waiting > 0."""
        active = self.samples[(self.samples["num_requests_running"] + self.samples["num_requests_waiting"]) > 0]
        return float(active["num_requests_running"].mean()) if len(active) else float("nan")

    def benchmark_summary(self) -> dict[str, float | int]:
        """The client's summary metrics (vLLM ``benchmark_serving.py`` semantics, ms)."""
        tpot = (self.e2e_s - self.ttft_s) / (self.output_len - 1) if self.output_len > 1 else np.zeros(0)
        summary: dict[str, float | int] = {
            "duration": self.duration_s, "completed": self.completed,
            "total_input_tokens": self.total_input_tokens, "total_output_tokens": self.total_output_tokens,
            "request_throughput": self.completed / self.duration_s,
            "output_throughput": self.total_output_tokens / self.duration_s,
            "total_token_throughput": self.total_token_throughput_per_s,
        }
        for name, values in (("ttft", self.ttft_s), ("tpot", tpot), ("itl", self.itl_s)):
            values_ms = np.asarray(values, dtype=float) * 1000.0
            if len(values_ms) == 0:
                values_ms = np.zeros(1)
            summary[f"mean_{name}_ms"] = float(np.mean(values_ms))
            summary[f"median_{name}_ms"] = float(np.median(values_ms))
            summary[f"std_{name}_ms"] = float(np.std(values_ms))
            summary[f"p99_{name}_ms"] = float(np.percentile(values_ms, 99))
        return summary


class _Engine:
    """The scheduler state machine; see the module docstring for the rules."""

    def __init__(self, cost: StepCostModel, plan: KvCachePlan, consts: SimConstants, input_len: int,
                 output_len: int, max_num_seqs: int, seed: int, jump: bool):
        self.cost, self.consts = cost, consts
        self.il, self.ol, self.max_num_seqs, self.jump = input_len, output_len, max_num_seqs, jump
        self.bs = consts.block_size
        self.budget = consts.max_num_batched_tokens
        self.num_blocks = plan.num_gpu_blocks
        self.watermark = int(consts.watermark_fraction * plan.num_gpu_blocks)
        self.jitter = _Jitter(seed, consts.jitter_rel_sigma)
        self.tok_table, self.samp_table = cost.gpu_fixed_table(self.budget, max(max_num_seqs, self.budget))
        seqs = np.arange(max_num_seqs + 1, dtype=float)
        self.cpu_table = cost.overhead_s(seqs).tolist()
        self.attn_coef = cost.attention_s_per_context_token
        self.pair_coef = cost.prefill_s_per_pair
        # Scheduler state.
        self.t = 0.0
        self.step = 0
        self.used = 0
        self.running: dict[int, None] = {}
        self.prefilling: dict[int, None] = {}
        self.waiting: deque[int] = deque()
        self.n_dec = 0
        self.ctx_dec = 0
        self.phase_bins = [0] * self.bs
        self.completions: dict[int, list[int]] = {}
        self.completion_heap: list[int] = []
        # Per request.
        self.prompt: list[int] = []
        self.computed: list[int] = []
        self.gen: list[int] = []
        self.dec_start: list[int] = []
        self.dec_ntok0: list[int] = []
        self.ttft_at: list[float] = []
        self.finish_at: list[float] = []
        self.last_token_at: list[float] = []
        self.ignored: list[int] = []
        # Counters and records.
        self.sched_total = 0.0
        self.forward_total = 0.0
        self.prefill_time = 0.0
        self.decode_time = 0.0
        self.preemptions = 0
        self.successes = 0
        self.prompt_tokens = 0
        self.gen_tokens = 0
        self.itl_values: list[float] = []
        self.itl_weights: list[int] = []
        self.itl_extra: list[float] = []
        self.step_counts = {"decode_only": 0, "prefill_only": 0, "mixed": 0}
        self.samples: list[tuple] = []
        self.next_sample = SAMPLE_OFFSET_S
        self.recording = False
        self.stats = ScheduleStats(np.zeros(self.budget + 1), np.zeros(len(self.samp_table)))

    # -- requests and samples ----------------------------------------------------------------
    def submit(self, count: int) -> list[int]:
        ids = list(range(len(self.prompt), len(self.prompt) + count))
        for _ in ids:
            self.prompt.append(self.il)
            self.computed.append(0)
            self.gen.append(0)
            self.dec_start.append(-1)
            self.dec_ntok0.append(0)
            self.ttft_at.append(float("nan"))
            self.finish_at.append(float("nan"))
            self.last_token_at.append(float("nan"))
        self.waiting.extend(ids)
        return ids

    def _snapshot(self, sched: float, forward: float, used: int, gen_tokens: int) -> tuple:
        return (sched, forward, used / self.num_blocks, len(self.running), len(self.waiting),
                self.preemptions, self.successes, self.prompt_tokens, gen_tokens)

    def record_samples_before(self, time_limit: float, row: tuple | None = None) -> None:
        """Scrape the state at every sample time < ``time_limit`` (``row``: a snapshot taken
        before the current step was scheduled; default the current state)."""
        while self.next_sample < time_limit:
            if row is None:
                row = self._snapshot(self.sched_total, self.forward_total, self.used, self.gen_tokens)
            self.samples.append((self.next_sample,) + row)
            self.next_sample += SAMPLE_PERIOD_S

    # -- preemption -------------------------------------------------------------------------
    def _phase_of(self, r: int) -> int:
        return (self.dec_start[r] + 2 - self.dec_ntok0[r]) % self.bs

    def _preempt(self, r: int) -> None:
        """Free ``r``'s blocks and reset it for recompute (vLLM PreemptionMode.RECOMPUTE)."""
        k = self.step
        if r in self.prefilling:
            del self.prefilling[r]
            self.used -= -(-self.prompt[r] // self.bs)
        else:
            ntok = self.dec_ntok0[r] + (k - 1 - self.dec_start[r])
            self.used -= -(-(ntok - 1) // self.bs)
            self.n_dec -= 1
            self.ctx_dec -= ntok
            self.phase_bins[self._phase_of(r)] -= 1
            finish_step = self.dec_start[r] + self.ol - (self.dec_ntok0[r] - self.il)
            self.completions[finish_step].remove(r)
            self.gen[r] = ntok - self.il
            self.prompt[r] = ntok
            self.last_token_at[r] = self.t
        del self.running[r]
        self.computed[r] = 0
        self.preemptions += 1

    def _allocate_decode_blocks_with_preemption(self) -> list[int]:
        phase_now = self.step % self.bs
        preempted: list[int] = []
        for r in list(self.running):
            if r not in self.running or r in self.prefilling or self._phase_of(r) != phase_now:
                continue
            while self.num_blocks - self.used < 1:
                victim = next(reversed(self.running))
                self._preempt(victim)
                preempted.append(victim)
                if victim == r:
                    break
            if r in self.running:
                self.used += 1
        return preempted

    # -- one general step --------------------------------------------------------------------
    def general_step(self) -> bool:
        k, bs = self.step, self.bs
        before = (self.used, len(self.running), len(self.waiting), self.preemptions)
        need = self.phase_bins[k % bs]
        preempted: list[int] = []
        if need > self.num_blocks - self.used:
            preempted = self._allocate_decode_blocks_with_preemption()
        else:
            self.used += need
        n_dec = self.n_dec
        budget = self.budget - n_dec
        chunks: list[tuple[int, int]] = []
        for r in self.prefilling:
            if budget <= 0:
                break
            c = min(self.prompt[r] - self.computed[r], budget)
            chunks.append((r, c))
            budget -= c
        waiting, running = self.waiting, self.running
        while budget > 0 and waiting and len(running) < self.max_num_seqs:
            r = waiting[0]
            blocks = -(-self.prompt[r] // bs)
            if self.num_blocks - blocks < self.watermark:      # AllocStatus.NEVER: vLLM ignores it
                waiting.popleft()
                self.ignored.append(r)
                continue
            if self.num_blocks - self.used - blocks < self.watermark:   # AllocStatus.LATER
                break
            waiting.popleft()
            self.used += blocks
            running[r] = None
            self.prefilling[r] = None
            c = min(self.prompt[r], budget)
            chunks.append((r, c))
            budget -= c
        if preempted:
            waiting.extendleft(preempted)
        prefill_tokens = self.budget - n_dec - budget
        tokens = n_dec + prefill_tokens
        if tokens == 0:
            return False
        pairs = 0
        finishing = 0
        for r, c in chunks:
            done = self.computed[r]
            pairs += c * (2 * done + c + 1) // 2
            if done + c == self.prompt[r]:
                finishing += 1
        seqs = n_dec + len(chunks)
        sampled = n_dec + finishing
        fixed = self.tok_table[tokens] + self.samp_table[sampled]
        gpu = fixed + self.ctx_dec * self.attn_coef + pairs * self.pair_coef
        cpu = self.cpu_table[seqs]
        jit = self.jitter.factor(k)
        d = (gpu + cpu) * jit
        if self.next_sample < self.t + d:
            used, n_running, n_waiting, n_preempted = before
            row = (self.sched_total, self.forward_total, used / self.num_blocks, n_running, n_waiting,
                   n_preempted, self.successes, self.prompt_tokens, self.gen_tokens)
            self.record_samples_before(self.t + d, row)
        t_new = self.t + d
        self.sched_total += cpu * jit
        self.forward_total += gpu * jit
        prefill_part = jit * ((fixed + cpu) * (prefill_tokens / tokens) + pairs * self.pair_coef)
        self.prefill_time += prefill_part
        self.decode_time += d - prefill_part
        kind = "mixed" if n_dec and prefill_tokens else ("decode_only" if n_dec else "prefill_only")
        self.step_counts[kind] += 1
        if self.recording:
            stats = self.stats
            stats.w_tokens[tokens] += jit
            stats.w_sampled[sampled] += jit
            stats.s_context += jit * self.ctx_dec
            stats.s_pairs += jit * pairs
            stats.s_seqs += jit * seqs
            stats.w_steps += jit
            stats.n_steps += 1
        # Apply the step.
        self.ctx_dec += n_dec
        self.gen_tokens += n_dec
        if n_dec:
            self.itl_values.append(d)
            self.itl_weights.append(n_dec)
        self.prompt_tokens += prefill_tokens
        for r, c in chunks:
            self.computed[r] += c
            if self.computed[r] == self.prompt[r]:
                self._first_token(r, k, t_new)
        self.t = t_new
        self._complete(k)
        self.step = k + 1
        return True

    def _first_token(self, r: int, k: int, t_new: float) -> None:
        del self.prefilling[r]
        self.gen[r] += 1
        self.gen_tokens += 1
        if self.gen[r] == 1:
            self.ttft_at[r] = t_new
        else:
            self.itl_extra.append(t_new - self.last_token_at[r])
        if self.gen[r] >= self.ol:
            self.used -= -(-self.prompt[r] // self.bs)
            del self.running[r]
            self.finish_at[r] = t_new
            self.successes += 1
            return
        ntok0 = self.il + self.gen[r]
        self.dec_start[r] = k
        self.dec_ntok0[r] = ntok0
        self.phase_bins[(k + 2 - ntok0) % self.bs] += 1
        self.n_dec += 1
        self.ctx_dec += ntok0
        finish_step = k + self.ol - self.gen[r]
        if finish_step not in self.completions:
            self.completions[finish_step] = []
            heapq.heappush(self.completion_heap, finish_step)
        self.completions[finish_step].append(r)

    def _complete(self, k: int) -> None:
        finished = self.completions.pop(k, None)
        if not finished:
            return
        for r in finished:
            ntok = self.dec_ntok0[r] + (k - self.dec_start[r])
            self.used -= -(-(ntok - 1) // self.bs)
            self.ctx_dec -= ntok
            self.n_dec -= 1
            self.phase_bins[self._phase_of(r)] -= 1
            del self.running[r]
            self.gen[r] = self.ol
            self.finish_at[r] = self.t
            self.successes += 1

    # -- pure-decode stretches -----------------------------------------------------------------
    def _next_completion_step(self) -> int:
        heap = self.completion_heap
        while heap and not self.completions.get(heap[0]):
            heapq.heappop(heap)
        return heap[0] if heap else -1

    def _stretch_length(self) -> int:
        if self.prefilling or self.n_dec == 0:
            return 0
        k, bs = self.step, self.bs
        free = self.num_blocks - self.used
        need = self.phase_bins[k % bs]
        if need > free:
            return 0
        if self.waiting and len(self.running) < self.max_num_seqs and self.n_dec < self.budget:
            blocks = -(-self.prompt[self.waiting[0]] // bs)
            if self.num_blocks - blocks < self.watermark:
                return 0
            if free - need - blocks >= self.watermark:
                return 0
        finish = self._next_completion_step()
        limit = min(finish - k + 1, MAX_STRETCH_STEPS) if finish >= 0 else MAX_STRETCH_STEPS
        if limit < 2:
            return 0
        demand = np.asarray(self.phase_bins)[(k + np.arange(limit)) % bs]
        cumulative = np.cumsum(demand)
        return int(min(limit, np.searchsorted(cumulative, free, side="right")))

    def stretch(self, m: int) -> None:
        k, n_dec = self.step, self.n_dec
        demand = np.cumsum(np.asarray(self.phase_bins)[(k + np.arange(m)) % self.bs])
        context = self.ctx_dec + n_dec * np.arange(m)
        fixed = self.tok_table[n_dec] + self.samp_table[n_dec]
        gpu = fixed + context * self.attn_coef
        cpu = self.cpu_table[n_dec]
        jit = self.jitter.factors(k, m)
        d = (gpu + cpu) * jit
        ends = np.add.accumulate(np.concatenate(([self.t], d)))[1:]
        sched = np.add.accumulate(np.concatenate(([self.sched_total], cpu * jit)))[1:]
        forward = np.add.accumulate(np.concatenate(([self.forward_total], gpu * jit)))[1:]
        while self.next_sample < ends[-1]:
            done = int(np.searchsorted(ends, self.next_sample, side="right"))
            if done == 0:
                row = self._snapshot(self.sched_total, self.forward_total, self.used, self.gen_tokens)
            else:
                row = self._snapshot(float(sched[done - 1]), float(forward[done - 1]),
                                     self.used + int(demand[done - 1]), self.gen_tokens + n_dec * done)
            self.samples.append((self.next_sample,) + row)
            self.next_sample += SAMPLE_PERIOD_S
        self.decode_time = float(np.add.accumulate(np.concatenate(([self.decode_time], d)))[-1])
        self.step_counts["decode_only"] += m
        if self.recording:
            stats = self.stats
            stats.w_tokens[n_dec] += jit.sum()
            stats.w_sampled[n_dec] += jit.sum()
            stats.s_context += float(np.dot(jit, context))
            stats.s_seqs += float(jit.sum()) * n_dec
            stats.w_steps += float(jit.sum())
            stats.n_steps += m
        self.t = float(ends[-1])
        self.sched_total = float(sched[-1])
        self.forward_total = float(forward[-1])
        self.used += int(demand[-1])
        self.ctx_dec += n_dec * m
        self.gen_tokens += n_dec * m
        self.itl_values.extend(d.tolist())
        self.itl_weights.extend([n_dec] * m)
        self._complete(k + m - 1)
        self.step = k + m

    def run_until_idle(self) -> None:
        while self.running or self.waiting:
            m = self._stretch_length() if self.jump else 0
            if m >= 2:
                self.stretch(m)
            elif not self.general_step():
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
    engine = _Engine(cost, plan, sim_constants, il, ol, max_num_seqs, seed, jump)
    if include_test_prompt:
        engine.record_samples_before(TEST_PROMPT_AT_S)
        engine.t = max(engine.t, TEST_PROMPT_AT_S)
        engine.submit(1)
        engine.run_until_idle()
        start = engine.t + CLIENT_GAP_S
    else:
        start = TEST_PROMPT_AT_S
    engine.record_samples_before(start)
    engine.t = start
    engine.recording = record_stats
    engine.prefill_time = engine.decode_time = 0.0      # phase accounting covers the main benchmark only
    engine.step_counts = dict.fromkeys(engine.step_counts, 0)
    ids = engine.submit(num_prompts)
    engine.run_until_idle()
    finish = np.asarray([engine.finish_at[r] for r in ids])
    done = np.isfinite(finish)
    end = float(np.max(finish[done])) if done.any() else start
    engine.record_samples_before(end + SAMPLE_PERIOD_S * TAIL_SAMPLES)
    itl = np.repeat(np.asarray(engine.itl_values), np.asarray(engine.itl_weights, dtype=np.int64))
    if include_test_prompt and ol > 1:
        itl = itl[ol - 1:]                 # the test prompt's own inter-token gaps
    result.benchmark_start_s = start
    result.duration_s = end - start
    result.completed = int(done.sum())
    result.ttft_s = np.asarray([engine.ttft_at[r] for r in ids])[done] - start
    result.e2e_s = finish[done] - start
    result.itl_s = np.concatenate([itl, np.asarray(engine.itl_extra)])
    result.samples = pd.DataFrame(engine.samples, columns=list(METRICS_COLUMNS))
    result.num_preemptions = engine.preemptions
    result.num_steps = sum(engine.step_counts.values())
    result.prefill_time_s = engine.prefill_time
    result.decode_time_s = engine.decode_time
    result.step_counts = dict(engine.step_counts)
    result.stats = engine.stats if record_stats else None
    return result
