"""The layout replay's summary and its goals (`slim.paper.replay.layouts`), and the goals of the
per-layout cap decisions it replays beside them.

**Layout goals** (`LAYOUT_GOALS`), of a tuning policy against the other ways of searching: regret per
GPU within 1 % (and no SLO broken on the recorded curve) on at least 95 % of the (workload, SLO)
decisions; total GPU time at most 0.5 x the bisection per layout's and 0.2 x the exhaustive sweep's;
on no workload more than 1.5 x the bisection per layout's. **Cap goals** (`CAP_GOALS`): the tuning
policy within 1 % regret on at least 95 % of the per-layout cap decisions, at no more GPU time in
total than the best model-free search's. Each is measured noise-free and under noise; a goal is met
only where both meet it.
"""

from __future__ import annotations

import pandas as pd

from slim.markdown import markdown_table
from slim.paper.replay.layouts import LAYOUT_POLICIES, TUNE_POLICY
from slim.paper.replay.searches import MODEL_FREE_SEARCHES

WITHIN_REGRET_PCT, SHARE_GOAL = 1.0, 0.95
LAYOUT_GOALS = {"vs_bisection": 0.5, "vs_exhaustive": 0.2, "worst_vs_bisection": 1.5}
"""The GPU-time goals of a tuning policy across layouts (ratios of total GPU time; the worst workload's)."""
LAYOUT_TUNE_POLICIES = ("tune_layouts", "tune_per_layout")
"""The tuning policies across layouts the goals judge."""


def _within(table: pd.DataFrame) -> pd.Series:
    return (table["regret_pct"] <= WITHIN_REGRET_PCT) & ~table["slo_violated"].astype(bool)


def layout_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, noise (free or noisy) and policy: decisions, the share within 1 % regret, the
    share breaking an SLO, and total GPU time against the bisection per layout and the exhaustive
    sweep, with the worst workload's ratio to the bisection."""
    rows = []
    table = table.assign(noisy=table["noise"] > 0, within=_within(table))
    for (dataset, noisy), part in table.groupby(["dataset", "noisy"], sort=True):
        bisection = part[part["policy"] == "bisection_per_layout"]
        for policy in LAYOUT_POLICIES:
            own = part[part["policy"] == policy]
            if own.empty:
                continue
            key = ["slo_kind", "workload", "seed"]
            paired = own.merge(bisection[key + ["gpu_seconds"]], on=key, suffixes=("", "_bisection"))
            by_workload = paired.groupby("workload")[["gpu_seconds", "gpu_seconds_bisection"]].sum()
            rows.append({"dataset": dataset, "noisy": bool(noisy), "policy": policy, "decisions": len(own),
                         "within_1pct_share": float(own["within"].mean()),
                         "slo_violated_share": float(own["slo_violated"].astype(bool).mean()),
                         "mean_runs": float(own["runs"].mean()),
                         "gpu_vs_bisection": float(own["gpu_seconds"].sum() / own["bisection_gpu_seconds"].sum()),
                         "gpu_vs_exhaustive": float(own["gpu_seconds"].sum() / own["exhaustive_gpu_seconds"].sum()),
                         "worst_workload_vs_bisection": float((by_workload["gpu_seconds"]
                                                               / by_workload["gpu_seconds_bisection"]).max())})
    return pd.DataFrame(rows)


