"""Fig. 11: measured vs SLIM-predicted throughput and E2E latency of the models SLIM never
saw (`slim.paper.generalisation`), one column per target model."""

from __future__ import annotations

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from slim import columns as col
from slim.errors import PlotInputError
from slim.paper.figures.common import METRIC_AXIS_LABELS, curve_colors, curves
from slim.paper.generalisation import generalisation_mapes

MEASURED_STYLE = {"linestyle": "-", "marker": "o", "markersize": 4.5, "linewidth": 1.4}
PREDICTED_STYLE = {"linestyle": "-.", "linewidth": 1.6}


def plot_generalisation(predictions: pd.DataFrame, dataset_label: str, train_label: str) -> Figure:
    """Fig. 11: measured vs SLIM-predicted throughput (top) and E2E latency (bottom).

    One column per target model (in the order of `predictions`), x = measured
    mean batch size (log2). Each output length is a shade of the model's hue:
    solid lines with markers are the runs of `dataset_label`, dash-dot lines
    SLIM's predictions (fitted on `train_label` only, no tensor-parallel
    modelling). Each panel's title carries the model's MAPE of that metric.
    """
    col.require_columns(predictions, col.GENERALISATION_PREDICTION_COLUMNS, "the Fig. 11 predictions table",
                        PlotInputError)
    if predictions.empty:
        raise PlotInputError("plot_generalisation: no target run to plot")
    mapes = generalisation_mapes(predictions).set_index(col.MODEL)
    models = list(mapes.index)
    colors = curve_colors(predictions)
    figure = Figure(figsize=(3.9 * len(models), 7.4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, len(models), squeeze=False)
    for column, model in enumerate(models):
        rows = predictions[predictions[col.MODEL] == model]
        gpus = mapes.loc[model, col.TENSOR_PARALLEL]
        heading = f"{model}, " + ("1 GPU" if gpus == "1" else f"TP {gpus} ({gpus} GPUs)")
        for row, metric in enumerate(col.PREDICTION_METRICS):
            ax = axes[row, column]
            for key, curve in curves(rows):
                ax.plot(curve[col.MEAN_BATCH_SIZE], curve[metric.measured], color=colors[key], zorder=3,
                        **MEASURED_STYLE)
                ax.plot(curve[col.MEAN_BATCH_SIZE], curve[metric.predicted], color=colors[key], zorder=2,
                        **PREDICTED_STYLE)
            ax.set_xscale("log", base=2)
            ax.set_ylim(bottom=0)
            ax.grid(True, which="major", alpha=0.3)
            ax.set_title(f"{heading}\nSLIM MAPE {mapes.loc[model, metric.mape]:.1f} %", fontsize="medium")
            ax.set_ylabel(METRIC_AXIS_LABELS[metric.name] if column == 0 else "")
            ax.set_xlabel("Mean batch size" if row == 1 else "")
        axes[0, column].legend(handles=[Line2D([], [], color=colors[key], label=f"OL {key[1]:g}", **MEASURED_STYLE)
                                        for key, _ in curves(rows)], fontsize="small", loc="upper left")
    figure.legend(handles=[
        Line2D([], [], color="black", label=f"Measured ({dataset_label})", **MEASURED_STYLE),
        Line2D([], [], color="black", label=f"SLIM, fitted on {train_label} only (no TP modelling)",
               **PREDICTED_STYLE),
    ], loc="outside lower center", ncol=2, frameon=False)
    figure.suptitle(f"Fig. 11: SLIM on unseen models, {dataset_label} data")
    return figure
