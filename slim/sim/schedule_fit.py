"""Calibrating the simulator's fitted constants on cached schedules, to the standard of SLIM's fit.

Given each training run's cached schedule (`slim.sim.schedules`), the simulated throughput
at constants ``u`` (`slim.sim.linear_cost`) is ``T_i(u) = N_i (IL_i + OL_i) / D_i(u)`` with
``D_i(u) = G_i(u) . u + C_i`` piecewise linear, so the fit needs no simulation at all and
has an exact Jacobian. `calibrate_schedules` minimises, over the bounded box of `BOUNDS`,

    0.5 sum_i (T_i(u) / T_meas,i - 1)^2  +  0.5 lambda sum_i sum_j (G_ij (u_j - u*_j) / D_meas,i)^2

the relative throughput errors (as `slim.model.fit` does for SLIM) plus the same weak prior
toward the ideal roofline machine ``u*`` (efficiencies of one, no kernel-launch or step
overhead): ``G_ij (u_j - u*_j)`` is the time term ``j`` adds to run ``i`` beyond the ideal
machine and ``D_meas,i = N_i (IL_i + OL_i) / T_meas,i`` the measured benchmark duration
(`slim.model.calibration.RooflinePrior`). This module is SIM's problem definition
(`SimProblem`); the method, and what it records of what the data leave open, is
`slim.model.calibration`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import FitError
from slim.model.calibration import (
    CalibrationProblem,
    CalibrationResult,
    Excess,
    LastPoint,
    Parameter,
    calibrate,
    units_of,
)
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
class SimCalibration(CalibrationResult):
    """Result of `calibrate_schedules`: the constants, with what every calibration records; the
    training-equivalent solutions (`identifiability.equivalent`) are `SimConstants`."""

    constants: SimConstants

    VALUES_KEY: ClassVar[str] = "constants"

    @staticmethod
    def encode(consts: SimConstants) -> dict[str, float]:
        """The fitted constants in SI units."""
        return {name: float(getattr(consts, name)) for name in FITTED_CONSTANTS}

    def own_dict(self) -> dict[str, Any]:
        return {"unidentified": self.identifiability.describe()}


class SimProblem(CalibrationProblem):
    """SIM's problem: relative throughput residuals of the cached schedules' costs and their exact
    Jacobian in optimiser coordinates; the fixed fields of `initial` are kept."""

    label = "simulator calibration"
    interior_errors_only = True
    ideal_reference = IDEAL_MACHINE

    def __init__(self, costs: ScheduleCosts, measured_throughput: np.ndarray, initial: SimConstants,
                 split_name: str = "?"):
        # The constants only some runs pay (`PAID_BY_SOME_RUNS`) are held at zero where no training
        # run pays them: free with a zero gradient, the bounded solver would let them drift.
        gradients = costs.duration_s(IDEAL_MACHINE * UNITS)[1]
        super().__init__([replace(parameter, vary=index not in PAID_BY_SOME_RUNS or bool(gradients[:, index].any()))
                          for index, parameter in enumerate(SIM_PARAMETERS)], measured_throughput,
                         costs.completed * costs.tokens_per_request / measured_throughput, split_name)
        self.costs, self.initial = costs, initial
        self._data = LastPoint(self._data_at)

    def _data_at(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(residuals, their Jacobian, G) at optimiser point ``x``."""
        durations, gradients = self.costs.duration_s(x * UNITS)
        ratio = self.measured_time_s / durations
        return ratio - 1.0, -(ratio / durations)[:, None] * gradients * UNITS, gradients

    def residuals(self, x: np.ndarray) -> np.ndarray:
        return self._data(x)[0]

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        return self._data(x)[1]

    def excess(self, x: np.ndarray, reference: np.ndarray) -> Excess:
        """``G_ij (u_j - r_j)`` per constant ``j``: the step times are linear in ``u``."""
        gradients, difference = self._data(x)[2], x * UNITS - reference
        return [(gradients[:, j] * difference[j], {name: gradients[:, j]}) for j, name in enumerate(self.names)]

    def references(self, rng: np.random.Generator, count: int) -> list[np.ndarray]:
        """Seeded references in ``u`` spread uniformly over the bounded box of `BOUNDS`
        (efficiencies uniform in their bounds, then inverted). Drawn one constant at a time, in
        `FITTED_CONSTANTS` order, so a constant appended to that list leaves the others' draws as
        they were."""
        values = np.column_stack([rng.uniform(*BOUNDS[name], size=count) for name in FITTED_CONSTANTS])
        values[:, :len(EFFICIENCIES)] = 1.0 / values[:, :len(EFFICIENCIES)]
        return list(values)

    def values_at(self, x: np.ndarray) -> SimConstants:
        return constants_at(self.initial, x * UNITS)


def calibrate_schedules(schedules: Sequence[RunSchedule], measured_throughput: np.ndarray,
                        architectures: ArchitectureCatalog, hw: Hardware, initial: SimConstants = SimConstants(),
                        split_name: str = "?", starts: Sequence[Sequence[float]] | None = None,
                        sample_valley: bool = True) -> SimCalibration:
    """Fit `FITTED_CONSTANTS` to the measured total-token throughput of each cached run.

    The objective and its identifiability rule are in the module docstring; the calibration engine
    (`slim.model.calibration.calibrate`) solves it from every start of `starts` (default
    `STARTS`). ``sample_valley=False`` skips the training-equivalent sample (the
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
    problem = SimProblem(ScheduleCosts(schedules, architectures, hw, initial), measured, initial, split_name)
    calibration = calibrate(problem, start_points(STARTS if starts is None else starts), sample_valley)
    u = calibration.x * UNITS
    # Standard errors of an efficiency eta = 1/u: |d eta / du| = 1/u^2.
    errors = np.where(np.arange(len(u)) < len(EFFICIENCIES), calibration.standard_errors / u**2,
                      calibration.standard_errors)
    return SimCalibration(**calibration.result_fields(dict(zip(FITTED_CONSTANTS, errors.tolist()))),
                          constants=problem.values_at(calibration.x))


def calibrate_on_rows(frame: pd.DataFrame, schedules: ScheduleTable, architectures: ArchitectureCatalog,
                      hw: Hardware, split_name: str = "?", **options: Any) -> SimCalibration:
    """`calibrate_schedules` on the cached schedules of a runs table's rows and their measured
    throughput (`columns.TOTAL_TOKEN_THROUGHPUT`), from the table's constants; `options` go
    to `calibrate_schedules`."""
    col.require_columns(frame, (col.TOTAL_TOKEN_THROUGHPUT,), f"split '{split_name}': training table", FitError)
    return calibrate_schedules(schedules.for_frame(frame), frame[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float),
                               architectures, hw, schedules.constants, split_name, **options)
