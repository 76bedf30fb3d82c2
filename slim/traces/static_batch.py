"""Offline measurements: one static batch (``vllm bench latency``, a summary table's row) or one
``vllm bench throughput`` run, as a row of the runs table with its status.

An offline run has no server metrics: its requests are all submitted at t = 0, so the running
batch is what the engine admits. Where the KV cache of the batch fits (`slim.gpu.kv_memory.
static_batch_fit`, the one model of vLLM's KV reservation), a static batch of ``B`` requests runs
as one batch of ``B`` and the mean batch is the configured ``B`` (``batch_size_source =
static_batch``). Where it does not fit, vLLM admits part of the batch, or preempts as sequences
grow: the mean running batch is below ``B`` and not measured, so the run is
``kv_cache_overflow`` (excluded, with the tokens needed and the estimated capacity as evidence).
A ``vllm bench throughput`` run of ``N`` requests under a cap ``C`` runs ``ceil(N / C)`` waves of
identical requests: its mean batch is ``min(N, C)`` where ``N <= C`` or ``C`` divides ``N``,
otherwise its last, smaller wave leaves the mean batch undetermined (``missing_metrics``).

The derived quantities are those of the online runs: ``request_throughput = B / latency``,
``total_token_throughput = B (IL + OL) / latency`` (Eq. 6's ``T``) and the E2E latency by
Little's law, ``mean batch / request_throughput``, which for one static batch is its latency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from slim import columns as col
from slim.gpu.kv_memory import StaticBatchFit, static_batch_fit
from slim.specs.architecture import Architecture, ArchitectureCatalog
from slim.specs.hardware import GIB, HARDWARE_FILE, Hardware, load_hardware
from slim.traces.verdict import Verdict

SOURCE_STATIC_BATCH = "static_batch"
"""`batch_size_source` of an offline run: the configured batch (B, or min(N, max_num_seqs))."""
THROUGHPUT_TOLERANCE = 0.05
"""Relative slack between a recorded throughput and counts / latency (as for online runs)."""


@lru_cache(maxsize=1)
def _packaged_hardware() -> dict[str, Hardware]:
    return load_hardware(HARDWARE_FILE)


@dataclass(frozen=True)
class AcceleratorLookup:
    """Which accelerator a run ran on: the row's own label through `by_label` (a dataset's
    ``hardware_map``) or as a key of `catalog` (the hardware file; default the packaged one), else
    the dataset's `default`."""

    default: Hardware | None = None
    by_label: Mapping[str, Hardware] | None = None
    catalog: Mapping[str, Hardware] | None = None

    def with_labels(self, labels: Mapping[str, str]) -> "AcceleratorLookup":
        """This lookup, also mapping `labels` (a trace format's own accelerator names -> keys of the
        catalog; keys the catalog lacks are left out); the dataset's own `by_label` wins."""
        catalog = self.catalog if self.catalog is not None else _packaged_hardware()
        known = {label: catalog[key] for label, key in labels.items() if key in catalog}
        return replace(self, by_label={**known, **(self.by_label or {})})

    def resolve(self, label: Any) -> Hardware | Verdict | None:
        """The accelerator of a run labelled `label` (None or NaN: not labelled); a ``unknown_hardware``
        `Verdict` for a label nothing maps; None where neither the label nor a default says."""
        if label is None or (isinstance(label, float) and math.isnan(label)) or str(label).strip() == "":
            return self.default
        label = str(label).strip()
        catalog = self.catalog if self.catalog is not None else _packaged_hardware()
        found = (self.by_label or {}).get(label) or catalog.get(label)
        if found is not None:
            return found
        known = ", ".join(sorted(self.by_label or {})) or "none"
        return Verdict("unknown_hardware", f"hardware '{label}' is neither a key of the hardware file nor mapped "
                       "to one (add it to the hardware_map of the --table-columns file, or of the dataset's table: "
                       f"section in the pipeline; mapped: {known})")


