"""What the simulated server reports and the simulator accounts: vLLM's Prometheus counters and
gauges, scraped about once a second into the rows of ``metrics_engine.csv``; the inter-token
gaps the client measures; and, for the simulator only, the prefill/decode time split, the
step kinds and the jitter-weighted step statistics (`ScheduleStats`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slim.sim.cost import StepCostModel
from slim.sim.scheduler import ScheduledBatch, Scheduler, StretchBlockDemand
from slim.sim.step_timer import StepTime

SAMPLE_PERIOD_S = 1.0          # metrics scraper period (the real CSVs: about 1 s)
SAMPLE_OFFSET_S = 0.13         # first scrape after server start

METRICS_COLUMNS = (
    "time [s]", "scheduler_total_time", "model_forward_total_time", "gpu_cache_usage_perc",
    "num_requests_running", "num_requests_waiting", "num_preemptions_total",
    "request_success_total", "prompt_tokens_total", "generation_tokens_total",
)
"""Columns of the scraped samples (and of ``metrics_engine.csv``), in order."""


def running_totals(start: float, increments: np.ndarray) -> np.ndarray:
    """``start + increments[0]``, then each next increment added to the previous total, one at a
    time as a step loop adds them (`increments`, a non-empty float array, is overwritten)."""
    increments[0] += start
    return np.add.accumulate(increments, out=increments)


@dataclass
class ScheduleStats:
    """Jitter-weighted sufficient statistics of the main benchmark window.

    ``duration = sum_T W_tokens[T] gpu_fixed(T) + sum_n W_sampled[n] lm_head(n)
    + S_context x attention_s_per_token + S_pairs x prefill_s_per_pair
    + W_steps x (overhead_base + k_t x tp_step) + S_seqs x overhead_per_seq`` (all jitter-weighted).

    ``running_weighted`` holds the same sums with each step's weight multiplied by the
    requests running before it was scheduled (what a metrics scrape inside the step reads),
    so ``running_weighted.duration_s(m) / duration_s(m)`` is the time-averaged running batch
    for any cost constants (`slim.sim.schedules`).
    """

    w_tokens: np.ndarray
    w_sampled: np.ndarray
    s_context: float = 0.0
    s_pairs: float = 0.0
    s_seqs: float = 0.0
    w_steps: float = 0.0
    n_steps: int = 0
    running_weighted: "ScheduleStats | None" = None

    def duration_s(self, model: StepCostModel) -> float:
        tokens_table, sampled_table = model.gpu_fixed_table(len(self.w_tokens) - 1, len(self.w_sampled) - 1)
        consts = model.consts
        return float(np.dot(self.w_tokens, tokens_table) + np.dot(self.w_sampled, sampled_table)
                     + self.s_context * model.attention_s_per_context_token
                     + self.s_pairs * model.prefill_s_per_pair
                     + self.w_steps * (consts.step_overhead_base_s + model.tensor_parallel_overhead_s)
                     + self.s_seqs * consts.step_overhead_per_seq_s)


class ServerMetrics:
    """Counters of one simulated server, and the samples scraped from it and its scheduler."""

    def __init__(self, scheduler: Scheduler, stats_sizes: tuple[int, int]):
        self.scheduler = scheduler
        self.scheduler_time_s = 0.0          # Prometheus scheduler_total_time
        self.forward_time_s = 0.0            # Prometheus model_forward_total_time
        self.successes = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        # Inter-token gap of each step with decodes, and how many gaps it was (its decodes):
        # single steps append to the lists, stretches of steps add whole arrays (in order).
        self.itl_values: list[float] = []
        self.itl_weights: list[int] = []
        self._itl_segments: list[tuple[np.ndarray, np.ndarray]] = []
        self.itl_after_preemption: list[float] = []
        self.samples: list[tuple] = []
        self.next_sample_s = SAMPLE_OFFSET_S
        # Simulator-only accounting.
        self.prefill_time_s = 0.0
        self.decode_time_s = 0.0
        self.step_counts = {"decode_only": 0, "prefill_only": 0, "mixed": 0}
        self.recording = False
        self.stats = ScheduleStats(np.zeros(stats_sizes[0]), np.zeros(stats_sizes[1]),
                                   running_weighted=ScheduleStats(np.zeros(stats_sizes[0]),
                                                                  np.zeros(stats_sizes[1])))

    def start_window(self, record_stats: bool) -> None:
        """The main benchmark starts: phase accounting and step statistics cover it only."""
        self.recording = record_stats
        self.prefill_time_s = self.decode_time_s = 0.0
        self.step_counts = dict.fromkeys(self.step_counts, 0)

    # -- scraping -----------------------------------------------------------------------------
    def gauges_row(self, scheduler_time_s: float, forward_time_s: float, used_blocks: int,
                   generation_tokens: int) -> tuple:
        """A sample's values after its time column (the scheduler's queues and preemptions now)."""
        scheduler = self.scheduler
        return (scheduler_time_s, forward_time_s, used_blocks / scheduler.num_blocks, len(scheduler.running),
                len(scheduler.waiting), scheduler.preemptions, self.successes, self.prompt_tokens,
                generation_tokens)

    def record_samples_before(self, time_limit_s: float, row: tuple | None = None) -> None:
        """Scrape the state at every sample time < `time_limit_s` (`row`: a snapshot taken
        before the current step was scheduled; default the current state)."""
        while self.next_sample_s < time_limit_s:
            if row is None:
                row = self.gauges_row(self.scheduler_time_s, self.forward_time_s, self.scheduler.used_blocks,
                                      self.generation_tokens)
            self.samples.append((self.next_sample_s,) + row)
            self.next_sample_s += SAMPLE_PERIOD_S

    # -- one step -----------------------------------------------------------------------------
    def record_step(self, start_s: float, batch: ScheduledBatch, time: StepTime, gauges_before: tuple,
                    decode_context_tokens: int, prefill_s_per_pair: float) -> None:
        """Samples that fall inside the step (they see the state before it was scheduled), the
        busy-time counters, the prefill/decode split and the step statistics of one step.

        A mixed step's fixed part (GEMMs, LM head, launches, CPU overhead) is split between
        the phases in proportion to its prefill and decode tokens; prefill attention goes to
        prefill, decode attention to decode.
        """
        fixed, gpu, cpu, jit, duration = time
        if self.next_sample_s < start_s + duration:
            used, n_running, n_waiting, n_preempted = gauges_before
            row = (self.scheduler_time_s, self.forward_time_s, used / self.scheduler.num_blocks, n_running, n_waiting,
                   n_preempted, self.successes, self.prompt_tokens, self.generation_tokens)
            self.record_samples_before(start_s + duration, row)
        self.scheduler_time_s += cpu * jit
        self.forward_time_s += gpu * jit
        n_decode, prefill_tokens = batch.n_decode, batch.prefill_tokens
        prefill_part = jit * ((fixed + cpu) * (prefill_tokens / batch.tokens)
                              + batch.attention_pairs * prefill_s_per_pair)
        self.prefill_time_s += prefill_part
        self.decode_time_s += duration - prefill_part
        self.step_counts[batch.kind] += 1
        if self.recording:
            _add_step(self.stats, batch, jit, decode_context_tokens)
            _add_step(self.stats.running_weighted, batch, jit * gauges_before[1], decode_context_tokens)
        self.generation_tokens += n_decode
        if n_decode:
            self.itl_values.append(duration)
            self.itl_weights.append(n_decode)
        self.prompt_tokens += prefill_tokens

    def record_decode_stretch(self, ends_s: np.ndarray, gpu_s: np.ndarray, cpu_s: float, jit: np.ndarray,
                              durations_s: np.ndarray, demand: StretchBlockDemand, context_tokens: np.ndarray,
                              n_decode: int) -> None:
        """`record_step` for a stretch of pure-decode steps ending at `ends_s`, vectorised:
        samples inside it see the counters of the steps completed before them."""
        steps = len(durations_s)
        scheduler_times = running_totals(self.scheduler_time_s, cpu_s * jit)
        forward_times = running_totals(self.forward_time_s, gpu_s * jit)
        used_blocks = self.scheduler.used_blocks
        while self.next_sample_s < ends_s[-1]:
            done = int(np.searchsorted(ends_s, self.next_sample_s, side="right"))
            if done == 0:
                row = self.gauges_row(self.scheduler_time_s, self.forward_time_s, used_blocks,
                                      self.generation_tokens)
            else:
                row = self.gauges_row(float(scheduler_times[done - 1]), float(forward_times[done - 1]),
                                      used_blocks + demand.after(done), self.generation_tokens + n_decode * done)
            self.samples.append((self.next_sample_s,) + row)
            self.next_sample_s += SAMPLE_PERIOD_S
        self.decode_time_s = float(running_totals(self.decode_time_s, durations_s.copy())[-1])
        self.step_counts["decode_only"] += steps
        if self.recording:
            _add_decode_stretch(self.stats, jit, context_tokens, n_decode)
            _add_decode_stretch(self.stats.running_weighted, jit * len(self.scheduler.running), context_tokens,
                                n_decode)
        self.scheduler_time_s = float(scheduler_times[-1])
        self.forward_time_s = float(forward_times[-1])
        self.generation_tokens += n_decode * steps
        self.add_inter_token_gaps(durations_s, np.full(steps, n_decode, dtype=np.int64))

    def record_wave_stats(self, jit: np.ndarray, decode_mask: np.ndarray, batch: int, prefill_tokens: int,
                          pairs: int, wave_context_tokens: np.ndarray) -> None:
        """`record_step`'s statistics for identical waves (`ServingEngine.run_identical_waves`):
        each a prefill step of `batch` prompts (`prefill_tokens`, `pairs`) with nothing running
        before it, then decode steps of `batch` sequences whose contexts are
        `wave_context_tokens`; `jit` holds every step's jitter, `decode_mask` marks the decodes."""
        prefill_jit, decode_jit = jit[~decode_mask], jit[decode_mask]
        context = np.tile(wave_context_tokens, len(prefill_jit))
        for stats, gauge in ((self.stats, 1.0), (self.stats.running_weighted, float(batch))):
            prefill_w = 0.0 if stats is self.stats.running_weighted else float(prefill_jit.sum())
            decode_w = gauge * float(decode_jit.sum())
            stats.w_tokens[prefill_tokens] += prefill_w
            stats.w_tokens[batch] += decode_w
            stats.w_sampled[batch] += prefill_w + decode_w
            stats.s_context += gauge * float(np.dot(decode_jit, context))
            stats.s_pairs += pairs * prefill_w
            stats.s_seqs += batch * (prefill_w + decode_w)
            stats.w_steps += prefill_w + decode_w
            stats.n_steps += len(jit)

    def add_inter_token_gaps(self, durations_s: np.ndarray, decodes: np.ndarray) -> None:
        """Steps with decodes, as arrays: `durations_s` each counts as `decodes` gaps."""
        self._flush_inter_token_gaps()
        self._itl_segments.append((np.asarray(durations_s, dtype=float), np.asarray(decodes, dtype=np.int64)))

    def _flush_inter_token_gaps(self) -> None:
        if self.itl_values:
            self._itl_segments.append((np.asarray(self.itl_values, dtype=float),
                                       np.asarray(self.itl_weights, dtype=np.int64)))
            self.itl_values, self.itl_weights = [], []

    def inter_token_gaps_s(self) -> np.ndarray:
        """Every inter-token gap the client saw, in step order (a step's gap once per decode)."""
        self._flush_inter_token_gaps()
        if not self._itl_segments:
            return np.zeros(0)
        return np.repeat(np.concatenate([values for values, _ in self._itl_segments]),
                         np.concatenate([weights for _, weights in self._itl_segments]))


def _add_step(stats: ScheduleStats, batch: ScheduledBatch, weight: float, decode_context_tokens: int) -> None:
    """One step of `batch`, with weight `weight` (its jitter factor, times a gauge for weighted sums)."""
    stats.w_tokens[batch.tokens] += weight
    stats.w_sampled[batch.sampled] += weight
    stats.s_context += weight * decode_context_tokens
    stats.s_pairs += weight * batch.attention_pairs
    stats.s_seqs += weight * batch.sequences
    stats.w_steps += weight
    stats.n_steps += 1


def _add_decode_stretch(stats: ScheduleStats, weights: np.ndarray, context_tokens: np.ndarray,
                        n_decode: int) -> None:
    """A stretch of pure-decode steps of `n_decode` sequences, with per-step weights `weights`."""
    total = float(weights.sum())
    stats.w_tokens[n_decode] += weights.sum()
    stats.w_sampled[n_decode] += weights.sum()
    stats.s_context += float(np.dot(weights, context_tokens))
    stats.s_seqs += total * n_decode
    stats.w_steps += total
    stats.n_steps += len(weights)
