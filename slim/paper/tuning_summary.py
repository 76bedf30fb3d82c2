"""The tuning replay summarised (`slim.paper.tuning_replay`'s tables of every dataset): per dataset,
policy, session and noise the GPU time and regret, the goals of the honest replay beside the best
model-free search, and the Markdown of the tuning page and the README."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from slim.paper.tuning_priors import TUNE_POLICIES
from slim.paper.tuning_replay import MODEL_FREE_POLICIES, NEXT_RUN, PER_WORKLOAD, POLICIES, RELIED_ON, SESSIONS

# --- the summary ---------------------------------------------------------------------------------

def summarise(replays: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per dataset, policy, session and noise (noise-free or noisy): decisions, GPU time as a share
    of full profiling (ratio of sums, and the mean over decisions of each curve's share), the floor
    the same two ways, regret and SLO violations."""
    rows = []
    for dataset, table in replays.items():
        table = table.assign(noisy=table["noise"] > 0)
        for (policy, session, noisy), part in table.groupby(["policy", "session", "noisy"], sort=False):
            full = part["full_profile_gpu_seconds"]
            share = part["gpu_seconds"] / full.where(full > 0)
            floor = part["floor_gpu_seconds"] / full.where(full > 0)
            rows.append({
                "dataset": dataset, "policy": policy, "session": session, "noisy": bool(noisy),
                "noise_sd": float(part["noise"].max()), "seeds": int(part["seed"].nunique()),
                "curves": int(part["curve"].nunique()), "decisions": len(part), "runs": int(part["runs"].sum()),
                "gpu_seconds": float(part["gpu_seconds"].sum()),
                "gpu_time_pct_of_full": 100.0 * part["gpu_seconds"].sum() / full.sum(),
                "mean_curve_gpu_pct": 100.0 * float(share.mean()),
                "floor_pct_of_full": 100.0 * part["floor_gpu_seconds"].sum() / full.sum(),
                "mean_curve_floor_pct": 100.0 * float(floor.mean()),
                "within_1pct_share": float((part["regret_pct"] <= 1.0 + 1e-9).mean()),
                "regret_over_1pct_pct": 100.0 * float((part["regret_pct"] > 1.0 + 1e-9).mean()),
                "max_regret_pct": float(part["regret_pct"].max()),
                "mean_regret_pct": float(part["regret_pct"].mean()),
                "slo_violations": int(part["slo_violated"].sum()),
            })
    summary = pd.DataFrame(rows)
    if summary.empty:
        return summary
    order = {name: i for i, name in enumerate(POLICIES)}
    datasets = {name: i for i, name in enumerate(replays)}
    return summary.sort_values(["dataset", "noisy", "session", "policy"], kind="stable", key=lambda s: (
        s.map(datasets) if s.name == "dataset" else s.map(order) if s.name == "policy"
        else s.map({n: i for i, n in enumerate(SESSIONS)}) if s.name == "session" else s)).reset_index(drop=True)


# --- the goals -----------------------------------------------------------------------------------

GOAL_WITHIN_1PCT_SHARE = 0.95
GOAL_GPU_RATIO_TO_MODEL_FREE = 0.6
GOAL_FLOOR_RATIO = 1.5
GOAL_COVERAGE_PCT = (85.0, 95.0)


