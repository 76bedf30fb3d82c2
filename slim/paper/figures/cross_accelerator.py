"""Measured vs predicted throughput per accelerator: one panel per accelerator,
every validation run of every held-out setting, one marker per predictor, on log axes with the
identity line. The points are the predictions of each accelerator's evaluation
(``results/<dataset>/evaluation/<setting>.parquet``), not recomputed."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from slim import columns as col
from slim.paper.heldout import IMAI, SIM, SLIM

SHOWN_PREDICTORS = ((SLIM, "o", "tab:blue"), (SIM, "s", "tab:green"), (IMAI, "^", "tab:orange"))
"""Predictors drawn (name, marker, colour); LLMVisor-Agg predicts nothing on static batches."""


def measured_vs_predicted_figure(panels: Sequence[tuple[str, pd.DataFrame]]) -> Figure:
    """One panel per (accelerator name, its validation predictions of every setting)."""
    figure = Figure(figsize=(4.0 * max(len(panels), 1), 4.0), layout="constrained")
    axes = figure.subplots(1, max(len(panels), 1), squeeze=False)[0]
    for ax, (accelerator, predictions) in zip(axes, panels):
        validation = predictions[predictions[col.ROLE] == "validate"]
        values = []
        for predictor, marker, colour in SHOWN_PREDICTORS:
            rows = validation[validation[col.PREDICTOR] == predictor]
            rows = rows[np.isfinite(rows[col.PREDICTED_THROUGHPUT].to_numpy(dtype=float))]
            if rows.empty:
                continue
            measured = rows[col.MEASURED_THROUGHPUT].to_numpy(dtype=float)
            predicted = rows[col.PREDICTED_THROUGHPUT].to_numpy(dtype=float)
            ax.scatter(measured, predicted, s=12, marker=marker, color=colour, alpha=0.6, label=predictor,
                       linewidths=0)
            values += [measured[measured > 0], predicted[predicted > 0]]
        if values:
            every = np.concatenate(values)
            low, high = float(every.min()) / 1.3, float(every.max()) * 1.3
            ax.plot([low, high], [low, high], color="black", linewidth=0.8, linestyle="--",
                    label="measured = predicted")
            ax.set_xlim(low, high)
            ax.set_ylim(low, high)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(accelerator, fontsize=9)
        ax.set_xlabel("Measured throughput (tokens/s)")
        ax.set_ylabel("Predicted throughput (tokens/s)")
        ax.legend(fontsize=7, loc="upper left")
    return figure
