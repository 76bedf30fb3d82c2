"""Stage 2: decide which ingested runs are usable and account for every one.

Ingest already gave each run a status; cleaning adds the two rules that need
the whole table (duplicates) or a policy (preempted runs), and writes the
cleaning report: every run directory, its status and the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from slim import columns as col
from slim.traces.ingest import REASON_CODES

DUPLICATE_KEY = (col.MODEL, col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL, col.MAX_NUM_SEQS, col.NUM_PROMPTS)
"""Two usable runs with equal values here measured the same configuration."""


@dataclass(frozen=True)
class CleaningPolicy:
    """What cleaning keeps. Preempted runs are excluded by default, as the trace authors did."""

    keep_preempted: bool = False


def mark_duplicates(runs: pd.DataFrame, usable_statuses: tuple[str, ...] = ("ok", "preempted")) -> pd.DataFrame:
    """Mark every usable run after the first (by run_id) of the same configuration as ``duplicate``.

    Only runs with a status in `usable_statuses` compete, so a run the policy drops
    (a preempted one, by default) never displaces a kept measurement of its configuration.
    """
    runs = runs.copy()
    usable = runs[runs[col.STATUS].isin(list(usable_statuses))].sort_values(col.RUN_ID, kind="stable")
    first_of_key: dict[tuple, str] = {}
    for index, run in usable.iterrows():
        key = tuple(run[k] for k in DUPLICATE_KEY)
        if key in first_of_key:
            runs.loc[index, col.STATUS] = "duplicate"
            runs.loc[index, col.REASON_DETAIL] = f"same configuration as {first_of_key[key]}"
            runs.loc[index, col.FAULT_FILE] = ""
        else:
            first_of_key[key] = run[col.RUN_ID]
    return runs


def clean_runs(runs: pd.DataFrame, policy: CleaningPolicy = CleaningPolicy()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (usable runs, cleaning report). The report has one row per ingested run."""
    kept_statuses = ("ok", "preempted") if policy.keep_preempted else ("ok",)
    report = mark_duplicates(runs, kept_statuses)
    usable = report[report[col.STATUS].isin(kept_statuses)].reset_index(drop=True)
    report_columns = [col.DATASET, col.RUN_ID, col.MODEL, col.MAX_NUM_SEQS, col.OUTPUT_LEN_NOMINAL,
                      col.STATUS, col.REASON_DETAIL, col.FAULT_FILE]
    report = report[report_columns].copy()
    report["kept"] = report[col.STATUS].isin(kept_statuses)
    return usable, report.reset_index(drop=True)


def summarise_report(report: pd.DataFrame, dataset: str) -> str:
    """A short markdown summary of a cleaning report: counts per status and per curve."""
    lines = [f"# Cleaning report: {dataset}", "",
             f"{len(report)} run directories found, {int(report['kept'].sum())} kept.", "",
             "| status | runs | meaning |", "|---|---|---|"]
    for status, count in report[col.STATUS].value_counts().sort_index().items():
        lines.append(f"| {status} | {count} | {REASON_CODES.get(status, '')} |")
    kept = report[report["kept"]]
    if not kept.empty:
        per_curve = kept.groupby([col.MODEL, col.OUTPUT_LEN_NOMINAL]).size()
        lines += ["", "Kept runs per model and nominal output length:", "",
                  "| model | output length | runs |", "|---|---|---|"]
        lines += [f"| {model} | {output_len:g} | {count} |" for (model, output_len), count in per_curve.items()]
    return "\n".join(lines) + "\n"


def check_lines(report: pd.DataFrame) -> list[str]:
    """One line per run of a cleaning report, tab-separated: status, run, file at fault (``-`` if
    none), reason. What ``slim check`` prints."""
    lines = []
    for _, run in report.iterrows():
        fault_file = run.get(col.FAULT_FILE)
        fault_file = fault_file if isinstance(fault_file, str) and fault_file else "-"
        lines.append(f"{run[col.STATUS]}\t{run[col.RUN_ID]}\t{fault_file}\t{run[col.REASON_DETAIL]}")
    return lines
