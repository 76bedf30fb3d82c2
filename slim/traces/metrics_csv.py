"""Metrics CSVs: scheduler gauges sampled about once a second, one row per sample.

Three header styles are read: the public traces' bare names (``num_requests_running``), the
Prometheus names of either engine (``vllm:num_requests_running``; KV usage as
``vllm:gpu_cache_usage_perc`` in V0 or ``vllm:kv_cache_usage_perc`` in V1), and Grafana or
Prometheus range-query exports whose headers carry the label set
(``vllm:num_requests_running{engine="0",model_name="..."}``); several columns of one gauge
(one per engine) are summed per row. Only the needed columns are read, as float64, so a
file of hundreds of megabytes stays within a small, fixed memory budget.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd

from slim.errors import TraceFormatError
from slim.traces.engine_metrics import SOURCE_METRICS_CSV, EngineMetrics, MetricsSeries, batch_metrics
from slim.traces.tree import read_text

METRIC_ALIASES: dict[str, tuple[str, ...]] = {
    "running": ("num_requests_running", "vllm:num_requests_running"),
    "waiting": ("num_requests_waiting", "vllm:num_requests_waiting"),
    "kv_usage": (
        "gpu_cache_usage_perc", "vllm:gpu_cache_usage_perc",
        "kv_cache_usage_perc", "vllm:kv_cache_usage_perc",
    ),
    "preemptions": ("num_preemptions_total", "vllm:num_preemptions_total", "vllm:num_preemptions"),
}
"""Column names (label sets stripped) of each logical series, first match wins."""

_CHUNK_ROWS = 500_000
_HEADER_BYTES = 65_536


def _base_name(header: str) -> str:
    """``'vllm:num_requests_running{engine="0"}'`` -> ``'vllm:num_requests_running'``."""
    return str(header).split("{", 1)[0].strip().strip('"')


def _columns_of(headers: list[str]) -> dict[str, list[int]]:
    """Positions of the columns of each logical series (several for a per-engine export)."""
    by_name: dict[str, list[int]] = {}
    for position, header in enumerate(headers):
        by_name.setdefault(_base_name(header), []).append(position)
    found = {}
    for logical, aliases in METRIC_ALIASES.items():
        for alias in aliases:
            if alias in by_name:
                found[logical] = by_name[alias]
                break
    return found


def _read_header(path: Path) -> list[str]:
    """The column names: the first CSV record of the file."""
    head = read_text(path, _HEADER_BYTES)
    try:
        header = next(csv.reader(io.StringIO(head)), None)
    except csv.Error as error:
        raise TraceFormatError(f"{path.name}: unparseable CSV header ({error})", path=path.name) from error
    if not header:
        raise TraceFormatError(f"{path.name}: empty file", path=path.name)
    return header


def _read_chunks(path: Path, positions: list[int], as_text: bool) -> list[pd.DataFrame]:
    """The columns at `positions` in chunks of float64: parsed as numbers directly, or (when a
    cell holds text) read as text and converted, text cells becoming NaN."""
    options = {"usecols": positions, "encoding_errors": "replace"}
    if not as_text:
        return list(pd.read_csv(path, dtype=np.float64, chunksize=_CHUNK_ROWS, **options))
    reader = pd.read_csv(path, dtype=str, chunksize=_CHUNK_ROWS // 5, **options)
    return [chunk.apply(pd.to_numeric, errors="coerce").astype(np.float64) for chunk in reader]


def _read_columns(path: Path, positions: list[int]) -> pd.DataFrame:
    """The columns at `positions` as float64, read in chunks so memory stays bounded."""
    try:
        try:
            chunks = _read_chunks(path, positions, as_text=False)
        except ValueError:   # a cell that is not a number (text, "null"): the slower, tolerant path
            chunks = _read_chunks(path, positions, as_text=True)
    except (pd.errors.ParserError, ValueError, OverflowError) as error:
        raise TraceFormatError(f"{path.name}: unparseable CSV ({error})", path=path.name) from error
    if not chunks:
        return pd.DataFrame(columns=positions, dtype=np.float64)
    return pd.concat(chunks, ignore_index=True)


def read_metrics_csv(path: Path) -> MetricsSeries:
    """The gauge samples of one metrics CSV.

    Raises `UnreadableTraceError` when the file cannot be opened and `TraceFormatError`
    naming the file when it is empty, unparseable or has no ``num_requests_running`` column.
    """
    headers = _read_header(path)
    positions = _columns_of(headers)
    if "running" not in positions:
        raise TraceFormatError(f"{path.name}: no num_requests_running column (have: {', '.join(headers)})",
                               path=path.name)
    wanted = sorted({p for group in positions.values() for p in group})
    frame = _read_columns(path, wanted)
    frame.columns = wanted
    series: dict[str, np.ndarray] = {}
    for logical, group in positions.items():
        values = frame[group].sum(axis=1, min_count=len(group)) if len(group) > 1 else frame[group[0]]
        if logical == "kv_usage" and len(group) > 1:
            values = frame[group].max(axis=1)   # engines' usage is per engine: the fullest one matters
        series[logical] = values.to_numpy(dtype=np.float64)
    return MetricsSeries(path.name, SOURCE_METRICS_CSV, series["running"], series.get("waiting"),
                         series.get("kv_usage"), series.get("preemptions"))


def parse_engine_metrics(path: Path) -> EngineMetrics:
    """Parse a ``metrics_engine*.csv`` (Prometheus gauges about once a second)."""
    return batch_metrics(read_metrics_csv(path))


def looks_like_metrics_csv(header_line: str) -> bool:
    """Whether a CSV's first line names the running-requests gauge (any of the header styles)."""
    return "num_requests_running" in header_line
