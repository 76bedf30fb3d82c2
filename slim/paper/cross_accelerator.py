"""One table of every accelerator's held-out accuracy: rows accelerator x setting,
columns predictors, the throughput MAPE with its bootstrap interval (Table III's numbers, not
recomputed: each accelerator's ``table3.csv`` from `slim.paper.mape_intervals`).

The long form (`cross_accelerator_table`, written as CSV) keeps every number; the wide form
(`cross_accelerator_display`) is what the Markdown, HTML and the results page show. A predictor with no
prediction on a setting (LLMVisor-Agg on offline static batches, which record no inter-token
latency) shows its reason's short form, ``n/a``.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from slim import columns as col
from slim.errors import ConfigError
from slim.markdown import markdown_table
from slim.paper.advisor_study import mean_time_saved_pct
from slim.paper.heldout import BAND_CONFIDENCE, IMAI, LLMVISOR, SIM, SLIM
from slim.paper.splits import HeldOutSetting

PREDICTORS = (SLIM, SIM, IMAI, LLMVISOR)
"""Columns of the wide table, in order (those no accelerator has are left out)."""

ACCELERATOR = "accelerator"
SETTING_LABEL = "setting_label"
BEST_OF_SIM_SLIM = "best_of_sim_slim_throughput_mape_pct"
LONG_COLUMNS = (ACCELERATOR, col.DATASET, col.SETTING, SETTING_LABEL, col.PREDICTOR, col.N_VALIDATION,
                col.THROUGHPUT_METRIC.mape, col.THROUGHPUT_METRIC.mape_ci_low, col.THROUGHPUT_METRIC.mape_ci_high,
                col.E2E_METRIC.mape, col.E2E_METRIC.mape_ci_low, col.E2E_METRIC.mape_ci_high,
                col.COVERAGE_THROUGHPUT_PCT, col.COVERAGE_E2E_PCT)
NOT_PREDICTED = "n/a"


@dataclass(frozen=True)
class AcceleratorResult:
    """One accelerator's Table III (``table3.csv``) and the names it is shown under."""

    accelerator: str          # display name (hardware catalog)
    dataset: str
    table3: pd.DataFrame


def cross_accelerator_table(results: Sequence[AcceleratorResult], settings: Sequence[HeldOutSetting]) -> pd.DataFrame:
    """Long form: one row per accelerator, applicable setting and predictor (`LONG_COLUMNS`), in the
    order of `results`, `settings` and `PREDICTORS`; predictors outside `PREDICTORS` are left out.

    A setting an accelerator's Table III lacks (the accelerator has no such runs: no TP 2 or 4 runs,
    say) has no rows for it. The datasets share one settings file (the workflow checks it)."""
    if not results:
        raise ConfigError("cross-accelerator table: no accelerator datasets given")
    records = []
    applicable = [setting for setting in settings if setting.applicable]
    for result in results:
        col.require_columns(result.table3, (col.SETTING, col.PREDICTOR, col.N_VALIDATION, col.THROUGHPUT_METRIC.mape),
                            f"{result.dataset}: table3.csv", ConfigError)
        for setting in applicable:
            rows = result.table3[result.table3[col.SETTING] == setting.name]
            if rows.empty:
                continue      # the accelerator has no such runs (its Table III says n/a)
            for predictor in PREDICTORS:
                row = rows[rows[col.PREDICTOR] == predictor]
                if row.empty:
                    continue
                one = row.iloc[0]
                records.append({
                    ACCELERATOR: result.accelerator, col.DATASET: result.dataset, col.SETTING: setting.name,
                    SETTING_LABEL: setting.label, col.PREDICTOR: predictor,
                    col.N_VALIDATION: int(one[col.N_VALIDATION]),
                    **{name: float(one[name]) if name in one.index else math.nan for name in LONG_COLUMNS[6:]},
                })
    return pd.DataFrame.from_records(records, columns=list(LONG_COLUMNS))


def best_of_sim_and_slim(long: pd.DataFrame) -> pd.Series:
    """Per (accelerator, setting), the smaller throughput MAPE of SIM and SLIM (NaN where neither ran)."""
    chosen = long[long[col.PREDICTOR].isin([SIM, SLIM])]
    return chosen.groupby([ACCELERATOR, col.SETTING], sort=False)[col.THROUGHPUT_METRIC.mape].min()


