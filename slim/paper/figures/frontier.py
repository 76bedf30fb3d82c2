"""The frontier a user would rather look at than read: for one workload, throughput per GPU against
interactivity (output tokens per second per user) at every candidate cap, measured and predicted
(with the prediction's interval where it has one), the SLO bound that lies on the interactivity
axis, caps the predictor refused marked apart, and the chosen cap ringed. Moving right buys
interactivity with throughput; the knee is where the curve turns down.

The axis is the latency metric of the first SLO bound that has one (`axis_metric`), so that a bound
is drawn only against its own metric: a per-token bound (``p99_tpot_ms``, ``mean_itl_ms``, ...) is
the axis ``1000 / that statistic``, the in-batch E2E's ``OL x 1000 / mean_in_batch_e2e_ms``; without
one, ``1000 / mean_tpot_ms`` where a run records TPOT, else ``OL x 1000 / mean_in_batch_e2e_ms``. A
bound on another metric is named in the legend, not drawn.

`frontier_points` reads one workload of `slim.paper.slo_predictions`' table (the pipeline's
figure per public curve); `advice_frontier_figure` reads a `slim.advisor.advise.Advice` (`slim
advise --plot`: 900 x 600 px as a PNG)."""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter

from slim import columns as col
from slim.atomic import write_atomic
from slim.errors import PlotInputError
from slim.paper.figures.point_labels import PointLabel, near, place_labels
from slim.specs.slo import IN_BATCH_E2E, SloMetric

MEASURED_STYLE = {"marker": "o", "color": "tab:blue", "label": "measured"}
PREDICTED_STYLE = {"marker": "s", "color": "tab:orange", "label": "predicted", "mfc": "none"}
REFUSED_STYLE = {"marker": "X", "mfc": "none", "mec": "tab:red", "mew": 1.2, "linestyle": "none"}
DEFAULT_AXIS = ""
"""The interactivity axis where no SLO bound has one: 1000 / mean TPOT, else OL x 1000 / in-batch E2E."""
PANEL_INCHES = (3.3, 2.9)
"""One panel of the pipeline's frontiers (four to a row)."""
ADVICE_INCHES, ADVICE_LEGEND_INCHES, ADVICE_FONT_SIZE, PNG_DPI = (6.4, 6.0), 2.6, 11.0, 100
"""`slim advise --plot`'s figure: one panel and its legend beside it, 900 x 600 px as a PNG at `PNG_DPI`."""


@dataclass(frozen=True)
class FrontierPoint:
    """One candidate cap on the frontier: interactivity (output tokens/s per user) and throughput per
    GPU (total tokens/s), with their intervals (NaN: none), measured or predicted; `refused` where
    the predictor refuses the cap (SIM: its simulated run preempts)."""

    cap: float
    interactivity: float
    throughput_per_gpu: float
    measured: bool
    interactivity_range: tuple[float, float] = (math.nan, math.nan)
    throughput_range: tuple[float, float] = (math.nan, math.nan)
    refused: bool = False


@dataclass(frozen=True)
class Frontier:
    """A workload's frontier: its title, the points, the latency metric its interactivity axis shows
    (`axis_metric`), the SLO bounds on that axis (value, label), the labels of the bounds on other
    metrics (named, not drawn), the chosen cap (NaN: none), a note, and who refused the refused
    points."""

    title: str
    points: tuple[FrontierPoint, ...]
    bounds: tuple[tuple[float, str], ...] = ()
    chosen_cap: float = math.nan
    note: str = ""
    axis: str = DEFAULT_AXIS
    other_bounds: tuple[str, ...] = ()
    refused_by: str = "the predictor"


def axis_metric(bound_metrics: Sequence[str]) -> str:
    """The latency metric the interactivity axis shows: the first of `bound_metrics` (the SLO bounds'
    metrics, in order) that converts to output tokens per second per user, a per-token statistic
    (TPOT or ITL) or the in-batch E2E; `DEFAULT_AXIS` where none does."""
    for name in bound_metrics:
        if name == IN_BATCH_E2E or SloMetric.parse(name).per_token:
            return name
    return DEFAULT_AXIS


