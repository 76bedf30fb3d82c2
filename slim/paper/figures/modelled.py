"""Plots of the MODELLED characterisation (the paper's Figs. 3-6): each function takes the
table of `slim.paper.modelled_characterisation.characterisation_table` and returns a matplotlib `Figure` built
without pyplot (save it with `slim.paper.figures.common.save_figure`). Titles say the numbers are simulated
or modelled, never measured.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from slim import columns as col
from slim.errors import PlotInputError
from slim.gpu.roofline import ridge_point_flop_per_byte
from slim.paper.characterisation_config import SWEEP_QUANTITIES
from slim.paper.decode_attention_table import PaperTable1
from slim.specs.hardware import Hardware

SWEEP_SHORT = {"batch_size": "B", "input_len": "IL", "output_len": "OL"}
SWEEP_TITLES = {"batch_size": "Batch size", "input_len": "Input length", "output_len": "Output length"}
SIMULATED_LABEL = "simulated (per-phase accounting of slim.sim)"
MODELLED_LABEL = "MODELLED (slim.sim cost model, no hardware counters)"
PAPER_LABEL = "paper (measured, Nsight Compute)"
SWEEP_MARKERS = {"batch_size": "o", "input_len": "s", "output_len": "^"}
SWEEP_COLORMAP = "viridis"


# --- figures --------------------------------------------------------------------------

def _sweeps(table: pd.DataFrame, required: tuple[str, ...]) -> list[tuple[str, pd.DataFrame, str]]:
    """(quantity, its rows sorted by value, "(IL 256, OL 256)") per sweep, in table order."""
    col.require_columns(table, ("sweep", "value", *SWEEP_QUANTITIES, *required), "the characterisation table",
                        PlotInputError)
    if table.empty:
        raise PlotInputError("the characterisation table is empty")
    sweeps = []
    for quantity in pd.unique(table["sweep"]):
        rows = table[table["sweep"] == quantity].sort_values("value")
        fixed = ", ".join(f"{SWEEP_SHORT[other]} {rows[other].iloc[0]:g}"
                          for other in SWEEP_QUANTITIES if other != quantity)
        sweeps.append((str(quantity), rows, f"({fixed})"))
    return sweeps


def _value_ticks(ax: Axes, values: pd.Series) -> None:
    """Log-2 axis ticked at the swept values themselves."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(values.to_numpy(dtype=float), [f"{value:g}" for value in values], fontsize="small")
    ax.minorticks_off()


def _model_label(table: pd.DataFrame) -> str:
    parts = [str(table[column].iloc[0]) for column in ("model", "hardware") if column in table.columns]
    return " on ".join(parts)


def _shades(count: int) -> np.ndarray:
    return colormaps[SWEEP_COLORMAP](np.linspace(0.0, 0.85, count) if count > 1 else [0.3])


