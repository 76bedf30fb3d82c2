"""Replay of the tuning loop on a dataset's measured curves: how much GPU time each way of choosing
``--max-num-seqs`` spends, and how much throughput its choice gives up against full profiling.

An oracle stands in for the GPU: when a policy asks for a (curve, cap) that was measured, it
reveals that run, and the run's recorded duration (an offline row's batch latency) times its GPUs
is the GPU time charged. Every curve's SLO is the dataset's BCA config's (``strict_multiplier x``
E2E at the reference cap); the reference run that defines it is not charged, and nothing else is
free: ``T(1)`` for the efficiency floor is charged when a policy measures it.

The policies (`POLICIES`):

* ``full_profile``: every cap of the curve, Eq. 13 on the measurements;
* ``paper_plan``: the paper's fixed plan, SLIM-BCA (SLIM fitted on the union of the training
  runs of the dataset's applicable held-out settings, as Table VI counts them) on every curve,
  charged for the training runs of each curve;
* ``model_free``: what users do by hand: from cap 1, double the cap (the next candidate at or
  above twice the last) until the measured throughput gains less than epsilon or the SLO breaks;
  the best measured cap within the SLO and the floor;
* ``tune_slim`` / ``tune_sim``: `slim.advisor.tune` with the SLIM or the SIM prior, one session
  over every curve of the dataset (a measurement of one curve informs the others), until every
  decision is settled.

``regret_pct`` is ``100 (1 - T_meas(chosen) / T_meas(full_profile_cap))``; ``slo_violated``
whether the chosen cap's measured E2E exceeds the SLO.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.bca import throughput_at_one
from slim.advisor.measured import MeasuredCurve, curve_from_rows, full_profile_bca
from slim.advisor.predictor_bca import Target, predicted_bca
from slim.advisor.tune import (
    DEFAULT_SCATTER,
    WORKLOAD,
    Measurement,
    Proposal,
    TuneSession,
    TuneSettings,
    Workload,
    curve_label,
    run_loop,
)
from slim.advisor.tune_model import CONFIG_COLUMNS, PriorPredictor, prior_prediction
from slim.errors import FitError, SplitError
from slim.model.equations import ArchitectureLookup
from slim.paper.splits import HeldOutSetting, select_rows
from slim.predictors import SLIM, TrainingRuns, registered, tune_predictors
from slim.specs.hardware import Hardware


def tune_policy(name: str) -> str:
    """The replay policy of `slim tune` with the prior registered as `name` (``tune_slim``)."""
    return f"tune_{name}"


TUNE_POLICIES = tuple(tune_policy(name) for name in tune_predictors())
"""`slim tune` with each prior the registry offers it (`slim.predictors.tune_predictors`)."""
POLICIES = ("full_profile", "paper_plan", "model_free", *TUNE_POLICIES)
REPLAY_COLUMNS = ("curve", "policy", "runs", "gpu_seconds", "full_profile_gpu_seconds", "chosen_cap",
                  "full_profile_cap", "regret_pct", "slo_violated")
CALIBRATION_COLUMNS = ("policy", "quantity", "n_predicted", "coverage_pct", "confidence_pct")


@dataclass(frozen=True)
class ReplayCurve:
    """A measured curve with its runs (one per cap, ascending) and its SLO."""

    curve: MeasuredCurve
    rows: pd.DataFrame
    slo_s: float

    @property
    def label(self) -> str:
        return self.curve.label

    def gpu_seconds(self, caps) -> float:
        chosen = self.rows[self.rows[col.MAX_NUM_SEQS].isin(list(caps))]
        return float((chosen[col.DURATION_S] * chosen[col.TENSOR_PARALLEL].fillna(1)).sum())


def replay_curves(frame: pd.DataFrame, slo_multiplier: float,
                  slo_reference_max_num_seqs: float | None) -> tuple[list[ReplayCurve], list[str]]:
    """The dataset's curves the replay can use and one line for each it cannot (a single cap)."""
    curves, skipped = [], []
    for _, rows in frame.groupby(list(col.WORKLOAD_KEYS), sort=True):
        rows = rows.sort_values(col.MAX_NUM_SEQS, kind="stable").reset_index(drop=True)
        curve = curve_from_rows(rows)
        if len(rows) < 2:
            skipped.append(f"{curve.label}: one measured cap, nothing to choose; not replayed")
            continue
        curves.append(ReplayCurve(curve, rows, curve.slo_s(slo_multiplier, slo_reference_max_num_seqs)))
    return curves, skipped


