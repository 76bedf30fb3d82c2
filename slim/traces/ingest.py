"""Stage 1: turn a tree of vLLM benchmark run directories into one row per run.

Ingest never raises on bad run data: a run it cannot use still gets a row, with a reason
code in ``status``, the evidence in ``reason_detail`` and the file at fault in ``fault_file``
(see `REASON_CODES`). A directory holding several results (a flat ``--result-dir``, a
``--append-result`` file, a sweep point's repetitions, a GuideLLM report) gives one row per
result. Only a missing trace root is an error; anything unforeseen in one directory is
logged with its traceback and becomes that directory's ``ingest_error``.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from slim import columns as col
from slim.errors import ConfigError, TraceFormatError, UnreadableTraceError
from slim.specs.architecture import ArchitectureCatalog
from slim.traces.client_log import parse_namespace_line, parse_server_flags
from slim.traces.engine_metrics import EngineMetrics, MetricsSeries, batch_metrics, preemption_count
from slim.traces.latency import client_statistics, per_request_latencies
from slim.traces.littles_law import SOURCE_LITTLES_LAW, littles_law_batch
from slim.traces.metrics_csv import read_metrics_csv
from slim.traces.offline_ingest import IngestOptions, offline_record, table_rows
from slim.traces.offline_json import OFFLINE_FORMATS
from slim.traces.plausibility import batch_contradiction, non_positive_values, summary_contradiction
from slim.traces.prometheus_text import parse_cache_config, read_latency_histograms, read_scrapes
from slim.traces.results import FORMAT_GUIDELLM, ResultRecord, read_result_records, read_sweep_failure
from slim.traces.run_files import RunFiles, classify_directory
from slim.traces.server_log import (
    KvCacheSize,
    classify_failure,
    find_hardware_error,
    find_max_num_seqs_in_log,
    find_tensor_parallel_in_log,
    kv_cache_size_in_log,
    parse_server_log_batch,
    preemptions_in_log,
)
from slim.traces.summary_table import DEFAULT_LAYOUT, TableLayout
from slim.traces.tree import TreeDirectory, TreeFile, read_text, walk_tree
from slim.traces.values import number
from slim.traces.verdict import REASON_CODES, Verdict  # noqa: F401 (REASON_CODES: re-exported)
from slim.traces.verdict import empty_row as _empty_row
from slim.traces.verdict import with_verdict as _set

LOGGER = logging.getLogger(__name__)

_DIR_MAX_NUM_SEQS = re.compile(r"^_(\d+)_")
LITTLES_LAW_TOLERANCE = 0.05
"""Relative slack of a Little's-law batch over the cap (its error on the public traces is < 4%)."""


def trace_root_problem(trace_root: Path) -> str | None:
    """Why `trace_root` cannot be a folder of runs ('does not exist', 'is a file'), or None."""
    if trace_root.is_file():
        return "is a file, not a folder"
    if not trace_root.is_dir():
        return "does not exist"
    return None


def _directories(trace_root: Path) -> Iterator[TreeDirectory]:
    """The walk of a trace folder; for a single trace file, its folder holding that file alone."""
    if trace_root.is_file():
        yield TreeDirectory(trace_root.parent, (TreeFile(trace_root),))
        return
    yield from walk_tree(trace_root)


def find_runs(trace_root: Path, table_layout: TableLayout = DEFAULT_LAYOUT) -> list[RunFiles]:
    """Every directory under `trace_root` that holds files of a benchmark run, sorted by path (for
    a single file, its folder with that file alone)."""
    trace_root = Path(trace_root)
    if not trace_root.is_file():
        problem = trace_root_problem(trace_root)
        if problem:
            raise ConfigError(
                f"trace directory '{trace_root}' {problem}; set datasets.<name>.trace_dir "
                "in config/config.yaml to a folder of vLLM benchmark run directories"
            )
    runs = [classify_directory(directory, table_layout) for directory in _directories(trace_root)]
    return sorted((run for run in runs if run.looks_like_run), key=lambda run: run.directory)


def find_run_dirs(trace_root: Path) -> list[Path]:
    """The directories of `find_runs`."""
    return [run.directory for run in find_runs(trace_root)]


