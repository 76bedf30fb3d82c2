"""Simulated runs kept by whoever holds a `SimulationCache`: a run's schedule and its client latencies
are deterministic functions of its configuration, the architecture, the accelerator, the constants
and the seed, so a run asked for again is read from the cache instead of simulated again.

A tuning session, an advice or a paper artefact creates one cache and hands it to what it calls
(`slim.sim.schedules.simulate_schedules`, `slim.predictors.TrainingRuns`); nothing is kept between
callers that do not share one.
"""

from __future__ import annotations


class SimulationCache:
    """Schedules (`slim.sim.schedules.RunSchedule`) and client latencies
    (`slim.sim.client_latency.ClientLatencies`) by the key of the run they belong to."""

    def __init__(self) -> None:
        self.schedules: dict[tuple, object] = {}
        self.client_latencies: dict[tuple, object] = {}

    def __len__(self) -> int:
        return len(self.schedules) + len(self.client_latencies)