def _measured_at(curve: ReplayCurve, cap: float, column: str) -> float:
    match = curve.rows.loc[curve.rows[col.MAX_NUM_SEQS] == cap, column]
    return float(match.iloc[0]) if len(match) else float("nan")


def _row(curve: ReplayCurve, policy: str, caps, chosen: float, full_cap: float) -> dict[str, Any]:
    t_full = _measured_at(curve, full_cap, col.TOTAL_TOKEN_THROUGHPUT) if np.isfinite(full_cap) else np.nan
    if np.isfinite(chosen):
        t_chosen = _measured_at(curve, chosen, col.TOTAL_TOKEN_THROUGHPUT)
        regret = 100.0 * (1.0 - t_chosen / t_full) if np.isfinite(t_full) else np.nan
        violated = bool(_measured_at(curve, chosen, col.E2E_LATENCY_S) > curve.slo_s)
    else:
        regret, violated = (100.0 if np.isfinite(t_full) else 0.0), False
    return {"curve": curve.label, "policy": policy, "runs": len(set(caps)), "gpu_seconds": curve.gpu_seconds(caps),
            "full_profile_gpu_seconds": curve.gpu_seconds(curve.curve.max_num_seqs), "chosen_cap": chosen,
            "full_profile_cap": full_cap, "regret_pct": regret, "slo_violated": violated}


# --- the model-free search and the paper's plan --------------------------------------------

def model_free_caps(curve: ReplayCurve, epsilon: float) -> tuple[list[float], float]:
    """The doubling search's measured caps and its choice (module docstring)."""
    caps = curve.curve.max_num_seqs
    measured = [float(caps[0])]
    while True:
        last = measured[-1]
        if _measured_at(curve, last, col.E2E_LATENCY_S) > curve.slo_s:
            break
        higher = caps[caps >= 2 * last]
        if not higher.size:
            break
        nxt = float(higher[0])
        measured.append(nxt)
        gain = _measured_at(curve, nxt, col.TOTAL_TOKEN_THROUGHPUT) / _measured_at(curve, last,
                                                                                   col.TOTAL_TOKEN_THROUGHPUT) - 1
        if gain < epsilon:
            break
    t_one = throughput_at_one(curve.curve.max_num_seqs, curve.curve.throughput_per_s)
    best, chosen = -np.inf, float("nan")
    for cap in measured:
        t, e2e = _measured_at(curve, cap, col.TOTAL_TOKEN_THROUGHPUT), _measured_at(curve, cap, col.E2E_LATENCY_S)
        if e2e <= curve.slo_s and t / (cap * t_one) > epsilon and t > best:
            best, chosen = t, cap
    return measured, chosen


def paper_plan_training(frame: pd.DataFrame, settings: list[HeldOutSetting]) -> pd.DataFrame:
    """The union of the applicable settings' training runs (each run once)."""
    parts = [select_rows(frame, s.train) for s in settings if s.applicable]
    if not parts:
        raise SplitError("no applicable held-out setting, so no paper plan")
    union = pd.concat(parts)
    return union[~union.index.duplicated(keep="first")]


# --- the oracle ----------------------------------------------------------------------------

def candidates_of(curves: list[ReplayCurve]) -> pd.DataFrame:
    """Every (curve, cap) as a tuning candidate: the runs' configuration columns only."""
    frames = []
    for curve in curves:
        rows = curve.rows[list(CONFIG_COLUMNS)].copy()
        rows[WORKLOAD] = curve.label
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def oracle(curves: list[ReplayCurve]) -> Callable[[Proposal], Measurement | None]:
    """Reveals a recorded run when the loop asks for it; the charge is its recorded GPU time."""
    by_label = {curve.label: curve for curve in curves}

    def measure(proposal: Proposal) -> Measurement | None:
        curve = by_label[proposal.workload]
        row = curve.rows[curve.rows[col.MAX_NUM_SEQS] == proposal.max_num_seqs]
        if row.empty:
            return None
        run = row.iloc[0]
        spread = run.get(col.MEASUREMENT_SPREAD_PCT)
        scatter = float(spread) / 200.0 if pd.notna(spread) and spread > 0 else DEFAULT_SCATTER
        return Measurement(float(run[col.TOTAL_TOKEN_THROUGHPUT]), float(run[col.E2E_LATENCY_S]),
                           float(run[col.DURATION_S]) * float(run.get(col.TENSOR_PARALLEL) or 1), scatter)

    return measure


