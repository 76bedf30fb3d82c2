"""Parsers for the files a vLLM benchmark run leaves behind.

Two producers are supported:

* the old ``benchmarks/benchmark_serving.py`` client (the public H100 traces):
  ``openai-infqps-<model>-<date>.json`` + ``metrics_engine*.csv`` +
  ``server_out*.log`` + ``cache_config*.txt`` + ``log_<job>.out``;
* the current ``vllm bench serve --save-result [--save-detailed]`` client, whose
  JSON adds ``max_concurrency``, ``failed``, ``mean_e2el_ms``, ``max_concurrent_requests``
  and, when detailed, per-request ``input_lens``, ``output_lens``, ``ttfts``, ``itls``.

Metrics CSVs may use bare gauge names (``num_requests_running``) or the Prometheus
names of either engine (``vllm:num_requests_running``; KV usage as
``vllm:gpu_cache_usage_perc`` in V0 or ``vllm:kv_cache_usage_perc`` in V1).
Every parser raises `TraceFormatError` naming the file and the problem.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from slim.errors import TraceFormatError

FORMAT_BENCHMARK_SERVING = "benchmark_serving"
FORMAT_VLLM_BENCH_SERVE = "vllm_bench_serve"

# Keys only the current `vllm bench serve` writes.
_BENCH_SERVE_MARKERS = ("max_concurrency", "mean_e2el_ms", "endpoint_type", "failed")
_REQUIRED_SUMMARY_KEYS = ("completed", "duration", "total_input_tokens", "total_output_tokens")


def load_benchmark_json(path: Path) -> tuple[dict[str, Any], str]:
    """Read a benchmark result JSON; return (content, trace format).

    Raises `TraceFormatError` for unreadable JSON, a non-object, or missing
    summary keys (the message names the file and the keys).
    """
    try:
        content = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise TraceFormatError(f"{path.name}: not valid JSON ({error})") from error
    if not isinstance(content, dict):
        raise TraceFormatError(f"{path.name}: expected a JSON object, got {type(content).__name__}")
    missing = [key for key in _REQUIRED_SUMMARY_KEYS if key not in content]
    if missing:
        raise TraceFormatError(f"{path.name}: missing key(s) {', '.join(missing)}")
    is_bench_serve = any(key in content for key in _BENCH_SERVE_MARKERS)
    return content, FORMAT_VLLM_BENCH_SERVE if is_bench_serve else FORMAT_BENCHMARK_SERVING


# ---------------------------------------------------------------- metrics CSV

_METRIC_ALIASES: dict[str, tuple[str, ...]] = {
    "time_s": ("time [s]", "time", "timestamp", "time_s"),
    "running": ("num_requests_running", "vllm:num_requests_running"),
    "waiting": ("num_requests_waiting", "vllm:num_requests_waiting"),
    "kv_usage": (
        "gpu_cache_usage_perc", "vllm:gpu_cache_usage_perc",
        "kv_cache_usage_perc", "vllm:kv_cache_usage_perc",
    ),
    "preemptions": ("num_preemptions_total", "vllm:num_preemptions_total", "vllm:num_preemptions"),
}


@dataclass(frozen=True)
class EngineMetrics:
    """Server gauges sampled during a run, reduced to what the pipeline needs."""

    mean_batch_size: float
    max_kv_cache_usage: float
    num_preemptions: float
    n_active_samples: int


def _pick_column(frame: pd.DataFrame, logical: str) -> str | None:
    for candidate in _METRIC_ALIASES[logical]:
        if candidate in frame.columns:
            return candidate
    return None


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


def parse_engine_metrics(path: Path) -> EngineMetrics:
    """Parse a ``metrics_engine*.csv`` (Prometheus gauges about once a second)."""
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError as error:
        raise TraceFormatError(f"{path.name}: empty file") from error
    except (pd.errors.ParserError, UnicodeDecodeError) as error:
        raise TraceFormatError(f"{path.name}: unparseable CSV ({error})") from error
    running_col = _pick_column(frame, "running")
    if running_col is None:
        raise TraceFormatError(f"{path.name}: no num_requests_running column (have: {', '.join(frame.columns)})")
    if frame.empty:
        raise TraceFormatError(f"{path.name}: header only, no samples")
    numeric = frame.apply(pd.to_numeric, errors="coerce")
    running = numeric[running_col].to_numpy(dtype=float)
    waiting_col = _pick_column(frame, "waiting")
    waiting = numeric[waiting_col].to_numpy(dtype=float) if waiting_col else np.zeros_like(running)
    if np.isnan(running).any() or (running < 0).any():
        raise TraceFormatError(f"{path.name}: num_requests_running has NaN or negative samples")
    mean_batch, n_active = mean_running_over_active_window(running, np.nan_to_num(waiting))
    kv_col = _pick_column(frame, "kv_usage")
    max_kv = float(np.nanmax(numeric[kv_col])) if kv_col and numeric[kv_col].notna().any() else math.nan
    preempt_col = _pick_column(frame, "preemptions")
    preemptions = float(np.nanmax(numeric[preempt_col])) if preempt_col and numeric[preempt_col].notna().any() else 0.0
    return EngineMetrics(mean_batch, max_kv, preemptions, n_active)


# ---------------------------------------------------------------- server log

# V0: "... Running: 180 reqs, Swapped: 0 reqs, Pending: 270 reqs, GPU KV cache usage: 19.3%, ..."
# V1: "... Running: 180 reqs, Waiting: 270 reqs, GPU KV cache usage: 19.3%, ..."
_STATS_LINE = re.compile(
    r"Running: (?P<running>\d+) reqs.*?(?:Pending|Waiting): (?P<waiting>\d+) reqs"
    r"(?:.*?(?:GPU )?KV cache usage: (?P<kv>[\d.]+)%)?"
)

FAILURE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("hardware_error", re.compile(r"ECC error|uncorrectable ECC|illegal memory access|Xid \d+", re.I)),
    ("out_of_memory", re.compile(
        r"No available memory for the cache blocks|CUDA out of memory|OutOfMemoryError"
        r"|larger than the maximum number of tokens that can be stored in KV cache", re.I)),
    ("server_start_failed", re.compile(r"Address already in use|error while attempting to bind", re.I)),
)
"""Failure causes recognised in server and client logs, most specific first."""


def parse_server_log_batch(text: str) -> EngineMetrics | None:
    """Mean running batch from the server's periodic stats lines; None if there are none."""
    matches = list(_STATS_LINE.finditer(text))
    if not matches:
        return None
    running = np.array([float(m["running"]) for m in matches])
    waiting = np.array([float(m["waiting"]) for m in matches])
    kv = [float(m["kv"]) / 100.0 for m in matches if m["kv"] is not None]
    mean_batch, n_active = mean_running_over_active_window(running, waiting)
    return EngineMetrics(mean_batch, max(kv) if kv else math.nan, math.nan, n_active)


