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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from slim import columns as col
from slim.errors import ConfigError, TraceFormatError
from slim.specs.architecture import ArchitectureCatalog
from slim.traces.directory_evidence import DirectoryEvidence
from slim.traces.offline_ingest import IngestOptions, offline_record, table_rows
from slim.traces.offline_json import OFFLINE_FORMATS
from slim.traces.result_row import ResultRow, model_name
from slim.traces.results import ResultRecord, read_result_records, read_sweep_failure
from slim.traces.run_files import RunFiles, classify_directory
from slim.traces.server_log import (
    classify_failure,
)
from slim.traces.summary_table import DEFAULT_LAYOUT, TableLayout
from slim.traces.tree import TreeDirectory, TreeFile, walk_tree
from slim.traces.verdict import REASON_CODES, Verdict, gpus_per_server  # noqa: F401 (REASON_CODES: re-exported)
from slim.traces.verdict import empty_row as _empty_row
from slim.traces.verdict import with_verdict as _set

LOGGER = logging.getLogger(__name__)



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


# ---------------------------------------------------------------- one directory

def _failed_run(row: dict[str, Any], evidence: DirectoryEvidence, catalog: ArchitectureCatalog) -> Verdict:
    """A run that wrote no benchmark result: the failure its sweep record or logs name, if any."""
    if evidence.client_args.get("model"):
        row[col.MODEL] = model_name({}, evidence.client_args, catalog)
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
                rows.append(_set(one, ResultRow(one, record, evidence, catalog, alone=alone).verdict()))
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
        row[col.GPUS_PER_SERVER] = gpus_per_server(row)
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
