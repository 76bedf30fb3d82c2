"""Stage 2: decide which ingested runs are usable and account for every one.

Ingest already gave each run a status; cleaning adds the rules that need the whole table
(duplicates of an online configuration, repeated measurements of an offline point) or a policy
(preempted runs), and writes the cleaning report: every run, its status and the reason.

Repeated measurements of one offline point (same accelerator, model, TP, B, IL, OL; e.g. a
summary table's repeated rows) are averaged, not dropped (`aggregate_repeats`): the point's first
run (by run_id) keeps the mean latency, the throughputs of its counts over that mean, the number
of measurements and their spread; the others are ``aggregated`` into it, each naming it.

A dataset may keep only some rows of its traces (`CleaningPolicy.rows`, config
``datasets.<name>.rows``: a selector over run columns, e.g. one accelerator of a summary table
that holds three): every other row becomes ``other_rows``, naming the value that left it out,
before any other rule, so a row is accounted for once, by the dataset it belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import pandas as pd

from slim import columns as col
from slim.errors import ConfigError
from slim.markdown import markdown_table
from slim.traces.verdict import REASON_CODES

DUPLICATE_KEY = (col.MODEL, col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL, col.MAX_NUM_SEQS, col.NUM_PROMPTS,
                 col.HARDWARE, *col.LAYOUT_COLUMNS, col.VLLM_VERSION)
"""Two usable online runs with equal values here (a column a table lacks, or NaN, counts as one value)
measured the same configuration: the same workload and cap on the same accelerator, parallel layout
and engine version."""
OFFLINE_POINT_KEY = (col.HARDWARE, col.MODEL, col.TENSOR_PARALLEL, col.BENCHMARK_MODE, col.INPUT_LEN_NOMINAL,
                     col.OUTPUT_LEN_NOMINAL, col.MAX_NUM_SEQS, col.NUM_PROMPTS)
"""Two usable offline runs with equal values here are repeated measurements of one point."""
REPORT_COLUMNS = (col.DATASET, col.RUN_ID, col.MODEL, col.MAX_NUM_SEQS, col.OUTPUT_LEN_NOMINAL, col.STATUS,
                  col.REASON_DETAIL, col.FAULT_FILE, col.BENCHMARK_MODE, col.HARDWARE, col.TENSOR_PARALLEL,
                  col.INPUT_LEN_NOMINAL, col.N_MEASUREMENTS, col.MEASUREMENT_SPREAD_PCT, col.INPUT_LEN_MEAN,
                  col.OUTPUT_LEN_MEAN)
"""Columns of the cleaning report, before ``kept``."""
CHECK_COLUMNS = ("status", "run", "fault_file", "model", "input_len", "output_len", "max_num_seqs", "reason")
"""What `slim check` says of each run, in this order (its header line; its ``--json`` keys): the
status, the run (its folder under the traces), the file at fault, the model, the mean input and
output lengths in tokens (to 0.1), the cap (vLLM's ``--max-num-seqs``; a static batch's batch
size), and the reason. The first three and the reason keep their meaning; columns are added
before the reason, which is last because it is free text."""


@dataclass(frozen=True)
class CleaningPolicy:
    """What cleaning keeps. Preempted runs are excluded by default, as the trace authors did."""

    keep_preempted: bool = False
    rows: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    """Run column -> the values a kept row has (every column must match); empty: every row."""
    keep_repeats: bool = False
    """Keep every usable online run of one configuration (repeated runs, which `slim tune` combines into
    one measurement) instead of marking all but the first ``duplicate``."""


def select_dataset_rows(runs: pd.DataFrame, rows: Mapping[str, tuple[Any, ...]],
                        where: str = "the dataset's rows selector") -> pd.DataFrame:
    """Mark every run outside `rows` (column -> allowed values) as ``other_rows``, whatever its
    status, naming the first column whose value is not allowed (`where` names the selector)."""
    runs = runs.copy()
    for column, allowed in rows.items():
        if column not in runs.columns:
            raise ConfigError(f"{where}: '{column}' is not a column of the runs table")
        values = runs[column]
        outside = ~values.isin(list(allowed)) & (runs[col.STATUS] != "other_rows")
        for index in runs.index[outside]:
            value = values[index]
            shown = "no value" if pd.isna(value) else f"{column} = {value}"
            runs.loc[index, col.REASON_DETAIL] = (
                f"{shown}: left out by {where} ({column}: {', '.join(str(v) for v in allowed)}); "
                f"status before: {runs.loc[index, col.STATUS]}")
            runs.loc[index, col.STATUS] = "other_rows"
            runs.loc[index, col.FAULT_FILE] = ""
    return runs


def _online(runs: pd.DataFrame) -> pd.Series:
    """Which runs were measured online (all of a table from before `benchmark_mode` existed)."""
    if col.BENCHMARK_MODE not in runs:
        return pd.Series(True, index=runs.index)
    return runs[col.BENCHMARK_MODE].fillna(col.BenchmarkMode.ONLINE) == col.BenchmarkMode.ONLINE


def mark_duplicates(runs: pd.DataFrame, usable_statuses: tuple[str, ...] = ("ok", "preempted")) -> pd.DataFrame:
    """Mark every usable run after the first (by run_id) of the same configuration as ``duplicate``.

    Only runs with a status in `usable_statuses` compete, so a run the policy drops
    (a preempted one, by default) never displaces a kept measurement of its configuration.
    """
    runs = runs.copy()
    usable = runs[runs[col.STATUS].isin(list(usable_statuses)) & _online(runs)]
    usable = usable.sort_values(col.RUN_ID, kind="stable")
    first_of_key: dict[tuple, str] = {}
    for index, run in usable.iterrows():
        key = tuple(None if pd.isna(value := run.get(k)) else value for k in DUPLICATE_KEY)
        if key in first_of_key:
            runs.loc[index, col.STATUS] = "duplicate"
            runs.loc[index, col.REASON_DETAIL] = f"same configuration as {first_of_key[key]}"
            runs.loc[index, col.FAULT_FILE] = ""
        else:
            first_of_key[key] = run[col.RUN_ID]
    return runs


def aggregate_repeats(runs: pd.DataFrame) -> pd.DataFrame:
    """Average the repeated measurements of every usable (``ok``) offline point (module docstring).

    The point's first run by run_id gets the mean latency (``duration_s``, its E2E latency), its
    request and token throughputs recomputed as counts / mean latency, ``n_measurements`` and
    ``measurement_spread_pct`` = 100 (max - min) / mean of the latencies; every other run of the
    point becomes ``aggregated``, naming the run it was averaged into.
    """
    runs = runs.copy()
    offline = runs[(runs[col.STATUS] == "ok") & ~_online(runs)]
    if offline.empty:
        return runs
    offline = offline.sort_values(col.RUN_ID, kind="stable")
    for _, point in offline.groupby(list(OFFLINE_POINT_KEY), sort=False, dropna=False):
        if len(point) < 2:
            continue
        first, others = point.index[0], point.index[1:]
        latencies = point[col.DURATION_S].astype(float)
        mean, count = float(latencies.mean()), int(point[col.N_MEASUREMENTS].sum())
        spread = 100.0 * float(latencies.max() - latencies.min()) / mean
        requests = float(runs.loc[first, col.COMPLETED])
        tokens = requests * float(runs.loc[first, col.INPUT_LEN_MEAN] + runs.loc[first, col.OUTPUT_LEN_MEAN])
        runs.loc[first, [col.DURATION_S, col.E2E_LATENCY_S]] = mean
        runs.loc[first, col.REQUEST_THROUGHPUT] = requests / mean
        runs.loc[first, col.TOTAL_TOKEN_THROUGHPUT] = tokens / mean
        runs.loc[first, col.OUTPUT_TOKEN_THROUGHPUT] = requests * float(runs.loc[first, col.OUTPUT_LEN_MEAN]) / mean
        runs.loc[first, col.N_MEASUREMENTS] = count
        runs.loc[first, col.MEASUREMENT_SPREAD_PCT] = spread
        runs.loc[first, col.REASON_DETAIL] = (
            f"mean of {count} measurements ({', '.join(point[col.RUN_ID])}): latency {mean:.6g} s, spread "
            f"{spread:.3g}% (max - min over mean); " + str(runs.loc[first, col.REASON_DETAIL]))
        name = runs.loc[first, col.RUN_ID]
        runs.loc[others, col.STATUS] = "aggregated"
        runs.loc[others, col.FAULT_FILE] = ""
        for index in others:
            latency = float(runs.loc[index, col.DURATION_S])
            runs.loc[index, col.REASON_DETAIL] = f"repeated measurement (latency {latency:.6g} s) averaged into {name}"
    return runs


def clean_runs(runs: pd.DataFrame, policy: CleaningPolicy = CleaningPolicy()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (usable runs, cleaning report). The report has one row per ingested run."""
    kept_statuses = ("ok", "preempted") if policy.keep_preempted else ("ok",)
    selected = select_dataset_rows(runs, policy.rows) if policy.rows else runs
    report = aggregate_repeats(selected if policy.keep_repeats else mark_duplicates(selected, kept_statuses))
    usable = report[report[col.STATUS].isin(kept_statuses)].reset_index(drop=True)
    report = report.reindex(columns=list(REPORT_COLUMNS))
    report["kept"] = report[col.STATUS].isin(kept_statuses)
    return usable, report.reset_index(drop=True)


