"""The layout decision as a dataset's measurements make it: per workload measured at several layouts
and per SLO kind, the (layout, cap) of most tokens/s per GPU within the SLOs, and how much it gives
over the smallest layout's best.

A workload is a (accelerator, model as served, input length, output length) with curves at two
layouts or more (`slim.paper.replay.layouts.layout_workloads`: a layout is a tensor-parallel size and
data-parallel size, its GPUs its runs' ``gpus_per_server``). Each layout's cap is full profiling's
choice on its recorded curve (BCA, Eq. 13, at the efficiency floor `epsilon`) and the layouts compare
by that cap's total tokens/s per GPU of the whole server, a tie going to fewer GPUs
(`slim.paper.replay.layouts.layout_truth`). Nothing is predicted or simulated: this is the answer an
exhaustive sweep gives, the reference the layout replay (target ``beyond_paper``) scores tune against.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.markdown import markdown_table
from slim.paper.replay.curves import SloKind
from slim.paper.replay.layouts import layout_truth, layout_workloads
from slim.paper.replay.searches import full_profile_choice

CHOICE_COLUMNS = ("slo_kind", "workload", "layouts", "best_layout", "best_cap", "best_per_gpu", "smallest_layout",
                  "smallest_cap", "smallest_per_gpu", "best_over_smallest")
"""One row per (SLO kind, workload): its layouts, the best and the smallest layout's choice (cap NaN:
no cap meets the SLOs and the efficiency floor) and their tokens/s per GPU, and their ratio."""


def layout_choices(runs: pd.DataFrame, kinds: Sequence[SloKind], epsilon: float) -> tuple[pd.DataFrame, list[str]]:
    """`CHOICE_COLUMNS` for every workload of the usable (``ok``) `runs` at several layouts under every
    kind, and one line per workload or layout left out (`layout_workloads`'s reasons; the kinds named
    where not every kind left it out)."""
    usable = runs[runs[col.STATUS] == "ok"]
    rows, kinds_of_note = [], {}
    for kind in kinds:
        workloads, skipped = layout_workloads(usable, kind)
        for line in skipped:
            kinds_of_note.setdefault(line, []).append(kind.name)
        for workload in workloads:
            layouts = workload.layouts
            truth = layout_truth(workload, epsilon)
            smallest_cap = full_profile_choice(layouts[0].curve, epsilon)
            smallest = (layouts[0].per_gpu(layouts[0].curve.recorded_values(smallest_cap))
                        if np.isfinite(smallest_cap) else math.nan)
            rows.append({
                "slo_kind": kind.name, "workload": workload.label,
                "layouts": ", ".join(layout.layout for layout in layouts),
                "best_layout": layouts[truth.layout].layout if truth.layout >= 0 else "",
                "best_cap": truth.cap, "best_per_gpu": truth.per_gpu, "smallest_layout": layouts[0].layout,
                "smallest_cap": smallest_cap, "smallest_per_gpu": smallest,
                "best_over_smallest": truth.per_gpu / smallest if np.isfinite(smallest) and smallest > 0 else math.nan,
            })
    notes = [line if len(names) == len(kinds) else f"{line} (SLO kinds: {', '.join(names)})"
             for line, names in kinds_of_note.items()]
    return pd.DataFrame(rows, columns=list(CHOICE_COLUMNS)), notes


def _ratio(value: float) -> str:
    return "-" if not np.isfinite(value) else f"{value:.2f}x"


def layout_choices_markdown(table: pd.DataFrame, dataset_label: str, notes: Sequence[str] = ()) -> str:
    """The table per SLO kind and workload, preceded by a count per kind: workloads, those whose best
    layout is not the smallest, those the smallest cannot serve within the SLOs, and the largest gain."""
    counts = []
    for kind, part in table.groupby("slo_kind", sort=False):
        chosen = part[part["best_layout"] != ""]
        not_smallest = int((chosen["best_layout"] != chosen["smallest_layout"]).sum())
        cannot = int(part["smallest_cap"].isna().sum())
        gain = float(part["best_over_smallest"].max()) if part["best_over_smallest"].notna().any() else math.nan
        counts.append([str(kind), str(len(part)), str(not_smallest), str(cannot), _ratio(gain)])
    summary = markdown_table(["SLO kind", "workloads", "best layout not the smallest", "smallest meets no cap",
                              "largest gain over the smallest's best"], counts)
    body = [[row["slo_kind"], row["workload"], row["layouts"], row["best_layout"] or "none",
             "-" if not np.isfinite(row["best_cap"]) else f"{row['best_cap']:g}",
             "-" if not np.isfinite(row["best_per_gpu"]) else f"{row['best_per_gpu']:,.0f}",
             "-" if not np.isfinite(row["smallest_cap"]) else f"{row['smallest_cap']:g}",
             _ratio(row["best_over_smallest"])] for _, row in table.iterrows()]
    detail = markdown_table(["SLO kind", "workload", "layouts", "best layout", "cap", "tokens/s per GPU",
                             "smallest layout's cap", "best / smallest"], body)
    left = "".join(f"\n- {line}" for line in notes)
    return (f"### The layout decision measured: {dataset_label}\n\n"
            "Per workload measured at several layouts and per SLO kind, the (layout, cap) of most total tokens/s "
            "per GPU of the whole server within the SLOs (each layout's cap: full profiling's choice on its "
            "recorded curve), against the smallest layout's best. Measured only; `slim.paper.layout_choices`.\n\n"
            + "\n".join(summary) + "\n\n" + "\n".join(detail) + "\n"
            + (f"\nLeft out:{left}\n" if notes else ""))

