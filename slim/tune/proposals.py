"""Which benchmark `slim tune` runs next: the candidate whose measurement is most useful per
GPU-second, among those the bound admits (`propose`).

**The next measurement.** The chosen cap must be measured anyway, so the next measurement is the
challenger of largest ``P(decision) / predicted GPU-seconds`` (the order that minimises the
expected cost of a search that stops on finding; ``P`` from the belief read as scenarios,
`slim.decision.scenarios.decision_probabilities`). Where no challenger can be the decision (the
incumbent is, but a bound is not yet tight), the challenger of largest ``P(within every SLO and
better than the incumbent by more than the tolerance) / predicted GPU-seconds``; without an
incumbent, ``P(within every SLO) x predicted objective / the workload's best`` per GPU-second. ``P``
comes from the belief's lognormal marginals (a metric nothing predicts counts as met); the
GPU-seconds from the corrected throughput (`slim.tune.belief.predicted_gpu_seconds`). Where only
``T(1)`` keeps a measured cap from being chosen, the smallest cap is proposed. A measured cap whose
SLO metric lies within its run-to-run scatter of the bound, where its side decides (the
certificate's ``repeat``), is run again, up to `TuneSettings.max_runs_per_cap` runs: repeated runs
combine into one measurement of smaller scatter (`Measurement.combined`). A measurement of one
workload's cap updates the belief of every workload. A relative SLO's reference run comes first.

**The bound** (`slim.tune.guard`, with `TuneSettings.margin`): each workload's proposals are those
its cost account admits, the next probe of a shadow bisection or an extra run within the margin;
where none is, it proposes the bisection's next probe, and stops when that is done too.

**With no prior** (a model slim cannot describe: `slim.tune.no_prior`) nothing scores a challenger,
so a workload proposes only what its decision itself asks for (a reference run, a repeat, ``T(1)``)
and the bisection's next probe: it measures what a plain bisection would.

**Across layouts** (`slim.tune.layouts`): only the layouts the decision across layouts leaves open
propose, each proposal's score weighed by its layout's predicted standing, against the account
pooled over the curve's layouts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from slim import columns as col
from slim.decision.candidates import GOODPUT, cap_number
from slim.decision.certificate import Certificate
from slim.decision.scenarios import decision_probabilities, scenario_decisions, scenario_values
from slim.tune.belief import predicted_gpu_seconds
from slim.tune.guard import BisectionOutlook
from slim.tune.layouts import layout_weights, pooled_account
from slim.tune.layouts import open_workloads as layout_open_workloads
from slim.tune.session import TuneSession
from slim.tune.workload import Workload

LIKELY_DECISION_WEIGHT = 1e6
"""A candidate that may be the decision ranks before any measured only to exclude it."""


@dataclass(frozen=True)
class Proposal:
    """The next benchmark: a candidate (row of the candidates table), why, its predicted cost, and
    the most it may spend (`limit_gpu_seconds`, an extra run under the bound; None: no limit)."""

    candidate: int
    workload: str
    max_num_seqs: float
    score: float
    predicted_gpu_seconds: float
    predicted_throughput_per_s: float
    predicted_e2e_latency_s: float
    reason: str
    limit_gpu_seconds: float | None = None
    kind: str = "challenger"
    """What the run is for: ``reference`` (sets a relative SLO), ``repeat``, ``t_one``, ``challenger``
    (could change the decision) or ``probe`` (the bisection's next probe, run to keep to the bound)."""

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "max_num_seqs": cap_number(self.max_num_seqs), "score": self.score,
                "predicted_gpu_seconds": _finite(self.predicted_gpu_seconds),
                "predicted_total_token_throughput": _finite(self.predicted_throughput_per_s),
                "predicted_mean_in_batch_e2e_ms": _finite(1e3 * self.predicted_e2e_latency_s), "reason": self.reason,
                "limit_gpu_seconds": self.limit_gpu_seconds}


def _finite(value: float) -> float | None:
    """A prediction as JSON writes it: None where nothing predicts it."""
    return value if math.isfinite(value) else None