@dataclass(frozen=True)
class OfflinePoint:
    """What an offline benchmark recorded about one run, in its own units (NaN where not recorded)."""

    trace_format: str
    benchmark_mode: str
    file: str                    # the file at fault, relative to the run directory
    model: str
    batch_size: float            # B: requests submitted at once (N for vllm bench throughput)
    input_len: float
    output_len: float
    latency_s: float             # seconds to finish all of them (mean over the benchmark's iterations)
    total_token_throughput_per_s: float = math.nan   # as recorded, checked against counts / latency
    tensor_parallel: float = 1.0
    hardware: Any = None         # the run's own accelerator label (None: the dataset's)
    max_num_seqs: float = math.nan   # the engine's cap where recorded
    note: str = ""               # where the arguments came from, iterations, ...


def _positive(value: float) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _check_values(point: OfflinePoint) -> Verdict | None:
    values = {"batch_size": point.batch_size, "input_len": point.input_len, "output_len": point.output_len,
              "tensor_parallel": point.tensor_parallel}
    if not (math.isnan(point.latency_s) and _positive(point.total_token_throughput_per_s)):
        values["latency_s"] = point.latency_s   # a table may give the throughput alone
    bad = [name for name, value in values.items() if not _positive(value)]
    if bad:
        return Verdict("invalid_values", f"non-positive, infinite or NaN {', '.join(bad)}", point.file)
    fractional = [name for name in ("batch_size", "tensor_parallel") if float(values[name]) != int(values[name])]
    if fractional:
        return Verdict("invalid_values", f"{', '.join(fractional)} must be whole numbers", point.file)
    return None


def _fill_measurement(row: dict[str, Any], point: OfflinePoint) -> Verdict | None:
    """Counts, lengths and throughputs of the run; a Verdict when the recorded throughput contradicts them."""
    tokens = point.batch_size * (point.input_len + point.output_len)
    latency = point.latency_s if not math.isnan(point.latency_s) else tokens / point.total_token_throughput_per_s
    row[col.NUM_PROMPTS] = row[col.COMPLETED] = point.batch_size
    row[col.FAILED] = 0.0
    row[col.INPUT_LEN_MEAN] = row[col.INPUT_LEN_NOMINAL] = float(point.input_len)
    row[col.OUTPUT_LEN_MEAN] = row[col.OUTPUT_LEN_NOMINAL] = float(point.output_len)
    row[col.DURATION_S] = latency
    row[col.REQUEST_THROUGHPUT] = point.batch_size / latency
    row[col.TOTAL_TOKEN_THROUGHPUT] = tokens / latency
    row[col.OUTPUT_TOKEN_THROUGHPUT] = point.batch_size * point.output_len / latency
    recorded = point.total_token_throughput_per_s
    if _positive(recorded) and abs(recorded - tokens / latency) > THROUGHPUT_TOLERANCE * recorded:
        return Verdict("implausible", f"recorded throughput {recorded:.6g} tokens/s, but {point.batch_size:g} x "
                       f"({point.input_len:g} + {point.output_len:g}) tokens / {latency:.6g} s = "
                       f"{tokens / latency:.6g}", point.file)
    return None


def _batch(point: OfflinePoint) -> tuple[float, str] | Verdict:
    """The configured running batch and how it follows from the benchmark (module docstring)."""
    requests, cap = point.batch_size, point.max_num_seqs
    if math.isnan(cap) or requests <= cap:
        if point.benchmark_mode == col.BenchmarkMode.OFFLINE_THROUGHPUT and math.isnan(cap):
            return Verdict("missing_metadata", f"vllm bench throughput of {requests:g} requests records no "
                           "max_num_seqs (vLLM's default depends on its version and the GPU)", point.file)
        return requests, f"{requests:g} requests run as one batch"
    if requests % cap == 0:
        return cap, f"{requests:g} requests in {requests / cap:g} waves of max_num_seqs = {cap:g}"
    return Verdict("missing_metrics", f"{requests:g} requests under max_num_seqs = {cap:g}: the last of "
                   f"{math.ceil(requests / cap)} waves runs {requests % cap:g}, so the mean running batch is "
                   "not determined", point.file)