def cap_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, noise and policy of the per-layout cap decisions: decisions, the share within 1 %
    regret and total GPU time against full profiling."""
    rows = []
    table = table.assign(noisy=table["noise"] > 0, within=_within(table))
    for (dataset, noisy, policy), own in table.groupby(["dataset", "noisy", "policy"], sort=True):
        rows.append({"dataset": dataset, "noisy": bool(noisy), "policy": policy, "decisions": len(own),
                     "within_1pct_share": float(own["within"].mean()), "mean_runs": float(own["runs"].mean()),
                     "gpu_seconds": float(own["gpu_seconds"].sum()),
                     "gpu_vs_full_profile": float(own["gpu_seconds"].sum() / own["full_profile_gpu_seconds"].sum())})
    return pd.DataFrame(rows)


def layout_goals(summary: pd.DataFrame, caps: pd.DataFrame, cap_table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each goal per dataset: the figure (the worse of noise-free and noisy) and whether it is met;
    the cap decisions' GPU time from `cap_table` (the rows `cap_summary` read), each model-free search
    on the decisions the tuning policy replayed."""
    rows = []
    for dataset, part in summary.groupby("dataset", sort=True):
        for policy in LAYOUT_TUNE_POLICIES:
            own = part[part["policy"] == policy]
            if own.empty:
                continue
            rows.append(_share_goal(dataset, f"{policy}: within 1% regret per GPU", own))
            for name, column, words in (("vs_bisection", "gpu_vs_bisection", "GPU time vs the bisection per layout"),
                                        ("vs_exhaustive", "gpu_vs_exhaustive", "GPU time vs the exhaustive sweep"),
                                        ("worst_vs_bisection", "worst_workload_vs_bisection",
                                         "GPU time vs the bisection per layout, worst workload")):
                value = float(own[column].max())
                rows.append(_goal(dataset, f"{policy}: {words}", value, value <= LAYOUT_GOALS[name],
                                  f"<= {LAYOUT_GOALS[name]:g}x"))
    for dataset, part in caps.groupby("dataset", sort=True):
        tuned = part[part["policy"] == TUNE_POLICY]
        if tuned.empty:
            continue
        rows.append(_share_goal(dataset, f"{TUNE_POLICY} per layout: within 1% regret", tuned))
        if cap_table is not None:
            worst = _vs_best_model_free(cap_table[cap_table["dataset"] == dataset])
            rows.append(_goal(dataset, f"{TUNE_POLICY} per layout: GPU time vs the best model-free search", worst,
                              bool(worst <= 1.0), "<= 1x"))
    return pd.DataFrame(rows, columns=["dataset", "goal", "value", "target", "met"])


def _vs_best_model_free(table: pd.DataFrame) -> float:
    """The tuning policy's total GPU time over the cheapest model-free search's on the same decisions
    (SLO kind, curve, layout and seed), the worse of noise-free and noisy."""
    key = ["slo_kind", "curve", "layout", "seed"]
    tuned = table[table["policy"] == TUNE_POLICY]
    worst = 0.0
    for noisy in (False, True):
        own = tuned[(tuned["noise"] > 0) == noisy]
        if own.empty:
            continue
        same = table.merge(own[key].drop_duplicates(), on=key)
        free = same[same["policy"].isin(list(MODEL_FREE_SEARCHES))].groupby("policy")["gpu_seconds"].sum()
        if free.empty:
            return float("nan")     # nothing to compare with: the goal is not judged
        worst = max(worst, float(own["gpu_seconds"].sum() / free.min()))
    return worst


def _share_goal(dataset: str, goal: str, own: pd.DataFrame) -> dict:
    """The share of decisions within 1% regret, the worse of noise-free and noisy, against its goal."""
    share = float(own["within_1pct_share"].min())
    return _goal(dataset, goal, share, share >= SHARE_GOAL, f">= {100 * SHARE_GOAL:.0f}% of decisions", percent=True)


def _goal(dataset: str, goal: str, value: float, met: bool, target: str, percent: bool = False) -> dict:
    return {"dataset": dataset, "goal": goal, "value": round(100 * value, 1) if percent else round(value, 3),
            "target": target, "met": bool(met)}


def _table(frame: pd.DataFrame) -> str:
    return "\n".join(markdown_table(list(frame.columns), frame.itertuples(index=False)))


def layout_markdown(summary: pd.DataFrame, caps: pd.DataFrame, goals: pd.DataFrame, notes: list[str],
                    labels: dict[str, str]) -> str:
    """The summary, the cap decisions and the goals as Markdown, with the notes."""
    def fmt(frame: pd.DataFrame, percent: tuple[str, ...]) -> pd.DataFrame:
        frame = frame.copy()
        frame["dataset"] = frame["dataset"].map(lambda name: labels.get(name, name))
        frame["noisy"] = frame["noisy"].map({False: "noise-free", True: "noisy"})
        for column in percent:
            frame[column] = (100 * frame[column]).map("{:.1f}%".format)
        for column in frame.columns:
            if column.startswith("gpu_") or column.endswith("_vs_bisection") or column == "mean_runs":
                frame[column] = frame[column].map("{:.2f}".format)
        return frame

    parts = ["Layout decisions (the (layout, cap) of most tokens/s per GPU within the SLOs; GPU time is "
             "each run's duration times the GPUs its server uses):", "",
             _table(fmt(summary, ("within_1pct_share", "slo_violated_share"))), "",
             "Each layout's cap decision on its own:", "",
             _table(fmt(caps.drop(columns=["gpu_seconds"]), ("within_1pct_share",))), "",
             "Goals (the worse of noise-free and noisy):", "",
             _table(goals.assign(dataset=goals["dataset"].map(lambda name: labels.get(name, name)),
                                         met=goals["met"].map({True: "met", False: "missed"}))), ""]
    parts += [f"- {note}" for note in notes]
    return "\n".join(parts) + "\n"