def summarise_report(report: pd.DataFrame, dataset: str) -> str:
    """A short markdown summary of a cleaning report: counts per status and per curve."""
    lines = [f"# Cleaning report: {dataset}", "",
             f"{len(report)} run directories found, {int(report['kept'].sum())} kept.", "",
             *markdown_table(["status", "runs", "meaning"],
                             [(status, count, REASON_CODES.get(status, ""))
                              for status, count in report[col.STATUS].value_counts().sort_index().items()])]
    repeated = report[report[col.N_MEASUREMENTS].fillna(1) > 1] if col.N_MEASUREMENTS in report else report[:0]
    if not repeated.empty:
        lines += ["", f"Repeated measurements: {int(repeated[col.N_MEASUREMENTS].sum())} runs of {len(repeated)} "
                  "offline points averaged (status `aggregated` for all but the first of each point):", "",
                  *markdown_table(["run", "hardware", "model", "TP", "B", "IL", "OL", "measurements", "spread (%)"],
                                  [(run[col.RUN_ID], run[col.HARDWARE], run[col.MODEL],
                                    f"{run[col.TENSOR_PARALLEL]:g}", f"{run[col.MAX_NUM_SEQS]:g}",
                                    f"{run[col.INPUT_LEN_NOMINAL]:g}", f"{run[col.OUTPUT_LEN_NOMINAL]:g}",
                                    int(run[col.N_MEASUREMENTS]), f"{run[col.MEASUREMENT_SPREAD_PCT]:.3g}")
                                   for _, run in repeated.iterrows()])]
    kept = report[report["kept"]]
    if not kept.empty:
        per_curve = kept.groupby([col.MODEL, col.OUTPUT_LEN_NOMINAL]).size()
        lines += ["", "Kept runs per model and nominal output length:", "",
                  *markdown_table(["model", "output length", "runs"],
                                  [(model, f"{output_len:g}", count)
                                   for (model, output_len), count in per_curve.items()])]
    return "\n".join(lines) + "\n"