@dataclass(frozen=True)
class TuneReplay:
    rows: list[dict[str, Any]]
    calibration: list[dict[str, Any]]
    stopped: str
    open_curves: list[str]      # decisions the loop left unsettled (their cap: the best measured one)


def replay_tune(curves: list[ReplayCurve], prior: PriorPredictor, policy: str, epsilon: float,
                settings: TuneSettings, full_caps: dict[str, float]) -> TuneReplay:
    """One tuning session over every curve, the oracle measuring; its per-curve rows and the
    coverage of the intervals it held for each run just before measuring it."""
    candidates = candidates_of(curves)
    workloads = [Workload(c.curve.model, c.curve.input_len_nominal, c.curve.output_len_nominal, c.slo_s, epsilon)
                 for c in curves]
    session = TuneSession(workloads, candidates, prior_prediction(prior, candidates), settings)
    outcome = run_loop(session, oracle(curves))
    measured_caps: dict[str, list[float]] = {c.label: [] for c in curves}
    for step in outcome.steps:
        measured_caps[step.workload].append(step.max_num_seqs)
    rows = [_row(c, policy, measured_caps[c.label], outcome.certificates[c.label].batch_cap, full_caps[c.label])
            for c in curves]
    calibration = []
    for quantity, attribute in (("throughput", "throughput_inside_interval"), ("e2e", "e2e_inside_interval")):
        inside = [getattr(s, attribute) for s in outcome.steps if getattr(s, attribute) is not None]
        calibration.append({"policy": policy, "quantity": quantity, "n_predicted": len(inside),
                            "coverage_pct": 100.0 * float(np.mean(inside)) if inside else float("nan"),
                            "confidence_pct": 100.0 * settings.confidence})
    open_curves = [label for label, certificate in outcome.certificates.items() if not certificate.settled]
    return TuneReplay(rows, calibration, outcome.stopped, open_curves)


