"""When is a batch-cap decision settled? The BCA rule (Eq. 13) judged on measurements and
calibrated bounds instead of point predictions.

Eq. 13 picks the cap of highest throughput among those that meet the SLO and batch efficiently:
``max T(B)  s.t.  E2E(B) <= SLO,  T(B) / (B T(1)) > epsilon``. With some candidates measured and
the others known only within intervals (`slim.advisor.tune_model.Belief`), the decision is
**settled** when

* the chosen cap (the *incumbent*) was measured, met the SLO, and its efficiency exceeds epsilon
  even at the upper bound of ``T(1)`` (or the measured ``T(1)``); and
* every other candidate is excluded: measured and worse, measured over the SLO, measured or
  bounded below the efficiency floor, its E2E lower bound above the SLO, or its throughput upper
  bound within ``(1 + tolerance)`` of the incumbent's measured throughput.

Or, with no incumbent, when every candidate is excluded as infeasible (no cap meets the SLO) and
not every one of them merely failed to run.
Under run-to-run noise (`certify`'s ``noise_z`` > 0) a measurement is itself uncertain: the decision
is not settled while the incumbent's measured E2E lies within ``noise_z`` standard deviations of
its runs' mean below the SLO (it may truly break it), or a measured cap that would beat the
incumbent lies within them above the SLO (it may truly meet it), and that cap may still be
measured again (`CandidateView.repeatable`): those caps are to *repeat*.
Otherwise the candidates that are not excluded are the *challengers*: what a measurement could
change. Bounds hold at the belief's confidence each; the certificate names the measurements and
bounds that settle it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

DEFAULT_TOLERANCE = 0.01
"""A challenger must be able to beat the incumbent by more than 1 % of throughput to matter."""


@dataclass(frozen=True)
class CandidateView:
    """One workload's candidates, ascending by cap: measurements (NaN where not measured) and the
    belief's bounds; `failed` candidates were tried and gave no usable run."""

    caps: np.ndarray
    measured: np.ndarray
    failed: np.ndarray
    throughput_measured: np.ndarray
    e2e_measured: np.ndarray
    throughput_mean: np.ndarray
    throughput_low: np.ndarray
    throughput_high: np.ndarray
    e2e_mean: np.ndarray
    e2e_low: np.ndarray
    e2e_high: np.ndarray
    e2e_measured_log_sd: np.ndarray | None = None   # standard deviation of a measured mean's log E2E
    repeatable: np.ndarray | None = None            # measured candidates that may be measured again


@dataclass(frozen=True)
class Exclusion:
    """Why a candidate cannot change the decision, in words and as the bound that says so;
    `by_bound` where it rests on an interval of an unmeasured candidate, not on a measurement."""

    cap: float
    reason: str
    by_bound: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"cap": self.cap, "reason": self.reason}


@dataclass(frozen=True)
class Certificate:
    """A workload's decision state: the incumbent (NaN if none), whether it is settled, what
    settles it (`exclusions`) and what could still change it (`challengers`, and whether the
    efficiency floor waits for a measurement of ``T(1)``)."""

    batch_cap: float
    throughput_per_s: float
    e2e_latency_s: float
    settled: bool
    slo_s: float
    epsilon: float
    tolerance: float
    throughput_at_one: tuple[float, float]
    throughput_at_one_measured: bool
    exclusions: tuple[Exclusion, ...] = ()
    challengers: tuple[float, ...] = ()
    needs_throughput_at_one: bool = False
    notes: tuple[str, ...] = field(default=())
    repeat: tuple[float, ...] = ()

    @property
    def feasible(self) -> bool:
        return bool(np.isfinite(self.batch_cap))

    def to_dict(self) -> dict[str, Any]:
        return {"batch_cap": _json(self.batch_cap), "throughput_per_s": _json(self.throughput_per_s),
                "e2e_latency_s": _json(self.e2e_latency_s), "settled": self.settled, "slo_s": self.slo_s,
                "epsilon": self.epsilon, "tolerance": self.tolerance,
                "throughput_at_one": [_json(v) for v in self.throughput_at_one],
                "throughput_at_one_measured": self.throughput_at_one_measured,
                "exclusions": [e.to_dict() for e in self.exclusions], "challengers": list(self.challengers),
                "needs_throughput_at_one": self.needs_throughput_at_one, "notes": list(self.notes),
                "repeat": list(self.repeat)}


