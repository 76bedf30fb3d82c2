"""The paper's accuracy figures: Fig. 9 (every held-out setting) and Fig. 10 (the unseen model).

Plot functions are pure: they take the prediction table written by
`slim.evaluate.evaluate_setting` (columns `PREDICTION_COLUMNS`) and the MAPE table
of `slim.evaluate.mape_table`, and return a matplotlib `Figure` built without
pyplot (no global figure state, nothing to close). `save_figure` writes a PDF and
a PNG whose bytes depend only on the figure, so reruns do not change the files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from slim import columns as col
from slim.errors import SlimError
from slim.evaluate import IMAI, LLMVISOR, MAIN_PREDICTORS, SLIM
from slim.splits import HeldOutSetting

PNG_DPI = 150
UNSEEN_MODEL_PREDICTORS = MAIN_PREDICTORS
CURVE_KEYS = (col.MODEL, col.OUTPUT_LEN_NOMINAL)
"""A validation curve: the held-out runs of one model at one nominal output length."""

# (measured column, predicted column, MAPE column, axis label) per metric.
THROUGHPUT = ("measured_throughput", "predicted_throughput", "mape_throughput_pct", "Throughput (tokens/s)")
E2E = ("measured_e2e_s", "predicted_e2e_s", "mape_e2e_pct", "E2E latency (s)")

REQUIRED_PREDICTION_COLUMNS = (
    "setting", "predictor", "role", *CURVE_KEYS, col.MEAN_BATCH_SIZE,
    THROUGHPUT[0], THROUGHPUT[1], E2E[0], E2E[1],
)
REQUIRED_MAPE_COLUMNS = ("setting", "predictor", "n_validation", THROUGHPUT[2], E2E[2])

# Line styles of the Fig. 10 predictors; colours from matplotlib's default cycle.
PREDICTOR_STYLE = {
    SLIM: {"color": "C0", "linestyle": "-", "marker": "s"},
    LLMVISOR: {"color": "C1", "linestyle": "-.", "marker": "D"},
    IMAI: {"color": "C2", "linestyle": ":", "marker": "^"},
}
# One sequential colour map per model, so curves of one model share a hue and
# darken with output length (Fig. 9's same-curve panel holds every curve).
MODEL_COLORMAPS = ("Blues", "Oranges", "Greens", "Purples", "Reds", "Greys")
TRAINING_COLOR = "0.6"


class PlotInputError(SlimError, ValueError):
    """A figure's input table lacks a column, a setting or a predictor it needs."""


def plot_heldout_settings(predictions: pd.DataFrame, mapes: pd.DataFrame, settings: list[HeldOutSetting],
                          dataset_label: str) -> Figure:
    """Fig. 9: measured vs SLIM-predicted throughput and E2E latency for every held-out setting.

    One column per applicable setting (in the order of `settings`); top row
    total-token throughput (Eq. 6), bottom row E2E latency (Eq. 5), both against
    the mean batch size on a log axis. Training runs are grey dots; each
    validation curve (model, nominal output length) has its own colour, measured
    as markers and SLIM as a dashed line. Each panel prints SLIM's MAPE of that
    metric over the setting's validation runs. Settings that are not applicable
    to the dataset are listed, with their reason, under the panels.
    """
    check_columns(predictions, REQUIRED_PREDICTION_COLUMNS, "predictions")
    check_columns(mapes, REQUIRED_MAPE_COLUMNS, "mapes")
    shown = [setting for setting in settings if setting.applicable]
    if not shown:
        raise PlotInputError("plot_heldout_settings: no applicable setting to plot")
    slim_rows = predictions[predictions["predictor"] == SLIM]
    figure = Figure(figsize=(3.9 * len(shown), 7.6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, len(shown), squeeze=False)
    for column, setting in enumerate(shown):
        rows = slim_rows[slim_rows["setting"] == setting.name]
        validate = rows[rows["role"] == "validate"]
        if validate.empty:
            raise PlotInputError(f"plot_heldout_settings: no SLIM validation rows for setting '{setting.name}'; "
                                 "was its evaluation file passed in?")
        training = rows[rows["role"] == "train"]
        colors = curve_colors(validate)
        mape = _mape_row(mapes, setting.name, SLIM, "plot_heldout_settings")
        for row, metric in enumerate((THROUGHPUT, E2E)):
            ax = axes[row, column]
            _plot_setting_panel(ax, training, validate, colors, metric)
            _print_mape(ax, f"SLIM MAPE {mape[metric[2]]:.1f} %\n(n = {int(mape['n_validation'])})")
            ax.set_ylabel(metric[3] if column == 0 else "")
            ax.set_xlabel("Mean batch size" if row == 1 else "")
        axes[0, column].set_title(setting.label, fontsize="medium")
        axes[1, column].legend(handles=_curve_handles(colors), title="Validation curve", fontsize="small",
                               title_fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.2),
                               ncol=2 if len(colors) > 4 else 1, frameon=False)
    figure.legend(handles=_style_handles(), loc="outside lower center", ncol=3, frameon=False)
    figure.suptitle(f"Held-out accuracy of SLIM, {dataset_label}")
    skipped = [f"{setting.label} ({setting.not_applicable})" for setting in settings if not setting.applicable]
    if skipped:
        figure.text(0.01, 0.0, "Not shown: " + "; ".join(skipped), fontsize="small", ha="left", va="bottom")
        figure.get_layout_engine().set(rect=(0, 0.03, 1, 0.97))
    return figure


