"""Stage 1: turn a tree of vLLM benchmark run directories into one row per run.

Ingest never raises on bad run data: a run it cannot use still gets a row, with
a reason code in ``status`` and the evidence in ``reason_detail`` (see
`REASON_CODES`). Only a missing trace root is an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from slim import columns as col
from slim.errors import ConfigError, TraceFormatError
from slim.specs.architecture import ArchitectureCatalog
from slim.traces.files import (
    EngineMetrics,
    classify_failure,
    find_max_num_seqs_in_log,
    find_tensor_parallel_in_log,
    load_benchmark_json,
    parse_cache_config,
    parse_engine_metrics,
    parse_namespace_line,
    parse_server_flags,
    parse_server_log_batch,
)

REASON_CODES: dict[str, str] = {
    "ok": "usable measurement",
    "server_start_failed": "server never started: port clash (Address already in use)",
    "out_of_memory": "server ran out of GPU memory (weights or KV cache do not fit)",
    "hardware_error": "GPU hardware fault (ECC error, illegal memory access)",
    "failed_unknown": "no benchmark JSON and no known failure cause in the logs",
    "corrupt": "a file of the run cannot be parsed (file and parse error named)",
    "ambiguous_results": "several benchmark JSON files in one run directory",
    "invalid_values": "NaN, negative or zero values where a measurement is required",
    "missing_metrics": "no mean batch size: neither metrics CSV nor server stats lines usable",
    "missing_metadata": "max_num_seqs could not be determined",
    "incomplete": "completed < num_prompts (or nothing completed)",
    "unknown_model": "model not in config/models.yaml",
    "preempted": "KV cache overflowed: requests were preempted (excluded by default)",
    "duplicate": "same configuration measured again; the first run (by path) is kept",
}
"""Every status a run can get, with its meaning (cleaning report legend)."""

_RUN_FILE_PATTERNS = ("*.json", "metrics_engine*.csv", "server_out*.log", "server_err*.log",
                      "log_*.out", "cache_config*.txt")
_LOG_PATTERNS = ("server_out*.log", "server_err*.log", "log_*.out", "log_*.err")
_DIR_MAX_NUM_SEQS = re.compile(r"^_(\d+)_")


def find_run_dirs(trace_root: Path) -> list[Path]:
    """Every directory under `trace_root` that holds files of a benchmark run, sorted."""
    if not trace_root.is_dir():
        raise ConfigError(
            f"trace directory '{trace_root}' does not exist; set datasets.<name>.trace_dir "
            "in config/config.yaml to a folder of vLLM benchmark run directories"
        )
    run_dirs = {
        path.parent
        for pattern in _RUN_FILE_PATTERNS
        for path in trace_root.rglob(pattern)
        if path.is_file()
    }
    return sorted(run_dirs)


def _read_logs(run_dir: Path) -> dict[str, str]:
    texts: dict[str, str] = {}
    for pattern in _LOG_PATTERNS:
        for path in sorted(run_dir.glob(pattern)):
            texts[path.name] = path.read_text(errors="replace")
    return texts


def _empty_row(dataset: str, run_id: str) -> dict[str, Any]:
    """A row of `columns.RUN_COLUMNS` before anything is read: NaN measurements, status ``ok``."""
    return {
        col.DATASET: dataset, col.RUN_ID: run_id, col.TRACE_FORMAT: None, col.MODEL: None,
        col.MAX_NUM_SEQS: math.nan, col.TENSOR_PARALLEL: 1, col.NUM_PROMPTS: math.nan,
        col.INPUT_LEN_MEAN: math.nan, col.OUTPUT_LEN_MEAN: math.nan,
        col.INPUT_LEN_NOMINAL: math.nan, col.OUTPUT_LEN_NOMINAL: math.nan,
        col.COMPLETED: math.nan, col.FAILED: math.nan, col.DURATION_S: math.nan,
        col.REQUEST_THROUGHPUT: math.nan, col.TOTAL_TOKEN_THROUGHPUT: math.nan,
        col.OUTPUT_TOKEN_THROUGHPUT: math.nan, col.MEAN_TTFT_MS: math.nan,
        col.MEAN_TPOT_MS: math.nan, col.MEAN_ITL_MS: math.nan, col.MEAN_E2EL_MS: math.nan,
        col.MEAN_BATCH_SIZE: math.nan, col.BATCH_SIZE_SOURCE: None,
        col.MAX_KV_CACHE_USAGE: math.nan, col.NUM_PREEMPTIONS: math.nan,
        col.NUM_GPU_BLOCKS: math.nan, col.BLOCK_SIZE: math.nan, col.KV_CAPACITY_TOKENS: math.nan,
        col.E2E_LATENCY_S: math.nan, col.STATUS: "ok", col.REASON_DETAIL: "",
    }


def _float(content: dict[str, Any], key: str) -> float:
    value = content.get(key)
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def _model_name(content: dict[str, Any], client_args: dict[str, Any], catalog: ArchitectureCatalog) -> str:
    raw = str(content.get("model_id") or client_args.get("model") or "")
    return catalog.resolve_name(raw) or raw.rstrip("/").rsplit("/", 1)[-1]


def _nominal_lengths(client_args: dict[str, Any], input_mean: float, output_mean: float) -> tuple[float, float]:
    """Sweep labels: the client's requested lengths where it fixed them, else the rounded means."""
    dataset_name = client_args.get("dataset_name")
    input_nominal, output_nominal = round(input_mean), round(output_mean)
    # `vllm bench serve --input-len/--output-len` overwrite the random_*/sharegpt_* lengths
    # only after the Namespace line is printed, so the general options win where set.
    if dataset_name == "random":
        input_nominal = client_args.get("input_len") or client_args.get("random_input_len") or input_nominal
        output_nominal = client_args.get("output_len") or client_args.get("random_output_len") or output_nominal
    elif dataset_name == "sharegpt" and (client_args.get("output_len") or client_args.get("sharegpt_output_len")):
        output_nominal = client_args.get("output_len") or client_args["sharegpt_output_len"]
    return float(input_nominal), float(output_nominal)