def _new_figure(n_axes: int, width_per_axis: float, height: float) -> tuple[Figure, np.ndarray]:
    figure = Figure(figsize=(width_per_axis * n_axes + 0.4, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.subplots(1, n_axes, squeeze=False)[0]


def plot_phase_breakdown(table: pd.DataFrame) -> Figure:
    """Fig. 3: prefill vs decode share of execution time (stacked bars, %) for each sweep,
    with the run's total simulated time above each bar (`simulated_phase_times`)."""
    sweeps = _sweeps(table, ("prefill_share", "decode_share", "prefill_s", "decode_s"))
    figure, axes = _new_figure(len(sweeps), 4.2, 4.4)
    for ax, (quantity, rows, fixed) in zip(axes, sweeps):
        positions = np.arange(len(rows))
        prefill = 100.0 * rows["prefill_share"].to_numpy()
        decode = 100.0 * rows["decode_share"].to_numpy()
        ax.bar(positions, prefill, color="C1")
        ax.bar(positions, decode, bottom=prefill, color="C0")
        for position, total in zip(positions, (rows["prefill_s"] + rows["decode_s"]).to_numpy()):
            ax.text(position, 101.0, f"{total:.1f} s", ha="center", va="bottom", fontsize="x-small", rotation=90)
        ax.set_xticks(positions, [f"{value:g}" for value in rows["value"]])
        ax.set_xlabel(f"{SWEEP_TITLES[quantity]} {SWEEP_SHORT[quantity]}")
        ax.set_ylim(0, 125)
        ax.set_yticks(np.arange(0, 101, 20))
        ax.set_title(f"{SWEEP_TITLES[quantity]} sweep {fixed}", fontsize="medium")
    axes[0].set_ylabel("Share of execution time (%)")
    figure.legend(handles=[Patch(color="C1", label="Prefill"), Patch(color="C0", label="Decode")],
                  loc="outside lower center", ncols=2, fontsize="small",
                  title="Bar labels: total simulated time of the run (prefill + decode, s)", title_fontsize="small")
    figure.suptitle(f"Prefill vs decode time, {_model_label(table)}: {SIMULATED_LABEL}")
    return figure


def plot_decode_utilisation(table: pd.DataFrame, bandwidth_cap: float | None = None) -> Figure:
    """Fig. 4: decode-phase DRAM-bandwidth and compute (tensor) utilisation (%) against each
    swept quantity: time-weighted means as lines, per-step peaks as crosses
    (`decode_phase_metrics`); optionally the cost model's bandwidth cap as a dotted line."""
    series = (("dram_util", "DRAM bandwidth", "C0", "o"), ("compute_util", "Compute (tensor)", "C1", "s"))
    sweeps = _sweeps(table, tuple(f"{name}_{kind}" for name, *_ in series for kind in ("mean", "peak")))
    figure, axes = _new_figure(len(sweeps), 4.2, 4.2)
    for ax, (quantity, rows, fixed) in zip(axes, sweeps):
        for name, _, color, marker in series:
            ax.plot(rows["value"], 100.0 * rows[f"{name}_mean"], color=color, marker=marker, markersize=4.5)
            ax.plot(rows["value"], 100.0 * rows[f"{name}_peak"], color=color, marker="x", markersize=8,
                    markeredgewidth=1.8, linestyle="none")
        if bandwidth_cap is not None:
            ax.axhline(100.0 * bandwidth_cap, color="0.4", linestyle=":", linewidth=1.2)
        _value_ticks(ax, rows["value"])
        ax.set_ylim(0, 105)
        ax.grid(True, alpha=0.3)
        ax.set_xlabel(f"{SWEEP_TITLES[quantity]} {SWEEP_SHORT[quantity]}")
        ax.set_title(f"{SWEEP_TITLES[quantity]} sweep {fixed}", fontsize="medium")
    axes[0].set_ylabel("Utilisation during decode (%)")
    handles = [Line2D([], [], color=color, marker=marker, markersize=4.5, label=f"{label}, mean")
               for _, label, color, marker in series]
    handles.append(Line2D([], [], color="0.3", marker="x", linestyle="none", markersize=8, markeredgewidth=1.8,
                          label="per-step peak"))
    if bandwidth_cap is not None:
        handles.append(Line2D([], [], color="0.4", linestyle=":", label="cost model's bandwidth cap"))
    axes[0].legend(handles=handles, loc="center left", fontsize="small")
    figure.suptitle(f"Decode-phase utilisation, {_model_label(table)}: {MODELLED_LABEL}")
    return figure


def plot_decode_kernel_shares(table: pd.DataFrame) -> Figure:
    """Fig. 5: shares (%) of decode GPU time in attention, FFN GEMMs and other kernels against
    the active context ``B (IL + OL)`` (log scale); colour = kernel group, marker = sweep."""
    groups = (("attention_share", "Attention", "C3"), ("ffn_share", "FFN GEMMs", "C0"),
              ("other_share", "Other: QKV and output\nprojection GEMMs,\nelementwise, LM head", "C7"))
    sweeps = _sweeps(table, ("active_context_tokens", *(column for column, *_ in groups)))
    figure, axes = _new_figure(1, 9.6, 4.8)
    ax = axes[0]
    for quantity, rows, _ in sweeps:
        rows = rows.sort_values("active_context_tokens")
        for column, _, color in groups:
            ax.plot(rows["active_context_tokens"], 100.0 * rows[column], color=color,
                    marker=SWEEP_MARKERS.get(quantity, "o"), markersize=5, linewidth=1.0, alpha=0.9)
    ax.set_xscale("log")
    ax.set_ylim(0, 100)
    ax.grid(True, alpha=0.3)
    ax.set_xlabel("Active context B (IL + OL) (tokens)")
    ax.set_ylabel("Share of decode GPU time (%)")
    group_handles = [Patch(color=color, label=label) for _, label, color in groups]
    sweep_handles = [Line2D([], [], color="0.3", marker=SWEEP_MARKERS.get(quantity, "o"), linestyle="none",
                            label=f"{SWEEP_TITLES[quantity]} sweep {fixed}") for quantity, _, fixed in sweeps]
    figure.legend(handles=group_handles, loc="outside right upper", fontsize="small", title="Kernels")
    figure.legend(handles=sweep_handles, loc="outside right lower", fontsize="small", title="Sweep")
    figure.suptitle(f"Decode GPU time by kernel, {_model_label(table)}:\n{MODELLED_LABEL}", fontsize="medium")
    return figure


def _paper_rows_of_sweep(paper: pd.DataFrame, quantity: str, rows: pd.DataFrame) -> pd.DataFrame:
    """The paper's Table I rows on this sweep: the other two quantities at the sweep's values."""
    keep = np.ones(len(paper), dtype=bool)
    for other in SWEEP_QUANTITIES:
        if other != quantity:
            keep &= paper[other].to_numpy() == rows[other].iloc[0]
    return paper[keep]


def plot_attention_roofline(table: pd.DataFrame, hw: Hardware, paper: PaperTable1 | None = None) -> Figure:
    """Fig. 6: the decode attention kernel at the final decode step on the roofline
    ``min(F_max, AI x BW_max)`` (log-log), one panel per sweep, points coloured by the swept
    value; memory-bound region (AI below the ridge ``F_max / BW_max``) shaded red, compute-bound
    green. With `paper` (and `paper_matches`), its measured Table I points on each sweep are
    hollow diamonds. Under each roofline panel, a zoom on linear axes spreads the points, which the
    log axes stack near the (constant) attention intensity; it is a panel of its own, not an inset,
    so it hides no part of the roofline."""
    sweeps = _sweeps(table, ("final_attention_intensity_flop_per_byte", "final_attention_tflop_per_s"))
    if paper is not None and not paper_matches(paper, table, hw):
        paper = None
    ridge = ridge_point_flop_per_byte(hw)
    peak_tflop_per_s, bandwidth_tb_per_s = hw.peak_flops_per_s / 1e12, hw.hbm_bandwidth_bytes_per_s / 1e12
    x_range = (0.5, 20.0 * ridge)
    intensity = np.geomspace(*x_range, 200)
    figure = Figure(figsize=(4.6 * len(sweeps) + 0.4, 7.4), layout="constrained")
    FigureCanvasAgg(figure)
    grid = figure.subplots(2, len(sweeps), squeeze=False, height_ratios=(1.7, 1.0))
    for ax, zoom, (quantity, rows, fixed) in zip(grid[0], grid[1], sweeps):
        ax.axvspan(x_range[0], ridge, color="tab:red", alpha=0.08, linewidth=0)
        ax.axvspan(ridge, x_range[1], color="tab:green", alpha=0.08, linewidth=0)
        ax.plot(intensity, np.minimum(peak_tflop_per_s, intensity * bandwidth_tb_per_s), color="black", linewidth=1.5)
        # Below the bandwidth roof (which is >= 8% of the peak from ridge / 12 up): beside the roof's
        # top the label ran into the line.
        ax.text(ridge * 0.7, peak_tflop_per_s * 0.03, "memory-bound", ha="right", fontsize="small", color="tab:red")
        ax.text(ridge * 1.4, peak_tflop_per_s * 0.6, "compute-\nbound", ha="left", va="top", fontsize="small",
                color="tab:green")
        shades = dict(zip(rows["value"], _shades(len(rows))))
        measured = _paper_rows_of_sweep(paper.rows, quantity, rows) if paper is not None else None
        for target in (ax, zoom):
            _attention_points(target, quantity, rows, shades, measured)
        _zoom_panel(zoom, rows, measured, bandwidth_tb_per_s)
        zoom.set_xlabel("Arithmetic intensity (FLOP/B), linear")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(*x_range)
        ax.set_ylim(0.3, 3.0 * peak_tflop_per_s)
        ax.grid(True, which="major", alpha=0.3)
        ax.set_xlabel("Arithmetic intensity (FLOP/B)")
        ax.set_title(f"{SWEEP_TITLES[quantity]} sweep {fixed}", fontsize="medium")
        handles = [Line2D([], [], marker="o", linestyle="none", color=shades[value],
                          label=f"{SWEEP_SHORT[quantity]} = {value:g}") for value in rows["value"]]
        handles.append(Line2D([], [], color="black", label="roofline min(F_max, AI x BW_max)"))
        if measured is not None and len(measured):
            handles.append(Line2D([], [], marker="D", linestyle="none", markerfacecolor="none", color="black",
                                  label=PAPER_LABEL))
        ax.legend(handles=handles, loc="lower right", fontsize="x-small")
    grid[0, 0].set_ylabel("Attention performance (TFLOP/s)")
    grid[1, 0].set_ylabel("TFLOP/s, linear")
    figure.suptitle(f"Decode attention at the final decode step on the {hw.display_name or hw.name} roofline "
                    f"(ridge {ridge:.0f} FLOP/B), {_model_label(table)}:\n{MODELLED_LABEL}", fontsize="medium")
    return figure


def paper_matches(paper: PaperTable1, table: pd.DataFrame, hw: Hardware) -> bool:
    """Whether the paper's Table I was measured on this table's model and this GPU (its
    points are overlaid only then)."""
    models = set(table["model"]) if "model" in table.columns else set()
    return models == {paper.model} and paper.hardware == hw.name


def _attention_points(ax: Axes, quantity: str, rows: pd.DataFrame, shades: dict,
                      measured: pd.DataFrame | None) -> None:
    """Our final-step attention points (filled), and the paper's measured ones (hollow diamonds,
    edged in the colour of the same swept value)."""
    for _, row in rows.iterrows():
        ax.plot(row["final_attention_intensity_flop_per_byte"], row["final_attention_tflop_per_s"], marker="o",
                markersize=6, linestyle="none", color=shades[row["value"]], zorder=3)
    if measured is not None:
        for _, row in measured.iterrows():
            ax.plot(row["intensity_flop_per_byte"], row["tflop_per_s"], marker="D", markersize=7, linestyle="none",
                    markerfacecolor="none", markeredgewidth=1.3, zorder=4,
                    markeredgecolor=shades.get(row[quantity], "black"))


def _zoom_panel(zoom: Axes, rows: pd.DataFrame, measured: pd.DataFrame | None, bandwidth_tb_per_s: float) -> None:
    """Linear axes around the points, with the bandwidth roof ``AI x BW_max`` drawn through them."""
    xs = [rows["final_attention_intensity_flop_per_byte"].to_numpy(dtype=float)]
    ys = [rows["final_attention_tflop_per_s"].to_numpy(dtype=float)]
    if measured is not None and len(measured):
        xs.append(measured["intensity_flop_per_byte"].to_numpy(dtype=float))
        ys.append(measured["tflop_per_s"].to_numpy(dtype=float))
    x_all = np.concatenate(xs)
    x_low, x_high = 0.9 * x_all.min(), 1.1 * x_all.max()
    x_line = np.linspace(x_low, x_high, 20)
    zoom.plot(x_line, x_line * bandwidth_tb_per_s, color="black", linewidth=1.2)
    zoom.set_xlim(x_low, x_high)
    zoom.set_ylim(0.0, 1.15 * max(np.concatenate(ys).max(), x_high * bandwidth_tb_per_s))
    zoom.set_title("zoom on the points (linear axes), with the bandwidth roof AI x BW_max", fontsize="small")
    zoom.grid(True, alpha=0.3)
