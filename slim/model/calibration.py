"""The calibration engine SLIM's fit (`slim.model.fit`) and SIM's (`slim.sim.schedule_fit`) are problems of.

A problem (`CalibrationProblem`) supplies relative throughput residuals ``T_pred,i / T_meas,i - 1``
with their exact Jacobian, the time each of its terms adds beyond a reference machine, seeded
references and its fitted values. The engine (`calibrate`) minimises the residuals plus the weak
`RooflinePrior` by bounded least squares (``scipy.optimize.least_squares``, trust-region
reflective) from a fixed grid of starts; the best start is refined, its uncertainty taken from the
SVD of the data Jacobian, and what the training data leave open recorded as unidentified
directions, parameters on a bound and seeded training-equivalent solutions
(`slim.model.identifiability`). `CalibrationResult` is the record every calibration returns, with
its JSON form and report.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Mapping, Sequence

import numpy as np

from slim.errors import ConfigError, FitError
from slim.model.identifiability import (
    Identifiability,
    equivalent_solutions,
    identifiability_summary,
    parameter_uncertainty,
)
from slim.model.metrics import mape_pct

if TYPE_CHECKING:
    from scipy.optimize import OptimizeResult

VALLEY_SAMPLES = 32
"""Seeded reference points projected onto the set of training-equivalent solutions."""

VALLEY_SEED = 0

START_TOLERANCE = 1e-10
"""``xtol = ftol = gtol`` of the solve from every start of the grid."""

POLISH_TOLERANCE = 1e-14
"""``xtol = ftol = gtol`` of the final refinement from the best start."""

MAX_EVALUATIONS = 2000


ROOFLINE_PRIOR_WEIGHT = 1e-6
"""``lambda``: weight of the roofline prior against the data term (`RooflinePrior`).