def _positive_int(value: Any) -> int | None:
    """An integer flag value (``8``, ``"8"``), or None for text such as ``"auto"`` or ``"$N"``."""
    try:
        number = int(str(value).strip())
    except ValueError:
        return None
    return number if number > 0 else None


def _server_setting(flag: str, find_in_log: Callable[[str], int | None], client_args: dict[str, Any],
                    logs: dict[str, str]) -> int | None:
    """A positive integer server flag (``--<flag>``) from the client's record of the server args,
    else from the first server log that states it; None if neither does."""
    flags = parse_server_flags(str(client_args.get("server_args", "")))
    from_flags = _positive_int(flags.get(flag))
    if from_flags is not None:
        return from_flags
    for name in sorted(logs):
        if name.startswith("server_out"):
            found = find_in_log(logs[name])
            if found is not None:
                return found
    return None


def _max_num_seqs(run_dir: Path, content: dict[str, Any], client_args: dict[str, Any],
                  logs: dict[str, str]) -> int | None:
    """--max-num-seqs from (in order) JSON metadata, client args, server log, directory name."""
    from_metadata = _positive_int(content.get("max_num_seqs"))
    if from_metadata is not None:
        return from_metadata
    found = _server_setting("max-num-seqs", find_max_num_seqs_in_log, client_args, logs)
    if found is not None:
        return found
    match = _DIR_MAX_NUM_SEQS.match(run_dir.name)
    return int(match.group(1)) if match else None


def _tensor_parallel(client_args: dict[str, Any], logs: dict[str, str]) -> int:
    """--tensor-parallel-size from the client args or the server log; 1 (vLLM's default) if unset."""
    found = _server_setting("tensor-parallel-size", find_tensor_parallel_in_log, client_args, logs)
    return found if found is not None else 1


def _engine_metrics(run_dir: Path, logs: dict[str, str]) -> tuple[EngineMetrics | None, str, str]:
    """(metrics, source, note): the metrics CSV first, the server log's stats lines as fallback."""
    notes = []
    for path in sorted(run_dir.glob("metrics_engine*.csv")):
        try:
            metrics = parse_engine_metrics(path)
        except TraceFormatError as error:
            notes.append(str(error))
            continue
        if not math.isnan(metrics.mean_batch_size):
            return metrics, "metrics_csv", "; ".join(notes)
        notes.append(f"{path.name}: no sample with running requests")
    for name in sorted(logs):
        if name.startswith("server_out"):
            metrics = parse_server_log_batch(logs[name])
            if metrics is not None and not math.isnan(metrics.mean_batch_size):
                return metrics, "server_log", "; ".join(notes)
    return None, "", "; ".join(notes) or "no metrics_engine CSV and no server stats lines"


