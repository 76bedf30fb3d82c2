"""The per-GPU frontier with one curve per layout, as InferenceX draws it: total tokens/s per GPU
(over every GPU of a layout's server: tensor x pipeline x data parallel) against output tokens/s
per user, one colour per layout (tensor-parallel size, and data-parallel size where the runs have
several), measured points filled and joined, predicted points open and dotted (with their interval
where one is held), the SLO bounds on the interactivity axis, and the chosen (layout, cap) ringed.
A layout without points (no cap meets the SLOs, too many GPUs, no run) is named in the legend with
its reason. The interactivity axis and the bounds follow `slim.paper.figures.frontier`'s rule
(`axis_metric`, `bound_lines`).

`advice_layout_frontier` reads a `slim.advisor.layouts.LayoutAdvice` (`slim advise
--tensor-parallel-sizes ... --plot FILE`: 900 x 600 px as a PNG); `dataset_layout_frontiers` reads
one dataset's clean runs, a frontier per cell (model as served, so its precision, and input and
output length) with several layouts, measured, and predicted where a table of predictions per run
is given (the pipeline's ``results/beyond_paper/frontiers/``)."""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

from slim import columns as col
from slim.advisor.layouts import LayoutAdvice
from slim.decision.layouts import Layout
from slim.errors import PlotInputError
from slim.paper.figures.frontier import (
    ADVICE_FONT_SIZE,
    ADVICE_INCHES,
    ADVICE_LEGEND_INCHES,
    DEFAULT_AXIS,
    FrontierPoint,
    advice_points,
    axis_label,
    axis_metric,
    bound_lines,
    drawn_points,
    interactivity,
    interval_errors,
    save_frontier,
    server_gpus,
)
from slim.paper.figures.point_labels import PointLabel, near, place_labels
from slim.specs.slo import IN_BATCH_E2E
from slim.tune.server_sizes import expert_parallel_enabled

LAYOUT_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive",
                 "tab:cyan")
"""One colour per layout, in the layouts' order (red is kept for the chosen point's ring)."""
REASON_CHARACTERS = 110
"""A losing layout's reason is shortened to this in the legend (the report prints it whole)."""
MIN_LAYOUTS = 2
"""A dataset's cell is drawn where its runs hold at least this many layouts."""
PREDICTED_BY = "SIM zero-shot (calibrated on the other models' runs)"
"""Who predicts the pipeline's frontiers: the accuracy beyond the paper's zero-shot simulator."""