def propose(session: TuneSession) -> list[Proposal]:
    """Every useful next measurement within the bound, best first (module docstring); empty when
    every decision is settled or stopped at the bound."""
    out = []
    gpu_seconds = predicted_gpu_seconds(session.candidates, session.belief.throughput_per_s)
    cautious_seconds = predicted_gpu_seconds(session.candidates, np.maximum(session.belief.throughput_low, 1e-300))
    session.stopped_by_bound.clear()      # every workload's stop is judged anew, on pure certificates
    open_workloads = layout_open_workloads(session)
    weights = layout_weights(session, open_workloads)
    for workload in session.workloads:
        if workload.label not in weights:
            continue      # a layout the decision across layouts excluded, or whose curve is settled
        cert = session.certificate(workload)
        if cert.settled:
            continue
        proposals = _workload_proposals(session, workload, cert, gpu_seconds)
        unpredicted = session.unpredicted(workload)
        if unpredicted:     # nothing scores a challenger: the bisection's order (module docstring)
            proposals = [p for p in proposals if p.kind != "challenger"]
        if weights[workload.label] != 1.0:
            proposals = [replace(p, score=p.score * weights[workload.label]) for p in proposals]
        account = pooled_account(session, workload)
        if account is None:
            if unpredicted and not proposals and session.limits_ms(workload) is not None:
                proposals = _bisection_probe(session, workload, gpu_seconds)
            out += proposals
            continue
        rows = session.rows(workload)
        outlook = _outlook(session, workload, gpu_seconds[rows])
        admitted = []
        limits = session.limits_ms(workload) or {}

        def judged(candidate: int) -> bool:
            # A cap whose runs judge not every SLO is new to the bisection: its first judging run.
            measured = session.measurements.get(candidate)
            return measured is not None and all(name in measured.values() for name in limits)

        for proposal in proposals:
            first = not judged(proposal.candidate)
            position = int(np.flatnonzero(rows == proposal.candidate)[0])
            if account.on_path(position, first):
                admitted.append(proposal)
                continue
            if not account.admits(position, cautious_seconds[proposal.candidate], first):
                continue
            if proposal.kind == "challenger" and not outlook.worth(position):
                continue      # not worth an extra run: following the bisection is expected to cost less
            admitted.append(replace(proposal, limit_gpu_seconds=account.limit_gpu_seconds))
        if not any(account.on_path(int(np.flatnonzero(rows == p.candidate)[0]), not judged(p.candidate))
                   for p in admitted) and account.next_probe is not None:
            probe = int(rows[account.next_probe])
            if probe not in session.failed and not judged(probe):
                why = "no prior: measuring only" if unpredicted else "the bound"
                admitted.append(_proposal(session, probe, workload, 1e-12 / gpu_seconds[probe], gpu_seconds[probe],
                                          f"the bisection's next probe ({why})", "probe"))
        if not admitted:
            session.stopped_by_bound[workload.label] = account.describe()
        out += admitted
    return sorted(out, key=lambda p: (-p.score, p.workload, p.max_num_seqs))


def _bisection_probe(session: TuneSession, workload: Workload, gpu_seconds: np.ndarray) -> list[Proposal]:
    """The bisection's next probe of a workload no prior describes and no bound keeps to it; none when
    the bisection is done."""
    rows = session.rows(workload)
    position = session.bisection(workload).next_probe(session._outcomes(session.limits_ms(workload) or {}, rows))
    if position is None or int(rows[position]) in session.failed:
        return []
    probe = int(rows[position])
    return [_proposal(session, probe, workload, 0.0, gpu_seconds[probe],
                      "the bisection's next probe (no prior: measuring only)", "probe")]


def _outlook(session: TuneSession, workload: Workload, seconds: np.ndarray) -> BisectionOutlook:
    """The bisection's expected remaining cost and what an extra run would leave of it
    (`slim.tune.guard.BisectionOutlook`), over the belief's scenarios: a metric nothing predicts
    counts as met for where the bisection goes, and as not met for the decision (no scenario can
    settle on a cap whose SLO metric only a run can tell)."""
    limits = session.limits_ms(workload) or {}
    rows = session.rows(workload)
    view = session.view(workload, limits)
    shadow = session.bisection(workload)
    within = scenario_values(view)[0]
    outcomes = session._outcomes(limits, rows)
    unknown = np.zeros(len(rows), dtype=bool)
    for c in view.constraints:
        unknown |= ~c.estimates.measured & ~c.estimates.predicted
    if unknown.any():
        # Nothing predicts where a metric only a run can tell stops being met: every largest cap
        # within the SLOs the measurements allow is as likely, one scenario after another.
        allowed = list(shadow.consistent(outcomes))
        for k in range(len(within)):
            cut = allowed[k % len(allowed)]
            within[k, np.arange(len(rows)) > cut] &= ~unknown[np.arange(len(rows)) > cut]
    for position, ok in outcomes.items():
        within[:, position] = ok
    return BisectionOutlook(shadow, within, set(outcomes), scenario_decisions(view, workload.epsilon, False),
                            seconds)

