"""`slim tune` as a library call: measure only what the batch-cap decision needs.

For a list of workloads (model, IL, OL, each with its SLOs: `slim.specs.slo`) over candidate caps,
`TuneSession` keeps what is measured, believes the rest (`slim.tune.belief`: a prior predictor
corrected by the measured runs' residuals, with conformal intervals, for throughput and every SLO
metric), decides each workload (`slim.advisor.decision`: the recommendation and its certificate)
and, while some decision is open, proposes the next measurement:

**The next measurement.** The chosen cap must be measured anyway, so the next measurement is the
challenger of largest ``P(decision) / predicted GPU-seconds`` (the order that minimises the
expected cost of a search that stops on finding; ``P`` from the belief read as scenarios,
`slim.advisor.decision.decision_probabilities`). Where no challenger can be the decision (the
incumbent is, but a bound is not yet tight), the challenger of largest ``P(within every SLO and
better than the incumbent by more than the tolerance) / predicted GPU-seconds``; without an
incumbent, ``P(within every SLO) x predicted objective / the workload's best`` per GPU-second. ``P``
comes from the belief's lognormal marginals (a metric nothing predicts counts as met); the
GPU-seconds from the corrected throughput (`slim.tune.belief.predicted_gpu_seconds`). Where only
``T(1)`` keeps a measured cap from being chosen, the smallest cap is proposed. A measured cap whose
SLO metric lies within its run-to-run scatter of the bound, where its side decides (the
certificate's ``repeat``), is run again, up to `TuneSettings.max_runs_per_cap` runs: repeated runs
combine into one measurement of smaller scatter (`Measurement.combined`). A measurement of one
workload's cap updates the belief of every workload.

**The bound** (`slim.tune.guard`, with `TuneSettings.margin`): each workload's proposals are those
its cost account admits, the next probe of a shadow bisection or an extra run within the margin;
where none is, it proposes the bisection's next probe, and stops when that is done too.

`run_loop` repeats propose, measure (a callback: an oracle replaying recorded runs, or a real
benchmark through `slim.tune.runner`) and update until every decision is settled, no proposal is
left, or a budget of runs or GPU-seconds is spent. A failed measurement is recorded and never
proposed again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm

from slim import columns as col
from slim.advisor.bca import DEFAULT_EPSILON
from slim.advisor.decision import (
    DEFAULT_TOLERANCE,
    GOODPUT,
    CandidateView,
    Certificate,
    Constraint,
    Estimates,
    Recommendation,
    certify,
    decision_probabilities,
    pending,
    recommend,
    scenario_decisions,
    scenario_values,
)
from slim.defaults import DEFAULT_CONFIDENCE, DEFAULT_MAX_RUNS_PER_CAP
from slim.errors import AdvisorError
from slim.specs.slo import IN_BATCH_E2E, SloBound, SloMetric, Slos
from slim.tune.belief import (
    THROUGHPUT,
    Belief,
    PriorPrediction,
    ResidualKernel,
    belief,
    conformal_multiplier,
    is_static_batch,
    predicted_gpu_seconds,
)
from slim.tune.guard import BisectionOutlook, CostAccount, ShadowBisection, cost_account

DEFAULT_SCATTER = 0.02
"""Run-to-run scatter (relative, one standard deviation) of a run measured once."""

WORKLOAD = "workload"   # column of the candidates table: which workload a candidate belongs to
LIKELY_DECISION_WEIGHT = 1e6
"""A candidate that may be the decision ranks before any measured only to exclude it."""
CONTRADICTION_CONFIDENCE = 0.99
"""A measurement contradicts the prior when it lies outside the interval the session held before
any run, at this confidence (at the bounds' 90 % one run in ten would, by chance alone)."""


@dataclass(frozen=True)
class Workload:
    """One decision: a model at nominal lengths, its SLOs (relative ones against the measured cap
    `Slos.reference_cap` of this workload, which is then the first run to measure) and its
    efficiency floor."""

    model: str
    input_len: float
    output_len: float
    slos: Slos
    epsilon: float = DEFAULT_EPSILON
    known_cap: float | None = None
    """A cap known to meet every SLO without a run of the session's (the free reference run that set
    them), where the bound's bisection starts; a relative SLO's reference cap is one by itself."""

    @property
    def bisection_start(self) -> float | None:
        return self.known_cap if self.known_cap is not None else (
            self.slos.reference_cap if self.slos.relative else None)

    @classmethod
    def in_batch(cls, model: str, input_len: float, output_len: float, slo_s: float | None = None,
                 epsilon: float = DEFAULT_EPSILON, multiplier: float | None = None,
                 reference_cap: float = 1.0) -> Workload:
        """A workload whose one SLO is the paper's: the in-batch E2E at most `slo_s` seconds, or
        `multiplier` times its measured value at `reference_cap`."""
        metric = SloMetric.parse(IN_BATCH_E2E)
        bound = (SloBound(metric, limit_ms=1e3 * slo_s) if slo_s is not None and np.isfinite(slo_s)
                 else SloBound(metric, multiplier=multiplier))
        if bound.limit_ms is None and (multiplier is None or multiplier <= 0):
            raise AdvisorError(f"workload {model}: give an SLO in seconds, or a multiplier > 0 of the E2E at a "
                               "reference cap")
        return cls(model, input_len, output_len, Slos((bound,), reference_cap=float(reference_cap)), epsilon)

    @property
    def label(self) -> str:
        return f"{self.model} IL {self.input_len:g} OL {self.output_len:g}"


@dataclass(frozen=True)
class Measurement:
    """Usable runs of one configuration: total-token throughput and in-batch E2E latency (their
    geometric mean over `runs` runs), the latency statistics they judge (`latencies_ms`, vLLM's names:
    the SLO metrics of `slim.specs.slo` the runs can judge), the goodput where measured, the
    GPU-seconds they took (`charged`: counted against the session; False for a run it was given,
    such as the reference run that sets an SLO), and one run's run-to-run scatter."""

    throughput_per_s: float
    e2e_latency_s: float
    gpu_seconds: float
    scatter: float = DEFAULT_SCATTER
    runs: int = 1
    latencies_ms: Mapping[str, float] = field(default_factory=dict)
    goodput_per_s: float = math.nan
    charged: bool = True

    @property
    def log_sd(self) -> float:
        """Standard deviation of the mean's log: one run's scatter over the root of the runs."""
        return self.scatter / float(np.sqrt(self.runs))

    @property
    def usable(self) -> bool:
        return bool(np.isfinite(self.throughput_per_s) and self.throughput_per_s > 0
                    and np.isfinite(self.e2e_latency_s) and self.e2e_latency_s > 0)

    @property
    def charged_gpu_seconds(self) -> float:
        return self.gpu_seconds if self.charged else 0.0

    def values(self) -> dict[str, float]:
        """Every quantity this measurement judges, by name (`slim.tune.belief.THROUGHPUT`, the SLO
        metrics, `GOODPUT`)."""
        out = {THROUGHPUT: self.throughput_per_s, IN_BATCH_E2E: 1e3 * self.e2e_latency_s}
        out.update({name: float(value) for name, value in self.latencies_ms.items()
                    if np.isfinite(value) and value > 0})
        if np.isfinite(self.goodput_per_s) and self.goodput_per_s > 0:
            out[GOODPUT] = self.goodput_per_s
        return out

    def combined(self, other: Measurement) -> Measurement:
        """This measurement and `other` (more runs of the same configuration) as one: geometric means
        weighted by runs, of each quantity over the measurements that judge it."""
        runs = self.runs + other.runs

        def mean(a: float, b: float, wa: int, wb: int) -> float:
            if not (np.isfinite(a) and a > 0):
                return b
            if not (np.isfinite(b) and b > 0):
                return a
            return float(np.exp((wa * np.log(a) + wb * np.log(b)) / (wa + wb)))

        latencies = {name: mean(self.latencies_ms.get(name, math.nan), other.latencies_ms.get(name, math.nan),
                                self.runs, other.runs) for name in {*self.latencies_ms, *other.latencies_ms}}
        return Measurement(mean(self.throughput_per_s, other.throughput_per_s, self.runs, other.runs),
                           mean(self.e2e_latency_s, other.e2e_latency_s, self.runs, other.runs),
                           self.charged_gpu_seconds + other.charged_gpu_seconds, max(self.scatter, other.scatter), runs,
                           dict(sorted(latencies.items())),
                           mean(self.goodput_per_s, other.goodput_per_s, self.runs, other.runs),
                           charged=True)


@dataclass(frozen=True)
class Unusable:
    """A run that gave no usable result: the GPU-seconds it took all the same, and where to look."""

    gpu_seconds: float = 0.0
    hint: str = ""


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
        return {"workload": self.workload, "max_num_seqs": self.max_num_seqs, "score": self.score,
                "predicted_gpu_seconds": self.predicted_gpu_seconds,
                "predicted_total_token_throughput": self.predicted_throughput_per_s,
                "predicted_mean_in_batch_e2e_ms": 1e3 * self.predicted_e2e_latency_s, "reason": self.reason,
                "limit_gpu_seconds": self.limit_gpu_seconds}


@dataclass(frozen=True)
class TuneSettings:
    """The confidence of each bound, the tolerance of the certificate, the residual kernel and its
    out-of-sample extrapolation scores (`slim.tune.kernel.extrapolation_scores`: what the intervals'
    multiplier falls back on while the session has too few scores of its own), how many runs of one
    cap a measurement within the noise of an SLO may take (1: never repeat), and the bound's margin
    over a bisection (`slim.tune.guard`; None: no bound)."""

    confidence: float = DEFAULT_CONFIDENCE
    tolerance: float = DEFAULT_TOLERANCE
    kernel: ResidualKernel = ResidualKernel()
    extrapolation_scores: tuple[float, ...] = ()
    max_runs_per_cap: int = DEFAULT_MAX_RUNS_PER_CAP
    margin: float | None = None


def curve_label(frame: pd.DataFrame) -> pd.Series:
    """`Workload.label` of every row of a runs or candidates table."""
    return (frame[col.MODEL].astype(str) + " IL " + frame[col.INPUT_LEN_NOMINAL].map("{:g}".format) + " OL "
            + frame[col.OUTPUT_LEN_NOMINAL].map("{:g}".format))


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
                                  {i: m.runs for i, m in self.measurements.items()})
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

    def limits_ms(self, workload: Workload) -> dict[str, float] | None:
        """Each SLO's bound (ms); None while a relative one waits for its reference run."""
        limits = {}
        reference = None
        if workload.slos.relative:
            measurement = self.measurements.get(self.reference_row(workload))
            if measurement is None:
                return None
            reference = measurement.values()
        for bound in workload.slos.bounds:
            if bound.relative:
                value = reference.get(bound.metric.name) if reference is not None else None
                if value is None:
                    return None
                limits[bound.metric.name] = bound.limit(value)
            else:
                limits[bound.metric.name] = bound.limit()
        return limits

    def view(self, workload: Workload, limits_ms: Mapping[str, float] | None = None) -> CandidateView:
        rows = self.rows(workload)
        limits = limits_ms if limits_ms is not None else (self.limits_ms(workload) or {})
        constraints = tuple(Constraint(bound.metric.name, float(limits.get(bound.metric.name, math.nan)),
                                       self._estimates(bound.metric.name, rows)) for bound in workload.slos.bounds)
        return CandidateView(
            caps=self.candidates[col.MAX_NUM_SEQS].to_numpy(dtype=float)[rows],
            failed=np.array([i in self.failed and i not in self.measurements for i in rows]),
            throughput=self._estimates(THROUGHPUT, rows), constraints=constraints,
            objective=self._estimates(GOODPUT, rows) if workload.slos.goodput is not None else None,
            repeatable=np.array([self.runs_of(i) < self.settings.max_runs_per_cap for i in rows]))

    def certificate(self, workload: Workload) -> Certificate:
        limits = self.limits_ms(workload)
        if limits is None:
            return pending({}, workload.epsilon, self.settings.tolerance,
                           f"the SLO waits for the reference run at cap {workload.slos.reference_cap:g}")
        return certify(self.view(workload, limits), workload.epsilon, self.settings.tolerance,
                       float(norm.ppf(self.settings.confidence)))

    def certificates(self) -> dict[str, Certificate]:
        return {w.label: self.certificate(w) for w in self.workloads}

    def recommendation(self, workload: Workload) -> Recommendation | None:
        """Eq. 13 on the measurements and the belief's means (`slim.advisor.decision.recommend`): the
        cap `slim tune` would serve now; None while an SLO waits for its reference run."""
        limits = self.limits_ms(workload)
        if limits is None:
            return None
        return recommend(self.view(workload, limits), workload.epsilon)

    def decision_probabilities(self, workload: Workload) -> np.ndarray:
        """Per candidate of `workload` (ascending cap): the probability that Eq. 13 chooses it once
        every candidate is known (`slim.advisor.decision.decision_probabilities`)."""
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
        for i in rows:
            measurement = self.measurements[i]
            half = multiplier * float(np.sqrt(kernel.variance(kernel.coordinates(self.candidates.iloc[[i]]))[0]
                                              + measurement.log_sd ** 2))
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
        start = workload.bisection_start
        reference = int(np.flatnonzero(caps == start)[0]) if start is not None and (caps == start).any() else None
        facts = {position: (self.first_runs[int(i)].gpu_seconds, self.first_runs[int(i)].scatter)
                 for position, i in enumerate(rows) if int(i) in self.first_runs}
        first_charged = {position: self.first_runs[int(i)].charged_gpu_seconds
                         for position, i in enumerate(rows) if int(i) in self.first_runs}
        roofline = (np.zeros(len(rows)) if self.run_floor_gpu_seconds is None
                    else np.asarray(self.run_floor_gpu_seconds, dtype=float)[rows])
        return cost_account(ShadowBisection(len(rows), reference), caps, self._outcomes(limits, rows), first_charged,
                            float(sum(self.spent.get(int(i), 0.0) for i in rows)), facts, roofline,
                            bool(is_static_batch(self.candidates.iloc[rows[:1]])[0]), self.settings.margin,
                            self.learned(workload).contradicted)

    # --- the next measurement -------------------------------------------------------------
    def proposals(self) -> list[Proposal]:
        """Every useful next measurement within the bound, best first (module docstring); empty when
        every decision is settled or stopped at the bound."""
        out = []
        gpu_seconds = predicted_gpu_seconds(self.candidates, self.belief.throughput_per_s)
        cautious_seconds = predicted_gpu_seconds(self.candidates, np.maximum(self.belief.throughput_low, 1e-300))
        for workload in self.workloads:
            cert = self.certificate(workload)
            self.stopped_by_bound.pop(workload.label, None)
            if cert.settled:
                continue
            proposals = self._workload_proposals(workload, cert, gpu_seconds)
            account = self.account(workload)
            if account is None:
                out += proposals
                continue
            rows = self.rows(workload)
            outlook = self._outlook(workload, gpu_seconds[rows])
            admitted = []
            limits = self.limits_ms(workload) or {}

            def judged(candidate: int) -> bool:
                # A cap whose runs judge not every SLO is new to the bisection: its first judging run.
                measured = self.measurements.get(candidate)
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
                if probe not in self.failed and not judged(probe):
                    admitted.append(self._proposal(probe, workload, 1e-12 / gpu_seconds[probe], gpu_seconds[probe],
                                                   "the bisection's next probe (the bound)", "probe"))
            if not admitted:
                self.stopped_by_bound[workload.label] = account.describe()
            out += admitted
        return sorted(out, key=lambda p: (-p.score, p.workload, p.max_num_seqs))

    def _outlook(self, workload: Workload, seconds: np.ndarray) -> BisectionOutlook:
        """The bisection's expected remaining cost and what an extra run would leave of it
        (`slim.tune.guard.BisectionOutlook`), over the belief's scenarios: a metric nothing predicts
        counts as met for where the bisection goes, and as not met for the decision (no scenario can
        settle on a cap whose SLO metric only a run can tell)."""
        limits = self.limits_ms(workload) or {}
        rows = self.rows(workload)
        view = self.view(workload, limits)
        start = workload.bisection_start
        shadow = ShadowBisection(len(rows), int(np.flatnonzero(view.caps == start)[0])
                                 if start is not None and (view.caps == start).any() else None)
        within = scenario_values(view)[0]
        outcomes = self._outcomes(limits, rows)
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

    def _workload_proposals(self, workload: Workload, cert: Certificate, gpu_seconds: np.ndarray) -> list[Proposal]:
        rows = self.rows(workload)
        limits = self.limits_ms(workload)
        if limits is None:
            reference = self.reference_row(workload)
            if reference in self.failed:
                return []
            return [self._proposal(reference, workload, float("inf"), gpu_seconds[reference],
                                   "defines the SLO (reference run)", "reference")]
        out = []
        open_rows = [i for i in rows if i not in self.failed and not self._complete(workload, i)]
        view = self.view(workload, limits)
        for position, cap in enumerate(view.caps):
            if cap in cert.repeat:
                i = int(rows[position])
                wrong_side = max((norm.cdf(-abs(np.log(c.estimates.value[position] / c.limit_ms))
                                           / max(c.estimates.log_sd[position], 1e-12))
                                  for c in view.constraints if c.estimates.measured[position]), default=0.0)
                out.append(self._proposal(i, workload, LIKELY_DECISION_WEIGHT * wrong_side / gpu_seconds[i],
                                          gpu_seconds[i], "an SLO metric measured within the run-to-run scatter of "
                                          f"its bound: run {self.runs_of(i) + 1} of it", "repeat"))
        if cert.needs_throughput_at_one:
            one = int(rows[0])
            if one in open_rows:
                out.append(self._proposal(one, workload, 1.0 / gpu_seconds[one], gpu_seconds[one],
                                          "T(1) decides the efficiency floor", "t_one"))
        challengers = [i for i in open_rows if float(self.candidates.at[i, col.MAX_NUM_SEQS]) in cert.challengers]
        chosen = dict(zip(rows.tolist(), decision_probabilities(view, workload.epsilon)))
        if any(chosen[i] > 0 for i in challengers):
            for i in challengers:
                out.append(self._proposal(i, workload, LIKELY_DECISION_WEIGHT * chosen[i] / gpu_seconds[i],
                                          gpu_seconds[i], f"likely the decision (P = {chosen[i]:.2f})"
                                          + self._unjudged_note(workload, i)))
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
                target = np.log(cert.objective * (1.0 + self.settings.tolerance))
                centre = goal.point()[position]
                sd = 0.0 if goal.measured[position] else goal.log_sd[position]
                p_gain = (float(centre > np.exp(target)) if sd == 0 or not np.isfinite(centre)
                          else norm.sf((target - np.log(centre)) / max(sd, 1e-12)))
                value, reason = p_slo * p_gain, "could beat the incumbent"
            else:
                centre = goal.point()[position]
                value = p_slo * (centre / best_predicted if np.isfinite(centre) else 1.0)
                reason = "could be the first cap within the SLOs"
            out.append(self._proposal(i, workload, float(value) / gpu_seconds[i], gpu_seconds[i],
                                      reason + self._unjudged_note(workload, i)))
        return out

    def _complete(self, workload: Workload, candidate: int) -> bool:
        """Whether a candidate's runs judged throughput and every quantity of the workload's SLOs."""
        measurement = self.measurements.get(candidate)
        if measurement is None:
            return False
        values = measurement.values()
        needed = [m.name for m in workload.slos.metrics] + ([GOODPUT] if workload.slos.goodput is not None else [])
        return all(name in values for name in needed)

    def _unjudged_note(self, workload: Workload, candidate: int) -> str:
        measurement = self.measurements.get(candidate)
        if measurement is None:
            return ""
        values = measurement.values()
        missing = [m.name for m in workload.slos.metrics if m.name not in values]
        if workload.slos.goodput is not None and GOODPUT not in values:
            missing.append(GOODPUT)
        return f"; its runs so far do not judge {', '.join(missing)}" if missing else ""

    def _proposal(self, i: int, workload: Workload, score: float, seconds: float, reason: str,
                  kind: str = "challenger") -> Proposal:
        b = self.belief
        return Proposal(int(i), workload.label, float(self.candidates.at[i, col.MAX_NUM_SEQS]), float(score),
                        float(seconds), float(b.throughput_per_s[i]), float(b.e2e_latency_s[i]), reason, kind=kind)


