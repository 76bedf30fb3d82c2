"""What a calibration's training data determine (`slim.model.calibration`): standard errors from one
SVD of the data Jacobian, the directions it leaves flat, the parameters on a bound, and the
training-equivalent solutions that bound what the data cannot decide."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np

if TYPE_CHECKING:
    from scipy.optimize import OptimizeResult

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


@dataclass(frozen=True)
class Uncertainty:
    """Standard errors and covariance of the parameters (optimiser units), from one SVD."""

    standard_errors: np.ndarray
    covariance: np.ndarray


def residual_variance(cost: float, dof: int) -> float:
    """``s^2 = 2 cost / (n - p)``, the variance of the relative throughput residuals, for ``dof = n - p``
    (NaN where ``dof <= 0``)."""
    return 2.0 * cost / dof if dof > 0 else math.nan


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
    variance = residual_variance(cost, n_points - n_free)
    _, singular_values, vt = np.linalg.svd(jacobian, full_matrices=False)
    kept = singular_values > NULL_SINGULAR_VALUE_RATIO * singular_values[0]
    basis = vt[kept] / singular_values[kept, None]
    variances = (vt[kept].T ** 2) @ (1.0 / singular_values[kept] ** 2) * variance
    if identifiable is None:
        identifiable = ~(np.abs(vt[~kept]) > 1e-6).any(axis=0) if (~kept).any() else np.ones(n_free, dtype=bool)
    return Uncertainty(np.where(identifiable, np.sqrt(variances), np.nan), basis.T @ basis * variance)


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
class Identifiability:
    """What a calibration's training data determine.

    ``unidentified_dimensions`` is the number of directions of the free, not-at-bound
    parameters along which the training cost is flat (relative singular value below
    `NULL_SINGULAR_VALUE_RATIO`); ``unidentified_parameters`` are the parameters with a share of at
    least `NULL_SHARE_THRESHOLD` in that null space (basis-independent: the diagonal of its
    projector). ``at_bounds`` are free parameters the optimum pushed onto a bound. ``equivalent``
    are distinct training-equivalent solutions (the problem's values, data cost within
    `EQUIVALENT_COST_TOLERANCE` of the fit's), found by projecting seeded references onto that set
    (`slim.model.calibration.VALLEY_SAMPLES`); they bound what the data cannot decide.
    """

    unidentified_dimensions: int
    unidentified_parameters: tuple[str, ...]
    at_bounds: tuple[str, ...]
    equivalent: tuple[Any, ...] = ()

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
                            jacobian: np.ndarray, held: np.ndarray | None = None) -> Identifiability:
    """The flat directions of `jacobian` (columns `names`) at `x` among the parameters neither on a
    bound of ``[lower, upper]`` nor `held` (fixed by the problem: not a finding about the data, so
    reported neither as on a bound nor as open)."""
    held = np.zeros(len(names), dtype=bool) if held is None else np.asarray(held, dtype=bool)
    scale = np.maximum(1.0, np.abs(x))
    on_bound = ((np.abs(x - lower) <= BOUND_TOLERANCE * scale) | (np.abs(x - upper) <= BOUND_TOLERANCE * scale)) & ~held
    interior = ~on_bound & ~held
    shares = null_space_shares(jacobian[:, interior])
    interior_names = [name for name, keep in zip(names, interior) if keep]
    return Identifiability(
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
