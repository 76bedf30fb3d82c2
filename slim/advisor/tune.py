"""`slim tune` as a library call: measure only what the batch-cap decision needs.

For a list of workloads (model, IL, OL, each with its SLO) over candidate caps, `TuneSession`
keeps what is measured, believes the rest (`slim.advisor.tune_model`: a prior predictor corrected
by the measured runs' residuals, with conformal intervals), certifies each workload's decision
(`slim.advisor.certificate`) and, while some decision is open, proposes the next measurement:

**The next measurement.** Each open workload's belief is read as scenarios: at each of
`SCENARIO_COUNT` standard normal quantiles ``z``, every unmeasured candidate's throughput is its
corrected prediction times ``exp(sd_T z)`` and its E2E divided by ``exp(sd_E z)`` (one draw for the
whole curve: a prior that is too slow at one cap is too slow at its neighbours, and a slower run is
slower in both); measured candidates keep their measurements. Eq. 13 on each scenario gives the
probability that each candidate is the decision once everything is known
(`TuneSession.decision_probabilities`). The chosen cap must be measured anyway, so the next
measurement is the challenger of largest ``P(decision) / predicted GPU-seconds`` (the order that
minimises the expected cost of a search that stops on finding). Where no challenger can be the
decision (the incumbent is, but a bound is not yet tight), the challenger of largest ``P(feasible
and better than the incumbent by more than the tolerance) / predicted GPU-seconds``; without an
incumbent, ``P(feasible) x predicted T / the workload's best predicted T`` per GPU-second. ``P``
comes from the belief's lognormal marginals; the GPU-seconds from the corrected throughput
(`slim.advisor.tune_model.predicted_gpu_seconds`). Where only ``T(1)`` keeps a measured cap from
being chosen, the smallest cap is proposed. A measured cap whose E2E lies within its run-to-run
scatter of the SLO, where its side decides (`slim.advisor.certificate`: the certificate's
``repeat``), is run again, up to `TuneSettings.max_runs_per_cap` runs, before anything else of its
workload: repeated runs combine into one measurement of smaller scatter (`Measurement.combined`).
A measurement of one workload's cap updates the belief of every workload.

`run_loop` repeats propose, measure (a callback: an oracle replaying recorded runs, or a real
benchmark through `slim.advisor.bench_runner`) and update until every decision is settled, no
proposal is left, or a budget of runs or GPU-seconds is spent. A failed measurement is recorded
and never proposed again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm

from slim import columns as col
from slim.advisor.bca import DEFAULT_EPSILON
from slim.advisor.certificate import DEFAULT_TOLERANCE, CandidateView, Certificate, certify
from slim.advisor.tune_model import (
    Belief,
    PriorPrediction,
    ResidualKernel,
    belief,
    predicted_gpu_seconds,
)
from slim.errors import AdvisorError

DEFAULT_CONFIDENCE = 0.9
DEFAULT_SCATTER = 0.02
"""Run-to-run scatter (relative, one standard deviation) of a run measured once."""
DEFAULT_MAX_RUNS_PER_CAP = 3
"""A measurement within the noise of the SLO is repeated, up to this many runs of one cap."""

WORKLOAD = "workload"   # column of the candidates table: which workload a candidate belongs to
SCENARIO_COUNT = 64
SCENARIO_QUANTILES = norm.ppf((np.arange(SCENARIO_COUNT) + 0.5) / SCENARIO_COUNT)
"""The belief's scenarios: standard normal quantiles at equal weights (deterministic, no sampling)."""
LIKELY_DECISION_WEIGHT = 1e6
"""A candidate that may be the decision ranks before any measured only to exclude it."""


@dataclass(frozen=True)
class Workload:
    """One decision: a model at nominal lengths, its E2E SLO and efficiency floor.

    The SLO is `slo_s` seconds, or (`slo_s` NaN) `slo_multiplier` times the measured E2E at cap
    `slo_reference_cap` of this workload, which is then the first run to measure."""

    model: str
    input_len: float
    output_len: float
    slo_s: float
    epsilon: float = DEFAULT_EPSILON
    slo_multiplier: float | None = None
    slo_reference_cap: float | None = None

    def __post_init__(self) -> None:
        if np.isfinite(self.slo_s):
            if self.slo_s <= 0:
                raise AdvisorError(f"workload {self.label}: the SLO must be > 0 s, got {self.slo_s}")
        elif self.slo_multiplier is None or self.slo_reference_cap is None or self.slo_multiplier <= 0:
            raise AdvisorError(f"workload {self.label}: give an SLO in seconds, or a multiplier > 0 of the E2E "
                               "at a reference cap")

    @property
    def label(self) -> str:
        return f"{self.model} IL {self.input_len:g} OL {self.output_len:g}"


