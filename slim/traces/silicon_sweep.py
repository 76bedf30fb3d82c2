"""AIConfigurator's silicon sweeps: a CSV of vLLM serving benchmarks in the layout of
``silicon_sample.csv`` (github.com/ai-dynamo/aiconfigurator), one row per model, precision, input
and output length, parallel layout and client concurrency, recognised by its header
(`looks_like_silicon_sweep`). Each row becomes one online run (``run_id`` = ``<file>[<row>]``).

What a row measured: a client keeping ``N`` requests in flight (a closed loop; ``N`` is
``silicon_concurrency=N`` in ``silicon_data_source``), prompts of ``isl`` random tokens, ``osl``
tokens generated per request, and a central TTFT and TPOT (``silicon_ttft_ms``,
``silicon_tpot_ms``) whose statistic, mean or median, the source does not state. They are filed
under vLLM's names ``mean_ttft_ms`` and ``mean_tpot_ms`` (so ``--slo mean_tpot_ms=25`` judges
them), and ``latency_source`` is `LATENCY_SOURCE_UNSTATED` so that a comparison can say so.

What is derived, not measured (`closed_loop_measurement`)::

    E2E                      = TTFT + (OSL - 1) x TPOT     (mean_e2el_ms and e2e_latency_s)
    request throughput       = N / E2E
    total-token throughput   = N (ISL + OSL) / E2E         (SLIM's T, Eq. 6)
    output-token throughput  = N OSL / E2E
    mean running batch       = N                           (batch_size_source closed_loop)

The client caps the running batch, so ``max_num_seqs`` = ``max_concurrency`` = ``N`` (the
server's own cap is not recorded, and nothing waits for admission below it); the request rate
is ``inf``. The source records no prompt count or duration: ``num_prompts`` is assumed to be
`PROMPTS_PER_REQUEST_IN_FLIGHT` x ``N`` (all completed), and the duration is ``num_prompts /
request throughput``; they scale only the GPU time a run is accounted for.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slim import columns as col
from slim.errors import TraceFormatError
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware
from slim.specs.served_precision import PRECISION_LABELS, ServedEntry, precision_of_label, served_entry
from slim.traces.static_batch import AcceleratorLookup
from slim.traces.summary_table import table_headers
from slim.traces.tree import read_text
from slim.traces.values import number
from slim.traces.verdict import Verdict, empty_row, with_verdict

FORMAT_SILICON_SWEEP = "aiconfigurator_silicon"
LATENCY_SOURCE_UNSTATED = "silicon_unstated_statistic"
"""`latency_source` of these runs: one central TTFT and TPOT each, mean or median, unstated."""
SOURCE_CLOSED_LOOP = "closed_loop"
"""`batch_size_source`: the running batch is the ``N`` requests the client keeps in flight."""
PROMPTS_PER_REQUEST_IN_FLIGHT = 10
"""The assumed ``num_prompts / N`` of every row (the source records no count)."""
SYSTEM_HARDWARE = {"h100_sxm": "h100-sxm-80gb"}
"""The source's ``system`` names -> keys of the hardware file; a dataset's ``table.hardware_map``
(or ``--table-columns``) maps others, and wins."""
MARKER_HEADERS = ("silicon_data_source", "silicon_ttft_ms", "silicon_tpot_ms")
REQUIRED_HEADERS = (*MARKER_HEADERS, "model_path", "isl", "osl", "tp_size")
_CONCURRENCY = re.compile(r"(?:^|[;\s])silicon_concurrency\s*=\s*([^;\s]+)")


def looks_like_silicon_sweep(headers: Sequence[str]) -> bool:
    """Whether a CSV header is this layout's (it names every one of `MARKER_HEADERS`)."""
    return set(MARKER_HEADERS) <= set(headers)


def is_silicon_sweep(path: Path) -> bool:
    """Whether the CSV at `path` has this layout's header."""
    return path.suffix.lower() == ".csv" and looks_like_silicon_sweep(table_headers(path))


