"""GuideLLM reports (``guidellm benchmark ... --output-path benchmarks.json``).

A report is ``{"args": ..., "benchmarks": [...]}``; each benchmark has its scheduling strategy
(``config.strategy``, or ``args.strategy`` in older reports), timings and ``metrics``, where every
metric is a distribution per request status (``metrics.<name>.successful.mean``,
``.median``, ``.std_dev``, ``.percentiles.p99``, ``.total_sum``). Each benchmark becomes one result with
``vllm bench serve`` keys, so the
rest of ingest treats it like any other run. A concurrent strategy's stream count is the
client's concurrency cap (``max_concurrency``), a synchronous one has concurrency 1.
"""

from __future__ import annotations

import math
from typing import Any

from slim.errors import TraceFormatError

FORMAT_GUIDELLM = "guidellm"


def is_report(value: Any) -> bool:
    """Whether a decoded JSON value is a GuideLLM report."""
    return isinstance(value, dict) and isinstance(value.get("benchmarks"), list) and "completed" not in value


def _stat(metrics: dict[str, Any], name: str, field: str = "mean", status: str = "successful") -> float:
    """``metrics[name][status][field]`` as a float; NaN when absent or not a number."""
    value = (metrics.get(name) or {}).get(status) or {}
    value = value.get(field) if isinstance(value, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return math.nan
    return float(value)


LATENCY_METRICS = {"time_to_first_token_ms": ("ttft", 1.0), "time_per_output_token_ms": ("tpot", 1.0),
                   "inter_token_latency_ms": ("itl", 1.0), "request_latency": ("e2el", 1000.0)}
"""GuideLLM's latency metrics: the vLLM quantity each is, and its factor to ms (request latency is in s)."""


def percentile_of_key(key: str) -> float | None:
    """The percentile a GuideLLM percentile key names: ``p99`` 99, ``p999`` 99.9, ``p001`` 0.1, ``p05`` 5."""
    digits = key[1:]
    if not key.startswith("p") or not digits.isdigit():
        return None
    return float(digits[:2] + "." + digits[2:]) if len(digits) == 3 else float(digits)


def latency_statistics(metrics: dict[str, Any]) -> dict[str, float]:
    """Every statistic of GuideLLM's latency distributions (successful requests) under vLLM's names, ms:
    mean, median, standard deviation and each percentile (``p99.9_itl_ms`` from ``p999``)."""
    out: dict[str, float] = {}
    for name, (quantity, to_ms) in LATENCY_METRICS.items():
        for field, statistic in (("mean", "mean"), ("median", "median"), ("std_dev", "std")):
            out[f"{statistic}_{quantity}_ms"] = _stat(metrics, name, field) * to_ms
        percentiles = ((metrics.get(name) or {}).get("successful") or {}).get("percentiles")
        for key, value in (percentiles.items() if isinstance(percentiles, dict) else ()):
            percentile = percentile_of_key(str(key))
            if percentile is None or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            label = "median" if percentile == 50 else f"p{percentile:g}"
            if label == "median" and math.isfinite(out[f"median_{quantity}_ms"]):
                continue
            out[f"{label}_{quantity}_ms"] = float(value) * to_ms
    return out


def _strategy(benchmark: dict[str, Any]) -> dict[str, Any]:
    config = benchmark.get("config") if isinstance(benchmark.get("config"), dict) else {}
    args = benchmark.get("args") if isinstance(benchmark.get("args"), dict) else {}
    strategy = config.get("strategy") or args.get("strategy") or {}
    return strategy if isinstance(strategy, dict) else {}


def _concurrency_cap(strategy: dict[str, Any]) -> int | None:
    """The client's cap on requests in flight: concurrent streams, 1 when synchronous, else the
    strategy's own max_concurrency (None: open-loop rates and throughput mode set none)."""
    kind = strategy.get("type_")
    if kind == "synchronous":
        return 1
    value = strategy.get("streams") if kind == "concurrent" else strategy.get("max_concurrency")
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _duration_s(benchmark: dict[str, Any]) -> float:
    """The measured period: ``duration``, else ``end_time - start_time`` of the benchmark or its
    scheduler timings; NaN when the report states none."""
    duration = benchmark.get("duration")
    if isinstance(duration, (int, float)) and not isinstance(duration, bool):
        return float(duration)
    for timings in (benchmark, benchmark.get("scheduler_metrics") or benchmark.get("run_stats") or {}):
        start = timings.get("measure_start_time", timings.get("start_time"))
        end = timings.get("measure_end_time", timings.get("end_time"))
        if isinstance(start, (int, float)) and isinstance(end, (int, float)):
            return float(end) - float(start)
    return math.nan


def _model(report: dict[str, Any], benchmark: dict[str, Any]) -> str:
    config = benchmark.get("config") if isinstance(benchmark.get("config"), dict) else {}
    candidates = [(report.get("args") or {}).get("model"), (config.get("backend") or {}).get("model"),
                  (benchmark.get("worker") or {}).get("backend_model")]
    return next((str(name) for name in candidates if name), "")


def benchmark_result(report: dict[str, Any], benchmark: dict[str, Any], label: str) -> dict[str, Any]:
    """One GuideLLM benchmark as a result with ``vllm bench serve`` keys (ms latencies)."""
    metrics = benchmark.get("metrics")
    if not isinstance(metrics, dict) or not isinstance(metrics.get("request_totals"), dict):
        raise TraceFormatError(f"{label}: not a GuideLLM benchmark (no metrics.request_totals)",
                               path=label.split("[", 1)[0])
    totals = metrics["request_totals"]
    completed = totals.get("successful")
    failed = sum(totals.get(status) or 0 for status in ("errored", "incomplete")
                 if isinstance(totals.get(status), (int, float)))
    duration = _duration_s(benchmark)
    input_tokens = _stat(metrics, "prompt_token_count", "total_sum")
    output_tokens = _stat(metrics, "output_token_count", "total_sum")
    strategy = _strategy(benchmark)
    per_s = (lambda total: total / duration) if duration > 0 else (lambda total: math.nan)
    return {
        "model_id": _model(report, benchmark), "completed": completed, "failed": failed,
        "num_prompts": (completed or 0) + failed if isinstance(completed, (int, float)) else None,
        "duration": duration, "total_input_tokens": input_tokens, "total_output_tokens": output_tokens,
        "request_throughput": per_s(completed) if isinstance(completed, (int, float)) else math.nan,
        "output_throughput": per_s(output_tokens), "total_token_throughput": per_s(input_tokens + output_tokens),
        **latency_statistics(metrics),
        "max_concurrency": _concurrency_cap(strategy),
        "guidellm_strategy": str(strategy.get("type_", "unknown")),
        "request_rate": strategy.get("rate", "inf"),
    }


def report_results(report: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """Every benchmark of a GuideLLM report, in order; `TraceFormatError` for an empty or bad one."""
    benchmarks = report["benchmarks"]
    if not benchmarks:
        raise TraceFormatError(f"{name}: GuideLLM report with no benchmarks", path=name)
    results = []
    for index, benchmark in enumerate(benchmarks):
        label = name if len(benchmarks) == 1 else f"{name}[{index}]"
        if not isinstance(benchmark, dict):
            raise TraceFormatError(f"{label}: expected a JSON object, got {type(benchmark).__name__}", path=name)
        results.append(benchmark_result(report, benchmark, label))
    return results