def _positive_int(value: Any) -> int | None:
    """An integer flag value (``8``, ``"8"``), or None for text such as ``"auto"`` or ``"$N"``."""
    if isinstance(value, bool):
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        return None
    return number if number > 0 else None


def _setting(content: dict[str, Any], name: str) -> Any:
    """A server setting in a result: ``--metadata name=...`` or a sweep's serve override, with
    ``-``/``_`` and a leading ``--`` in the key tolerated."""
    for key, value in content.items():
        if str(key).lstrip("-").replace("-", "_") == name:
            return value
    return None


# ---------------------------------------------------------------- what a directory tells every run in it

class DirectoryEvidence:
    """The files of one run directory, each read once and only when needed."""

    def __init__(self, run_files: RunFiles):
        self.files = run_files

    @cached_property
    def log_texts(self) -> dict[str, str]:
        """Every log's text; `UnreadableTraceError` names the first log that cannot be read."""
        return {path.name: read_text(path) for path in self.files.logs}

    def read_logs(self) -> int:
        """Read every log now, so that an unreadable one becomes the run's status; how many there are."""
        return len(self.log_texts)

    @cached_property
    def server_log_texts(self) -> dict[str, str]:
        return {path.name: self.log_texts[path.name] for path in self.files.server_logs}

    @cached_property
    def client_args(self) -> dict[str, Any]:
        """The benchmark client's arguments: the first ``Namespace(...)`` line of a client log."""
        for path in self.files.client_logs:
            if path.suffix == ".out" or not path.name.startswith("log_"):
                arguments = parse_namespace_line(self.log_texts[path.name])
                if arguments:
                    return arguments
        return {}

    def server_setting(self, flag: str, find_in_log: Callable[[str], int | None]) -> int | None:
        """A positive integer server flag (``--<flag>``) from the client's record of the server
        args, else from the first server log that states it; None if neither does."""
        flags = parse_server_flags(str(self.client_args.get("server_args", "")))
        from_flags = _positive_int(flags.get(flag))
        return from_flags if from_flags is not None else self.first_in_server_logs(find_in_log)

    def first_in_server_logs(self, find: Callable[[str], Any]) -> Any:
        """What `find` finds first in the server logs (by name), or None."""
        for text in self.server_log_texts.values():
            found = find(text)
            if found is not None:
                return found
        return None

    @cached_property
    def kv_cache_from_logs(self) -> KvCacheSize | None:
        return self.first_in_server_logs(kv_cache_size_in_log)

    @cached_property
    def log_preemptions(self) -> float:
        counts = [preemptions_in_log(text) for text in self.server_log_texts.values()]
        counts = [count for count in counts if not math.isnan(count)]
        return max(counts) if counts else math.nan

    @cached_property
    def log_stats(self) -> tuple[EngineMetrics | None, str]:
        for name, text in self.server_log_texts.items():
            metrics = parse_server_log_batch(text)
            if metrics is not None and not math.isnan(metrics.mean_batch_size):
                return metrics, name
        return None, ""

    @cached_property
    def series(self) -> tuple[list[MetricsSeries], list[str]]:
        """Every readable metrics series (CSVs, then the scrapes as one) and notes on the others.

        An unreadable file raises; an unparseable one is noted and skipped."""
        found, notes = [], []
        for path in self.files.metrics_csvs:
            try:
                found.append(read_metrics_csv(path))
            except UnreadableTraceError:
                raise
            except TraceFormatError as error:
                notes.append(str(error))
        if self.files.scrapes:
            try:
                found.append(read_scrapes(self.files.scrapes))
            except UnreadableTraceError:
                raise
            except TraceFormatError as error:
                notes.append(str(error))
        return found, notes

    @cached_property
    def latency_histograms(self) -> dict[str, float]:
        """The latency statistics of the scrapes' histograms (`read_latency_histograms`); empty
        where they hold none or cannot be parsed (the gauges' reader reports that)."""
        try:
            return read_latency_histograms(self.files.scrapes)
        except UnreadableTraceError:
            raise
        except TraceFormatError:
            return {}

    @cached_property
    def cache_config(self) -> tuple[dict[str, str], str] | None:
        """Labels of the first readable ``vllm:cache_config_info`` and the file holding them."""
        for path in self.files.cache_configs + self.files.scrapes:
            try:
                return parse_cache_config(path), path.name
            except UnreadableTraceError:
                raise
            except TraceFormatError:
                continue
        return None