def _detailed_lengths(content: dict[str, Any]) -> tuple[float, float] | None:
    """Mean lengths from `--save-detailed` per-request lists, counting successful requests."""
    input_lens, output_lens = content.get("input_lens"), content.get("output_lens")
    if not isinstance(input_lens, list) or not isinstance(output_lens, list) or not output_lens:
        return None
    pairs = [(i, o) for i, o in zip(input_lens, output_lens) if isinstance(o, (int, float)) and o > 0]
    if not pairs:
        return None
    return (sum(i for i, _ in pairs) / len(pairs), sum(o for _, o in pairs) / len(pairs))


def _client_args(logs: dict[str, str]) -> dict[str, Any]:
    """The benchmark client's arguments: the first ``Namespace(...)`` line of a ``log_*.out``."""
    for name in sorted(logs):
        if name.startswith("log_") and name.endswith(".out"):
            client_args = parse_namespace_line(logs[name])
            if client_args:
                return client_args
    return {}


Verdict = tuple[str, str]
"""A run's status (a key of `REASON_CODES`) and the evidence for it."""


def _failed_run(row: dict[str, Any], logs: dict[str, str], client_args: dict[str, Any],
                catalog: ArchitectureCatalog) -> Verdict:
    """A run that wrote no benchmark JSON: the failure its logs name, if any."""
    if client_args.get("model"):
        row[col.MODEL] = _model_name({}, client_args, catalog)
    failure = classify_failure(logs)
    if failure:
        return failure
    return ("failed_unknown", "no benchmark JSON; logs name no known cause "
            f"(looked in: {', '.join(sorted(logs)) or 'no log files'})")


def _read_benchmark_summary(row: dict[str, Any], content: dict[str, Any], client_args: dict[str, Any]) -> None:
    """The client's summary: counts, duration, throughputs and mean latencies."""
    row[col.COMPLETED] = _float(content, "completed")
    row[col.FAILED] = _float(content, "failed") if "failed" in content else math.nan
    num_prompts = _float(content, "num_prompts")
    if math.isnan(num_prompts):
        num_prompts = float(client_args.get("num_prompts") or math.nan)
    row[col.NUM_PROMPTS] = num_prompts
    row[col.DURATION_S] = _float(content, "duration")
    row[col.REQUEST_THROUGHPUT] = _float(content, "request_throughput")
    row[col.TOTAL_TOKEN_THROUGHPUT] = _float(content, "total_token_throughput")
    row[col.OUTPUT_TOKEN_THROUGHPUT] = _float(content, "output_throughput")
    for column, key in ((col.MEAN_TTFT_MS, "mean_ttft_ms"), (col.MEAN_TPOT_MS, "mean_tpot_ms"),
                        (col.MEAN_ITL_MS, "mean_itl_ms"), (col.MEAN_E2EL_MS, "mean_e2el_ms")):
        row[column] = _float(content, key)


def _read_cache_config(row: dict[str, Any], run_dir: Path) -> None:
    """vLLM's KV reservation from the first readable ``cache_config*.txt`` (blocks, block size)."""
    for path in sorted(run_dir.glob("cache_config*.txt")):
        try:
            cache = parse_cache_config(path)
        except TraceFormatError:
            continue
        try:
            row[col.NUM_GPU_BLOCKS] = float(cache["num_gpu_blocks"])
            row[col.BLOCK_SIZE] = float(cache.get("block_size", 16))
            row[col.KV_CAPACITY_TOKENS] = row[col.NUM_GPU_BLOCKS] * row[col.BLOCK_SIZE]
        except (KeyError, ValueError):
            pass
        break


def _read_engine_metrics(row: dict[str, Any], metrics: EngineMetrics | None, source: str) -> None:
    if metrics is not None:
        row[col.MEAN_BATCH_SIZE] = metrics.mean_batch_size
        row[col.BATCH_SIZE_SOURCE] = source
        row[col.MAX_KV_CACHE_USAGE] = metrics.max_kv_cache_usage
        row[col.NUM_PREEMPTIONS] = metrics.num_preemptions


