"""Calibrating the simulator's fitted constants on cached schedules, to the standard of SLIM's fit.

Given each training run's cached schedule (`slim.sim.schedules`), the simulated throughput
at constants ``u`` (`slim.sim.linear_cost`) is ``T_i(u) = N_i (IL_i + OL_i) / D_i(u)`` with
``D_i(u) = G_i(u) . u + C_i`` piecewise linear, so the fit needs no simulation at all and
has an exact Jacobian. `calibrate_schedules` minimises, over the bounded box of `BOUNDS`,

    0.5 sum_i (T_i(u) / T_meas,i - 1)^2  +  0.5 lambda sum_i sum_j (G_ij (u_j - u*_j) / D_meas,i)^2

the relative throughput errors (as `slim.model.fit` does for SLIM) plus the same weak prior
toward the ideal roofline machine ``u*`` (efficiencies of one, no kernel-launch or step
overhead): ``G_ij (u_j - u*_j)`` is the time term ``j`` adds to run ``i`` beyond the ideal
machine and ``D_meas,i = N_i (IL_i + OL_i) / T_meas,i`` the measured benchmark duration, so
each prior residual is a unit-free share of the run's time, with ``lambda =
slim.model.fit.ROOFLINE_PRIOR_WEIGHT``. Where the training runs determine the constants it
changes nothing measurable; where they leave a direction open it picks the point whose
overheads account for the least time. What the data leave open is recorded as for SLIM
(`SimIdentifiability`): null directions of the data Jacobian, constants on a bound, and
seeded training-equivalent solutions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from slim import columns as col
from slim.errors import FitError
from slim.model.fit import (
    EQUIVALENT_COST_TOLERANCE,
    POLISH_TOLERANCE,
    ROOFLINE_PRIOR_WEIGHT,
    VALLEY_SAMPLES,
    VALLEY_SEED,
    IdentifiabilitySummary,
    null_space_shares,
)
from slim.model.metrics import mape_pct
from slim.sim.constants import BOUNDS, FITTED_CONSTANTS, SimConstants
from slim.sim.linear_cost import EFFICIENCIES, LinearCost, StatsMatrix, constants_at, coordinates_of
from slim.sim.metrics import ScheduleStats
from slim.sim.schedules import RunSchedule, ScheduleTable
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware

UNITS = np.array([1.0, 1.0, 1.0, 1e-6, 1e-3, 1e-6, 1e-6, 1e-3])
"""Optimiser units of ``u`` (1/eta: 1; kernel latency: us; step base: ms; per sequence: us;
XFormers attention latency: us; tensor-parallel step overhead: ms), so every free variable is of
order one."""

IDEAL_MACHINE = np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
"""``u*``: every efficiency one, no launch, backend or CPU overhead (the roofline machine)."""

PAID_BY_SOME_RUNS = (FITTED_CONSTANTS.index("xformers_attention_latency_s"),
                     FITTED_CONSTANTS.index("tensor_parallel_step_overhead_s"))
"""Constants only some runs pay: the XFormers latency (models on vLLM V0's XFormers backend) and the
TP step overhead (runs at tensor_parallel > 1). Nothing else is ever free of every run."""

LOWER = np.array([1.0 / BOUNDS[n][1] if n in EFFICIENCIES else BOUNDS[n][0] for n in FITTED_CONSTANTS]) / UNITS
UPPER = np.array([1.0 / BOUNDS[n][0] if n in EFFICIENCIES else BOUNDS[n][1] for n in FITTED_CONSTANTS]) / UNITS

STARTS = tuple((compute, memory, attention, 5e-6, 1e-3, 40e-6, 0.0, 0.0)
               for compute in (0.2, 0.5, 0.9) for memory, attention in ((0.6, 0.6), (0.95, 0.95)))
"""Starting constants in `FITTED_CONSTANTS` order, fixed and never read from data: the GEMM
compute efficiency at three levels (the roofline ``max`` makes the objective multimodal in it:
on the public traces' model transfer a start at the `SimConstants` defaults ends in a local
minimum of twice the global cost), with memory efficiencies low and high. The XFormers
attention latency and the tensor-parallel step overhead start at zero, where they are held when no
training run uses that backend or runs at tensor_parallel > 1 (`PAID_BY_SOME_RUNS`)."""


def start_points(starts: Sequence[Sequence[float]]) -> list[np.ndarray]:
    """`starts` (constants in `FITTED_CONSTANTS` order) in optimiser coordinates."""
    points = []
    for start in starts:
        u = np.array(start, dtype=float)
        u[:len(EFFICIENCIES)] = 1.0 / u[:len(EFFICIENCIES)]
        points.append(u / UNITS)
    return points


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
        by_arch: dict[tuple[str, int], list[int]] = {}
        for index, schedule in enumerate(schedules):
            by_arch.setdefault((schedule.key.model, schedule.key.tensor_parallel), []).append(index)
        for (model, tensor_parallel), rows in by_arch.items():
            members = [schedules[i] for i in rows]
            tests = [_window(s.test) for s in members]
            stats = {"main": [s.main for s in members], "main_running": [s.main.running_weighted for s in members],
                     "test": tests, "test_running": [test.running_weighted for test in tests]}
            width = max(len(one.w_sampled) for parts in stats.values() for one in parts) - 1
            cost = LinearCost(architectures[model], hw, consts, tensor_parallel, max_sampled=max(width, 1))
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


@dataclass(frozen=True)
class SimIdentifiability(IdentifiabilitySummary):
    """What a calibration's training runs determine (the analogue of `slim.model.fit.Identifiability`)."""

    equivalent_constants: tuple[SimConstants, ...]

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary_dict(),
                "equivalent_constants": [_fitted_dict(c) for c in self.equivalent_constants]}


