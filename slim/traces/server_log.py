"""vLLM server logs (V0 and V1 engines), under any file name.

What a log tells ingest: the periodic stats lines (``Running: N reqs``, the batch-size fallback),
the preemption warnings of V0's scheduler, the KV cache's size (V1: ``GPU KV cache size:
N tokens``; V0: ``# GPU blocks: N``), the server flags it echoes (``max_num_seqs``,
``tensor_parallel_size``, ``pipeline_parallel_size``, ``data_parallel_size``, ``block_size``), the
version the API server announces and the failures it reports.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from slim.traces.engine_metrics import EngineMetrics, mean_running_over_active_window

# V0: "... Running: 180 reqs, Swapped: 0 reqs, Pending: 270 reqs, GPU KV cache usage: 19.3%, ..."
# V1: "... Running: 180 reqs, Waiting: 270 reqs, GPU KV cache usage: 19.3%, ..."
_STATS_LINE = re.compile(
    r"Running: (?P<running>\d+) reqs.*?(?:Pending|Waiting): (?P<waiting>\d+) reqs"
    r"(?:.*?(?:GPU )?KV cache usage: (?P<kv>[\d.]+)%)?"
)
# V0 warns on the first preemption and on every 50th, with the running total.
_PREEMPTION_LINE = re.compile(r"is preempted by PreemptionMode\.\w+(?:.*?total_num_cumulative_preemption=(\d+))?")
_V1_KV_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_V0_GPU_BLOCKS = re.compile(r"# GPU blocks: (\d+)")
_MAX_NUM_SEQS_IN_LOG = re.compile(r"max_num_seqs['\"]?\s*[=:]\s*(\d+)")
_TENSOR_PARALLEL_IN_LOG = re.compile(r"tensor_parallel_size['\"]?\s*[=:]\s*(\d+)")
_PIPELINE_PARALLEL_IN_LOG = re.compile(r"pipeline_parallel_size['\"]?\s*[=:]\s*(\d+)")
_DATA_PARALLEL_IN_LOG = re.compile(r"\bdata_parallel_size['\"]?\s*[=:]\s*(\d+)")
_EXPERT_PARALLEL_IN_LOG = re.compile(r"\benable_expert_parallel['\"]?\s*[=:]\s*True\b")
# vllm/entrypoints/openai/api_server.py, run_server: logger.info("vLLM API server version %s", VLLM_VERSION)
_VLLM_VERSION_IN_LOG = re.compile(r"vLLM API server version (\S+)")
_BLOCK_SIZE_IN_LOG = re.compile(r"\bblock_size['\"]?\s*[=:]\s*(\d+)")
_SERVER_MARKERS = re.compile(
    r"vLLM API server version|Avg prompt throughput|non-default args|Starting vLLM API server"
    r"|GPU KV cache size|# GPU blocks|vllm\.entrypoints|Uvicorn running on")

_HARDWARE = re.compile(r"uncorrectable ECC|ECC error|illegal memory access|NVRM: Xid|\bXid \d+|Xid \(PCI:", re.I)
_HARDWARE_WORDS = ("ecc", "illegal memory access", "xid")   # a cheap test before the regex
FAILURE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("hardware_error", _HARDWARE),
    ("out_of_memory", re.compile(
        r"No available memory for the cache blocks|CUDA out of memory|OutOfMemoryError"
        r"|larger than the maximum number of tokens that can be stored in KV cache", re.I)),
    ("server_start_failed", re.compile(r"Address already in use|error while attempting to bind", re.I)),
)
"""Failure causes recognised in server and client logs, most specific first."""


def looks_like_server_log(text: str) -> bool:
    """Whether a log's text (its beginning suffices) is a vLLM server's."""
    return _SERVER_MARKERS.search(text) is not None


def _without_test_prompt(running: np.ndarray, waiting: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stats lines without a leading one that shows only the client's single test prompt.

    V0 logs on the first engine step after 5 idle seconds, which is the test prompt the
    benchmark client sends before its burst (``Running: 1 reqs``, nothing waiting): on the public
    traces 20 of the 22 runs at B >= 256 start so, biasing their log mean low by 4-8%.
    """
    active = np.flatnonzero(running + waiting > 0)
    if len(active) > 1 and running[active[0]] == 1 and waiting[active[0]] == 0 and (
            running[active[1]] > 1 or waiting[active[1]] > 0):
        keep = np.ones(len(running), dtype=bool)
        keep[active[0]] = False
        return running[keep], waiting[keep]
    return running, waiting


