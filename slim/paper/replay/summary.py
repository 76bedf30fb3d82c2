"""The tuning replay summarised (`slim.paper.replay.dataset`'s tables of every dataset): per dataset, SLO
kind, prior, policy, session and noise the GPU time and regret, the per-curve picture against each
model-free search (how many decisions cost more, the worst ratio), the goals of the honest replay
beside the best model-free search, and the Markdown of the tuning page and the README."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from slim.markdown import markdown_table
from slim.paper.replay.curves import E2E_KIND
from slim.paper.replay.dataset import MODEL_FREE_POLICIES, POLICIES
from slim.paper.replay.priors import TUNE_POLICIES
from slim.paper.replay.scoring import OUT_OF_SAMPLE, PER_WORKLOAD, SESSIONS
from slim.paper.replay.tune_policy import NEXT_RUN, RELIED_ON

GROUP = ["slo_kind", "prior", "policy", "session", "noisy"]
PAIR_KEYS = ["slo_kind", "curve", "seed", "noise"]
"""A tune decision and a model-free search's are paired on one curve, seed and noise of one SLO kind."""
TOLERANCE = 1e-9


# --- the summary ---------------------------------------------------------------------------------

def _pairs(table: pd.DataFrame) -> pd.DataFrame:
    """Each decision's GPU time beside each model-free search's on the same curve, seed and kind
    (columns ``gpu_<search>``)."""
    free = table[table["policy"].isin(MODEL_FREE_POLICIES) & (table["session"] == PER_WORKLOAD)]
    wide = free.pivot_table(index=PAIR_KEYS, columns="policy", values="gpu_seconds", aggfunc="first")
    wide.columns = [f"gpu_{name}" for name in wide.columns]
    return table.join(wide, on=PAIR_KEYS)


