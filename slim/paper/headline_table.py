"""The headline table of the README: the paper's headline numbers beside this pipeline's, one column
per evaluated dataset. Every number is read from the datasets' generated tables (``table3.csv``,
``mape_reduction.csv``, ``table6.csv``), none is recomputed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from slim import columns as col
from slim.markdown import markdown_table
from slim.paper.advisor_study import mean_time_saved_pct
from slim.paper.heldout import SLIM
from slim.paper.splits import HeldOutSetting
from slim.paper.tables import mape_cell, paper_row_labels

ABSENT = "--"
REDUCTION_ROW = "Average MAPE reduction vs the two baselines, %"
TIME_SAVED_ROW = "Profiling time saved by the held-out settings (Table VI), %"


@dataclass(frozen=True)
class DatasetHeadline:
    """One dataset's generated tables: Table III's MAPEs, the reduction headline, Table VI (None
    without an advisor study)."""

    label: str
    mapes: pd.DataFrame
    reduction: pd.DataFrame
    profiling_cost: pd.DataFrame | None = None


def _reduction_cell(reduction: pd.DataFrame) -> str:
    row = reduction.iloc[0]
    value, low, high = (float(row[name]) for name in (col.MAPE_REDUCTION_PCT, col.MAPE_REDUCTION_CI_LOW,
                                                      col.MAPE_REDUCTION_CI_HIGH))
    if not math.isfinite(value):
        return ABSENT
    return f"{value:.1f} (CI {low:.1f} to {high:.1f})" if math.isfinite(low) and math.isfinite(high) else f"{value:.1f}"


def headline_table(datasets: Sequence[DatasetHeadline], paper_settings: list[HeldOutSetting], reference: dict) -> str:
    """Markdown: a row per paper setting (SLIM's throughput MAPE, Table III), the average MAPE
    reduction and Table VI's mean time saved; a column per dataset, then the paper's value."""
    labels = [f"SLIM throughput MAPE, {label.lower()}, %" for label in paper_row_labels(paper_settings)]
    rows: list[list[str]] = []
    for setting, label in zip(paper_settings, labels):
        cells = []
        for dataset in datasets:
            match = dataset.mapes[(dataset.mapes[col.SETTING] == setting.name) & (dataset.mapes[col.PREDICTOR] == SLIM)]
            cell = ABSENT if match.empty else mape_cell(match.iloc[0], col.THROUGHPUT_METRIC)
            cells.append(cell if isinstance(cell, str) else f"{cell:.1f}")
        paper = reference["table3"].get(setting.name, {}).get(SLIM)
        rows.append([label, *cells, ABSENT if paper is None else f"{paper[0]:g}"])
    rows.append([REDUCTION_ROW, *(_reduction_cell(d.reduction) for d in datasets),
                 f"{reference['headline_mape_reduction_pct']:g}"])
    time_saved = [ABSENT if d.profiling_cost is None else f"{mean_time_saved_pct(d.profiling_cost):.1f}"
                  for d in datasets]
    rows.append([TIME_SAVED_ROW, *time_saved, f"{reference['headline_time_saving_pct']:g}"])
    header = ["", *(d.label for d in datasets), "paper (its own traces)"]
    lines = markdown_table(header, rows)
    note = ("MAPE cells: the fit the identifiability rule picks, `[a-b]` its range over equally good fits where the "
            "training data leave it open, `(CI a-b)` its 95% bootstrap interval, `cov. N%` the share of validation "
            "runs inside their 90% conformal prediction interval. The reduction is SLIM's average MAPE "
            "reduction against LLMVisor-Agg and IMAI OOD-LR over the settings each dataset has (negative: SLIM's "
            "MAPE is higher). `--`: the dataset has no such setting or no advisor study. Every table behind these "
            "numbers is in [docs/results.md](docs/results.md).")
    return "\n".join(lines) + "\n\n" + note + "\n"