# ---------------------------------------------------------------- one result

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
    return float(number(input_nominal)), float(number(output_nominal))


def _detailed_lengths(content: dict[str, Any], name: str) -> tuple[float, float] | Verdict | None:
    """Mean lengths from ``--save-detailed`` per-request lists (successful requests: output > 0);
    a `Verdict` when an entry is not a finite, non-negative number; None without lists."""
    input_lens, output_lens = content.get("input_lens"), content.get("output_lens")
    if not isinstance(input_lens, list) or not isinstance(output_lens, list) or not output_lens:
        return None
    if len(input_lens) != len(output_lens):
        return Verdict("invalid_values", f"{name}: input_lens has {len(input_lens)} entries, "
                       f"output_lens {len(output_lens)}", name.split("[", 1)[0])
    for key, values in (("input_lens", input_lens), ("output_lens", output_lens)):
        for position, value in enumerate(values):
            tokens = number(value)
            if not (math.isfinite(tokens) and tokens >= 0) or isinstance(value, str):
                return Verdict("invalid_values", f"{name}: {key}[{position}] = {value!r} is not a token count",
                               name.split("[", 1)[0])
    pairs = [(float(i), float(o)) for i, o in zip(input_lens, output_lens) if o > 0]
    if not pairs:
        return None
    return sum(i for i, _ in pairs) / len(pairs), sum(o for _, o in pairs) / len(pairs)


@dataclass(frozen=True)
class _Batch:
    """A run's mean running batch and where it came from."""

    metrics: EngineMetrics
    source: str
    note: str = ""
    tolerance: float = 0.0


