"""The measured characterisation figures (paper Section V): Fig. 1 (throughput and E2E latency
against the mean batch size) and Fig. 2 (throughput under the length sweeps).

Plot functions are pure: they take a per-run table (columns of `slim.columns`) and return a
matplotlib `Figure` built without pyplot; save it with `slim.paper.figures.common.save_figure`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from slim import columns as col
from slim.errors import PlotInputError
from slim.paper.measured_characterisation import PREEMPTED, SWEEPS, batch_scaling_runs, sweep_panels

THROUGHPUT_LABEL = "Throughput (total tokens/s)"
E2E_LABEL = "E2E latency (s, Little's law)"
MODEL_MARKERS = ("o", "s", "^", "D", "v", "P")
SWEEP_COLORMAP = "viridis"
CROSS_STYLE = {"marker": "x", "markersize": 9, "markeredgewidth": 2.0, "linestyle": "none", "color": "crimson"}


# --- Fig. 1 -------------------------------------------------------------------------

def plot_batch_scaling(runs: pd.DataFrame, dataset_label: str, output_len: float | None = None) -> Figure:
    """Fig. 1 for one dataset: see `plot_batch_scaling_rows`."""
    return plot_batch_scaling_rows([(dataset_label, runs, output_len)])


def plot_batch_scaling_rows(rows: Sequence[tuple[str, pd.DataFrame, float | None]]) -> Figure:
    """Fig. 1: total-token throughput (Eq. 6) and E2E latency against the mean batch size.

    ``T = B (IL + OL) / E2E`` (Eq. 6) is the benchmark's total-token throughput;
    E2E latency is Little's law, ``E2E = mean batch size / request throughput``
    (column `e2e_latency_s`). The x-axis is the *mean* batch size measured while
    serving (log scale), not the configured ``--max-num-seqs``. One line per model
    through its runs in ``max_num_seqs`` order; runs with status ``preempted``
    (vLLM preempted requests: the KV cache capacity was exceeded) carry a red cross. Each row's
    legend sits outside its panels, right of the E2E panel, so it covers no curve.

    One figure row per ``(dataset label, runs, output_len)``; the runs shown are
    `batch_scaling_runs` (the whole dataset, or one nominal output length of a
    length sweep). A model keeps its colour and marker across rows.
    """
    if not rows:
        raise PlotInputError("Fig. 1: no dataset to plot")
    shown_rows = [(label, batch_scaling_runs(runs, output_len), output_len) for label, runs, output_len in rows]
    models = sorted(set().union(*(shown[col.MODEL].unique() for _, shown, _ in shown_rows)))
    figure = Figure(figsize=(13.0, 0.6 + 4.2 * len(rows)), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(rows), 2, squeeze=False)
    for row_axes, (label, shown, output_len) in zip(axes, shown_rows):
        _draw_batch_scaling(row_axes, shown, models)
        workload = "" if output_len is None else f", OL {output_len:g}"
        row_axes[0].set_title(f"{label}{workload}", loc="left", fontsize="medium")
    title = "Throughput and E2E latency vs mean batch size"
    figure.suptitle(title if len(rows) > 1 else f"{title}, {rows[0][0]}")
    return figure


def _draw_batch_scaling(axes: Sequence[Axes], shown: pd.DataFrame, models: list[str]) -> None:
    """One row of Fig. 1: throughput and E2E panels, a legend of the models present."""
    present = [model for model in models if model in set(shown[col.MODEL])]
    for ax, metric, label in zip(axes, (col.TOTAL_TOKEN_THROUGHPUT, col.E2E_LATENCY_S),
                                 (THROUGHPUT_LABEL, E2E_LABEL)):
        for model in present:
            index = models.index(model)
            curve = shown[shown[col.MODEL] == model].sort_values([col.MAX_NUM_SEQS, col.MEAN_BATCH_SIZE])
            ax.plot(curve[col.MEAN_BATCH_SIZE], curve[metric], color=f"C{index % 10}",
                    marker=MODEL_MARKERS[index % len(MODEL_MARKERS)], markersize=4.5, linewidth=1.4,
                    label=model, zorder=2)
            preempted = curve[curve[col.STATUS] == PREEMPTED]
            if not preempted.empty:
                ax.plot(preempted[col.MEAN_BATCH_SIZE], preempted[metric], zorder=4, **CROSS_STYLE)
        _log_batch_axis(ax, "Mean batch size (running requests)")
        ax.set_ylabel(label)
    handles = [Line2D([], [], color=f"C{models.index(model) % 10}",
                      marker=MODEL_MARKERS[models.index(model) % len(MODEL_MARKERS)], markersize=4.5, label=model)
               for model in present]
    n_preempted = int((shown[col.STATUS] == PREEMPTED).sum())
    if n_preempted:
        handles.append(Line2D([], [], label=f"KV cache capacity exceeded (preempted, {n_preempted} run(s))",
                              **CROSS_STYLE))
    # Outside the axes, right of the E2E panel: inside, it covered whichever curves ran through its
    # corner (OPT-125M's in the simulated row); constrained layout makes room for it.
    axes[-1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
                    fontsize="small")


# --- Fig. 2 -------------------------------------------------------------------------

def plot_length_sweeps(runs: pd.DataFrame, dataset_label: str) -> Figure:
    """Fig. 2: total-token throughput (Eq. 6) under the length sweeps.

    One column per `SweepPanel` (see `sweep_panels`); top row against the
    configured ``max_num_seqs``, bottom row against the measured mean batch size
    (both log scale). One line per nominal value of the swept length, coloured
    from short (dark) to long (light). Pass the cleaned runs (status ``ok``).
    """
    usable = runs.dropna(subset=[col.MAX_NUM_SEQS, col.MEAN_BATCH_SIZE, col.TOTAL_TOKEN_THROUGHPUT])
    panels = sweep_panels(usable)
    if not panels:
        raise PlotInputError("plot_length_sweeps: no run with measured throughput to plot")
    figure = Figure(figsize=(3.9 * len(panels) + 0.6, 7.4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, len(panels), squeeze=False)
    for column, panel in enumerate(panels):
        rows = usable[(usable[col.MODEL] == panel.model) & (usable[panel.fixed_column] == panel.fixed_value)]
        values = sorted(rows[panel.swept_column].unique())
        shades = colormaps[SWEEP_COLORMAP](np.linspace(0.0, 0.85, len(values)) if len(values) > 1 else [0.3])
        for row, x_column, x_label in ((0, col.MAX_NUM_SEQS, "max_num_seqs (configured)"),
                                       (1, col.MEAN_BATCH_SIZE, "Mean batch size (measured)")):
            ax = axes[row, column]
            for value, shade in zip(values, shades):
                curve = rows[rows[panel.swept_column] == value].sort_values([col.MAX_NUM_SEQS, col.MEAN_BATCH_SIZE])
                ax.plot(curve[x_column], curve[col.TOTAL_TOKEN_THROUGHPUT], color=shade, marker="o",
                        markersize=4, linewidth=1.4, label=f"{SWEEPS[panel.swept_column][1]} {value:g}")
            _log_batch_axis(ax, x_label)
            ax.set_ylabel(THROUGHPUT_LABEL if column == 0 else "")
        axes[0, column].set_title(panel.title, fontsize="medium")
        axes[0, column].legend(loc="upper left", fontsize="small")
    figure.suptitle(f"Throughput under the length sweeps, {dataset_label}")
    return figure


def _log_batch_axis(ax: Axes, label: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlabel(label)
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)