@dataclass(frozen=True)
class LoopStep:
    """One measurement of the loop, with the interval the belief held for it just before."""

    candidate: int
    workload: str
    max_num_seqs: float
    usable: bool
    gpu_seconds: float
    throughput_inside_interval: bool | None
    e2e_inside_interval: bool | None


@dataclass(frozen=True)
class LoopOutcome:
    steps: tuple[LoopStep, ...]
    certificates: dict[str, Certificate]
    stopped: str        # "settled", "bound", "no proposal", "run budget", "GPU budget", or failed runs in a row


def run_loop(session: TuneSession, measure: Callable[[Proposal], Measurement | Unusable | None],
             budget_runs: int | None = None, budget_gpu_seconds: float | None = None,
             max_failures_in_a_row: int | None = None) -> LoopOutcome:
    """Propose, measure and update until settled, stopped at the bound, a budget is spent, or
    `max_failures_in_a_row` runs in a row gave nothing usable (module docstring). `measure` returns
    the run's measurement, or `Unusable` (None: unusable, charged nothing); it must keep a run within
    its proposal's `Proposal.limit_gpu_seconds`."""
    steps: list[LoopStep] = []
    spent = 0.0
    while True:
        proposals = session.proposals()
        if not proposals:
            certificates = session.certificates()
            stopped = ("settled" if all(c.settled for c in certificates.values())
                       else "bound" if session.stopped_by_bound else "no proposal")
            return LoopOutcome(tuple(steps), certificates, stopped)
        if budget_runs is not None and len(steps) >= budget_runs:
            return LoopOutcome(tuple(steps), session.certificates(), "run budget")
        if budget_gpu_seconds is not None and spent >= budget_gpu_seconds:
            return LoopOutcome(tuple(steps), session.certificates(), "GPU budget")
        proposal = proposals[0]
        b = session.belief
        i = proposal.candidate
        result = measure(proposal)
        measurement = result if isinstance(result, Measurement) else None
        seconds = result.gpu_seconds if result is not None else 0.0
        session.record(i, measurement, seconds)
        usable = measurement is not None and measurement.usable
        spent += seconds
        steps.append(LoopStep(
            i, proposal.workload, proposal.max_num_seqs, usable, seconds,
            bool(b.throughput_low[i] <= measurement.throughput_per_s <= b.throughput_high[i]) if usable else None,
            bool(b.e2e_low[i] <= measurement.e2e_latency_s <= b.e2e_high[i]) if usable else None))
        failures = max_failures_in_a_row
        if failures is not None and len(steps) >= failures and not any(s.usable for s in steps[-failures:]):
            hint = result.hint if isinstance(result, Unusable) and result.hint else ""
            return LoopOutcome(tuple(steps), session.certificates(),
                               f"{failures} runs in a row gave no usable result" + (f"; {hint}" if hint else ""))
