"""The tuning loop: propose, measure, update, until every decision is settled, the bound stops it,
or a budget of runs or GPU-seconds is spent (`run_loop`).

`measure` is a callback: an oracle replaying recorded runs (the tuning replay), or a real benchmark
through `slim.tune.runner`. A failed measurement is recorded and never proposed again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from slim.decision.certificate import Certificate
from slim.tune.layouts import all_settled
from slim.tune.measurement import Measurement, Unusable
from slim.tune.proposals import Proposal, propose
from slim.tune.session import TuneSession


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
        proposals = propose(session)
        if not proposals:
            certificates = session.certificates()
            stopped = ("settled" if all_settled(session)
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
