"""The shared calibration engine: the one tie-break, uncertainty from one SVD, identifiability, reports."""

from __future__ import annotations

import numpy as np
import pytest

from slim.errors import FitError
from slim.model.calibration import best_of_starts, bounded_least_squares
from slim.model.identifiability import Identifiability, identifiability_summary, parameter_uncertainty

LOWER, UPPER = np.array([-5.0]), np.array([5.0])


def _double_well(start: np.ndarray, tolerance: float):
    """``(x^2 - 1)^2``: two minima of equal cost, at -1 and +1; each start finds the nearer one."""
    return bounded_least_squares(lambda x: np.array([x[0] ** 2 - 1.0]), lambda x: np.array([[2.0 * x[0]]]),
                                 start, LOWER, UPPER, tolerance, "double well")


def test_equal_cost_optima_are_chosen_by_the_lower_vector_whatever_the_start_order():
    starts = [np.array([2.0]), np.array([-2.0])]
    forward = best_of_starts(_double_well, starts, "none converged")
    backward = best_of_starts(_double_well, list(reversed(starts)), "none converged")
    assert forward.best.x[0] == pytest.approx(-1.0)
    assert backward.best.x.tobytes() == forward.best.x.tobytes()
    assert (forward.n_starts, forward.n_converged_starts) == (2, 2)


def test_no_converged_start_is_a_fit_error_naming_the_problem():
    def never(start, tolerance):
        result = _double_well(start, tolerance)
        result.status = 0
        return result

    with pytest.raises(FitError, match="nothing converged"):
        best_of_starts(never, [np.array([2.0])], "nothing converged")


def test_uncertainty_of_a_full_rank_jacobian_is_the_inverse_normal_matrix():
    jacobian = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    uncertainty = parameter_uncertainty(jacobian, cost=0.5, n_points=4)
    expected = np.linalg.inv(jacobian.T @ jacobian) * (2 * 0.5 / 2)
    np.testing.assert_allclose(uncertainty.covariance, expected)
    np.testing.assert_allclose(uncertainty.standard_errors, np.sqrt(np.diag(expected)))


def test_a_flat_direction_is_unidentified_and_has_no_standard_error():
    jacobian = np.array([[1.0, 1.0, 0.0], [2.0, 2.0, 1.0], [3.0, 3.0, 0.0], [1.0, 1.0, 1.0], [0.5, 0.5, 2.0]])
    uncertainty = parameter_uncertainty(jacobian, cost=0.1, n_points=5)
    assert np.isnan(uncertainty.standard_errors[:2]).all() and np.isfinite(uncertainty.standard_errors[2])
    summary = identifiability_summary(("a", "b", "c"), np.array([0.5, 0.5, 0.5]), np.zeros(3), np.ones(3), jacobian)
    assert summary == Identifiability(1, ("a", "b"), ())
    on_bound = identifiability_summary(("a", "b", "c"), np.array([0.0, 0.5, 0.5]), np.zeros(3), np.ones(3), jacobian)
    assert on_bound.describe() == "at bound: a"
    held = identifiability_summary(("a", "b", "c"), np.array([0.5, 0.5, 0.5]), np.zeros(3), np.ones(3), jacobian,
                                   held=np.array([False, True, False]))
    assert held.identified and held.at_bounds == ()

