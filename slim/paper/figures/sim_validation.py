"""The simulator's validation figure: per real curve, the simulator's throughput and
mean-batch MAPE (`slim.paper.sim_validation.validation_frame`)."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from slim.paper.sim_validation import THROUGHPUT_BAR_MEDIAN_PCT, validation_frame


def plot_validation(curves: pd.DataFrame) -> Figure:
    """Bars of per-curve throughput and mean-batch MAPE, with the throughput bars as lines."""
    frame = validation_frame(curves)
    labels = [f"{m}\nOL {ol}" for m, ol in zip(frame["model"], frame["OL"])]
    figure = Figure(figsize=(9, 3.6))
    axes = figure.subplots()
    positions = range(len(frame))
    axes.bar([p - 0.2 for p in positions], frame["Thr. MAPE %"], width=0.4, label="throughput")
    axes.bar([p + 0.2 for p in positions], frame["Batch MAPE %"], width=0.4, label="mean batch size")
    axes.axhline(THROUGHPUT_BAR_MEDIAN_PCT, color="grey", linestyle="--", linewidth=1,
                 label=f"bar: median curve throughput MAPE <= {THROUGHPUT_BAR_MEDIAN_PCT:g}%")
    axes.set_xticks(list(positions), labels, fontsize=7)
    axes.set_ylabel("MAPE (%)")
    axes.set_title("Simulator vs real public H100 traces (simulated, calibrated in-sample)")
    axes.legend(fontsize=8)
    figure.tight_layout()
    return figure
