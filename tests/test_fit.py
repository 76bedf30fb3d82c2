"""SLIM fit: recovering known constants from seeded synthetic data, errors, serialisation."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import slim.model.calibration as calibration
from slim import columns as col
from slim.errors import FitError
from slim.model.equations import FULL, NO_DENSE_DECODE, NO_KV_SCAN, PARAM_NAMES, SlimParams, predict_frame
from slim.model.fit import (
    FIT_PARAMETERS,
    SlimFit,
    SlimProblem,
    _training_data,
    fit_slim,
    free_parameter_names,
    start_grid,
)
from slim.model.identifiability import EQUIVALENT_COST_TOLERANCE
from slim.model.metrics import mape_pct
from slim.specs.architecture import MODELS_FILE, load_architectures
from slim.specs.hardware import HARDWARE_FILE, load_hardware

REPO = Path(__file__).resolve().parents[1]
CATALOG = load_architectures(MODELS_FILE)
H100 = load_hardware(HARDWARE_FILE)["h100-64gb"]
TRUE_PARAMS = SlimParams(eta_compute=0.55, eta_memory=0.7, batch_offset=6.0,
                         alpha_s_per_token=1.2e-3, gamma_s_per_token=15e-6, t_fixed_s=0.08)


def synthetic_frame(params: SlimParams, ablation=FULL, noise: float = 0.0, seed: int = 0,
                    models=("opt-1.3b", "opt-6.7b", "mistral-7b")) -> pd.DataFrame:
    """Configurations over architectures x IL x OL x B with SLIM throughputs, optionally noisy."""
    rows = list(itertools.product(models, [128.0, 512.0], [64.0, 256.0], [1.0, 4.0, 16.0, 64.0, 256.0]))
    frame = pd.DataFrame(rows, columns=[col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.MEAN_BATCH_SIZE])
    _, throughput = predict_frame(CATALOG, H100, params, frame, ablation)
    rng = np.random.default_rng(seed)
    frame[col.TOTAL_TOKEN_THROUGHPUT] = throughput * (1.0 + noise * rng.standard_normal(len(frame)))
    return frame


def test_noise_free_fit_recovers_the_parameters_exactly():
    fit = fit_slim(synthetic_frame(TRUE_PARAMS), CATALOG, H100, split_name="exact")
    for name in PARAM_NAMES:
        assert getattr(fit.params, name) == pytest.approx(getattr(TRUE_PARAMS, name), rel=1e-5), name
    assert fit.train_mape_throughput_pct < 1e-4
    assert fit.converged and fit.n_train_points == 60 and fit.free_parameters == PARAM_NAMES


def test_noisy_fit_recovers_the_parameters_within_tolerance():
    fit = fit_slim(synthetic_frame(TRUE_PARAMS, noise=0.01, seed=1), CATALOG, H100, split_name="noisy")
    relative_tolerance = {"eta_compute": 0.05, "eta_memory": 0.05, "batch_offset": 0.3,
                          "alpha_s_per_token": 0.1, "gamma_s_per_token": 0.05, "t_fixed_s": 0.15}
    for name, tolerance in relative_tolerance.items():
        fitted, true = getattr(fit.params, name), getattr(TRUE_PARAMS, name)
        assert fitted == pytest.approx(true, rel=tolerance), name
        # The Jacobian-based standard error is finite here and consistent with the error.
        assert 0 < fit.standard_errors[name] < math.inf
        assert abs(fitted - true) < 5 * fit.standard_errors[name], name
    # 1% Gaussian noise gives a MAPE near sqrt(2 / pi) % ~ 0.8%.
    assert 0.4 < fit.train_mape_throughput_pct < 1.3
    assert fit.residuals.shape == (60,)


def test_analytic_jacobian_matches_finite_differences():
    frame = synthetic_frame(TRUE_PARAMS, noise=0.01)
    for ablation in (FULL, NO_KV_SCAN, NO_DENSE_DECODE):
        names = free_parameter_names(ablation)
        objective = SlimProblem(_training_data(frame, CATALOG, H100, "jac"), H100, ablation)
        point = np.array([0.4, 0.6, 3.0, 0.8, 12.0, 0.05])[[PARAM_NAMES.index(n) for n in names]]
        step = 1e-6 * np.maximum(1.0, np.abs(point))
        numeric = np.column_stack([
            (objective.residuals(point + np.eye(len(point))[k] * step[k])
             - objective.residuals(point - np.eye(len(point))[k] * step[k])) / (2 * step[k])
            for k in range(len(point))
        ])
        np.testing.assert_allclose(objective.jacobian(point), numeric, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("ablation", [NO_KV_SCAN, NO_DENSE_DECODE])
def test_ablated_fit_fixes_the_removed_constants_and_recovers_the_rest(ablation):
    fit = fit_slim(synthetic_frame(TRUE_PARAMS, ablation=ablation), CATALOG, H100, ablation, split_name="ablated")
    fixed = set(PARAM_NAMES) - set(fit.free_parameters)
    assert fixed == ({"eta_memory", "batch_offset"} if ablation is NO_KV_SCAN
                     else {"alpha_s_per_token", "gamma_s_per_token"})
    for name in fixed:
        assert math.isnan(fit.standard_errors[name])
    for name in fit.free_parameters:
        assert getattr(fit.params, name) == pytest.approx(getattr(TRUE_PARAMS, name), rel=1e-4), name
    assert fit.ablation == ablation


def test_single_architecture_cannot_separate_alpha_from_gamma():
    # With one architecture L (D/1024)^2 is a constant, so alpha and gamma are collinear.
    frame = synthetic_frame(TRUE_PARAMS, models=("opt-1.3b",))
    fit = fit_slim(frame, CATALOG, H100, split_name="one-model")
    assert math.isnan(fit.standard_errors["alpha_s_per_token"])
    assert math.isnan(fit.standard_errors["gamma_s_per_token"])
    assert math.isfinite(fit.standard_errors["eta_compute"])
    assert fit.train_mape_throughput_pct < 1e-3


def test_fit_is_deterministic():
    frame = synthetic_frame(TRUE_PARAMS, noise=0.01, seed=3)
    assert fit_slim(frame, CATALOG, H100).params == fit_slim(frame, CATALOG, H100).params


def test_too_few_points_raise_fit_error_naming_the_split():
    frame = synthetic_frame(TRUE_PARAMS).iloc[:5]
    with pytest.raises(FitError, match="split 'tiny'.*5 training point"):
        fit_slim(frame, CATALOG, H100, split_name="tiny")
    # Four free parameters remain under an ablation, so five points suffice.
    fit_slim(frame, CATALOG, H100, NO_KV_SCAN, split_name="tiny")


@pytest.mark.parametrize("column, value", [
    (col.TOTAL_TOKEN_THROUGHPUT, np.nan),
    (col.TOTAL_TOKEN_THROUGHPUT, -100.0),
    (col.MEAN_BATCH_SIZE, 0.0),
    (col.INPUT_LEN_MEAN, np.inf),
])
def test_garbage_rows_raise_fit_error(column, value):
    frame = synthetic_frame(TRUE_PARAMS)
    frame.loc[3, column] = value
    with pytest.raises(FitError, match=f"split 'garbage'.*'{column}'.*1 row"):
        fit_slim(frame, CATALOG, H100, split_name="garbage")


def test_all_nan_empty_and_incomplete_tables_raise_fit_error():
    frame = synthetic_frame(TRUE_PARAMS)
    with pytest.raises(FitError, match="split 'nan'.*60 row"):
        fit_slim(frame.assign(**{col.TOTAL_TOKEN_THROUGHPUT: np.nan}), CATALOG, H100, split_name="nan")
    with pytest.raises(FitError, match="split 'empty'.*empty"):
        fit_slim(frame.iloc[:0], CATALOG, H100, split_name="empty")
    with pytest.raises(FitError, match=f"split 'cols'.*{col.TOTAL_TOKEN_THROUGHPUT}"):
        fit_slim(frame.drop(columns=col.TOTAL_TOKEN_THROUGHPUT), CATALOG, H100, split_name="cols")
    with pytest.raises(FitError, match="split 'unknown'.*gpt-5"):
        fit_slim(frame.assign(**{col.MODEL: "gpt-5"}), CATALOG, H100, split_name="unknown")


def test_fit_round_trips_through_json():
    fit = fit_slim(synthetic_frame(TRUE_PARAMS, NO_KV_SCAN, noise=0.01), CATALOG, H100, NO_KV_SCAN,
                   split_name="output_length")
    record = json.loads(json.dumps(fit.to_dict(), allow_nan=False))
    restored = SlimFit.from_dict(record)
    assert restored.params == fit.params
    assert restored.ablation == fit.ablation and restored.split_name == "output_length"
    assert restored.free_parameters == fit.free_parameters
    np.testing.assert_array_equal(restored.residuals, fit.residuals)
    np.testing.assert_array_equal(restored.covariance, fit.covariance)
    for name in PARAM_NAMES:
        np.testing.assert_equal(restored.standard_errors[name], fit.standard_errors[name])
    for field in dataclasses.fields(SlimFit):
        if field.name not in ("residuals", "standard_errors", "covariance"):
            assert getattr(restored, field.name) == getattr(fit, field.name), field.name


def test_mape_pct():
    assert mape_pct([110.0, 90.0], [100.0, 100.0]) == pytest.approx(10.0)
    assert mape_pct(np.array([1.0]), np.array([-2.0])) == pytest.approx(150.0)
    for predicted, measured in (([1.0], [0.0]), ([np.nan], [1.0]), ([1.0, 2.0], [1.0]), ([], [])):
        with pytest.raises(ValueError):
            mape_pct(predicted, measured)


def test_converged_says_whether_every_start_converged():
    fit = fit_slim(synthetic_frame(TRUE_PARAMS), CATALOG, H100, split_name="exact")
    assert fit.n_converged_starts == fit.n_starts and fit.converged
    assert fit.to_dict()["converged"] is True
    one_start_failed = dataclasses.replace(fit, n_converged_starts=fit.n_starts - 1)
    assert not one_start_failed.converged
    assert SlimFit.from_dict(one_start_failed.to_dict()).converged is False


def two_models_one_output_length(noise: float = 0.01, seed: int = 4) -> pd.DataFrame:
    """The real model transfer's shape: two OPT models, one IL, one OL, a B sweep."""
    rows = list(itertools.product(("opt-1.3b", "opt-2.7b"), [242.0], [390.0], [1.0, 4.0, 16.0, 64.0, 128.0, 256.0]))
    frame = pd.DataFrame(rows, columns=[col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.MEAN_BATCH_SIZE])
    _, throughput = predict_frame(CATALOG, H100, TRUE_PARAMS, frame)
    frame[col.TOTAL_TOKEN_THROUGHPUT] = throughput * (1.0 + noise * np.random.default_rng(seed).standard_normal(12))
    return frame