class _RunIngest:
    """Fills one row from one result and its directory's evidence; `verdict` runs the checks."""

    def __init__(self, row: dict[str, Any], record: ResultRecord | None, evidence: DirectoryEvidence,
                 catalog: ArchitectureCatalog, alone: bool):
        self.row, self.record, self.evidence, self.catalog = row, record, evidence, catalog
        self.alone = alone   # the only result of its directory: the directory's server files are its own
        self.client_args = evidence.client_args if alone else {}

    @property
    def content(self) -> dict[str, Any]:
        return self.record.content

    @property
    def name(self) -> str:
        return self.record.label

    def _read_summary(self) -> None:
        """The client's summary: counts, duration, throughputs and mean latencies."""
        row, content = self.row, self.content
        row[col.TRACE_FORMAT] = self.record.trace_format
        row[col.MODEL] = _model_name(content, self.client_args, self.catalog)
        row[col.COMPLETED] = number(content.get("completed"))
        row[col.FAILED] = number(content.get("failed"))
        num_prompts = number(content.get("num_prompts"))
        if math.isnan(num_prompts):
            num_prompts = number(self.client_args.get("num_prompts"))
        row[col.NUM_PROMPTS] = num_prompts
        row[col.DURATION_S] = number(content.get("duration"))
        row[col.REQUEST_THROUGHPUT] = number(content.get("request_throughput"))
        row[col.TOTAL_TOKEN_THROUGHPUT] = number(content.get("total_token_throughput"))
        row[col.OUTPUT_TOKEN_THROUGHPUT] = number(content.get("output_throughput"))
        self._read_latencies()

    def _read_latencies(self) -> None:
        """Every latency statistic the result records (vLLM's names), the client's request rate and
        concurrency cap, a recorded goodput, the per-request lists of a detailed result, and, where
        the client recorded none of a quantity, the statistics of the server's histograms."""
        row, content = self.row, self.content
        statistics = client_statistics(content)
        row.update(statistics)
        statistics = {name: value for name, value in statistics.items() if math.isfinite(value)}
        if statistics:
            row[col.LATENCY_SOURCE] = ("guidellm" if self.record.trace_format == FORMAT_GUIDELLM else "client")
        rate = content.get("request_rate", self.client_args.get("request_rate"))
        row[col.REQUEST_RATE] = math.inf if str(rate).strip().lower() in ("inf", "infinity") else number(rate)
        concurrency = _positive_int(content.get("max_concurrency") or self.client_args.get("max_concurrency"))
        row[col.MAX_CONCURRENCY] = concurrency if concurrency is not None else math.nan
        row[col.REQUEST_GOODPUT] = number(content.get("request_goodput"))
        per_request = per_request_latencies(content)
        if per_request is not None:
            row.update(per_request)
        if self.alone and self.evidence.files.scrapes:
            recorded = {col.parse_latency_column(name)[1] for name in statistics}
            from_server = {name: value for name, value in self.evidence.latency_histograms.items()
                           if col.parse_latency_column(name)[1] not in recorded}
            if from_server:
                row.update(from_server)
                row[col.LATENCY_SOURCE] = ("+".join(filter(None, (row.get(col.LATENCY_SOURCE), "prometheus_histogram")))
                                           if statistics else "prometheus_histogram")

    def _batch_cap(self) -> tuple[int | None, str]:
        """The largest batch the server could run: its --max-num-seqs (from the result's metadata,
        the client's record of the server args, the server log, the directory name), capped by
        the client's --max-concurrency; and where the cap came from."""
        server_cap = _positive_int(_setting(self.content, "max_num_seqs"))
        if server_cap is None:
            server_cap = self.evidence.server_setting("max-num-seqs", find_max_num_seqs_in_log)
        if server_cap is None and self.alone:
            match = _DIR_MAX_NUM_SEQS.match(self.evidence.files.directory.name)
            server_cap = int(match.group(1)) if match else None
        client_cap = _positive_int(self.content.get("max_concurrency") or self.client_args.get("max_concurrency"))
        if client_cap is not None and (server_cap is None or client_cap < server_cap):
            return client_cap, "cap = client max_concurrency"
        return server_cap, ""

    def _read_kv_cache(self) -> Verdict | None:
        """vLLM's KV reservation (blocks, block size) from the cache config, else the server log."""
        row = self.row
        found = self.evidence.cache_config
        if found is not None:
            labels, name = found
            blocks, block_size = number(labels.get("num_gpu_blocks")), number(labels.get("block_size", 16))
            if not math.isnan(blocks) or not math.isnan(block_size):
                for key, value in (("num_gpu_blocks", blocks), ("block_size", block_size)):
                    if not (math.isfinite(value) and value > 0):
                        return Verdict("invalid_values", f"{name}: {key} = {labels.get(key)} (must be > 0)", name)
                row[col.NUM_GPU_BLOCKS], row[col.BLOCK_SIZE] = blocks, block_size
                row[col.KV_CAPACITY_TOKENS] = blocks * block_size
                return None
        from_log = self.evidence.kv_cache_from_logs
        if from_log is not None:
            row[col.NUM_GPU_BLOCKS], row[col.BLOCK_SIZE] = from_log.num_gpu_blocks, from_log.block_size
            row[col.KV_CAPACITY_TOKENS] = from_log.capacity_tokens
        return None

    def _batch(self) -> _Batch | str:
        """The mean running batch: the run's metrics series; when it recorded none, Little's law
        on the client's latencies (more accurate than a log line every 5-10 s); the server log's
        stats lines last. A note (str) says why there is none."""
        notes: list[str] = []
        if self.alone:
            series, notes = self.evidence.series
            for one in series:
                try:
                    metrics = batch_metrics(one)
                except TraceFormatError as error:
                    notes.append(str(error))
                    continue
                if not math.isnan(metrics.mean_batch_size):
                    return _Batch(metrics, one.source, "; ".join(notes))
                notes.append(f"{one.file}: no sample with running requests")
        recorded_metrics = self.alone and self.evidence.files.has_time_series
        little = None if recorded_metrics else littles_law_batch(self.content)
        if little is not None:
            mean_batch, formula = little
            log_metrics, log_name = self.evidence.log_stats if self.alone else (None, "")
            note = f"Little's law: {formula} / duration"
            if log_metrics is not None:
                note += f" ({log_name} stats lines give {log_metrics.mean_batch_size:.4g})"
            kv = log_metrics.max_kv_cache_usage if log_metrics is not None else math.nan
            return _Batch(EngineMetrics(mean_batch, kv, math.nan, 0), SOURCE_LITTLES_LAW, note, LITTLES_LAW_TOLERANCE)
        if self.alone:
            log_metrics, log_name = self.evidence.log_stats
            if log_metrics is not None:
                return _Batch(log_metrics, "server_log", "; ".join(notes))
        if not notes:
            notes.append("no metrics CSV or scrape, no server stats lines and no latencies for Little's law")
        return "; ".join(notes)

    def _preemptions(self, batch: _Batch) -> tuple[float, str]:
        """The most preemptions any record shows: the metrics counter (even of a series unusable for
        the batch) and V0's log warnings; NaN when nothing recorded them."""
        counts, note = [], ""
        if not math.isnan(batch.metrics.num_preemptions):
            counts.append(batch.metrics.num_preemptions)
        if self.alone:
            counts += [preemption_count(one) for one in self.evidence.series[0]]
            counts.append(self.evidence.log_preemptions)
        elif not math.isnan(self.evidence.log_preemptions):
            note = (f"the server log shared by this folder's runs reports {self.evidence.log_preemptions:g} "
                    "preemption(s), which cannot be attributed to one run")
        counts = [count for count in counts if not math.isnan(count)]
        return (max(counts) if counts else math.nan), note

    def verdict(self) -> Verdict:
        """Whether the run's measurement is usable, checked in order: no GPU fault in its server
        logs, something completed, the summary is finite, positive and consistent, everything
        completed, the model is known, a batch size and ``max_num_seqs`` were found, they are
        plausible, nothing was preempted. Fills in the row on the way."""
        row, name = self.row, self.name
        self._read_summary()
        hardware = find_hardware_error(self.evidence.server_log_texts)
        if hardware is not None:
            return Verdict("hardware_error", f"{hardware[0]}: {hardware[1]} (the result was written after a "
                           "GPU fault and is not trusted)", hardware[0])
        cap, cap_note = self._batch_cap()
        row[col.MAX_NUM_SEQS] = cap if cap is not None else math.nan
        tensor_parallel = self.evidence.server_setting("tensor-parallel-size", find_tensor_parallel_in_log)
        row[col.TENSOR_PARALLEL] = tensor_parallel or 1
        kv_problem = self._read_kv_cache()
        completed, num_prompts = row[col.COMPLETED], row[col.NUM_PROMPTS]
        if completed <= 0:
            return Verdict("incomplete", f"completed = {completed:g} of {num_prompts:g} prompts", self.record.path.name)
        totals = (number(self.content.get("total_input_tokens")), number(self.content.get("total_output_tokens")))
        required = {
            "completed": completed, "duration": row[col.DURATION_S], "total_input_tokens": totals[0],
            "total_output_tokens": totals[1], "request_throughput": row[col.REQUEST_THROUGHPUT],
            "total_token_throughput": row[col.TOTAL_TOKEN_THROUGHPUT],
        }
        bad = non_positive_values(required)
        if bad:
            return Verdict("invalid_values", f"{name}: non-positive, infinite or NaN {', '.join(bad)}",
                           self.record.path.name)
        lengths = _detailed_lengths(self.content, name)
        if isinstance(lengths, Verdict):
            return lengths
        row[col.INPUT_LEN_MEAN], row[col.OUTPUT_LEN_MEAN] = lengths or (totals[0] / completed, totals[1] / completed)
        row[col.INPUT_LEN_NOMINAL], row[col.OUTPUT_LEN_NOMINAL] = _nominal_lengths(
            self.client_args, row[col.INPUT_LEN_MEAN], row[col.OUTPUT_LEN_MEAN])
        contradiction = summary_contradiction(row, totals)
        if contradiction:
            return Verdict("implausible", f"{name}: {contradiction}", self.record.path.name)
        if not math.isnan(num_prompts) and completed < num_prompts:
            return Verdict("incomplete", f"completed = {completed:g} of {num_prompts:g} prompts",
                           self.record.path.name)
        if kv_problem is not None:
            return kv_problem
        if row[col.MODEL] not in self.catalog:
            return Verdict("unknown_model", f"model '{row[col.MODEL]}' is not in the models file",
                           self.record.path.name)
        return self._server_side_verdict(cap, cap_note)

    def _server_side_verdict(self, cap: int | None, cap_note: str) -> Verdict:
        row = self.row
        batch = self._batch()
        if isinstance(batch, str):
            files = self.evidence.files
            recorded = files.metrics_csvs + files.scrapes if self.alone else []
            return Verdict("missing_metrics", batch, recorded[0].name if recorded else "")
        metrics = batch.metrics
        row[col.MEAN_BATCH_SIZE], row[col.MAX_KV_CACHE_USAGE] = metrics.mean_batch_size, metrics.max_kv_cache_usage
        row[col.BATCH_SIZE_SOURCE] = batch.source + (f", {cap_note}" if cap_note else "")
        row[col.NUM_PREEMPTIONS], preemption_note = self._preemptions(batch)
        if cap is None:
            return Verdict("missing_metadata", "max_num_seqs not in the result's metadata, the client's "
                           "max_concurrency, client args, server log or directory name")
        contradiction = batch_contradiction(row, metrics.max_running, batch.tolerance)
        if contradiction:
            return Verdict("implausible", contradiction, self._batch_file(batch))
        row[col.E2E_LATENCY_S] = row[col.MEAN_BATCH_SIZE] / row[col.REQUEST_THROUGHPUT]
        if row[col.NUM_PREEMPTIONS] > 0:
            return Verdict("preempted", f"num_preemptions_total = {row[col.NUM_PREEMPTIONS]:g}")
        notes = [note for note in (batch.note, cap_note, preemption_note) if note]
        if math.isnan(row[col.NUM_PREEMPTIONS]):
            notes.append("preemptions not recorded")
        return Verdict("ok", f"batch size from {batch.source}" + (f" ({'; '.join(notes)})" if notes else ""))

    def _batch_file(self, batch: _Batch) -> str:
        if batch.source == SOURCE_LITTLES_LAW:
            return self.record.path.name
        if batch.source == "server_log":
            return self.evidence.log_stats[1]
        files = self.evidence.files
        return (files.metrics_csvs or files.scrapes or [Path("")])[0].name


