"""BCA (Eq. 13) on hand-made curves with known answers, log-B interpolation, and the
evaluation helpers of Table V / Fig. 12."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.advisor.bca import (
    bca_from_measured,
    bca_from_predictor,
    interpolate_log_batch,
    select_batch_cap,
    slo_from_curve,
    slo_violation_pct,
    throughput_at_one,
    throughput_retained_pct,
    throughput_variation_pct,
)
from slim.advisor.measured import curve_from_rows
from slim.decision.candidates import DEFAULT_CANDIDATE_CAPS
from slim.errors import AdvisorError, SlimError

GRID = np.array(DEFAULT_CANDIDATE_CAPS, dtype=float)   # 1, 2, 4, ..., 512


def saturating_throughput(batch):
    """T(B) = 100 B / (1 + B / 32): rising, saturating at 3,200 tok/s.

    Efficiency T(B) / (B T(1)) = (1 + 1/32) / (1 + B/32): 0.344 at 64, 0.206 at 128,
    0.115 at 256, 0.061 at 512.
    """
    batch = np.asarray(batch, dtype=float)
    return 100.0 * batch / (1.0 + batch / 32.0)


def linear_e2e(batch):
    """E2E(B) = 1 + 0.01 B seconds (1.01 s at B = 1, 6.12 s at 512)."""
    return 1.0 + 0.01 * np.asarray(batch, dtype=float)


def _decide(slo_s, epsilon, **kwargs):
    return select_batch_cap(GRID, saturating_throughput(GRID), linear_e2e(GRID),
                            slo_s=slo_s, epsilon=epsilon, **kwargs)


# --- the decision rule ----------------------------------------------------------------

def test_neither_constraint_binding_picks_the_peak():
    result = _decide(slo_s=100.0, epsilon=0.05)
    assert result.feasible and result.batch_cap == 512
    assert result.binding == ()
    assert result.throughput_per_s == pytest.approx(saturating_throughput(512))
    assert result.batching_efficiency == pytest.approx((1 + 1 / 32) / (1 + 512 / 32))


def test_epsilon_binding():
    result = _decide(slo_s=100.0, epsilon=0.1)
    assert result.feasible and result.batch_cap == 256
    assert result.binding == ("efficiency",)
    assert result.batching_efficiency > 0.1


def test_slo_binding():
    # E2E <= 2 s  <=>  B <= 100: the largest admissible grid point is 64.
    result = _decide(slo_s=2.0, epsilon=0.05)
    assert result.feasible and result.batch_cap == 64
    assert result.binding == ("slo",)
    assert result.e2e_latency_s == pytest.approx(1.64)
    assert result.slo_s == 2.0 and result.epsilon == 0.05


def test_only_the_decisive_constraint_binds():
    # SLO 1.5 s -> B <= 50; epsilon 0.25 -> B <= 64: the SLO decides (cap 32); the floor only
    # excludes caps the SLO excludes anyway, so it does not bind.
    result = _decide(slo_s=1.5, epsilon=0.25)
    assert result.batch_cap == 32
    assert result.binding == ("slo",)


def test_both_binding():
    # SLO 2.0 s -> B <= 100; epsilon 0.25 -> B <= 64 (efficiency 0.34 at 64, 0.21 at 128): both
    # exclude 128 and every better cap, so neither alone decides and both bind.
    result = _decide(slo_s=2.0, epsilon=0.25)
    assert result.batch_cap == 64
    assert result.binding == ("slo", "efficiency")


def test_slo_boundary_is_inclusive_and_efficiency_boundary_strict():
    at_slo = _decide(slo_s=float(linear_e2e(64)), epsilon=0.05)
    assert at_slo.batch_cap == 64
    efficiency_256 = (1 + 1 / 32) / (1 + 256 / 32)
    at_epsilon = _decide(slo_s=100.0, epsilon=efficiency_256)
    assert at_epsilon.batch_cap == 128


def test_infeasible_slo_returns_result_with_reason():
    result = _decide(slo_s=0.5, epsilon=0.1)
    assert not result.feasible
    assert math.isnan(result.batch_cap) and math.isnan(result.throughput_per_s)
    assert "SLO" in result.reason and result.slo_s == 0.5
    assert len(result.candidate_batch_sizes) == GRID.size


def test_infeasible_efficiency_with_external_reference():
    # T(1) given far above the curve: every efficiency is below epsilon.
    result = _decide(slo_s=100.0, epsilon=0.5, throughput_at_one_per_s=1e6)
    assert not result.feasible and "efficien" in result.reason


def test_infeasible_jointly_but_not_separately():
    batch = np.array([1.0, 2.0, 4.0])
    result = select_batch_cap(batch, [10.0, 11.0, 12.0], [3.0, 2.0, 1.0], slo_s=1.5, epsilon=0.5)
    # Only B = 4 meets the SLO; its efficiency 12 / (4 x 10) = 0.3 is below 0.5.
    assert not result.feasible and "none both" in result.reason


def test_ties_go_to_the_smaller_batch_and_input_order_does_not_matter():
    result = select_batch_cap([4.0, 1.0, 2.0], [20.0, 10.0, 20.0], [1.0, 1.0, 1.0],
                              slo_s=2.0, epsilon=0.1)
    assert result.batch_cap == 2
    assert result.candidate_batch_sizes == (1.0, 2.0, 4.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(batch_sizes=[], throughput_per_s=[], e2e_latency_s=[], slo_s=1.0),
        dict(batch_sizes=[1, 2], throughput_per_s=[1.0, np.nan], e2e_latency_s=[1, 1], slo_s=1.0),
        dict(batch_sizes=[1, 2], throughput_per_s=[1.0, 2.0], e2e_latency_s=[1.0], slo_s=1.0),
        dict(batch_sizes=[1, 2], throughput_per_s=[1.0, 2.0], e2e_latency_s=[1, 1], slo_s=0.0),
        dict(batch_sizes=[1, 2], throughput_per_s=[1.0, 2.0], e2e_latency_s=[1, 1], slo_s=1.0, epsilon=0.0),
        dict(batch_sizes=[1, 2], throughput_per_s=[1.0, 2.0], e2e_latency_s=[1, 1], slo_s=1.0, epsilon=1.0),
        dict(batch_sizes=[1, 1], throughput_per_s=[1.0, 2.0], e2e_latency_s=[1, 1], slo_s=1.0),
        dict(batch_sizes=[0, 1], throughput_per_s=[1.0, 2.0], e2e_latency_s=[1, 1], slo_s=1.0),
    ],
    ids=["empty", "nan", "mismatched", "slo<=0", "epsilon=0", "epsilon=1", "duplicate-B", "B=0"],
)
def test_invalid_inputs_raise_advisor_error(kwargs):
    with pytest.raises(AdvisorError) as raised:
        select_batch_cap(**kwargs)
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, SlimError)


# --- interpolation in log B ----------------------------------------------------------

def test_interpolation_is_linear_in_log_batch():
    profiled = np.array([1.0, 4.0, 16.0, 64.0])
    values = 3.0 * np.log2(profiled)                      # linear in log B
    got = interpolate_log_batch(profiled, values, [1.0, 2.0, 8.0, 32.0, 64.0])
    np.testing.assert_allclose(got, [0.0, 3.0, 9.0, 15.0, 18.0])
    # Linear in B would give 8.0 at B = 8 between (4, 6) and (16, 12); log B gives 9.0.
    assert float(np.interp(8.0, profiled, values)) == pytest.approx(8.0)


def test_interpolation_refuses_to_extrapolate():
    with pytest.raises(AdvisorError, match="outside the profiled range"):
        interpolate_log_batch([1.0, 4.0], [1.0, 2.0], [8.0])


def test_throughput_at_one_inside_and_outside_the_curve():
    assert throughput_at_one([0.5, 2.0], [10.0, 30.0]) == pytest.approx(20.0)   # midpoint in log B
    assert throughput_at_one([2.0, 4.0], [30.0, 50.0]) == pytest.approx(15.0)   # T(2) / 2


# --- full-profile BCA ----------------------------------------------------------------

def test_full_profile_on_the_profiled_grid_equals_the_rule():
    result = bca_from_measured(GRID, saturating_throughput(GRID), linear_e2e(GRID),
                               epsilon=0.05, slo_s=2.0)
    assert result.batch_cap == 64 and result.candidate_batch_sizes == tuple(GRID)


def test_full_profile_default_slo_is_multiplier_times_smallest_point():
    result = bca_from_measured(GRID, saturating_throughput(GRID), linear_e2e(GRID), epsilon=0.05)
    assert result.slo_s == pytest.approx(2.0 * 1.01)
    # E2E <= 2.02 s <=> B <= 102: 64 on the profiled grid.
    assert result.batch_cap == 64
    loose = bca_from_measured(GRID, saturating_throughput(GRID), linear_e2e(GRID),
                              epsilon=0.05, slo_multiplier=4.0, slo_reference_batch=2.0)
    assert loose.slo_s == pytest.approx(4.0 * 1.02)
    assert slo_from_curve(GRID, linear_e2e(GRID), 4.0, 2.0) == pytest.approx(loose.slo_s)


def test_full_profile_interpolates_onto_a_finer_candidate_grid():
    profiled = np.array([1.0, 4.0, 16.0, 64.0, 256.0])
    e2e = np.array([1.0, 1.0, 1.0, 2.0, 4.0])
    candidates = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0])
    result = bca_from_measured(profiled, saturating_throughput(profiled), e2e, epsilon=0.05,
                               slo_s=1.5, candidate_batch_sizes=candidates)
    # E2E interpolated in log B: 32 sits halfway between 16 (1 s) and 64 (2 s) -> 1.5 s.
    assert result.batch_cap == 32
    assert result.e2e_latency_s == pytest.approx(1.5)
    expected_tput = np.mean(saturating_throughput([16.0, 64.0]))
    assert result.throughput_per_s == pytest.approx(expected_tput)


def test_full_profile_on_mean_batch_size_axis():
    max_num_seqs = np.array([1.0, 2.0, 4.0, 8.0])
    mean_batch = np.array([0.9, 1.8, 3.5, 6.0])           # the KV cache limited the last run
    tput = saturating_throughput(mean_batch)
    e2e = linear_e2e(mean_batch)
    result = bca_from_measured(max_num_seqs, tput, e2e, epsilon=0.05, slo_s=100.0,
                               x_axis="mean_batch_size", mean_batch_size=mean_batch)
    assert result.batch_cap == pytest.approx(6.0)
    by_flag = bca_from_measured(max_num_seqs, tput, e2e, epsilon=0.05, slo_s=100.0)
    assert by_flag.batch_cap == 8.0
    with pytest.raises(AdvisorError):
        bca_from_measured(max_num_seqs, tput, e2e, x_axis="mean_batch_size")


def test_measured_curve_from_a_table():
    table = pd.DataFrame({
        col.MODEL: ["m"] * 3, col.INPUT_LEN_NOMINAL: [8.0] * 3, col.OUTPUT_LEN_NOMINAL: [16.0] * 3,
        col.INPUT_LEN_MEAN: [8.0] * 3, col.OUTPUT_LEN_MEAN: [16.0] * 3,
        col.MAX_NUM_SEQS: [4, 1, 2],
        col.MEAN_BATCH_SIZE: [3.8, 1.0, 1.9],
        col.TOTAL_TOKEN_THROUGHPUT: [300.0, 100.0, 190.0],
        col.E2E_LATENCY_S: [1.2, 1.0, 1.1],
        col.DURATION_S: [1.0] * 3, col.KV_CAPACITY_TOKENS: [4096.0, 4000.0, 4096.0],
        col.NUM_GPU_BLOCKS: [256.0, 250.0, 256.0], col.BLOCK_SIZE: [16] * 3,
    })
    curve = curve_from_rows(table)
    np.testing.assert_array_equal(curve.max_num_seqs, [1, 2, 4])
    np.testing.assert_array_equal(curve.throughput_per_s, [100.0, 190.0, 300.0])
    np.testing.assert_array_equal(curve.e2e_latency_s, [1.0, 1.1, 1.2])
    np.testing.assert_array_equal(curve.num_gpu_blocks, [250.0, 256.0, 256.0])
    assert curve.kv_capacity_tokens == 4096.0 and curve.label == "m IL 8 OL 16"
    with pytest.raises(AdvisorError):
        curve_from_rows(table.drop(columns=[col.E2E_LATENCY_S]))


# --- SLIM-BCA ------------------------------------------------------------------------

def test_predictor_flavour_matches_rule_on_evaluated_curve():
    def predict(batch):
        return saturating_throughput(batch), linear_e2e(batch)

    result = bca_from_predictor(predict, epsilon=0.1, slo_s=3.0)
    direct = _decide(slo_s=3.0, epsilon=0.1)
    assert result == direct
    assert result.batch_cap == 128     # E2E <= 3 s -> B <= 200; efficiency at 256 is fine but SLO fails
    default_slo = bca_from_predictor(predict, epsilon=0.1)
    assert default_slo.slo_s == pytest.approx(2.0 * 1.01)


def test_predictor_reference_throughput_is_the_prediction_at_one():
    def predict(batch):
        return saturating_throughput(batch), linear_e2e(batch)

    result = bca_from_predictor(predict, candidate_batch_sizes=[8, 16, 32], slo_s=100.0)
    assert result.throughput_at_one_per_s == pytest.approx(float(saturating_throughput(1)))


def test_predictor_returning_nan_is_refused():
    with pytest.raises(AdvisorError):
        bca_from_predictor(lambda b: (np.full(b.shape, np.nan), b), slo_s=1.0)


# --- evaluation helpers --------------------------------------------------------------

def test_throughput_variation_is_signed_relative_to_full_profile_choice():
    tput = saturating_throughput(GRID)
    variation = throughput_variation_pct(128.0, 64.0, GRID, tput)
    assert variation == pytest.approx(100 * (tput[7] - tput[6]) / tput[6])
    assert throughput_variation_pct(32.0, 64.0, GRID, tput) < 0
    assert throughput_variation_pct(64.0, 64.0, GRID, tput) == 0.0
    assert math.isnan(throughput_variation_pct(float("nan"), 64.0, GRID, tput))


def test_slo_violation_percent():
    e2e = linear_e2e(GRID)
    assert slo_violation_pct(64.0, GRID, e2e, slo_s=2.0) == 0.0                   # 1.64 s <= 2 s
    assert slo_violation_pct(128.0, GRID, e2e, slo_s=2.0) == pytest.approx(14.0)  # 2.28 s
    with pytest.raises(AdvisorError):
        slo_violation_pct(64.0, GRID, e2e, slo_s=-1.0)


def test_throughput_retained_percent_of_profiled_peak():
    tput = saturating_throughput(GRID)
    assert throughput_retained_pct(512.0, GRID, tput) == pytest.approx(100.0)
    assert throughput_retained_pct(32.0, GRID, tput) == pytest.approx(100 * 1600 / tput[-1])


# --- SLIM-BCA at a confidence ----------------------------------------------------------

def test_a_confident_slim_bca_holds_the_slo_on_the_upper_bound_where_the_band_is_wide():
    """Seeded synthetic runs of one model leave SLIM's per-layer constants open; predicting a wider
    model, the band is wide, and the SLO the plain choice just meets excludes it at 0.9."""
    from slim.advisor.predictor_bca import Target, curve_of
    from slim.model.equations import workload_terms
    from slim.model.fit import fit_slim
    from slim.model.uncertainty import prediction_band
    from slim.predictors.slim_model import FittedSlim
    from tests.test_fit import CATALOG, H100, TRUE_PARAMS, synthetic_frame

    fit = fit_slim(synthetic_frame(TRUE_PARAMS, noise=0.02, seed=9, models=("opt-1.3b",)), CATALOG, H100)
    arch = CATALOG["opt-6.7b"]
    fitted = FittedSlim.of_fit("SLIM", fit, CATALOG, H100)
    target = Target(arch.name, 256.0, 256.0, kv_capacity_tokens=1e12)   # no KV limit within the candidates
    plain_predict = curve_of(fitted, target)
    plain = bca_from_predictor(plain_predict, epsilon=0.05, slo_s=10.0)
    slo_s = plain.e2e_latency_s * 1.001
    plain = bca_from_predictor(plain_predict, epsilon=0.05, slo_s=slo_s)
    bounded = curve_of(fitted, target, confidence=0.9)
    confident = bca_from_predictor(bounded, epsilon=0.05, slo_s=slo_s)
    assert confident.batch_cap < plain.batch_cap
    assert confident.candidate_e2e_latency_s == plain.candidate_e2e_latency_s   # the prediction is unchanged
    bounds = np.array(confident.candidate_e2e_bound_s)
    assert (bounds > np.array(plain.candidate_e2e_latency_s)).all()
    assert confident.e2e_bound_s <= slo_s < bounds[list(confident.candidate_batch_sizes).index(plain.batch_cap)]
    # The bound is the one-sided run band of slim.model.uncertainty, bit for bit.
    band = prediction_band(fit, workload_terms(arch, 256.0, 256.0, np.array([plain.batch_cap])), H100, 0.9, "run",
                           one_sided=True)
    assert bounds[list(confident.candidate_batch_sizes).index(plain.batch_cap)] == band.e2e_high_s[0]
    # The width is the unidentified direction showing: the training-equivalent fits alone spread the
    # prediction at the plain cap by more than 10%.
    assert band.envelope_ratio[0] > 0.1


def test_a_curve_decider_predicts_each_set_of_caps_once_whatever_the_slo_and_epsilon():
    from types import SimpleNamespace

    from slim.advisor.predictor_bca import Target, decider
    from slim.predictors import SLIM, registered

    predicted = []

    def predict(configs: pd.DataFrame, confidence: float | None = None) -> SimpleNamespace:
        caps = configs[col.MAX_NUM_SEQS].to_numpy(dtype=float)
        predicted.append(caps)
        throughput = saturating_throughput(caps)
        return SimpleNamespace(throughput_per_s=throughput, e2e_latency_s=caps * 500.0 / throughput)

    decide = decider(registered(SLIM), SimpleNamespace(name="SLIM", predict=predict), Target("opt-1.3b", 250.0, 250.0))
    cells = [(slo_s, epsilon) for slo_s in (8.0, 12.0, 40.0) for epsilon in (0.05, 0.3)]
    caps = [decide(GRID, slo_s, epsilon).decision.batch_cap for slo_s, epsilon in cells]
    assert len(predicted) == 2   # the candidates and T(1), once each
    assert caps == [decide(GRID.copy(), slo_s, epsilon).decision.batch_cap for slo_s, epsilon in cells]
    assert len(predicted) == 2
    assert len(set(caps)) > 1    # the cells decide differently on the one prediction


def test_a_simulated_decision_has_no_confidence():
    from slim.advisor.predictor_bca import Target, predicted_bca
    from slim.predictors import SIM, registered

    with pytest.raises(AdvisorError, match="SIM has no interval"):
        predicted_bca(registered(SIM), None, Target("opt-1.3b", 256.0, 128.0, configs=pd.DataFrame()),
                      np.array([1.0, 8.0]), 5.0, 0.1, confidence=0.9)


def test_a_cap_whose_tpot_falls_below_a_smaller_caps_is_named():
    """A larger batch only lengthens each decode step: a run at 512 in flight with a third of the TPOT at 64
    held fewer requests than its cap (NVIDIA's gpt-oss-120b rows at 512); scatter of a few per cent is not."""
    import pandas as pd

    from slim import columns as col
    from slim.advisor.warnings import latency_order_warnings

    runs = pd.DataFrame({col.MAX_NUM_SEQS: [4, 16, 64, 64, 512], col.MEAN_TPOT_MS: [8.0, 7.6, 14.6, 15.0, 5.6]})
    [warning] = latency_order_warnings(runs)
    assert warning.code == "tpot_falls_with_the_cap" and "--max-num-seqs 512 (5.6 ms against 14.8 at 64)" in \
        warning.message and "--max-num-seqs 16" not in warning.message
    assert latency_order_warnings(runs.iloc[:4]) == ()