def replay_dataset(frame: pd.DataFrame, architectures: ArchitectureLookup, hw: Hardware, epsilon: float,
                   slo_multiplier: float, slo_reference_max_num_seqs: float | None,
                   held_out_settings: list[HeldOutSetting] | None, priors: dict[str, PriorPredictor],
                   settings: TuneSettings = TuneSettings()) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Every policy on every curve: the replay table (`REPLAY_COLUMNS`), the tuning intervals'
    coverage (`CALIBRATION_COLUMNS`) and one line per policy or curve that could not be replayed.

    `priors` maps ``tune_slim`` / ``tune_sim`` to their prior predictors (absent: not replayed)."""
    curves, notes = replay_curves(frame, slo_multiplier, slo_reference_max_num_seqs)
    if not curves:
        raise SplitError("no measured curve of two caps or more to replay")
    rows, calibration = [], []
    full_caps = {}
    for curve in curves:
        full = full_profile_bca(curve.curve, curve.slo_s, epsilon).batch_cap
        full_caps[curve.label] = full
        rows.append(_row(curve, "full_profile", curve.curve.max_num_seqs, full, full))
    if held_out_settings is None:
        notes.append("paper_plan: the dataset names no held-out settings; not replayed")
    else:
        try:
            training = paper_plan_training(frame, held_out_settings)
            slim = registered(SLIM)
            fitted = slim.predictor.fit(TrainingRuns(training, architectures, hw, label="paper plan (union of training "
                                                     "sets)", sample_valley=False))
        except (SplitError, FitError) as error:
            notes.append(f"paper_plan: {error}; not replayed")
        else:
            trained = curve_label(training)
            for curve in curves:
                caps = training.loc[trained == curve.label, col.MAX_NUM_SEQS].tolist()
                chosen = predicted_bca(slim, fitted, Target.of_curve(curve.curve), curve.curve.max_num_seqs,
                                       curve.slo_s, epsilon).decision.batch_cap
                rows.append(_row(curve, "paper_plan", caps, chosen, full_caps[curve.label]))
    for curve in curves:
        caps, chosen = model_free_caps(curve, epsilon)
        rows.append(_row(curve, "model_free", caps, chosen, full_caps[curve.label]))
    for policy in TUNE_POLICIES:
        if policy not in priors:
            notes.append(f"{policy}: its prior predictor is not available for this dataset; not replayed")
            continue
        replay = replay_tune(curves, priors[policy], policy, epsilon, settings, full_caps)
        rows += replay.rows
        calibration += replay.calibration
        if replay.open_curves:
            notes.append(f"{policy}: the loop stopped ({replay.stopped}) with {len(replay.open_curves)} decision(s) "
                         f"open: {', '.join(replay.open_curves)}")
    table = pd.DataFrame(rows, columns=list(REPLAY_COLUMNS))
    order = {name: i for i, name in enumerate(POLICIES)}
    table = table.sort_values(["curve", "policy"], key=lambda s: s.map(order) if s.name == "policy" else s,
                              kind="stable").reset_index(drop=True)
    return table, pd.DataFrame(calibration, columns=list(CALIBRATION_COLUMNS)), notes


def summarise(replays: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Per dataset and policy: curves, runs, GPU time as a share of full profiling, regret."""
    rows = []
    for dataset, table in replays.items():
        for policy in POLICIES:
            part = table[table["policy"] == policy]
            if part.empty:
                continue
            rows.append({
                "dataset": dataset, "policy": policy, "curves": len(part), "runs": int(part["runs"].sum()),
                "gpu_time_pct_of_full": 100.0 * part["gpu_seconds"].sum() / part["full_profile_gpu_seconds"].sum(),
                "within_1pct": int((part["regret_pct"] <= 1.0 + 1e-9).sum()),
                "within_5pct": int((part["regret_pct"] <= 5.0 + 1e-9).sum()),
                "max_regret_pct": float(part["regret_pct"].max()),
                "mean_regret_pct": float(part["regret_pct"].mean()),
                "slo_violations": int(part["slo_violated"].sum()),
            })
    return pd.DataFrame(rows)


SUMMARY_HEADERS = {"dataset": "dataset", "policy": "policy", "curves": "curves", "runs": "runs",
                   "gpu_time_pct_of_full": "GPU time (% of full)", "within_1pct": "regret <= 1%",
                   "within_5pct": "regret <= 5%", "max_regret_pct": "worst regret (%)",
                   "slo_violations": "SLO violated"}


def summary_markdown(summary: pd.DataFrame, calibration: pd.DataFrame, notes: dict[str, list[str]]) -> str:
    """The README's tuning section: the summary per dataset and policy, the coverage of the
    intervals the loop held for each run it measured, and what could not be replayed."""
    from slim.paper.table_format import to_markdown

    shown = summary[list(SUMMARY_HEADERS)].rename(columns=SUMMARY_HEADERS)
    for name in ("curves", "runs", "regret <= 1%", "regret <= 5%", "SLO violated"):
        shown[name] = shown[name].astype(int).astype(str)
    text = ["Replay of the tuning loop on every dataset's measured curves (target `tuning`): GPU time as a share "
            "of full profiling's, and the regret of the chosen `--max-num-seqs` against full profiling's "
            "(measured throughput given up, % of it), per curve.\n",
            to_markdown(shown.set_index("dataset"), index_label="dataset")]
    if not calibration.empty:
        cal = calibration.copy()
        cal["coverage"] = [f"{c:.0f}% of {n}" if n else "none measured"
                           for c, n in zip(cal["coverage_pct"], cal["n_predicted"])]
        cal = cal.pivot_table(index=["dataset", "policy"], columns="quantity", values="coverage", aggfunc="first")
        cal = cal.reset_index().rename(columns={"throughput": "throughput interval covers",
                                                "e2e": "E2E interval covers"})
        level = f"{calibration['confidence_pct'].iloc[0]:.0f}%"
        text += [f"\nCoverage of the {level} intervals the loop held for each run just before measuring it:\n",
                 to_markdown(cal.set_index("dataset"), index_label="dataset")]
    lines = [f"- {dataset}: {line}" for dataset, entries in notes.items() for line in entries]
    if lines:
        text += ["\nNot replayed:\n", "\n".join(lines)]
    return "\n".join(text) + "\n"


