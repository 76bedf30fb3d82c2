"""SIM's predictions of cached schedules at any constants: durations, throughputs, mean batches.

A cached schedule (`slim.sim.schedules`) fixes which steps a run takes; its duration at constants
``u`` is piecewise linear in ``u`` (`slim.sim.linear_cost`), so predicting a run, or differentiating
its duration for a calibration (`slim.sim.schedule_fit`), needs no simulation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from slim.errors import FitError
from slim.sim.constants import SimConstants
from slim.sim.linear_cost import LinearCost, StatsMatrix, coordinates_of
from slim.sim.metrics import ScheduleStats
from slim.sim.schedules import RunSchedule, ScheduleTable
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware


def _window(stats: ScheduleStats | None) -> ScheduleStats:
    """A window's statistics; a missing one (a static batch has no test prompt) takes no time."""
    if stats is not None:
        return stats
    empty = ScheduleStats(np.zeros(1), np.zeros(1))
    empty.running_weighted = ScheduleStats(np.zeros(1), np.zeros(1))
    return empty


class ScheduleCosts:
    """Durations, throughputs and mean batches of many cached schedules at any constants."""

    def __init__(self, schedules: Sequence[RunSchedule], architectures: ArchitectureCatalog, hw: Hardware,
                 consts: SimConstants):
        failed = [schedule.key for schedule in schedules if not schedule.ok]
        if failed:
            raise FitError(f"{len(failed)} run(s) cannot start in the simulator (KV cache or weights do not fit), "
                           f"e.g. {failed[0]}; leave them out")
        self.consts = consts
        self.completed = np.array([s.completed for s in schedules], dtype=float)
        self.tokens_per_request = np.array([s.tokens_per_request for s in schedules], dtype=float)
        self.num_preemptions = np.array([s.num_preemptions for s in schedules])
        self.static_batch = np.array([s.key.static_batch for s in schedules], dtype=bool)
        self._groups = []
        # One cost per architecture and tensor-parallel degree; a model with sliding windows also per
        # lengths, whose attended share of the context they set (`slim.sim.modern_cost.window_share`).
        by_arch: dict[tuple, list[int]] = {}
        for index, schedule in enumerate(schedules):
            key = schedule.key
            lengths = ((key.input_len, key.output_len) if architectures[key.model].sliding_window is not None
                       else (None, None))
            by_arch.setdefault((key.model, key.tensor_parallel, *lengths), []).append(index)
        for (model, tensor_parallel, input_len, output_len), rows in by_arch.items():
            members = [schedules[i] for i in rows]
            tests = [_window(s.test) for s in members]
            stats = {"main": [s.main for s in members], "main_running": [s.main.running_weighted for s in members],
                     "test": tests, "test_running": [test.running_weighted for test in tests]}
            # A V1 run's budget (its vLLM version's) can exceed the constants' own.
            tokens = max(len(one.w_tokens) for parts in stats.values() for one in parts) - 1
            width = max(len(one.w_sampled) for parts in stats.values() for one in parts) - 1
            cost = LinearCost(architectures[model], hw, consts, tensor_parallel, max_tokens=max(tokens, 1),
                              max_sampled=max(width, 1), input_len=input_len, output_len=output_len)
            self._groups.append((np.array(rows), cost, stats, {}))
        self.n_runs = len(schedules)

    def _part(self, name: str, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(durations, their gradients in u) of one stats part of every run."""
        durations = np.zeros(self.n_runs)
        gradients = np.zeros((self.n_runs, len(u)))
        for rows, cost, stats, forms in self._groups:
            if name not in forms:
                forms[name] = cost.form(StatsMatrix.stack(stats[name]))
            durations[rows], gradients[rows] = forms[name].duration_s(u)
        return durations, gradients

    def duration_s(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Benchmark durations at ``u`` and their gradients ``G`` (runs x fitted constants)."""
        return self._part("main", u)

    def predict(self, consts: SimConstants) -> "SimPrediction":
        """Throughput, mean batch and Little's-law E2E of every run at `consts`, measured as
        the pipeline measures real runs (E2E = mean batch / request throughput; for a static
        batch, whose requests all finish with it, the batch's latency, as ingest reads it)."""
        u = coordinates_of(consts)
        main, main_running, test, test_running = (self._part(name, u)[0]
                                                  for name in ("main", "main_running", "test", "test_running"))
        batch = (main_running + test_running) / (main + test)
        return SimPrediction(self.completed * self.tokens_per_request / main, batch,
                             np.where(self.static_batch, main, batch * main / self.completed),
                             self.num_preemptions.copy())


@dataclass(frozen=True)
class SimPrediction:
    """SIM's prediction of some runs from their configuration alone (arrays, one value per run)."""

    throughput_per_s: np.ndarray
    mean_batch_size: np.ndarray
    e2e_latency_s: np.ndarray
    num_preemptions: np.ndarray


def prediction_costs(frame: pd.DataFrame, schedules: ScheduleTable, architectures: ArchitectureCatalog,
                     hw: Hardware) -> ScheduleCosts:
    """The costs of a runs table's rows from their cached schedules, to `ScheduleCosts.predict`
    them at any constants; nothing measured is read but each row's configuration."""
    return ScheduleCosts(schedules.for_frame(frame), architectures, hw, schedules.constants)
