"""Prometheus text-format scrapes of a vLLM server's ``/metrics`` endpoint, and the
``vllm:cache_config_info`` gauge (the public traces keep it alone in ``cache_config*.txt``).

Scrapes are parsed with ``prometheus_client.parser``. A file may hold one scrape or many
appended one after another (``curl .../metrics >> scrapes.prom``); every occurrence of the
``vllm:num_requests_running`` family starts a new scrape. Per scrape, the gauges of all
engines are summed (KV usage: the fullest engine). Lines of other metric families (histogram
buckets make up most of a scrape) are dropped before parsing, but for the latency histograms
(`read_latency_histograms`: what the run added to them between its first and last scrape).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from slim.errors import TraceFormatError
from slim.traces.engine_metrics import SOURCE_PROMETHEUS_TEXT, MetricsSeries
from slim.traces.latency import HISTOGRAM_QUANTITIES, histogram_statistics
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
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count", "_created")


def _relevant_text(text: str, histograms: bool = False) -> str:
    """Only the lines (samples and their HELP/TYPE) of the families ingest reads: the gauges, and
    with `histograms` the latency histograms too."""
    kept = []
    for line in text.splitlines():
        match = _METRIC_NAME.match(line)
        if not match:
            continue
        name = match.group(1)
        if name in _KEPT_NAMES:
            kept.append(line)
        elif histograms and (name in HISTOGRAM_QUANTITIES or any(
                name.endswith(suffix) and name.removesuffix(suffix) in HISTOGRAM_QUANTITIES
                for suffix in _HISTOGRAM_SUFFIXES)):
            kept.append(line)
    return "\n".join(kept) + "\n"


def _families(text: str, name: str, histograms: bool = False):
    from prometheus_client.parser import text_string_to_metric_families

    try:
        yield from text_string_to_metric_families(_relevant_text(text, histograms))
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


def read_latency_histograms(paths: Iterable[Path]) -> dict[str, float]:
    """The latency statistics of vLLM's histograms (`slim.traces.latency.HISTOGRAM_QUANTITIES`) over
    the run: the buckets of its last scrape less those of its first (the counters count since the
    server started; one scrape: since then), all engines summed; empty where no scrape holds one.

    Raises `UnreadableTraceError` or `TraceFormatError` naming the file at fault."""
    scrapes: list[dict[str, dict[str, float]]] = []
    for path in paths:
        scrapes.append({})
        for family in _families(read_text(path), path.name, histograms=True):
            if family.name == RUNNING and scrapes[-1].get("running"):
                scrapes.append({})
            if family.name == RUNNING:
                scrapes[-1]["running"] = {"seen": 1.0}
            quantity = HISTOGRAM_QUANTITIES.get(family.name)
            if quantity is None:
                continue
            current = scrapes[-1].setdefault(quantity, {})
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    key = f"le={float(sample.labels['le'])!r}"
                elif sample.name.endswith("_sum"):
                    key = "sum"
                else:
                    continue
                current[key] = current.get(key, 0.0) + float(sample.value)
    stats: dict[str, float] = {}
    for quantity in dict.fromkeys(HISTOGRAM_QUANTITIES.values()):
        seen = [scrape[quantity] for scrape in scrapes if quantity in scrape]
        if not seen:
            continue
        last, first = seen[-1], (seen[0] if len(seen) > 1 else {})
        bounds = sorted(float(key[3:]) for key in last if key.startswith("le="))
        cumulative = np.array([last[f"le={b!r}"] - first.get(f"le={b!r}", 0.0) for b in bounds])
        if not bounds or not np.isfinite(cumulative).all() or (np.diff(cumulative) < 0).any():
            continue
        stats.update(histogram_statistics(quantity, np.array(bounds), cumulative,
                                          last.get("sum", 0.0) - first.get("sum", 0.0)))
    return stats