def headline_markdown(summary: pd.DataFrame) -> str:
    """The README's short tuning table: per dataset, the GPU time of each policy as a share of full
    profiling's, and on how many curves its cap keeps within 1 % of full profiling's throughput."""
    rows = []
    for dataset, part in summary.groupby("dataset", sort=False):
        by_policy = part.set_index("policy")
        cells = {"curves": str(int(part["curves"].iloc[0]))}
        for policy in POLICIES[1:]:
            if policy in by_policy.index:
                row = by_policy.loc[policy]
                cells[policy] = (f"{row['gpu_time_pct_of_full']:.0f}% ({int(row['within_1pct'])} within 1%, "
                                 f"worst {row['max_regret_pct']:.1f}%)")
            else:
                cells[policy] = "--"
        rows.append({"dataset": dataset, **cells})
    header = ["dataset", "curves", *POLICIES[1:]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row[name] for name in header) + " |" for row in rows]
    return ("\n".join(lines) + "\n\nGPU time as a share of full profiling's (every cap of every curve), then the "
            "curves whose chosen cap keeps within 1% of full profiling's measured throughput, and the worst regret. "
            "Generated by the target `tuning`; every number in [docs/results.md](docs/results.md).\n")


# --- the goals of the replay ---------------------------------------------------------------

GOAL_WITHIN_1PCT_SHARE = 0.95
GOAL_MAX_REGRET_PCT = 5.0
GOAL_GPU_SHARE_SWEEP = 15.0      # a full sweep of many caps (the public traces: 10 per curve)
GOAL_GPU_SHARE_FEW_CAPS = 45.0   # offline curves of 4 caps
GOAL_COVERAGE_PCT = (85.0, 95.0)
SWEEP_MIN_CAPS = 8


def tuning_goals(replays: dict[str, pd.DataFrame], calibration: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and tuning policy, each goal met or not: regret (within 1 % on 95 % of curves,
    5 % on all, no SLO violated), GPU time (at most 15 % of full profiling's where curves sweep
    `SWEEP_MIN_CAPS` caps or more, else 45 %; below the model-free search's at no more regret) and
    the intervals' coverage (85-95 %)."""
    rows = []
    for dataset, table in replays.items():
        full = table[table["policy"] == "full_profile"]
        sweep = full["runs"].median() >= SWEEP_MIN_CAPS
        free = table[table["policy"] == "model_free"]
        for policy in TUNE_POLICIES:
            part = table[table["policy"] == policy]
            if part.empty:
                continue
            share = 100.0 * part["gpu_seconds"].sum() / part["full_profile_gpu_seconds"].sum()
            limit = GOAL_GPU_SHARE_SWEEP if sweep else GOAL_GPU_SHARE_FEW_CAPS
            coverage = calibration[(calibration["dataset"] == dataset) & (calibration["policy"] == policy)]
            low, high = GOAL_COVERAGE_PCT
            rows.append({
                "dataset": dataset, "policy": policy,
                "within_1pct_share": float((part["regret_pct"] <= 1.0 + 1e-9).mean()),
                "regret_goal": bool((part["regret_pct"] <= 1.0 + 1e-9).mean() >= GOAL_WITHIN_1PCT_SHARE
                                    and part["regret_pct"].max() <= GOAL_MAX_REGRET_PCT
                                    and not part["slo_violated"].any()),
                "gpu_time_pct": share, "gpu_time_limit_pct": limit, "gpu_goal": bool(share <= limit),
                "beats_model_free": bool(not free.empty and part["gpu_seconds"].sum() < free["gpu_seconds"].sum()
                                         and part["regret_pct"].max() <= free["regret_pct"].max() + 1e-9),
                "coverage_pct": ", ".join(f"{quantity} {pct:.0f}%" for quantity, pct
                                          in zip(coverage["quantity"], coverage["coverage_pct"])),
                "coverage_goal": bool(len(coverage) and coverage["coverage_pct"].between(low, high).all()),
            })
    return pd.DataFrame(rows)
