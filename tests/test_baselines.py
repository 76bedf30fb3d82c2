"""Tests of the regression baselines: estimator contract, exact recovery of
their own functional forms, Eq. 6, and behaviour on a realistic synthetic frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from baselines import ImaiOodLr, LLMVisorAgg
from baselines.features import (
    ARCHITECTURE_COLUMNS,
    add_architecture_columns,
    architecture_arrays,
    workload_arrays,
)
from baselines.imai import IMAI_FEATURE_NAMES, imai_features
from baselines.llmvisor import decode_features, fit_two_segments, prefill_features
from slim import columns as col
from slim.errors import ConfigError, NotFittedError, UnknownModelError
from slim.specs.architecture import MODELS_FILE, load_architectures

# name: (L, D, H_q, H_kv) -- made-up architectures, so the design is full rank.
SYNTHETIC_ARCHS = {
    "a": (12, 768, 12, 12),
    "b": (24, 1024, 16, 16),
    "c": (24, 2048, 32, 8),
    "d": (32, 2560, 40, 40),
    "e": (32, 4096, 32, 8),
    "f": (40, 5120, 40, 20),
}


def _workload_frame(rng: np.random.Generator, models=("a",), batches=(1, 2, 4, 8, 16, 32, 64, 128, 256),
                    input_lens=(128, 256, 512), output_lens=(64, 128, 256)) -> pd.DataFrame:
    rows = []
    for model in models:
        for il in input_lens:
            for ol in output_lens:
                for b in batches:
                    rows.append({col.MODEL: model, col.INPUT_LEN_MEAN: float(il), col.OUTPUT_LEN_MEAN: float(ol),
                                 col.MEAN_BATCH_SIZE: b * rng.uniform(0.9, 1.0)})
    frame = pd.DataFrame(rows)
    for i, column in enumerate(ARCHITECTURE_COLUMNS):
        frame[column] = [SYNTHETIC_ARCHS[m][i] for m in frame[col.MODEL]]
    return frame


def _realistic_frame(seed: int = 0, models=("a",), output_lens=(128, 256, 384, 512)) -> pd.DataFrame:
    """A roofline-shaped truth that is neither baseline's form: per decode step,
    weights are read once and every running request's KV context is scanned;
    TTFT as measured with request rate inf is dominated by queueing."""
    rng = np.random.default_rng(seed)
    frame = _workload_frame(rng, models=models, input_lens=(242,), output_lens=output_lens)
    arch = architecture_arrays(frame)
    b, il, ol = frame[col.MEAN_BATCH_SIZE], frame[col.INPUT_LEN_MEAN], frame[col.OUTPUT_LEN_MEAN]
    weight_bytes = 12 * arch.n_layers * arch.hidden_dim**2 * 2.0
    kv_bytes = 2 * arch.n_layers * arch.kv_dim * 2.0 * b * (il + ol / 2)
    itl_s = 1.5e-3 + (weight_bytes + kv_bytes) / 1.2e12
    prefill_s = 2e-3 + 24 * arch.n_layers * arch.hidden_dim**2 * b * il / 4e14
    noise = rng.normal(1.0, 0.01, size=len(frame))
    frame[col.MEAN_ITL_MS] = itl_s * 1e3 * noise
    frame[col.E2E_LATENCY_S] = (prefill_s + itl_s * (ol - 1)) * noise
    frame[col.MEAN_TTFT_MS] = 1e3 * (20.0 + 2000.0 / b)  # queue-dominated
    frame[col.TOTAL_TOKEN_THROUGHPUT] = b * (il + ol) / frame[col.E2E_LATENCY_S]
    return frame


def _mape(predicted, measured) -> float:
    return float(100 * np.mean(np.abs(np.asarray(predicted) - np.asarray(measured)) / np.asarray(measured)))


# --- contract ---------------------------------------------------------------

ESTIMATORS = [
    (LLMVisorAgg, {"ttft_target": "measured", "ttft_floor_s": 0.001, "loss": "absolute",
                   "n_segments": 1, "min_segment_size": 7, "nonnegative": True, "decode_context": "split"}),
    (ImaiOodLr, {"alpha": 0.5, "loss": "absolute", "features": "roofline_overhead", "target": "e2e",
                 "peak_flops_per_s": 989e12, "hbm_bandwidth_bytes_per_s": 1.62e12}),
]


@pytest.mark.parametrize(("cls", "params"), ESTIMATORS)
def test_constructor_stores_arguments_and_clone_works(cls, params):
    estimator = cls(**params)
    assert estimator.get_params() == params
    assert clone(estimator).get_params() == params
    assert cls().set_params(**params).get_params() == params


@pytest.mark.parametrize(("cls", "params"), ESTIMATORS)
def test_fit_returns_self_and_learned_attributes_end_in_underscore(cls, params):
    frame = _realistic_frame(models=("a", "c", "e"))
    estimator = cls()
    assert not [name for name in vars(estimator) if name.endswith("_")]
    assert estimator.fit(frame, frame[col.E2E_LATENCY_S]) is estimator
    learned = [name for name in vars(estimator) if name not in estimator.get_params()]
    assert learned and all(name.endswith("_") for name in learned)
    check_is_fitted(estimator)  # scikit-learn sees it as fitted
    refit = clone(estimator)
    assert not hasattr(refit, "n_train_")


@pytest.mark.parametrize("cls", [LLMVisorAgg, ImaiOodLr])
def test_predict_before_fit_raises(cls):
    frame = _realistic_frame()
    for method in (cls().predict, cls().predict_throughput):
        with pytest.raises(NotFittedError, match="not fitted"):
            method(frame)


@pytest.mark.parametrize(("estimator", "drop"), [
    (LLMVisorAgg(), col.MEAN_ITL_MS),
    (LLMVisorAgg(ttft_target="measured"), col.MEAN_TTFT_MS),
    (ImaiOodLr(), "hidden_dim"),
    (ImaiOodLr(), col.MEAN_BATCH_SIZE),
])
def test_missing_column_names_the_column(estimator, drop):
    frame = _realistic_frame().drop(columns=[drop])
    with pytest.raises(ConfigError, match=drop):
        estimator.fit(frame, _realistic_frame()[col.E2E_LATENCY_S])


@pytest.mark.parametrize("estimator", [
    LLMVisorAgg(ttft_target="queue"), LLMVisorAgg(loss="huber"), LLMVisorAgg(n_segments=3),
    LLMVisorAgg(ttft_floor_s=-1.0), ImaiOodLr(alpha=-1.0), ImaiOodLr(loss="l1"),
])
def test_invalid_parameters_raise_config_error_at_fit(estimator):
    frame = _realistic_frame()
    with pytest.raises(ConfigError):
        estimator.fit(frame, frame[col.E2E_LATENCY_S])


def test_target_length_and_sign_are_checked():
    frame = _realistic_frame()
    with pytest.raises(ConfigError, match="one value per row"):
        ImaiOodLr().fit(frame, frame[col.E2E_LATENCY_S].to_numpy()[:-1])
    with pytest.raises(ConfigError, match="positive"):
        LLMVisorAgg().fit(frame, -frame[col.E2E_LATENCY_S])


# --- architecture columns ---------------------------------------------------

def test_add_architecture_columns_from_catalog():
    catalog = load_architectures(MODELS_FILE)
    frame = pd.DataFrame({col.MODEL: ["opt-1.3b", "mistral-7b", "opt-1.3b"], "x": [1, 2, 3]})
    out = add_architecture_columns(frame, catalog)
    assert list(out.loc[0, list(ARCHITECTURE_COLUMNS)]) == [24, 2048, 32, 32]
    assert list(out.loc[1, list(ARCHITECTURE_COLUMNS)]) == [32, 4096, 32, 8]
    assert "n_layers" not in frame.columns  # input left untouched
    with pytest.raises(UnknownModelError):
        add_architecture_columns(pd.DataFrame({col.MODEL: ["gpt-9"]}), catalog)


# --- exact recovery ---------------------------------------------------------

PREFILL_TRUTH = (np.array([2e-3, 4e-7, 3e-10, 1e-4]), np.array([5e-3, 9e-7, 6e-10, 3e-4]))
DECODE_TRUTH = (np.array([4e-3, 2e-5, 1e-8]), np.array([1e-3, 6e-5, 4e-8]))
PREFILL_BREAK, DECODE_BREAK = 24.0, 45.0   # true breakpoints on B


def _llmvisor_truth_frame(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = _workload_frame(rng)
    workload = workload_arrays(frame)
    b = workload.batch_size
    ttft_s = np.where(b <= PREFILL_BREAK, prefill_features(workload) @ PREFILL_TRUTH[0],
                      prefill_features(workload) @ PREFILL_TRUTH[1])
    itl_s = np.where(b <= DECODE_BREAK, decode_features(workload) @ DECODE_TRUTH[0],
                     decode_features(workload) @ DECODE_TRUTH[1])
    frame[col.MEAN_ITL_MS] = itl_s * 1e3
    frame[col.MEAN_TTFT_MS] = ttft_s * 1e3
    frame[col.E2E_LATENCY_S] = ttft_s + itl_s * (workload.output_len - 1)
    return frame


@pytest.mark.parametrize("ttft_target", ["in_batch", "measured"])
@pytest.mark.parametrize("loss", ["relative", "absolute"])
def test_llmvisor_recovers_its_own_piecewise_functions(ttft_target, loss):
    frame = _llmvisor_truth_frame(seed=1)
    model = LLMVisorAgg(ttft_target=ttft_target, loss=loss).fit(frame, frame[col.E2E_LATENCY_S])
    batch = frame[col.MEAN_BATCH_SIZE]
    # the chosen breakpoints separate the true segments (16 < 24 < 32, 32 < 45 < 64)
    assert batch[batch <= 16].max() < model.prefill_breakpoint_ < batch[batch > 24].min()
    assert batch[batch <= 32].max() < model.decode_breakpoint_ < batch[batch > 45].min()
    np.testing.assert_allclose(model.prefill_coef_, np.vstack(PREFILL_TRUTH), rtol=1e-6)
    np.testing.assert_allclose(model.decode_coef_, np.vstack(DECODE_TRUTH), rtol=1e-6)
    fresh = _llmvisor_truth_frame(seed=2)
    np.testing.assert_allclose(model.predict(fresh), fresh[col.E2E_LATENCY_S], rtol=1e-6)
    np.testing.assert_allclose(model.predict_itl_s(fresh), fresh[col.MEAN_ITL_MS] / 1e3, rtol=1e-6)


def test_llmvisor_nonnegative_and_single_segment_recover_a_linear_truth():
    rng = np.random.default_rng(3)
    frame = _workload_frame(rng)
    workload = workload_arrays(frame)
    ttft_s, itl_s = prefill_features(workload) @ PREFILL_TRUTH[0], decode_features(workload) @ DECODE_TRUTH[0]
    frame[col.MEAN_ITL_MS] = itl_s * 1e3
    y = ttft_s + itl_s * (workload.output_len - 1)
    for model in (LLMVisorAgg(n_segments=1), LLMVisorAgg(nonnegative=True)):
        model.fit(frame, y)
        np.testing.assert_allclose(model.prefill_coef_, np.vstack([PREFILL_TRUTH[0]] * 2), rtol=1e-5)
        np.testing.assert_allclose(model.decode_coef_, np.vstack([DECODE_TRUTH[0]] * 2), rtol=1e-5)
    assert LLMVisorAgg(n_segments=1).fit(frame, y).decode_breakpoint_ == np.inf


def test_two_segment_fit_without_admissible_breakpoint_uses_one_segment():
    design = np.column_stack([np.ones(4), np.arange(4.0)])
    target = 1.0 + 2.0 * np.arange(4.0)
    fit = fit_two_segments(design, target, np.ones(4), np.arange(4.0), min_segment_size=3)
    assert fit.breakpoint == np.inf
    np.testing.assert_allclose(fit.coef_low, [1.0, 2.0])
    np.testing.assert_allclose(fit.predict(design, np.arange(4.0)), target)


def test_llmvisor_in_batch_target_is_floored_residual_of_e2e():
    frame = _realistic_frame()
    itl_s = frame[col.MEAN_ITL_MS] / 1e3
    y = itl_s * (frame[col.OUTPUT_LEN_MEAN] - 1) + np.where(np.arange(len(frame)) % 2, 0.01, -0.01)
    model = LLMVisorAgg(ttft_floor_s=0.002).fit(frame, y)
    np.testing.assert_allclose(model.prefill_target_s_, np.where(np.arange(len(frame)) % 2, 0.01, 0.002))


IMAI_TRUTH_INTERCEPT = 0.05
IMAI_TRUTH = np.array([1e-3, 2e-5, 1e-2, 1e-3, 1e-5, 2e-4, 3e-4,
                       1e-7, 2e-5, 1e-7, 5e-9, 2e-11, 1e-10])


def _imai_truth_frame(seed: int, models=tuple(SYNTHETIC_ARCHS)) -> pd.DataFrame:
    frame = _workload_frame(np.random.default_rng(seed), models=models)
    design = imai_features(workload_arrays(frame), architecture_arrays(frame))
    frame[col.E2E_LATENCY_S] = IMAI_TRUTH_INTERCEPT + design @ IMAI_TRUTH
    return frame


@pytest.mark.parametrize("loss", ["relative", "absolute"])
def test_imai_recovers_its_own_linear_model(loss):
    assert len(IMAI_TRUTH) == len(IMAI_FEATURE_NAMES)
    frame = _imai_truth_frame(seed=4)
    model = ImaiOodLr(loss=loss).fit(frame, frame[col.E2E_LATENCY_S])
    assert model.active_features_.all()
    np.testing.assert_allclose(model.coef_, IMAI_TRUTH, rtol=1e-5)
    assert model.intercept_ == pytest.approx(IMAI_TRUTH_INTERCEPT, rel=1e-5)
    fresh = _imai_truth_frame(seed=5)
    np.testing.assert_allclose(model.predict(fresh), fresh[col.E2E_LATENCY_S], rtol=1e-8)


def test_imai_single_model_fit_is_well_defined():
    frame = _imai_truth_frame(seed=6, models=("c",))
    model = ImaiOodLr().fit(frame, frame[col.E2E_LATENCY_S])
    constant = [IMAI_FEATURE_NAMES.index(name) for name in ("L", "D", "H_q", "H_kv")]
    assert not model.active_features_[constant].any()
    assert np.all(model.coef_[constant] == 0)
    # the truth lies in the span of the single-model design: exact on that model
    fresh = _imai_truth_frame(seed=7, models=("c",))
    np.testing.assert_allclose(model.predict(fresh), fresh[col.E2E_LATENCY_S], rtol=1e-6)
    # minimal norm: collinear columns (L D^2 OL ~ OL) share the weight in standardised units
    ol, ld2ol = IMAI_FEATURE_NAMES.index("OL"), IMAI_FEATURE_NAMES.index("L*D^2*OL")
    scaled = model.coef_ * model.feature_scale_
    assert scaled[ol] == pytest.approx(scaled[ld2ol], rel=1e-6)
    assert np.all(np.isfinite(model.predict(_imai_truth_frame(seed=8, models=("e",)))))


# --- Eq. 6 and realistic behaviour -----------------------------------------

@pytest.mark.parametrize("estimator", [LLMVisorAgg(), ImaiOodLr()])
def test_throughput_is_eq6_of_predicted_e2e(estimator):
    frame = _realistic_frame(models=("a", "c"))
    estimator.fit(frame, frame[col.E2E_LATENCY_S])
    expected = (frame[col.MEAN_BATCH_SIZE] * (frame[col.INPUT_LEN_MEAN] + frame[col.OUTPUT_LEN_MEAN])
                / estimator.predict(frame))
    np.testing.assert_allclose(estimator.predict_throughput(frame), expected, rtol=1e-12)


def test_llmvisor_in_batch_target_fits_while_measured_ttft_is_absurd():
    frame = _realistic_frame(seed=9)
    e2e = frame[col.E2E_LATENCY_S]
    in_batch = LLMVisorAgg().fit(frame, e2e)
    measured = LLMVisorAgg(ttft_target="measured").fit(frame, e2e)
    assert _mape(in_batch.predict(frame), e2e) < 5
    assert np.all(in_batch.predict(frame) > 0)
    assert np.median(measured.predict(frame) / e2e) > 5  # queueing leaks into E2E


def test_baselines_on_realistic_output_length_transfer():
    frame = _realistic_frame(seed=10)
    train = frame[frame[col.OUTPUT_LEN_MEAN] < 512]
    test = frame[frame[col.OUTPUT_LEN_MEAN] == 512]
    for model in (LLMVisorAgg(), ImaiOodLr()):
        model.fit(train, train[col.E2E_LATENCY_S])
        assert _mape(model.predict_throughput(test), test[col.TOTAL_TOKEN_THROUGHPUT]) < 15
        predicted = model.predict(test.sort_values(col.MEAN_BATCH_SIZE))
        assert np.all(np.diff(predicted) > 0)  # latency grows with the batch


def test_llmvisor_cannot_tell_models_apart():
    frame = _realistic_frame(seed=11, models=("a", "e"))
    small, large = frame[frame[col.MODEL] == "a"], frame[frame[col.MODEL] == "e"]
    model = LLMVisorAgg().fit(small, small[col.E2E_LATENCY_S])
    # token-count features only: architecture columns play no part, so a much
    # larger model gets the small model's latencies
    np.testing.assert_array_equal(model.predict(large), model.predict(large.drop(columns=list(ARCHITECTURE_COLUMNS))))
    assert _mape(model.predict(large), large[col.E2E_LATENCY_S]) > 30
    imai = ImaiOodLr().fit(frame, frame[col.E2E_LATENCY_S])
    assert _mape(imai.predict(frame), frame[col.E2E_LATENCY_S]) < 15


# --- what the training rows determine ---------------------------------------

def test_imai_knows_which_predictions_its_training_rows_determine():
    two_models = _imai_truth_frame(seed=12, models=("a", "b"))
    model = ImaiOodLr().fit(two_models, two_models[col.E2E_LATENCY_S])
    # The training models themselves, at new batch sizes: in the span of the training rows.
    assert model.prediction_determined(_imai_truth_frame(seed=13, models=("a", "b"))).all()
    # A third architecture: L, D, H_q, H_kv vary together over two models, so how the
    # weight splits between them (the minimal-norm choice) decides its prediction.
    assert not model.prediction_determined(_imai_truth_frame(seed=14, models=("e",))).any()
    every_model = _imai_truth_frame(seed=15)
    full = ImaiOodLr().fit(every_model, every_model[col.E2E_LATENCY_S])
    assert full.training_null_space_.dimensions == 0
    assert full.prediction_determined(_imai_truth_frame(seed=16, models=("e",))).all()


def test_llmvisor_knows_that_a_single_input_length_leaves_another_undetermined():
    frame = _realistic_frame(seed=17)     # IL 242 only: B IL, B IL^2 and B are proportional
    model = LLMVisorAgg(nonnegative=True).fit(frame, frame[col.E2E_LATENCY_S])
    assert model.prediction_determined(frame).all()
    other_input = frame.assign(**{col.INPUT_LEN_MEAN: 250.0})
    assert not model.prediction_determined(other_input).any()


def test_minimal_norm_segment_fits_do_not_flip_with_noise():
    """Rank-deficient non-negative fits are made unique by the ridge, not by the active set."""
    rng = np.random.default_rng(18)
    batch = np.repeat([1.0, 4.0, 16.0, 64.0], 3)
    design = prefill_features(workload_arrays(pd.DataFrame({
        col.MEAN_BATCH_SIZE: batch, col.INPUT_LEN_MEAN: 242.0, col.OUTPUT_LEN_MEAN: 390.0})))
    target = 0.01 + 2e-5 * batch * 242 + rng.normal(0, 1e-4, batch.size)
    weights = 1.0 / target**2
    first = fit_two_segments(design, target, weights, batch, min_segment_size=5, nonnegative=True)
    nudged = fit_two_segments(design, target * (1 + 1e-9 * rng.uniform(-1, 1, batch.size)), weights, batch,
                              min_segment_size=5, nonnegative=True)
    assert first.breakpoint == nudged.breakpoint
    np.testing.assert_allclose(first.coef_low, nudged.coef_low, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(first.coef_high, nudged.coef_high, rtol=1e-6, atol=1e-12)


def test_imai_band_of_as_many_rows_as_the_design_has_columns():
    # statsmodels' get_prediction refuses a weights vector whose length equals the design's
    # width; a band of exactly that many rows must still be each row's own band
    frame = _imai_truth_frame(seed=4)
    model = ImaiOodLr().fit(frame, frame[col.E2E_LATENCY_S])
    width = 1 + int(model.active_features_.sum())
    fresh = _imai_truth_frame(seed=5).iloc[: width + 1]
    low, high = model.predict_band(fresh, 0.9)
    for count in (width - 1, width, width + 1):
        part_low, part_high = model.predict_band(fresh.iloc[:count], 0.9)
        np.testing.assert_allclose(part_low, low[:count], rtol=1e-12)
        np.testing.assert_allclose(part_high, high[:count], rtol=1e-12)