def _workload_proposals(session: TuneSession, workload: Workload, cert: Certificate,
                    gpu_seconds: np.ndarray) -> list[Proposal]:
    from scipy.stats import norm

    rows = session.rows(workload)
    limits = session.limits_ms(workload)
    if limits is None:
        reference = session.reference_row(workload)
        if reference in session.failed:
            return []
        return [_proposal(session, reference, workload, float("inf"), gpu_seconds[reference],
                          "defines the SLO (reference run)", "reference")]
    out = []
    open_rows = [i for i in rows if i not in session.failed and not session.complete(workload, i)]
    view = session.view(workload, limits)
    for position, cap in enumerate(view.caps):
        if cap in cert.repeat:
            i = int(rows[position])
            wrong_side = max((norm.cdf(-abs(np.log(c.estimates.value[position] / c.limit_ms))
                                       / max(c.estimates.log_sd[position], 1e-12))
                              for c in view.constraints if c.estimates.measured[position]), default=0.0)
            out.append(_proposal(session, i, workload, LIKELY_DECISION_WEIGHT * wrong_side / gpu_seconds[i],
                                 gpu_seconds[i], "an SLO metric measured within the run-to-run scatter of "
                                 f"its bound: run {session.runs_of(i) + 1} of it", "repeat"))
    if cert.needs_throughput_at_one:
        one = int(rows[0])
        if one in open_rows:
            out.append(_proposal(session, one, workload, 1.0 / gpu_seconds[one], gpu_seconds[one],
                                 "T(1) decides the efficiency floor", "t_one"))
    challengers = [i for i in open_rows if float(session.candidates.at[i, col.MAX_NUM_SEQS]) in cert.challengers]
    chosen = dict(zip(rows.tolist(), decision_probabilities(view, workload.epsilon)))
    if any(chosen[i] > 0 for i in challengers):
        for i in challengers:
            reason = (f"may be the decision (P = {chosen[i]:.2f})" if chosen[i] >= 0.005 else
                      "may be the decision (P < 0.01)" if chosen[i] > 0 else
                      "could still beat the choice (its interval reaches above it)")
            out.append(_proposal(session, i, workload, LIKELY_DECISION_WEIGHT * chosen[i] / gpu_seconds[i],
                                 gpu_seconds[i], reason + _unjudged_note(session, workload, i)))
        return out
    goal = view.goal
    best_predicted = max(np.nanmax(np.where(np.isfinite(goal.point()), goal.point(), 0.0)), 1e-300)
    for i in challengers:
        position = int(np.flatnonzero(rows == i)[0])
        p_slo = 1.0
        for c in view.constraints:
            e = c.estimates
            if e.measured[position] or not np.isfinite(e.mean[position]):
                continue
            p_slo *= norm.cdf((np.log(c.limit_ms) - np.log(e.mean[position])) / max(e.log_sd[position], 1e-12))
        if cert.feasible:
            target = np.log(cert.objective * (1.0 + session.settings.tolerance))
            centre = goal.point()[position]
            sd = 0.0 if goal.measured[position] else goal.log_sd[position]
            p_gain = (float(centre > np.exp(target)) if sd == 0 or not np.isfinite(centre)
                      else norm.sf((target - np.log(centre)) / max(sd, 1e-12)))
            value, reason = p_slo * p_gain, "could beat the incumbent"
        else:
            centre = goal.point()[position]
            value = p_slo * (centre / best_predicted if np.isfinite(centre) else 1.0)
            reason = "could be the first cap within the SLOs"
        out.append(_proposal(session, i, workload, float(value) / gpu_seconds[i], gpu_seconds[i],
                             reason + _unjudged_note(session, workload, i)))
    return out

def _unjudged_note(session: TuneSession, workload: Workload, candidate: int) -> str:
    measurement = session.measurements.get(candidate)
    if measurement is None:
        return ""
    values = measurement.values()
    missing = [m.name for m in workload.slos.metrics if m.name not in values]
    if workload.slos.goodput is not None and GOODPUT not in values:
        missing.append(GOODPUT)
    return f"; its runs so far do not judge {', '.join(missing)}" if missing else ""

def _proposal(session: TuneSession, i: int, workload: Workload, score: float, seconds: float, reason: str,
          kind: str = "challenger") -> Proposal:
    b = session.belief
    # With no prior nothing predicts a run's cost, so nothing scores it: it ranks after every scored one.
    score = 0.0 if math.isnan(score) else score
    return Proposal(int(i), workload.label, float(session.candidates.at[i, col.MAX_NUM_SEQS]), float(score),
                    float(seconds), float(b.throughput_per_s[i]), float(b.e2e_latency_s[i]), reason, kind=kind)


def select_proposals(proposals: Sequence[Proposal], limit: int) -> list[Proposal]:
    """The best proposal of each open workload, best first, at most `limit`."""
    chosen, seen = [], set()
    for proposal in proposals:
        if proposal.workload in seen:
            continue
        seen.add(proposal.workload)
        chosen.append(proposal)
    return chosen[:limit]
