"""The paper's accuracy figures: Fig. 9 (every held-out setting) and Fig. 10 (the unseen model).

Plot functions are pure: they take the prediction table written by
`slim.paper.heldout.evaluate_setting` (columns `columns.PREDICTION_COLUMNS`) and the MAPE
table of `slim.paper.heldout.mape_table` (`columns.MAPE_COLUMNS`), and return a matplotlib
`Figure` built without pyplot (no global figure state, nothing to close); save it with
`slim.paper.figures.common.save_figure`.
"""

from __future__ import annotations

import matplotlib as mpl
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import offset_copy

from slim import columns as col
from slim.errors import PlotInputError
from slim.paper.figures.common import CURVE_KEYS, METRIC_AXIS_LABELS, curve_colors, curves
from slim.paper.heldout import (
    BAND_CONFIDENCE,
    IMAI,
    LLMVISOR,
    SIM,
    SLIM,
    SLIM_PREDICTED_BATCH,
)
from slim.paper.predictor_tables import table3_labels
from slim.paper.splits import HeldOutSetting

UNSEEN_MODEL_PREDICTORS = table3_labels(set())
"""Fig. 10's predictors on every dataset: Table III's; those that need SIM's schedules join them where present."""

REQUIRED_PREDICTION_COLUMNS = (
    col.SETTING, col.PREDICTOR, col.ROLE, *CURVE_KEYS, col.MEAN_BATCH_SIZE,
    *(column for metric in col.PREDICTION_METRICS
      for column in (metric.measured, metric.predicted, metric.band_low, metric.band_high)),
)

# Line styles of the Fig. 10 predictors; colours from matplotlib's default cycle.
PREDICTOR_STYLE = {
    SLIM: {"color": "C0", "linestyle": "-", "marker": "s"},
    LLMVISOR: {"color": "C1", "linestyle": "-.", "marker": "D"},
    IMAI: {"color": "C2", "linestyle": ":", "marker": "^"},
    SIM: {"color": "C3", "linestyle": "--", "marker": "v"},
    SLIM_PREDICTED_BATCH: {"color": "C4", "linestyle": (0, (1, 1)), "marker": "x"},
}
SIM_LINE = {"linestyle": ":", "linewidth": 1.6}
"""Fig. 9's SIM prediction of a validation curve (in the curve's colour)."""
TRAINING_COLOR = "0.6"
BANDED_PREDICTORS = (SLIM, IMAI)
"""Predictors whose prediction tables carry a band (NaN where the training data leave it unbounded)."""
BAND_ALPHA = 0.18
"""Opacity of a prediction band (`columns.PREDICTED_E2E_LOW_S` ...), in its line's colour."""


def plot_heldout_settings(predictions: pd.DataFrame, mapes: pd.DataFrame, settings: list[HeldOutSetting],
                          dataset_label: str, observed: str = "measured") -> Figure:
    """Fig. 9: measured vs SLIM-predicted throughput and E2E latency for every held-out setting.

    One column per applicable setting (in the order of `settings`); top row
    total-token throughput (Eq. 6), bottom row E2E latency (Eq. 5), both against
    the measured mean batch size on a log axis. Training runs are grey dots; each
    validation curve (model, nominal output length) has its own colour, measured
    as markers and SLIM as a dashed line over its shaded prediction band (`BAND_CONFIDENCE`,
    `slim.model.uncertainty`: parameter covariance on the identified directions, envelope of the
    training-equivalent fits on the others), and, where the predictions hold SIM (real
    data), SIM as a dotted line. Each panel prints SLIM's (and SIM's) MAPE of that
    metric over the setting's validation runs. Settings that are not applicable
    to the dataset are listed, with their reason, under the panels.
    """
    col.require_columns(predictions, REQUIRED_PREDICTION_COLUMNS, "the predictions table", PlotInputError)
    col.require_columns(mapes, col.MAPE_COLUMNS, "the mapes table", PlotInputError)
    shown = [setting for setting in settings if setting.applicable]
    if not shown:
        raise PlotInputError("plot_heldout_settings: no applicable setting to plot")
    slim_rows = predictions[predictions[col.PREDICTOR] == SLIM]
    sim_rows = predictions[(predictions[col.PREDICTOR] == SIM) & (predictions[col.ROLE] == "validate")]
    # The panels keep their height however many validation curves the tallest legend lists
    # (two columns past four curves, about 0.18 inch a row).
    legend_rows = max(_legend_rows(predictions, setting.name) for setting in shown)
    figure = Figure(figsize=(3.9 * len(shown), 6.4 + 0.18 * legend_rows), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, len(shown), squeeze=False)
    for column, setting in enumerate(shown):
        rows = slim_rows[slim_rows[col.SETTING] == setting.name]
        validate = rows[rows[col.ROLE] == "validate"]
        if validate.empty:
            raise PlotInputError(f"plot_heldout_settings: no SLIM validation rows for setting '{setting.name}'; "
                                 "was its evaluation file passed in?")
        training = rows[rows[col.ROLE] == "train"]
        colors = curve_colors(validate)
        mape = _mape_row(mapes, setting.name, SLIM, "plot_heldout_settings")
        sim = sim_rows[sim_rows[col.SETTING] == setting.name]
        sim_mape = _mape_row(mapes, setting.name, SIM, "plot_heldout_settings") if not sim.empty else None
        for row, metric in enumerate(col.PREDICTION_METRICS):
            ax = axes[row, column]
            _plot_setting_panel(ax, training, validate, colors, metric)
            for key, curve in curves(sim):
                ax.plot(curve[col.MEAN_BATCH_SIZE], curve[metric.predicted], color=colors[key], zorder=2, **SIM_LINE)
            text = f"SLIM MAPE {mape[metric.mape]:.1f} %"
            if sim_mape is not None:
                text += f"\nSIM MAPE {sim_mape[metric.mape]:.1f} %"
            _print_mape(ax, f"{text}\n(n = {int(mape[col.N_VALIDATION])})")
            ax.set_ylabel(METRIC_AXIS_LABELS[metric.name] if column == 0 else "")
            ax.set_xlabel("Mean batch size" if row == 1 else "")
        axes[0, column].set_title(setting.label, fontsize="medium")
        axes[1, column].legend(handles=_curve_handles(colors), title="Validation curve", fontsize="small",
                               title_fontsize="small", loc="upper center", bbox_to_anchor=(0.5, 0.0),
                               bbox_transform=_below_x_label(axes[1, column]),
                               ncol=2 if len(colors) > 4 else 1, frameon=False)
    with_sim = not sim_rows.empty
    figure.legend(handles=_style_handles(with_sim, observed), loc="outside lower center", ncol=5 if with_sim else 4,
                  frameon=False)
    figure.suptitle(f"Held-out accuracy of SLIM{' and SIM' if with_sim else ''}, {dataset_label}")
    skipped = [f"{setting.label} ({setting.not_applicable})" for setting in settings if not setting.applicable]
    if skipped:
        figure.text(0.01, 0.0, "Not shown: " + "; ".join(skipped), fontsize="small", ha="left", va="bottom")
        figure.get_layout_engine().set(rect=(0, 0.03, 1, 0.97))
    return figure


