"""What one simulated benchmark run produces: per-request times, the metrics samples, the
client's summary metrics and the simulator-only accounting."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from slim.gpu.kv_memory import KvCachePlan
from slim.sim.metrics import METRICS_COLUMNS, ScheduleStats


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

    def client_latencies_ms(self, max_concurrency: int | None = None) -> dict[str, np.ndarray]:
        """Per request TTFT, TPOT and E2EL, and every gap between tokens (ITL), ms, as the benchmark's
        client measures them. With every request sent at once (`max_concurrency` None) they count from
        the benchmark's start; with a client that keeps at most `max_concurrency` requests in flight,
        from when it sent each one: the first `max_concurrency` at the start, each later one (in
        submission order) when an earlier one finished. The schedule is the same either way (the
        server takes a request when a running one finishes), so only the clocks differ; a server
        cap above the client's concurrency changes nothing, as it never holds more."""
        ttft, e2e = np.asarray(self.ttft_s, dtype=float), np.asarray(self.e2e_s, dtype=float)
        sent = np.zeros(len(ttft))
        if max_concurrency is not None and len(ttft) > max_concurrency:
            sent[max_concurrency:] = np.sort(e2e)[:len(ttft) - max_concurrency]
        tpot = (e2e - ttft) / (self.output_len - 1) if self.output_len > 1 else np.zeros(len(ttft))
        return {"ttft": 1e3 * (ttft - sent), "tpot": 1e3 * tpot, "itl": 1e3 * np.asarray(self.itl_s, dtype=float),
                "e2el": 1e3 * (e2e - sent)}

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
            std = float(np.std(values_ms))
            summary[f"median_{name}_ms"] = _median_partitioning(values_ms)
            summary[f"std_{name}_ms"] = std
            summary[f"p99_{name}_ms"] = float(np.percentile(values_ms, 99))
        return summary


def _median_partitioning(values: np.ndarray) -> float:
    """``np.median(values)``, found by partitioning `values` in place around their middle: the
    median of the one or two middle values, which a later percentile then finds faster."""
    middle = len(values) // 2
    first = middle - 1 if len(values) % 2 == 0 else middle
    values.partition([first, middle] if first < middle else [middle])
    return float(np.median(values[first:middle + 1]))
