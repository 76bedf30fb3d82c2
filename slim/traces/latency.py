"""A run's latency statistics under vLLM's names (`slim.columns.latency_column`): from the client's
result (``vllm bench serve``, its sweep, the public ``benchmark_serving.py``: every
``<statistic>_<quantity>_ms`` key, whatever ``--metric-percentiles`` asked for), its per-request
lists (``--save-detailed``: ``ttfts``, ``itls``, ``output_lens``, in seconds), and the server's
Prometheus histograms (quantiles read from their cumulative buckets, as Prometheus'
``histogram_quantile`` reads them).

vLLM's per-request definitions, which the lists are reduced by: TTFT is the time to the first
token; TPOT is ``(E2EL - TTFT) / (output tokens - 1)``; E2EL is TTFT plus the request's gaps between
tokens (ITL).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from slim import columns as col
from slim.traces.values import number

HISTOGRAM_QUANTITIES = {
    "vllm:time_to_first_token_seconds": "ttft",
    "vllm:time_per_output_token_seconds": "itl",     # observed once per generated token: a gap, not a request's mean
    "vllm:inter_token_latency_seconds": "itl",
    "vllm:request_time_per_output_token_seconds": "tpot",
    "vllm:e2e_request_latency_seconds": "e2el",
}
"""vLLM's latency histograms and the quantity each measures. ``time_per_output_token`` is observed
for every token after the first, so its quantiles are those of the gaps (ITL); the per-request
TPOT histogram is ``request_time_per_output_token``."""
HISTOGRAM_STATISTICS = ("median", "p90", "p95", "p99")
"""What a histogram gives beside its mean: the quantiles its buckets bound (interpolated)."""


def client_statistics(content: dict[str, Any]) -> dict[str, float]:
    """Every latency statistic a result records under vLLM's names, as floats (ms)."""
    return {key: number(value) for key, value in content.items() if col.parse_latency_column(str(key))}


def _successful(content: dict[str, Any], lengths: list[Any]) -> list[bool]:
    errors = content.get("errors")
    if isinstance(errors, list) and len(errors) == len(lengths):
        return [not error and number(length) > 0 for error, length in zip(errors, lengths)]
    return [number(length) > 0 for length in lengths]


def per_request_latencies(content: dict[str, Any]) -> dict[str, list[float]] | None:
    """TTFT, TPOT and E2EL (ms) of every successful request of a ``--save-detailed`` result, or None
    where the result holds no per-request lists (or lists that do not pair up)."""
    ttfts, itls, lengths = content.get("ttfts"), content.get("itls"), content.get("output_lens")
    if not (isinstance(ttfts, list) and isinstance(itls, list) and isinstance(lengths, list)):
        return None
    if not (len(ttfts) == len(itls) == len(lengths)) or not ttfts:
        return None
    out: dict[str, list[float]] = {col.REQUEST_TTFT_MS: [], col.REQUEST_TPOT_MS: [], col.REQUEST_E2EL_MS: []}
    for ok, ttft, gaps, length in zip(_successful(content, lengths), ttfts, itls, lengths):
        if not ok or not isinstance(gaps, list):
            continue
        ttft_s, gaps_s, tokens = number(ttft), [number(gap) for gap in gaps], number(length)
        if not (math.isfinite(ttft_s) and all(math.isfinite(g) for g in gaps_s)):
            return None
        e2el_s = ttft_s + sum(gaps_s)
        out[col.REQUEST_TTFT_MS].append(1e3 * ttft_s)
        out[col.REQUEST_E2EL_MS].append(1e3 * e2el_s)
        out[col.REQUEST_TPOT_MS].append(1e3 * (e2el_s - ttft_s) / (tokens - 1) if tokens > 1 else 0.0)
    return out if out[col.REQUEST_TTFT_MS] else None


def histogram_quantile(quantile: float, upper_bounds: np.ndarray, cumulative: np.ndarray) -> float:
    """The `quantile` of a histogram from its cumulative bucket counts at `upper_bounds` (the last
    ``+Inf``): linear within the bucket that holds it, the lowest bucket starting at 0, and the
    largest finite bound where it falls in the ``+Inf`` bucket (Prometheus' ``histogram_quantile``).
    NaN for an empty histogram."""
    total = float(cumulative[-1]) if len(cumulative) else 0.0
    if total <= 0:
        return math.nan
    rank = quantile * total
    bucket = int(np.searchsorted(cumulative, rank, side="left"))
    bucket = min(bucket, len(cumulative) - 1)
    if not math.isfinite(upper_bounds[bucket]):
        return float(upper_bounds[bucket - 1]) if bucket > 0 else math.nan
    lower = float(upper_bounds[bucket - 1]) if bucket > 0 else 0.0
    below = float(cumulative[bucket - 1]) if bucket > 0 else 0.0
    inside = float(cumulative[bucket]) - below
    if inside <= 0:
        return float(upper_bounds[bucket])
    return lower + (float(upper_bounds[bucket]) - lower) * (rank - below) / inside


def histogram_statistics(quantity: str, upper_bounds: np.ndarray, cumulative: np.ndarray,
                         total_s: float) -> dict[str, float]:
    """A histogram's mean (its sum over its count) and `HISTOGRAM_STATISTICS`, in ms, under vLLM's
    names for `quantity`; empty for an empty histogram."""
    count = float(cumulative[-1]) if len(cumulative) else 0.0
    if count <= 0:
        return {}
    stats = {col.latency_column("mean", quantity): 1e3 * total_s / count}
    for statistic in HISTOGRAM_STATISTICS:
        q = 0.5 if statistic == "median" else float(statistic[1:]) / 100.0
        stats[col.latency_column(statistic, quantity)] = 1e3 * histogram_quantile(q, upper_bounds, cumulative)
    return stats
