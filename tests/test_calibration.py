"""The shared calibration engine: the one tie-break, uncertainty from one SVD, identifiability, a problem
definition calibrated end to end (the prior, held parameters, the valley sample), the result record."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import pytest
from scipy.optimize import least_squares

import slim.model.calibration as calibration
from slim.errors import ConfigError, FitError
from slim.model.calibration import (
    CalibrationProblem,
    CalibrationResult,
    Excess,
    Parameter,
    RooflinePrior,
    best_of_starts,
    bounded_least_squares,
    calibrate,
    start_at,
    start_grid,
)
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



@dataclass(frozen=True)
class Times:
    a: float
    b: float
    c: float


class LinearTimes(CalibrationProblem):
    """A toy problem: row ``i`` takes ``t_i = g_i . u`` seconds for work ``w_i``, so its throughput is
    ``w_i / t_i``; measured at `truth`. The time is linear in ``u``, so ``g_ij (u_j - r_j)`` is the
    time constant ``j`` adds beyond a reference ``r``."""

    label = "toy calibration"
    ideal_reference = np.zeros(3)

    def __init__(self, gradients: np.ndarray, truth: np.ndarray, parameters=None, split_name: str = "toy"):
        parameters = parameters or [Parameter(name, 1.0, "s", 0.0, 10.0) for name in "abc"]
        work = np.linspace(1.0, 2.0, len(gradients))
        measured_time_s = gradients @ truth
        super().__init__(parameters, work / measured_time_s, measured_time_s, split_name)
        self.gradients = gradients

    def residuals(self, x: np.ndarray) -> np.ndarray:
        return self.measured_time_s / (self.gradients @ (x * self.units)) - 1.0

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        time_s = self.gradients @ (x * self.units)
        return -(self.measured_time_s / time_s**2)[:, None] * self.gradients * self.units

    def excess(self, x: np.ndarray, reference: np.ndarray) -> Excess:
        difference = x * self.units - reference
        return [(self.gradients[:, j] * difference[j], {name: self.gradients[:, j]})
                for j, name in enumerate(self.names)]

    def references(self, rng: np.random.Generator, count: int) -> list[np.ndarray]:
        return list(rng.uniform(0.0, 1.0, size=(count, 3)))

    def values_at(self, x: np.ndarray) -> Times:
        return Times(*(x * self.units).tolist())


@dataclass(frozen=True)
class ToyResult(CalibrationResult):
    times: Times

    VALUES_KEY: ClassVar[str] = "times"
    encode = staticmethod(dataclasses.asdict)
    decode = staticmethod(lambda record: Times(**record))


def toy_result(problem: LinearTimes, **options) -> ToyResult:
    calibration = calibrate(problem, start_grid([replace(p, starts=(0.2, 0.6)) for p in problem.parameters]),
                            **options)
    return ToyResult(**calibration.result_fields(dict(zip(problem.names, calibration.standard_errors.tolist()))),
                     times=problem.values_at(calibration.x))


GRADIENTS = np.random.default_rng(0).uniform(0.5, 2.0, size=(8, 3))
TRUTH = np.array([0.3, 0.5, 0.2])


def test_the_start_grid_is_every_combination_in_a_fixed_order_and_a_start_at_values_is_clipped():
    parameters = [Parameter("a", 1.0, "s", 0.0, 1.0, starts=(0.7, 0.2)), Parameter("b", 1e-3, "ms", 0.0, 5.0,
                                                                                  starts=(3.0,))]
    assert start_grid(parameters) == [(0.2, 3.0), (0.7, 3.0)]
    assert start_at(Times(2.0, 1e-3, 0.0))(parameters) == [(1.0, 1.0)]


def test_a_problem_on_the_engine_recovers_its_constants_and_round_trips_through_json():
    result = toy_result(LinearTimes(GRADIENTS, TRUTH))
    np.testing.assert_allclose(dataclasses.astuple(result.times), TRUTH, rtol=1e-4)   # the prior's pull
    assert result.converged and result.n_starts == 8 and result.identifiability.describe() == "identified"
    assert result.train_mape_throughput_pct < 1e-4 and all(np.isfinite(list(result.standard_errors.values())))
    record = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert record["times"] == dataclasses.asdict(result.times) and record["identifiability"]["equivalent_times"] == []
    restored = ToyResult.from_dict(record)
    assert restored == result and restored.fitted_values() == dataclasses.asdict(result.times)
    np.testing.assert_array_equal(restored.residuals, result.residuals)
    del record["cost"]
    with pytest.raises(ConfigError, match="ToyResult record lacks key 'cost'"):
        ToyResult.from_dict(record)


def test_the_prior_picks_the_point_of_least_excess_time_and_the_valley_is_sampled():
    """Constants a and b cost the same time in every row: the data fix a + b only; the prior toward
    zero splits it evenly, and every sampled solution fits the data as well."""
    gradients = GRADIENTS.copy()
    gradients[:, 1] = gradients[:, 0]
    problem = LinearTimes(gradients, TRUTH)
    result = toy_result(problem)
    assert result.identifiability.unidentified_dimensions == 1
    assert set(result.identifiability.unidentified_parameters) == {"a", "b"}
    assert result.times.a == pytest.approx(result.times.b, rel=1e-6) and result.times.a == pytest.approx(0.4, rel=1e-4)
    assert np.isnan(result.standard_errors["a"]) and np.isfinite(result.standard_errors["c"])
    solutions = result.identifiability.equivalent
    assert len(solutions) >= 16 and max(s.a for s in solutions) - min(s.a for s in solutions) > 0.1
    for solution in solutions:
        assert solution.a + solution.b == pytest.approx(0.8, rel=1e-5)
        assert problem.cost(np.array(dataclasses.astuple(solution))) <= result.cost * (1 + 1e-6) + 1e-12 * 8
    assert not toy_result(problem, sample_valley=False).identifiability.equivalent


def test_a_held_parameter_stays_at_its_ideal_value_and_is_neither_open_nor_on_a_bound():
    parameters = [Parameter("a", 1.0, "s", 0.0, 10.0), Parameter("b", 1.0, "s", 0.0, 10.0),
                  Parameter("c", 1.0, "s", 0.0, 10.0, vary=False)]
    result = toy_result(LinearTimes(GRADIENTS, np.array([0.3, 0.5, 0.0]), parameters))
    assert result.times.c == 0.0 and result.times.a == pytest.approx(0.3, rel=1e-4)
    assert result.identifiability.describe() == "identified"
    assert np.isnan(result.standard_errors["c"]) and np.isfinite(result.standard_errors["a"])
    with pytest.raises(FitError, match="split 'toy': 1 training point\\(s\\) for the toy calibration's 2 free "
                                       "constants \\(a, b\\)"):
        toy_result(LinearTimes(GRADIENTS[:1], TRUTH[:3], parameters))


@pytest.mark.parametrize("interior_errors_only", [False, True])
def test_a_constant_on_a_bound_has_a_standard_error_only_where_the_problem_says_so(interior_errors_only, monkeypatch):
    monkeypatch.setattr(LinearTimes, "interior_errors_only", interior_errors_only)
    noisy = LinearTimes(GRADIENTS, np.array([0.3, 0.5, 0.0]))
    noisy.measured_throughput = noisy.measured_throughput * (1 + 0.01 * np.random.default_rng(1).standard_normal(8))
    noisy.measured_time_s = np.linspace(1.0, 2.0, 8) / noisy.measured_throughput
    result = toy_result(noisy)
    assert result.identifiability.at_bounds == ("c",)
    assert np.isnan(result.standard_errors["c"]) == interior_errors_only
    assert np.isfinite(result.standard_errors["a"])


def test_the_prior_jacobian_matches_finite_differences_in_optimiser_units():
    parameters = [Parameter("a", 1.0, "s", 0.0, 10.0), Parameter("b", 1e-3, "ms", 0.0, 1e4),
                  Parameter("c", 1e-6, "us", 0.0, 1e6)]
    problem = LinearTimes(GRADIENTS, TRUTH, parameters)
    prior = RooflinePrior(problem, np.array([0.1, 0.2, 0.3]))
    point, step = np.array([0.4, 300.0, 2e5]), np.array([1e-4, 1e-1, 1e1])
    numeric = np.column_stack([(prior.residuals(point + np.eye(3)[k] * step[k])
                                - prior.residuals(point - np.eye(3)[k] * step[k])) / (2 * step[k]) for k in range(3)])
    np.testing.assert_allclose(prior.jacobian(point), numeric, rtol=1e-7, atol=1e-15)
    assert prior.residuals(point).shape == (3 * len(GRADIENTS),)


def test_the_solver_hands_on_the_jacobian_as_computed_unless_it_selects_the_free_columns(monkeypatch):
    """Selecting columns copies into Fortran order, which changes LAPACK's rounding; a problem that
    holds nothing must reach the optimiser with its Jacobian as stacked (C order)."""
    layouts = []

    def record_layout(residuals, jacobian, start, lower, upper, tolerance, failure):
        layouts.append(jacobian(start).flags["C_CONTIGUOUS"])
        return least_squares(residuals, start, jac=jacobian, bounds=(lower, upper))

    monkeypatch.setattr(calibration, "bounded_least_squares", record_layout)
    held = [Parameter("a", 1.0, "s", 0.0, 10.0), Parameter("b", 1.0, "s", 0.0, 10.0, vary=False),
            Parameter("c", 1.0, "s", 0.0, 10.0)]
    for parameters in (None, held):
        LinearTimes(GRADIENTS, TRUTH, parameters).solver(np.zeros(3))(np.full(3, 0.5), 1e-10)
    assert layouts == [True, False]