def axis_label(axis: str) -> str:
    """The x label of an interactivity axis, naming its metric."""
    if axis == DEFAULT_AXIS:
        return f"output tokens/s per user: 1000 / {col.MEAN_TPOT_MS} (else OL x 1000 / in-batch E2E)"
    scale = "OL x 1000" if axis == IN_BATCH_E2E else "1000"
    return f"output tokens/s per user: {scale} / {axis}"


def interactivity_of(mean_tpot_ms: float, in_batch_e2e_ms: float, output_len: float) -> float:
    """Output tokens per second per user on the default axis: from the mean TPOT, else from the
    in-batch E2E over OL."""
    if np.isfinite(mean_tpot_ms) and mean_tpot_ms > 0:
        return 1000.0 / mean_tpot_ms
    if np.isfinite(in_batch_e2e_ms) and in_batch_e2e_ms > 0:
        return 1000.0 * output_len / in_batch_e2e_ms
    return math.nan


def interactivity(latencies_ms: Mapping[str, float], axis: str, output_len: float) -> float:
    """Output tokens per second per user on `axis` (`axis_metric`) from a point's latencies by metric
    name (ms; NaN or absent where unknown)."""
    def value(name: str) -> float:
        found = latencies_ms.get(name, math.nan)
        return float(found) if found is not None and np.isfinite(found) and found > 0 else math.nan

    if axis == DEFAULT_AXIS:
        return interactivity_of(value(col.MEAN_TPOT_MS), value(IN_BATCH_E2E), output_len)
    return (1000.0 * output_len if axis == IN_BATCH_E2E else 1000.0) / value(axis)


def bound_lines(limits_ms: Mapping[str, float], output_len: float,
                axis: str) -> tuple[tuple[tuple[float, str], ...], tuple[str, ...]]:
    """The SLO bounds on `axis` as (interactivity, label), and the labels of the bounds on other
    metrics. A bound lies on the axis of its own metric only: ``1000 / bound`` for a per-token
    statistic, ``OL x 1000 / bound`` for the in-batch E2E (admissible to its right)."""
    lines, others = [], []
    for name, limit in limits_ms.items():
        if not (np.isfinite(limit) and limit > 0):
            continue
        label = f"SLO {name} <= {limit:,.3g} ms" if limit < 1000 else f"SLO {name} <= {limit:,.0f} ms"
        if name == axis:
            lines.append((interactivity({name: limit}, axis, output_len), label))
        else:
            others.append(label)
    return tuple(lines), tuple(others)