def _json(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def certify(view: CandidateView, slo_s: float, epsilon: float, tolerance: float = DEFAULT_TOLERANCE,
            noise_z: float = 0.0) -> Certificate:
    """The decision state of one workload (module docstring). ``T(1)`` of the efficiency floor is
    the smallest candidate's throughput divided by its cap (cap 1 itself where it is a candidate,
    as `slim.advisor.bca.throughput_at_one` reads a measured curve). With ``noise_z`` > 0 (and the
    view's measurement scatter), a measurement within ``noise_z`` standard deviations of the SLO
    that could change the decision is to repeat."""
    caps = view.caps
    one = 0                      # the smallest cap: 1, or T(B_min) / B_min as for a measured curve
    one_measured = bool(view.measured[one])
    scale = caps[one]
    t_one = ((view.throughput_measured[one] / scale,) * 2 if one_measured
             else (view.throughput_low[one] / scale, view.throughput_high[one] / scale))
    measured = view.measured
    meets_slo = measured & (view.e2e_measured <= slo_s)
    efficient_sure = meets_slo & (view.throughput_measured / (caps * t_one[1]) > epsilon)
    efficient_maybe = meets_slo & (view.throughput_measured / (caps * t_one[0]) > epsilon)
    incumbent = -1
    if efficient_sure.any():
        best = np.where(efficient_sure, view.throughput_measured, -np.inf)
        incumbent = int(np.flatnonzero(best == best.max())[0])     # ties: the smaller cap
    reference = view.throughput_measured[incumbent] * (1.0 + tolerance) if incumbent >= 0 else 0.0
    exclusions, challengers = [], []
    needs_one = False
    for i, cap in enumerate(caps):
        if i == incumbent:
            continue
        if view.failed[i] and not measured[i]:
            exclusions.append(Exclusion(float(cap), "no usable run (tried and failed)"))
            continue
        if measured[i]:
            if not meets_slo[i]:
                exclusions.append(Exclusion(float(cap),
                                            f"measured E2E {view.e2e_measured[i]:.3g} s > SLO {slo_s:.3g} s"))
            elif not efficient_maybe[i]:
                exclusions.append(Exclusion(float(cap), f"measured efficiency <= epsilon {epsilon:g}"))
            elif view.throughput_measured[i] <= reference:
                exclusions.append(Exclusion(float(cap), f"measured T {view.throughput_measured[i]:,.0f} tokens/s "
                                                         f"<= {1 + tolerance:g} x the choice's"))
            else:
                needs_one = True     # better and within the SLO, but its efficiency waits for T(1)
            continue
        if view.e2e_low[i] > slo_s:
            exclusions.append(Exclusion(float(cap), f"E2E lower bound {view.e2e_low[i]:.3g} s > SLO {slo_s:.3g} s",
                                        by_bound=True))
        elif view.throughput_high[i] / (cap * t_one[0]) <= epsilon:
            exclusions.append(Exclusion(float(cap), f"efficiency upper bound <= epsilon {epsilon:g}", by_bound=True))
        elif incumbent >= 0 and view.throughput_high[i] <= reference:
            exclusions.append(Exclusion(float(cap), f"T upper bound {view.throughput_high[i]:,.0f} tokens/s "
                                                     f"<= {1 + tolerance:g} x the choice's measured T", by_bound=True))
        else:
            challengers.append(float(cap))
    if incumbent < 0 and efficient_maybe.any() and not one_measured:
        needs_one = True             # a measured cap meets the SLO; only T(1) keeps it from being chosen
    repeat = _to_repeat(view, slo_s, incumbent, reference, meets_slo,
                        view.throughput_measured / (caps * t_one[0]), epsilon, noise_z)
    settled = not challengers and not needs_one and not repeat
    if incumbent < 0 and all(view.failed[i] and not measured[i] for i in range(len(caps))):
        settled = False   # nothing ran: no measurement or bound rules any cap out
    if incumbent >= 0:
        return Certificate(float(caps[incumbent]), float(view.throughput_measured[incumbent]),
                           float(view.e2e_measured[incumbent]), settled, slo_s, epsilon, tolerance,
                           (float(t_one[0]), float(t_one[1])), one_measured, tuple(exclusions), tuple(challengers),
                           needs_one, repeat=repeat)
    nan = float("nan")
    return Certificate(nan, nan, nan, settled, slo_s, epsilon, tolerance, (float(t_one[0]), float(t_one[1])),
                       one_measured, tuple(exclusions), tuple(challengers), needs_one,
                       ("no candidate meets the SLO and the efficiency floor",) if settled else (), repeat)


def _to_repeat(view: CandidateView, slo_s: float, incumbent: int, reference: float, meets_slo: np.ndarray,
               efficiency_high: np.ndarray, epsilon: float, noise_z: float) -> tuple[float, ...]:
    """The measured caps whose side of the SLO the run-to-run noise leaves open and whose side
    decides (module docstring), where they may be measured again: the incumbent, and the caps over
    the SLO that would beat it (efficiently, by more than the tolerance) if they met it."""
    if noise_z <= 0 or view.e2e_measured_log_sd is None or view.repeatable is None:
        return ()
    with np.errstate(invalid="ignore"):
        margin = np.abs(np.log(view.e2e_measured / slo_s)) / np.maximum(view.e2e_measured_log_sd, 1e-12)
        unsure = view.measured & view.repeatable & (margin <= noise_z)
        could_beat = view.measured & ~meets_slo & (view.throughput_measured > reference) & (efficiency_high > epsilon)
    decides = could_beat.copy()
    if incumbent >= 0:
        decides[incumbent] = True
    return tuple(float(c) for c in view.caps[unsure & decides])