# ---------------------------------------------------------------- one directory

def _failed_run(row: dict[str, Any], evidence: DirectoryEvidence, catalog: ArchitectureCatalog) -> Verdict:
    """A run that wrote no benchmark result: the failure its sweep record or logs name, if any."""
    if evidence.client_args.get("model"):
        row[col.MODEL] = _model_name({}, evidence.client_args, catalog)
    texts = dict(evidence.log_texts)
    for path in evidence.files.sweep_failures:
        texts[path.name] = read_sweep_failure(path)
    failure = classify_failure(texts)
    if failure:
        return Verdict(failure[0], failure[1], failure[1].split(":", 1)[0])
    if evidence.files.sweep_failures:
        name = evidence.files.sweep_failures[0].name
        return Verdict("failed_unknown", f"{name}: {texts[name]}", name)
    return Verdict("failed_unknown", "no benchmark result; logs name no known cause "
                   f"(looked in: {', '.join(sorted(texts)) or 'no log files'})")


def _records(run_files: RunFiles) -> list[ResultRecord | Verdict]:
    """Every result of the directory's result files; a file that cannot be read gives its Verdict."""
    records: list[ResultRecord | Verdict] = []
    for path in run_files.results:
        try:
            records += read_result_records(path)
        except TraceFormatError as error:
            records.append(Verdict.of_error(error))
    return records