def _fit_problem(point: OfflinePoint, fit: StaticBatchFit, hw: Hardware, batch: float,
                 arch: Architecture) -> Verdict | None:
    tp = int(point.tensor_parallel)
    if not fit.weights_fit:
        return Verdict("implausible", f"{arch.display_name}'s weights need {arch.weight_bytes() / tp / GIB:.1f} GiB "
                       f"per rank at TP {tp}, "
                       f"more than {hw.gpu_memory_utilization:g} x {hw.memory_bytes / GIB:g} GiB of {hw.name} "
                       "leaves: this row cannot have been measured on that accelerator", point.file)
    if not fit.fits:
        return Verdict("kv_cache_overflow", f"a batch of {batch:g} x ceil(({point.input_len:g} + "
                       f"{point.output_len:g}) / 16) blocks needs {fit.kv_tokens_needed} tokens of KV cache per "
                       f"rank, above the {fit.kv_capacity_tokens} vLLM reserves on {hw.name} at TP {tp} "
                       "(slim.gpu.kv_memory.static_batch_fit): the batch runs in parts, its mean running batch "
                       f"is below {batch:g}", point.file)
    return None


def offline_verdict(row: dict[str, Any], point: OfflinePoint, catalog: ArchitectureCatalog,
                    accelerators: AcceleratorLookup) -> Verdict:
    """Fill `row` (a row of `columns.RUN_COLUMNS`) from `point` and decide its status, checked in order:
    finite positive values, a known accelerator, a recorded throughput that agrees with counts /
    latency, a supported and known model, a determined batch, weights and KV cache that fit."""
    row[col.TRACE_FORMAT], row[col.BENCHMARK_MODE] = point.trace_format, point.benchmark_mode
    unsupported = catalog.unsupported(point.model)
    row[col.MODEL] = (catalog.resolve_name(point.model) or (unsupported.name if unsupported else None)
                      or point.model.rstrip("/").rsplit("/", 1)[-1])
    if _positive(point.tensor_parallel):
        row[col.TENSOR_PARALLEL] = int(point.tensor_parallel) if point.tensor_parallel == int(point.tensor_parallel) \
            else point.tensor_parallel
    row[col.MAX_NUM_SEQS] = point.max_num_seqs if _positive(point.max_num_seqs) else point.batch_size
    hw = accelerators.resolve(point.hardware)
    if isinstance(hw, Hardware):
        row[col.HARDWARE] = hw.name
    problem = _check_values(point)
    if problem is not None:
        return problem
    if isinstance(hw, Verdict):
        return Verdict(hw.status, hw.detail, point.file)
    problem = _fill_measurement(row, point)
    if problem is not None:
        return problem
    if unsupported is not None:
        return Verdict("unsupported_model", f"{unsupported.display_name}: {unsupported.reason}", point.file)
    if row[col.MODEL] not in catalog:
        return Verdict("unknown_model", f"model '{point.model}' is not in the models file", point.file)
    batch = _batch(point)
    if isinstance(batch, Verdict):
        return batch
    mean_batch, how = batch
    row[col.MAX_NUM_SEQS] = mean_batch if math.isnan(point.max_num_seqs) else point.max_num_seqs
    notes = [note for note in (point.note, how) if note]
    if hw is None:
        notes.append("KV cache fit not checked: no accelerator given")
    else:
        arch = catalog[row[col.MODEL]]
        fit = static_batch_fit(arch, hw, int(mean_batch), point.input_len, point.output_len,
                               int(point.tensor_parallel))
        problem = _fit_problem(point, fit, hw, mean_batch, arch)
        if problem is not None:
            return problem
        notes.append(f"KV cache fits: {fit.kv_tokens_needed} of {fit.kv_capacity_tokens} tokens per rank")
    row[col.MEAN_BATCH_SIZE] = float(mean_batch)
    row[col.BATCH_SIZE_SOURCE] = SOURCE_STATIC_BATCH
    row[col.E2E_LATENCY_S] = row[col.MEAN_BATCH_SIZE] / row[col.REQUEST_THROUGHPUT]
    return Verdict("ok", "configured batch (" + "; ".join(notes) + ")")
