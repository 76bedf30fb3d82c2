"""Summary tables: a CSV or Parquet file with one row per offline measured point (static batch).

A table in the column vocabulary (`VOCABULARY`) is read as it is. A table with other headers is
read through a column mapping (`TableLayout.columns`: vocabulary name -> the table's header,
given in the dataset's ``table:`` section of config/config.yaml), and its accelerator labels
through ``table.hardware_map`` (label -> key of the hardware file). Nothing here is specific to
one producer: every table goes through the same vocabulary.

Each row becomes one run (``run_id`` = ``<file>[<row>]``, the row zero-padded so that the runs
sort in file order); repeated rows of one point are averaged by cleaning
(`slim.traces.clean.aggregate_repeats`), never dropped.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from slim import columns as col
from slim.errors import ConfigError, TraceFormatError, UnreadableTraceError
from slim.traces.static_batch import OfflinePoint
from slim.traces.tree import read_text
from slim.traces.values import number
from slim.yaml_files import read_yaml_mapping

FORMAT_SUMMARY_TABLE = "summary_table"
TABLE_SUFFIXES = (".csv", ".parquet")

VOCABULARY: dict[str, str] = {
    "model": "model: a key or alias of the models file, or a Hugging Face id (required)",
    "batch_size": "B, requests of the static batch, all submitted at once (required)",
    "input_len": "IL, prompt tokens of every request (required)",
    "output_len": "OL, tokens every request generates (required)",
    "latency_s": "seconds to finish the whole batch (this or total_token_throughput_per_s required)",
    "total_token_throughput_per_s": "B (IL + OL) / latency, tokens per second (checked against latency_s "
                                    "where both are given)",
    "tensor_parallel": "GPUs per model (--tensor-parallel-size; default 1)",
    "hardware": "the accelerator: a key of the hardware file or a label of table.hardware_map "
                "(default: the dataset's hardware)",
    "max_num_seqs": "the engine's --max-num-seqs where it was set below B (default: none)",
}
"""The column vocabulary of a summary table: name -> meaning."""
REQUIRED = ("model", "batch_size", "input_len", "output_len")
MEASURED = ("latency_s", "total_token_throughput_per_s")


@dataclass(frozen=True)
class TableLayout:
    """How to read a summary table: `columns` maps vocabulary names to the table's headers (a name
    not mapped is looked for under its own name); `hardware_map` maps the table's accelerator labels
    to keys of the hardware file."""

    columns: Mapping[str, str] = field(default_factory=dict)
    hardware_map: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [name for name in self.columns if name not in VOCABULARY]
        if unknown:
            raise ConfigError(f"table.columns: {', '.join(unknown)} not in the column vocabulary "
                                   f"({', '.join(VOCABULARY)})")

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> "TableLayout":
        """The layout of a dataset's ``table:`` section (None or absent: the vocabulary as it is)."""
        section = section or {}
        return cls(dict(section.get("columns", {})), dict(section.get("hardware_map", {})))

    def header(self, name: str) -> str:
        return self.columns.get(name, name)

    def mapped_accelerators(self, hardware_catalog: Mapping[str, Any], where: str,
                            error: type[Exception] = ConfigError, hint: str = "") -> dict[str, Any]:
        """`hardware_map`'s labels -> their entries of `hardware_catalog`; `error` names the entry
        (``<where>hardware_map.<label>``) whose key the catalog lacks, then `hint` (how to add one)."""
        accelerators = {}
        for label, key in self.hardware_map.items():
            if key not in hardware_catalog:
                raise error(f"{where}hardware_map.{label} = '{key}' is not in the hardware file "
                            f"(known: {', '.join(hardware_catalog)})" + (f"; {hint}" if hint else ""))
            accelerators[label] = hardware_catalog[key]
        return accelerators

    def missing_headers(self, headers: list[str]) -> list[str]:
        """The headers a table needs and `headers` lacks: the required ones and one measurement."""
        present = set(headers)
        missing = [self.header(name) for name in REQUIRED if self.header(name) not in present]
        if not any(self.header(name) in present for name in MEASURED):
            missing.append(" or ".join(self.header(name) for name in MEASURED))
        return missing

    def matches(self, headers: list[str]) -> bool:
        return not self.missing_headers(headers)