def frontier_figure(frontiers: Sequence[Frontier], columns: int = 4, panel_inches: tuple[float, float] = PANEL_INCHES,
                    font_size: float = 7.0, legend_inches: float = 0.0) -> Figure:
    """One panel per frontier (`panel_inches` each, text at `font_size` points): measured points
    joined in cap order, predictions with their intervals, refused caps as red crosses, each point
    labelled by its cap where the label fits, the SLO bound on the panel's axis (grey: the admissible
    side is to its right), and the chosen cap ringed. The legend goes in the first panel, or in a
    column `legend_inches` wide to the right of the panels."""
    if not frontiers:
        raise PlotInputError("no frontier to draw")
    columns = min(columns, len(frontiers))
    rows = math.ceil(len(frontiers) / columns)
    width, height = panel_inches[0] * columns + legend_inches, panel_inches[1] * rows   # inches, as the margins
    scale, wspace = font_size / 7.0, 0.45
    left, right, bottom = 0.6 * scale / width, 1 - (0.15 * scale + legend_inches) / width, 0.45 * scale / height
    axes_width = width * (right - left) / (columns + wspace * (columns - 1))
    # Titles wrap to their panel; the room above a row is as tall as the longest.
    titles = ["\n".join([f.title, *textwrap.wrap(f.note, int(axes_width * 72 / (0.55 * font_size)))])
              for f in frontiers]
    title_height = (1.2 * font_size * max(title.count("\n") + 1 for title in titles) + 12 * scale) / 72
    gap = title_height + bottom * height   # between rows: the title above and the axis labels below
    axes_height = (height * (1 - bottom) - title_height - (rows - 1) * gap) / rows
    figure = Figure(figsize=(width, height))
    figure.subplots_adjust(left=left, right=right, bottom=bottom, top=1 - title_height / height, wspace=wspace,
                           hspace=gap / axes_height)
    axes = figure.subplots(rows, columns, squeeze=False)
    for ax, frontier, title in zip(axes.flat, frontiers, titles):
        _panel(ax, frontier, title, font_size)
    for ax in list(axes.flat)[len(frontiers):]:
        ax.set_visible(False)
    first = axes.flat[0]
    handles, labels = first.get_legend_handles_labels()
    for other in frontiers[0].other_bounds:   # named, not drawn: another metric than the axis
        handles.append(Line2D([], [], linestyle="none"))
        labels.append(f"{other}: another metric, not drawn")
    if handles and legend_inches:
        characters = int(legend_inches * 72 / (0.6 * (font_size - 1))) - 5   # what fits beside a handle
        first.legend(handles, [textwrap.fill(label, characters) for label in labels], fontsize=font_size - 1,
                     loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
    elif handles:
        first.legend(handles, labels, fontsize=font_size - 1, loc="best")
    return figure


def drawn_points(points: Sequence[FrontierPoint]) -> list[FrontierPoint]:
    """The points with both coordinates finite, in cap order."""
    return sorted((p for p in points if np.isfinite(p.interactivity) and np.isfinite(p.throughput_per_gpu)),
                  key=lambda p: p.cap)


def interval_errors(points: Sequence[FrontierPoint], value, low_high) -> np.ndarray:
    """Error-bar lengths (below, above) of each point's `value` from its interval `low_high` (0 where none)."""
    return np.array([[max(value(p) - low_high(p)[0], 0.0) if np.isfinite(low_high(p)[0]) else 0.0 for p in points],
                     [max(low_high(p)[1] - value(p), 0.0) if np.isfinite(low_high(p)[1]) else 0.0 for p in points]])


def _panel(ax, frontier: Frontier, title: str, font_size: float) -> None:
    marker_size = 4 * font_size / 7
    series = ((MEASURED_STYLE, [p for p in frontier.points if p.measured]),
              (PREDICTED_STYLE, [p for p in frontier.points if not p.measured and not p.refused]))
    for style, points in series:
        points = drawn_points(points)
        if not points:
            continue
        x = np.array([p.interactivity for p in points])
        y = np.array([p.throughput_per_gpu for p in points])
        ax.errorbar(x, y, xerr=interval_errors(points, lambda p: p.interactivity, lambda p: p.interactivity_range),
                    yerr=interval_errors(points, lambda p: p.throughput_per_gpu, lambda p: p.throughput_range),
                    linestyle="-" if style is MEASURED_STYLE else ":", linewidth=0.8 * font_size / 7,
                    markersize=marker_size, capsize=2, elinewidth=0.6, **style)
    refused = drawn_points([p for p in frontier.points if p.refused and not p.measured])
    if refused:
        ax.plot([p.interactivity for p in refused], [p.throughput_per_gpu for p in refused],
                markersize=1.6 * marker_size, label=f"refused by {frontier.refused_by} (simulated preemption)",
                **REFUSED_STYLE)
    for value, label in frontier.bounds:
        ax.axvline(value, color="0.4", linestyle="--", linewidth=0.8 * font_size / 7,
                   label=f"{label} (admissible to its right)")
    chosen = [p for p in drawn_points(frontier.points) if p.cap == frontier.chosen_cap]
    chosen = [p for p in chosen if p.measured] or chosen
    if chosen:
        ax.plot([chosen[0].interactivity], [chosen[0].throughput_per_gpu], marker="o", markersize=2.7 * marker_size,
                mfc="none", mec="tab:red", linestyle="none", label=f"chosen --max-num-seqs {frontier.chosen_cap:g}")
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_title(title, fontsize=font_size)
    ax.set_xlabel(axis_label(frontier.axis), fontsize=font_size)
    ax.set_ylabel("throughput per GPU (tokens/s)", fontsize=font_size)
    ax.tick_params(labelsize=font_size - 1)
    ax.grid(alpha=0.3)
    _label_caps(ax, frontier.points, font_size - 2, marker_size, chosen[0] if chosen else None,
                [value for value, _ in frontier.bounds])


def _label_caps(ax, points: Sequence[FrontierPoint], font_size: float, marker_size: float,
                chosen: FrontierPoint | None, bounds: Sequence[float]) -> None:
    """Label each drawn point with its cap where the label overlaps nothing (`place_labels`): measured
    points first, then predicted, then refused ones; a predicted point under its measured twin is not
    labelled again, and the `chosen` point's ring and the `bounds` are kept clear."""
    def label(p: FrontierPoint, radius_points: float) -> PointLabel:
        color = "tab:red" if p.refused else MEASURED_STYLE["color"] if p.measured else PREDICTED_STYLE["color"]
        return PointLabel(p.interactivity, p.throughput_per_gpu, f"{p.cap:g}", color, radius_points)

    drawn = drawn_points(points)
    radius, ring = marker_size / 2 + 1.5, 1.4 * marker_size
    ordered = ([p for p in drawn if p.measured] + [p for p in drawn if not p.measured and not p.refused]
               + [p for p in drawn if p.refused])
    measured = {p.cap: label(p, radius) for p in drawn if p.measured}
    labels = [label(p, ring if p is chosen else radius) for p in ordered
              if p.measured or p.cap not in measured or not near(label(p, radius), measured[p.cap], ax)]
    place_labels(ax, labels, font_size, [label(p, radius) for p in drawn], bounds)


def frontier_points(rows: pd.DataFrame, predictor: str, axis: str = DEFAULT_AXIS) -> tuple[FrontierPoint, ...]:
    """The points of one workload of `slim.paper.slo_predictions`' table on `axis`: measured runs, and
    the predictions of `predictor` with their intervals (NaN where the table has no such metric)."""
    names = (col.MEAN_TPOT_MS, IN_BATCH_E2E) if axis == DEFAULT_AXIS else (axis,)

    def latencies(run: pd.Series, prefix: str, suffix: str = "") -> dict[str, float]:
        return {name: float(run.get(f"{prefix}_{name}{suffix}", math.nan)) for name in names}

    points = []
    for (_, run), gpus in zip(rows.iterrows(), server_gpus(rows)):
        ol, cap = float(run[col.OUTPUT_LEN_MEAN]), float(run[col.MAX_NUM_SEQS])
        points.append(FrontierPoint(cap, interactivity(latencies(run, "measured"), axis, ol),
                                    float(run["measured_throughput"]) / gpus, True))
        # Interactivity falls as latency grows: the interval's ends swap.
        low = interactivity(latencies(run, predictor, "_high"), axis, ol)
        high = interactivity(latencies(run, predictor, "_low"), axis, ol)
        points.append(FrontierPoint(cap, interactivity(latencies(run, predictor), axis, ol),
                                    float(run[f"{predictor}_throughput"]) / gpus, False, (low, high),
                                    (float(run[f"{predictor}_throughput_low"]) / gpus,
                                     float(run[f"{predictor}_throughput_high"]) / gpus)))
    return tuple(points)


def server_gpus(rows: pd.DataFrame) -> np.ndarray:
    """The GPUs each run's server occupies: `columns.GPUS_PER_SERVER` where recorded, else tensor x
    data parallel (1 where unrecorded)."""
    recorded = rows.reindex(columns=[col.GPUS_PER_SERVER])[col.GPUS_PER_SERVER].to_numpy(dtype=float)
    sizes = rows.reindex(columns=[col.TENSOR_PARALLEL, col.DATA_PARALLEL]).fillna(1).to_numpy(dtype=float)
    return np.where(np.isfinite(recorded) & (recorded > 0), recorded, sizes.prod(axis=1))


def unpredicted_note(points: Sequence[FrontierPoint], predictor: str, axis: str) -> str:
    """"; <predictor> gives no <axis>" where no predicted point lies on the axis though some has a
    throughput (SLIM gives no percentile: its points are not drawn), else ""."""
    predicted = [p for p in points if not p.measured and np.isfinite(p.throughput_per_gpu)]
    if predicted and not any(np.isfinite(p.interactivity) for p in predicted):
        return f"; {predictor} gives no {axis or col.MEAN_TPOT_MS}"
    return ""


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
    table: measured and `predictor`'s points on the axis of the first bound of `slos` that has one (a
    `slim.specs.slo.Slos`; `axis_metric`), its bound (a relative one at the curve's measured
    reference cap) and the measured choice under every bound. A curve without its reference run has
    no bound and no choice, and says so."""
    frontiers = []
    keys = [col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN]
    axis = axis_metric([bound.metric.name for bound in slos.bounds])
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
        points = frontier_points(rows, predictor, axis)
        bounds, others = bound_lines(limits, float(ol), axis)
        frontiers.append(Frontier(title, points, bounds, chosen, note + unpredicted_note(points, predictor, axis), axis,
                                  others, predictor))
    return frontiers


def advice_points(advice, axis: str) -> tuple[FrontierPoint, ...]:
    """An advice's candidates on `axis`: measured where measured, and predicted (refused ones marked),
    their throughput over the GPUs its server occupies (`Advice.gpus_per_server`)."""
    ol, gpus = advice.output_len, float(advice.gpus_per_server)
    points = []
    for row in advice.candidates:
        if "throughput" in row.measured:
            points.append(FrontierPoint(row.max_num_seqs, interactivity(row.measured, axis, ol),
                                        row.measured["throughput"] / gpus, True))
        points.append(FrontierPoint(row.max_num_seqs, interactivity(row.predicted, axis, ol),
                                    row.predicted.get("throughput", math.nan) / gpus, False, refused=row.refused))
    return tuple(points)


def advice_frontier_figure(advice) -> Figure:
    """`slim advise --plot`: the frontier of the advised workload (900 x 600 px as a PNG), from its
    candidates' measured and predicted values (no interval: advise's predictors hold none but a
    confident SLIM's E2E bound) on the axis of its SLOs (`axis_metric`), the caps the predictor
    refused marked apart."""
    axis = axis_metric(list(advice.limits_ms))
    predictor = advice.predictor.upper()
    title = f"{advice.model} IL {advice.input_len:g} OL {advice.output_len:g} on {advice.hardware}"
    points = advice_points(advice, axis)
    bounds, others = bound_lines(advice.limits_ms, advice.output_len, axis)
    frontier = Frontier(title, points, bounds, advice.recommendation.batch_cap,
                        f"predicted: {predictor}" + unpredicted_note(points, predictor, axis), axis, others, predictor)
    return frontier_figure([frontier], columns=1, panel_inches=ADVICE_INCHES, font_size=ADVICE_FONT_SIZE,
                           legend_inches=ADVICE_LEGEND_INCHES)


def save_frontier(figure: Figure, path: str | Path, dpi: int = PNG_DPI) -> None:
    """Write a frontier figure to `path` in the format its suffix names (no timestamps; a PNG at `dpi`)."""
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
        save_frontier(frontier_figure([frontier], columns=1), path)
        paths.append(path)
    return paths