def classify_failure(log_texts: dict[str, str]) -> tuple[str, str] | None:
    """First known failure cause found in the logs: (reason code, 'file: matching line')."""
    for reason, pattern in FAILURE_PATTERNS:
        for name in sorted(log_texts):
            match = pattern.search(log_texts[name])
            if match:
                line_start = log_texts[name].rfind("\n", 0, match.start()) + 1
                line_end = log_texts[name].find("\n", match.end())
                line = log_texts[name][line_start: line_end if line_end >= 0 else None].strip()
                return reason, f"{name}: {line[:200]}"
    return None


# ---------------------------------------------------------------- cache config

_CACHE_FIELD = re.compile(r'(\w+)="([^"]*)"')


def parse_cache_config(path: Path) -> dict[str, str]:
    """Labels of the ``vllm:cache_config_info`` gauge (num_gpu_blocks, block_size, ...)."""
    text = path.read_text(errors="replace")
    for line in text.splitlines():
        if line.startswith("vllm:cache_config_info"):
            return dict(_CACHE_FIELD.findall(line))
    raise TraceFormatError(f"{path.name}: no vllm:cache_config_info line")


# ---------------------------------------------------------------- client log

def parse_namespace_line(text: str) -> dict[str, Any]:
    """Arguments of the first ``Namespace(...)`` line of a client or server log.

    The line is Python call syntax, so it is parsed with `ast`; values that are
    not literals (``request_rate=inf``, enums) are kept as their source text.
    """
    for line in text.splitlines():
        start = line.find("Namespace(")
        if start < 0:
            continue
        try:
            call = ast.parse(line[start:].strip(), mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(call, ast.Call):
            continue
        arguments: dict[str, Any] = {}
        for keyword in call.keywords:
            try:
                arguments[keyword.arg] = ast.literal_eval(keyword.value)
            except (ValueError, SyntaxError):
                arguments[keyword.arg] = ast.unparse(keyword.value)
        return arguments
    return {}


# A value never starts with "--": in "--enable-chunked-prefill --max-num-seqs=8" the first flag is bare.
_FLAG = re.compile(r"--([\w-]+)(?:[= ](?!--)([^\s]+))?")


def parse_server_flags(server_args: str) -> dict[str, str]:
    """``'--port=1 --max-num-seqs=8 --enable-chunked-prefill'`` -> ``{'max-num-seqs': '8', ...}``."""
    return {flag: (value or "") for flag, value in _FLAG.findall(server_args)}


_MAX_NUM_SEQS_IN_LOG = re.compile(r"max_num_seqs['\"]?\s*[=:]\s*(\d+)")


def find_max_num_seqs_in_log(text: str) -> int | None:
    """``max_num_seqs=512`` (V0 args line) or ``'max_num_seqs': 512`` (V1 non-default args)."""
    match = _MAX_NUM_SEQS_IN_LOG.search(text)
    return int(match.group(1)) if match else None


_TENSOR_PARALLEL_IN_LOG = re.compile(r"tensor_parallel_size['\"]?\s*[=:]\s*(\d+)")


def find_tensor_parallel_in_log(text: str) -> int | None:
    """``tensor_parallel_size=4`` (V0 args line) or ``'tensor_parallel_size': 4`` (V1 non-default
    args); None where the log does not state it (vLLM's default is 1)."""
    match = _TENSOR_PARALLEL_IN_LOG.search(text)
    return int(match.group(1)) if match else None