@dataclass(frozen=True)
class SimCalibration:
    """Result of `calibrate_schedules`: constants, uncertainties, identifiability, fit quality."""

    constants: SimConstants
    standard_errors: dict[str, float]
    train_mape_throughput_pct: float
    n_train_points: int
    cost: float
    message: str
    split_name: str
    n_starts: int
    n_converged_starts: int
    identifiability: SimIdentifiability
    residuals: np.ndarray = field(repr=False, compare=False)

    @property
    def converged(self) -> bool:
        return self.n_converged_starts == self.n_starts

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (NaN becomes ``None``): the fitted constants in SI units."""
        return {
            "split_name": self.split_name, "constants": _fitted_dict(self.constants),
            "standard_errors": {k: (None if not math.isfinite(v) else v) for k, v in self.standard_errors.items()},
            "train_mape_throughput_pct": self.train_mape_throughput_pct, "n_train_points": self.n_train_points,
            "cost": self.cost, "converged": self.converged, "message": self.message, "n_starts": self.n_starts,
            "n_converged_starts": self.n_converged_starts, "unidentified": self.identifiability.describe(),
            "identifiability": self.identifiability.to_dict(),
            "residuals": [float(value) for value in self.residuals],
        }


def _fitted_dict(consts: SimConstants) -> dict[str, float]:
    return {name: float(getattr(consts, name)) for name in FITTED_CONSTANTS}


class _Problem:
    """Data residuals, the roofline prior and their exact Jacobians in optimiser coordinates."""

    def __init__(self, costs: ScheduleCosts, measured_throughput: np.ndarray):
        self.costs = costs
        self.measured_duration_s = costs.completed * costs.tokens_per_request / measured_throughput
        # The constants only some runs pay (`PAID_BY_SOME_RUNS`) are held at zero where no training
        # run pays them: free with a zero gradient, the bounded solver would let them drift.
        gradients = costs.duration_s(IDEAL_MACHINE * UNITS)[1]
        self.free = np.ones(len(FITTED_CONSTANTS), dtype=bool)
        for index in PAID_BY_SOME_RUNS:
            self.free[index] = bool(gradients[:, index].any())

    def full(self, x_free: np.ndarray) -> np.ndarray:
        """The optimiser point with the unpaid constants (zero) put back."""
        x = np.zeros(len(FITTED_CONSTANTS))
        x[self.free] = x_free
        return x

    def data(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(residuals, their Jacobian, G) at optimiser point ``x``."""
        durations, gradients = self.costs.duration_s(x * UNITS)
        ratio = self.measured_duration_s / durations
        return ratio - 1.0, -(ratio / durations)[:, None] * gradients * UNITS, gradients

    def cost(self, x: np.ndarray) -> float:
        residuals = self.data(x)[0]
        return 0.5 * float(residuals @ residuals)

    def solve(self, start: np.ndarray, reference: np.ndarray, tolerance: float, split_name: str):
        """Least squares of the data and the prior toward `reference` (in ``u``), from `start`."""
        root_weight = math.sqrt(ROOFLINE_PRIOR_WEIGHT) / self.measured_duration_s

        def stacked(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            residuals, jacobian, gradients = self.data(x)
            excess = gradients * (x * UNITS - reference) * root_weight[:, None]
            prior_jacobian = gradients * root_weight[:, None] * UNITS
            n, p = gradients.shape
            blocks = np.zeros((n * p, p))
            for j in range(p):
                blocks[j * n:(j + 1) * n, j] = prior_jacobian[:, j]
            return np.concatenate([residuals, excess.T.ravel()]), np.vstack([jacobian, blocks])

        cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

        def evaluate(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            key = x.tobytes()
            if key not in cache:
                cache.clear()
                cache[key] = stacked(x)
            return cache[key]

        free = self.free
        try:
            result = least_squares(lambda x: evaluate(self.full(x))[0], np.clip(start[free], LOWER[free], UPPER[free]),
                                   jac=lambda x: evaluate(self.full(x))[1][:, free], bounds=(LOWER[free], UPPER[free]),
                                   method="trf", xtol=tolerance, ftol=tolerance, gtol=tolerance, max_nfev=2000)
        except ValueError as error:
            raise FitError(f"split '{split_name}': simulator calibration failed from {start}: {error}") from error
        result.x = self.full(result.x)
        return result


def _standard_errors(jacobian: np.ndarray, cost: float, n_points: int, identifiable: np.ndarray) -> np.ndarray:
    """``sqrt(diag((J^T J)^-1) s^2)`` in optimiser units, NaN for unidentifiable columns."""
    n_free = jacobian.shape[1]
    if n_points <= n_free or n_free == 0:
        return np.full(n_free, np.nan)
    _, singular, vt = np.linalg.svd(jacobian, full_matrices=False)
    keep = singular > 1e-8 * singular[0]
    variances = (vt[keep].T ** 2) @ (1.0 / singular[keep] ** 2) * (2.0 * cost / (n_points - n_free))
    return np.where(identifiable, np.sqrt(variances), np.nan)


def _valley_references(rng: np.random.Generator, count: int) -> list[np.ndarray]:
    """Seeded references in ``u`` spread uniformly over the bounded box of `BOUNDS`
    (efficiencies uniform in their bounds, then inverted). Drawn one constant at a time, in
    `FITTED_CONSTANTS` order, so a constant appended to that list leaves the others' draws as
    they were."""
    values = np.column_stack([rng.uniform(*BOUNDS[name], size=count) for name in FITTED_CONSTANTS])
    values[:, :len(EFFICIENCIES)] = 1.0 / values[:, :len(EFFICIENCIES)]
    return list(values)


def _identifiability(problem: _Problem, best_x: np.ndarray, initial: SimConstants, split_name: str,
                     sample_valley: bool) -> tuple[SimIdentifiability, np.ndarray]:
    scale = np.maximum(1.0, np.abs(best_x))
    jacobian = problem.data(best_x)[1]
    # A constant no training run pays (the XFormers latency without an XFormers model, the TP step
    # overhead without a run at tensor_parallel > 1) is not a finding about the data: it is held at
    # zero (`_Problem.free`) and reported neither as on a bound nor as open.
    unpaid = ~problem.free
    at_bound = ((np.abs(best_x - LOWER) <= 1e-9 * scale) | (np.abs(best_x - UPPER) <= 1e-9 * scale)) & ~unpaid
    free = ~at_bound & ~unpaid
    shares = null_space_shares(jacobian[:, free])
    interior = [name for name, keep in zip(FITTED_CONSTANTS, free) if keep]
    unidentified = tuple(name for name, share in zip(interior, shares) if share >= 1e-3)
    dimensions = int(round(float(shares.sum())))
    identifiable = np.array([keep and name not in unidentified for name, keep in zip(FITTED_CONSTANTS, free)])
    equivalent = []
    if dimensions and sample_valley:
        threshold = problem.cost(best_x) * (1.0 + EQUIVALENT_COST_TOLERANCE) + 1e-12 * len(best_x)
        for reference in _valley_references(np.random.default_rng(VALLEY_SEED), VALLEY_SAMPLES):
            result = problem.solve(best_x, reference, POLISH_TOLERANCE, split_name)
            if np.isfinite(result.x).all() and problem.cost(result.x) <= threshold:
                equivalent.append(constants_at(initial, result.x * UNITS))
    return (SimIdentifiability(dimensions, unidentified,
                               tuple(name for name, bound in zip(FITTED_CONSTANTS, at_bound) if bound),
                               tuple(equivalent)), identifiable)


def calibrate_schedules(schedules: Sequence[RunSchedule], measured_throughput: np.ndarray,
                        architectures: ArchitectureCatalog, hw: Hardware, initial: SimConstants = SimConstants(),
                        split_name: str = "?", starts: Sequence[Sequence[float]] | None = None,
                        sample_valley: bool = True) -> SimCalibration:
    """Fit `FITTED_CONSTANTS` to the measured total-token throughput of each cached run.

    The objective and its identifiability rule are in the module docstring. Every start of
    `starts` (default `STARTS`) is solved, the lowest objective refined with
    `POLISH_TOLERANCE`. ``sample_valley=False`` skips the training-equivalent sample (the
    unidentified directions are still reported), for callers that use only the chosen fit. The fixed
    fields of `initial` (scheduler, memory, tensor parallelism) are kept; its fitted
    fields are never used, so the result depends on the training runs alone.

    Raises `FitError` (naming `split_name`) when there are fewer runs than constants (the
    XFormers latency and the TP step overhead not counted where no run pays them), a run
    cannot start in the simulator, a throughput is not positive, or no start converges.
    """
    measured = np.asarray(measured_throughput, dtype=float)
    if measured.shape != (len(schedules),) or not (np.isfinite(measured).all() and (measured > 0).all()):
        raise FitError(f"split '{split_name}': measured throughputs must be one finite positive value per run")
    problem = _Problem(ScheduleCosts(schedules, architectures, hw, initial), measured)
    # The XFormers latency and the TP step overhead need no run of their own where no run pays them.
    needed = int(problem.free.sum())
    if len(schedules) < needed:
        raise FitError(f"split '{split_name}': {len(schedules)} training run(s) for {needed} "
                       "simulator constants; add training runs")
    points = start_points(STARTS if starts is None else starts)
    results = [problem.solve(start, IDEAL_MACHINE, 1e-10, split_name) for start in points]
    converged = [result for result in results if result.status > 0]
    if not converged:
        raise FitError(f"split '{split_name}': no start of the simulator calibration converged "
                       f"({results[-1].message})")
    best = problem.solve(min(converged, key=lambda r: (r.cost, tuple(r.x))).x, IDEAL_MACHINE, POLISH_TOLERANCE,
                         split_name)
    if not np.isfinite(best.x).all():
        raise FitError(f"split '{split_name}': simulator calibration produced non-finite constants {best.x}")
    residuals, jacobian, _ = problem.data(best.x)
    cost = 0.5 * float(residuals @ residuals)
    identifiability, identifiable = _identifiability(problem, best.x, initial, split_name, sample_valley)
    u_errors = _standard_errors(jacobian, cost, len(measured), identifiable) * UNITS
    u = best.x * UNITS
    # Standard errors of an efficiency eta = 1/u: |d eta / du| = 1/u^2.
    errors = np.where(np.arange(len(u)) < len(EFFICIENCIES), u_errors / u**2, u_errors)
    return SimCalibration(
        constants=constants_at(initial, u),
        standard_errors={name: float(value) for name, value in zip(FITTED_CONSTANTS, errors)},
        train_mape_throughput_pct=mape_pct(measured * (1.0 + residuals), measured),
        n_train_points=len(measured), cost=cost, message=str(best.message), split_name=split_name,
        n_starts=len(results), n_converged_starts=len(converged), identifiability=identifiability,
        residuals=residuals)




def calibrate_on_rows(frame: pd.DataFrame, schedules: ScheduleTable, architectures: ArchitectureCatalog,
                      hw: Hardware, split_name: str = "?", **options: Any) -> SimCalibration:
    """`calibrate_schedules` on the cached schedules of a runs table's rows and their measured
    throughput (`columns.TOTAL_TOKEN_THROUGHPUT`), from the table's constants; `options` go
    to `calibrate_schedules`."""
    col.require_columns(frame, (col.TOTAL_TOKEN_THROUGHPUT,), f"split '{split_name}': training table", FitError)
    return calibrate_schedules(schedules.for_frame(frame), frame[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float),
                               architectures, hw, schedules.constants, split_name, **options)


def prediction_costs(frame: pd.DataFrame, schedules: ScheduleTable, architectures: ArchitectureCatalog,
                     hw: Hardware) -> ScheduleCosts:
    """The costs of a runs table's rows from their cached schedules, to `ScheduleCosts.predict`
    them at any constants; nothing measured is read but each row's configuration."""
    return ScheduleCosts(schedules.for_frame(frame), architectures, hw, schedules.constants)
