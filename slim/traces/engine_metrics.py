"""The server's scheduler gauges over a run, whatever recorded them, reduced to what SLIM needs.

A `MetricsSeries` holds the samples of ``num_requests_running``, ``num_requests_waiting``, KV
usage and the cumulative preemption counter, as read from a metrics CSV
(`slim.traces.metrics_csv`) or from Prometheus text scrapes (`slim.traces.prometheus_text`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from slim.errors import TraceFormatError

SOURCE_METRICS_CSV = "metrics_csv"
SOURCE_PROMETHEUS_TEXT = "prometheus_text"


@dataclass(frozen=True)
class MetricsSeries:
    """Samples of the scheduler gauges, one entry per scrape; absent series are None."""

    file: str                      # file (or first file) the samples came from
    source: str                    # SOURCE_METRICS_CSV or SOURCE_PROMETHEUS_TEXT
    running: np.ndarray
    waiting: np.ndarray | None = None
    kv_usage: np.ndarray | None = None
    preemptions: np.ndarray | None = None   # cumulative counter


@dataclass(frozen=True)
class EngineMetrics:
    """Server gauges sampled during a run, reduced to what the pipeline needs.

    ``num_preemptions`` is NaN when nothing recorded the preemption counter; ``max_running``
    is the largest single sample of the running batch (NaN when only a mean is known).
    """

    mean_batch_size: float
    max_kv_cache_usage: float
    num_preemptions: float
    n_active_samples: int
    max_running: float = math.nan


def mean_running_over_active_window(running: np.ndarray, waiting: np.ndarray) -> tuple[float, int]:
    """Mean of ``num_requests_running`` over samples where the server had work.

    The benchmark window is the set of samples with ``running + waiting > 0``:
    samples before the first request and after the last one (the server idles
    while the client writes its results) would otherwise dilute the mean and
    break Little's law ``E2E = B_mean / request_throughput``.
    """
    active = (running + waiting) > 0
    if not active.any():
        return math.nan, 0
    return float(running[active].mean()), int(active.sum())


def _nanmax(values: np.ndarray | None) -> float:
    if values is None or not np.isfinite(values).any():
        return math.nan
    return float(np.nanmax(np.where(np.isfinite(values), values, np.nan)))


def preemption_count(series: MetricsSeries, last_active: int | None = None) -> float:
    """The counter's largest recorded value (it only grows); NaN when it was not recorded, or
    when it reads 0 but its samples stop (NaN) before `last_active`, the last sample with work:
    preemptions may have happened after the last sample that counted them."""
    count = _nanmax(series.preemptions)
    if series.preemptions is None or math.isnan(count) or last_active is None or count > 0:
        return count
    recorded = np.flatnonzero(np.isfinite(series.preemptions))
    return count if recorded[-1] >= last_active else math.nan


def batch_metrics(series: MetricsSeries) -> EngineMetrics:
    """Mean running batch over the active window, peak KV usage, preemptions and the largest sample.

    Raises `TraceFormatError` naming the file when there are no samples or the running gauge
    has a NaN (a missed scrape: the whole series is distrusted) or negative sample.
    """
    running = series.running
    if len(running) == 0:
        raise TraceFormatError(f"{series.file}: header only, no samples", path=series.file)
    if not np.isfinite(running).all() or (running < 0).any():
        raise TraceFormatError(f"{series.file}: num_requests_running has NaN or negative samples", path=series.file)
    waiting = np.zeros_like(running) if series.waiting is None else np.nan_to_num(series.waiting)
    mean_batch, n_active = mean_running_over_active_window(running, waiting)
    active = np.flatnonzero((running + waiting) > 0)
    last_active = int(active[-1]) if len(active) else None
    return EngineMetrics(mean_batch, _nanmax(series.kv_usage), preemption_count(series, last_active), n_active,
                         float(running.max()))
