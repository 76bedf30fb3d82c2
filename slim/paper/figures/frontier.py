"""The frontier a user would rather look at than read: for one workload, throughput per GPU against
interactivity (output tokens per second per user: ``1000 / mean_tpot_ms``, where a run records TPOT;
else ``OL / mean_in_batch_e2e_ms``) at every candidate cap, measured and predicted (with the
prediction's interval where it has one), the SLO bounds that lie on that axis (a TPOT bound, and the
in-batch E2E's, ``OL x 1000 / bound``), and the chosen cap marked. Moving right buys interactivity
with throughput; the knee is where the curve turns down.

`frontier_points` reads one workload of `slim.paper.slo_predictions`' table (the pipeline's
figure per public curve); `advice_frontier_figure` reads a `slim.advisor.advise.Advice` (`slim
advise --plot`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from slim import columns as col
from slim.atomic import write_atomic
from slim.errors import PlotInputError
from slim.specs.slo import IN_BATCH_E2E

MEASURED_STYLE = {"marker": "o", "color": "tab:blue", "label": "measured"}
PREDICTED_STYLE = {"marker": "s", "color": "tab:orange", "label": "predicted", "mfc": "none"}


@dataclass(frozen=True)
class FrontierPoint:
    """One candidate cap on the frontier: interactivity (output tokens/s per user) and throughput per
    GPU (total tokens/s), with their intervals (NaN: none), measured or predicted."""

    cap: float
    interactivity: float
    throughput_per_gpu: float
    measured: bool
    interactivity_range: tuple[float, float] = (math.nan, math.nan)
    throughput_range: tuple[float, float] = (math.nan, math.nan)


@dataclass(frozen=True)
class Frontier:
    """A workload's frontier: its title, the points, the SLO bounds on the interactivity axis
    (value, label) and the chosen cap (NaN: none)."""

    title: str
    points: tuple[FrontierPoint, ...]
    bounds: tuple[tuple[float, str], ...] = ()
    chosen_cap: float = math.nan
    note: str = ""


def interactivity_of(mean_tpot_ms: float, in_batch_e2e_ms: float, output_len: float) -> float:
    """Output tokens per second per user: from the mean TPOT, else from the in-batch E2E over OL."""
    if np.isfinite(mean_tpot_ms) and mean_tpot_ms > 0:
        return 1000.0 / mean_tpot_ms
    if np.isfinite(in_batch_e2e_ms) and in_batch_e2e_ms > 0:
        return 1000.0 * output_len / in_batch_e2e_ms
    return math.nan


def bound_lines(limits_ms: dict[str, float], output_len: float) -> tuple[tuple[float, str], ...]:
    """The SLO bounds that lie on the interactivity axis: TPOT's (a mean, a median or a percentile:
    the line is ``1000 / bound``, exact for the mean) and the in-batch E2E's (``OL x 1000 / bound``)."""
    lines = []
    for name, limit in limits_ms.items():
        if not (np.isfinite(limit) and limit > 0):
            continue
        if name.endswith("_tpot_ms"):
            lines.append((1000.0 / limit, f"{name} <= {limit:.3g} ms"))
        elif name == IN_BATCH_E2E:
            lines.append((1000.0 * output_len / limit, f"{name} <= {limit:,.0f} ms"))
    return tuple(lines)


