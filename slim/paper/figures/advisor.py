"""The advisor's figures: Fig. 12 (sensitivity heatmaps) and Fig. 13 (GPU memory per model).

Pure functions from the tables of `slim.paper.advisor_study` to a matplotlib `Figure` built without
pyplot; save them with `slim.paper.figures.common.save_figure` (no timestamps in the files).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Colormap, Normalize
from matplotlib.figure import Figure

from slim import columns as col
from slim.errors import PlotInputError

SENSITIVITY_METRICS = (
    ("throughput_retained_pct", "Throughput retained (% of profiled peak)", "viridis", ".0f"),
    ("kv_saved_gib", "KV memory saved (GiB)", "mako", ".1f"),
)
NO_CAP_LABELS = {"slo": "none:\nSLO", "epsilon": "none:\nε", "both": "none:\nSLO+ε", "": "none"}
"""Cell text where the advisor finds no cap, by `slim.paper.advisor_study.no_cap_reason`."""
EPSILON_BINDS_COLOR = "crimson"
MIN_LABELLED_SHARE = 0.04
"""Fig. 13: a bar segment under this share of the GPU's memory is too thin for its label inside."""
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


def plot_sensitivity(grid: pd.DataFrame, dataset_label: str, efficiency: pd.DataFrame | None = None) -> Figure:
    """Fig. 12: one row per (transfer, advisor), one heatmap per metric over SLO multiplier x
    epsilon, each cell giving the metric and the chosen cap ``B``. Both heatmaps of a metric
    share one colour scale per transfer (throughput: 0-100 %), so equal colours mean equal values
    across advisors. Cells where epsilon changed the choice (grid column ``epsilon_binds``) are
    outlined; cells without a cap say "none" and, with column ``no_cap_reason``, which constraint
    no candidate met. With `efficiency` (`slim.paper.advisor_study.sensitivity_study`), a third
    panel per row draws the advisor's batching efficiency ``T(B) / (B T(1))`` against the cap,
    with the grid's epsilons as dashed lines. A grid without an ``advisor`` column is SLIM-BCA's."""
    _require(grid, ("transfer", "label", "epsilon", "slo_multiplier", "batch_cap",
                    *(metric[0] for metric in SENSITIVITY_METRICS)), "sensitivity")
    if efficiency is not None:
        _require(efficiency, ("transfer", "advisor", "batch_cap", "batching_efficiency"), "batching efficiency")
    from matplotlib.patches import Rectangle

    if "advisor" not in grid.columns:
        grid = grid.assign(advisor="SLIM-BCA")
    panels = list(dict.fromkeys(zip(grid["transfer"], grid["advisor"])))
    n_slo = grid["slo_multiplier"].nunique()
    columns = len(SENSITIVITY_METRICS) + (efficiency is not None)
    figure = Figure(figsize=(4.6 * columns + 0.4, len(panels) * (1.1 + 0.3 * n_slo) + 0.5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(panels), columns, squeeze=False)
    for row, (transfer, advisor) in enumerate(panels):
        rows = grid[(grid["transfer"] == transfer) & (grid["advisor"] == advisor)]
        of_transfer = grid[grid["transfer"] == transfer]
        caps = rows.pivot(index="slo_multiplier", columns="epsilon", values="batch_cap").sort_index()
        binds = (rows.pivot(index="slo_multiplier", columns="epsilon", values="epsilon_binds").sort_index()
                 .to_numpy(dtype=bool) if "epsilon_binds" in rows.columns else np.zeros(caps.shape, dtype=bool))
        reasons = (rows.pivot(index="slo_multiplier", columns="epsilon", values="no_cap_reason").sort_index()
                   .fillna("").to_numpy(dtype=str) if "no_cap_reason" in rows.columns
                   else np.full(caps.shape, "", dtype=object))
        for column, (metric, title, cmap, fmt) in enumerate(SENSITIVITY_METRICS):
            ax = axes[row, column]
            matrix = rows.pivot(index="slo_multiplier", columns="epsilon", values=metric).sort_index()
            values = matrix.to_numpy(dtype=float)
            labels = np.array([[f"{value:{fmt}}\nB {cap:g}" if np.isfinite(value) else ""
                                for value, cap in zip(value_row, cap_row)]
                               for value_row, cap_row in zip(values, caps.to_numpy(dtype=float))])
            low, high = ((0.0, 100.0) if metric == "throughput_retained_pct"
                         else (min(0.0, float(of_transfer[metric].min())), float(of_transfer[metric].max())))
            _annotated_heatmap(ax, matrix, labels, _colormap(cmap), low,
                               high if high > low else low + 1.0)
            for i, j in zip(*np.nonzero(np.isnan(values))):
                ax.text(j + 0.5, i + 0.5, NO_CAP_LABELS.get(reasons[i, j], "none"), ha="center", va="center",
                        fontsize=7, color="0.35")
            for i, j in zip(*np.nonzero(binds)):
                ax.add_patch(Rectangle((j + 0.04, i + 0.04), 0.92, 0.92, fill=False, edgecolor=EPSILON_BINDS_COLOR,
                                       linewidth=1.6))
            ax.set_xlabel("ε (batching-efficiency floor)")
            ax.set_ylabel("SLO multiplier")
            ax.tick_params(labelsize=8)
            ax.set_title(f"{advisor}: {rows['label'].iloc[0]}\n{title}", fontsize=9)
        if efficiency is not None:
            _plot_efficiency(axes[row, -1], efficiency, transfer, advisor, sorted(rows["epsilon"].unique()))
    advisors = " and ".join(dict.fromkeys(grid["advisor"]))
    figure.suptitle(f"{advisors} sensitivity, {dataset_label}\n"
                    f"cell: metric and chosen cap B; outlined: ε changed the choice (the SLO alone picks a larger "
                    f"cap); none: no cap meets the SLO / the floor ε / both", fontsize=10)
    return figure


def _colormap(name: str) -> Colormap:
    """A colour map by name: matplotlib's, or seaborn's "mako". seaborn (with the scipy.stats and
    statsmodels it imports, about 2 CPU-s) is imported only here, by the one figure that uses it."""
    if name == "mako":
        import seaborn as sns

        return sns.color_palette("mako", as_cmap=True)
    return colormaps[name]


def _annotated_heatmap(ax, matrix: pd.DataFrame, labels: np.ndarray, cmap: Colormap, vmin: float, vmax: float,
                       fontsize: float = 7) -> None:
    """A heatmap of `matrix` (rows top to bottom as in the frame), each cell annotated with `labels`,
    and a colour bar: matplotlib's pcolormesh and text. (seaborn's heatmap draws the whole figure
    once per call to decide its tick labels, which made Fig. 12 cost 15 s of CPU.)"""
    values = matrix.to_numpy(dtype=float)
    norm = Normalize(vmin=vmin, vmax=vmax)
    mesh = ax.pcolormesh(np.ma.masked_invalid(values), cmap=cmap, norm=norm, edgecolors="white", linewidth=0.5)
    ax.set_xlim(0, values.shape[1])
    ax.set_ylim(values.shape[0], 0)
    ax.set_xticks(np.arange(values.shape[1]) + 0.5, [f"{value:g}" for value in matrix.columns])
    ax.set_yticks(np.arange(values.shape[0]) + 0.5, [f"{value:g}" for value in matrix.index])
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(length=0)
    colours = cmap(norm(np.nan_to_num(values, nan=vmin)))
    for (i, j), text in np.ndenumerate(labels):
        if text:
            luminance = 0.2126 * colours[i, j, 0] + 0.7152 * colours[i, j, 1] + 0.0722 * colours[i, j, 2]
            ax.text(j + 0.5, i + 0.5, text, ha="center", va="center", fontsize=fontsize,
                    color="black" if luminance > 0.408 else "white")
    ax.figure.colorbar(mesh, ax=ax)


def _plot_efficiency(ax, efficiency: pd.DataFrame, transfer: str, advisor: str, epsilons: list[float]) -> None:
    """The advisor's batching efficiency ``T(B) / (B T(1))`` on its own curve, the epsilons as lines."""
    rows = efficiency[(efficiency["transfer"] == transfer) & (efficiency["advisor"] == advisor)]
    rows = rows.sort_values("batch_cap")
    ax.plot(rows["batch_cap"], rows["batching_efficiency"], color="C0", marker="o", markersize=4, linewidth=1.3)
    for epsilon in epsilons:
        ax.axhline(epsilon, color=EPSILON_BINDS_COLOR, linestyle="--", linewidth=0.8, alpha=0.7)
        # Labelled at the left, where every efficiency curve starts at 1, far above the floors.
        ax.annotate(f"ε {epsilon:g}", (0.0, epsilon), xycoords=("axes fraction", "data"), xytext=(3, 1),
                    textcoords="offset points", ha="left", va="bottom", fontsize=7, color=EPSILON_BINDS_COLOR)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.05)
    ax.grid(True, alpha=0.3)
    ax.tick_params(labelsize=8)
    ax.set_xlabel("batch cap B (--max-num-seqs)")
    ax.set_ylabel("T(B) / (B T(1))")
    curve = "measured curve" if advisor == "Full-profile BCA" else "predicted curve"
    ax.set_title(f"{advisor}: batching efficiency of its {curve}", fontsize=9)