Small enough that it moves no identified quantity measurably (validation MAPEs of the
public traces change by at most 0.001 points against the unregularised fit), large
enough that the optimum along an unidentified direction is fixed far above
floating-point noise (the prior's curvature there is 1e10 times the noise level)."""


@dataclass(frozen=True)
class Parameter:
    """One fitted constant as the optimiser sees it, in the manner of lmfit's ``Parameter``.

    The optimiser works in ``unit_in_si`` units (``unit_label``), chosen so every free variable is
    of order one; `lower` and `upper` are in those units, `ideal` is the constant's value on the
    ideal roofline machine (the prior's reference, SI units), where it is held when it does not
    `vary`, and `starts` its values (optimiser units) in the grid of starts (`start_grid`).
    """

    name: str
    unit_in_si: float
    unit_label: str
    lower: float
    upper: float
    ideal: float = 0.0
    vary: bool = True
    starts: tuple[float, ...] = ()


def units_of(parameters: Sequence[Parameter]) -> np.ndarray:
    return np.array([parameter.unit_in_si for parameter in parameters])


def bounds_of(parameters: Sequence[Parameter]) -> tuple[np.ndarray, np.ndarray]:
    """The lower and upper bounds of `parameters`, in optimiser units."""
    return (np.array([parameter.lower for parameter in parameters]),
            np.array([parameter.upper for parameter in parameters]))


def start_grid(parameters: Sequence[Parameter]) -> list[tuple[float, ...]]:
    """Every combination of the parameters' `starts`, in a fixed order."""
    return sorted(set(itertools.product(*(parameter.starts for parameter in parameters))))


def start_at(values: Any) -> Callable[[Sequence[Parameter]], list[tuple[float, ...]]]:
    """A one-point start "grid" at `values` (an object with an SI attribute per parameter name),
    in optimiser units, clipped to the bounds.

    For refits on nearly the same data (leave-one-curve-out), starting from the full fit
    replaces the grid: one refinement instead of one per start.
    """
    def starts(parameters: Sequence[Parameter]) -> list[tuple[float, ...]]:
        return [tuple(float(np.clip(getattr(values, p.name) / p.unit_in_si, p.lower, p.upper)) for p in parameters)]

    return starts


Solve = Callable[[np.ndarray, float], "OptimizeResult"]
"""``solve(start, tolerance)``: one bounded least-squares solve of a problem from `start`."""


def bounded_least_squares(residuals: Callable[[np.ndarray], np.ndarray], jacobian: Callable[[np.ndarray], np.ndarray],
                          start: np.ndarray, lower: np.ndarray, upper: np.ndarray, tolerance: float,
                          failure: str) -> OptimizeResult:
    """`least_squares` (TRF, exact Jacobian) from `start` clipped to the box; a start at which the
    residuals are not finite raises `FitError` with `failure` and the start."""
    from scipy.optimize import least_squares

    try:
        return least_squares(residuals, np.clip(start, lower, upper), jac=jacobian, bounds=(lower, upper),
                             method="trf", xtol=tolerance, ftol=tolerance, gtol=tolerance,
                             max_nfev=MAX_EVALUATIONS)
    except ValueError as error:
        raise FitError(f"{failure} from start {start}: {error}") from error


class LastPoint:
    """The value of a function of the optimiser's vector at the last vector it was asked for.

    `least_squares` evaluates the residuals at a trial point and, when it accepts the step, the
    Jacobian at that same point; both start from the same prediction. Keeping the last one
    (keyed by the vector's exact bytes) computes it once instead of twice, with the same result.
    """

    def __init__(self, compute: Callable[[np.ndarray], Any]):
        self.compute, self.key, self.value = compute, None, None

    def __call__(self, free_values: np.ndarray) -> Any:
        key = np.asarray(free_values, dtype=float).tobytes()
        if key != self.key:
            self.value, self.key = self.compute(free_values), key
        return self.value


@dataclass(frozen=True)
class MultiStart:
    """The refined best start of a grid, and how many of the grid's starts converged."""

    best: OptimizeResult
    n_starts: int
    n_converged_starts: int


def best_of_starts(solve: Solve, starts: Iterable[np.ndarray], no_convergence: str) -> MultiStart:
    """Solve from every start (`START_TOLERANCE`), keep the converged one of lowest cost, ties
    broken by the lower solution vector (lexicographically), so the choice does not depend on the
    grid's order; refine it (`POLISH_TOLERANCE`). No converged start raises `FitError` with
    `no_convergence` and the last start's message."""
    results = [solve(np.asarray(start, dtype=float), START_TOLERANCE) for start in starts]
    converged = [result for result in results if result.status > 0]
    if not converged:
        raise FitError(f"{no_convergence} (last message: {results[-1].message if results else 'no starts'})")
    chosen = min(converged, key=lambda result: (float(result.cost), tuple(np.asarray(result.x, dtype=float))))
    return MultiStart(solve(np.asarray(chosen.x, dtype=float), POLISH_TOLERANCE), len(results), len(converged))


Excess = list[tuple[np.ndarray, dict[str, np.ndarray]]]
"""Per term of a model: the seconds it adds to each training row beyond a reference machine, and
its derivatives (SI units) by the name of each parameter it depends on."""


class CalibrationProblem(ABC):
    """One problem definition on the engine: its parameters, measurements and model.

    `parameters` are the optimiser's coordinates (those that do not vary are held at their ideal
    value), `measured_throughput` the training rows' ``T_meas,i``, `measured_time_s` each row's
    measured duration (the prior's scale), `ideal_reference` the ideal roofline machine in the
    coordinates of `excess`, `label` names the problem in errors. Where `interior_errors_only`, a
    parameter on a bound or in an unidentified direction has no standard error; otherwise only one
    with a component along a null direction of the data Jacobian goes without.
    """

    label: ClassVar[str]
    interior_errors_only: ClassVar[bool] = False
    ideal_reference: Any

    def __init__(self, parameters: Sequence[Parameter], measured_throughput: np.ndarray,
                 measured_time_s: np.ndarray, split_name: str):
        self.parameters, self.split_name = tuple(parameters), split_name
        self.measured_throughput, self.measured_time_s = measured_throughput, measured_time_s
        self.names = tuple(parameter.name for parameter in self.parameters)
        self.units = units_of(self.parameters)
        self.lower, self.upper = bounds_of(self.parameters)
        self.free = np.array([parameter.vary for parameter in self.parameters], dtype=bool)
        self.held_x = np.array([parameter.ideal for parameter in self.parameters]) / self.units

    @abstractmethod
    def residuals(self, x: np.ndarray) -> np.ndarray:
        """``T_pred,i / T_meas,i - 1`` at optimiser point `x` (every parameter)."""

    @abstractmethod
    def jacobian(self, x: np.ndarray) -> np.ndarray:
        """The exact Jacobian of `residuals` in optimiser units."""

    @abstractmethod
    def excess(self, x: np.ndarray, reference: Any) -> Excess:
        """The time each term adds beyond `reference`, in coordinates in which the time is linear."""

    @abstractmethod
    def references(self, rng: np.random.Generator, count: int) -> list[Any]:
        """`count` seeded references spread over the admissible machines, for the valley sample."""

    @abstractmethod
    def values_at(self, x: np.ndarray) -> Any:
        """The problem's fitted values (SI units) at optimiser point `x`."""

    def full(self, x_free: np.ndarray) -> np.ndarray:
        """The optimiser point with the parameters that do not vary put back."""
        x = self.held_x.copy()
        x[self.free] = x_free
        return x

    def cost(self, x: np.ndarray) -> float:
        """The data term ``0.5 sum_i r_i^2`` at `x`."""
        residuals = self.residuals(x)
        return 0.5 * float(residuals @ residuals)

    def solver(self, reference: Any) -> Solve:
        """``solve(start, tolerance)`` of the data term plus the `RooflinePrior` toward `reference`,
        over the parameters that vary; the solution is given at every parameter (`full`)."""
        prior, free = RooflinePrior(self, reference), self.free

        def residuals(x_free: np.ndarray) -> np.ndarray:
            x = self.full(x_free)
            return np.concatenate([self.residuals(x), prior.residuals(x)])

        def jacobian(x_free: np.ndarray) -> np.ndarray:
            x = self.full(x_free)
            stacked = np.vstack([self.jacobian(x), prior.jacobian(x)])
            # Selecting columns copies into Fortran order, which changes the solver's rounding: a
            # problem that holds nothing keeps its Jacobian as it is.
            return stacked if free.all() else stacked[:, free]

        def solve(start: np.ndarray, tolerance: float) -> OptimizeResult:
            result = bounded_least_squares(residuals, jacobian, start[free], self.lower[free], self.upper[free],
                                           tolerance, f"split '{self.split_name}': the {self.label} failed")
            result.x = self.full(result.x)
            return result

        return solve


class RooflinePrior:
    """Residuals ``sqrt(lambda) excess_ij / t_meas,i`` of the time term ``j`` adds to row ``i``
    beyond a reference machine (the problem's `CalibrationProblem.excess`), stacked term by term.

    Divided by the measured duration of the row, each is a share of its measured time, so the
    prior is unit-free; ``lambda = ROOFLINE_PRIOR_WEIGHT``. Toward the ideal roofline machine it is
    the identifiability rule: where the training data leave a direction open, it picks the point
    whose overheads account for the least time. Being a positive-definite quadratic in coordinates
    in which the time is linear, it has a unique minimiser on every set of training-equivalent
    solutions (an affine subspace in the same coordinates, cut by the bounds).
    """

    def __init__(self, problem: CalibrationProblem, reference: Any):
        self.problem = problem
        self.root_weight = math.sqrt(ROOFLINE_PRIOR_WEIGHT) / problem.measured_time_s
        self.terms = LastPoint(lambda x: problem.excess(x, reference))

    def residuals(self, x: np.ndarray) -> np.ndarray:
        return np.concatenate([excess * self.root_weight for excess, _ in self.terms(x)])

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        names = self.problem.names
        blocks = []
        for _, derivatives in self.terms(x):
            block = np.zeros((len(self.root_weight), len(names)))
            for name, derivative in derivatives.items():
                block[:, names.index(name)] = derivative * self.root_weight
            blocks.append(block)
        return np.vstack(blocks) * self.problem.units


@dataclass(frozen=True)
class Calibration:
    """A problem calibrated (`calibrate`): the point `x` (optimiser units, every parameter), its data
    residuals and cost, what the data leave open, and the parameters' standard errors and covariance
    (SI units of the optimiser's coordinates)."""

    x: np.ndarray
    search: MultiStart
    split_name: str
    residuals: np.ndarray
    cost: float
    train_mape_throughput_pct: float
    identifiability: Identifiability
    standard_errors: np.ndarray
    covariance: np.ndarray

    def result_fields(self, standard_errors: dict[str, float]) -> dict[str, Any]:
        """The `CalibrationResult` fields, with the problem's `standard_errors` by name."""
        return {"standard_errors": standard_errors, "train_mape_throughput_pct": self.train_mape_throughput_pct,
                "n_train_points": len(self.residuals), "cost": self.cost, "message": str(self.search.best.message),
                "split_name": self.split_name, "n_starts": self.search.n_starts,
                "n_converged_starts": self.search.n_converged_starts, "identifiability": self.identifiability,
                "residuals": self.residuals}


def calibrate(problem: CalibrationProblem, starts: Iterable[np.ndarray], sample_valley: bool = True) -> Calibration:
    """Calibrate `problem` from every start of `starts` (optimiser units, every parameter).

    Minimises ``0.5 sum_i r_i^2 + 0.5 lambda sum_i sum_j (excess_ij / t_meas,i)^2`` (the relative
    throughput errors of paper Section VI-E, ``T`` as in Eq. 6, and the `RooflinePrior` toward the
    ideal machine) with `best_of_starts`, then records the
    standard errors (`parameter_uncertainty`), what the data leave open (`identifiability_summary`)
    and, where a direction is open and `sample_valley`, the training-equivalent solutions toward
    `VALLEY_SAMPLES` seeded references (`equivalent_solutions`).

    Raises `FitError` (naming the split) on fewer training rows than free parameters, no converged
    start or non-finite fitted values.
    """
    split, n_points, n_free = f"split '{problem.split_name}'", len(problem.measured_throughput), int(problem.free.sum())
    if n_points < n_free:
        names = ", ".join(name for name, free in zip(problem.names, problem.free) if free)
        raise FitError(f"{split}: {n_points} training point(s) for the {problem.label}'s {n_free} free constants "
                       f"({names}); add training runs")
    search = best_of_starts(problem.solver(problem.ideal_reference), starts,
                            f"{split}: no start of the {problem.label} converged")
    x = search.best.x
    if not np.isfinite(x).all() or not np.isfinite(search.best.cost):
        raise FitError(f"{split}: the {problem.label} produced non-finite values {x}")
    residuals, jacobian, cost = problem.residuals(x), problem.jacobian(x), problem.cost(x)
    summary = identifiability_summary(problem.names, x, problem.lower, problem.upper, jacobian, held=~problem.free)
    identifiable = None
    if problem.interior_errors_only:
        open_or_on_bound = set(summary.unidentified_parameters) | set(summary.at_bounds)
        identifiable = problem.free & np.array([name not in open_or_on_bound for name in problem.names])
    uncertainty = parameter_uncertainty(jacobian, cost, n_points, identifiable)
    equivalent = []
    if summary.unidentified_dimensions and sample_valley:
        equivalent = equivalent_solutions(lambda reference: problem.solver(reference)(x, POLISH_TOLERANCE),
                                          problem.references(np.random.default_rng(VALLEY_SEED), VALLEY_SAMPLES),
                                          problem.cost, x, n_points)
    measured = problem.measured_throughput
    return Calibration(
        x=x, search=search, split_name=problem.split_name, residuals=residuals, cost=cost,
        train_mape_throughput_pct=mape_pct(measured * (1.0 + residuals), measured),
        identifiability=replace(summary, equivalent=tuple(problem.values_at(point) for point in equivalent)),
        standard_errors=np.where(problem.free, uncertainty.standard_errors, np.nan) * problem.units,
        covariance=uncertainty.covariance * np.outer(problem.units, problem.units))


@dataclass(frozen=True)
class CalibrationResult:
    """What every calibration records, whatever its parameters: their standard errors (SI units,
    NaN where the data cannot identify one), the training quality, the starts and the residuals.

    `cost` is the data term ``0.5 sum r_i^2`` at the fitted values (without the prior),
    `residuals` the relative throughput errors ``pred / meas - 1`` per training row, `message`
    the optimiser's termination message of the best start. A problem's result (SLIM's
    `slim.model.fit.SlimFit`, SIM's `slim.sim.schedule_fit.SimCalibration`) adds the field its
    `VALUES_KEY` names and says how its values are written (`encode`) and read (`decode`).
    """

    standard_errors: dict[str, float]
    train_mape_throughput_pct: float
    n_train_points: int
    cost: float
    message: str
    split_name: str
    n_starts: int
    n_converged_starts: int
    identifiability: Identifiability
    residuals: np.ndarray = field(repr=False, compare=False)

    VALUES_KEY: ClassVar[str] = "values"
    """The field holding the fitted values and its key in `to_dict`; the training-equivalent
    solutions are under ``identifiability`` as ``equivalent_<VALUES_KEY>``."""

    @staticmethod
    def encode(values: Any) -> dict[str, float]:
        """One solution's values (the fit's or a training-equivalent one) for JSON."""
        raise NotImplementedError

    @staticmethod
    def decode(record: Mapping[str, Any]) -> Any:
        """Inverse of `encode`."""
        raise NotImplementedError

    def own_dict(self) -> dict[str, Any]:
        """The subclass's other fields for `to_dict`."""
        return {}

    @classmethod
    def own_fields(cls, record: Mapping[str, Any]) -> dict[str, Any]:
        """The subclass's other fields from a `to_dict` record."""
        return {}

    @property
    def values(self) -> Any:
        return getattr(self, self.VALUES_KEY)

    @property
    def converged(self) -> bool:
        """Every start of the grid converged (least-squares status > 0). A fit only exists
        when at least one did; False flags one whose optimum may depend on the start."""
        return self.n_converged_starts == self.n_starts

    def fitted_values(self) -> dict[str, float]:
        """The fitted parameters by name, in SI units."""
        return self.encode(self.values)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (NaN becomes ``None``)."""
        identifiability = self.identifiability
        return {
            "split_name": self.split_name,
            self.VALUES_KEY: self.encode(self.values),
            "standard_errors": {name: json_float(value) for name, value in self.standard_errors.items()},
            "train_mape_throughput_pct": self.train_mape_throughput_pct,
            "n_train_points": self.n_train_points,
            "cost": self.cost,
            "converged": self.converged,
            "message": self.message,
            "n_starts": self.n_starts,
            "n_converged_starts": self.n_converged_starts,
            "identifiability": {**identifiability.summary_dict(), f"equivalent_{self.VALUES_KEY}":
                                [self.encode(values) for values in identifiability.equivalent]},
            "residuals": [float(value) for value in self.residuals],
            **self.own_dict(),
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> "CalibrationResult":
        """Inverse of `to_dict`; a record lacking a key raises `ConfigError`."""
        try:
            identifiability = record["identifiability"]
            return cls(
                **{cls.VALUES_KEY: cls.decode(record[cls.VALUES_KEY])}, **cls.own_fields(record),
                standard_errors={name: float_of_json(value) for name, value in record["standard_errors"].items()},
                train_mape_throughput_pct=float(record["train_mape_throughput_pct"]),
                n_train_points=int(record["n_train_points"]), cost=float(record["cost"]),
                message=str(record["message"]), split_name=str(record["split_name"]),
                n_starts=int(record["n_starts"]), n_converged_starts=int(record["n_converged_starts"]),
                identifiability=Identifiability(
                    int(identifiability["unidentified_dimensions"]),
                    tuple(identifiability["unidentified_parameters"]), tuple(identifiability["at_bounds"]),
                    tuple(cls.decode(values) for values in identifiability[f"equivalent_{cls.VALUES_KEY}"])),
                residuals=np.asarray(record["residuals"], dtype=float))
        except KeyError as error:
            raise ConfigError(f"{cls.__name__} record lacks key {error}") from error

    def report(self) -> str:
        """A readable account: fit quality, every fitted value with its standard error, and what the
        training data leave open."""
        lines = [f"{self.split_name}: {self.n_train_points} training points, train MAPE "
                 f"{self.train_mape_throughput_pct:.2f}%, {self.n_converged_starts} of {self.n_starts} starts "
                 f"converged; {self.identifiability.describe()}"]
        for name, value in self.fitted_values().items():
            error = self.standard_errors.get(name, float("nan"))
            lines.append(f"  {name} = {value:.6g}" + (f" +/- {error:.2g}" if np.isfinite(error) else ""))
        return "\n".join(lines)


def json_float(value: float) -> float | None:
    """A float for JSON: NaN and infinities become ``None``."""
    return None if not np.isfinite(value) else float(value)


def float_of_json(value: float | None) -> float:
    """Inverse of `json_float` (``None`` becomes NaN)."""
    return math.nan if value is None else float(value)