def headline_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The honest view: one session per workload, under noise."""
    return summary[(summary["session"] == PER_WORKLOAD) & summary["noisy"]]


def best_model_free(rows: pd.DataFrame) -> pd.Series | None:
    """Of one dataset's model-free searches (`headline_rows`), the cheapest that keeps regret
    within 1 % on `GOAL_WITHIN_1PCT_SHARE` of decisions (the cheapest of all if none does)."""
    free = rows[rows["policy"].isin(MODEL_FREE_POLICIES)]
    if free.empty:
        return None
    good = free[free["within_1pct_share"] >= GOAL_WITHIN_1PCT_SHARE]
    pool = good if not good.empty else free
    return pool.sort_values(["gpu_seconds", "policy"], kind="stable").iloc[0]


def tuning_goals(summary: pd.DataFrame, calibration: pd.DataFrame, real_datasets: list[str]) -> pd.DataFrame:
    """Per real dataset and tuning policy (one session per workload, out-of-sample prior, under
    noise), each goal with its figure and the best model-free search's beside it:

    * regret: within 1 % of full profiling on >= 95 % of decisions, SLO violations at most the best
      model-free search's;
    * GPU time: at most 0.6 x the best model-free search's;
    * floor: the mean curve's GPU share at most 1.5 x the floor's (measuring only the chosen cap);
    * intervals: the final 90 % intervals at the unmeasured caps the certificate relies on cover
      85-95 % of the recorded runs, in throughput and in E2E."""
    rows = []
    for dataset in real_datasets:
        view = headline_rows(summary[summary["dataset"] == dataset])
        free = best_model_free(view)
        full = view[view["policy"] == "full_profile"]
        full_share = float(full["within_1pct_share"].iloc[0]) if len(full) else float("nan")
        for policy in TUNE_POLICIES:
            part = view[view["policy"] == policy]
            if part.empty or free is None:
                continue
            tuned = part.iloc[0]
            relied = calibration[(calibration["dataset"] == dataset) & (calibration["policy"] == policy)
                                 & (calibration["session"] == PER_WORKLOAD) & calibration["noisy"].astype(bool)
                                 & (calibration["intervals"] == RELIED_ON) & (calibration["n_predicted"] > 0)]
            low, high = GOAL_COVERAGE_PCT
            gpu_ratio = tuned["gpu_seconds"] / free["gpu_seconds"] if free["gpu_seconds"] > 0 else math.inf
            floor_ratio = (tuned["mean_curve_gpu_pct"] / tuned["mean_curve_floor_pct"]
                           if tuned["mean_curve_floor_pct"] > 0 else math.inf)
            rows.append({
                "dataset": dataset, "policy": policy, "best_model_free": free["policy"],
                "within_1pct_share": tuned["within_1pct_share"],
                "model_free_within_1pct_share": free["within_1pct_share"],
                "full_profile_within_1pct_share": full_share,
                "slo_violations": int(tuned["slo_violations"]),
                "model_free_slo_violations": int(free["slo_violations"]),
                "regret_goal": bool(tuned["within_1pct_share"] >= GOAL_WITHIN_1PCT_SHARE
                                    and tuned["slo_violations"] <= free["slo_violations"]),
                "gpu_time_pct": tuned["gpu_time_pct_of_full"],
                "model_free_gpu_time_pct": free["gpu_time_pct_of_full"],
                "gpu_ratio_to_model_free": gpu_ratio, "gpu_goal": bool(gpu_ratio <= GOAL_GPU_RATIO_TO_MODEL_FREE),
                "mean_curve_gpu_pct": tuned["mean_curve_gpu_pct"],
                "mean_curve_floor_pct": tuned["mean_curve_floor_pct"],
                "floor_ratio": floor_ratio, "floor_goal": bool(floor_ratio <= GOAL_FLOOR_RATIO),
                "coverage_pct": ", ".join(f"{q} {c:.0f}% of {n} (width {w:.0f}%)" for q, c, n, w in zip(
                    relied["quantity"], relied["coverage_pct"], relied["n_predicted"], relied["mean_width_pct"]))
                or "no interval relied on",
                "coverage_goal": bool(len(relied) and relied["coverage_pct"].between(low, high).all()),
            })
    return pd.DataFrame(rows)


GOAL_CHECKS = ("regret_goal", "gpu_goal", "floor_goal", "coverage_goal")


# --- Markdown ------------------------------------------------------------------------------------

def _pct(value: float, digits: int = 0) -> str:
    return f"{value:.{digits}f}%" if np.isfinite(value) else "--"


def goals_markdown(goals: pd.DataFrame) -> str:
    """The goals table: each figure beside the best model-free search's, and met or not."""
    if goals.empty:
        return "No real dataset was replayed with a tuning prior, so no goal is measured.\n"
    lines = ["| dataset | policy | best model-free | regret <= 1% (goal >= 95%) | SLO violated | GPU time vs best "
             "model-free (goal <= 0.6x) | mean curve vs floor (goal <= 1.5x) | relied-on 90% intervals cover "
             "(goal 85-95%) | goals met |", "|" + "---|" * 9]
    for _, g in goals.iterrows():
        met = [name.removesuffix("_goal") for name in GOAL_CHECKS if g[name]]
        lines.append(
            f"| {g['dataset']} | {g['policy']} | {g['best_model_free']} | {100 * g['within_1pct_share']:.0f}% "
            f"({'met' if g['within_1pct_share'] >= GOAL_WITHIN_1PCT_SHARE else 'not met'}; model-free "
            f"{100 * g['model_free_within_1pct_share']:.0f}%, full profiling "
            f"{100 * g['full_profile_within_1pct_share']:.0f}%) | {g['slo_violations']} (model-free "
            f"{g['model_free_slo_violations']}) | {g['gpu_ratio_to_model_free']:.2f}x ({_pct(g['gpu_time_pct'])} vs "
            f"{_pct(g['model_free_gpu_time_pct'])} of full; {'met' if g['gpu_goal'] else 'not met'}) | "
            f"{g['floor_ratio']:.2f}x ({_pct(g['mean_curve_gpu_pct'])} vs {_pct(g['mean_curve_floor_pct'])}; "
            f"{'met' if g['floor_goal'] else 'not met'}) | {g['coverage_pct']} "
            f"({'met' if g['coverage_goal'] else 'not met'}) | {len(met)} of {len(GOAL_CHECKS)}"
            f"{': ' + ', '.join(met) if met else ''} |")
    return "\n".join(lines) + "\n"


SUMMARY_HEADERS = {"policy": "policy", "session": "session", "decisions": "decisions",
                   "gpu_time_pct_of_full": "GPU time (% of full)", "mean_curve_gpu_pct": "mean curve (%)",
                   "mean_curve_floor_pct": "floor, mean curve (%)", "regret_over_1pct_pct": "regret > 1% (%)",
                   "max_regret_pct": "worst regret (%)", "slo_violations": "SLO violated"}


