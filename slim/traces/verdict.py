"""The status every ingested run gets: a reason code (`REASON_CODES`), its evidence and the file at
fault; a row of the runs table before it is read (`empty_row`) and with its status (`with_verdict`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from slim import columns as col
from slim.errors import TraceFormatError, UnreadableTraceError

REASON_CODES: dict[str, str] = {
    "ok": "usable measurement",
    "server_start_failed": "server never started: port clash (Address already in use)",
    "out_of_memory": "server ran out of GPU memory (weights or KV cache do not fit)",
    "hardware_error": "GPU hardware fault (ECC error, illegal memory access, Xid) in the logs",
    "failed_unknown": "no benchmark result and no known failure cause in the logs",
    "unreadable": "a file of the run cannot be read (permission, dangling or looping symlink)",
    "corrupt": "a file of the run cannot be parsed (file and parse error named)",
    "ambiguous_results": "several benchmark results beside the server metrics of one run",
    "invalid_values": "NaN, infinite, negative or zero values where a measurement is required",
    "implausible": "values that contradict each other or vLLM's limits (batch above the cap, ...)",
    "missing_metrics": "no mean batch size: no usable metrics, server stats lines or latencies",
    "missing_metadata": "max_num_seqs could not be determined",
    "incomplete": "completed < num_prompts (or nothing completed)",
    "unknown_model": "model not in the models file",
    "preempted": "KV cache overflowed: requests were preempted (excluded by default)",
    "duplicate": "same configuration measured again; the first run (by path) is kept",
    "aggregated": "a repeated measurement of an offline point, averaged into the point's first run (by path)",
    "unsupported_model": ("a model SLIM's dense formula does not cover (routed experts, latent attention, per-layer "
                          "KV heads, a head_dim other than D / H_q, quantised weights)"),
    "unknown_hardware": "the accelerator a row names is not mapped to a key of the hardware file",
    "other_rows": "a row the dataset's `rows` selector leaves out (another accelerator's, per-accelerator)",
    "kv_cache_overflow": "offline static batch whose KV cache does not fit: its mean running batch is below B",
    "unsupported_benchmark": ("a benchmark option SLIM does not model (several sequences per prompt, beam search, "
                              "another engine than vLLM, disaggregated prefill and decode)"),
    "ingest_error": "ingest failed unexpectedly on this directory (traceback in the ingest log)",
}
"""Every status a run can get, with its meaning (cleaning report legend)."""


@dataclass(frozen=True)
class Verdict:
    """A run's status (a key of `REASON_CODES`), the evidence for it and the file at fault."""

    status: str
    detail: str
    file: str = ""

    @classmethod
    def of_error(cls, error: TraceFormatError) -> Verdict:
        status = "unreadable" if isinstance(error, UnreadableTraceError) else "corrupt"
        return cls(status, str(error), error.path or "")


def empty_row(dataset: str, run_id: str) -> dict[str, Any]:
    """A row of `columns.RUN_COLUMNS` before anything is read: NaN measurements, status ``ok``."""
    row: dict[str, Any] = {name: math.nan for name in col.RUN_COLUMNS}
    row.update({col.DATASET: dataset, col.RUN_ID: run_id, col.TRACE_FORMAT: None, col.MODEL: None,
                col.BENCHMARK_MODE: col.BenchmarkMode.ONLINE, col.HARDWARE: None, col.N_MEASUREMENTS: 1,
                col.TENSOR_PARALLEL: 1, col.PIPELINE_PARALLEL: 1, col.DATA_PARALLEL: 1, col.VLLM_VERSION: None,
                col.BATCH_SIZE_SOURCE: None, col.STATUS: "ok", col.REASON_DETAIL: "", col.FAULT_FILE: ""})
    return row


def gpus_per_server(row: dict[str, Any]) -> float:
    """``tensor_parallel x pipeline_parallel x data_parallel`` of a row (NaN where one is unknown): the
    GPUs one server occupies. Expert parallelism reuses these GPUs (vLLM spreads the experts over the
    tensor- and data-parallel ranks), so it adds none."""
    sizes = [row.get(name) for name in (col.TENSOR_PARALLEL, col.PIPELINE_PARALLEL, col.DATA_PARALLEL)]
    if not all(isinstance(size, (int, float)) and not isinstance(size, bool) and math.isfinite(size) and size > 0
               for size in sizes):
        return math.nan
    return float(math.prod(sizes))


def recorded_vllm_version(value: Any) -> str | None:
    """A run's `col.VLLM_VERSION` as recorded: the release's text, None where the run records none
    (missing, NaN or blank)."""
    return value.strip() if isinstance(value, str) and value.strip() else None


def with_verdict(row: dict[str, Any], verdict: Verdict) -> dict[str, Any]:
    row[col.STATUS], row[col.REASON_DETAIL], row[col.FAULT_FILE] = verdict.status, verdict.detail, verdict.file
    return row