def read_sweep_records(path: Path) -> list[tuple[str, dict[str, str] | Verdict]]:
    """Every data row of the CSV as (``file[i]``, its cells by header), in file order; a row whose
    number of cells differs from the header's is its `Verdict` (``corrupt``). Blank lines are skipped.

    Raises `TraceFormatError` naming the file when it lacks a header of `REQUIRED_HEADERS`."""
    lines = list(csv.reader(io.StringIO(read_text(path).removeprefix("\ufeff"))))
    rows = [line for line in lines if any(cell.strip() for cell in line)]
    header = [cell.strip() for cell in rows[0]] if rows else []
    missing = [name for name in REQUIRED_HEADERS if name not in header]
    if missing:
        raise TraceFormatError(f"{path.name}: lacks column(s) {', '.join(missing)} of an AIConfigurator silicon "
                               "sweep", path=path.name)
    width = len(str(max(len(rows) - 2, 0)))
    records: list[tuple[str, dict[str, str] | Verdict]] = []
    for index, cells in enumerate(rows[1:]):
        label = f"{path.name}[{index:0{width}d}]"
        if len(cells) != len(header):
            records.append((label, Verdict("corrupt", f"{label}: {len(cells)} cells, the header has {len(header)}",
                                           path.name)))
        else:
            records.append((label, {name: cell.strip() for name, cell in zip(header, cells)}))
    return records


@dataclass(frozen=True)
class ClosedLoop:
    """What a closed loop of ``N`` requests with a central TTFT and TPOT implies (module docstring)."""

    e2e_ms: float
    request_throughput_per_s: float
    total_token_throughput_per_s: float
    output_token_throughput_per_s: float


def closed_loop_measurement(ttft_ms: float, tpot_ms: float, input_len: float, output_len: float,
                            in_flight: float) -> ClosedLoop:
    """``E2E = TTFT + (OSL - 1) TPOT``; request, total-token and output-token throughputs ``N / E2E``,
    ``N (ISL + OSL) / E2E`` and ``N OSL / E2E`` per second (Little's law on a closed loop of ``N``)."""
    e2e_ms = ttft_ms + (output_len - 1) * tpot_ms
    e2e_s = e2e_ms / 1000.0
    return ClosedLoop(e2e_ms, in_flight / e2e_s, in_flight * (input_len + output_len) / e2e_s,
                      in_flight * output_len / e2e_s)


# ---------------------------------------------------------------- one row

def _size(record: dict[str, str], name: str, default: float) -> float:
    """A parallel size: `default` where empty, NaN where 0 (the source's "not applicable")."""
    text = record.get(name, "")
    if text == "":
        return default
    value = number(text)
    return math.nan if value == 0 else value


def _whole(value: float) -> float | int:
    return int(value) if math.isfinite(value) and value == int(value) else value


def _in_flight(record: dict[str, str], data_parallel: float) -> tuple[float, str] | Verdict:
    """``N``: ``silicon_concurrency`` of ``silicon_data_source``, else ``batch_size`` (requests per
    attention data-parallel rank) x ``attention_dp_size``; a Verdict where they disagree or neither is given."""
    match = _CONCURRENCY.search(record["silicon_data_source"])
    per_rank = number(record.get("batch_size", ""))
    from_ranks = per_rank * data_parallel
    if match is None:
        if math.isfinite(from_ranks):
            return from_ranks, (f"N = batch_size x attention_dp_size = {per_rank:g} x {data_parallel:g} "
                                "(silicon_data_source names no silicon_concurrency)")
        return Verdict("missing_metadata", "no silicon_concurrency in silicon_data_source and no batch_size: the "
                       "requests in flight are unknown")
    concurrency = number(match.group(1))
    if math.isfinite(concurrency) and math.isfinite(from_ranks) and concurrency != from_ranks:
        return Verdict("implausible", f"silicon_concurrency = {concurrency:g}, but batch_size x attention_dp_size "
                       f"= {per_rank:g} x {data_parallel:g} = {from_ranks:g}")
    return concurrency, "N = silicon_concurrency"


def _layout(row: dict[str, Any]) -> str:
    sizes = [f"TP {row[col.TENSOR_PARALLEL]:g}"]
    sizes += [f"{label} {row[name]:g}" for label, name in (("PP", col.PIPELINE_PARALLEL), ("DP", col.DATA_PARALLEL))
              if row[name] != 1]
    experts = ("" if not math.isfinite(row[col.EXPERT_PARALLEL]) or row[col.EXPERT_PARALLEL] <= 1
               else f", experts over EP {row[col.EXPERT_PARALLEL]:g}")
    gpus = math.prod(row[name] for name in (col.TENSOR_PARALLEL, col.PIPELINE_PARALLEL, col.DATA_PARALLEL))
    return f"{' x '.join(sizes)} = {gpus:g} GPU(s){experts}"


def _precision(record: dict[str, str]) -> tuple[str, str] | Verdict:
    """The precision the row's weights were served in (``precision``, else the GEMM or MoE quant
    mode) and how the row states it."""
    labels = {name: record.get(name, "") for name in ("precision", "gemm_quant_mode", "moe_quant_mode")}
    stated = ", ".join(f"{name} {value}" for name, value in labels.items() if value) or "precision empty"
    label = labels["precision"] or labels["gemm_quant_mode"] or labels["moe_quant_mode"]
    precision = precision_of_label(label)
    if precision is None:
        return Verdict("unknown_model", f"precision '{label}' names no weight format of the models file (known "
                       f"labels: {', '.join(sorted(name for name in PRECISION_LABELS if name))})")
    return precision, stated