def parse_server_log_batch(text: str) -> EngineMetrics | None:
    """Mean running batch from the server's periodic stats lines (the client's test prompt
    excluded); None if there are none."""
    matches = list(_STATS_LINE.finditer(text))
    if not matches:
        return None
    running, waiting = _without_test_prompt(np.array([float(m["running"]) for m in matches]),
                                            np.array([float(m["waiting"]) for m in matches]))
    kv = [float(m["kv"]) / 100.0 for m in matches if m["kv"] is not None]
    mean_batch, n_active = mean_running_over_active_window(running, waiting)
    return EngineMetrics(mean_batch, max(kv) if kv else math.nan, math.nan, n_active, float(running.max()))


def preemptions_in_log(text: str) -> float:
    """Preemptions the log reports (a lower bound: V0 warns at the 1st, 51st, ... one); NaN if none."""
    matches = list(_PREEMPTION_LINE.finditer(text))
    if not matches:
        return math.nan
    totals = [int(m.group(1)) for m in matches if m.group(1)]
    return float(max(totals + [len(matches)]))


def _first_int(pattern: re.Pattern[str], text: str) -> int | None:
    match = pattern.search(text)
    return int(match.group(1).replace(",", "")) if match else None


def find_max_num_seqs_in_log(text: str) -> int | None:
    """``max_num_seqs=512`` (V0 args line) or ``'max_num_seqs': 512`` (V1 non-default args)."""
    return _first_int(_MAX_NUM_SEQS_IN_LOG, text)


def find_tensor_parallel_in_log(text: str) -> int | None:
    """``tensor_parallel_size=4`` (V0 args line) or ``'tensor_parallel_size': 4`` (V1 non-default
    args); None where the log does not state it (vLLM's default is 1)."""
    return _first_int(_TENSOR_PARALLEL_IN_LOG, text)


def find_pipeline_parallel_in_log(text: str) -> int | None:
    """``pipeline_parallel_size=2`` (V0 args line) or ``'pipeline_parallel_size': 2`` (V1 non-default
    args); None where the log does not state it (vLLM's default is 1)."""
    return _first_int(_PIPELINE_PARALLEL_IN_LOG, text)


def find_data_parallel_in_log(text: str) -> int | None:
    """``'data_parallel_size': 4`` (V1 non-default args); None where the log does not state it
    (vLLM's default is 1)."""
    return _first_int(_DATA_PARALLEL_IN_LOG, text)


def find_expert_parallel_in_log(text: str) -> bool | None:
    """``'enable_expert_parallel': True`` (V1 non-default args, as ``--enable-expert-parallel`` sets it);
    None where the log does not state it (vLLM's default is off)."""
    return True if _EXPERT_PARALLEL_IN_LOG.search(text) else None


def find_vllm_version_in_log(text: str) -> str | None:
    """The version the API server logs as it starts (``vLLM API server version 0.6.4``, written by
    ``run_server`` of ``vllm/entrypoints/openai/api_server.py``); None where the log lacks the line."""
    match = _VLLM_VERSION_IN_LOG.search(text)
    return match.group(1) if match else None


@dataclass(frozen=True)
class KvCacheSize:
    """The KV cache a server allocated, as its log states it."""

    capacity_tokens: float
    num_gpu_blocks: float
    block_size: float


def kv_cache_size_in_log(text: str, default_block_size: int = 16) -> KvCacheSize | None:
    """V1's ``GPU KV cache size: 123,456 tokens`` or V0's ``# GPU blocks: N`` (times the block
    size the log echoes, else vLLM's default 16); None when the log states neither."""
    block_size = _first_int(_BLOCK_SIZE_IN_LOG, text) or default_block_size
    tokens = _first_int(_V1_KV_TOKENS, text)
    if tokens is not None:
        return KvCacheSize(float(tokens), float(tokens // block_size), float(block_size))
    blocks = _first_int(_V0_GPU_BLOCKS, text)
    if blocks is not None:
        return KvCacheSize(float(blocks * block_size), float(blocks), float(block_size))
    return None


def _matching_line(text: str, match: re.Match[str]) -> str:
    line_start = text.rfind("\n", 0, match.start()) + 1
    line_end = text.find("\n", match.end())
    return text[line_start: line_end if line_end >= 0 else None].strip()[:200]


def classify_failure(log_texts: dict[str, str]) -> tuple[str, str] | None:
    """First known failure cause found in the logs: (reason code, 'file: matching line')."""
    for reason, pattern in FAILURE_PATTERNS:
        for name in sorted(log_texts):
            match = pattern.search(log_texts[name])
            if match:
                return reason, f"{name}: {_matching_line(log_texts[name], match)}"
    return None


def find_hardware_error(log_texts: dict[str, str]) -> tuple[str, str] | None:
    """(file, matching line) of the first GPU fault (ECC, illegal memory access, Xid) in the logs."""
    for name in sorted(log_texts):
        lowered = log_texts[name].lower()
        if not any(word in lowered for word in _HARDWARE_WORDS):
            continue
        match = _HARDWARE.search(log_texts[name])
        if match:
            return name, _matching_line(log_texts[name], match)
    return None
