"""`slim tune`'s state: what is measured and believed of every candidate cap of some workloads, and
each workload's decision on it (the one decision of `slim.decision`: Eq. 13, its certificate).

A `TuneSession` keeps the measurements (repeated runs of a cap combined, `slim.tune.measurement`),
the failed runs and what each workload spent; its belief is the prior corrected by every measured
run (`slim.tune.belief`). Each workload's SLO bounds are resolved once (`slim.decision.slo_limits`):
a relative bound waits for the reference run, and where that run failed it rests on the belief's
prediction at the reference cap, said so in the certificate's notes. The bound on what the session
spends is `slim.tune.guard`'s; which run comes next is `slim.tune.proposals`', and the loop is
`slim.tune.loop`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.decision.candidates import (
    DEFAULT_TOLERANCE,
    GOODPUT,
    THROUGHPUT,
    CandidateView,
    Estimates,
    candidate_view,
)
from slim.decision.certificate import Certificate, best_measured, certify, pending
from slim.decision.rule import Recommendation, recommend
from slim.decision.scenarios import decision_probabilities
from slim.decision.slo_limits import ResolvedLimits, resolve_limits
from slim.defaults import DEFAULT_CONFIDENCE, DEFAULT_MAX_RUNS_PER_CAP
from slim.errors import AdvisorError
from slim.tune.belief import (
    Belief,
    LayoutUncertainty,
    PriorPrediction,
    ResidualKernel,
    belief,
    conformal_multiplier,
    is_static_batch,
)
from slim.tune.guard import CostAccount, ShadowBisection, cost_account
from slim.tune.measurement import Measurement
from slim.tune.workload import WORKLOAD, Workload

CONTRADICTION_CONFIDENCE = 0.99
"""A measurement contradicts the prior when it lies outside the interval the session held before
any run, at this confidence (at the bounds' 90 % one run in ten would, by chance alone)."""


@dataclass(frozen=True)
class TuneSettings:
    """The confidence of each bound, the tolerance of the certificate, the residual kernel and its
    out-of-sample extrapolation scores (`slim.tune.kernel.extrapolation_scores`: what the intervals'
    multiplier falls back on while the session has too few scores of its own), how many runs of one
    cap a measurement within the noise of an SLO may take (1: never repeat), and the bound's margin
    over a bisection (`slim.tune.guard`; None: no bound), and the belief's terms across layouts."""

    confidence: float = DEFAULT_CONFIDENCE
    tolerance: float = DEFAULT_TOLERANCE
    kernel: ResidualKernel = ResidualKernel()
    extrapolation_scores: tuple[float, ...] = ()
    max_runs_per_cap: int = DEFAULT_MAX_RUNS_PER_CAP
    margin: float | None = None
    layouts: LayoutUncertainty | None = None
    """The residual's terms across tensor-parallel sizes (`slim.tune.belief.LayoutUncertainty`), where
    the session decides across layouts; None: the prior's scaling across sizes is not questioned."""


@dataclass(frozen=True)
class Learned:
    """What a workload's own measurements say of the prior on this accelerator: the measured
    throughput over the prior's (geometric mean), its trend per doubling of the cap, how many of them
    fell outside the prior's own interval, and so whether the session leans on measurement."""

    throughput_ratio: float
    trend_per_doubling: float
    outside: int
    measured: int

    @property
    def contradicted(self) -> bool:
        return self.outside > 0

    def describe(self) -> str:
        if not self.measured:
            return "no run of it measured yet"
        trend = (f", {100 * (math.exp(self.trend_per_doubling) - 1):+.0f}% per doubling of the cap"
                 if np.isfinite(self.trend_per_doubling) else "")
        text = f"measured throughput x{self.throughput_ratio:.2f} the prior's{trend}"
        if self.contradicted:
            text += (f"; {self.outside} of {self.measured} measurement(s) outside the prior's interval: leaning on "
                     "measurement (the bisection's order, no model-chosen runs)")
        return text


@dataclass
class TuneSession:
    """What is measured and believed about every candidate of some workloads.

    `candidates` holds one row per (workload, cap) with `slim.tune.belief.CONFIG_COLUMNS` and
    `WORKLOAD`; a workload's smallest candidate (best: cap 1) gives ``T(1)``. Rows of a `WORKLOAD`
    that is not among `workloads` are context: runs measured for other curves, which inform the
    belief but are not decided. `prior` is the prior predictor's prediction of those rows, of
    throughput and every quantity the workloads' SLOs name (computed once: the prior is not
    refitted)."""

    workloads: Sequence[Workload]
    candidates: pd.DataFrame
    prior: PriorPrediction
    settings: TuneSettings = TuneSettings()
    measurements: dict[int, Measurement] = field(default_factory=dict)
    first_runs: dict[int, Measurement] = field(default_factory=dict)
    failed: set[int] = field(default_factory=set)
    spent: dict[int, float] = field(default_factory=dict)
    stopped_by_bound: dict[str, str] = field(default_factory=dict)
    """The workloads the bound stopped at the last round of proposals (label: why), no run of theirs left
    within it: their certificate gives the best measured cap (`slim.decision.certificate.best_measured`)."""
    run_floor_gpu_seconds: np.ndarray | None = None
    """Per candidate, a lower bound of one run's GPU time (the accelerator's roofline:
    `slim.tune.belief.roofline_gpu_seconds`), which the bound's lower bound of a bisection rests on."""
    _belief: Belief | None = None
    _rows: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.candidates = self.candidates.reset_index(drop=True)
        for workload in self.workloads:
            if not (self.candidates[WORKLOAD] == workload.label).any():
                raise AdvisorError(f"workload {workload.label} has no candidate cap")
            missing = [m.name for m in workload.slos.metrics if m.name not in self.prior.values]
            if missing or (workload.slos.goodput is not None and GOODPUT not in self.prior.values):
                raise AdvisorError(f"workload {workload.label}: the prior has no prediction (not even NaN) of "
                                   f"{', '.join(missing or [GOODPUT])}; predict every quantity the SLOs name")

    # --- what is measured ---------------------------------------------------------------
    def record(self, candidate: int, measurement: Measurement | None, gpu_seconds: float = 0.0) -> None:
        """A candidate's run: usable (a measurement, combined with the candidate's earlier runs) or
        failed (None, never proposed again; `gpu_seconds` what it cost all the same)."""
        if measurement is None or not measurement.usable:
            if candidate not in self.measurements:
                self.failed.add(candidate)
            self.spent[candidate] = self.spent.get(candidate, 0.0) + (
                gpu_seconds if measurement is None else measurement.charged_gpu_seconds)
            self._belief = None
            return
        self.spent[candidate] = self.spent.get(candidate, 0.0) + measurement.charged_gpu_seconds
        if candidate in self.measurements:
            self.measurements[candidate] = self.measurements[candidate].combined(measurement)
        else:
            self.measurements[candidate] = measurement
            self.first_runs[candidate] = measurement
        self._belief = None

    def runs_of(self, candidate: int) -> int:
        """How many usable runs a candidate's measurement averages (0: not measured)."""
        measurement = self.measurements.get(candidate)
        return measurement.runs if measurement is not None else 0

    @property
    def belief(self) -> Belief:
        if self._belief is None:
            measured: dict[str, dict[int, float]] = {}
            for index, measurement in sorted(self.measurements.items()):
                for name, value in measurement.values().items():
                    measured.setdefault(name, {})[index] = value
            self._belief = belief(self.candidates, self.prior, measured,
                                  {i: m.scatter for i, m in self.measurements.items()}, self.settings.confidence,
                                  self.settings.kernel, self.settings.extrapolation_scores,
                                  {i: m.runs for i, m in self.measurements.items()}, self.settings.layouts)
        return self._belief

    # --- decisions ------------------------------------------------------------------------
    def rows(self, workload: Workload) -> np.ndarray:
        """The candidates of `workload`, ascending by cap."""
        if workload.label not in self._rows:
            rows = np.flatnonzero((self.candidates[WORKLOAD] == workload.label).to_numpy())
            caps = self.candidates[col.MAX_NUM_SEQS].to_numpy(dtype=float)[rows]
            self._rows[workload.label] = rows[np.argsort(caps, kind="stable")]
        return self._rows[workload.label]

    def caps(self, workload: Workload) -> np.ndarray:
        return self.candidates[col.MAX_NUM_SEQS].to_numpy(dtype=float)[self.rows(workload)]

    def _estimates(self, name: str, rows: np.ndarray) -> Estimates:
        q = self.belief[name]
        measured = q.measured[rows]
        return Estimates(measured, np.where(measured, q.mean[rows], np.nan), q.mean[rows], q.low[rows], q.high[rows],
                         q.log_sd[rows])

    def reference_row(self, workload: Workload) -> int:
        rows = self.rows(workload)
        match = rows[self.caps(workload) == workload.slos.reference_cap]
        if not match.size:
            raise AdvisorError(f"workload {workload.label}: the SLO's reference cap {workload.slos.reference_cap:g} "
                               "is not a candidate")
        return int(match[0])

    def resolved_limits(self, workload: Workload) -> ResolvedLimits:
        """Each SLO's bound (`slim.decision.slo_limits.resolve_limits`): a relative one at the reference
        run's measurement, or, where that run was tried and failed, at the belief's prediction there."""
        measured = predicted = None
        if workload.slos.relative:
            reference = self.reference_row(workload)
            measurement = self.measurements.get(reference)
            if measurement is not None:
                measured = measurement.values()
            elif reference in self.failed:
                predicted = {name: float(q.mean[reference]) for name, q in self.belief.quantities.items()}
        return resolve_limits(workload.slos, measured, predicted)

    def limits_ms(self, workload: Workload) -> dict[str, float] | None:
        """Each SLO's bound (ms); None while a relative one waits for its reference run."""
        return self.resolved_limits(workload).limits_ms

    def reference_failed(self, workload: Workload) -> bool:
        """Whether a relative SLO's reference run was tried and gave no usable run."""
        if not workload.slos.relative:
            return False
        reference = self.reference_row(workload)
        return reference in self.failed and reference not in self.measurements

    def view(self, workload: Workload, limits_ms: Mapping[str, float] | None = None) -> CandidateView:
        """The workload's candidates as the decision judges them (`slim.decision.candidates.candidate_view`):
        the measurements where measured, the belief elsewhere; a bound not resolved yet is NaN."""
        rows = self.rows(workload)
        limits = limits_ms if limits_ms is not None else (self.limits_ms(workload) or {})
        bounds = {bound.metric.name: limits.get(bound.metric.name, math.nan) for bound in workload.slos.bounds}
        return candidate_view(self.candidates[col.MAX_NUM_SEQS].to_numpy(dtype=float)[rows],
                              lambda name: self._estimates(name, rows), bounds,
                              goodput=workload.slos.goodput is not None,
                              failed=[i in self.failed and i not in self.measurements for i in rows],
                              repeatable=[self.runs_of(i) < self.settings.max_runs_per_cap for i in rows])

    def certificate(self, workload: Workload) -> Certificate:
        from scipy.stats import norm

        resolved = self.resolved_limits(workload)
        if resolved.limits_ms is None:
            return pending({}, workload.epsilon, self.settings.tolerance,
                           f"the SLO waits for the reference run at cap {workload.slos.reference_cap:g}")
        view = self.view(workload, resolved.limits_ms)
        certificate = certify(view, workload.epsilon, self.settings.tolerance,
                              float(norm.ppf(self.settings.confidence)))
        if workload.label in self.stopped_by_bound:     # no run left within the bound: the best measured cap
            certificate = best_measured(certificate, view, "stopped at the bound")
        if resolved.predicted:
            note = (f"the reference run at cap {workload.slos.reference_cap:g} failed: the bound of "
                    f"{', '.join(resolved.predicted)} rests on the prediction there until it is measured "
                    "(--retry-failed runs it again; --slo-reference-cap names another reference cap; an absolute "
                    "--slo NAME=MS needs none)")
            certificate = replace(certificate, notes=(*certificate.notes, note))
        return certificate

    def certificates(self) -> dict[str, Certificate]:
        return {w.label: self.certificate(w) for w in self.workloads}

    def recommendation(self, workload: Workload) -> Recommendation | None:
        """Eq. 13 on the measurements and the belief's means (`slim.decision.rule.recommend`): the
        cap `slim tune` would serve now; None while an SLO waits for its reference run."""
        limits = self.limits_ms(workload)
        if limits is None:
            return None
        return recommend(self.view(workload, limits), workload.epsilon)

    def decision_probabilities(self, workload: Workload) -> np.ndarray:
        """Per candidate of `workload` (ascending cap): the probability that Eq. 13 chooses it once
        every candidate is known (`slim.decision.scenarios.decision_probabilities`)."""
        return decision_probabilities(self.view(workload), workload.epsilon)

    # --- what the runs say of the prior, and the bound ------------------------------------------------
    def learned(self, workload: Workload) -> Learned:
        """`Learned` from the workload's measured candidates: residuals against the prior, and how many
        lie outside the interval the session held before any run (the kernel's prior variance at the
        out-of-sample multiplier of `CONTRADICTION_CONFIDENCE`)."""
        rows = [i for i in self.rows(workload) if i in self.measurements]
        kernel = self.settings.kernel
        multiplier = conformal_multiplier(np.zeros(0), CONTRADICTION_CONFIDENCE, self.settings.extrapolation_scores)
        outside = 0
        residuals, caps = [], []
        layouts = self.settings.layouts
        across = (layouts.variance(layouts.coordinates(self.candidates)) if layouts is not None
                  else np.zeros(len(self.candidates)))
        for i in rows:
            measurement = self.measurements[i]
            half = multiplier * float(np.sqrt(kernel.variance(kernel.coordinates(self.candidates.iloc[[i]]))[0]
                                              + across[i] + measurement.log_sd ** 2))
            beyond = False
            for name, value in measurement.values().items():
                prior = self.prior.values.get(name)
                if prior is None or not np.isfinite(prior[i]):
                    continue
                residual = math.log(value / prior[i])
                beyond |= abs(residual) > half
                if name == THROUGHPUT:
                    residuals.append(residual)
                    caps.append(math.log2(float(self.candidates.at[i, col.MAX_NUM_SEQS])))
            outside += int(beyond)
        if not residuals:
            return Learned(math.nan, math.nan, outside, len(rows))
        trend = float(np.polyfit(caps, residuals, 1)[0]) if len(set(caps)) > 1 else math.nan
        return Learned(float(math.exp(np.mean(residuals))), trend, outside, len(rows))

    def _outcomes(self, limits: Mapping[str, float], rows: np.ndarray) -> dict[int, bool]:
        """Per position of `rows`: whether its first run met every SLO (as a bisection would have seen
        it), where it judged them all."""
        outcomes = {}
        for position, i in enumerate(rows):
            first = self.first_runs.get(int(i))
            if first is None:
                if int(i) in self.failed:
                    # A run that failed (a crash, no memory) is over the SLOs to a bisection.
                    outcomes[position] = False
                continue
            values = first.values()
            if not all(name in values for name in limits):
                # A first run that could not judge a metric (TTFT of an all-at-once run): the bisection
                # sees the cap when a run judges them all.
                values = self.measurements[int(i)].values()
            if all(name in values for name in limits):
                outcomes[position] = all(values[name] <= limit for name, limit in limits.items())
        return outcomes

    def account(self, workload: Workload) -> CostAccount | None:
        """The workload's spending against the bound (`slim.tune.guard`); None without a margin or while
        an SLO waits for its reference run."""
        limits = self.limits_ms(workload)
        if self.settings.margin is None or limits is None:
            return None
        rows = self.rows(workload)
        caps = self.candidates[col.MAX_NUM_SEQS].to_numpy(dtype=float)[rows]
        facts = {position: (self.first_runs[int(i)].gpu_seconds, self.first_runs[int(i)].scatter)
                 for position, i in enumerate(rows) if int(i) in self.first_runs}
        first_charged = {position: self.first_runs[int(i)].charged_gpu_seconds
                         for position, i in enumerate(rows) if int(i) in self.first_runs}
        roofline = (np.zeros(len(rows)) if self.run_floor_gpu_seconds is None
                    else np.asarray(self.run_floor_gpu_seconds, dtype=float)[rows])
        return cost_account(self.bisection(workload), caps, self._outcomes(limits, rows), first_charged,
                            float(sum(self.spent.get(int(i), 0.0) for i in rows)), facts, roofline,
                            bool(is_static_batch(self.candidates.iloc[rows[:1]])[0]), self.settings.margin,
                            self.learned(workload).contradicted)

    def bisection(self, workload: Workload) -> ShadowBisection:
        """The bisection the bound follows on this workload: from the cap known to meet the SLOs (a
        relative SLO's reference, unless its run failed), else from nothing known."""
        caps = self.caps(workload)
        start = None if self.reference_failed(workload) else workload.bisection_start
        return ShadowBisection(len(caps), int(np.flatnonzero(caps == start)[0])
                               if start is not None and (caps == start).any() else None)

    def unpredicted(self, workload: Workload) -> bool:
        """Whether no prior describes the workload's model (`PriorPrediction.no_prior`): it is tuned by
        measurement alone."""
        return self.prior.no_prior is not None and bool(self.prior.no_prior[self.rows(workload)].all())

    def complete(self, workload: Workload, candidate: int) -> bool:
        """Whether a candidate's runs judged throughput and every quantity of the workload's SLOs."""
        measurement = self.measurements.get(candidate)
        if measurement is None:
            return False
        values = measurement.values()
        needed = [m.name for m in workload.slos.metrics] + ([GOODPUT] if workload.slos.goodput is not None else [])
        return all(name in values for name in needed)