def check_records(report: pd.DataFrame) -> list[dict[str, Any]]:
    """One record per run of a cleaning report, keyed by `CHECK_COLUMNS` (None where a value is
    unknown: no file at fault, a run too broken to name its model or lengths)."""
    def text(value: Any) -> str | None:
        return value if isinstance(value, str) and value else None

    def number(value: Any, digits: int) -> float | int | None:
        if value is None or pd.isna(value):
            return None
        rounded = round(float(value), digits)
        return int(rounded) if digits == 0 else rounded

    return [{"status": str(run[col.STATUS]), "run": str(run[col.RUN_ID]),
             "fault_file": text(run.get(col.FAULT_FILE)), "model": text(run.get(col.MODEL)),
             "input_len": number(run.get(col.INPUT_LEN_MEAN), 1), "output_len": number(run.get(col.OUTPUT_LEN_MEAN), 1),
             "max_num_seqs": number(run.get(col.MAX_NUM_SEQS), 0), "reason": str(run[col.REASON_DETAIL])}
            for _, run in report.iterrows()]


def check_lines(report: pd.DataFrame, header: bool = False) -> list[str]:
    """What ``slim check`` prints: one tab-separated line per run of a cleaning report, its
    `check_records` values in `CHECK_COLUMNS` order (``-`` where unknown; a length as ``256`` or
    ``242.5``; the reason on one line), after a header line of the column names with `header`."""
    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.1f}".removesuffix(".0")
        return " ".join(str(value).split())

    lines = ["\t".join(CHECK_COLUMNS)] if header else []
    return lines + ["\t".join(cell(record[name]) for name in CHECK_COLUMNS) for record in check_records(report)]