def test_an_unidentifiable_fit_reports_its_valley_and_samples_it():
    fit = fit_slim(two_models_one_output_length(), CATALOG, H100, split_name="valley")
    identifiability = fit.identifiability
    # t_fixed + alpha OL, gamma L (D/1024)^2 OL and B0 M_dec are per-model constants: three
    # unknowns from two models, and t_fixed vs alpha OL at a single OL.
    assert identifiability.unidentified_dimensions == 2
    assert {"alpha_s_per_token", "t_fixed_s"} <= set(identifiability.unidentified_parameters)
    assert "unidentified" in identifiability.describe()
    solutions = identifiability.equivalent
    assert len(solutions) >= 16
    objective = SlimProblem(_training_data(two_models_one_output_length(), CATALOG, H100, "valley"), H100, FULL)
    for params in solutions:   # training-equivalent: the same cost to the stated tolerance
        vector = np.array([getattr(params, name) / p.unit_in_si for name, p in zip(PARAM_NAMES, FIT_PARAMETERS)])
        assert objective.cost(vector) <= fit.cost * (1 + EQUIVALENT_COST_TOLERANCE) + 1e-12 * 12
    # ... and they really differ: the valley is sampled, not one point repeated.
    t_fixed = [params.t_fixed_s for params in solutions]
    assert max(t_fixed) - min(t_fixed) > 0.01
    # An unseen model (another D and L) is predicted differently along the valley.
    unseen = two_models_one_output_length().assign(**{col.MODEL: "llama-2-7b"})
    predictions = [predict_frame(CATALOG, H100, params, unseen)[1] for params in (fit.params, *solutions)]
    assert np.ptp(np.array(predictions), axis=0).max() / predictions[0].max() > 0.01


