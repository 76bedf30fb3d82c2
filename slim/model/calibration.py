"""The calibration method SLIM's fit (`slim.model.fit`) and SIM's (`slim.sim.schedule_fit`) share.

Both minimise relative throughput errors plus a weak prior toward the ideal roofline machine by
bounded least squares (``scipy.optimize.least_squares``, trust-region reflective) with an exact
Jacobian, from a fixed grid of starts; the best start is refined, its uncertainty taken from the
SVD of the data Jacobian, and what the training data leave open recorded as unidentified
directions, parameters on a bound and seeded training-equivalent solutions. The two problem
definitions supply their residuals, Jacobians and references; everything here exists once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from scipy.optimize import OptimizeResult, least_squares

from slim.errors import FitError

NULL_SINGULAR_VALUE_RATIO = 1e-8
"""A direction of the data Jacobian (optimiser units) whose singular value is below this
fraction of the largest is reported as unidentified."""

NULL_SHARE_THRESHOLD = 1e-3
"""A parameter with at least this share of the null space (the diagonal of its projector) is
named as unidentified."""

BOUND_TOLERANCE = 1e-9
"""A parameter within this relative distance of a bound (scale ``max(1, |x|)``) is on it."""

EQUIVALENT_COST_TOLERANCE = 1e-6
"""Training-equivalent solutions: data cost within this relative tolerance of the fit's
(training RMS relative error within 5e-7 relative), plus 1e-12 per data residual."""

VALLEY_SAMPLES = 32
"""Seeded reference points projected onto the set of training-equivalent solutions."""

VALLEY_SEED = 0

START_TOLERANCE = 1e-10
"""``xtol = ftol = gtol`` of the solve from every start of the grid."""

POLISH_TOLERANCE = 1e-14
"""``xtol = ftol = gtol`` of the final refinement from the best start."""

MAX_EVALUATIONS = 2000

@dataclass(frozen=True)
class Parameter:
    """One fitted constant as the optimiser sees it, in the manner of lmfit's ``Parameter``.

    The optimiser works in ``unit_in_si`` units (``unit_label``), chosen so every free variable is
    of order one; `lower` and `upper` are in those units, `ideal` is the constant's value on the
    ideal roofline machine (the prior's reference, SI units) and `vary` says whether it is fitted.
    """

    name: str
    unit_in_si: float
    unit_label: str
    lower: float
    upper: float
    ideal: float = 0.0
    vary: bool = True


def units_of(parameters: Sequence[Parameter]) -> np.ndarray:
    return np.array([parameter.unit_in_si for parameter in parameters])


def bounds_of(parameters: Sequence[Parameter]) -> tuple[np.ndarray, np.ndarray]:
    """The lower and upper bounds of `parameters`, in optimiser units."""
    return (np.array([parameter.lower for parameter in parameters]),
            np.array([parameter.upper for parameter in parameters]))


Solve = Callable[[np.ndarray, float], OptimizeResult]
"""``solve(start, tolerance)``: one bounded least-squares solve of a problem from `start`."""


def bounded_least_squares(residuals: Callable[[np.ndarray], np.ndarray], jacobian: Callable[[np.ndarray], np.ndarray],
                          start: np.ndarray, lower: np.ndarray, upper: np.ndarray, tolerance: float,
                          failure: str) -> OptimizeResult:
    """`least_squares` (TRF, exact Jacobian) from `start` clipped to the box; a start at which the
    residuals are not finite raises `FitError` with `failure` and the start."""
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


@dataclass(frozen=True)
class Uncertainty:
    """Standard errors and covariance of the parameters (optimiser units), from one SVD."""

    standard_errors: np.ndarray
    covariance: np.ndarray


def parameter_uncertainty(jacobian: np.ndarray, cost: float, n_points: int,
                          identifiable: np.ndarray | None = None) -> Uncertainty:
    """``s^2 (J^T J)^+`` and its diagonal's root, ``s^2 = 2 cost / (n - p)``, from the SVD ``J = U S V^T``.

    The pseudo-inverse keeps the directions whose singular value is above
    `NULL_SINGULAR_VALUE_RATIO` of the largest: ``V_k S_k^-2 V_k^T s^2``. Along the unidentified
    directions the covariance is zero, not infinite: what the data leave open there is the
    sample of training-equivalent solutions, not a variance. A standard error is NaN where its
    parameter is not `identifiable` (default: it has a component above 1e-6 along a null
    direction). Everything is NaN when ``n <= p``.
    """
    n_free = jacobian.shape[1]
    if n_points <= n_free or n_free == 0:
        return Uncertainty(np.full(n_free, np.nan), np.full((n_free, n_free), np.nan))
    residual_variance = 2.0 * cost / (n_points - n_free)
    _, singular_values, vt = np.linalg.svd(jacobian, full_matrices=False)
    kept = singular_values > NULL_SINGULAR_VALUE_RATIO * singular_values[0]
    basis = vt[kept] / singular_values[kept, None]
    variances = (vt[kept].T ** 2) @ (1.0 / singular_values[kept] ** 2) * residual_variance
    if identifiable is None:
        identifiable = ~(np.abs(vt[~kept]) > 1e-6).any(axis=0) if (~kept).any() else np.ones(n_free, dtype=bool)
    return Uncertainty(np.where(identifiable, np.sqrt(variances), np.nan), basis.T @ basis * residual_variance)


def null_space_shares(jacobian: np.ndarray) -> np.ndarray:
    """Diagonal of the projector onto the Jacobian's null space (basis-independent)."""
    if jacobian.shape[1] == 0:
        return np.zeros(0)
    _, singular_values, vt = np.linalg.svd(jacobian, full_matrices=True)
    padded = np.zeros(jacobian.shape[1])
    padded[:singular_values.size] = singular_values
    null = padded <= NULL_SINGULAR_VALUE_RATIO * padded[0]
    return (vt[null] ** 2).sum(axis=0)


@dataclass(frozen=True)
class IdentifiabilitySummary:
    """What a fit's training data leave open: how many directions are flat, the parameters in
    them (share of the null space at least `NULL_SHARE_THRESHOLD`), those on a bound."""

    unidentified_dimensions: int
    unidentified_parameters: tuple[str, ...]
    at_bounds: tuple[str, ...]

    @property
    def identified(self) -> bool:
        return self.unidentified_dimensions == 0

    def describe(self) -> str:
        """One line for tables and logs, e.g. ``2 unidentified directions (alpha, t_fixed)``."""
        parts = []
        if self.unidentified_dimensions:
            plural = "s" if self.unidentified_dimensions > 1 else ""
            parts.append(f"{self.unidentified_dimensions} unidentified direction{plural} "
                         f"({', '.join(self.unidentified_parameters)})")
        if self.at_bounds:
            parts.append(f"at bound: {', '.join(self.at_bounds)}")
        return "; ".join(parts) or "identified"

    def summary_dict(self) -> dict[str, Any]:
        return {"unidentified_dimensions": self.unidentified_dimensions,
                "unidentified_parameters": list(self.unidentified_parameters),
                "at_bounds": list(self.at_bounds)}


def identifiability_summary(names: Sequence[str], x: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                            jacobian: np.ndarray, held: np.ndarray | None = None) -> IdentifiabilitySummary:
    """The flat directions of `jacobian` (columns `names`) at `x` among the parameters neither on a
    bound of ``[lower, upper]`` nor `held` (fixed by the problem: not a finding about the data, so
    reported neither as on a bound nor as open)."""
    held = np.zeros(len(names), dtype=bool) if held is None else np.asarray(held, dtype=bool)
    scale = np.maximum(1.0, np.abs(x))
    on_bound = ((np.abs(x - lower) <= BOUND_TOLERANCE * scale) | (np.abs(x - upper) <= BOUND_TOLERANCE * scale)) & ~held
    interior = ~on_bound & ~held
    shares = null_space_shares(jacobian[:, interior])
    interior_names = [name for name, keep in zip(names, interior) if keep]
    return IdentifiabilitySummary(
        unidentified_dimensions=int(round(float(shares.sum()))),
        unidentified_parameters=tuple(name for name, share in zip(interior_names, shares)
                                      if share >= NULL_SHARE_THRESHOLD),
        at_bounds=tuple(name for name, bound in zip(names, on_bound) if bound))


def equivalent_solutions(solve_toward: Callable[[Any], OptimizeResult], references: Iterable[Any],
                         data_cost: Callable[[np.ndarray], float], best_x: np.ndarray,
                         n_residuals: int) -> list[np.ndarray]:
    """The training-equivalent solutions: each reference's prior minimised from the fit
    (`solve_toward(reference)`), kept where its data cost is within `EQUIVALENT_COST_TOLERANCE`
    of the fit's (plus 1e-12 per data residual, the floor of an exact fit)."""
    threshold = data_cost(best_x) * (1.0 + EQUIVALENT_COST_TOLERANCE) + 1e-12 * n_residuals
    solutions = []
    for reference in references:
        x = np.asarray(solve_toward(reference).x, dtype=float)
        if np.isfinite(x).all() and data_cost(x) <= threshold:
            solutions.append(x)
    return solutions


@dataclass(frozen=True)
class CalibrationResult:
    """What every calibration records, whatever its parameters: their standard errors (SI units,
    NaN where the data cannot identify one), the training quality, the starts and the residuals.

    `cost` is the data term ``0.5 sum r_i^2`` at the fitted values (without the prior),
    `residuals` the relative throughput errors ``pred / meas - 1`` per training row, `message`
    the optimiser's termination message of the best start. SLIM's `slim.model.fit.SlimFit` and
    SIM's `slim.sim.schedule_fit.SimCalibration` add their fitted values and identifiability.
    """

    standard_errors: dict[str, float]
    train_mape_throughput_pct: float
    n_train_points: int
    cost: float
    message: str
    split_name: str
    n_starts: int
    n_converged_starts: int
    identifiability: IdentifiabilitySummary
    residuals: np.ndarray = field(repr=False, compare=False)

    @property
    def converged(self) -> bool:
        """Every start of the grid converged (least-squares status > 0). A fit only exists
        when at least one did; False flags one whose optimum may depend on the start."""
        return self.n_converged_starts == self.n_starts

    def fitted_values(self) -> dict[str, float]:
        """The fitted parameters by name, in SI units."""
        raise NotImplementedError

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
