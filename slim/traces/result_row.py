"""One benchmark result as one row of the runs table: its model, lengths, cap, throughput, latencies
and mean running batch, filled from the result and its directory's evidence and then checked
(`ResultRow`; its `verdict` is the run's status)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slim import columns as col
from slim.errors import TraceFormatError
from slim.specs.architecture import ArchitectureCatalog
from slim.traces.directory_evidence import _DIR_MAX_NUM_SEQS, DirectoryEvidence, _positive_int, _setting
from slim.traces.engine_metrics import EngineMetrics, batch_metrics, preemption_count
from slim.traces.latency import client_statistics, per_request_latencies
from slim.traces.littles_law import SOURCE_LITTLES_LAW, littles_law_batch
from slim.traces.plausibility import batch_contradiction, non_positive_values, summary_contradiction
from slim.traces.results import FORMAT_GUIDELLM, ResultRecord
from slim.traces.server_log import (
    find_data_parallel_in_log,
    find_expert_parallel_in_log,
    find_hardware_error,
    find_max_num_seqs_in_log,
    find_pipeline_parallel_in_log,
    find_tensor_parallel_in_log,
    find_vllm_version_in_log,
)
from slim.traces.values import number
from slim.traces.verdict import Verdict

LITTLES_LAW_TOLERANCE = 0.05
"""Relative slack of a Little's-law batch over the cap (its error on the public traces is < 4%)."""


def model_name(content: dict[str, Any], client_args: dict[str, Any], catalog: ArchitectureCatalog) -> str:
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


class ResultRow:
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
        row[col.MODEL] = model_name(content, self.client_args, self.catalog)
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

    def _read_layout(self) -> None:
        """The server's parallel sizes (from the result's metadata, as the cap is, else the client's
        record of the server args or a server log; vLLM's default 1 where none states one) and the
        version its log announces."""
        evidence = self.evidence
        for column, flag, find in ((col.TENSOR_PARALLEL, "tensor-parallel-size", find_tensor_parallel_in_log),
                                   (col.PIPELINE_PARALLEL, "pipeline-parallel-size", find_pipeline_parallel_in_log),
                                   (col.DATA_PARALLEL, "data-parallel-size", find_data_parallel_in_log)):
            self.row[column] = (_positive_int(_setting(self.content, flag.replace("-", "_")))
                                or evidence.server_setting(flag, find) or 1)
        # --enable-expert-parallel spreads the experts over every GPU of a replica's ranks
        # (vLLM's FusedMoEParallelConfig.make: expert-parallel size = tensor x data parallel); a model
        # the catalog describes as dense has no experts to spread, whatever the flag.
        model = self.row.get(col.MODEL)
        dense = isinstance(model, str) and self.catalog.routes_experts(model) is False
        recorded = str(_setting(self.content, "enable_expert_parallel")).strip().lower()
        if not dense and (recorded in ("true", "1") or (recorded in ("none", "") and evidence.server_switch(
                "enable-expert-parallel", find_expert_parallel_in_log))):
            self.row[col.EXPERT_PARALLEL] = self.row[col.TENSOR_PARALLEL] * self.row[col.DATA_PARALLEL]
        self.row[col.VLLM_VERSION] = evidence.first_in_server_logs(find_vllm_version_in_log)

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
        self._read_layout()
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