def _ingest_directory(run_files: RunFiles, run_id: str, dataset: str, catalog: ArchitectureCatalog,
                      options: IngestOptions = IngestOptions()) -> list[dict]:
    row = _empty_row(dataset, run_id)
    if run_files.problem is not None:
        return [_set(row, Verdict("unreadable", f"directory: {run_files.problem}"))]
    for entry in run_files.broken:
        return [_set(row, Verdict("unreadable", f"{entry.name}: {entry.problem}", entry.name))]
    tables = table_rows(run_files, run_id, dataset, catalog, options)
    evidence = DirectoryEvidence(run_files)
    try:
        evidence.read_logs()
        records = _records(run_files)
        if not records and tables and not run_files.has_files_besides_tables:
            return tables
        if not records:
            return tables + [_set(row, _failed_run(row, evidence, catalog))]
        if len(records) > 1 and run_files.has_time_series:
            series = ", ".join(path.name for path in run_files.metrics_csvs + run_files.scrapes)
            names = ", ".join(path.name for path in run_files.results)
            return [_set(row, Verdict("ambiguous_results", f"several JSON files: {names} (beside the metrics "
                                      f"of one run: {series})"))]
        rows = tables
        alone = len(records) == 1 and not tables
        for record in records:
            one = row if alone else _empty_row(dataset, _record_id(run_id, record))
            if isinstance(record, Verdict):
                rows.append(_set(one, record))
            elif record.trace_format in OFFLINE_FORMATS:
                rows.append(_set(one, offline_record(one, record, catalog, options)))
            else:
                rows.append(_set(one, _RunIngest(one, record, evidence, catalog, alone=alone).verdict()))
        return rows
    except TraceFormatError as error:
        return tables + [_set(_empty_row(dataset, run_id), Verdict.of_error(error))]


