"""The bound on what `slim tune` spends: on every workload, at most ``(1 + margin)`` times the GPU time of
a plain bisection over the same candidates, on the same runs, whatever the prior.

A user without a model bisects the candidate caps for the largest one within every SLO (latency
grows with the cap), as the tuning replay's model-free bisection does (`ShadowBisection.search`).
Which caps that bisection probes depends only on the largest cap within the SLOs, ``f`` (every cap
at or below it is within them, every cap above is not): its probes are the path ``P(f)``
(`ShadowBisection.path_for`). The
caps the session has measured (their first runs, as the bisection would have seen them) leave a
range of ``f`` consistent with them (`ShadowBisection.consistent`), and so:

* the caps **surely on the path**, on ``P(f)`` for every consistent ``f``: a bisection pays for their
  first runs too. The bisection's next probe (its path followed through the measured outcomes and
  those they imply) is one of them, and may always run;
* every other run is **extra**: a cap the model chose (it reorders: a cap that turns out to lie on
  the path stops counting as extra once the measurements say so), a repeat, ``T(1)``;
* a **lower bound** of the bisection's GPU time, the least over consistent ``f`` of the sum over
  ``P(f)`` of each probe's GPU time: measured, or bounded below (`run_cost_floor`) by the
  accelerator's roofline (no run beats its datasheet's peak bandwidth and FLOP/s: SLIM's ideal
  machine, Eqs. 5-12 at efficiencies of one; on every run of the four real datasets the recorded
  time is 1.1-11 times it) and by the measured runs (a batch's step never gets faster when
  sequences join it: an online run at cap ``c`` takes at least ``a / c`` of a run at a measured cap
  ``a <= c`` with the same prompts, a static batch of ``c`` at least a measured batch ``a <= c``).

The **rule** (`CostAccount.admits`): an extra run may start only if the extra spending, with that
run's cost (predicted at the lower bound of its throughput interval), stays within ``margin`` times
the lower bound; it is given the allowance left as its time limit (`CostAccount.limit_gpu_seconds`;
the loop stops it there), so no misprediction of its cost can break the bound. When neither the
next probe nor an extra run is left, the workload stops with the best measured cap. The
certificate still decides when to stop earlier: a workload settles as soon as it can.

By construction, then, a workload's GPU time is at most the bisection's plus ``margin`` times it: the
runs surely on the path are the bisection's own, and the extra ones never exceed ``margin`` times a
lower bound of its cost. The model may reorder and skip the bisection's runs, and add no more than
the margin. Where the session's measurements contradict the prior beyond the prior's own
intervals (`slim.tune.session.Learned`), the allowance is withheld: the session leans on
measurement, the bisection's order with the certificate's early stop, and says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from slim.defaults import DEFAULT_MARGIN  # noqa: F401 (the tuning loop's margin, imported from here)

SCATTER_SLACK_SD = 3.0
"""A lower bound from a measured run gives way by this many standard deviations of its scatter."""


@dataclass(frozen=True)
class ShadowBisection:
    """The bisection of one workload's candidates (ascending caps, positions 0..n-1) for the largest
    within every SLO: from a cap known to meet them (the reference run of a relative SLO), or from
    nothing known (position -1). `follow` is the one walk every question about it asks."""

    n_candidates: int
    start: int | None = None

    @property
    def low(self) -> int:
        return self.start if self.start is not None else -1

    def follow(self, outcome: Callable[[int], bool | None]) -> tuple[list[int], int, int, int | None]:
        """Walk the bisection, asking `outcome` whether each probe is within the SLOs (None: not known):
        the probes answered, the range ``[low, high]`` of the largest position within them that the
        answers leave, and the first probe not known (None when the walk is done)."""
        low, high, probes = self.low, self.n_candidates - 1, []
        while low < high:
            middle = (low + high + 1) // 2
            within = outcome(middle)
            if within is None:
                return probes, low, high, middle
            probes.append(middle)
            low, high = (middle, high) if within else (low, middle - 1)
        return probes, low, high, None

    def path_for(self, largest_within: int) -> list[int]:
        """``P(f)``: the probes of the bisection when the largest position within the SLOs is `largest_within`."""
        return self.follow(lambda middle: middle <= largest_within)[0]

    def search(self, within: Callable[[int], bool]) -> int:
        """Run the bisection, measuring each probe with `within`: the largest position within the SLOs."""
        return self.follow(within)[1]

    def consistent(self, outcomes: Mapping[int, bool]) -> range:
        """The largest positions within the SLOs that every measured outcome (position -> within)
        allows; where noise makes them disagree with each other, those the bisection's own probes
        allow (the path followed through the measured outcomes)."""
        within = [p for p, ok in outcomes.items() if ok]
        over = [p for p, ok in outcomes.items() if not ok]
        low = max([self.low, *within])
        high = min([self.n_candidates, *over]) - 1
        if low <= high:
            return range(low, high + 1)
        _, low, high, _ = self.follow(outcomes.get)
        return range(low, high + 1)

    def next_probe(self, outcomes: Mapping[int, bool]) -> int | None:
        """The bisection's next probe: its path followed through the measured outcomes and those the
        consistent range implies; None when it is done."""
        allowed = self.consistent(outcomes)

        def known(middle: int) -> bool | None:
            if middle in outcomes:
                return outcomes[middle]
            if middle <= allowed.start:
                return True
            return False if middle > allowed.stop - 1 else None

        return self.follow(known)[3]


def run_cost_floor(caps: np.ndarray, roofline_gpu_seconds: np.ndarray, facts: Mapping[int, tuple[float, float]],
                   static_batch: bool) -> np.ndarray:
    """Per position: a lower bound of one run's GPU time (module docstring): the measured run's own
    time where `facts` (position -> (GPU-seconds, scatter)) has one, else the larger of the
    roofline's and what the measured runs imply."""
    floor = np.asarray(roofline_gpu_seconds, dtype=float).copy()
    for position, cap in enumerate(caps):
        if position in facts:
            floor[position] = facts[position][0]
            continue
        for other, (seconds, scatter) in facts.items():
            if caps[other] <= cap and seconds > 0:
                ratio = 1.0 if static_batch else float(caps[other]) / float(cap)
                floor[position] = max(floor[position], seconds * ratio * math.exp(-SCATTER_SLACK_SD * scatter))
    return floor