@dataclass(frozen=True)
class Measurement:
    """Usable runs of one configuration: total-token throughput and E2E latency (their geometric
    mean over `runs` runs), the GPU-seconds they took, and the run-to-run scatter of one run."""

    throughput_per_s: float
    e2e_latency_s: float
    gpu_seconds: float
    scatter: float = DEFAULT_SCATTER
    runs: int = 1

    @property
    def log_sd(self) -> float:
        """Standard deviation of the mean's log: one run's scatter over the root of the runs."""
        return self.scatter / float(np.sqrt(self.runs))

    def combined(self, other: "Measurement") -> "Measurement":
        """This measurement and `other` (more runs of the same configuration) as one."""
        runs = self.runs + other.runs

        def mean(a: float, b: float) -> float:
            return float(np.exp((self.runs * np.log(a) + other.runs * np.log(b)) / runs))
        return Measurement(mean(self.throughput_per_s, other.throughput_per_s),
                           mean(self.e2e_latency_s, other.e2e_latency_s), self.gpu_seconds + other.gpu_seconds,
                           max(self.scatter, other.scatter), runs)


@dataclass(frozen=True)
class Unusable:
    """A run that gave no usable result: the GPU-seconds it took all the same, and where to look."""

    gpu_seconds: float = 0.0
    hint: str = ""


@dataclass(frozen=True)
class Proposal:
    """The next benchmark: a candidate (row of the candidates table), why, its predicted cost."""

    candidate: int
    workload: str
    max_num_seqs: float
    score: float
    predicted_gpu_seconds: float
    predicted_throughput_per_s: float
    predicted_e2e_latency_s: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload, "max_num_seqs": self.max_num_seqs, "score": self.score,
                "predicted_gpu_seconds": self.predicted_gpu_seconds,
                "predicted_throughput_per_s": self.predicted_throughput_per_s,
                "predicted_e2e_latency_s": self.predicted_e2e_latency_s, "reason": self.reason}


@dataclass(frozen=True)
class TuneSettings:
    """The confidence of each bound, the tolerance of the certificate, the residual kernel and its
    out-of-sample extrapolation scores (`slim.advisor.tune_kernel.extrapolation_scores`: what the
    intervals' multiplier falls back on while the session has too few scores of its own), and how
    many runs of one cap a measurement within the noise of the SLO may take (1: never repeat)."""

    confidence: float = DEFAULT_CONFIDENCE
    tolerance: float = DEFAULT_TOLERANCE
    kernel: ResidualKernel = ResidualKernel()
    extrapolation_scores: tuple[float, ...] = ()
    max_runs_per_cap: int = DEFAULT_MAX_RUNS_PER_CAP


def curve_label(frame: pd.DataFrame) -> pd.Series:
    """`Workload.label` of every row of a runs or candidates table."""
    return (frame[col.MODEL].astype(str) + " IL " + frame[col.INPUT_LEN_NOMINAL].map("{:g}".format) + " OL "
            + frame[col.OUTPUT_LEN_NOMINAL].map("{:g}".format))