def summarise(replays: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per dataset, SLO kind, prior, policy, session and noise (noise-free or noisy): decisions, GPU
    time as a share of full profiling (ratio of sums, and the mean over decisions of each curve's
    share), the floor the same two ways, regret and SLO violations, how many curves the SLO binds on,
    and against each model-free search the decisions that cost more (``over_<search>_pct``) and the
    worst ratio (``worst_ratio_<search>``)."""
    rows = []
    for dataset, table in replays.items():
        table = _pairs(table.assign(noisy=table["noise"] > 0))
        for (kind, prior, policy, session, noisy), part in table.groupby(GROUP, sort=False):
            full = part["full_profile_gpu_seconds"]
            share = part["gpu_seconds"] / full.where(full > 0)
            floor = part["floor_gpu_seconds"] / full.where(full > 0)
            row = {
                "dataset": dataset, "slo_kind": kind, "prior": prior, "policy": policy, "session": session,
                "noisy": bool(noisy), "noise_sd": float(part["noise"].max()), "seeds": int(part["seed"].nunique()),
                "curves": int(part["curve"].nunique()),
                "curves_slo_binds": int(part.groupby("curve")["slo_binds"].first().sum()),
                "decisions": len(part), "runs": int(part["runs"].sum()),
                "gpu_seconds": float(part["gpu_seconds"].sum()),
                "gpu_time_pct_of_full": 100.0 * part["gpu_seconds"].sum() / full.sum(),
                "mean_curve_gpu_pct": 100.0 * float(share.mean()),
                "floor_pct_of_full": 100.0 * part["floor_gpu_seconds"].sum() / full.sum(),
                "mean_curve_floor_pct": 100.0 * float(floor.mean()),
                "within_1pct_share": float((part["regret_pct"] <= 1.0 + TOLERANCE).mean()),
                "regret_over_1pct_pct": 100.0 * float((part["regret_pct"] > 1.0 + TOLERANCE).mean()),
                "max_regret_pct": float(part["regret_pct"].max()),
                "mean_regret_pct": float(part["regret_pct"].mean()),
                "slo_violations": int(part["slo_violated"].sum()),
            }
            for search in MODEL_FREE_POLICIES:
                column = f"gpu_{search}"
                if column not in part or part[column].isna().all():
                    continue
                ratio = part["gpu_seconds"] / part[column].where(part[column] > 0)
                row[f"over_{search}_pct"] = 100.0 * float((part["gpu_seconds"] > part[column] * (1 + TOLERANCE))
                                                          .mean())
                row[f"worst_ratio_{search}"] = float(ratio.max())
            rows.append(row)
    summary = pd.DataFrame(rows)
    if summary.empty:
        return summary
    order = {name: i for i, name in enumerate(POLICIES)}
    datasets = {name: i for i, name in enumerate(replays)}
    kinds = {name: i for i, name in enumerate(dict.fromkeys(summary["slo_kind"]))}
    priors = {name: i for i, name in enumerate([OUT_OF_SAMPLE, *sorted(set(summary["prior"]) - {OUT_OF_SAMPLE})])}
    keys = {"dataset": datasets, "policy": order, "slo_kind": kinds, "prior": priors,
            "session": {n: i for i, n in enumerate(SESSIONS)}}
    return summary.sort_values(["dataset", "slo_kind", "prior", "noisy", "session", "policy"], kind="stable",
                               key=lambda s: s.map(keys[s.name]) if s.name in keys else s).reset_index(drop=True)


# --- the goals -----------------------------------------------------------------------------------

GOAL_WITHIN_1PCT_SHARE = 0.95
GOAL_GPU_RATIO_TO_MODEL_FREE = 1.0
GOAL_GPU_RATIO_WITH_ROOM = 0.6
ROOM_FLOOR_RATIO = 0.5
"""The data leave room where the floor (measuring only the chosen cap) costs at most half the best
model-free search: the GPU goal there is 0.6 x that search's, else 1.0 x."""
GOAL_OVER_BISECT_PCT = 10.0
GOAL_WORST_RATIO_TO_BISECT = 1.5
GOAL_COVERAGE_PCT = (85.0, 95.0)


def headline_rows(summary: pd.DataFrame, kind: str | None = E2E_KIND) -> pd.DataFrame:
    """The honest view: one session per workload, under noise, the out-of-sample prior, of one SLO kind
    (None: every kind)."""
    rows = summary[(summary["session"] == PER_WORKLOAD) & summary["noisy"] & (summary["prior"] == OUT_OF_SAMPLE)]
    return rows if kind is None else rows[rows["slo_kind"] == kind]


def best_model_free(rows: pd.DataFrame) -> pd.Series | None:
    """Of one dataset's and kind's model-free searches (`headline_rows`), the cheapest that keeps regret
    within 1 % on `GOAL_WITHIN_1PCT_SHARE` of decisions (the cheapest of all if none does)."""
    free = rows[rows["policy"].isin(MODEL_FREE_POLICIES)]
    if free.empty:
        return None
    good = free[free["within_1pct_share"] >= GOAL_WITHIN_1PCT_SHARE]
    pool = good if not good.empty else free
    return pool.sort_values(["gpu_seconds", "policy"], kind="stable").iloc[0]


def tuning_goals(summary: pd.DataFrame, calibration: pd.DataFrame, real_datasets: list[str]) -> pd.DataFrame:
    """Per real dataset, SLO kind, prior and tuning policy (one session per workload, under noise),
    each goal with its figure and the best model-free search's beside it:

    * regret: within 1 % of full profiling on >= 95 % of decisions, SLO violations at most the best
      model-free search's;
    * GPU time: at most the best model-free search's, and 0.6 x it where the data leave room (the
      floor at most half of it);
    * the bound: more GPU time than bisect on at most 10 % of decisions, and never more than 1.5 x;
    * intervals (the out-of-sample prior): the final 90 % intervals at the unmeasured caps the
      certificate relies on cover 85-95 % of the recorded runs."""
    rows = []
    noisy = summary[(summary["session"] == PER_WORKLOAD) & summary["noisy"]] if not summary.empty else summary
    for dataset in real_datasets:
        of_dataset = noisy[noisy["dataset"] == dataset]
        for kind in dict.fromkeys(of_dataset["slo_kind"]):
            view = of_dataset[of_dataset["slo_kind"] == kind]
            free = best_model_free(view[view["prior"] == OUT_OF_SAMPLE])
            full = view[(view["policy"] == "full_profile") & (view["prior"] == OUT_OF_SAMPLE)]
            full_share = float(full["within_1pct_share"].iloc[0]) if len(full) else float("nan")
            for _, tuned in view[view["policy"].isin(TUNE_POLICIES)].iterrows():
                if free is None:
                    continue
                rows.append(_goal_row(dataset, kind, tuned, free, full_share, calibration))
    return pd.DataFrame(rows)


def _goal_row(dataset: str, kind: str, tuned: pd.Series, free: pd.Series, full_share: float,
              calibration: pd.DataFrame) -> dict:
    low, high = GOAL_COVERAGE_PCT
    gpu_ratio = tuned["gpu_seconds"] / free["gpu_seconds"] if free["gpu_seconds"] > 0 else math.inf
    room = free["gpu_time_pct_of_full"] > 0 and tuned["floor_pct_of_full"] <= ROOM_FLOOR_RATIO * free[
        "gpu_time_pct_of_full"]
    gpu_goal_ratio = GOAL_GPU_RATIO_WITH_ROOM if room else GOAL_GPU_RATIO_TO_MODEL_FREE
    relied = calibration[(calibration["dataset"] == dataset) & (calibration["policy"] == tuned["policy"])
                         & (calibration["slo_kind"] == kind) & (calibration["prior"] == tuned["prior"])
                         & (calibration["session"] == PER_WORKLOAD) & calibration["noisy"].astype(bool)
                         & (calibration["intervals"] == RELIED_ON) & (calibration["n_predicted"] > 0)]
    over = float(tuned.get("over_bisect_pct", float("nan")))
    worst = float(tuned.get("worst_ratio_bisect", float("nan")))
    honest = tuned["prior"] == OUT_OF_SAMPLE
    return {
        "dataset": dataset, "slo_kind": kind, "prior": tuned["prior"], "policy": tuned["policy"],
        "best_model_free": free["policy"], "within_1pct_share": tuned["within_1pct_share"],
        "model_free_within_1pct_share": free["within_1pct_share"], "full_profile_within_1pct_share": full_share,
        "slo_violations": int(tuned["slo_violations"]), "model_free_slo_violations": int(free["slo_violations"]),
        "regret_goal": bool(tuned["within_1pct_share"] >= GOAL_WITHIN_1PCT_SHARE
                            and tuned["slo_violations"] <= free["slo_violations"]),
        "gpu_time_pct": tuned["gpu_time_pct_of_full"], "model_free_gpu_time_pct": free["gpu_time_pct_of_full"],
        "floor_pct": tuned["floor_pct_of_full"], "gpu_ratio_to_model_free": gpu_ratio,
        "gpu_goal_ratio": gpu_goal_ratio, "gpu_goal": bool(gpu_ratio <= gpu_goal_ratio + TOLERANCE),
        "over_bisect_pct": over, "worst_ratio_to_bisect": worst,
        "bound_goal": bool(over <= GOAL_OVER_BISECT_PCT + TOLERANCE
                           and worst <= GOAL_WORST_RATIO_TO_BISECT + TOLERANCE),
        "coverage_pct": ", ".join(f"{q} {c:.0f}% of {n} (width {w:.0f}%)" for q, c, n, w in zip(
            relied["quantity"], relied["coverage_pct"], relied["n_predicted"], relied["mean_width_pct"]))
        if honest else "(adversarial prior)",
        "coverage_goal": (bool(len(relied) and relied["coverage_pct"].between(low, high).all()) if honest
                          else None),
    }


GOAL_CHECKS = ("regret_goal", "gpu_goal", "bound_goal", "coverage_goal")


# --- Markdown ------------------------------------------------------------------------------------

def _pct(value: float, digits: int = 0) -> str:
    return f"{value:.{digits}f}%" if np.isfinite(value) else "--"


def _met(value) -> str:
    return "--" if value is None else ("met" if value else "not met")


def goals_markdown(goals: pd.DataFrame) -> str:
    """The goals table: each figure beside the best model-free search's, and met or not."""
    if goals.empty:
        return "No real dataset was replayed with a tuning prior, so no goal is measured.\n"
    header = ["dataset", "SLO kind", "prior", "policy", "regret <= 1% (goal >= 95%)", "SLO violated",
              "GPU time vs best model-free", "decisions over bisect (goal <= 10%), worst (goal <= 1.5x)",
              "relied-on 90% intervals cover (goal 85-95%)", "goals met"]
    rows = []
    for _, g in goals.iterrows():
        checks = [name for name in GOAL_CHECKS if g[name] is not None]
        met = [name.removesuffix("_goal") for name in checks if g[name]]
        rows.append([
            g["dataset"], g["slo_kind"], g["prior"], g["policy"],
            f"{100 * g['within_1pct_share']:.0f}% ({_met(g['within_1pct_share'] >= GOAL_WITHIN_1PCT_SHARE)}; "
            f"{g['best_model_free']} {100 * g['model_free_within_1pct_share']:.0f}%, full profiling "
            f"{100 * g['full_profile_within_1pct_share']:.0f}%)",
            f"{g['slo_violations']} ({g['best_model_free']} {g['model_free_slo_violations']})",
            f"{g['gpu_ratio_to_model_free']:.2f}x {g['best_model_free']} ({_pct(g['gpu_time_pct'])} vs "
            f"{_pct(g['model_free_gpu_time_pct'])} of full, floor {_pct(g['floor_pct'])}; goal <= "
            f"{g['gpu_goal_ratio']:g}x: {_met(g['gpu_goal'])})",
            f"{_pct(g['over_bisect_pct'])}, {g['worst_ratio_to_bisect']:.2f}x ({_met(g['bound_goal'])})",
            f"{g['coverage_pct']} ({_met(g['coverage_goal'])})",
            f"{len(met)} of {len(checks)}{': ' + ', '.join(met) if met else ''}"])
    return "\n".join(markdown_table(header, rows)) + "\n"


SUMMARY_HEADERS = {"policy": "policy", "session": "session", "decisions": "decisions",
                   "gpu_time_pct_of_full": "GPU time (% of full)", "mean_curve_gpu_pct": "mean curve (%)",
                   "mean_curve_floor_pct": "floor, mean curve (%)", "regret_over_1pct_pct": "regret > 1% (%)",
                   "max_regret_pct": "worst regret (%)", "slo_violations": "SLO violated",
                   "over_bisect_pct": "over bisect (%)", "worst_ratio_bisect": "worst / bisect"}


def _shown(view: pd.DataFrame) -> pd.DataFrame:
    shown = view.reindex(columns=list(SUMMARY_HEADERS)).rename(columns=SUMMARY_HEADERS)
    for name in ("decisions", "SLO violated"):
        shown[name] = shown[name].astype(int).astype(str)
    for name in ("GPU time (% of full)", "mean curve (%)", "floor, mean curve (%)", "regret > 1% (%)",
                 "worst regret (%)", "over bisect (%)"):
        shown[name] = shown[name].map(lambda v: f"{v:.1f}" if np.isfinite(v) else "--")
    shown["worst / bisect"] = shown["worst / bisect"].map(lambda v: f"{v:.2f}x" if np.isfinite(v) else "--")
    return shown


def summary_markdown(summary: pd.DataFrame, calibration: pd.DataFrame, notes: dict[str, list[str]],
                     real_datasets: list[str]) -> str:
    """The tuning page: the goals on every real dataset and SLO kind, then per dataset the in-batch E2E
    kind's every policy, session and noise with the honest prior, the other kinds and priors one
    session per workload under noise, the coverage of the intervals, and what could not be replayed."""
    from slim.paper.table_format import to_markdown

    text = ["Replay of `slim tune` and the model-free searches on every dataset's measured curves (target "
            "`tuning`). The headline is one session per workload, an out-of-sample prior, and run-to-run noise "
            "over several seeds; regret is scored on the recorded (noise-free) curve. The reference run that sets "
            "each relative SLO is free for every policy. Simulated datasets are a labelled sanity check, not a "
            "goal: their runs come from the simulator SIM's prior also uses. `over bisect`: the share of decisions "
            "that cost more GPU time than a bisection on the same curve, seed and SLO; `worst / bisect`: the "
            "largest such ratio.\n",
            "### Goals (real datasets; one session per workload, under noise)\n",
            goals_markdown(tuning_goals(summary, calibration, real_datasets))]
    for dataset, part in summary.groupby("dataset", sort=False):
        honest = part[(part["prior"] == OUT_OF_SAMPLE) & (part["slo_kind"] == E2E_KIND)]
        for noisy in (True, False):
            view = honest[honest["noisy"] == noisy]
            if view.empty:
                continue
            label = (f"under noise (sd {100 * view['noise_sd'].max():.2g}%, {view['seeds'].max()} seeds)" if noisy
                     else "noise-free (the recorded runs)")
            text += [f"\n### {dataset}: in-batch E2E, {label}\n",
                     to_markdown(_shown(view).set_index("policy"), index_label="policy")]
        others = part[part["noisy"] & (part["session"] == PER_WORKLOAD)
                      & ((part["slo_kind"] != E2E_KIND) | (part["prior"] != OUT_OF_SAMPLE))]
        if not others.empty:
            shown = _shown(others)
            shown.insert(0, "SLO kind", others["slo_kind"].to_numpy())
            shown.insert(1, "prior", others["prior"].to_numpy())
            shown.insert(2, "binds on", [f"{b} of {c}" for b, c in zip(others["curves_slo_binds"], others["curves"])])
            text += [f"\n### {dataset}: every SLO kind and prior, one session per workload, under noise\n",
                     to_markdown(shown.drop(columns=["session"]).set_index("SLO kind"), index_label="SLO kind")]
    if not calibration.empty:
        cal = calibration[(calibration["n_predicted"] > 0) & (calibration["prior"] == OUT_OF_SAMPLE)
                          & (calibration["session"] == PER_WORKLOAD) & calibration["noisy"].astype(bool)].copy()
        cal["covers"] = [f"{c:.0f}% of {n}" + (f" (width {w:.0f}%)" if np.isfinite(w) else "")
                         for c, n, w in zip(cal["coverage_pct"], cal["n_predicted"], cal["mean_width_pct"])]
        cal = cal.pivot_table(index=["dataset", "slo_kind", "policy", "intervals"],
                              columns="quantity", values="covers", aggfunc="first").reset_index()
        level = f"{calibration['confidence_pct'].iloc[0]:.0f}%"
        text += [f"\n### Coverage of the {level} intervals (out-of-sample priors, one session per workload, under "
                 "noise)\n",
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
    """The README's short tuning table: per dataset and SLO kind, one session per workload under noise
    with the honest prior, the floor and each search's GPU time as a share of full profiling's, with
    its decisions over 1 % regret and its SLO violations, and tune's decisions that cost more than a
    bisection."""
    header = ["dataset", "SLO", "curves", "floor", *HEADLINE_POLICIES, "tune_sim over bisect"]
    rows = []
    view = headline_rows(summary, None)
    view = view[~view["slo_kind"].str.contains("+", regex=False)]   # each SLO alone; the combinations: results
    simulated_last = sorted(dict.fromkeys(view["dataset"]), key=lambda name: "(real)" not in name)
    for dataset in simulated_last:
        for kind, part in view[view["dataset"] == dataset].groupby("slo_kind", sort=False):
            by_policy = part.set_index("policy")
            floor = by_policy.iloc[0]["floor_pct_of_full"]
            label = dataset if "(real)" in dataset else f"{dataset} (sanity check, not a goal)"
            cells = [label, kind, str(int(part["curves"].max())), f"{floor:.0f}%"]
            for policy in HEADLINE_POLICIES:
                if policy in by_policy.index:
                    row = by_policy.loc[policy]
                    cells.append(f"{row['gpu_time_pct_of_full']:.0f}% ({row['regret_over_1pct_pct']:.0f}% over 1%, "
                                 f"{int(row['slo_violations'])} SLO)")
                else:
                    cells.append("--")
            tuned = by_policy.loc["tune_sim"] if "tune_sim" in by_policy.index else None
            known = tuned is not None and "over_bisect_pct" in tuned and np.isfinite(tuned["over_bisect_pct"])
            cells.append(f"{tuned['over_bisect_pct']:.0f}%, worst {tuned['worst_ratio_bisect']:.2f}x" if known
                         else "--")
            rows.append(cells)
    seeds = int(summary["seeds"].max()) if not summary.empty else 0
    return ("\n".join(markdown_table(header, rows)) + "\n\nOne tuning session per workload, out-of-sample priors, "
            "run-to-run noise over "
            f"{seeds} seeds. GPU time as a share of full profiling's (the SLO's reference run free for all), with the "
            "share of decisions whose regret exceeds 1% and the SLO violations; floor: measuring only full "
            "profiling's choice; last column: the decisions on which tune cost more than bisect, and the worst "
            "ratio. Generated by the target `tuning`; the goals, the SLO combinations and the adversarial priors "
            "are in [docs/results.md](docs/results.md).\n")