@dataclass(frozen=True)
class CostAccount:
    """One workload's spending against the bound (module docstring)."""

    margin: float
    on_path_gpu_seconds: float
    extra_gpu_seconds: float
    lower_bound_gpu_seconds: float
    next_probe: int | None
    sure: frozenset[int] = frozenset()
    contradicted: bool = False

    @property
    def allowance_gpu_seconds(self) -> float:
        """What extra runs may spend in all (none while the prior is contradicted)."""
        return 0.0 if self.contradicted else self.margin * self.lower_bound_gpu_seconds

    @property
    def limit_gpu_seconds(self) -> float:
        """What the next extra run may spend: the allowance left."""
        return max(self.allowance_gpu_seconds - self.extra_gpu_seconds, 0.0)

    def on_path(self, position: int, first_run: bool) -> bool:
        """Whether a run of `position` is a bisection's own: the first run of a cap surely on its path."""
        return first_run and position in self.sure

    def admits(self, position: int, predicted_gpu_seconds: float, first_run: bool) -> bool:
        """Whether a run of `position` may start: the first run of a cap surely on the bisection's
        path, or an extra run whose predicted cost fits the allowance left."""
        return self.on_path(position, first_run) or bool(predicted_gpu_seconds <= self.limit_gpu_seconds)

    def describe(self) -> str:
        state = ("the prior is contradicted: no extra run" if self.contradicted else
                 f"extra {self.extra_gpu_seconds:,.0f} of {self.allowance_gpu_seconds:,.0f} GPU-s allowed")
        return (f"bisection's probes {self.on_path_gpu_seconds:,.0f} GPU-s, {state} (margin {self.margin:g} of a "
                f"bisection's >= {self.lower_bound_gpu_seconds:,.0f} GPU-s)")