def plot_memory_breakdown(memory: pd.DataFrame, dataset_label: str, epsilon: float,
                          slo_multiplier: float, absent: tuple[str, ...] = ()) -> Figure:
    """Fig. 13: stacked GPU memory per model (weights, BCA's KV allocation, KV saved,
    the rest), each part's GiB printed on its bar segment, or, for a segment too thin to hold
    its label (under `MIN_LABELLED_SHARE` of the GPU's memory), under the bar's name. `absent`
    lines (curves the dataset lacks) are printed under the title; with no curve left, only they are."""
    figure = Figure(figsize=(6.5, 4.8), layout="constrained")
    FigureCanvasAgg(figure)
    if memory.empty and absent:
        figure.suptitle(f"GPU memory with BCA's cap, {dataset_label}: no configured curve was measured\n"
                        + "\n".join(absent), fontsize=8)
        return figure
    _require(memory, ("label", "batch_cap", "total_gib", *(part[0] for part in MEMORY_PARTS)), "memory")
    ax = figure.subplots()
    positions = np.arange(len(memory))
    bottom = np.zeros(len(memory))
    total = float(memory["total_gib"].iloc[0])
    thin: list[list[str]] = [[] for _ in positions]
    for column, label, color in MEMORY_PARTS:
        heights = memory[column].to_numpy(dtype=float)
        bars = ax.bar(positions, heights, bottom=bottom, color=color, label=label, width=0.6)
        fits = heights >= MIN_LABELLED_SHARE * total
        ax.bar_label(bars, labels=[f"{h:.2f}" if ok else "" for h, ok in zip(heights, fits)], label_type="center",
                     fontsize=8, color="white" if color in ("0.35", "C0") else "black")
        for index in np.flatnonzero(~fits):
            thin[index].append(f"{label} {heights[index]:.2f}")
        bottom += heights
    ax.set_xticks(positions, [f"{label}\n(cap {cap:g})" + "".join(f"\n{part}" for part in parts)
                              for label, cap, parts in zip(memory["label"], memory["batch_cap"], thin)])
    ax.tick_params(axis="x", labelsize=8)
    ax.axhline(total, color="k", linestyle=":", linewidth=1, label=f"GPU memory ({total:g} GiB)")
    ax.set_ylabel("GPU memory (GiB)")
    ax.set_title(f"GPU memory with BCA's cap (ε {epsilon:g}, SLO {slo_multiplier:g}x), {dataset_label}"
                 + "".join(f"\n{line}" for line in absent), fontsize=9)
    # Below the figure, where constrained layout leaves room for however tall the tick labels are.
    figure.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncols=3, fontsize=8)
    return figure
