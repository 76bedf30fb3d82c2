"""Prometheus text-format scrapes of a vLLM server's ``/metrics`` endpoint, and the
``vllm:cache_config_info`` gauge (the public traces keep it alone in ``cache_config*.txt``).

Scrapes are parsed with ``prometheus_client.parser``. A file may hold one scrape or many
appended one after another (``curl .../metrics >> scrapes.prom``); every occurrence of the
``vllm:num_requests_running`` family starts a new scrape. Per scrape, the gauges of all
engines are summed (KV usage: the fullest engine). Lines of other metric families (histogram
buckets make up most of a scrape) are dropped before parsing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from slim.errors import TraceFormatError
from slim.traces.engine_metrics import SOURCE_PROMETHEUS_TEXT, MetricsSeries
from slim.traces.tree import read_text

RUNNING = "vllm:num_requests_running"
_SAMPLES = {
    RUNNING: "running",
    "vllm:num_requests_waiting": "waiting",
    "vllm:gpu_cache_usage_perc": "kv_usage",
    "vllm:kv_cache_usage_perc": "kv_usage",
    "vllm:num_preemptions_total": "preemptions",
    "vllm:num_preemptions": "preemptions",
}
CACHE_CONFIG_INFO = "vllm:cache_config_info"
_KEPT_NAMES = tuple(_SAMPLES) + (CACHE_CONFIG_INFO,)
_METRIC_NAME = re.compile(r"^\s*(?:#\s*(?:HELP|TYPE)\s+)?([A-Za-z_:][\w:]*)")


def _relevant_text(text: str) -> str:
    """Only the lines (samples and their HELP/TYPE) of the families ingest reads."""
    kept = []
    for line in text.splitlines():
        match = _METRIC_NAME.match(line)
        if match and match.group(1) in _KEPT_NAMES:
            kept.append(line)
    return "\n".join(kept) + "\n"


def _families(text: str, name: str):
    try:
        yield from text_string_to_metric_families(_relevant_text(text))
    except (ValueError, TypeError, IndexError) as error:
        raise TraceFormatError(f"{name}: not valid Prometheus text format ({error})", path=name) from error


def looks_like_scrape(text: str) -> bool:
    """Whether a file's beginning holds vLLM's running-requests gauge in text format."""
    return re.search(r"^vllm:num_requests_running[{ ]", text, re.M) is not None


def read_scrapes(paths: Iterable[Path]) -> MetricsSeries:
    """One sample per scrape, over every file in order.

    Raises `UnreadableTraceError` or `TraceFormatError` naming the file at fault.
    """
    paths = list(paths)
    scrapes: list[dict[str, float]] = []
    for path in paths:
        scrapes.append({})   # a file starts a scrape
        for family in _families(read_text(path), path.name):
            if family.name == RUNNING and "running" in scrapes[-1]:
                scrapes.append({})
            current = scrapes[-1]
            for sample in family.samples:
                logical = _SAMPLES.get(sample.name)
                if logical is None:
                    continue
                value = float(sample.value)
                if logical == "kv_usage":
                    current[logical] = max(current.get(logical, -math.inf), value)
                else:
                    current[logical] = current.get(logical, 0.0) + value
    scrapes = [scrape for scrape in scrapes if scrape]
    name = paths[0].name if paths else "(no file)"
    if not any("running" in scrape for scrape in scrapes):
        raise TraceFormatError(f"{name}: no {RUNNING} samples", path=name)

    def column(logical: str) -> np.ndarray | None:
        if not any(logical in scrape for scrape in scrapes):
            return None
        return np.array([scrape.get(logical, math.nan) for scrape in scrapes], dtype=np.float64)

    return MetricsSeries(name, SOURCE_PROMETHEUS_TEXT, column("running"), column("waiting"), column("kv_usage"),
                         column("preemptions"))


def parse_cache_config(path: Path) -> dict[str, str]:
    """Labels of the ``vllm:cache_config_info`` gauge (num_gpu_blocks, block_size, ...)."""
    for family in _families(read_text(path), path.name):
        for sample in family.samples:
            if sample.name == CACHE_CONFIG_INFO:
                return dict(sample.labels)
    raise TraceFormatError(f"{path.name}: no {CACHE_CONFIG_INFO} line", path=path.name)