def cost_account(shadow: ShadowBisection, caps: np.ndarray, outcomes: Mapping[int, bool],
                 first_run_charged: Mapping[int, float], spent_gpu_seconds: float,
                 facts: Mapping[int, tuple[float, float]], roofline_gpu_seconds: np.ndarray, static_batch: bool,
                 margin: float, contradicted: bool = False) -> CostAccount:
    """The account of one workload: `outcomes` each measured position's first run (within every SLO
    or not), `first_run_charged` what each first run was charged, `spent_gpu_seconds` everything the
    session was charged for the workload, `facts` each first run's GPU time and scatter, charged or
    not (a run the session was given, such as the free reference run, still says what the runs
    cost), `roofline_gpu_seconds` the roofline's floor of each position's run."""
    largest = shadow.consistent(outcomes)
    paths = [shadow.path_for(f) for f in largest]
    sure = frozenset(set.intersection(*(set(path) for path in paths))) if paths else frozenset()
    floor = run_cost_floor(caps, roofline_gpu_seconds, facts, static_batch)
    lower = min((float(sum(floor[p] for p in path)) for path in paths), default=0.0)
    # The run that starts the bisection (a relative SLO's reference) is one a bisection needs as well.
    needed = sure | ({shadow.start} if shadow.start is not None else set())
    on_path = float(sum(first_run_charged.get(p, 0.0) for p in needed))
    return CostAccount(margin, on_path, max(spent_gpu_seconds - on_path, 0.0), lower, shadow.next_probe(outcomes),
                       sure, contradicted)


class BisectionOutlook:
    """What the bisection's remaining probes are expected to cost over the belief's scenarios, and
    what measuring one cap now, outside its order, would leave of them: the one-step look-ahead that
    decides whether an extra run is worth its cost (`worth`).

    In a scenario the largest cap within the SLOs is ``f``, and the bisection still pays for the probes
    of ``P(f)`` not measured yet. An extra run at ``s`` costs its own time and then, unless ``s`` is the
    scenario's decision (the certificate can settle on it), the probes of ``P(f)`` it does not decide:
    a cap within the SLOs tells the same of every cap below it, one over them of every cap above."""

    def __init__(self, shadow: ShadowBisection, within: np.ndarray, measured: set[int], decisions: np.ndarray,
                 seconds: np.ndarray):
        self.shadow, self.measured, self.decisions = shadow, measured, decisions
        self.seconds = np.asarray(seconds, dtype=float)
        largest = [int(np.flatnonzero(row).max()) if row.any() else shadow.low for row in within]
        self.largest = np.array(largest)
        self.paths = {f: [p for p in shadow.path_for(f) if p not in measured] for f in set(largest)}

    def follow_gpu_seconds(self) -> float:
        """The expected GPU time of the bisection's remaining probes."""
        return float(np.mean([sum(self.seconds[p] for p in self.paths[f]) for f in self.largest]))

    def extra_gpu_seconds(self, position: int) -> float:
        """The expected GPU time of measuring `position` now and then what the bisection still needs."""
        total = 0.0
        for f, decision in zip(self.largest, self.decisions):
            if decision == position:
                continue
            within = position <= f
            total += sum(self.seconds[p] for p in self.paths[f]
                         if p != position and not (p <= position if within else p >= position))
        return float(self.seconds[position] + total / len(self.largest))

    def worth(self, position: int) -> bool:
        """Whether an extra run at `position` is expected to cost less than following the bisection."""
        return self.extra_gpu_seconds(position) < self.follow_gpu_seconds()
