"""Prediction bands (slim.model.uncertainty) and IMAI OOD-LR's statsmodels band: the delta method
against a seeded parametric bootstrap, the envelope over unidentified directions, determinism."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.errors import FitError
from slim.model.equations import (
    FULL,
    NO_DENSE_DECODE,
    PARAM_NAMES,
    e2e_derivatives_s,
    predict_e2e_s,
    predict_frame,
    workload_terms,
)
from slim.model.fit import SlimFit, fit_slim, start_at
from slim.model.uncertainty import band_quantile, log_e2e_std, prediction_band, prediction_band_frame
from tests.test_fit import CATALOG, H100, TRUE_PARAMS, synthetic_frame

TARGET = pd.DataFrame({col.MODEL: "opt-2.7b", col.INPUT_LEN_MEAN: 256.0, col.OUTPUT_LEN_MEAN: 128.0,
                       col.MEAN_BATCH_SIZE: [1.0, 8.0, 32.0, 128.0, 512.0]})


@pytest.fixture(scope="module")
def noisy_fit() -> SlimFit:
    return fit_slim(synthetic_frame(TRUE_PARAMS, noise=0.02, seed=3), CATALOG, H100, split_name="noisy")


def test_e2e_derivatives_match_finite_differences():
    arch = CATALOG["opt-6.7b"]
    il, ol, batch = np.array([128.0, 512.0]), np.array([64.0, 256.0]), np.array([4.0, 200.0])
    for ablation in (FULL, NO_DENSE_DECODE):
        analytic = e2e_derivatives_s(arch, H100, TRUE_PARAMS, il, ol, batch, ablation)
        for name in PARAM_NAMES:
            value = getattr(TRUE_PARAMS, name)
            step = 1e-6 * max(abs(value), 1e-6)
            up = TRUE_PARAMS.__class__(**{**TRUE_PARAMS.to_dict(), name: value + step})
            down = TRUE_PARAMS.__class__(**{**TRUE_PARAMS.to_dict(), name: value - step})
            numeric = (predict_e2e_s(arch, H100, up, il, ol, batch, ablation)
                       - predict_e2e_s(arch, H100, down, il, ol, batch, ablation)) / (2 * step)
            np.testing.assert_allclose(analytic[name], numeric, rtol=1e-5, atol=1e-12, err_msg=name)


def test_covariance_diagonal_is_the_squared_standard_errors(noisy_fit):
    diagonal = np.sqrt(np.diag(noisy_fit.covariance))
    errors = np.array([noisy_fit.standard_errors[name] for name in noisy_fit.free_parameters])
    np.testing.assert_allclose(diagonal, errors, rtol=1e-10)
    assert noisy_fit.residual_dof == 60 - 6
    restored = SlimFit.from_dict(noisy_fit.to_dict())
    np.testing.assert_array_equal(restored.covariance, noisy_fit.covariance)


def test_delta_method_matches_a_seeded_parametric_bootstrap(noisy_fit):
    """sigma(x) of log E2E against the spread of refits on data re-noised around the fitted model
    (40 seeded replicates, each refit from the fit itself): the linearisation must hold."""
    train = synthetic_frame(TRUE_PARAMS, noise=0.0)
    _, fitted_throughput = predict_frame(CATALOG, H100, noisy_fit.params, train)
    scale = math.sqrt(noisy_fit.residual_variance)
    rng = np.random.default_rng(11)
    logs = []
    for _ in range(40):
        replicate = train.assign(**{col.TOTAL_TOKEN_THROUGHPUT:
                                    fitted_throughput * (1.0 + scale * rng.standard_normal(len(train)))})
        refit = fit_slim(replicate, CATALOG, H100, split_name="bootstrap", starts=start_at(noisy_fit.params),
                         sample_valley=False)
        logs.append(np.log(predict_frame(CATALOG, H100, refit.params, TARGET)[0]))
    bootstrap_std = np.std(logs, axis=0, ddof=1)
    il, ol, batch = (TARGET[c].to_numpy() for c in (col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.MEAN_BATCH_SIZE))
    delta_std = log_e2e_std(noisy_fit, workload_terms(CATALOG["opt-2.7b"], il, ol, batch), H100)
    # 40 replicates estimate a standard deviation to about +-11% (1 sigma).
    np.testing.assert_allclose(delta_std, bootstrap_std, rtol=0.4)


def test_band_brackets_the_prediction_and_widens_with_confidence_and_for_a_run(noisy_fit):
    band = prediction_band_frame(noisy_fit, CATALOG, H100, TARGET, 0.9)
    assert (band.e2e_low_s < band.e2e_s).all() and (band.e2e_s < band.e2e_high_s).all()
    assert (band.throughput_low_per_s < band.throughput_per_s).all()
    np.testing.assert_allclose(band.throughput_low_per_s * band.e2e_high_s,
                               band.throughput_per_s * band.e2e_s)  # Eq. 6 maps one band to the other
    np.testing.assert_array_equal(band.envelope_ratio, 0.0)       # identified: no envelope
    wider = prediction_band_frame(noisy_fit, CATALOG, H100, TARGET, 0.99)
    assert (wider.e2e_relative_half_width > band.e2e_relative_half_width).all()
    run = prediction_band_frame(noisy_fit, CATALOG, H100, TARGET, 0.9, kind="run")
    assert (run.log_std ** 2 == pytest.approx(band.log_std ** 2 + noisy_fit.residual_variance))
    assert band_quantile(noisy_fit, 0.9) == pytest.approx(1.6736, abs=1e-3)   # t(0.95, 54 dof)


def test_an_unidentified_direction_widens_the_band_by_the_envelope():
    """One model leaves alpha and gamma collinear: another width's prediction is not determined,
    and the band must span every training-equivalent solution's prediction."""
    train = synthetic_frame(TRUE_PARAMS, noise=0.01, seed=2, models=("opt-1.3b",))
    fit = fit_slim(train, CATALOG, H100, split_name="one model")
    assert not fit.identifiability.identified and fit.identifiability.equivalent
    other = TARGET.assign(**{col.MODEL: "opt-6.7b"})
    band = prediction_band_frame(fit, CATALOG, H100, other, 0.9)
    alternatives = np.stack([predict_frame(CATALOG, H100, p, other)[0] for p in fit.identifiability.equivalent])
    assert (band.envelope_ratio > 0.01).all()
    assert (band.e2e_low_s <= alternatives.min(axis=0)).all() and (alternatives.max(axis=0) <= band.e2e_high_s).all()
    same_model = prediction_band_frame(fit, CATALOG, H100, TARGET.assign(**{col.MODEL: "opt-1.3b"}), 0.9)
    assert (same_model.envelope_ratio < 1e-3).all()        # the training model's prediction is determined
    assert band.envelope_sampled
    unsampled = fit_slim(train, CATALOG, H100, split_name="one model", sample_valley=False)
    narrow = prediction_band_frame(unsampled, CATALOG, H100, other, 0.9)
    assert not narrow.envelope_sampled and (narrow.envelope_ratio == 0).all()
    assert (narrow.e2e_high_s < band.e2e_high_s).all()


