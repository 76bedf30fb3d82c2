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
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import FitError
from slim.model.calibration import (
    POLISH_TOLERANCE,
    VALLEY_SAMPLES,
    VALLEY_SEED,
    CalibrationResult,
    IdentifiabilitySummary,
    LastPoint,
    Parameter,
    best_of_starts,
    bounded_least_squares,
    bounds_of,
    equivalent_solutions,
    identifiability_summary,
    json_float,
    parameter_uncertainty,
    units_of,
)
from slim.model.fit import ROOFLINE_PRIOR_WEIGHT
from slim.model.metrics import mape_pct
from slim.sim.constants import BOUNDS, FITTED_CONSTANTS, SimConstants
from slim.sim.linear_cost import EFFICIENCIES, constants_at
from slim.sim.schedule_costs import ScheduleCosts
from slim.sim.schedules import RunSchedule, ScheduleTable
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware

_UNITS = {"kernel_latency_s": (1e-6, "us"), "step_overhead_base_s": (1e-3, "ms"),
          "step_overhead_per_seq_s": (1e-6, "us"), "xformers_attention_latency_s": (1e-6, "us"),
          "tensor_parallel_step_overhead_s": (1e-3, "ms")}


def _sim_parameter(name: str) -> Parameter:
    """A fitted simulator constant in optimiser coordinates: an efficiency as ``1/eta`` (so step times
    are linear in it), ideally one; an overhead in microseconds or milliseconds, ideally zero."""
    low, high = BOUNDS[name]
    if name in EFFICIENCIES:
        return Parameter(name, 1.0, "1/eta", 1.0 / high, 1.0 / low, ideal=1.0)
    unit, label = _UNITS[name]
    return Parameter(name, unit, label, low / unit, high / unit)


SIM_PARAMETERS = tuple(_sim_parameter(name) for name in FITTED_CONSTANTS)
"""SIM's fitted constants ``u`` in `FITTED_CONSTANTS` order; every free variable is of order one."""
UNITS = units_of(SIM_PARAMETERS)
LOWER, UPPER = bounds_of(SIM_PARAMETERS)
IDEAL_MACHINE = np.array([parameter.ideal for parameter in SIM_PARAMETERS])
"""``u*``: every efficiency one, no launch, backend or CPU overhead (the roofline machine)."""

PAID_BY_SOME_RUNS = (FITTED_CONSTANTS.index("xformers_attention_latency_s"),
                     FITTED_CONSTANTS.index("tensor_parallel_step_overhead_s"))
"""Constants only some runs pay: the XFormers latency (models on vLLM V0's XFormers backend) and the
TP step overhead (runs at tensor_parallel > 1). Nothing else is ever free of every run."""

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


@dataclass(frozen=True)
class SimIdentifiability(IdentifiabilitySummary):
    """What a calibration's training runs determine (the analogue of `slim.model.fit.Identifiability`)."""

    equivalent_constants: tuple[SimConstants, ...]

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary_dict(),
                "equivalent_constants": [_fitted_dict(c) for c in self.equivalent_constants]}


@dataclass(frozen=True)
class SimCalibration(CalibrationResult):
    """Result of `calibrate_schedules`: the constants, with what every calibration records."""

    constants: SimConstants
    identifiability: SimIdentifiability

    def fitted_values(self) -> dict[str, float]:
        return _fitted_dict(self.constants)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (NaN becomes ``None``): the fitted constants in SI units."""
        return {
            "split_name": self.split_name, "constants": _fitted_dict(self.constants),
            "standard_errors": {k: json_float(v) for k, v in self.standard_errors.items()},
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
        self.parameters = tuple(replace(parameter, vary=index not in PAID_BY_SOME_RUNS
                                        or bool(gradients[:, index].any()))
                                for index, parameter in enumerate(SIM_PARAMETERS))
        self.free = np.array([parameter.vary for parameter in self.parameters])

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

        evaluate = LastPoint(stacked)
        free = self.free
        result = bounded_least_squares(lambda x: evaluate(self.full(x))[0],
                                       lambda x: evaluate(self.full(x))[1][:, free], start[free],
                                       LOWER[free], UPPER[free], tolerance,
                                       f"split '{split_name}': simulator calibration failed")
        result.x = self.full(result.x)
        return result


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
    # A constant no training run pays (the XFormers latency without an XFormers model, the TP step
    # overhead without a run at tensor_parallel > 1) is not a finding about the data: it is held at
    # zero (`_Problem.free`) and reported neither as on a bound nor as open.
    summary = identifiability_summary(FITTED_CONSTANTS, best_x, LOWER, UPPER, problem.data(best_x)[1],
                                      held=~problem.free)
    identifiable = np.array([keep and name not in summary.unidentified_parameters and name not in summary.at_bounds
                             for name, keep in zip(FITTED_CONSTANTS, problem.free)])
    equivalent = []
    if summary.unidentified_dimensions and sample_valley:
        equivalent = equivalent_solutions(
            lambda reference: problem.solve(best_x, reference, POLISH_TOLERANCE, split_name),
            _valley_references(np.random.default_rng(VALLEY_SEED), VALLEY_SAMPLES), problem.cost, best_x,
            len(problem.measured_duration_s))
    return (SimIdentifiability(summary.unidentified_dimensions, summary.unidentified_parameters, summary.at_bounds,
                               tuple(constants_at(initial, x * UNITS) for x in equivalent)), identifiable)


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
    search = best_of_starts(lambda start, tolerance: problem.solve(start, IDEAL_MACHINE, tolerance, split_name),
                            start_points(STARTS if starts is None else starts),
                            f"split '{split_name}': no start of the simulator calibration converged")
    best = search.best
    if not np.isfinite(best.x).all():
        raise FitError(f"split '{split_name}': simulator calibration produced non-finite constants {best.x}")
    residuals, jacobian, _ = problem.data(best.x)
    cost = 0.5 * float(residuals @ residuals)
    identifiability, identifiable = _identifiability(problem, best.x, initial, split_name, sample_valley)
    u_errors = parameter_uncertainty(jacobian, cost, len(measured), identifiable).standard_errors * UNITS
    u = best.x * UNITS
    # Standard errors of an efficiency eta = 1/u: |d eta / du| = 1/u^2.
    errors = np.where(np.arange(len(u)) < len(EFFICIENCIES), u_errors / u**2, u_errors)
    return SimCalibration(
        constants=constants_at(initial, u),
        standard_errors={name: float(value) for name, value in zip(FITTED_CONSTANTS, errors)},
        train_mape_throughput_pct=mape_pct(measured * (1.0 + residuals), measured),
        n_train_points=len(measured), cost=cost, message=str(best.message), split_name=split_name,
        n_starts=search.n_starts, n_converged_starts=search.n_converged_starts, identifiability=identifiability,
        residuals=residuals)




def calibrate_on_rows(frame: pd.DataFrame, schedules: ScheduleTable, architectures: ArchitectureCatalog,
                      hw: Hardware, split_name: str = "?", **options: Any) -> SimCalibration:
    """`calibrate_schedules` on the cached schedules of a runs table's rows and their measured
    throughput (`columns.TOTAL_TOKEN_THROUGHPUT`), from the table's constants; `options` go
    to `calibrate_schedules`."""
    col.require_columns(frame, (col.TOTAL_TOKEN_THROUGHPUT,), f"split '{split_name}': training table", FitError)
    return calibrate_schedules(schedules.for_frame(frame), frame[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float),
                               architectures, hw, schedules.constants, split_name, **options)