def _fill_identity(row: dict[str, Any], record: dict[str, str]) -> None:
    """What the row says before anything is checked: format, version, model as named, lengths, layout."""
    row[col.TRACE_FORMAT], row[col.BENCHMARK_MODE] = FORMAT_SILICON_SWEEP, col.BenchmarkMode.ONLINE
    row[col.VLLM_VERSION] = record.get("backend_version") or None
    row[col.MODEL] = record["model_path"].rstrip("/").rsplit("/", 1)[-1] or None
    row[col.INPUT_LEN_MEAN] = row[col.INPUT_LEN_NOMINAL] = number(record["isl"])
    row[col.OUTPUT_LEN_MEAN] = row[col.OUTPUT_LEN_NOMINAL] = number(record["osl"])
    row[col.TENSOR_PARALLEL] = _whole(number(record["tp_size"]))
    row[col.PIPELINE_PARALLEL] = _whole(_size(record, "pp_size", 1.0))
    row[col.DATA_PARALLEL] = _whole(_size(record, "attention_dp_size", 1.0))
    row[col.EXPERT_PARALLEL] = _size(record, "moe_ep_size", math.nan)
    row[col.EXPERT_TENSOR_PARALLEL] = _size(record, "moe_tp_size", math.nan)
    row[col.MEAN_TTFT_MS] = number(record["silicon_ttft_ms"])
    row[col.MEAN_TPOT_MS] = number(record["silicon_tpot_ms"])
    row[col.LATENCY_SOURCE] = LATENCY_SOURCE_UNSTATED
    row[col.REQUEST_RATE] = math.inf


def _bad_values(row: dict[str, Any], in_flight: float) -> Verdict | None:
    values = {"isl": row[col.INPUT_LEN_MEAN], "osl": row[col.OUTPUT_LEN_MEAN], "tp_size": row[col.TENSOR_PARALLEL],
              "pp_size": row[col.PIPELINE_PARALLEL], "attention_dp_size": row[col.DATA_PARALLEL],
              "silicon_concurrency": in_flight, "silicon_ttft_ms": row[col.MEAN_TTFT_MS],
              "silicon_tpot_ms": row[col.MEAN_TPOT_MS]}
    bad = [name for name, value in values.items() if not (math.isfinite(value) and value > 0)]
    if bad:
        return Verdict("invalid_values", f"non-positive, infinite or NaN {', '.join(bad)}")
    fractional = [name for name, value in values.items() if not name.startswith("silicon_t") and value != int(value)]
    if fractional:
        return Verdict("invalid_values", f"{', '.join(fractional)} must be whole numbers")
    return None


def _fill_measurement(row: dict[str, Any], in_flight: float) -> ClosedLoop:
    loop = closed_loop_measurement(row[col.MEAN_TTFT_MS], row[col.MEAN_TPOT_MS], row[col.INPUT_LEN_MEAN],
                                   row[col.OUTPUT_LEN_MEAN], in_flight)
    prompts = PROMPTS_PER_REQUEST_IN_FLIGHT * in_flight
    row[col.NUM_PROMPTS] = row[col.COMPLETED] = prompts
    row[col.FAILED] = 0.0
    row[col.DURATION_S] = prompts / loop.request_throughput_per_s
    row[col.REQUEST_THROUGHPUT] = loop.request_throughput_per_s
    row[col.TOTAL_TOKEN_THROUGHPUT] = loop.total_token_throughput_per_s
    row[col.OUTPUT_TOKEN_THROUGHPUT] = loop.output_token_throughput_per_s
    row[col.MEAN_E2EL_MS] = loop.e2e_ms
    row[col.MEAN_BATCH_SIZE] = in_flight
    row[col.BATCH_SIZE_SOURCE] = f"{SOURCE_CLOSED_LOOP}, cap = client max_concurrency"
    row[col.E2E_LATENCY_S] = loop.e2e_ms / 1000.0
    return loop