def test_one_sided_upper_bound_uses_t_of_c(noisy_fit):
    arch = CATALOG["opt-2.7b"]
    terms = workload_terms(arch, 256.0, 128.0, np.array([4.0, 64.0]))
    upper = prediction_band(noisy_fit, terms, H100, 0.9, one_sided=True)
    two = prediction_band(noisy_fit, terms, H100, 0.8)
    np.testing.assert_allclose(upper.e2e_high_s, two.e2e_high_s)   # one-sided 90% = two-sided 80% upper end
    np.testing.assert_array_equal(upper.e2e_low_s, upper.e2e_s)


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5, float("nan")])
def test_confidence_outside_the_open_unit_interval_is_refused(noisy_fit, confidence):
    with pytest.raises(FitError, match="confidence must lie in"):
        prediction_band_frame(noisy_fit, CATALOG, H100, TARGET, confidence)


def test_bands_are_deterministic():
    first, second = (prediction_band_frame(fit_slim(synthetic_frame(TRUE_PARAMS, noise=0.02, seed=5), CATALOG, H100),
                                           CATALOG, H100, TARGET) for _ in range(2))
    for name in ("e2e_low_s", "e2e_high_s", "throughput_low_per_s", "throughput_high_per_s"):
        assert getattr(first, name).tobytes() == getattr(second, name).tobytes()


def test_imai_band_comes_from_statsmodels_and_is_unbounded_where_undetermined():
    from baselines import ImaiOodLr
    from baselines.features import add_architecture_columns

    train = add_architecture_columns(synthetic_frame(TRUE_PARAMS, noise=0.02, seed=4), CATALOG)
    train[col.E2E_LATENCY_S] = (train[col.MEAN_BATCH_SIZE] * (train[col.INPUT_LEN_MEAN] + train[col.OUTPUT_LEN_MEAN])
                                / train[col.TOTAL_TOKEN_THROUGHPUT])
    model = ImaiOodLr().fit(train, train[col.E2E_LATENCY_S].to_numpy())
    target = add_architecture_columns(TARGET.assign(**{col.MODEL: "opt-6.7b"}), CATALOG)   # a training model
    assert model.prediction_determined(target).all()
    low, high = model.predict_band(target, 0.9)
    predicted = model.predict(target)
    assert (low < predicted).all() and (predicted < high).all()
    # statsmodels' fit is scikit-learn's: the band is centred on the estimator's own prediction.
    np.testing.assert_allclose((low + high) / 2, predicted, rtol=1e-9)
    observation_low, observation_high = model.predict_band(target, 0.9, observation=True)
    assert (observation_high - observation_low > high - low).all()
    one_model = train[train[col.MODEL] == "opt-1.3b"]
    single = ImaiOodLr().fit(one_model, one_model[col.E2E_LATENCY_S].to_numpy())
    assert not single.prediction_determined(target).any()
    low, high = single.predict_band(target, 0.9)           # another model: not determined
    assert np.isnan(low).all() and np.isnan(high).all()