def _cell(row: pd.Series) -> str:
    value = float(row[col.THROUGHPUT_METRIC.mape])
    if not math.isfinite(value):
        return NOT_PREDICTED
    low, high = float(row[col.THROUGHPUT_METRIC.mape_ci_low]), float(row[col.THROUGHPUT_METRIC.mape_ci_high])
    coverage = float(row[col.COVERAGE_THROUGHPUT_PCT])
    covered = f", cov. {coverage:.0f}%" if math.isfinite(coverage) else ""
    if math.isfinite(low) and math.isfinite(high):
        return f"{value:.1f} ({low:.1f}-{high:.1f}{covered})"
    return f"{value:.1f} (no CI{covered})"


def cross_accelerator_display(long: pd.DataFrame) -> pd.DataFrame:
    """Wide form: one row per (accelerator, setting) with its number of validation runs, one column
    per predictor (throughput MAPE %, ``value (CI low-high)``) and the better of SIM and SLIM."""
    predictors = [p for p in PREDICTORS if p in set(long[col.PREDICTOR])]
    best = best_of_sim_and_slim(long)
    rows = []
    for (accelerator, setting), group in long.groupby([ACCELERATOR, col.SETTING], sort=False):
        by_predictor = {row[col.PREDICTOR]: row for _, row in group.iterrows()}
        record = {"accelerator": accelerator, "setting": group[SETTING_LABEL].iloc[0],
                  "validation runs": int(group[col.N_VALIDATION].max())}
        for predictor in predictors:
            record[predictor] = _cell(by_predictor[predictor]) if predictor in by_predictor else "--"
        value = best.get((accelerator, setting), math.nan)
        record["better of SIM, SLIM"] = f"{value:.1f}" if math.isfinite(value) else NOT_PREDICTED
        rows.append(record)
    return pd.DataFrame.from_records(rows)


GOAL_BEST_OF_SIM_SLIM_PCT = 5.0
"""The project's accuracy goal: on every accelerator and setting the better of SIM and SLIM within 5%
throughput MAPE."""
GOAL_SLIM_NVIDIA_PCT = 10.0
"""The project's accuracy goal for SLIM alone: within 10% on the NVIDIA accelerators."""


def goal_report(long: pd.DataFrame, nvidia: set[str]) -> pd.DataFrame:
    """Per (accelerator, setting): SLIM's and SIM's throughput MAPE, the better of them, and whether
    each goal is met (`GOAL_BEST_OF_SIM_SLIM_PCT`; `GOAL_SLIM_NVIDIA_PCT` only for the accelerators in
    `nvidia`, NaN for the others). The point estimates decide; the intervals are in the table."""
    records = []
    for (accelerator, setting), group in long.groupby([ACCELERATOR, col.SETTING], sort=False):
        mape = {row[col.PREDICTOR]: float(row[col.THROUGHPUT_METRIC.mape]) for _, row in group.iterrows()}
        slim, sim = mape.get(SLIM, math.nan), mape.get(SIM, math.nan)
        best = min((value for value in (slim, sim) if math.isfinite(value)), default=math.nan)
        records.append({
            ACCELERATOR: accelerator, col.SETTING: setting, "slim_mape_pct": slim, "sim_mape_pct": sim,
            "best_mape_pct": best, "best_goal_met": bool(best <= GOAL_BEST_OF_SIM_SLIM_PCT),
            "slim_goal_met": (bool(slim <= GOAL_SLIM_NVIDIA_PCT) if accelerator in nvidia else math.nan),
        })
    return pd.DataFrame.from_records(records)


NOTE = ("Throughput MAPE (%) on each setting's validation runs, with its 95% BCa bootstrap interval (as in each "
        "accelerator's Table III, results/<dataset>/table3.csv). SIM: the step-level simulator running each static "
        "batch (all B requests at t = 0), calibrated on that accelerator's training runs only. n/a: LLMVisor-Agg "
        "is not fitted on offline static batches, which record no inter-token latency. cov. N%: the share of the "
        f"validation runs inside their {100 * BAND_CONFIDENCE:.0f}% conformal prediction interval (SLIM and SIM: "
        "errors of refits on the training runs, Table III's note).")


