"""The belief about unmeasured candidates read as scenarios: each candidate's probability of being
the decision once every candidate is known, what `slim tune` weighs its next measurement by.

`decision_probabilities` draws every unmeasured quantity at the standard normal quantiles
`scenario_quantiles` (one draw for the whole curve) and applies Eq. 13 in each scenario.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from slim.decision.candidates import CandidateView, Estimates
from slim.decision.rule import eq13_choice

SCENARIO_COUNT = 64


@cache
def scenario_quantiles() -> np.ndarray:
    """The scenarios of `decision_probabilities`: `SCENARIO_COUNT` standard normal quantiles at
    equal weights (deterministic; computed once, read-only)."""
    from scipy.stats import norm

    quantiles = norm.ppf((np.arange(SCENARIO_COUNT) + 0.5) / SCENARIO_COUNT)
    quantiles.setflags(write=False)
    return quantiles


def scenario_values(view: CandidateView, unknown_met: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The belief read as scenarios (`decision_probabilities`): per scenario and candidate, whether it
    is within every SLO (a metric nothing predicts counts as met, or with `unknown_met` False as not
    met), its objective and its throughput."""
    z = scenario_quantiles()[:, None]

    def draw(e: Estimates, sign: float) -> np.ndarray:
        sd = np.where(np.isfinite(e.log_sd), e.log_sd, 0.0)
        return np.where(e.measured, e.value, e.mean * np.exp(sign * sd * z))

    within = np.ones((SCENARIO_COUNT, len(view.caps)), dtype=bool)
    for c in view.constraints:
        values = draw(c.estimates, -1.0)
        within &= ~(values > c.limit_ms) if unknown_met else (values <= c.limit_ms)   # NaN: unpredicted
    throughput = draw(view.throughput, 1.0)
    goal = throughput if view.objective is None else draw(view.objective, 1.0)
    return within, np.where(np.isfinite(goal), goal, np.nan), throughput


def scenario_decisions(view: CandidateView, epsilon: float, unknown_met: bool = True) -> np.ndarray:
    """Per scenario (`scenario_quantiles`): the position Eq. 13 chooses once every candidate is known,
    -1 where no candidate is admissible."""
    within, goal, throughput = scenario_values(view, unknown_met)
    failed = view.failed & ~view.throughput.measured
    efficiency = throughput / (view.caps * (throughput[:, :1] / view.caps[0]))
    return eq13_choice(goal, within, efficiency, epsilon, ~failed & np.isfinite(goal))[0]


def decision_probabilities(view: CandidateView, epsilon: float, unknown_met: bool = True) -> np.ndarray:
    """Per candidate: the probability that Eq. 13 chooses it once every candidate is known, reading
    the intervals as scenarios: at each standard normal quantile ``z`` (`scenario_quantiles`, one
    draw for the whole curve: a prior too slow at one cap is too slow at its neighbours, and a
    slower run is slower in every metric), an unmeasured candidate's throughput and objective are
    their means times ``exp(sd z)`` and each SLO metric its mean divided by ``exp(sd z)``; a metric
    nothing predicts counts as met (only a run can tell), or with `unknown_met` False as not met (no
    scenario can count on it). Measured values stay what they are."""
    chosen = scenario_decisions(view, epsilon, unknown_met)
    return np.bincount(chosen[chosen >= 0], minlength=len(view.caps)) / SCENARIO_COUNT