def frontier_figure(frontiers: Sequence[Frontier], columns: int = 4) -> Figure:
    """One panel per frontier: measured points joined in cap order, predictions with their intervals,
    each point labelled by its cap, the SLO bounds (grey: the admissible side is to their right), and
    the chosen cap ringed."""
    if not frontiers:
        raise PlotInputError("no frontier to draw")
    columns = min(columns, len(frontiers))
    rows = math.ceil(len(frontiers) / columns)
    figure = Figure(figsize=(3.3 * columns, 2.9 * rows))
    width, height = 3.3 * columns, 2.9 * rows   # inches; the margins below are in inches too
    figure.subplots_adjust(left=0.6 / width, right=1 - 0.12 / width, bottom=0.45 / height, top=1 - 0.42 / height,
                           wspace=0.45, hspace=0.75)
    axes = figure.subplots(rows, columns, squeeze=False)
    for ax, frontier in zip(axes.flat, frontiers):
        _panel(ax, frontier)
    for ax in list(axes.flat)[len(frontiers):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        axes.flat[0].legend(handles, labels, fontsize=6, loc="best")
    return figure


def _panel(ax, frontier: Frontier) -> None:
    for measured, style in ((True, MEASURED_STYLE), (False, PREDICTED_STYLE)):
        points = sorted((p for p in frontier.points if p.measured == measured), key=lambda p: p.cap)
        points = [p for p in points if np.isfinite(p.interactivity) and np.isfinite(p.throughput_per_gpu)]
        if not points:
            continue
        x = np.array([p.interactivity for p in points])
        y = np.array([p.throughput_per_gpu for p in points])
        xerr = np.array([[max(p.interactivity - p.interactivity_range[0], 0.0) if np.isfinite(p.interactivity_range[0])
                          else 0.0 for p in points],
                         [max(p.interactivity_range[1] - p.interactivity, 0.0) if np.isfinite(p.interactivity_range[1])
                          else 0.0 for p in points]])
        yerr = np.array([[max(p.throughput_per_gpu - p.throughput_range[0], 0.0) if np.isfinite(p.throughput_range[0])
                          else 0.0 for p in points],
                         [max(p.throughput_range[1] - p.throughput_per_gpu, 0.0)
                          if np.isfinite(p.throughput_range[1]) else 0.0 for p in points]])
        ax.errorbar(x, y, xerr=xerr, yerr=yerr, linestyle="-" if measured else ":", linewidth=0.8, markersize=4,
                    capsize=2, elinewidth=0.6, **style)
        for p in points:
            ax.annotate(f"{p.cap:g}", (p.interactivity, p.throughput_per_gpu), fontsize=5, xytext=(2, 2),
                        textcoords="offset points")
    for value, label in frontier.bounds:
        ax.axvline(value, color="0.4", linestyle="--", linewidth=0.8, label=f"SLO: {label}")
    chosen = [p for p in frontier.points if p.cap == frontier.chosen_cap and p.measured] or [
        p for p in frontier.points if p.cap == frontier.chosen_cap]
    if chosen:
        ax.plot([chosen[0].interactivity], [chosen[0].throughput_per_gpu], marker="o", markersize=11, mfc="none",
                mec="tab:red", linestyle="none", label=f"chosen --max-num-seqs {frontier.chosen_cap:g}")
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_title(frontier.title + (f"\n{frontier.note}" if frontier.note else ""), fontsize=7)
    ax.set_xlabel("interactivity (output tokens/s per user)", fontsize=7)
    ax.set_ylabel("throughput per GPU (tokens/s)", fontsize=7)
    ax.tick_params(labelsize=6)
    ax.grid(alpha=0.3)


def frontier_points(rows: pd.DataFrame, predictor: str) -> tuple[FrontierPoint, ...]:
    """The points of one workload of `slim.paper.slo_predictions`' table: measured runs, and the
    predictions of `predictor` with their intervals."""
    points = []
    tensor_parallel = rows[col.TENSOR_PARALLEL].fillna(1).astype(float)
    for (_, run), gpus in zip(rows.iterrows(), tensor_parallel):
        ol = float(run[col.OUTPUT_LEN_MEAN])
        points.append(FrontierPoint(float(run[col.MAX_NUM_SEQS]), interactivity_of(
            run["measured_mean_tpot_ms"], run["measured_" + IN_BATCH_E2E], ol),
            float(run["measured_throughput"]) / gpus, True))
        tpot = (run[f"{predictor}_mean_tpot_ms"], run[f"{predictor}_mean_tpot_ms_low"],
                run[f"{predictor}_mean_tpot_ms_high"])
        e2e = (run[f"{predictor}_{IN_BATCH_E2E}"], run[f"{predictor}_{IN_BATCH_E2E}_low"],
               run[f"{predictor}_{IN_BATCH_E2E}_high"])
        x = interactivity_of(tpot[0], e2e[0], ol)
        # Interactivity falls as latency grows: the interval's ends swap.
        low = interactivity_of(tpot[2], e2e[2], ol)
        high = interactivity_of(tpot[1], e2e[1], ol)
        points.append(FrontierPoint(float(run[col.MAX_NUM_SEQS]), x, float(run[f"{predictor}_throughput"]) / gpus,
                                    False, (low, high), (float(run[f"{predictor}_throughput_low"]) / gpus,
                                                         float(run[f"{predictor}_throughput_high"]) / gpus)))
    return tuple(points)


def measured_choice(rows: pd.DataFrame, limits_ms: dict[str, float]) -> float:
    """The measured cap of highest throughput whose every recorded metric is within its limit (NaN: none)."""
    within = np.ones(len(rows), dtype=bool)
    for name, limit in limits_ms.items():
        within &= rows[f"measured_{name}"].to_numpy(dtype=float) <= limit
    if not within.any():
        return math.nan
    ok = rows[within]
    return float(ok.sort_values(["measured_throughput", col.MAX_NUM_SEQS], ascending=[False, True],
                                kind="stable")[col.MAX_NUM_SEQS].iloc[0])


def dataset_frontiers(table: pd.DataFrame, slos, predictor: str, min_caps: int = 3) -> list[Frontier]:
    """One frontier per curve (model, IL, OL with at least `min_caps` caps) of an SLO predictions
    table: measured and `predictor`'s points, the bounds of `slos` (a `slim.specs.slo.Slos`; a relative
    bound at the curve's measured reference cap) and the measured choice under them. A curve without
    its reference run has no bound and no choice, and says so."""
    frontiers = []
    keys = [col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN]
    for (model, il, ol), rows in table.groupby(keys, sort=True):
        if rows[col.MAX_NUM_SEQS].nunique() < min_caps:
            continue
        rows = rows.sort_values(col.MAX_NUM_SEQS, kind="stable")
        reference = rows[rows[col.MAX_NUM_SEQS] == slos.reference_cap]
        limits, note = {}, f"predicted: {predictor} (left out of its calibration)"
        for bound in slos.bounds:
            measured = f"measured_{bound.metric.name}"
            value = float(reference[measured].iloc[0]) if bound.relative and len(reference) else None
            if bound.relative and (value is None or not np.isfinite(value)):
                note += f"; no run at cap {slos.reference_cap:g}: no bound"
                limits = {}
                break
            limits[bound.metric.name] = bound.limit(value)
        chosen = measured_choice(rows, limits) if limits else math.nan
        title = f"{model} IL {il:g} OL {ol:g}"
        frontiers.append(Frontier(title, frontier_points(rows, predictor), bound_lines(limits, float(ol)), chosen,
                                  note))
    return frontiers


def advice_frontier_figure(advice) -> Figure:
    """`slim advise --plot`: the frontier of the advised workload, from its candidates' measured and
    predicted values (no interval: advise's predictors hold none but a confident SLIM's E2E bound)."""
    points = []
    ol = advice.output_len
    for row in advice.candidates:
        if "throughput" in row.measured:
            points.append(FrontierPoint(row.max_num_seqs, interactivity_of(
                row.measured.get("mean_tpot_ms", math.nan), row.measured.get(IN_BATCH_E2E, math.nan), ol),
                row.measured["throughput"], True))
        points.append(FrontierPoint(row.max_num_seqs, interactivity_of(
            row.predicted.get("mean_tpot_ms", math.nan), row.predicted.get(IN_BATCH_E2E, math.nan), ol),
            row.predicted.get("throughput", math.nan), False))
    title = f"{advice.model} IL {advice.input_len:g} OL {advice.output_len:g} on {advice.hardware}"
    note = f"predicted: {advice.predictor.upper()}"
    return frontier_figure([Frontier(title, tuple(points), bound_lines(advice.limits_ms, ol),
                                     advice.recommendation.batch_cap, note)], columns=1)


def save_frontier(figure: Figure, path: str | Path, dpi: int = 150) -> None:
    """Write a frontier figure to `path` in the format its suffix names (no timestamps)."""
    path = Path(path)
    kind = path.suffix.lower().lstrip(".")
    if kind not in ("pdf", "png", "svg"):
        raise PlotInputError(f"--plot {path}: name a .pdf, .png or .svg file")
    metadata = ({"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None} if kind == "pdf"
                else {"Software": None} if kind == "png" else {"Date": None, "Creator": None})
    write_atomic(path, lambda target: figure.savefig(target, format=kind, dpi=dpi, metadata=metadata))


def curve_file_name(frontier: Frontier) -> str:
    """A file name for one curve's frontier: ``<model>_il<IL>_ol<OL>`` from its title."""
    return "_".join(frontier.title.replace(" IL ", "_il").replace(" OL ", "_ol").split())


def save_curve_frontiers(frontiers: Sequence[Frontier], directory: str | Path, kind: str = "png") -> list[Path]:
    """One figure per frontier in `directory` (emptied first), named by `curve_file_name`."""
    import shutil

    directory = Path(directory)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    paths = []
    for frontier in frontiers:
        path = directory / f"{curve_file_name(frontier)}.{kind}"
        save_frontier(frontier_figure([frontier], columns=1), path, dpi=100)
        paths.append(path)
    return paths

