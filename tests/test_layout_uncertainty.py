"""The belief's scales across tensor-parallel sizes fitted on residuals (slim.tune.layout_uncertainty):
recovered from draws of known scales, unmoved by order or a 1e-9 perturbation, and read from the
accuracy's predictions table as the layout replay reads it."""

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.paper.replay.layouts import fitted_layout_uncertainty, layout_residuals
from slim.tune.belief import LayoutUncertainty
from slim.tune.layout_uncertainty import (
    CONFIGURATION,
    LOG_RESIDUAL,
    fit_layout_uncertainty,
    interval_coverage,
    layout_residual_sets,
)

SIZES = (2, 4, 8)


def _draws(slope: float, offset: float, noise: float, configurations: int, seed: int = 7) -> pd.DataFrame:
    """Residuals of `configurations` configurations at TP 2, 4 and 8: a common part (cancels), a slope per
    doubling and an offset per size beyond the smallest, and each run's noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(configurations):
        common, s = rng.normal(0.0, 0.5), rng.normal(0.0, slope)
        for size in SIZES:
            d = np.log2(size / SIZES[0])
            value = common + s * d + (rng.normal(0.0, offset) if d > 0 else 0.0) + rng.normal(0.0, noise)
            rows.append({CONFIGURATION: f"c{i:04d}", col.TENSOR_PARALLEL: float(size), LOG_RESIDUAL: value})
    return pd.DataFrame(rows)


def test_the_fit_recovers_the_scales_the_residuals_were_drawn_with():
    fitted = fit_layout_uncertainty(layout_residual_sets(_draws(0.3, 0.1, 0.02, 600)), noise_sd=0.02)
    assert fitted.slope_sd_per_doubling == pytest.approx(0.3, rel=0.15)
    assert fitted.offset_sd == pytest.approx(0.1, rel=0.25)
    small = fit_layout_uncertainty(layout_residual_sets(_draws(0.05, 0.2, 0.02, 600, seed=3)), noise_sd=0.02)
    assert small.slope_sd_per_doubling < 0.1 and small.offset_sd == pytest.approx(0.2, rel=0.15)


def test_the_intervals_of_the_true_scales_cover_as_stated_and_too_narrow_ones_do_not():
    sets = layout_residual_sets(_draws(0.3, 0.1, 0.02, 600, seed=5))
    true = interval_coverage(sets, LayoutUncertainty(slope_sd_per_doubling=0.3, offset_sd=0.1), noise_sd=0.02)
    assert true.pairs == 1200 and true.covered == pytest.approx(0.9, abs=0.03)
    narrow = interval_coverage(sets, LayoutUncertainty(slope_sd_per_doubling=0.1, offset_sd=0.03), noise_sd=0.02)
    assert narrow.covered < 0.6 and narrow.mean_half_width < true.mean_half_width
    with pytest.raises(ValueError, match="no interval to check"):
        interval_coverage([], LayoutUncertainty(), noise_sd=0.02)


def test_the_fit_does_not_move_with_the_order_or_a_1e_9_perturbation():
    residuals = _draws(0.3, 0.1, 0.02, 200)
    fitted = fit_layout_uncertainty(layout_residual_sets(residuals), noise_sd=0.02)
    shuffled = residuals.sample(frac=1.0, random_state=1).reset_index(drop=True)
    perturbed = residuals.assign(**{LOG_RESIDUAL: residuals[LOG_RESIDUAL] * (1.0 + 1e-9)})
    assert fit_layout_uncertainty(layout_residual_sets(shuffled), noise_sd=0.02) == fitted
    assert fit_layout_uncertainty(layout_residual_sets(perturbed), noise_sd=0.02) == fitted


def test_a_draw_is_one_configuration_at_several_sizes_relative_to_its_smallest():
    residuals = pd.DataFrame({CONFIGURATION: ["a", "a", "a", "b", "c", "c"],
                              col.TENSOR_PARALLEL: [4.0, 1.0, 4.0, 2.0, 2.0, 8.0],
                              LOG_RESIDUAL: [0.3, 0.1, 0.5, 0.0, 0.2, np.nan]})
    sets = layout_residual_sets(residuals)
    assert len(sets) == 1   # b: one size; c: its TP 8 residual is not finite
    np.testing.assert_allclose(sets[0].doublings, [2.0])
    np.testing.assert_allclose(sets[0].differences, [0.3])   # the two TP 4 runs averaged, less TP 1's
    with pytest.raises(ValueError, match="two tensor-parallel sizes"):
        fit_layout_uncertainty(layout_residual_sets(residuals.iloc[3:4]), noise_sd=0.02)


def _predictions(dataset: str, factor_per_doubling: float) -> pd.DataFrame:
    """A predictions table as the accuracy rule writes it: one workload at TP 1, 2, 4 and 4 caps, the
    measurement the zero-shot prediction x `factor_per_doubling` per doubling (x 1.03 at odd caps)."""
    rows = []
    for size in (1, 2, 4):
        for cap in (8, 16, 32, 64):
            wobble = 1.03 if cap in (16, 64) and size > 1 else 1.0
            measured = 1000.0 * size * factor_per_doubling ** np.log2(size) * wobble
            rows.append({"dataset": dataset, col.HARDWARE: "h100-sxm-80gb", col.MODEL: "m", col.TENSOR_PARALLEL: size,
                         col.DATA_PARALLEL: 1, col.BENCHMARK_MODE: "online", "input_len_nominal": 1024,
                         "output_len_nominal": 1024,
                         "in_flight": cap, "sim_status": "ok",
                         "measured_total_token_throughput": measured, "zero_shot_total_token_throughput": 1000.0 * size,
                         "measured_mean_tpot_ms": 20.0 / size, "zero_shot_mean_tpot_ms": 20.0 / size})
    return pd.DataFrame(rows)


def test_the_replay_fits_each_dataset_on_the_others_only():
    table = pd.concat([_predictions("a", 1.3), _predictions("b", 1.0),
                       _predictions("b", 1.0).assign(**{col.DATA_PARALLEL: 2, "measured_mean_tpot_ms": 1.0})])
    residuals = layout_residuals(table)
    # 4 caps x 2 quantities per dataset; data-parallel runs are left out
    assert residuals[CONFIGURATION].nunique() == 16 and len(residuals) == 2 * 2 * 12
    # an offline run of the same workload is another configuration, not a size of the online one's
    offline = layout_residuals(_predictions("a", 1.3).assign(**{col.BENCHMARK_MODE: "offline"}))
    assert not set(offline[CONFIGURATION]) & set(residuals[CONFIGURATION])
    on_b = fitted_layout_uncertainty(table, held_out="a", noise_sd=0.02)      # b's scaling is exact
    on_a = fitted_layout_uncertainty(table, held_out="b", noise_sd=0.02)      # a's is 1.3x per doubling
    assert on_a.slope_sd_per_doubling > 0.1 > on_b.slope_sd_per_doubling
    assert fitted_layout_uncertainty(table[table["dataset"] == "a"], held_out="a", noise_sd=0.02) is None
    assert LayoutUncertainty() == LayoutUncertainty(0.5, 0.3)   # what slim tune ships (docs/tuning.md)