def _note(row: dict[str, Any], in_flight: float, how_in_flight: str, served: ServedEntry, stated: str,
          loop: ClosedLoop) -> str:
    """The reason detail of a readable row: what was measured, what is derived and what is assumed."""
    per_rank = (f", about {in_flight / row[col.DATA_PARALLEL]:g} per data-parallel rank"
                if row[col.DATA_PARALLEL] > 1 else "")
    version = row[col.VLLM_VERSION] or "version unknown"
    return (f"closed loop of {in_flight:g} requests in flight ({how_in_flight}{per_rank}) on {_layout(row)}; "
            f"{row[col.MODEL]}: {served.how} (weights as recorded: {stated}); vLLM {version}; "
            f"TTFT {row[col.MEAN_TTFT_MS]:.6g} ms and TPOT {row[col.MEAN_TPOT_MS]:.6g} ms are central values of "
            "unstated statistic (mean or median), filed as mean_ttft_ms and mean_tpot_ms; derived, not measured: "
            f"E2E = TTFT + (OSL - 1) x TPOT = {loop.e2e_ms:.6g} ms, throughputs N / E2E, mean running batch N; "
            f"assumed: num_prompts = {PROMPTS_PER_REQUEST_IN_FLIGHT} x N")


def sweep_verdict(row: dict[str, Any], record: dict[str, str], catalog: ArchitectureCatalog,
                  accelerators: AcceleratorLookup, file: str) -> Verdict:
    """Fill `row` (a row of `columns.RUN_COLUMNS`) from one CSV row and decide its status, checked in
    order: a vLLM aggregated server, the requests in flight, finite positive values, a known
    accelerator, a precision and a catalog entry serving the model at it; then the measurement is
    derived, and a model SLIM's dense formula does not cover is ``unsupported_model`` (the row keeps
    everything it would have as ``ok``, so it is usable once the catalog admits the model)."""
    _fill_identity(row, record)
    backend, mode = record.get("backend", "vllm") or "vllm", record.get("mode", "agg") or "agg"
    if backend != "vllm" or mode != "agg":
        return Verdict("unsupported_benchmark", f"backend '{backend}', mode '{mode}': SLIM reads vLLM serving one "
                       "aggregated server (prefill and decode on the same GPUs)", file)
    in_flight = _in_flight(record, row[col.DATA_PARALLEL])
    if isinstance(in_flight, Verdict):
        return Verdict(in_flight.status, in_flight.detail, file)
    in_flight, how_in_flight = in_flight
    if math.isfinite(in_flight) and in_flight > 0:
        row[col.MAX_NUM_SEQS] = row[col.MAX_CONCURRENCY] = _whole(in_flight)
    problem = _bad_values(row, in_flight)
    if problem is not None:
        return Verdict(problem.status, problem.detail, file)
    hardware = accelerators.with_labels(SYSTEM_HARDWARE).resolve(record.get("system"))
    if isinstance(hardware, Verdict):
        return Verdict(hardware.status, hardware.detail, file)
    if isinstance(hardware, Hardware):
        row[col.HARDWARE] = hardware.name
    precision = _precision(record)
    if isinstance(precision, Verdict):
        return Verdict(precision.status, precision.detail, file)
    precision, stated = precision
    served = served_entry(catalog, record["model_path"], precision)
    if isinstance(served, str):
        if catalog.resolve_name(record["model_path"]) is not None:
            row[col.MODEL] = f"{row[col.MODEL]} ({precision})"
        return Verdict("unknown_model", served, file)
    row[col.MODEL] = served.name
    if served.name in catalog.names and catalog.architecture(served.name).moe is None:
        row[col.EXPERT_PARALLEL] = row[col.EXPERT_TENSOR_PARALLEL] = math.nan   # a dense model has no experts
    loop = _fill_measurement(row, in_flight)
    note = _note(row, in_flight, how_in_flight, served, stated, loop)
    if served.name not in catalog:
        unsupported = catalog.unsupported(served.name)
        return Verdict("unsupported_model", f"{unsupported.display_name}: {unsupported.reason} (row read: {note})",
                       file)
    return Verdict("ok", note)


def sweep_rows(path: Path, run_id: str, dataset: str, catalog: ArchitectureCatalog,
               accelerators: AcceleratorLookup) -> list[dict[str, Any]]:
    """One row per CSV row, each with its status; a file that cannot be read, one row."""
    def run_name(label: str) -> str:
        return label if run_id == "." else f"{run_id}/{label}"

    try:
        records = read_sweep_records(path)
    except TraceFormatError as error:
        return [with_verdict(empty_row(dataset, run_name(path.name)), Verdict.of_error(error))]
    rows = []
    for label, record in records:
        row = empty_row(dataset, run_name(label))
        if isinstance(record, Verdict):
            row[col.TRACE_FORMAT] = FORMAT_SILICON_SWEEP
            rows.append(with_verdict(row, record))
        else:
            rows.append(with_verdict(row, sweep_verdict(row, record, catalog, accelerators, path.name)))
    return rows
