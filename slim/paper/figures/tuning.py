"""GPU time against regret for every tuning policy of the replay (`slim.paper.replay`): one
panel per dataset, one point per policy at (GPU time as a share of full profiling, mean regret),
with a bar to the largest regret of any decision; one session per workload under noise (the
honest view, `headline_rows`), and the floor (measuring only full profiling's choice) as a line."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from slim.errors import PlotInputError
from slim.paper.replay.dataset import POLICIES
from slim.paper.replay.summary import headline_rows

POLICY_STYLE = {"full_profile": ("s", "0.3"), "paper_plan": ("D", "tab:orange"), "descend": ("v", "tab:red"),
                "bisect": ("<", "tab:purple"), "doubling": ("^", "tab:brown"), "tune_slim": ("o", "tab:blue"),
                "tune_sim": ("P", "tab:green")}


def gpu_time_vs_regret_figure(summary: pd.DataFrame) -> Figure:
    """One panel per dataset of `slim.paper.replay.summary.summarise`'s table."""
    view = headline_rows(summary) if not summary.empty else summary
    if view.empty:
        raise PlotInputError("the tuning summary is empty: no dataset was replayed under noise")
    datasets = list(dict.fromkeys(view["dataset"]))
    figure = Figure(figsize=(3.4 * len(datasets), 3.4), layout="constrained")
    axes = figure.subplots(1, len(datasets), squeeze=False, sharey=True)[0]
    for ax, dataset in zip(axes, datasets):
        part = view[view["dataset"] == dataset]
        ax.axvline(float(part["floor_pct_of_full"].iloc[0]), color="0.5", linestyle="--", linewidth=0.8,
                   label="floor")
        for policy in POLICIES:
            row = part[part["policy"] == policy]
            if row.empty:
                continue
            marker, colour = POLICY_STYLE.get(policy, ("x", "k"))
            x, mean, worst = (float(row[name].iloc[0]) for name in ("gpu_time_pct_of_full", "mean_regret_pct",
                                                                    "max_regret_pct"))
            ax.errorbar([x], [mean], yerr=[[0.0], [max(worst - mean, 0.0)]], fmt=marker, color=colour,
                        capsize=3, label=policy)
        ax.set_title(dataset, fontsize=9)
        ax.set_xlabel("GPU time (% of full profiling)")
        ax.set_xlim(0, 105)
        ax.axhline(1.0, color="0.6", linestyle=":", linewidth=0.8)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("regret (% of full profiling's throughput)\nmean, bar to the worst decision")
    axes[-1].legend(fontsize=7, loc="upper right")
    return figure