def plot_unseen_model(predictions: pd.DataFrame, mapes: pd.DataFrame, setting_name: str, dataset_label: str,
                      setting_label: str | None = None, observed: str = "measured") -> Figure:
    """Fig. 10: the model-transfer setting, measured vs SLIM and both baselines (and, where the
    predictions hold them, SIM and SLIM at SIM's predicted batch).

    Left: total-token throughput (Eq. 6); right: E2E latency (Eq. 5); both
    against the measured mean batch size on a log axis. Each predictor's legend entry
    carries its MAPE of that metric over the setting's validation runs. Predictors with a
    prediction band (SLIM; IMAI OOD-LR where the training data determine its prediction) shade
    it in their colour. `observed` names the ground truth in the legend ("measured", or
    "simulated" for the simulator's dataset).
    """
    col.require_columns(predictions, REQUIRED_PREDICTION_COLUMNS, "the predictions table", PlotInputError)
    col.require_columns(mapes, col.MAPE_COLUMNS, "the mapes table", PlotInputError)
    validate = predictions[(predictions[col.SETTING] == setting_name) & (predictions[col.ROLE] == "validate")]
    missing = [name for name in UNSEEN_MODEL_PREDICTORS if name not in set(validate[col.PREDICTOR])]
    if missing:
        raise PlotInputError(f"plot_unseen_model: setting '{setting_name}' has no validation predictions "
                             f"for {', '.join(missing)}")
    shown = table3_labels(set(validate[col.PREDICTOR]))
    measured = validate[validate[col.PREDICTOR] == SLIM]
    figure = Figure(figsize=(10.5, 6.6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, 2)
    for ax, metric in zip(axes, col.PREDICTION_METRICS):
        handles = [Line2D([], [], linestyle="none", marker="o", markersize=7, color="black",
                          label=observed.capitalize())]
        for _, curve in curves(measured):
            ax.plot(curve[col.MEAN_BATCH_SIZE], curve[metric.measured], linestyle="none", marker="o",
                    markersize=7, color="black", zorder=3)
        for predictor in shown:
            mape = _mape_row(mapes, setting_name, predictor, "plot_unseen_model")[metric.mape]
            handles.append(Line2D([], [], markersize=5, label=f"{predictor} (MAPE {mape:.1f} %)",
                                  **PREDICTOR_STYLE[predictor]))
            for _, curve in curves(validate[validate[col.PREDICTOR] == predictor]):
                ax.plot(curve[col.MEAN_BATCH_SIZE], curve[metric.predicted], markersize=5,
                        **PREDICTOR_STYLE[predictor])
                _shade_band(ax, curve, metric, PREDICTOR_STYLE[predictor]["color"])
        banded = [p for p in shown if validate.loc[validate[col.PREDICTOR] == p, metric.band_low].notna().any()]
        unbounded = [p for p in BANDED_PREDICTORS if p in shown and p not in banded]
        if banded or unbounded:
            label = f"{100 * BAND_CONFIDENCE:g}% band: {', '.join(banded) or 'none'}"
            if unbounded:
                label += f"\n({', '.join(unbounded)}: unbounded, not determined by the training runs)"
            handles.append(Patch(facecolor="0.4", alpha=2 * BAND_ALPHA, label=label))
        ax.set_xscale("log")
        ax.set_xlabel("Mean batch size")
        ax.set_ylabel(METRIC_AXIS_LABELS[metric.name])
        ax.set_ylim(bottom=0)
        ax.grid(True, which="major", alpha=0.3)
        # Below the axes: inside, the legend (grown by the band entry) hid the largest batches.
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=1, fontsize="small",
                  frameon=False)
    heading = setting_label or "; ".join(_curve_label(key) for key, _ in curves(measured))
    figure.suptitle(f"Unseen model: {heading}, {dataset_label}")
    return figure