@dataclass(frozen=True)
class LayoutCurve:
    """One layout on the frontier: its name (``TP t`` or ``TP t x DP d``), the GPUs one server
    occupies, its points (throughput per GPU of the whole server) and SLO bounds on the axis, or why
    it has no points (`reason`)."""

    name: str
    gpus: int
    points: tuple[FrontierPoint, ...] = ()
    bounds: tuple[tuple[float, str], ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class LayoutFrontier:
    """A workload's layouts: its title, a curve per layout, the latency metric of its interactivity
    axis, the labels of the bounds on other metrics (named, not drawn), the chosen (layout name, cap)
    or None, a note, and who predicts the open points."""

    title: str
    curves: tuple[LayoutCurve, ...]
    axis: str = DEFAULT_AXIS
    other_bounds: tuple[str, ...] = ()
    chosen: tuple[str, float] | None = None
    note: str = ""
    predictor: str = "the predictor"


def advice_layout_frontier(layouts: LayoutAdvice) -> LayoutFrontier:
    """`slim advise --tensor-parallel-sizes ... --plot`'s frontier: each advised layout's candidates
    (`advice_points`: measured and predicted, per GPU of its server) on the axis of the SLOs, its
    bounds, the chosen layout and cap, and the layouts without advice with their reasons."""
    advised = [outcome for outcome in layouts.outcomes if outcome.advice is not None]
    first = advised[0].advice if advised else None
    axis = axis_metric(list(first.limits_ms)) if first is not None else DEFAULT_AXIS
    curves, other_bounds = [], ()
    for outcome in layouts.outcomes:
        if outcome.advice is None:
            curves.append(LayoutCurve(outcome.name, outcome.gpus_per_replica, reason=outcome.reason))
            continue
        advice = outcome.advice
        bounds, other_bounds = bound_lines(advice.limits_ms, advice.output_len, axis)
        curves.append(LayoutCurve(outcome.name, outcome.gpus_per_replica, advice_points(advice, axis), bounds))
    chosen = layouts.chosen
    title, predictor = "layouts", "the predictor"
    if first is not None:
        title = f"{first.model} IL {first.input_len:g} OL {first.output_len:g} on {first.hardware}"
        predictor = first.predictor.upper()
    return LayoutFrontier(title, tuple(curves), axis, other_bounds,
                          (chosen.name, float(chosen.advice.recommendation.batch_cap)) if chosen is not None else None,
                          f"predicted: {predictor}", predictor)


def layout_frontier_figure(frontier: LayoutFrontier, inches: tuple[float, float] = ADVICE_INCHES,
                           legend_inches: float = ADVICE_LEGEND_INCHES,
                           font_size: float = ADVICE_FONT_SIZE) -> Figure:
    """One panel (`inches`) with the legend in a column `legend_inches` wide beside it (the defaults:
    900 x 600 px as a PNG at `save_frontier`'s resolution); text at `font_size` points."""
    width, height = inches[0] + legend_inches, inches[1]
    scale = font_size / 7.0
    axes_width = inches[0] - (0.75 + 0.15) * scale
    lines = textwrap.wrap(frontier.note, int(axes_width * 72 / (0.55 * font_size)))
    title = "\n".join([frontier.title, *lines])
    title_height = (1.2 * font_size * (title.count("\n") + 1) + 12 * scale) / 72
    figure = Figure(figsize=(width, height))
    figure.subplots_adjust(left=0.75 * scale / width, right=1 - (0.15 * scale + legend_inches) / width,
                           bottom=0.5 * scale / height, top=1 - title_height / height)
    ax = figure.add_subplot()
    handles, labels = _draw_layouts(ax, frontier, font_size)
    ax.set_xscale("log")
    # Ticks at 1, 2, 3 and 5 per decade, written plainly: the curves often span less than a decade.
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 3.0, 5.0)))
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_title(title, fontsize=font_size)
    ax.set_xlabel(axis_label(frontier.axis), fontsize=font_size - 1)
    ax.set_ylabel("total tokens/s per GPU", fontsize=font_size)
    ax.tick_params(labelsize=font_size - 1)
    ax.grid(alpha=0.3)
    _label_caps(ax, frontier, font_size - 3, _marker_size(font_size))
    characters = int(legend_inches * 72 / (0.6 * (font_size - 2))) - 5   # what fits beside a handle
    ax.legend(handles, [textwrap.fill(label, characters) for label in labels], fontsize=font_size - 2,
              loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
    return figure


def _marker_size(font_size: float) -> float:
    return 4 * font_size / 7


def _color(position: int) -> str:
    return LAYOUT_COLORS[position % len(LAYOUT_COLORS)]


def _draw_layouts(ax, frontier: LayoutFrontier, font_size: float) -> tuple[list, list[str]]:
    """Every layout's curves, bounds and the chosen ring on `ax`; the legend's handles and labels."""
    marker_size, line_width = _marker_size(font_size), 0.8 * font_size / 7
    handles, labels = [], []
    drawn = [curve for curve in frontier.curves if curve.reason is None]
    shared_bounds = len({curve.bounds for curve in drawn}) == 1
    any_predicted = any_refused = False
    for position, curve in enumerate(drawn):
        color = _color(position)
        measured = drawn_points([p for p in curve.points if p.measured])
        predicted = drawn_points([p for p in curve.points if not p.measured and not p.refused])
        for points, filled in ((measured, True), (predicted, False)):
            if not points:
                continue
            x_errors = interval_errors(points, lambda p: p.interactivity, lambda p: p.interactivity_range)
            y_errors = interval_errors(points, lambda p: p.throughput_per_gpu, lambda p: p.throughput_range)
            # No bars where no point holds an interval: a zero-length bar's caps would cross the open markers.
            ax.errorbar([p.interactivity for p in points], [p.throughput_per_gpu for p in points],
                        xerr=x_errors if x_errors.any() else None, yerr=y_errors if y_errors.any() else None,
                        color=color, marker="o", mfc=color if filled else "none", markersize=marker_size,
                        linestyle="-" if filled else ":", linewidth=line_width, capsize=2, elinewidth=0.6,
                        label=f"{curve.name} {'measured' if filled else 'predicted'}")
        any_predicted |= bool(predicted)
        refused = drawn_points([p for p in curve.points if p.refused and not p.measured])
        if refused:
            any_refused = True
            ax.plot([p.interactivity for p in refused], [p.throughput_per_gpu for p in refused], marker="x",
                    color=color, markersize=marker_size, linestyle="none", label=f"{curve.name} refused")
        handles.append(Line2D([], [], color=color, marker="o", markersize=marker_size, linewidth=line_width))
        labels.append(f"{curve.name} ({curve.gpus} GPU{'s' if curve.gpus > 1 else ''} per server)")
    # One grey line where every layout has the same bounds; else each layout's in its colour.
    for position, curve in enumerate(drawn[:1] if shared_bounds else drawn):
        color = "0.4" if shared_bounds else _color(position)
        for value, label in curve.bounds:
            ax.axvline(value, color=color, linestyle="--", linewidth=line_width, label=label)
            handles.append(Line2D([], [], color=color, linestyle="--", linewidth=line_width))
            labels.append(f"{'' if shared_bounds else curve.name + ': '}{label} (admissible to its right)")
    handles.append(Line2D([], [], color="0.2", marker="o", markersize=marker_size, linewidth=line_width))
    labels.append("measured (filled, joined)")
    if any_predicted:
        handles.append(Line2D([], [], color="0.2", marker="o", mfc="none", markersize=marker_size, linestyle=":",
                              linewidth=line_width))
        labels.append(f"predicted: {frontier.predictor} (open, dotted)")
    if any_refused:
        handles.append(Line2D([], [], color="0.2", marker="x", markersize=marker_size, linestyle="none"))
        labels.append(f"refused by {frontier.predictor} (simulated preemption)")
    chosen = _chosen_point(frontier)
    if chosen is not None:
        ring = ax.plot([chosen.interactivity], [chosen.throughput_per_gpu], marker="o",
                       markersize=2.7 * marker_size, mfc="none", mec="tab:red", mew=1.5, linestyle="none",
                       label="chosen")[0]
        handles.append(ring)
        labels.append(f"chosen: {frontier.chosen[0]}, --max-num-seqs {frontier.chosen[1]:g} "
                      f"({chosen.throughput_per_gpu:,.0f} tokens/s per GPU)")
    for other in frontier.other_bounds:
        handles.append(Line2D([], [], linestyle="none"))
        labels.append(f"{other}: another metric, not drawn")
    for curve in frontier.curves:
        if curve.reason is not None:
            handles.append(Line2D([], [], linestyle="none"))
            labels.append(f"{curve.name}: no advice ({textwrap.shorten(curve.reason, REASON_CHARACTERS)})")
    return handles, labels


def _chosen_point(frontier: LayoutFrontier) -> FrontierPoint | None:
    """The chosen layout's point at the chosen cap: its measured one where measured, else predicted."""
    if frontier.chosen is None:
        return None
    name, cap = frontier.chosen
    curve = next((c for c in frontier.curves if c.name == name), None)
    at_cap = [p for p in drawn_points(curve.points if curve is not None else ()) if p.cap == cap]
    at_cap = [p for p in at_cap if p.measured] or at_cap
    return at_cap[0] if at_cap else None


def _label_caps(ax, frontier: LayoutFrontier, font_size: float, marker_size: float) -> None:
    """Each drawn point's cap beside it in its layout's colour where the label overlaps nothing
    (`place_labels`): every layout's measured points first, then predicted ones not under a measured
    twin; every marker, the chosen ring and the bounds are kept clear."""
    radius, chosen = marker_size / 2 + 1.5, _chosen_point(frontier)
    measured_labels, predicted_labels, markers = [], [], []
    drawn = [curve for curve in frontier.curves if curve.reason is None]
    for position, curve in enumerate(drawn):
        points = drawn_points(curve.points)
        labels = {id(p): PointLabel(p.interactivity, p.throughput_per_gpu, f"{p.cap:g}", _color(position),
                                    1.4 * marker_size if p is chosen else radius) for p in points}
        measured = {p.cap: labels[id(p)] for p in points if p.measured}
        measured_labels += measured.values()
        predicted_labels += [labels[id(p)] for p in points if not p.measured and not p.refused
                             and (p.cap not in measured or not near(labels[id(p)], measured[p.cap], ax))]
        markers += labels.values()
    place_labels(ax, measured_labels + predicted_labels, font_size, markers,
                 [value for curve in drawn for value, _ in curve.bounds])


# --- the pipeline's frontiers per cell ------------------------------------------------------

def dataset_layout_frontiers(runs: pd.DataFrame, dataset: str, predictions: pd.DataFrame | None = None,
                             min_layouts: int = MIN_LAYOUTS) -> list[LayoutFrontier]:
    """One frontier per cell (accelerator, model as served, nominal input and output length) of a
    dataset's clean `runs` whose runs hold at least `min_layouts` layouts (tensor x data parallel),
    a curve per layout: each run at its cap (requests in flight) on the default axis (``1000 /
    mean_tpot_ms``, else ``OL x 1000 /`` the in-batch E2E), its total throughput over its server's
    GPUs. Where `predictions` (`slim.paper.beyond_paper.curve_predictions`' table, with ``dataset``)
    holds a run's zero-shot prediction, its open point too."""
    missing = [name for name in (col.MODEL, col.HARDWARE, col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL,
                                 col.MAX_NUM_SEQS, col.TOTAL_TOKEN_THROUGHPUT) if name not in runs]
    if missing:
        raise PlotInputError(f"the clean runs of {dataset} lack {', '.join(missing)}")
    predicted = _zero_shot(predictions, dataset)
    runs = runs.assign(layout_tensor_parallel=runs.reindex(columns=[col.TENSOR_PARALLEL])[col.TENSOR_PARALLEL]
                       .fillna(1).astype(int),
                       layout_data_parallel=runs.reindex(columns=[col.DATA_PARALLEL])[col.DATA_PARALLEL]
                       .fillna(1).astype(int),
                       layout_expert_parallel=expert_parallel_enabled(runs), layout_gpus=server_gpus(runs))
    frontiers = []
    cell_keys = [col.HARDWARE, col.MODEL, col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL]
    for (hardware, model, il, ol), cell in runs.groupby(cell_keys, sort=True):
        layouts = cell.groupby(["layout_tensor_parallel", "layout_data_parallel", "layout_expert_parallel"], sort=True)
        if layouts.ngroups < min_layouts:
            continue
        curves = []
        for (tensor_parallel, data_parallel, expert_parallel), rows in layouts:
            name = Layout(int(tensor_parallel), int(tensor_parallel * data_parallel), int(data_parallel),
                          bool(expert_parallel)).label
            curves.append(LayoutCurve(name, int(rows["layout_gpus"].max()), _run_points(rows, predicted)))
        note = f"{dataset}: measured"
        if any(not p.measured for curve in curves for p in curve.points):
            note += f"; predicted: {PREDICTED_BY}"
        frontiers.append(LayoutFrontier(f"{model} IL {il:g} OL {ol:g} on {hardware}", tuple(curves), note=note,
                                        predictor="SIM"))
    return frontiers


def _zero_shot(predictions: pd.DataFrame | None, dataset: str) -> pd.DataFrame:
    """The zero-shot predictions of `dataset`'s runs, by run id (none where `predictions` is None)."""
    names = ["zero_shot_mean_tpot_ms", "zero_shot_total_token_throughput"]
    if predictions is None:
        return pd.DataFrame(columns=names)
    absent = [name for name in (col.RUN_ID, "dataset", *names) if name not in predictions]
    if absent:
        raise PlotInputError(f"the predictions table lacks {', '.join(absent)}")
    own = predictions[predictions["dataset"] == dataset]
    if "sim_status" in own:
        own = own[own["sim_status"] == "ok"]
    return own.drop_duplicates(col.RUN_ID).set_index(col.RUN_ID)[names]


def _run_points(rows: pd.DataFrame, predicted: pd.DataFrame) -> tuple[FrontierPoint, ...]:
    """A layout's runs as measured points, and their predictions (where `predicted` has them) as open ones."""
    points = []
    rows = rows.sort_values([col.MAX_NUM_SEQS, col.RUN_ID], kind="stable")
    for (_, run), gpus in zip(rows.iterrows(), rows["layout_gpus"]):
        ol, cap = float(run[col.OUTPUT_LEN_NOMINAL]), float(run[col.MAX_NUM_SEQS])
        latencies = {col.MEAN_TPOT_MS: float(run.get(col.MEAN_TPOT_MS, math.nan)),
                     IN_BATCH_E2E: 1e3 * float(run.get(col.E2E_LATENCY_S, math.nan))}
        points.append(FrontierPoint(cap, interactivity(latencies, DEFAULT_AXIS, ol),
                                    float(run[col.TOTAL_TOKEN_THROUGHPUT]) / gpus, True))
        if run[col.RUN_ID] in predicted.index:
            prediction = predicted.loc[run[col.RUN_ID]]
            tpot = {col.MEAN_TPOT_MS: float(prediction["zero_shot_mean_tpot_ms"])}
            points.append(FrontierPoint(cap, interactivity(tpot, DEFAULT_AXIS, ol),
                                        float(prediction["zero_shot_total_token_throughput"]) / gpus, False))
    return tuple(points)


def cell_file_name(frontier: LayoutFrontier) -> str:
    """``<model>_il<IL>_ol<OL>`` from a cell's title (``<model> IL <IL> OL <OL> on <accelerator>``)."""
    cell = frontier.title.split(" on ", 1)[0]
    return "_".join(cell.replace(" IL ", "_il").replace(" OL ", "_ol").split())


def save_layout_frontiers(frontiers: Sequence[LayoutFrontier], directory: str | Path) -> list[Path]:
    """One PNG per frontier in `directory` (emptied first), named by `cell_file_name`; `PlotInputError`
    where two cells would share a name (several accelerators in one dataset)."""
    import shutil

    names = [cell_file_name(frontier) for frontier in frontiers]
    if len(set(names)) < len(names):
        raise PlotInputError("two cells share a file name: draw one accelerator's runs at a time")
    directory = Path(directory)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    paths = []
    for frontier, name in zip(frontiers, names):
        path = directory / f"{name}.png"
        save_frontier(layout_frontier_figure(frontier), path)
        paths.append(path)
    return paths

