"""Eq. 13, the batch-cap rule, once for the whole project: the candidate of highest objective among
those within every SLO that still batch efficiently, on measurements where measured.

The paper's rule (Section VII-A), with every SLO of `slim.specs.slo` and the objective ``O``
(total-token throughput ``T``, the paper's, or goodput):

    B_cap = argmax_B O(B)  s.t.  m(B) <= bound_m  for every SLO metric m,
                                 T(B) / (B T(1)) > epsilon                              (13)

`recommend` reads each candidate at its measurement where it was measured (measurements are facts)
and at the predicted mean elsewhere (or the interval's upper bound, for the SLO metrics a confident
decision holds to it); a candidate whose objective or SLO metric is neither measured nor predicted
is left out (unjudged). Ties go to the smaller cap (less KV memory). A constraint *binds* when
dropping it alone would admit a candidate of higher objective; where every better candidate breaks
several, each constraint some better candidate breaks binds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from slim.decision.candidates import CandidateView

EFFICIENCY = "efficiency"
"""The name of Eq. 13's second constraint in `Recommendation.binding`."""


@dataclass(frozen=True)
class Recommendation:
    """Eq. 13's choice: the cap (NaN: none), whether every value behind it is a measurement, the
    objective, throughput and SLO metrics there, its batching efficiency, what keeps a better cap
    out (SLO names and `EFFICIENCY`), why there is none, and the caps left out as unjudged; per
    candidate, each constraint's verdict (`meets`: SLO name -> mask, and `efficient`), the
    efficiency and whether it was judged at all."""

    batch_cap: float
    measured: bool
    objective: float
    throughput_per_s: float
    values_ms: dict[str, float]
    efficiency: float
    binding: tuple[str, ...] = ()
    reason: str = ""
    unjudged: tuple[float, ...] = ()
    meets: dict[str, np.ndarray] = field(default_factory=dict)
    efficient: np.ndarray | None = None
    efficiencies: np.ndarray | None = None
    usable: np.ndarray | None = None

    @property
    def feasible(self) -> bool:
        return bool(np.isfinite(self.batch_cap))


def eq13_choice(goal: np.ndarray, within: np.ndarray, efficiency: np.ndarray, epsilon: float,
                usable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 13 itself, over the last axis (candidates, ascending cap; leading axes are scenarios): the
    admissible candidates (usable, within every SLO, ``T(B) / (B T(1)) > epsilon``) and the position of
    the one of highest objective, the smaller cap on ties; -1 where none is admissible."""
    admissible = usable & within & (efficiency > epsilon)
    best = np.where(admissible, goal, -np.inf)
    chosen = np.argmax(best, axis=-1)
    return np.where(admissible.any(axis=-1), chosen, -1), admissible


def _binding(better: np.ndarray, verdicts: dict[str, np.ndarray]) -> tuple[str, ...]:
    """The constraints whose removal alone admits a better candidate, else those any better one breaks."""
    alone = []
    for name, ok in verdicts.items():
        others = np.ones(len(better), dtype=bool)
        for other, other_ok in verdicts.items():
            if other != name:
                others &= other_ok
        if np.any(better & others & ~ok):
            alone.append(name)
    if alone or not better.any():
        return tuple(alone)
    return tuple(name for name, ok in verdicts.items() if np.any(better & ~ok))


def recommend(view: CandidateView, epsilon: float, upper: frozenset[str] = frozenset()) -> Recommendation:
    """Eq. 13 on each candidate's measurement, or its predicted mean where not measured (module
    docstring); for the SLO metrics named in `upper`, an unmeasured candidate is held to its
    interval's upper bound. ``T(1)`` is `CandidateView.throughput_at_one` where given, else the
    smallest candidate's throughput over its cap. Ties go to the smaller cap (less memory)."""
    caps = view.caps
    throughput = view.throughput.point()
    goal = view.goal.point()
    t_one = view.throughput_at_one if view.throughput_at_one is not None else throughput[0] / caps[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        efficiency = throughput / (caps * t_one)
    meets = {c.name: c.estimates.point(c.name in upper) <= c.limit_ms for c in view.constraints}
    judged = np.isfinite(goal) & np.isfinite(throughput)
    for c in view.constraints:
        judged &= np.isfinite(c.estimates.point())
    failed = view.failed & ~view.throughput.measured
    usable = judged & ~failed
    meets_all = np.ones(len(caps), dtype=bool)
    for mask in meets.values():
        meets_all &= mask
    efficient = efficiency > epsilon
    chosen, admissible = eq13_choice(goal, meets_all, efficiency, epsilon, usable)
    unjudged = tuple(float(cap) for cap in caps[~judged & ~failed])
    masks = dict(meets=meets, efficient=efficient, efficiencies=efficiency, usable=usable)
    nan = float("nan")
    if not admissible.any():
        if not usable.any():
            reason = "no candidate has a measurement or a prediction of every SLO metric"
        elif not (usable & meets_all).any():
            worst = [f"{c.name} (smallest {np.nanmin(np.where(usable, c.estimates.point(c.name in upper), np.nan)):.4g}"
                     f" ms > {c.limit_ms:.4g} ms)" for c in view.constraints if not (usable & meets[c.name]).any()]
            reason = "no candidate meets " + (", ".join(worst) if worst else "every SLO at once")
        elif np.isnan(efficiency[usable & meets_all]).all():
            reason = "T(1) is neither measured nor predicted: the efficiency floor cannot be judged yet"
        else:
            reason = (f"no candidate within the SLOs batches efficiently: largest T(B)/(B T(1)) "
                      f"{np.nanmax(np.where(usable & meets_all, efficiency, np.nan)):.4g} <= epsilon {epsilon:g}")
        return Recommendation(nan, False, nan, nan, {}, nan, reason=reason, unjudged=unjudged, **masks)
    chosen = int(chosen)
    better = usable & (goal > goal[chosen])
    binding = _binding(better, {**meets, EFFICIENCY: efficient})
    values = {c.name: float(c.estimates.point(c.name in upper)[chosen]) for c in view.constraints}
    measured = bool(view.complete[chosen])
    return Recommendation(float(caps[chosen]), measured, float(goal[chosen]), float(throughput[chosen]), values,
                          float(efficiency[chosen]), binding, unjudged=unjudged, **masks)
