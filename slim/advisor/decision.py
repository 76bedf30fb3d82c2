"""The one batch-cap decision `slim advise` and `slim tune` make: BCA's rule (Eq. 13) on the SLOs vLLM
users state, judged on each candidate cap's measurements where it was measured and on a prediction
with its interval where it was not.

Eq. 13, with every SLO of `slim.specs.slo` and the objective ``O`` (total-token throughput ``T``, the
paper's, or goodput):

    max_B O(B)  s.t.  m(B) <= bound_m  for every SLO metric m,   T(B) / (B T(1)) > epsilon

Two readings of it on the same candidates (`CandidateView`):

* `recommend`, the point decision: each candidate's value is its measurement where it was measured
  (measurements are facts) and the predicted mean elsewhere; a candidate whose SLO metric is neither
  measured nor predicted is left out (unjudged).
* `certify`, whether the decision is **settled**: the chosen cap (the *incumbent*) was measured on
  every SLO metric, met them all, and batches efficiently even at the upper bound of ``T(1)``; and
  every other candidate is excluded: measured and worse, measured over an SLO, over an SLO at a
  smaller measured cap (latency grows with the cap: the assumption a bisection over the caps
  makes), measured or bounded below the efficiency floor, an SLO metric's lower bound over its SLO,
  or its objective's upper bound within ``(1 + tolerance)`` of the incumbent's. Or, with no
  incumbent, when every candidate is excluded as infeasible and not every one merely failed to run.
  Under run-to-run noise (``noise_z`` > 0) a measured SLO metric within ``noise_z`` standard
  deviations of its bound keeps the decision open where its side decides (the incumbent's, or a
  better cap's over its bound), and that cap is to *repeat* (`Certificate.repeat`). Bounds hold at
  the interval's confidence each.

`decision_probabilities` reads the intervals as scenarios and gives each candidate's probability of
being the decision once every candidate is known: what `slim tune` weighs its next measurement by.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm

from slim.defaults import DEFAULT_TOLERANCE

THROUGHPUT = "throughput"
GOODPUT = "goodput"
SCENARIO_COUNT = 64
SCENARIO_QUANTILES = norm.ppf((np.arange(SCENARIO_COUNT) + 0.5) / SCENARIO_COUNT)
"""The scenarios of `decision_probabilities`: standard normal quantiles at equal weights (deterministic)."""
UNITS = {THROUGHPUT: "tokens/s", GOODPUT: "requests/s"}


@dataclass(frozen=True)
class Estimates:
    """One quantity over a workload's candidates (ascending cap): the measurement where `measured`,
    else the predicted mean and its interval (mean NaN, interval (0, inf): nothing predicts it), and
    the standard deviation of its log (a measurement's scatter, or the prediction's)."""

    measured: np.ndarray
    value: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    log_sd: np.ndarray

    @classmethod
    def unknown(cls, n: int) -> Estimates:
        nan = np.full(n, np.nan)
        return cls(np.zeros(n, dtype=bool), nan, nan.copy(), np.zeros(n), np.full(n, np.inf), np.full(n, np.inf))

    def point(self, upper: bool = False) -> np.ndarray:
        """Measured where measured, else the predicted mean (`upper`: its interval's upper bound)."""
        return np.where(self.measured, self.value, self.high if upper else self.mean)

    @property
    def predicted(self) -> np.ndarray:
        return np.isfinite(self.mean)


@dataclass(frozen=True)
class Constraint:
    """One SLO: its metric's name (vLLM's), its bound (ms) and the metric's estimates."""

    name: str
    limit_ms: float
    estimates: Estimates


@dataclass(frozen=True)
class CandidateView:
    """One workload's candidates, ascending by cap: throughput, the SLO constraints, the objective
    (None: throughput, the paper's; else goodput's estimates), which candidates were tried and gave
    no usable run, and which measured ones may be measured again."""

    caps: np.ndarray
    failed: np.ndarray
    throughput: Estimates
    constraints: tuple[Constraint, ...] = ()
    objective: Estimates | None = None
    repeatable: np.ndarray | None = None

    @property
    def goal(self) -> Estimates:
        return self.throughput if self.objective is None else self.objective

    @property
    def goal_name(self) -> str:
        return THROUGHPUT if self.objective is None else GOODPUT

    @property
    def complete(self) -> np.ndarray:
        """Candidates measured on throughput, the objective and every SLO metric."""
        done = self.throughput.measured & self.goal.measured
        for constraint in self.constraints:
            done = done & constraint.estimates.measured
        return done


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


# --- the point decision ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Recommendation:
    """`recommend`'s choice: the cap (NaN: none), whether every value behind it is a measurement, the
    objective, throughput and SLO metrics there, its batching efficiency, what keeps a better cap
    out (SLO names and ``efficiency``), why there is none, and the caps left out as unjudged."""

    batch_cap: float
    measured: bool
    objective: float
    throughput_per_s: float
    values_ms: dict[str, float]
    efficiency: float
    binding: tuple[str, ...] = ()
    reason: str = ""
    unjudged: tuple[float, ...] = ()

    @property
    def feasible(self) -> bool:
        return bool(np.isfinite(self.batch_cap))


def recommend(view: CandidateView, epsilon: float, upper: frozenset[str] = frozenset()) -> Recommendation:
    """Eq. 13 on each candidate's measurement, or its predicted mean where not measured (module
    docstring); for the SLO metrics named in `upper`, an unmeasured candidate is held to its
    interval's upper bound. Ties go to the smaller cap (less memory)."""
    caps = view.caps
    throughput = view.throughput.point()
    goal = view.goal.point()
    t_one = throughput[0] / caps[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        efficiency = throughput / (caps * t_one)
    meets = {c.name: c.estimates.point(c.name in upper) <= c.limit_ms for c in view.constraints}
    judged = np.ones(len(caps), dtype=bool)
    for c in view.constraints:
        judged &= np.isfinite(c.estimates.point())
    judged &= np.isfinite(goal) & np.isfinite(throughput)
    usable = judged & ~(view.failed & ~view.throughput.measured)
    meets_all = np.ones(len(caps), dtype=bool)
    for mask in meets.values():
        meets_all &= mask
    efficient = efficiency > epsilon
    admissible = usable & meets_all & efficient
    unjudged = tuple(float(cap) for cap in caps[~judged & ~(view.failed & ~view.throughput.measured)])
    nan = float("nan")
    if not admissible.any():
        if not usable.any():
            reason = "no candidate has a measurement or a prediction of every SLO metric"
        elif not (usable & meets_all).any():
            worst = [f"{name} (smallest {np.nanmin(np.where(usable, c.estimates.point(name in upper), np.nan)):.4g} "
                     f"ms > {c.limit_ms:.4g} ms)" for name, c in ((c.name, c) for c in view.constraints)
                     if not (usable & meets[name]).any()]
            reason = "no candidate meets " + (", ".join(worst) if worst else "every SLO at once")
        else:
            reason = (f"no candidate within the SLOs batches efficiently: largest T(B)/(B T(1)) "
                      f"{np.nanmax(np.where(usable & meets_all, efficiency, np.nan)):.4g} <= epsilon {epsilon:g}")
        return Recommendation(nan, False, nan, nan, {}, nan, reason=reason, unjudged=unjudged)
    best = np.max(goal[admissible])
    chosen = int(np.flatnonzero(admissible & (goal == best))[0])
    better = usable & (goal > goal[chosen])
    binding = tuple(name for name, mask in meets.items() if np.any(better & ~mask)) + (
        ("efficiency",) if np.any(better & meets_all & ~efficient) else ())
    values = {c.name: float(c.estimates.point(c.name in upper)[chosen]) for c in view.constraints}
    measured = bool(view.complete[chosen])
    return Recommendation(float(caps[chosen]), measured, float(goal[chosen]), float(throughput[chosen]), values,
                          float(efficiency[chosen]), binding, unjudged=unjudged)


# --- the certificate -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Exclusion:
    """Why a candidate cannot change the decision, in words; `by_bound` where it rests on an interval
    of an unmeasured candidate, not on a measurement."""

    cap: float
    reason: str
    by_bound: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"cap": self.cap, "reason": self.reason}


@dataclass(frozen=True)
class Certificate:
    """A workload's decision state: the incumbent (NaN if none) with its measured objective,
    throughput and SLO metrics, whether it is settled, what settles it (`exclusions`) and what could
    still change it (`challengers`; `unjudged`: those whose run did not judge an SLO metric; whether
    the efficiency floor waits for ``T(1)``), and the measured caps to `repeat`."""

    batch_cap: float
    objective: float
    throughput_per_s: float
    values_ms: dict[str, float]
    settled: bool
    limits_ms: dict[str, float]
    epsilon: float
    tolerance: float
    throughput_at_one: tuple[float, float]
    throughput_at_one_measured: bool
    exclusions: tuple[Exclusion, ...] = ()
    challengers: tuple[float, ...] = ()
    needs_throughput_at_one: bool = False
    notes: tuple[str, ...] = field(default=())
    repeat: tuple[float, ...] = ()
    unjudged: tuple[float, ...] = ()
    objective_name: str = THROUGHPUT

    @property
    def feasible(self) -> bool:
        return bool(np.isfinite(self.batch_cap))

    def to_dict(self) -> dict[str, Any]:
        return {"max_num_seqs": _json(self.batch_cap), "objective": self.objective_name,
                "objective_value": _json(self.objective), "total_token_throughput": _json(self.throughput_per_s),
                "measured": {name: _json(value) for name, value in self.values_ms.items()},
                "settled": self.settled, "slo_ms": {name: _json(value) for name, value in self.limits_ms.items()},
                "epsilon": self.epsilon, "tolerance": self.tolerance,
                "throughput_at_one": [_json(v) for v in self.throughput_at_one],
                "throughput_at_one_measured": self.throughput_at_one_measured,
                "exclusions": [e.to_dict() for e in self.exclusions], "challengers": list(self.challengers),
                "unjudged": list(self.unjudged), "needs_throughput_at_one": self.needs_throughput_at_one,
                "notes": list(self.notes), "repeat": list(self.repeat)}


def _json(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def pending(limits_ms: dict[str, float], epsilon: float, tolerance: float, note: str) -> Certificate:
    """The certificate of a decision that waits for something (the reference run of a relative SLO)."""
    nan = float("nan")
    return Certificate(nan, nan, nan, {}, False, limits_ms, epsilon, tolerance, (nan, nan), False, notes=(note,))


def certify(view: CandidateView, epsilon: float, tolerance: float = DEFAULT_TOLERANCE,
            noise_z: float = 0.0) -> Certificate:
    """The decision state of one workload (module docstring). ``T(1)`` of the efficiency floor is the
    smallest candidate's throughput divided by its cap (cap 1 itself where it is a candidate, as a
    measured curve reads it). With ``noise_z`` > 0, a measured SLO metric within ``noise_z`` standard
    deviations of its bound that could change the decision is to repeat."""
    caps, t = view.caps, view.throughput
    goal = view.goal
    one_measured = bool(t.measured[0])
    t_one = ((t.value[0] / caps[0],) * 2 if one_measured else (t.low[0] / caps[0], t.high[0] / caps[0]))
    complete = view.complete
    meets = complete.copy()
    for c in view.constraints:
        meets &= c.estimates.value <= c.limit_ms
    with np.errstate(invalid="ignore", divide="ignore"):
        efficiency_low = t.value / (caps * t_one[1])
        efficiency_high = t.value / (caps * t_one[0])
    efficient_sure = meets & (efficiency_low > epsilon)
    efficient_maybe = meets & (efficiency_high > epsilon)
    incumbent = -1
    if efficient_sure.any():
        best = np.where(efficient_sure, goal.value, -np.inf)
        incumbent = int(np.flatnonzero(best == best.max())[0])     # ties: the smaller cap
    reference = goal.value[incumbent] * (1.0 + tolerance) if incumbent >= 0 else 0.0
    first_over = _first_measured_over(view, noise_z)
    exclusions, challengers, unjudged = [], [], []
    needs_one = False
    unit = UNITS[view.goal_name]
    for i, cap in enumerate(caps):
        if i == incumbent:
            continue
        exclusion = _exclusion(view, i, cap, first_over, t_one, epsilon)
        if exclusion is not None:
            exclusions.append(exclusion)
            continue
        if complete[i]:
            if not efficient_maybe[i]:
                exclusions.append(Exclusion(float(cap), f"measured efficiency <= epsilon {epsilon:g}"))
            elif goal.value[i] <= reference:
                exclusions.append(Exclusion(float(cap), f"measured {view.goal_name} {_fmt(goal.value[i])} {unit} <= "
                                                        f"{1 + tolerance:g} x the choice's"))
            else:
                needs_one = True     # better and within the SLOs, but its efficiency waits for T(1)
            continue
        if incumbent >= 0 and goal.measured[i] and goal.value[i] <= reference:
            exclusions.append(Exclusion(float(cap), f"measured {view.goal_name} {_fmt(goal.value[i])} {unit} <= "
                                                    f"{1 + tolerance:g} x the choice's"))
        elif incumbent >= 0 and not goal.measured[i] and goal.high[i] <= reference:
            exclusions.append(Exclusion(float(cap), f"{view.goal_name} upper bound {_fmt(goal.high[i])} {unit} <= "
                                                    f"{1 + tolerance:g} x the choice's measured", by_bound=True))
        else:
            challengers.append(float(cap))
            if t.measured[i]:
                unjudged.append(float(cap))
    if incumbent < 0 and efficient_maybe.any() and not one_measured:
        needs_one = True             # a measured cap meets the SLOs; only T(1) keeps it from being chosen
    repeat = _to_repeat(view, incumbent, reference, meets, efficiency_high, epsilon, noise_z)
    settled = not challengers and not needs_one and not repeat
    if incumbent < 0 and all(view.failed[i] and not t.measured[i] for i in range(len(caps))):
        settled = False   # nothing ran: no measurement or bound rules any cap out
    limits = {c.name: c.limit_ms for c in view.constraints}
    common = dict(settled=settled, limits_ms=limits, epsilon=epsilon, tolerance=tolerance,
                  throughput_at_one=(float(t_one[0]), float(t_one[1])), throughput_at_one_measured=one_measured,
                  exclusions=tuple(exclusions), challengers=tuple(challengers), needs_throughput_at_one=needs_one,
                  repeat=repeat, unjudged=tuple(unjudged), objective_name=view.goal_name)
    if incumbent >= 0:
        return Certificate(float(caps[incumbent]), float(goal.value[incumbent]), float(t.value[incumbent]),
                           {c.name: float(c.estimates.value[incumbent]) for c in view.constraints}, **common)
    nan = float("nan")
    notes = ("no candidate meets the SLOs and the efficiency floor",) if settled else ()
    return Certificate(nan, nan, nan, {}, notes=notes, **common)


def _first_measured_over(view: CandidateView, noise_z: float) -> dict[str, int]:
    """Per SLO metric, the smallest candidate measured over its bound beyond the run-to-run noise
    (``len(caps)``: none): every larger cap is over it too, latency growing with the cap."""
    out = {}
    for c in view.constraints:
        e = c.estimates
        with np.errstate(invalid="ignore"):
            margin = np.log(e.value / c.limit_ms) - noise_z * np.nan_to_num(e.log_sd, nan=0.0, posinf=0.0)
            over = e.measured & (margin > 0)
        out[c.name] = int(np.flatnonzero(over)[0]) if over.any() else len(view.caps)
    return out


def _exclusion(view: CandidateView, i: int, cap: float, first_over: dict[str, int], t_one: tuple[float, float],
               epsilon: float) -> Exclusion | None:
    """Why candidate `i` cannot be the decision whatever the rest turns out to be, or None."""
    t = view.throughput
    if view.failed[i] and not t.measured[i]:
        return Exclusion(float(cap), "no usable run (tried and failed)")
    for c in view.constraints:
        e = c.estimates
        if e.measured[i] and e.value[i] > c.limit_ms:
            return Exclusion(float(cap), f"measured {c.name} {_fmt(e.value[i])} ms > SLO {_fmt(c.limit_ms)} ms")
    for c in view.constraints:
        smaller = first_over[c.name]
        if smaller < i:
            return Exclusion(float(cap), f"{c.name} measured over its SLO at the smaller cap {view.caps[smaller]:g} "
                                         "(latency grows with the cap)")
    if t.measured[i]:
        if t.value[i] / (cap * t_one[0]) <= epsilon:
            return Exclusion(float(cap), f"measured efficiency <= epsilon {epsilon:g}")
    elif t.high[i] / (cap * t_one[0]) <= epsilon:
        return Exclusion(float(cap), f"efficiency upper bound <= epsilon {epsilon:g}", by_bound=True)
    for c in view.constraints:
        e = c.estimates
        if not e.measured[i] and e.low[i] > c.limit_ms:
            return Exclusion(float(cap), f"{c.name} lower bound {_fmt(e.low[i])} ms > SLO {_fmt(c.limit_ms)} ms",
                             by_bound=True)
    return None


def _to_repeat(view: CandidateView, incumbent: int, reference: float, meets: np.ndarray,
               efficiency_high: np.ndarray, epsilon: float, noise_z: float) -> tuple[float, ...]:
    """The measured caps whose side of an SLO the run-to-run noise leaves open and whose side
    decides (module docstring), where they may be measured again: the incumbent, and the caps over
    an SLO that would beat it (efficiently, by more than the tolerance) if they met it."""
    if noise_z <= 0 or view.repeatable is None:
        return ()
    unsure = np.zeros(len(view.caps), dtype=bool)
    for c in view.constraints:
        e = c.estimates
        with np.errstate(invalid="ignore", divide="ignore"):
            margin = np.abs(np.log(e.value / c.limit_ms)) / np.maximum(np.nan_to_num(e.log_sd, nan=0.0), 1e-12)
        unsure |= e.measured & (margin <= noise_z)
    unsure &= view.repeatable
    with np.errstate(invalid="ignore"):
        could_beat = view.complete & ~meets & (view.goal.value > reference) & (efficiency_high > epsilon)
    decides = could_beat.copy()
    if incumbent >= 0:
        decides[incumbent] = True
    return tuple(float(c) for c in view.caps[unsure & decides])


# --- the decision's probabilities ------------------------------------------------------------------

def scenario_values(view: CandidateView, unknown_met: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The belief read as scenarios (`decision_probabilities`): per scenario and candidate, whether it
    is within every SLO (a metric nothing predicts counts as met, or with `unknown_met` False as not
    met), and its objective."""
    z = SCENARIO_QUANTILES[:, None]

    def draw(e: Estimates, sign: float) -> np.ndarray:
        sd = np.where(np.isfinite(e.log_sd), e.log_sd, 0.0)
        return np.where(e.measured, e.value, e.mean * np.exp(sign * sd * z))

    within = np.ones((len(SCENARIO_QUANTILES), len(view.caps)), dtype=bool)
    for c in view.constraints:
        values = draw(c.estimates, -1.0)
        within &= ~(values > c.limit_ms) if unknown_met else (values <= c.limit_ms)   # NaN: unpredicted
    throughput = draw(view.throughput, 1.0)
    goal = throughput if view.objective is None else draw(view.objective, 1.0)
    return within, np.where(np.isfinite(goal), goal, np.nan), throughput


def scenario_decisions(view: CandidateView, epsilon: float, unknown_met: bool = True) -> np.ndarray:
    """Per scenario (`SCENARIO_QUANTILES`): the position Eq. 13 chooses once every candidate is known,
    -1 where no candidate is admissible."""
    within, goal, throughput = scenario_values(view, unknown_met)
    failed = view.failed & ~view.throughput.measured
    efficiency = throughput / (view.caps * (throughput[:, :1] / view.caps[0]))
    admissible = within & (efficiency > epsilon) & ~failed & np.isfinite(goal)
    best = np.where(admissible, goal, -np.inf)
    chosen = np.argmax(best, axis=1)          # ties: the smaller cap, as Eq. 13
    return np.where(admissible.any(axis=1), chosen, -1)


def decision_probabilities(view: CandidateView, epsilon: float, unknown_met: bool = True) -> np.ndarray:
    """Per candidate: the probability that Eq. 13 chooses it once every candidate is known, reading
    the intervals as scenarios: at each standard normal quantile ``z`` (`SCENARIO_QUANTILES`, one
    draw for the whole curve: a prior too slow at one cap is too slow at its neighbours, and a
    slower run is slower in every metric), an unmeasured candidate's throughput and objective are
    their means times ``exp(sd z)`` and each SLO metric its mean divided by ``exp(sd z)``; a metric
    nothing predicts counts as met (only a run can tell), or with `unknown_met` False as not met (no
    scenario can count on it). Measured values stay what they are."""
    chosen = scenario_decisions(view, epsilon, unknown_met)
    return np.bincount(chosen[chosen >= 0], minlength=len(view.caps)) / len(SCENARIO_QUANTILES)