def cross_accelerator_markdown(display: pd.DataFrame, title: str = "Held-out accuracy per accelerator") -> str:
    """The wide table as Markdown, with its heading and note."""
    lines = [f"### {title}", "", *markdown_table(display.columns, display.itertuples(index=False))]
    return "\n".join(lines + ["", NOTE, ""])


def cross_accelerator_html(display: pd.DataFrame, title: str = "Held-out accuracy per accelerator") -> str:
    """The wide table as a standalone HTML page (for the Snakemake report)."""
    head = "".join(f"<th>{html.escape(str(name))}</th>" for name in display.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(value))}</td>" for value in row) + "</tr>"
                   for row in display.itertuples(index=False))
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title></head>"
            f"<body><h1>{html.escape(title)}</h1><table border=\"1\"><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table><p>{html.escape(NOTE)}</p></body></html>\n")


# --- the advisor per accelerator ---------------------------------------------------------

ADVISOR_FLAVOURS = (("slim", "SLIM-BCA"), ("sim", "SIM-BCA"))
"""The predicted BCA flavours of each accelerator's advisor comparison (`table_advisors.csv`)."""


@dataclass(frozen=True)
class AcceleratorAdvice:
    """One accelerator's advisor comparison (`slim.paper.advisor_study.advisor_comparison`, leave one
    curve out) and Table VI (`slim.paper.advisor_study.table6`: profiling cost), as their CSVs hold them."""

    accelerator: str
    advisors: pd.DataFrame
    profiling_cost: pd.DataFrame


def advisor_summary(results: Sequence[AcceleratorAdvice]) -> pd.DataFrame:
    """Per accelerator: the measured curves, how often each predicted BCA picks full-profile BCA's
    cap (Eq. 13 on the measured points), the measured throughput retained at each advisor's cap
    (mean % of the curve's peak, over the curves whose cap was measured) and Table VI's mean
    profiling time saved. Nothing is recomputed: the numbers are the per-accelerator tables'."""
    records = []
    for result in results:
        advisors = result.advisors
        record = {ACCELERATOR: result.accelerator, "curves": len(advisors),
                  "full_retained_pct": float(advisors["full_retained_pct"].mean())}
        for key, _ in ADVISOR_FLAVOURS:
            if f"{key}_cap" not in advisors:
                continue
            record[f"{key}_agrees"] = int((advisors[f"{key}_cap"] == advisors["full_cap"]).sum())
            record[f"{key}_retained_pct"] = float(advisors[f"{key}_retained_pct"].mean())
        record["time_saved_pct"] = mean_time_saved_pct(result.profiling_cost)
        records.append(record)
    return pd.DataFrame.from_records(records, columns=None if records else [ACCELERATOR, "curves"])


ADVISOR_NOTE = ("Each accelerator's advisor comparison (results/<dataset>/table_advisors.csv) over its measured "
                "TP 1 curves (one model and IL = OL over the static batch size B): how often SLIM-BCA and SIM-BCA, "
                "each fitted on every other curve, pick the B that full-profile BCA (Eq. 13 on the measured points; "
                "epsilon and SLO from config/bca/llm-inference-bench.yaml) picks, the measured throughput at each "
                "advisor's B as a share of the curve's peak (mean over curves), and Table VI's mean profiling time "
                "saved over the held-out settings.")


def advisor_summary_markdown(summary: pd.DataFrame, title: str = "The advisor per accelerator") -> str:
    """`advisor_summary` as Markdown, with its heading and note."""
    header = ["accelerator", "curves", "full-profile BCA: throughput kept"]
    for key, label in ADVISOR_FLAVOURS:
        if f"{key}_agrees" in summary:
            header += [f"{label} = full-profile B", f"{label}: throughput kept"]
    header.append("profiling time saved (Table VI)")
    rows = []
    for _, row in summary.iterrows():
        cells = [str(row[ACCELERATOR]), f"{int(row['curves'])}", f"{row['full_retained_pct']:.1f}%"]
        for key, _ in ADVISOR_FLAVOURS:
            if f"{key}_agrees" in summary:
                cells += [f"{int(row[f'{key}_agrees'])} of {int(row['curves'])}", f"{row[f'{key}_retained_pct']:.1f}%"]
        cells.append(f"{row['time_saved_pct']:.1f}%")
        rows.append(cells)
    lines = [f"### {title}", "", *markdown_table(header, rows)]
    return "\n".join(lines + ["", ADVISOR_NOTE, ""])