def _measurement_verdict(row: dict[str, Any], json_name: str, content: dict[str, Any],
                         client_args: dict[str, Any], catalog: ArchitectureCatalog, max_num_seqs: int | None,
                         metrics: EngineMetrics | None, source: str, metrics_note: str) -> Verdict:
    """Whether a run's measurement is usable, checked in order: something completed, the
    summary is positive and finite, everything completed, the model is known, a batch size
    and ``max_num_seqs`` were found, nothing was preempted. Fills in the lengths and the
    Little's-law E2E latency on the way."""
    completed, num_prompts = row[col.COMPLETED], row[col.NUM_PROMPTS]
    if completed <= 0:
        return "incomplete", f"completed = {completed:g} of {num_prompts:g} prompts"
    lengths = _detailed_lengths(content) or (
        _float(content, "total_input_tokens") / completed, _float(content, "total_output_tokens") / completed)
    row[col.INPUT_LEN_MEAN], row[col.OUTPUT_LEN_MEAN] = lengths
    required = {
        "completed": completed,  # NaN (null or text in the JSON) would make the lengths NaN
        "duration": row[col.DURATION_S], "total_input_tokens": _float(content, "total_input_tokens"),
        "total_output_tokens": _float(content, "total_output_tokens"),
        "request_throughput": row[col.REQUEST_THROUGHPUT], "total_token_throughput": row[col.TOTAL_TOKEN_THROUGHPUT],
    }
    bad = [key for key, value in required.items() if not (value > 0)]  # NaN, zero and negatives all fail
    if bad:
        return "invalid_values", f"{json_name}: non-positive or NaN {', '.join(bad)}"
    row[col.INPUT_LEN_NOMINAL], row[col.OUTPUT_LEN_NOMINAL] = _nominal_lengths(
        client_args, row[col.INPUT_LEN_MEAN], row[col.OUTPUT_LEN_MEAN])
    if not math.isnan(num_prompts) and completed < num_prompts:
        return "incomplete", f"completed = {completed:g} of {num_prompts:g} prompts"
    if row[col.MODEL] not in catalog:
        return "unknown_model", f"model '{row[col.MODEL]}' is not in config/models.yaml"
    if metrics is None:
        return "missing_metrics", metrics_note
    if max_num_seqs is None:
        return "missing_metadata", "max_num_seqs not in JSON metadata, client args, server log or directory name"
    row[col.E2E_LATENCY_S] = row[col.MEAN_BATCH_SIZE] / row[col.REQUEST_THROUGHPUT]
    if row[col.NUM_PREEMPTIONS] > 0:
        return "preempted", f"num_preemptions_total = {row[col.NUM_PREEMPTIONS]:g}"
    return "ok", f"batch size from {source}" + (f" ({metrics_note})" if metrics_note else "")


def _run_verdict(row: dict[str, Any], run_dir: Path, logs: dict[str, str], catalog: ArchitectureCatalog) -> Verdict:
    """Fill `row` from the run's files as far as they can be read; the run's verdict."""
    client_args = _client_args(logs)
    json_paths = sorted(run_dir.glob("*.json"))
    if len(json_paths) > 1:
        return "ambiguous_results", "several JSON files: " + ", ".join(p.name for p in json_paths)
    if not json_paths:
        return _failed_run(row, logs, client_args, catalog)
    try:
        content, trace_format = load_benchmark_json(json_paths[0])
    except TraceFormatError as error:
        return "corrupt", str(error)
    row[col.TRACE_FORMAT] = trace_format
    row[col.MODEL] = _model_name(content, client_args, catalog)
    _read_benchmark_summary(row, content, client_args)
    max_num_seqs = _max_num_seqs(run_dir, content, client_args, logs)
    row[col.MAX_NUM_SEQS] = max_num_seqs if max_num_seqs is not None else math.nan
    row[col.TENSOR_PARALLEL] = _tensor_parallel(client_args, logs)
    _read_cache_config(row, run_dir)
    metrics, source, metrics_note = _engine_metrics(run_dir, logs)
    _read_engine_metrics(row, metrics, source)
    return _measurement_verdict(row, json_paths[0].name, content, client_args, catalog, max_num_seqs,
                                metrics, source, metrics_note)


def ingest_run_dir(run_dir: Path, trace_root: Path, dataset: str, catalog: ArchitectureCatalog) -> dict[str, Any]:
    """One row for one run directory; problems become a status, never an exception."""
    row = _empty_row(dataset, run_dir.relative_to(trace_root).as_posix())
    row[col.STATUS], row[col.REASON_DETAIL] = _run_verdict(row, run_dir, _read_logs(run_dir), catalog)
    return row


def ingest_traces(trace_root: str | Path, dataset: str, catalog: ArchitectureCatalog) -> pd.DataFrame:
    """One row per run directory under `trace_root` (see `slim.columns`), sorted by run_id."""
    trace_root = Path(trace_root)
    rows = [ingest_run_dir(run_dir, trace_root, dataset, catalog) for run_dir in find_run_dirs(trace_root)]
    frame = pd.DataFrame(rows, columns=list(col.RUN_COLUMNS))
    return frame.sort_values(col.RUN_ID, kind="stable").reset_index(drop=True)
