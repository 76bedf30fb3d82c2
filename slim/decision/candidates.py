"""The candidates a batch-cap decision judges: per candidate cap, each quantity's measurement or its
prediction with an interval, the SLO constraints and the objective, built by one function.

Every decision of the project (`slim advise`, `slim tune`, the paper's advisor and the tuning replay)
hands its own evidence to `candidate_view`: measured runs, a predictor's curve, a tuning session's
belief. The quantities are named once here: `THROUGHPUT` (total-token throughput, tokens/s, Eq. 6),
`GOODPUT` (requests/s within every goodput bound) and the SLO metrics of `slim.specs.slo` (ms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from slim.defaults import DEFAULT_CANDIDATE_CAPS, DEFAULT_EPSILON, DEFAULT_TOLERANCE  # noqa: F401 (re-exported)

THROUGHPUT = "throughput"
"""Total-token throughput (tokens/s, Eq. 6): what every candidate has and the paper's objective."""
GOODPUT = "goodput"
"""Requests per second that meet every bound of vLLM's ``--goodput``: the objective where one is given."""
HIGHER_IS_BETTER = (THROUGHPUT, GOODPUT)
"""The quantities a decision maximises; every other quantity is an SLO metric (ms), smaller is better."""
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

    @classmethod
    def facts(cls, values) -> Estimates:
        """Every candidate measured at `values` (no scatter)."""
        values = np.asarray(values, dtype=float)
        n = len(values)
        return cls(np.ones(n, dtype=bool), values, values, values, values, np.zeros(n))

    @classmethod
    def predictions(cls, mean, high=None) -> Estimates:
        """No candidate measured: the predicted `mean`, and the upper bound `high` where one is held
        (else the mean itself)."""
        mean = np.asarray(mean, dtype=float)
        n = len(mean)
        return cls(np.zeros(n, dtype=bool), np.full(n, np.nan), mean, mean,
                   mean if high is None else np.asarray(high, dtype=float), np.zeros(n))

    def point(self, upper: bool = False) -> np.ndarray:
        """Measured where measured, else the predicted mean (`upper`: its interval's upper bound)."""
        return np.where(self.measured, self.value, self.high if upper else self.mean)

    @property
    def predicted(self) -> np.ndarray:
        """Whether something predicts the quantity at each candidate."""
        return np.isfinite(self.mean)


@dataclass(frozen=True)
class Constraint:
    """One SLO: its metric's name (vLLM's), its bound (ms; NaN while it waits for its reference run)
    and the metric's estimates."""

    name: str
    limit_ms: float
    estimates: Estimates


@dataclass(frozen=True)
class CandidateView:
    """One workload's candidates, ascending by cap: throughput, the SLO constraints, the objective
    (None: throughput, the paper's; else goodput's estimates), which candidates were tried and gave
    no usable run, which measured ones may be measured again, and ``T(1)`` of the efficiency floor
    where the caller knows it better than the smallest candidate does (a curve read at cap 1)."""

    caps: np.ndarray
    failed: np.ndarray
    throughput: Estimates
    constraints: tuple[Constraint, ...] = ()
    objective: Estimates | None = None
    repeatable: np.ndarray | None = None
    throughput_at_one: float | None = None

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


def candidate_view(caps, estimates_of: Callable[[str], Estimates], limits_ms: Mapping[str, float],
                   goodput: bool = False, failed=None, repeatable=None,
                   throughput_at_one: float | None = None) -> CandidateView:
    """The candidates a decision judges (every caller's one builder): throughput, one constraint per
    SLO of `limits_ms` (metric name -> bound in ms, in the order the SLOs were stated; NaN for a bound
    not resolved yet) and goodput as the objective where `goodput`, each quantity's estimates from
    `estimates_of`; `failed` marks candidates tried without a usable run (default none), `repeatable`
    those that may be measured again (default: no repeats)."""
    caps = np.asarray(caps, dtype=float)
    n = len(caps)
    constraints = tuple(Constraint(name, float(limit) if limit is not None else math.nan, estimates_of(name))
                        for name, limit in limits_ms.items())
    return CandidateView(caps, np.zeros(n, dtype=bool) if failed is None else np.asarray(failed, dtype=bool),
                         estimates_of(THROUGHPUT), constraints, estimates_of(GOODPUT) if goodput else None,
                         None if repeatable is None else np.asarray(repeatable, dtype=bool), throughput_at_one)


def cap_number(value: float) -> int | None:
    """A cap as JSON writes it: an integer (``--max-num-seqs`` takes one), None where there is none."""
    return int(round(value)) if value is not None and np.isfinite(value) else None
