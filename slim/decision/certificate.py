"""Whether a batch-cap decision is settled: the measured choice met every SLO, and no other
candidate can beat it by more than the tolerance at the bounds' confidence (its certificate).

`certify` reads a `CandidateView` (`slim.decision.candidates`). The decision is **settled** when the
chosen cap (the *incumbent*) was measured on every SLO metric, met them all, and batches efficiently
even at the upper bound of ``T(1)``; and every other candidate is excluded: measured and worse,
measured over an SLO, over an SLO at a smaller measured cap (latency grows with the cap: the
assumption a bisection over the caps makes), measured or bounded below the efficiency floor, an SLO
metric's lower bound over its SLO, or its objective's upper bound within ``(1 + tolerance)`` of the
incumbent's. Or, with no incumbent, when every candidate is excluded as infeasible and not every one
merely failed to run. Under run-to-run noise (``noise_z`` > 0) a measured SLO metric within
``noise_z`` standard deviations of its bound keeps the decision open where its side decides (the
incumbent's, or a better cap's over its bound), and that cap is to *repeat* (`Certificate.repeat`).
Bounds hold at the interval's confidence each.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from slim.decision.candidates import DEFAULT_TOLERANCE, THROUGHPUT, UNITS, CandidateView, cap_number
from slim.decision.rule import eq13_choice


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


@dataclass(frozen=True)
class Exclusion:
    """Why a candidate cannot change the decision, in words; `by_bound` where it rests on an interval
    of an unmeasured candidate, not on a measurement."""

    cap: float
    reason: str
    by_bound: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"cap": cap_number(self.cap), "reason": self.reason}


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
    certified: bool = True
    """Whether the incumbent met Eq. 13 at the bounds' confidence (`certify`); False for a search's
    best measured cap where it stopped before one did (`best_measured`)."""

    @property
    def feasible(self) -> bool:
        return bool(np.isfinite(self.batch_cap))

    def to_dict(self) -> dict[str, Any]:
        return {"max_num_seqs": cap_number(self.batch_cap), "objective": self.objective_name,
                "objective_value": _json(self.objective), "total_token_throughput": _json(self.throughput_per_s),
                "measured": {name: _json(value) for name, value in self.values_ms.items()},
                "settled": self.settled, "slo_ms": {name: _json(value) for name, value in self.limits_ms.items()},
                "epsilon": self.epsilon, "tolerance": self.tolerance,
                "throughput_at_one": [_json(v) for v in self.throughput_at_one],
                "throughput_at_one_measured": self.throughput_at_one_measured,
                "exclusions": [e.to_dict() for e in self.exclusions],
                "challengers": [cap_number(c) for c in self.challengers],
                "unjudged": [cap_number(c) for c in self.unjudged],
                "needs_throughput_at_one": self.needs_throughput_at_one, "certified": self.certified,
                "notes": list(self.notes), "repeat": [cap_number(c) for c in self.repeat]}


def _json(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def pending(limits_ms: dict[str, float], epsilon: float, tolerance: float, note: str) -> Certificate:
    """The certificate of a decision that waits for something (the reference run of a relative SLO)."""
    nan = float("nan")
    return Certificate(nan, nan, nan, {}, False, limits_ms, epsilon, tolerance, (nan, nan), False, notes=(note,))


def _measured_within(view: CandidateView) -> np.ndarray:
    """Per candidate: measured on everything (`CandidateView.complete`) and within every SLO."""
    meets = view.complete.copy()
    for c in view.constraints:
        meets &= c.estimates.value <= c.limit_ms
    return meets


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
    meets = _measured_within(view)
    with np.errstate(invalid="ignore", divide="ignore"):
        efficiency_low = t.value / (caps * t_one[1])
        efficiency_high = t.value / (caps * t_one[0])
    efficient_maybe = meets & (efficiency_high > epsilon)
    # The incumbent: Eq. 13 on the measured candidates, efficient even at the upper bound of T(1).
    incumbent = int(eq13_choice(goal.value, meets, efficiency_low, epsilon, complete)[0])
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


def best_measured(certificate: Certificate, view: CandidateView, why: str) -> Certificate:
    """`certificate` of a search that stopped before it settled, with no certified incumbent, given the
    best measured cap as its choice, marked not `Certificate.certified`: Eq. 13 among the measured
    candidates alone, ``T(1)`` read as a measured curve without cap 1 reads it (the smallest measured
    cap's throughput over its cap, as `slim.decision.rule.recommend` reads it without a ``T(1)`` and
    the replay's model-free searches choose, `slim.paper.replay.searches.measured_choice`). It stays
    open and says why in its notes (`why` names the stop); unchanged where it has an incumbent, is
    settled, or no measured cap meets the SLOs and that floor."""
    complete = view.complete
    if certificate.feasible or certificate.settled or not complete.any():
        return certificate
    caps, t = view.caps, view.throughput
    first = int(np.flatnonzero(complete)[0])
    meets = _measured_within(view)
    with np.errstate(invalid="ignore", divide="ignore"):
        efficiency = t.value / (caps * (t.value[first] / caps[first]))
    chosen = int(eq13_choice(view.goal.value, meets, efficiency, certificate.epsilon, complete)[0])
    if chosen < 0:
        return certificate
    note = (f"{why}: the best measured cap by Eq. 13, T(1) read from the smallest measured cap "
            f"{caps[first]:g} (not certified)")
    return replace(certificate, batch_cap=float(caps[chosen]), objective=float(view.goal.value[chosen]),
                   throughput_per_s=float(t.value[chosen]),
                   values_ms={c.name: float(c.estimates.value[chosen]) for c in view.constraints},
                   notes=(*certificate.notes, note), certified=False)


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
    with np.errstate(divide="ignore", invalid="ignore"):   # T(1) unbounded below (nothing predicts it): no bound
        efficiency_high = (t.value[i] if t.measured[i] else t.high[i]) / (cap * t_one[0])
    if t.measured[i]:
        if efficiency_high <= epsilon:
            return Exclusion(float(cap), f"measured efficiency <= epsilon {epsilon:g}")
    elif efficiency_high <= epsilon:
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