def _legend_rows(predictions: pd.DataFrame, setting: str) -> int:
    """Rows of a Fig. 9 column's validation-curve legend (one or two columns, as drawn)."""
    rows = predictions[(predictions[col.SETTING] == setting) & (predictions[col.ROLE] == "validate")]
    count = rows.groupby(list(CURVE_KEYS)).ngroups
    return count if count <= 4 else -(-count // 2)


def _below_x_label(ax: Axes):
    """The axes' coordinates shifted down past its tick labels and x label, in points: a legend
    anchored at a fixed axes-fraction offset would overlap the label whenever a tall legend shrinks
    the axes (the simulated dataset's 40 curves)."""
    ticks, label = mpl.rcParams["xtick.major.size"] + mpl.rcParams["xtick.major.pad"], mpl.rcParams["axes.labelpad"]
    font = FontProperties(size=mpl.rcParams["font.size"]).get_size_in_points()
    # Log-axis tick labels (10^k) are about 1.5 lines tall; the x label one line; 4 points of margin.
    return offset_copy(ax.transAxes, fig=ax.figure, y=-(ticks + 1.5 * 1.2 * font + label + 1.2 * font + 4.0),
                       units="points")


def _plot_setting_panel(ax: Axes, training: pd.DataFrame, validate: pd.DataFrame,
                        colors: dict[tuple, tuple], metric: col.PredictionMetric) -> None:
    ax.plot(training[col.MEAN_BATCH_SIZE], training[metric.measured], linestyle="none", marker="o",
            markersize=3.5, color=TRAINING_COLOR, zorder=1)
    for key, curve in curves(validate):
        ax.plot(curve[col.MEAN_BATCH_SIZE], curve[metric.measured], linestyle="none", marker="o",
                markersize=5, markerfacecolor="none", color=colors[key], zorder=3)
        ax.plot(curve[col.MEAN_BATCH_SIZE], curve[metric.predicted], linestyle="--", linewidth=1.4,
                color=colors[key], zorder=2)
        _shade_band(ax, curve, metric, colors[key])
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)


def _shade_band(ax: Axes, curve: pd.DataFrame, metric: col.PredictionMetric, color) -> None:
    """The curve's prediction band, where it has one (rows with a NaN bound are left unshaded)."""
    low, high = curve[metric.band_low], curve[metric.band_high]
    known = (low.notna() & high.notna()).to_numpy()
    if known.any():
        ax.fill_between(curve[col.MEAN_BATCH_SIZE], low, high, where=known, color=color, alpha=BAND_ALPHA,
                        linewidth=0, zorder=1.5)


def _curve_label(key: tuple) -> str:
    model, output_len = key
    return f"{model}, OL {output_len:g}"


def _curve_handles(colors: dict[tuple, tuple]) -> list[Line2D]:
    return [Line2D([], [], color=color, linestyle="--", marker="o", markerfacecolor="none", markersize=5,
                   label=_curve_label(key)) for key, color in colors.items()]


def _style_handles(with_sim: bool, observed: str) -> list[Line2D]:
    handles = [
        Line2D([], [], linestyle="none", marker="o", markersize=3.5, color=TRAINING_COLOR, label="Training run"),
        Line2D([], [], linestyle="none", marker="o", markersize=5, markerfacecolor="none", color="black",
               label=f"Held-out run, {observed}"),
        Line2D([], [], linestyle="--", color="black", label="SLIM prediction"),
        Patch(facecolor="black", alpha=BAND_ALPHA, label=f"SLIM {100 * BAND_CONFIDENCE:g}% band"),
    ]
    if with_sim:
        handles.append(Line2D([], [], color="black", label="SIM prediction (no measured batch)", **SIM_LINE))
    return handles


def _print_mape(ax: Axes, text: str) -> None:
    ax.text(0.03, 0.97, text, transform=ax.transAxes, ha="left", va="top", fontsize="small",
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "0.7", "alpha": 0.9}, zorder=5)


def _mape_row(mapes: pd.DataFrame, setting: str, predictor: str, caller: str) -> pd.Series:
    match = mapes[(mapes[col.SETTING] == setting) & (mapes[col.PREDICTOR] == predictor)]
    if len(match) != 1:
        raise PlotInputError(f"{caller}: expected one MAPE row for setting '{setting}', predictor '{predictor}'; "
                             f"found {len(match)}")
    return match.iloc[0]