DEFAULT_LAYOUT = TableLayout()
"""A table in the vocabulary itself."""


def load_table_layout(path: str | Path) -> TableLayout:
    """The layout in a YAML file (``slim advise --table-columns``): a dataset's ``table:`` section
    (keys ``columns`` and ``hardware_map``), or a mapping that holds one under ``table``.

    Raises `ConfigError` naming the file for a missing file, YAML that is not such a mapping, or a
    name outside the vocabulary."""
    path = Path(path)
    raw = read_yaml_mapping(path, f"table columns file not found: {path}")
    section = raw.get("table", raw)
    if not isinstance(section, dict) or not set(section) <= {"columns", "hardware_map"}:
        found = ", ".join(map(str, section)) if isinstance(section, dict) else type(section).__name__
        raise ConfigError(f"{path}: expected the keys columns and hardware_map (a dataset's table: section), "
                          f"got {found}")
    for key in ("columns", "hardware_map"):
        value = section.get(key, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) and v for v in value.values()):
            raise ConfigError(f"{path}: {key} must map names to non-empty strings")
    try:
        return TableLayout.from_config(section)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from error


def csv_header(text: str) -> list[str]:
    """The header row of a CSV's first bytes (BOM and surrounding spaces removed)."""
    first = text.removeprefix("\ufeff").split("\n", 1)[0]
    rows = list(csv.reader(io.StringIO(first)))
    return [cell.strip() for cell in rows[0]] if rows else []


def table_headers(path: Path, head: str | None = None) -> list[str]:
    """The column headers of a CSV (from `head`, its first bytes, where given) or Parquet file."""
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq
        try:
            return list(pq.read_schema(path).names)
        except OSError as error:
            raise UnreadableTraceError(f"{path.name}: cannot read ({error})", path=path.name) from error
        except Exception as error:   # pyarrow raises its own ArrowInvalid for a file that is no Parquet
            raise TraceFormatError(f"{path.name}: not a Parquet table ({error})", path=path.name) from error
    return csv_header(head if head is not None else read_text(path, 65_536))


def _read_frame(path: Path) -> pd.DataFrame:
    try:
        if path.suffix.lower() == ".parquet":
            return pd.read_parquet(path)
        return pd.read_csv(io.StringIO(read_text(path).removeprefix("\ufeff")), skipinitialspace=True)
    except TraceFormatError:
        raise
    except Exception as error:
        raise TraceFormatError(f"{path.name}: not a readable table ({error})", path=path.name) from error


def read_table_points(path: Path, layout: TableLayout = DEFAULT_LAYOUT) -> list[tuple[str, OfflinePoint]]:
    """Every row of a summary table as (row label ``file[i]``, point), in file order.

    Raises `TraceFormatError` naming the file when it cannot be parsed or lacks a needed column.
    """
    frame = _read_frame(path)
    frame.columns = [str(name).strip() for name in frame.columns]
    missing = layout.missing_headers(list(frame.columns))
    if missing:
        raise TraceFormatError(f"{path.name}: lacks column(s) {', '.join(missing)} (the summary-table vocabulary "
                               "through the dataset's table.columns mapping)", path=path.name)
    width = len(str(max(len(frame) - 1, 0)))

    def value(record: dict[str, Any], name: str, default: Any = math.nan) -> Any:
        header = layout.header(name)
        return record[header] if header in record else default

    points = []
    for index, record in enumerate(frame.to_dict("records")):
        model = value(record, "model", "")
        point = OfflinePoint(
            trace_format=FORMAT_SUMMARY_TABLE, benchmark_mode=col.BenchmarkMode.OFFLINE_STATIC_BATCH, file=path.name,
            model="" if model is None or (isinstance(model, float) and math.isnan(model)) else str(model),
            batch_size=number(value(record, "batch_size")), input_len=number(value(record, "input_len")),
            output_len=number(value(record, "output_len")), latency_s=number(value(record, "latency_s")),
            total_token_throughput_per_s=number(value(record, "total_token_throughput_per_s")),
            tensor_parallel=number(value(record, "tensor_parallel", 1)),
            hardware=value(record, "hardware", None), max_num_seqs=number(value(record, "max_num_seqs")))
        points.append((f"{path.name}[{index:0{width}d}]", point))
    return points