def plot_unseen_model(predictions: pd.DataFrame, mapes: pd.DataFrame, setting_name: str, dataset_label: str,
                      setting_label: str | None = None) -> Figure:
    """Fig. 10: the model-transfer setting, measured vs SLIM and both baselines.

    Left: total-token throughput (Eq. 6); right: E2E latency (Eq. 5); both
    against the mean batch size on a log axis. Each predictor's legend entry
    carries its MAPE of that metric over the setting's validation runs.
    """
    check_columns(predictions, REQUIRED_PREDICTION_COLUMNS, "predictions")
    check_columns(mapes, REQUIRED_MAPE_COLUMNS, "mapes")
    validate = predictions[(predictions["setting"] == setting_name) & (predictions["role"] == "validate")]
    missing = [name for name in UNSEEN_MODEL_PREDICTORS if name not in set(validate["predictor"])]
    if missing:
        raise PlotInputError(f"plot_unseen_model: setting '{setting_name}' has no validation predictions "
                             f"for {', '.join(missing)}")
    measured = validate[validate["predictor"] == SLIM]
    figure = Figure(figsize=(10.5, 4.4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, 2)
    for ax, metric in zip(axes, (THROUGHPUT, E2E)):
        measured_column, predicted_column, mape_column, axis_label = metric
        handles = [Line2D([], [], linestyle="none", marker="o", markersize=7, color="black", label="Measured")]
        for _, curve in curves(measured):
            ax.plot(curve[col.MEAN_BATCH_SIZE], curve[measured_column], linestyle="none", marker="o",
                    markersize=7, color="black", zorder=3)
        for predictor in UNSEEN_MODEL_PREDICTORS:
            mape = _mape_row(mapes, setting_name, predictor, "plot_unseen_model")[mape_column]
            handles.append(Line2D([], [], markersize=5, label=f"{predictor} (MAPE {mape:.1f} %)",
                                  **PREDICTOR_STYLE[predictor]))
            for _, curve in curves(validate[validate["predictor"] == predictor]):
                ax.plot(curve[col.MEAN_BATCH_SIZE], curve[predicted_column], markersize=5,
                        **PREDICTOR_STYLE[predictor])
        ax.set_xscale("log")
        ax.set_xlabel("Mean batch size")
        ax.set_ylabel(axis_label)
        ax.set_ylim(bottom=0)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(handles=handles, loc="upper left", fontsize="small")
    heading = setting_label or "; ".join(_curve_label(key) for key, _ in curves(measured))
    figure.suptitle(f"Unseen model: {heading}, {dataset_label}")
    return figure


def save_figure(figure: Figure, pdf_path: str | Path, png_path: str | Path, dpi: int = PNG_DPI) -> None:
    """Write the figure as PDF and PNG with no timestamps or software version in the
    metadata, so saving the same figure twice gives byte-identical files.

    The figure's layout engine (constrained layout) is run once and then fixed:
    left active, it would lay the figure out anew for every save, and its result
    depends on the previous save's resolution, so a PDF written after a PNG
    would differ from one written before it.
    """
    if figure.get_layout_engine() is not None:
        figure.draw_without_rendering()
        figure.set_layout_engine("none")
    for path in (pdf_path, png_path):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(pdf_path, format="pdf", metadata={"CreationDate": None, "ModDate": None, "Producer": None,
                                                     "Creator": None})
    figure.savefig(png_path, format="png", dpi=dpi, metadata={"Software": None})


def _plot_setting_panel(ax: Axes, training: pd.DataFrame, validate: pd.DataFrame,
                        colors: dict[tuple, tuple], metric: tuple[str, str, str, str]) -> None:
    measured_column, predicted_column = metric[0], metric[1]
    ax.plot(training[col.MEAN_BATCH_SIZE], training[measured_column], linestyle="none", marker="o",
            markersize=3.5, color=TRAINING_COLOR, zorder=1)
    for key, curve in curves(validate):
        ax.plot(curve[col.MEAN_BATCH_SIZE], curve[measured_column], linestyle="none", marker="o",
                markersize=5, markerfacecolor="none", color=colors[key], zorder=3)
        ax.plot(curve[col.MEAN_BATCH_SIZE], curve[predicted_column], linestyle="--", linewidth=1.4,
                color=colors[key], zorder=2)
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)


