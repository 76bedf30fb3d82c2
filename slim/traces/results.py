"""Benchmark result files: the client's summary of each run, from every producer we read.

One file can hold one result or several:

* ``benchmarks/benchmark_serving.py`` (the public traces) and ``vllm bench serve
  --save-result [--save-detailed]`` write one JSON object per file;
* ``vllm bench serve --append-result`` appends one object per run to the same file;
* ``vllm bench sweep serve`` writes ``run=<n>.json`` per repetition (the bench result plus the
  serve and bench overrides of the sweep point and ``run_number``) and a ``summary.json``
  list of them per point;
* GuideLLM writes ``benchmarks.json``: one report holding a whole sweep (`slim.traces.guidellm`);
* ``vllm bench latency`` and ``vllm bench throughput --output-json`` write one offline result
  (`slim.traces.offline_json`), kept in its own keys.

Every other result becomes a `ResultRecord` whose content uses ``vllm bench serve`` keys.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slim.errors import TraceFormatError
from slim.traces import guidellm
from slim.traces.offline_json import offline_format
from slim.traces.tree import read_text

FORMAT_BENCHMARK_SERVING = "benchmark_serving"
FORMAT_VLLM_BENCH_SERVE = "vllm_bench_serve"
FORMAT_VLLM_BENCH_SWEEP = "vllm_bench_sweep"
FORMAT_GUIDELLM = guidellm.FORMAT_GUIDELLM

# Keys only the current `vllm bench serve` writes.
_BENCH_SERVE_MARKERS = ("max_concurrency", "mean_e2el_ms", "endpoint_type", "failed")
REQUIRED_SUMMARY_KEYS = ("completed", "duration", "total_input_tokens", "total_output_tokens")
SWEEP_RUN_FILE = re.compile(r"^run=(\d+)\.json$")
SWEEP_FAILURE_FILE = re.compile(r"^run=(\d+)\.failure\.json$")
SWEEP_SUMMARY_FILE = "summary.json"


@dataclass(frozen=True)
class ResultRecord:
    """One run's client-side summary: its content, the file it came from and its place in it."""

    content: dict[str, Any]
    path: Path
    index: int | None        # position in a file of several results; None when the file holds one
    trace_format: str

    @property
    def label(self) -> str:
        """``file`` or ``file[i]``: how the record is named inside its run directory."""
        return self.path.name if self.index is None else f"{self.path.name}[{self.index}]"


def _decode_all(text: str, name: str) -> list[Any]:
    """Every JSON value in `text`: one, or several written one after another (--append-result)."""
    decoder = json.JSONDecoder()
    values, position = [], 0
    try:
        while True:
            while position < len(text) and text[position].isspace():
                position += 1
            if position >= len(text):
                break
            value, position = decoder.raw_decode(text, position)
            values.append(value)
    except json.JSONDecodeError as error:
        raise TraceFormatError(f"{name}: not valid JSON ({error})", path=name) from error
    except RecursionError as error:
        raise TraceFormatError(f"{name}: not valid JSON (nested too deeply to parse)", path=name) from error
    if not values:
        raise TraceFormatError(f"{name}: empty file", path=name)
    return values


def _summary_format(content: dict[str, Any], path: Path) -> str:
    if "run_number" in content or SWEEP_RUN_FILE.match(path.name):
        return FORMAT_VLLM_BENCH_SWEEP
    if any(key in content for key in _BENCH_SERVE_MARKERS):
        return FORMAT_VLLM_BENCH_SERVE
    return FORMAT_BENCHMARK_SERVING


def check_summary(content: Any, label: str) -> dict[str, Any]:
    """`content` as a result object; `TraceFormatError` naming `label` if it is not one."""
    name = label.split("[", 1)[0]
    if not isinstance(content, dict):
        raise TraceFormatError(f"{label}: expected a JSON object, got {type(content).__name__}", path=name)
    missing = [key for key in REQUIRED_SUMMARY_KEYS if key not in content]
    if missing:
        raise TraceFormatError(f"{label}: missing key(s) {', '.join(missing)}", path=name)
    return content


def read_result_records(path: Path) -> list[ResultRecord]:
    """Every benchmark result in one file, in file order.

    Raises `TraceFormatError` naming the file for unreadable or invalid JSON (including JSON
    nested too deeply to parse), a value that is not a result, or missing summary keys.
    """
    values = _decode_all(read_text(path).removeprefix("\ufeff"), path.name)   # a UTF-8 byte order mark is no error
    if len(values) == 1 and guidellm.is_report(values[0]):
        contents = guidellm.report_results(values[0], path.name)
        if len(contents) == 1:
            return [ResultRecord(contents[0], path, None, FORMAT_GUIDELLM)]
        return [ResultRecord(content, path, index, FORMAT_GUIDELLM) for index, content in enumerate(contents)]
    if len(values) == 1 and isinstance(values[0], list) and path.name == SWEEP_SUMMARY_FILE:
        values = values[0]   # a sweep point's summary: the list of its run=<n>.json results
        if not values:
            raise TraceFormatError(f"{path.name}: empty list of results", path=path.name)
        records = []
        for index, value in enumerate(values):
            content = check_summary(value, f"{path.name}[{index}]")
            records.append(ResultRecord(content, path, index, FORMAT_VLLM_BENCH_SWEEP))
        return records
    if len(values) == 1 and offline_format(values[0]):
        return [ResultRecord(values[0], path, None, offline_format(values[0]))]
    if len(values) == 1:
        content = check_summary(values[0], path.name)
        return [ResultRecord(content, path, None, _summary_format(content, path))]
    records = []
    for index, value in enumerate(values):
        content = check_summary(value, f"{path.name}[{index}]")
        records.append(ResultRecord(content, path, index, _summary_format(content, path)))
    return records


def load_benchmark_json(path: Path) -> tuple[dict[str, Any], str]:
    """The single result of a benchmark result file: (content, trace format).

    Raises `TraceFormatError` as `read_result_records` does, and when the file holds several results.
    """
    records = read_result_records(path)
    if len(records) != 1:
        raise TraceFormatError(f"{path.name}: holds {len(records)} results, expected one", path=path.name)
    return records[0].content, records[0].trace_format


def read_sweep_failure(path: Path) -> str:
    """The error a ``vllm bench sweep serve --continue-on-error`` failure file records."""
    values = _decode_all(read_text(path), path.name)
    content = values[0] if isinstance(values[0], dict) else {}
    return f"{content.get('error_type', 'error')}: {content.get('error', 'no message')}"