@dataclass
class TuneSession:
    """What is measured and believed about every candidate of some workloads.

    `candidates` holds one row per (workload, cap) with `slim.advisor.tune_model.CONFIG_COLUMNS`
    and `WORKLOAD`; a workload's smallest candidate (best: cap 1) gives ``T(1)``. Rows of a `WORKLOAD`
    that is not among `workloads` are context: runs measured for other curves, which inform the
    belief but are not decided. `prior` is the prior predictor's
    prediction of those rows (computed once: the prior is not refitted)."""

    workloads: Sequence[Workload]
    candidates: pd.DataFrame
    prior: PriorPrediction
    settings: TuneSettings = TuneSettings()
    measurements: dict[int, Measurement] = field(default_factory=dict)
    failed: set[int] = field(default_factory=set)
    _belief: Belief | None = None

    def __post_init__(self) -> None:
        self.candidates = self.candidates.reset_index(drop=True)
        for workload in self.workloads:
            if not (self.candidates[WORKLOAD] == workload.label).any():
                raise AdvisorError(f"workload {workload.label} has no candidate cap")

    # --- what is measured ---------------------------------------------------------------
    def record(self, candidate: int, measurement: Measurement | None) -> None:
        """A candidate's run: usable (a measurement, combined with the candidate's earlier runs) or
        failed (None, never proposed again)."""
        if measurement is None or not (np.isfinite(measurement.throughput_per_s) and measurement.throughput_per_s > 0
                                       and np.isfinite(measurement.e2e_latency_s) and measurement.e2e_latency_s > 0):
            if candidate not in self.measurements:
                self.failed.add(candidate)
        elif candidate in self.measurements:
            self.measurements[candidate] = self.measurements[candidate].combined(measurement)
        else:
            self.measurements[candidate] = measurement
        self._belief = None

    def runs_of(self, candidate: int) -> int:
        """How many usable runs a candidate's measurement averages (0: not measured)."""
        measurement = self.measurements.get(candidate)
        return measurement.runs if measurement is not None else 0

    @property
    def belief(self) -> Belief:
        if self._belief is None:
            index = sorted(self.measurements)
            runs = [self.measurements[i] for i in index]
            self._belief = belief(self.candidates, self.prior, index,
                                  np.array([m.throughput_per_s for m in runs]),
                                  np.array([m.e2e_latency_s for m in runs]),
                                  np.array([m.scatter for m in runs]), self.settings.confidence, self.settings.kernel,
                                  self.settings.extrapolation_scores, np.array([m.runs for m in runs]))
        return self._belief

    # --- decisions ------------------------------------------------------------------------
    def _rows(self, workload: Workload) -> np.ndarray:
        rows = np.flatnonzero((self.candidates[WORKLOAD] == workload.label).to_numpy())
        caps = self.candidates[col.MAX_NUM_SEQS].to_numpy(dtype=float)[rows]
        return rows[np.argsort(caps, kind="stable")]

    def view(self, workload: Workload) -> CandidateView:
        rows, b = self._rows(workload), self.belief
        measured = np.array([i in self.measurements for i in rows])
        nan = float("nan")
        return CandidateView(
            caps=self.candidates[col.MAX_NUM_SEQS].to_numpy(dtype=float)[rows], measured=measured,
            failed=np.array([i in self.failed for i in rows]),
            throughput_measured=np.array([self.measurements[i].throughput_per_s if i in self.measurements else nan
                                          for i in rows]),
            e2e_measured=np.array([self.measurements[i].e2e_latency_s if i in self.measurements else nan
                                   for i in rows]),
            throughput_mean=b.throughput_per_s[rows], throughput_low=b.throughput_low[rows],
            throughput_high=b.throughput_high[rows], e2e_mean=b.e2e_latency_s[rows], e2e_low=b.e2e_low[rows],
            e2e_high=b.e2e_high[rows],
            e2e_measured_log_sd=np.where(measured, b.e2e_log_sd[rows], nan),   # a measurement's own scatter
            repeatable=np.array([self.runs_of(i) < self.settings.max_runs_per_cap for i in rows]))

    def _reference_row(self, workload: Workload) -> int:
        rows = self._rows(workload)
        caps = self.candidates[col.MAX_NUM_SEQS].to_numpy(dtype=float)[rows]
        match = rows[caps == workload.slo_reference_cap]
        if not match.size:
            raise AdvisorError(f"workload {workload.label}: the SLO's reference cap {workload.slo_reference_cap:g} "
                               "is not a candidate")
        return int(match[0])

    def slo_s(self, workload: Workload) -> float:
        """The workload's SLO in seconds; NaN while its reference run is not measured."""
        if np.isfinite(workload.slo_s):
            return float(workload.slo_s)
        reference = self.measurements.get(self._reference_row(workload))
        return float(workload.slo_multiplier * reference.e2e_latency_s) if reference else float("nan")

    def certificate(self, workload: Workload) -> Certificate:
        slo_s = self.slo_s(workload)
        if not np.isfinite(slo_s):
            nan = float("nan")
            return Certificate(nan, nan, nan, False, nan, workload.epsilon, self.settings.tolerance, (nan, nan), False,
                               notes=(f"the SLO waits for the reference run at cap {workload.slo_reference_cap:g}",))
        return certify(self.view(workload), slo_s, workload.epsilon, self.settings.tolerance,
                       float(norm.ppf(self.settings.confidence)))

    def certificates(self) -> dict[str, Certificate]:
        return {w.label: self.certificate(w) for w in self.workloads}

    # --- the next measurement -------------------------------------------------------------
    def decision_probabilities(self, workload: Workload) -> np.ndarray:
        """Per candidate of `workload` (ascending cap): the probability that Eq. 13 chooses it once
        every candidate is known, over the belief's scenarios (module docstring)."""
        rows, b = self._rows(workload), self.belief
        caps = self.candidates[col.MAX_NUM_SEQS].to_numpy(dtype=float)[rows]
        measured = np.array([i in self.measurements for i in rows])
        failed = np.array([i in self.failed and i not in self.measurements for i in rows])
        z = SCENARIO_QUANTILES[:, None]
        throughput = np.where(measured, b.throughput_per_s[rows], b.throughput_per_s[rows] * np.exp(
            b.throughput_log_sd[rows] * z))
        e2e = np.where(measured, b.e2e_latency_s[rows], b.e2e_latency_s[rows] * np.exp(-b.e2e_log_sd[rows] * z))
        slo_s = self.slo_s(workload)
        efficiency = throughput / (caps * (throughput[:, :1] / caps[0]))
        admissible = (e2e <= slo_s) & (efficiency > workload.epsilon) & ~failed
        best = np.where(admissible, throughput, -np.inf)
        chosen = np.argmax(best, axis=1)          # ties: the smaller cap, as Eq. 13
        feasible = admissible.any(axis=1)
        return np.bincount(chosen[feasible], minlength=len(rows)) / len(SCENARIO_QUANTILES)

    def proposals(self) -> list[Proposal]:
        """Every useful next measurement, best first (module docstring); empty when settled."""
        b, out = self.belief, []
        gpu_seconds = predicted_gpu_seconds(self.candidates, b.throughput_per_s)
        for workload in self.workloads:
            cert = self.certificate(workload)
            if cert.settled:
                continue
            rows = self._rows(workload)
            slo_s = self.slo_s(workload)
            if not np.isfinite(slo_s):
                reference = self._reference_row(workload)
                if reference not in self.failed:
                    out.append(self._proposal(reference, workload, float("inf"), gpu_seconds[reference],
                                              "defines the SLO (reference run)"))
                continue
            open_rows = [i for i in rows if i not in self.measurements and i not in self.failed]
            view = self.view(workload) if cert.repeat else None
            for position, cap in enumerate(view.caps if view is not None else ()):
                if cap in cert.repeat:
                    i = int(rows[position])
                    wrong_side = norm.cdf(-abs(np.log(view.e2e_measured[position] / slo_s))
                                          / max(view.e2e_measured_log_sd[position], 1e-12))
                    out.append(self._proposal(i, workload, LIKELY_DECISION_WEIGHT * wrong_side / gpu_seconds[i],
                                              gpu_seconds[i], f"its measured E2E is within the run-to-run scatter of "
                                              f"the SLO: run {self.runs_of(i) + 1} of it"))
            if cert.needs_throughput_at_one:
                one = int(rows[0])
                if one in open_rows:
                    out.append(self._proposal(one, workload, 1.0 / gpu_seconds[one], gpu_seconds[one],
                                              "T(1) decides the efficiency floor"))
            challengers = [i for i in open_rows if float(self.candidates.at[i, col.MAX_NUM_SEQS]) in cert.challengers]
            chosen = dict(zip(rows.tolist(), self.decision_probabilities(workload)))
            if any(chosen[i] > 0 for i in challengers):
                for i in challengers:
                    out.append(self._proposal(i, workload, LIKELY_DECISION_WEIGHT * chosen[i] / gpu_seconds[i],
                                              gpu_seconds[i], f"likely the decision (P = {chosen[i]:.2f})"))
                continue
            best_predicted = max(b.throughput_per_s[rows].max(), 1e-300)
            for i in challengers:
                p_slo = norm.cdf((np.log(slo_s) - np.log(b.e2e_latency_s[i])) / max(b.e2e_log_sd[i], 1e-12))
                if cert.feasible:
                    target = np.log(cert.throughput_per_s * (1.0 + self.settings.tolerance))
                    p_gain = norm.sf((target - np.log(b.throughput_per_s[i])) / max(b.throughput_log_sd[i], 1e-12))
                    value, reason = p_slo * p_gain, "could beat the incumbent"
                else:
                    value, reason = p_slo * b.throughput_per_s[i] / best_predicted, "could be the first feasible cap"
                out.append(self._proposal(i, workload, float(value) / gpu_seconds[i], gpu_seconds[i], reason))
        return sorted(out, key=lambda p: (-p.score, p.workload, p.max_num_seqs))

    def _proposal(self, i: int, workload: Workload, score: float, seconds: float, reason: str) -> Proposal:
        b = self.belief
        return Proposal(int(i), workload.label, float(self.candidates.at[i, col.MAX_NUM_SEQS]), float(score),
                        float(seconds), float(b.throughput_per_s[i]), float(b.e2e_latency_s[i]), reason)


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
    stopped: str        # "settled", "no proposal", "run budget", "GPU budget", or failed runs in a row


def run_loop(session: TuneSession, measure: Callable[[Proposal], Measurement | Unusable | None],
             budget_runs: int | None = None, budget_gpu_seconds: float | None = None,
             max_failures_in_a_row: int | None = None) -> LoopOutcome:
    """Propose, measure and update until settled, a budget is spent, or `max_failures_in_a_row`
    runs in a row gave nothing usable (module docstring). `measure` returns the run's measurement,
    or `Unusable` (None: unusable, charged nothing)."""
    steps: list[LoopStep] = []
    spent = 0.0
    while True:
        proposals = session.proposals()
        if not proposals:
            certificates = session.certificates()
            stopped = "settled" if all(c.settled for c in certificates.values()) else "no proposal"
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
        session.record(i, measurement)
        usable = i in session.measurements
        seconds = result.gpu_seconds if result is not None else 0.0
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

