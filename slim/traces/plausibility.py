"""Plausibility of one ingested run: numbers that can be parsed but cannot be true.

Each check gives the run's status and the evidence when it fails: a required value that is
not finite and positive (``invalid_values``), or values that contradict each other or what
vLLM allows (``implausible``): more completed requests than prompts sent, throughputs that
disagree with the counts and duration they summarise, a running batch (mean or any sample)
above ``max_num_seqs`` or above the KV cache's block count (every running sequence holds at
least one block), a KV usage above 100%.
"""

from __future__ import annotations

import math
from typing import Any

from slim import columns as col

THROUGHPUT_TOLERANCE = 0.05
"""Relative disagreement allowed between a reported throughput and counts / duration."""


def finite_positive(value: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def non_positive_values(values: dict[str, float]) -> list[str]:
    """Names of the values that are not finite and > 0 (NaN, inf, zero, negative)."""
    return [name for name, value in values.items() if not finite_positive(value)]


def summary_contradiction(row: dict[str, Any], totals: tuple[float, float]) -> str | None:
    """Why the client's summary contradicts itself, or None: counts vs prompts and throughputs
    vs ``counts / duration`` (`totals`: total input and output tokens)."""
    completed, num_prompts, duration = row[col.COMPLETED], row[col.NUM_PROMPTS], row[col.DURATION_S]
    if math.isfinite(num_prompts) and completed > num_prompts:
        return f"completed = {completed:g} exceeds num_prompts = {num_prompts:g}"
    expected = {
        "request_throughput": (row[col.REQUEST_THROUGHPUT], completed / duration),
        "total_token_throughput": (row[col.TOTAL_TOKEN_THROUGHPUT], (totals[0] + totals[1]) / duration),
    }
    for name, (reported, derived) in expected.items():
        if abs(reported / derived - 1.0) > THROUGHPUT_TOLERANCE:
            return f"{name} = {reported:.6g} but the counts give {derived:.6g} per second"
    return None


def batch_contradiction(row: dict[str, Any], max_running: float, tolerance: float) -> str | None:
    """Why the running batch cannot be true, or None.

    `max_running` is the largest running-batch sample (NaN when only a mean is known);
    `tolerance` is the relative slack allowed to the mean (an estimate, not a count, may
    exceed the cap by its error).
    """
    mean_batch, cap, blocks = row[col.MEAN_BATCH_SIZE], row[col.MAX_NUM_SEQS], row[col.NUM_GPU_BLOCKS]
    if not finite_positive(mean_batch):
        return f"mean batch size = {mean_batch:g} (no request was ever running)"
    source = row[col.BATCH_SIZE_SOURCE]
    if math.isfinite(max_running) and max_running > cap:
        return f"a {source} sample of num_requests_running = {max_running:g} exceeds max_num_seqs = {cap:g}"
    if mean_batch > cap * (1.0 + tolerance) + 1e-9:
        return f"mean batch size {mean_batch:.4g} ({source}) exceeds max_num_seqs = {cap:g}"
    if math.isfinite(blocks) and math.isfinite(max_running) and max_running > blocks:
        return (f"a {source} sample of num_requests_running = {max_running:g} exceeds the KV cache's "
                f"{blocks:g} blocks (each running sequence holds at least one)")
    if math.isfinite(blocks) and mean_batch > blocks * (1.0 + tolerance):
        return (f"mean batch size {mean_batch:.4g} exceeds the KV cache's {blocks:g} blocks "
                "(each running sequence holds at least one)")
    kv_usage = row[col.MAX_KV_CACHE_USAGE]
    if math.isfinite(kv_usage) and not 0.0 <= kv_usage <= 1.0 + 1e-9:
        return f"KV cache usage reaches {kv_usage:g} (a fraction of the cache: must lie in [0, 1])"
    return None
