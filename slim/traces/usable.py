"""The runs of a trace folder a decision can use: every run found, ingested and cleaned
(`check_traces`, `usable_runs`), the ones left out and why (`skipped_runs`), for `slim advise`,
`slim tune` and `slim check` alike."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pandas as pd

from slim import columns as col
from slim.errors import AdvisorError, NoUsableRunsError, TraceFormatError
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import ADD_HARDWARE, Hardware, unknown_hardware_message
from slim.traces.clean import CleaningPolicy, check_lines, check_records, clean_runs
from slim.traces.ingest import ingest_traces
from slim.traces.offline_ingest import IngestOptions
from slim.traces.summary_table import (
    DEFAULT_LAYOUT,
    MEASURED,
    REQUIRED,
    TABLE_SUFFIXES,
    TableLayout,
    load_table_layout,
    table_headers,
)


def trace_options(hardware_catalog: Mapping[str, Hardware], hardware: str | None,
                  table_columns: str | Path | None) -> IngestOptions:
    """How `check_traces` ingests a user's traces: on accelerator `hardware` (a key of
    `hardware_catalog`; None: each row's own label), a summary table read through the layout of the
    YAML file `table_columns` (a dataset's ``table:`` section; None: the column vocabulary).

    Raises `AdvisorError` naming an unknown accelerator, or a hardware_map entry that is none."""
    if hardware is not None and hardware not in hardware_catalog:
        raise AdvisorError(unknown_hardware_message(hardware, hardware_catalog))
    layout = load_table_layout(table_columns) if table_columns is not None else DEFAULT_LAYOUT
    return IngestOptions.on(hardware_catalog, hardware, layout, f"{table_columns}: ", AdvisorError, ADD_HARDWARE)


def check_traces(traces: Path, catalog: ArchitectureCatalog, options: IngestOptions = IngestOptions()) -> pd.DataFrame:
    """Every run under `traces` (a folder of runs, or one trace file: a summary table, an offline
    result), ingested with `options` (the accelerator, whose memory the KV-cache check of a static
    batch uses, and a summary table's column mapping): one row and a status per run.

    Raises `TraceFormatError` when `traces` does not exist or holds no benchmark run.
    """
    if not traces.exists():
        raise TraceFormatError(f"trace directory '{traces}' does not exist")
    runs = ingest_traces(traces, dataset=traces.name, catalog=catalog, options=options)
    if runs.empty:
        raise TraceFormatError(f"no vLLM benchmark runs found under '{traces}' "
                               f"({_why_no_runs(traces, options.table_layout)})")
    return runs


def _why_no_runs(traces: Path, layout: TableLayout) -> str:
    """What to do about a trace folder (or file) in which no run was found: map the headers of a table
    that lacks a required column under `layout`'s names, or, in a folder with no files at all, start
    with slim tune; else read docs/traces.md for the layouts slim reads."""
    candidates = [traces] if traces.is_file() else sorted(traces.rglob("*"))
    required = [layout.header(name) for name in REQUIRED]
    for table in (path for path in candidates if path.is_file() and path.suffix.lower() in TABLE_SUFFIXES):
        try:
            headers = [header for header in table_headers(table) if header]
        except TraceFormatError:
            continue
        if headers and not all(name in headers for name in required):
            shown = ", ".join(headers[:8]) + (", ..." if len(headers) > 8 else "")
            return (f"{table.name} has the columns {shown}, not a summary table's ({', '.join(required)}, and "
                    f"{' or '.join(layout.header(name) for name in MEASURED)}): map them with --table-columns "
                    "YAML, docs/traces.md, 'Summary tables'")
    if traces.is_dir() and not any(path.is_file() for path in candidates):
        return "slim tune, given the workload, prints the first benchmarks to run"
    return "no file in a layout slim reads: docs/traces.md lists them"


def usable_runs(traces: Path, catalog: ArchitectureCatalog, options: IngestOptions = IngestOptions(),
                hardware: str | None = None, with_report: bool = False):
    """The runs under `traces` that the cleaning policy keeps and whose model is in `catalog`; with
    `hardware` (a key of the hardware file), only that accelerator's (the rows of a table that holds
    several accelerators are ``other_rows`` otherwise); `with_report`: also the cleaning report (one
    row per run found, ``kept`` False for those left out, a run of an unknown model among them).

    Raises `NoUsableRunsError` (with `slim check`'s line per run) when none is left.
    """
    runs = check_traces(traces, catalog, options)
    policy = CleaningPolicy(rows={col.HARDWARE: (hardware,)}) if hardware is not None else CleaningPolicy()
    usable, report = clean_runs(runs, policy)
    known = usable[col.MODEL].map(lambda name: name in catalog).astype(bool)
    unknown = set(usable.loc[~known, col.RUN_ID])
    if unknown:
        left_out = report[col.RUN_ID].isin(unknown)
        report.loc[left_out, "kept"] = False
        report.loc[left_out, col.STATUS] = "unknown_model"
        report.loc[left_out, col.REASON_DETAIL] = [f"model '{model}' is not in the models file (describe it with "
                                                   "--model-config)" for model in report.loc[left_out, col.MODEL]]
    usable = usable[known]
    if usable.empty:
        statuses = ", ".join(f"{status}: {count}" for status, count in report[col.STATUS].value_counts().items())
        raise NoUsableRunsError(f"no usable runs of a known model under '{traces}' ({len(runs)} runs; {statuses})",
                                tuple(check_lines(report, header=True)), tuple(check_records(report)))
    return (usable.reset_index(drop=True), report) if with_report else usable.reset_index(drop=True)


@dataclass(frozen=True)
class SkippedRun:
    """A run found under the traces that the decision does not use, and why: its cleaning status
    (`slim.traces.verdict.REASON_CODES`, as `slim check` prints it) and the detail."""

    path: str
    status: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "status": self.status, "reason": self.reason}


def skipped_runs(report: pd.DataFrame) -> tuple[SkippedRun, ...]:
    """The runs of a cleaning report left out, each with its status and reason."""
    return tuple(SkippedRun(str(run[col.RUN_ID]), str(run[col.STATUS]), str(run[col.REASON_DETAIL]))
                 for _, run in report[~report["kept"].astype(bool)].iterrows())


def single_tensor_parallel_degree(usable: pd.DataFrame, degree: int | None = None,
                                  model: str | None = None) -> tuple[pd.DataFrame, tuple[int, ...]]:
    """The usable runs at tensor-parallel `degree` (None: the smallest at which `model` has runs, where
    it has any, else their smallest), and the other degrees left out.

    A fit and a memory plan hold for one degree (the paper's Eqs. 5-12 have no tensor-parallel
    term, and the plan is each rank's at one size), so one fit must not mix degrees: runs at TP 2
    or 4 would read as faster runs of the same configuration.
    Runs that record no degree count as TP 1 (`columns.TENSOR_PARALLEL`). The model's own runs choose
    the default: other models' runs at a size it was never measured at would advise it on theirs alone."""
    if degree is None and model is not None and col.TENSOR_PARALLEL in usable:
        of_model = usable.loc[usable[col.MODEL] == model, col.TENSOR_PARALLEL]
        degree = int(of_model.fillna(1).min()) if len(of_model) else None
    return _one_size(usable, col.TENSOR_PARALLEL, degree)


def single_data_parallel_size(runs: pd.DataFrame, size: int | None = None) -> tuple[pd.DataFrame, tuple[int, ...]]:
    """The runs at data-parallel `size` (None: their smallest), and the other sizes left out.

    A measurement holds for the GPUs its server used: runs of TP 4 at DP 4 measure a server of 16
    GPUs, at DP 1 one of 4, so a workload's measurements must not mix sizes.
    Runs that record no size count as DP 1 (`columns.DATA_PARALLEL`)."""
    return _one_size(runs, col.DATA_PARALLEL, size)


def _one_size(runs: pd.DataFrame, column: str, size: int | None) -> tuple[pd.DataFrame, tuple[int, ...]]:
    if column not in runs:
        return runs, ()
    sizes = runs[column].fillna(1).astype(int)
    chosen = int(sizes.min()) if size is None and len(sizes) else int(size or 1)
    others = tuple(sorted(int(s) for s in sizes.unique() if s != chosen))
    return runs[sizes == chosen].reset_index(drop=True), others
