"""The mean running batch from the client's own numbers, by Little's law.

Over a benchmark of ``duration`` seconds, the mean number of requests in the decode batch is
their total time in it divided by the duration. A request's time in the decode batch is its
latency after the first token: ``e2el - ttft`` (``vllm bench serve``, GuideLLM), or, in results
without end-to-end latency (the old ``benchmark_serving.py``), ``ITL x (output tokens - 1)``
summed over requests, ``mean_itl_ms x (total_output_tokens - completed)``. On the 142 usable runs
of the public H100 traces this agrees with the mean of the server's 1-s ``num_requests_running``
samples to within 4% (mean 0.1%), with no trend in the batch cap. It overestimates the batch of
a run whose requests were preempted (a preempted request still counts as decoding).
"""

from __future__ import annotations

import math
from typing import Any

from slim.traces.values import number

SOURCE_LITTLES_LAW = "littles_law"


def littles_law_batch(content: dict[str, Any]) -> tuple[float, str] | None:
    """(mean decode batch, the formula used), or None when the result lacks what it needs."""
    completed, duration = number(content.get("completed")), number(content.get("duration"))
    if not (math.isfinite(completed) and math.isfinite(duration) and completed > 0 and duration > 0):
        return None
    e2el_ms, ttft_ms = number(content.get("mean_e2el_ms")), number(content.get("mean_ttft_ms"))
    if math.isfinite(e2el_ms) and math.isfinite(ttft_ms) and e2el_ms > ttft_ms >= 0:
        return completed * (e2el_ms - ttft_ms) / 1000.0 / duration, "completed x (mean_e2el_ms - mean_ttft_ms)"
    itl_ms, output_tokens = number(content.get("mean_itl_ms")), number(content.get("total_output_tokens"))
    if math.isfinite(itl_ms) and itl_ms > 0 and math.isfinite(output_tokens) and output_tokens > completed:
        return itl_ms * (output_tokens - completed) / 1000.0 / duration, "mean_itl_ms x (output tokens - completed)"
    return None
