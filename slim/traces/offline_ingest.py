"""Offline results and summary tables inside ingest: what a dataset's config adds (the accelerator,
the tables' column mapping) and the rows of a directory's tables (offline points, or online serving
sweeps in AIConfigurator's layout: `slim.traces.silicon_sweep`) and offline results."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slim import columns as col
from slim.errors import ConfigError, TraceFormatError
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware
from slim.traces.offline_json import offline_point
from slim.traces.results import ResultRecord
from slim.traces.run_files import RunFiles
from slim.traces.silicon_sweep import is_silicon_sweep, sweep_rows
from slim.traces.static_batch import AcceleratorLookup, offline_verdict
from slim.traces.summary_table import DEFAULT_LAYOUT, TableLayout, read_table_points
from slim.traces.verdict import Verdict, empty_row, with_verdict


@dataclass(frozen=True)
class IngestOptions:
    """What a dataset's config tells ingest beyond the trace files: the accelerator of its runs
    (one, or per row through a hardware map) and how its summary tables name their columns."""

    accelerators: AcceleratorLookup = AcceleratorLookup()
    table_layout: TableLayout = DEFAULT_LAYOUT

    @classmethod
    def on(cls, hardware_catalog: Mapping[str, Hardware], hardware: str | None, layout: TableLayout = DEFAULT_LAYOUT,
           where: str = "table.", error: type[Exception] = ConfigError, hint: str = "") -> "IngestOptions":
        """Runs on accelerator `hardware` (a key of `hardware_catalog`; None: each row's own label),
        summary tables read through `layout`, whose hardware_map must name keys of the catalog (else
        `error`, naming ``<where>hardware_map.<label>``, then `hint`: how to add one)."""
        labels = layout.mapped_accelerators(hardware_catalog, where, error, hint)
        default = hardware_catalog[hardware] if hardware is not None else None
        return cls(AcceleratorLookup(default, labels, hardware_catalog), layout)


def table_rows(run_files: RunFiles, run_id: str, dataset: str, catalog: ArchitectureCatalog,
               options: IngestOptions) -> list[dict]:
    """One row per row of each summary table of the directory; a table that cannot be read, one row."""
    rows = []
    for path in run_files.tables:
        if is_silicon_sweep(path):
            rows += sweep_rows(path, run_id, dataset, catalog, options.accelerators)
            continue
        try:
            points = read_table_points(path, options.table_layout)
        except TraceFormatError as error:
            verdict = Verdict.of_error(error)
            rows.append(with_verdict(empty_row(dataset, path.name if run_id == "." else f"{run_id}/{path.name}"),
                                     verdict))
            continue
        for label, point in points:
            one = empty_row(dataset, label if run_id == "." else f"{run_id}/{label}")
            rows.append(with_verdict(one, offline_verdict(one, point, catalog, options.accelerators)))
    return rows


def offline_record(row: dict[str, Any], record: ResultRecord, catalog: ArchitectureCatalog,
                   options: IngestOptions) -> Verdict:
    """The status of a ``vllm bench latency`` / ``throughput`` result (`slim.traces.offline_json`)."""
    row[col.TRACE_FORMAT] = record.trace_format
    try:
        point = offline_point(record.content, record.trace_format, record.path)
    except TraceFormatError as error:   # its companion .pytorch.json or .args.json: this result only
        return Verdict.of_error(error)
    if isinstance(point, Verdict):
        return point
    return offline_verdict(row, point, catalog, options.accelerators)