def curves(rows: pd.DataFrame):
    """(curve key, its rows sorted by batch size) for every validation curve, in a fixed order."""
    for key, curve in rows.groupby(list(CURVE_KEYS), sort=True):
        yield key, curve.sort_values(col.MEAN_BATCH_SIZE)


def _curve_label(key: tuple) -> str:
    model, output_len = key
    return f"{model}, OL {output_len:g}"


def curve_colors(validate: pd.DataFrame) -> dict[tuple, tuple]:
    """One colour per curve: a hue per model, darker for longer outputs."""
    keys = [key for key, _ in curves(validate)]
    models = sorted({model for model, _ in keys})
    colors = {}
    for model_index, model in enumerate(models):
        colormap = colormaps[MODEL_COLORMAPS[model_index % len(MODEL_COLORMAPS)]]
        lengths = sorted(output_len for name, output_len in keys if name == model)
        # Sequential maps run light -> dark; the ends are too pale or too dark to read.
        shades = np.linspace(0.45, 0.9, len(lengths)) if len(lengths) > 1 else [0.7]
        for output_len, shade in zip(lengths, shades):
            colors[(model, output_len)] = colormap(shade)
    return colors


def _curve_handles(colors: dict[tuple, tuple]) -> list[Line2D]:
    return [Line2D([], [], color=color, linestyle="--", marker="o", markerfacecolor="none", markersize=5,
                   label=_curve_label(key)) for key, color in colors.items()]


def _style_handles() -> list[Line2D]:
    return [
        Line2D([], [], linestyle="none", marker="o", markersize=3.5, color=TRAINING_COLOR, label="Training run"),
        Line2D([], [], linestyle="none", marker="o", markersize=5, markerfacecolor="none", color="black",
               label="Held-out run, measured"),
        Line2D([], [], linestyle="--", color="black", label="SLIM prediction"),
    ]


def _print_mape(ax: Axes, text: str) -> None:
    ax.text(0.03, 0.97, text, transform=ax.transAxes, ha="left", va="top", fontsize="small",
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "0.7", "alpha": 0.9}, zorder=5)


def _mape_row(mapes: pd.DataFrame, setting: str, predictor: str, caller: str) -> pd.Series:
    match = mapes[(mapes["setting"] == setting) & (mapes["predictor"] == predictor)]
    if len(match) != 1:
        raise PlotInputError(f"{caller}: expected one MAPE row for setting '{setting}', predictor '{predictor}'; "
                             f"found {len(match)}")
    return match.iloc[0]


def check_columns(frame: pd.DataFrame, required: tuple[str, ...], name: str) -> None:
    missing = [column for column in required if column not in frame.columns]
    if missing:
        raise PlotInputError(f"the {name} table lacks column(s) {', '.join(missing)}")