def _record_id(run_id: str, record: ResultRecord | Verdict) -> str:
    """``<run directory>/<file>`` or ``<run directory>/<file>[i]``: one of several results of a directory."""
    label = (record.file or "result") if isinstance(record, Verdict) else record.label
    return label if run_id == "." else f"{run_id}/{label}"


def ingest_directory(run_files: RunFiles, trace_root: Path, dataset: str, catalog: ArchitectureCatalog,
                     options: IngestOptions = IngestOptions()) -> list[dict[str, Any]]:
    """The rows of one run directory (one per result); problems become a status, never an exception."""
    run_id = run_files.directory.relative_to(trace_root).as_posix()
    try:
        rows = _ingest_directory(run_files, run_id, dataset, catalog, options)
    except Exception as error:  # the isolation boundary: an unforeseen failure costs this directory only
        LOGGER.exception("ingest of run directory %s failed", run_files.directory)
        return [_set(_empty_row(dataset, run_id), Verdict(
            "ingest_error", f"{type(error).__name__}: {error} (traceback in the ingest log)"))]
    default = options.accelerators.default
    for row in rows:   # an online run ran on the dataset's accelerator
        if row[col.HARDWARE] is None and default is not None:
            row[col.HARDWARE] = default.name
    return rows


def ingest_run_dir(run_dir: Path, trace_root: Path, dataset: str, catalog: ArchitectureCatalog) -> dict[str, Any]:
    """The row of a run directory holding one result; problems become a status, never an exception."""
    directory = next(walk_tree(Path(run_dir)))   # the walk yields its root first
    rows = ingest_directory(classify_directory(directory), Path(trace_root), dataset, catalog)
    if len(rows) != 1:
        raise TraceFormatError(f"{run_dir} holds {len(rows)} runs; use ingest_directory for it")
    return rows[0]


def ingest_traces(trace_root: str | Path, dataset: str, catalog: ArchitectureCatalog,
                  options: IngestOptions = IngestOptions()) -> pd.DataFrame:
    """One row per run under `trace_root`, a folder or a single trace file (see `slim.columns`),
    sorted by run_id. `options` give the accelerator and the summary tables' column mapping."""
    trace_root = Path(trace_root)
    id_root = trace_root.parent if trace_root.is_file() else trace_root
    rows = [row for run in find_runs(trace_root, options.table_layout)
            for row in ingest_directory(run, id_root, dataset, catalog, options)]
    frame = pd.DataFrame(rows, columns=col.run_table_columns({name for row in rows for name in row}))
    return frame.sort_values(col.RUN_ID, kind="stable").reset_index(drop=True)