def test_the_identifiability_rule_picks_one_point_of_the_valley_whatever_the_noise_or_start_order():
    frame = two_models_one_output_length()
    fit = fit_slim(frame, CATALOG, H100, split_name="valley")
    nudged = frame.assign(**{col.TOTAL_TOKEN_THROUGHPUT: frame[col.TOTAL_TOKEN_THROUGHPUT]
                             * (1 + 1e-9 * np.random.default_rng(0).uniform(-1, 1, len(frame)))})
    reversed_starts = fit_slim(frame, CATALOG, H100, split_name="valley",
                               starts=lambda specs: list(reversed(start_grid(specs))))
    for other in (fit_slim(nudged, CATALOG, H100, split_name="valley"), reversed_starts):
        for name in PARAM_NAMES:
            assert getattr(other.params, name) == pytest.approx(getattr(fit.params, name), rel=1e-5, abs=1e-9), name


def test_the_roofline_prior_leaves_an_identified_fit_alone(monkeypatch):
    """On data that determine every constant the prior moves nothing measurable."""
    frame = synthetic_frame(TRUE_PARAMS, noise=0.01, seed=1)
    fit = fit_slim(frame, CATALOG, H100, split_name="noisy")
    assert fit.identifiability.identified and fit.identifiability.equivalent == ()
    assert fit.identifiability.describe() == "identified"
    monkeypatch.setattr(calibration, "ROOFLINE_PRIOR_WEIGHT", 0.0)
    without_prior = fit_slim(frame, CATALOG, H100, split_name="no prior")
    for name in PARAM_NAMES:
        assert getattr(fit.params, name) == pytest.approx(getattr(without_prior.params, name), rel=1e-4), name


def test_the_report_gives_the_quality_every_free_value_and_what_is_open():
    fit = fit_slim(synthetic_frame(TRUE_PARAMS, noise=0.01), CATALOG, H100, split_name="noisy")
    report = fit.report().splitlines()
    assert report[0].startswith("noisy: 60 training points, train MAPE ") and report[0].endswith("identified")
    assert [line.split(" = ")[0].strip() for line in report[1:]] == list(PARAM_NAMES)
    assert "+/-" in report[1]
