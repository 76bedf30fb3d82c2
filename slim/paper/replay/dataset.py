"""A dataset's tuning replay: every policy on every curve under every SLO kind it can replay,
noise-free and under noisy seeds, with the tuning intervals' coverage and one line for whatever
could not be replayed (`replay_dataset`), and the priors' residuals other datasets' kernels are
fitted on (`replay_residuals`).

**The policies** (`POLICIES`), each choosing by Eq. 13 (`slim.decision.rule.recommend`) among what
it measured: ``full_profile`` (every cap), ``paper_plan`` (`slim.paper.replay.paper_plan`), the
model-free searches (`slim.paper.replay.searches`), and ``tune_slim`` / ``tune_sim``: `slim tune`
with the SLIM or the SIM prior until every decision is settled or stopped at the bound, in one of two
`SESSIONS`: ``per_workload`` (one session per curve, as a user tuning one model, IL and OL from
scratch: the headline) or ``per_dataset`` (one session over every curve of the dataset, each
measurement informing the others; in-batch E2E, honest prior only). **The reference run that sets a
relative SLO is free for every policy, full profiling included, and known to every policy from the
start**; every other run is charged, ``T(1)`` included where the reference is not cap 1.

**Priors.** A curve is never replayed with a prior fitted on its model's runs of the dataset
(`slim.paper.replay.priors`), nor with a residual kernel fitted on the dataset (`ReplayOptions.kernels`,
chosen on the other datasets' `replay_residuals`): the ``prior`` column reads `OUT_OF_SAMPLE`. The
adversarial priors (SIM's bandwidth and compute scaled by 0.5 and 2, SIM biased across caps) replay
``tune_sim`` one session per workload: the bound must hold under each. The summary, the goals and
their Markdown are `slim.paper.replay.summary`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

import pandas as pd

from slim.decision.candidates import THROUGHPUT
from slim.errors import SplitError
from slim.model.equations import ArchitectureLookup
from slim.paper.replay.curves import (
    E2E_KIND,
    ReplayCurve,
    RunNoise,
    SloKind,
    e2e_kind,
    repeat_scatter,
    replay_curves,
    why_kind_not_replayed,
)
from slim.paper.replay.paper_plan import paper_plan_rows
from slim.paper.replay.priors import TUNE_POLICIES, ReplayPrior, predictor_of
from slim.paper.replay.scoring import (
    OUT_OF_SAMPLE,
    PER_WORKLOAD,
    REPLAY_COLUMNS,
    SESSIONS,
    ReplayRun,
    replay_row,
)
from slim.paper.replay.searches import MODEL_FREE_SEARCHES, full_profile_choice, model_free_caps, slo_binds
from slim.paper.replay.tune_policy import NEXT_RUN, RELIED_ON, candidates_of, replay_tune
from slim.paper.splits import HeldOutSetting
from slim.specs.hardware import Hardware
from slim.specs.slo import IN_BATCH_E2E
from slim.tune.kernel import RESIDUAL_COLUMNS, FittedKernels, residual_table
from slim.tune.session import TuneSettings

MODEL_FREE_POLICIES = tuple(MODEL_FREE_SEARCHES)
POLICIES = ("full_profile", "paper_plan", *MODEL_FREE_POLICIES, *TUNE_POLICIES)
CALIBRATION_COLUMNS = ("slo_kind", "prior", "policy", "session", "noisy", "intervals", "quantity", "n_predicted",
                       "coverage_pct", "mean_width_pct", "confidence_pct")
DEFAULT_SEEDS = 5


@dataclass(frozen=True)
class ReplayOptions:
    """How a dataset is replayed: the tuning settings (its margin the bound's), the residual kernels
    per prior (fitted on other datasets only: `slim.tune.kernel.fit_kernels`; none: the hand-set
    kernel), the noise (`noise_sd`; None: the dataset's own repeat scatter), how many noisy seeds
    beside the noise-free replay, the SLO kinds beside the BCA config's E2E, and the adversarial
    priors of ``tune_sim`` (name -> prior)."""

    settings: TuneSettings = TuneSettings()
    kernels: FittedKernels = FittedKernels({}, ())
    noise_sd: float | None = None
    seeds: int = DEFAULT_SEEDS
    slo_kinds: tuple[SloKind, ...] = ()
    adversarial: dict[str, ReplayPrior] = field(default_factory=dict)


def replay_residuals(frame: pd.DataFrame, priors: dict[str, ReplayPrior], dataset: str, slo_multiplier: float,
                     slo_reference_max_num_seqs: float | None, noise_sd: float | None = None) -> pd.DataFrame:
    """Each out-of-sample prior's log residuals on the dataset's replayed runs
    (`slim.tune.kernel.RESIDUAL_COLUMNS`): what other datasets' kernels are fitted on."""
    curves, _ = replay_curves(frame, e2e_kind(slo_multiplier), slo_reference_max_num_seqs)
    scatter = noise_sd if noise_sd is not None else repeat_scatter(frame)[0]
    parts = []
    for policy, prior in sorted(priors.items()):
        prior.check_out_of_sample(frame)
        usable = [c for c in curves if c.curve.model in prior.by_model]
        if not usable:
            continue
        runs = pd.concat([c.rows for c in usable], ignore_index=True)
        parts.append(residual_table(runs, prior.predict(candidates_of(usable)), dataset, policy, scatter))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(RESIDUAL_COLUMNS))


def _coverage_table(records: list[dict[str, Any]], run: ReplayRun, noisy: bool, confidence: float,
                    quantities: Sequence[str]) -> list[dict[str, Any]]:
    frame = pd.DataFrame(records, columns=["intervals", "quantity", "inside", "width_pct"])
    out = []
    for intervals in (NEXT_RUN, RELIED_ON):
        for quantity in quantities:
            part = frame[(frame["intervals"] == intervals) & (frame["quantity"] == quantity)]
            out.append({"slo_kind": run.slo_kind, "prior": run.prior, "policy": run.policy, "session": run.session,
                        "noisy": noisy, "intervals": intervals, "quantity": quantity, "n_predicted": len(part),
                        "coverage_pct": 100.0 * float(part["inside"].mean()) if len(part) else float("nan"),
                        "mean_width_pct": float(part["width_pct"].mean()) if len(part) else float("nan"),
                        "confidence_pct": 100.0 * confidence})
    return out


def replay_dataset(frame: pd.DataFrame, architectures: ArchitectureLookup, hw: Hardware, epsilon: float,
                   slo_multiplier: float, slo_reference_max_num_seqs: float | None,
                   held_out_settings: list[HeldOutSetting] | None, priors: dict[str, ReplayPrior],
                   options: ReplayOptions = ReplayOptions(), dataset: str = "dataset",
                   ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Every policy on every curve under every SLO kind it can replay, noise-free and under
    `options.seeds` noisy seeds: the replay table (`REPLAY_COLUMNS`), the tuning intervals' coverage
    (`CALIBRATION_COLUMNS`) and one line per kind, policy or curve that could not be replayed, and
    on the noise.

    `priors` maps ``tune_slim`` / ``tune_sim`` to their out-of-sample priors (absent: not replayed);
    each is checked with `ReplayPrior.check_out_of_sample` first, and `options.kernels` must not have
    been fitted on `dataset` (its label)."""
    if dataset in options.kernels.fitted_on:
        raise SplitError(f"the residual kernel was fitted on this dataset ({dataset}); a replay must choose it on "
                         "other datasets only")
    scatter, scatter_source = ((options.noise_sd, f"{100 * options.noise_sd:g}% (configured)")
                               if options.noise_sd is not None else repeat_scatter(frame))
    notes = [f"noise: run-to-run scatter {scatter_source}, {options.seeds} seeds; the reference run that sets "
             "each relative SLO is free for every policy"]
    if options.settings.margin is not None:
        notes.append(f"bound: each tune session spends at most {1 + options.settings.margin:g} x a bisection's GPU "
                     "time on each curve (slim.tune.guard)")
    noises = [RunNoise()] + [RunNoise(scatter, seed) for seed in range(1, options.seeds + 1)]
    for policy, prior in priors.items():
        prior.check_out_of_sample(frame)
    rows, coverage = [], []
    kinds = [e2e_kind(slo_multiplier), *options.slo_kinds]
    for kind in kinds:
        why = why_kind_not_replayed(kind, frame)
        if why is not None:
            notes.append(why)
            continue
        curves, skipped = replay_curves(frame, kind, slo_reference_max_num_seqs)
        notes += [f"{kind.name}: {line}" for line in skipped]
        if not curves:
            if kind.name == E2E_KIND:
                raise SplitError("no measured curve of two caps or more to replay")
            notes.append(f"SLO kind {kind.name}: no curve to replay")
            continue
        binding = {c.label: slo_binds(c, epsilon) for c in curves}
        notes.append(f"SLO kind {kind.name} ({kind.describe()}): binds on {sum(binding.values())} of {len(curves)} "
                     "curves (moves full profiling's choice off the throughput peak)")
        rows += _model_free_rows(curves, kind, noises, epsilon, binding)
        full_caps = {c.label: full_profile_choice(c, epsilon) for c in curves}
        if kind.name == E2E_KIND:
            rows += paper_plan_rows(frame, curves, architectures, hw, epsilon, held_out_settings, full_caps, binding,
                                     notes)
        tuned = [(policy, priors.get(policy), OUT_OF_SAMPLE) for policy in TUNE_POLICIES]
        tuned += [("tune_sim", prior, name) for name, prior in options.adversarial.items()]
        for policy, prior, prior_name in tuned:
            if prior is None:
                if kind.name == E2E_KIND:
                    notes.append(f"{policy}: its prior predictor is not available for this dataset; not replayed")
                continue
            sessions = SESSIONS if kind.name == E2E_KIND and prior_name == OUT_OF_SAMPLE else (PER_WORKLOAD,)
            settings = options.kernels.settings(predictor_of(policy), options.settings)
            if kind.name == E2E_KIND:
                notes += _prior_notes(policy, prior, prior_name, options.kernels)
            usable = [c for c in curves if c.curve.model in prior.by_model]
            for session in sessions:
                groups = [[c] for c in usable] if session == PER_WORKLOAD else [usable] if usable else []
                stopped_open: dict[str, list[str]] = {}
                decisions = 0
                for noisy in (False, True):
                    records = []
                    for noise in (n for n in noises if (n.sd > 0) == noisy):
                        run = ReplayRun(policy, session, noise, kind.name, prior_name)
                        for group in groups:
                            replay = replay_tune(group, prior, run, epsilon, settings, full_caps, binding,
                                                 architectures, hw, scatter)
                            rows += replay.rows
                            records += replay.coverage
                            decisions += len(replay.rows)
                            for label in replay.open_curves:
                                stopped_open.setdefault(replay.stopped, []).append(label)
                    if groups:
                        coverage += _coverage_table(records, ReplayRun(policy, session, RunNoise(), kind.name,
                                                                       prior_name), noisy,
                                                    options.settings.confidence,
                                                    (THROUGHPUT, *dict.fromkeys(m.name for m in kind.metrics),
                                                     *((IN_BATCH_E2E,) if IN_BATCH_E2E not in
                                                       {m.name for m in kind.metrics} else ())))
                for stopped, labels in stopped_open.items():
                    counts = ", ".join(f"{label} ({count})" for label, count in Counter(labels).items())
                    notes.append(f"{policy} ({kind.name}, {prior_name}, {session}): the loop stopped ({stopped}) with "
                                 f"the decision open on {len(labels)} of {decisions} decisions (curve: times): "
                                 f"{counts}")
    table = pd.DataFrame(rows, columns=list(REPLAY_COLUMNS))
    order = {name: i for i, name in enumerate(POLICIES)}
    session_order = {name: i for i, name in enumerate(SESSIONS)}
    kind_order = {kind.name: i for i, kind in enumerate(kinds)}
    prior_order = {name: i for i, name in enumerate([OUT_OF_SAMPLE, *options.adversarial])}
    keys = {"policy": order, "session": session_order, "slo_kind": kind_order, "prior": prior_order}
    table = table.sort_values(["slo_kind", "prior", "curve", "policy", "session", "seed"],
                              key=lambda s: s.map(keys[s.name]) if s.name in keys else s,
                              kind="stable").reset_index(drop=True)
    return table, pd.DataFrame(coverage, columns=list(CALIBRATION_COLUMNS)), notes


def _model_free_rows(curves: list[ReplayCurve], kind: SloKind, noises: list[RunNoise], epsilon: float,
                     binding: dict[str, bool]) -> list[dict[str, Any]]:
    rows = []
    full_caps = {c.label: full_profile_choice(c, epsilon) for c in curves}
    for noise in noises:
        for curve in curves:
            chosen = full_caps[curve.label] if noise.sd == 0 else full_profile_choice(curve, epsilon, noise)
            rows.append(replay_row(curve, ReplayRun("full_profile", PER_WORKLOAD, noise, kind.name), curve.caps,
                                   chosen, full_caps[curve.label], binding[curve.label]))
            for policy in MODEL_FREE_POLICIES:
                caps, chosen = model_free_caps(curve, epsilon, policy, noise)
                rows.append(replay_row(curve, ReplayRun(policy, PER_WORKLOAD, noise, kind.name), caps, chosen,
                                       full_caps[curve.label], binding[curve.label]))
    return rows


def _prior_notes(policy: str, prior: ReplayPrior, prior_name: str, kernels: FittedKernels) -> list[str]:
    notes = [f"{policy} ({prior_name}): residual kernel " + (
        f"fitted on {', '.join(kernels.fitted_on)}" if predictor_of(policy) in kernels.kernels
        else "hand-set (no other real dataset in this run to fit it on)")]
    for model, why in prior.missing.items():
        notes.append(f"{policy} ({prior_name}): {model} not replayed: {why}")
    models_by_source: dict[str, list[str]] = {}
    for model, source in sorted(prior.by_model.items()):
        models_by_source.setdefault(source.description, []).append(model)
    notes.append(f"{policy} ({prior_name}): prior " + "; ".join(f"{description} for {', '.join(models)}"
                                                                 for description, models in models_by_source.items()))
    return notes
