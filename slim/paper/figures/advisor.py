"""The advisor's figures: Fig. 12 (sensitivity heatmaps) and Fig. 13 (GPU memory per model).

Pure functions from the tables of `slim.paper.advisor_study` to a matplotlib `Figure` built without
pyplot; save them with `slim.paper.figures.common.save_figure` (no timestamps in the files).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from slim import columns as col
from slim.errors import PlotInputError

SENSITIVITY_METRICS = (
    ("throughput_retained_pct", "Throughput retained (% of profiled peak)", "viridis", ".0f"),
    ("kv_saved_gib", "KV memory saved (GiB)", "mako", ".1f"),
)
MEMORY_PARTS = (
    ("weights_gib", "Weights", "0.35"),
    ("kv_allocation_gib", "BCA KV allocation", "C0"),
    ("kv_saved_gib", "KV saved", "C2"),
    ("other_gib", "Other (activations, slack)", "0.8"),
)


def _require(frame: pd.DataFrame, columns: tuple[str, ...], name: str) -> None:
    col.require_columns(frame, columns, f"{name} table", PlotInputError)
    if frame.empty:
        raise PlotInputError(f"{name} table is empty")


def plot_sensitivity(grid: pd.DataFrame, dataset_label: str) -> Figure:
    """Fig. 12: one row per (transfer, advisor), one heatmap per metric over SLO multiplier x
    epsilon. Cells where the advisor finds no admissible cap are marked 'none'. A grid
    without an ``advisor`` column is SLIM-BCA's."""
    _require(grid, ("transfer", "label", "epsilon", "slo_multiplier",
                    *(metric[0] for metric in SENSITIVITY_METRICS)), "sensitivity")
    # seaborn (its heatmap and the "mako" colour map) is imported only here: it adds about
    # 0.7 s to every job that imports this module, and only this figure uses it.
    import seaborn as sns

    if "advisor" not in grid.columns:
        grid = grid.assign(advisor="SLIM-BCA")
    panels = list(dict.fromkeys(zip(grid["transfer"], grid["advisor"])))
    figure = Figure(figsize=(10, 3.6 * len(panels)), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(panels), len(SENSITIVITY_METRICS), squeeze=False)
    for row, (transfer, advisor) in enumerate(panels):
        rows = grid[(grid["transfer"] == transfer) & (grid["advisor"] == advisor)]
        for column, (metric, title, cmap, fmt) in enumerate(SENSITIVITY_METRICS):
            ax = axes[row, column]
            matrix = rows.pivot(index="slo_multiplier", columns="epsilon", values=metric).sort_index()
            sns.heatmap(matrix, ax=ax, annot=True, fmt=fmt, cmap=cmap, cbar=True, linewidths=0.5)
            for i, j in zip(*np.nonzero(np.isnan(matrix.to_numpy()))):
                ax.text(j + 0.5, i + 0.5, "none", ha="center", va="center", fontsize=8, color="0.4")
            ax.set_xlabel("epsilon (batching-efficiency floor)")
            ax.set_ylabel("SLO multiplier")
            ax.set_title(f"{advisor}: {rows['label'].iloc[0]}\n{title}", fontsize=9)
    advisors = " and ".join(dict.fromkeys(grid["advisor"]))
    figure.suptitle(f"{advisors} sensitivity, {dataset_label}")
    return figure


def plot_memory_breakdown(memory: pd.DataFrame, dataset_label: str, epsilon: float,
                          slo_multiplier: float) -> Figure:
    """Fig. 13: stacked GPU memory per model (weights, BCA's KV allocation, KV saved,
    the rest), each part's GiB printed on its bar segment."""
    _require(memory, ("label", "batch_cap", "total_gib", *(part[0] for part in MEMORY_PARTS)), "memory")
    figure = Figure(figsize=(6.5, 4.5), layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    positions = np.arange(len(memory))
    bottom = np.zeros(len(memory))
    for column, label, color in MEMORY_PARTS:
        heights = memory[column].to_numpy(dtype=float)
        bars = ax.bar(positions, heights, bottom=bottom, color=color, label=label, width=0.6)
        ax.bar_label(bars, labels=[f"{h:.2f}" for h in heights], label_type="center", fontsize=8,
                     color="white" if color in ("0.35", "C0") else "black")
        bottom += heights
    ax.set_xticks(positions, [f"{label}\n(cap {cap:g})" for label, cap in zip(memory["label"], memory["batch_cap"])])
    ax.axhline(float(memory["total_gib"].iloc[0]), color="k", linestyle=":", linewidth=1)
    ax.set_ylabel("GPU memory (GiB)")
    ax.set_title(f"GPU memory with BCA's cap (epsilon {epsilon:g}, SLO {slo_multiplier:g}x), {dataset_label}",
                 fontsize=9)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2, fontsize=8)
    return figure