def summary_markdown(summary: pd.DataFrame, calibration: pd.DataFrame, notes: dict[str, list[str]],
                     real_datasets: list[str]) -> str:
    """The tuning page: the goals on every real dataset, then per dataset every policy, session and
    noise, the coverage of the intervals, and what could not be replayed."""
    from slim.paper.table_format import to_markdown

    text = ["Replay of `slim tune` and the model-free searches on every dataset's measured curves (target "
            "`tuning`). The headline is one session per workload, an out-of-sample prior, and run-to-run noise "
            "over several seeds; regret is scored on the recorded (noise-free) curve. The reference run that sets "
            "each SLO is free for every policy. Simulated datasets are a labelled sanity check, not a goal: their "
            "runs come from the simulator SIM's prior also uses.\n",
            "### Goals (real datasets; one session per workload, out-of-sample prior, under noise)\n",
            goals_markdown(tuning_goals(summary, calibration, real_datasets))]
    for dataset, part in summary.groupby("dataset", sort=False):
        for noisy in (True, False):
            view = part[part["noisy"] == noisy]
            if view.empty:
                continue
            shown = view[list(SUMMARY_HEADERS)].rename(columns=SUMMARY_HEADERS)
            for name in ("decisions", "SLO violated"):
                shown[name] = shown[name].astype(int).astype(str)
            for name in ("GPU time (% of full)", "mean curve (%)", "floor, mean curve (%)", "regret > 1% (%)",
                         "worst regret (%)"):
                shown[name] = shown[name].map(lambda v: f"{v:.1f}")
            label = (f"under noise (sd {100 * view['noise_sd'].max():.2g}%, {view['seeds'].max()} seeds)" if noisy
                     else "noise-free (the recorded runs)")
            text += [f"\n### {dataset}: {label}\n", to_markdown(shown.set_index("policy"), index_label="policy")]
    if not calibration.empty:
        cal = calibration[calibration["n_predicted"] > 0].copy()
        cal["covers"] = [f"{c:.0f}% of {n}" + (f" (width {w:.0f}%)" if np.isfinite(w) else "")
                         for c, n, w in zip(cal["coverage_pct"], cal["n_predicted"], cal["mean_width_pct"])]
        cal["noise"] = np.where(cal["noisy"].astype(bool), "noisy", "noise-free")
        cal = cal.pivot_table(index=["dataset", "policy", "session", "noise", "intervals"], columns="quantity",
                              values="covers", aggfunc="first").reset_index()
        level = f"{calibration['confidence_pct'].iloc[0]:.0f}%"
        text += [f"\n### Coverage of the {level} intervals\n",
                 f"`{NEXT_RUN}`: the interval the loop held for each run just before measuring it; `{RELIED_ON}`: the "
                 "final intervals at the unmeasured caps the certificate excludes by a bound, against the recorded "
                 "run. Width: mean of upper / lower bound - 1.\n",
                 to_markdown(cal.set_index("dataset"), index_label="dataset")]
    lines = [f"- {dataset}: {line}" for dataset, entries in notes.items() for line in entries]
    if lines:
        text += ["\n### Notes and what was not replayed\n", "\n".join(lines)]
    return "\n".join(text) + "\n"


HEADLINE_POLICIES = (*MODEL_FREE_POLICIES, *TUNE_POLICIES)


def headline_markdown(summary: pd.DataFrame) -> str:
    """The README's short tuning table: per dataset, one session per workload under noise, the
    floor and each search's GPU time as a share of full profiling's, with its decisions over 1 %
    regret and its SLO violations."""
    header = ["dataset", "curves", "floor", *HEADLINE_POLICIES]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    view = headline_rows(summary)
    simulated_last = sorted(dict.fromkeys(view["dataset"]), key=lambda name: "(real)" not in name)
    for dataset in simulated_last:
        part = view[view["dataset"] == dataset]
        by_policy = part.set_index("policy")
        floor = by_policy.iloc[0]["floor_pct_of_full"]
        label = dataset if "(real)" in dataset else f"{dataset} (sanity check, not a goal)"
        cells = [label, str(int(part["curves"].max())), f"{floor:.0f}%"]
        for policy in HEADLINE_POLICIES:
            if policy in by_policy.index:
                row = by_policy.loc[policy]
                cells.append(f"{row['gpu_time_pct_of_full']:.0f}% ({row['regret_over_1pct_pct']:.0f}% over 1%, "
                             f"{int(row['slo_violations'])} SLO)")
            else:
                cells.append("--")
        lines.append("| " + " | ".join(cells) + " |")
    seeds = int(summary["seeds"].max()) if not summary.empty else 0
    return ("\n".join(lines) + "\n\nHonest terms: one tuning session per workload, out-of-sample priors, run-to-run "
            f"noise over {seeds} seeds. GPU time as a share of full profiling's (the SLO's reference run free for "
            "all), "
            "then the share of decisions whose regret exceeds 1% and the SLO violations; floor: measuring only full "
            "profiling's chosen cap. Generated by the target `tuning`; goals and every number in "
            "[docs/results.md](docs/results.md).\n")
