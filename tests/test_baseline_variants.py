"""Tests of the baselines' readings: each named configuration recovers a truth of its own
form, and the sensitivity table scores them with the main tables' machinery."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from baselines import ImaiOodLr, LLMVisorAgg
from baselines.features import add_architecture_columns, architecture_arrays, roofline_arrays, workload_arrays
from baselines.imai import MINIMAL_FEATURE_NAMES, imai_features, roofline_e2e_s
from baselines.llmvisor import decode_features
from baselines.variants import (
    IMAI_LABEL,
    LLMVISOR_LABEL,
    LLMVISOR_VARIANTS,
    MAIN_IMAI,
    MAIN_LLMVISOR,
    baseline_variants,
    imai_variants,
)
from slim import columns as col
from slim.errors import ConfigError
from slim.paper.baseline_sensitivity import (
    HEADLINE_SETTING,
    SensitivityError,
    baseline_sensitivity,
    round_significant,
    sensitivity_html,
    variant_predictions,
    why_the_headline_differs,
)
from slim.paper.heldout import IMAI, LLMVISOR, SLIM
from slim.paper.mape_intervals import average_mape_reduction_interval, curve_labels
from slim.paper.splits import HeldOutSetting
from slim.specs.architecture import load_architectures
from slim.specs.hardware import Hardware

CATALOG = load_architectures()
HW = Hardware("test-gpu", peak_flops_per_s=989e12, hbm_bandwidth_bytes_per_s=1.62e12, memory_bytes=64 * 2**30)
MODELS = ("opt-125m", "opt-1.3b", "llama-2-13b", "mistral-7b", "qwen2.5-32b", "llama-3-70b")   # H_kv != H_q in some


def _frame(seed: int, models=MODELS, input_lens=(128, 256, 512), output_lens=(64, 128, 256),
           caps=(1, 2, 4, 8, 16, 32, 64, 128)) -> pd.DataFrame:
    """Workloads of catalog models, with the architecture and roofline columns."""
    rng = np.random.default_rng(seed)
    rows = [{col.MODEL: m, col.INPUT_LEN_MEAN: float(il), col.OUTPUT_LEN_MEAN: float(ol),
             col.MEAN_BATCH_SIZE: cap * rng.uniform(0.9, 1.0), col.MAX_NUM_SEQS: cap,
             col.INPUT_LEN_NOMINAL: il, col.OUTPUT_LEN_NOMINAL: ol}
            for m in models for il in input_lens for ol in output_lens for cap in caps]
    frame = add_architecture_columns(pd.DataFrame(rows), CATALOG)
    frame[col.RUN_ID] = [f"run{i:04d}" for i in range(len(frame))]
    return frame


# --- IMAI OOD-LR's readings ---------------------------------------------------------------

MINIMAL_TRUTH = np.array([1e-3, 2e-5, 1e-2, 1e-3, 1e-5, 2e-4, 3e-4, 1e-7, 2e-5, 1e-7])


def test_minimal_reading_recovers_its_own_linear_model():
    frame = _frame(1)
    design = imai_features(workload_arrays(frame), architecture_arrays(frame), "minimal")
    assert design.shape[1] == len(MINIMAL_FEATURE_NAMES) == len(MINIMAL_TRUTH)
    y = 0.05 + design @ MINIMAL_TRUTH
    model = ImaiOodLr(features="minimal").fit(frame, y)
    np.testing.assert_allclose(model.coef_, MINIMAL_TRUTH, rtol=1e-5)
    fresh = _frame(2)
    fresh_design = imai_features(workload_arrays(fresh), architecture_arrays(fresh), "minimal")
    np.testing.assert_allclose(model.predict(fresh), 0.05 + fresh_design @ MINIMAL_TRUTH, rtol=1e-8)


def test_roofline_estimate_is_the_memory_time_of_a_single_request_decode():
    frame = _frame(3, models=("opt-1.3b",), input_lens=(256,), output_lens=(128,), caps=(1,))
    frame[col.MEAN_BATCH_SIZE] = 1.0
    arch, n_params = roofline_arrays(frame)
    opt = CATALOG["opt-1.3b"]
    weights = 2.0 * opt.n_params
    context = 128 * 257 + 128 * 127 / 2          # Eq. 12
    kv = 2 * opt.n_layers * opt.kv_dim * 2 * context
    prefill = max(opt.n_layers * (256 * (4 * opt.hidden_dim**2 * (2 + opt.ffn_ratio)) + 4 * 256**2 * opt.hidden_dim)
                  / HW.peak_flops_per_s, weights / HW.hbm_bandwidth_bytes_per_s)
    expected = prefill + (128 * weights + kv) / HW.hbm_bandwidth_bytes_per_s   # B = 1: memory-bound
    got = roofline_e2e_s(workload_arrays(frame), arch, n_params, HW.peak_flops_per_s, HW.hbm_bandwidth_bytes_per_s)
    assert got[0] == pytest.approx(expected, rel=1e-12)


def test_roofline_overhead_reading_recovers_the_overhead_on_top_of_the_roofline():
    frame = _frame(4)
    overhead = imai_features(workload_arrays(frame), architecture_arrays(frame), "minimal") @ MINIMAL_TRUTH
    arch, n_params = roofline_arrays(frame)
    roofline = roofline_e2e_s(workload_arrays(frame), arch, n_params, HW.peak_flops_per_s,
                              HW.hbm_bandwidth_bytes_per_s)
    model = ImaiOodLr(features="roofline_overhead", peak_flops_per_s=HW.peak_flops_per_s,
                      hbm_bandwidth_bytes_per_s=HW.hbm_bandwidth_bytes_per_s).fit(frame, roofline + 0.02 + overhead)
    np.testing.assert_allclose(model.coef_, MINIMAL_TRUTH, rtol=1e-5)
    assert model.intercept_ == pytest.approx(0.02, rel=1e-5)
    np.testing.assert_allclose(model.roofline_e2e_s(frame), roofline)
    low, high = model.predict_band(frame, 0.9)
    assert np.all(low <= model.predict(frame) + 1e-12) and np.all(model.predict(frame) <= high + 1e-12)


def test_throughput_reading_fits_throughput_and_returns_e2e_by_eq6():
    frame = _frame(5)
    design = imai_features(workload_arrays(frame), architecture_arrays(frame))
    truth = np.abs(np.random.default_rng(0).normal(size=design.shape[1])) / design.mean(axis=0)
    throughput = 100.0 + design @ truth
    tokens = frame[col.MEAN_BATCH_SIZE] * (frame[col.INPUT_LEN_MEAN] + frame[col.OUTPUT_LEN_MEAN])
    model = ImaiOodLr(target="throughput").fit(frame, tokens / throughput)
    np.testing.assert_allclose(model.predict_throughput(frame), throughput, rtol=1e-7)
    np.testing.assert_allclose(model.predict(frame), tokens / throughput, rtol=1e-7)
    e2e_only = ImaiOodLr().fit(frame, tokens / throughput)   # the same data, the E2E reading: not exact
    assert np.max(np.abs(e2e_only.predict_throughput(frame) / throughput - 1)) > 1e-3


@pytest.mark.parametrize("params", [
    {"features": "roofline_overhead"},                                   # no hardware
    {"features": "roofline_overhead", "target": "throughput", "peak_flops_per_s": 1e15,
     "hbm_bandwidth_bytes_per_s": 1e12},
    {"features": "quadratic"}, {"target": "latency"},
])
def test_imai_rejects_readings_it_does_not_define(params):
    frame = _frame(6, models=("opt-1.3b",))
    with pytest.raises(ConfigError):
        ImaiOodLr(**params).fit(frame, np.ones(len(frame)))


# --- LLMVisor-Agg's readings --------------------------------------------------------------

def test_split_context_recovers_separate_prompt_and_generated_context_costs():
    frame = _frame(7, models=("opt-1.3b",))
    workload = workload_arrays(frame)
    itl_s = decode_features(workload, "split") @ np.array([2e-3, 1e-5, 3e-8, 9e-8])   # not IL + OL/2 alone
    frame[col.MEAN_ITL_MS] = 1e3 * itl_s
    e2e_s = 0.01 + itl_s * (workload.output_len - 1)
    split = LLMVisorAgg(n_segments=1, decode_context="split").fit(frame, e2e_s)
    mean = LLMVisorAgg(n_segments=1).fit(frame, e2e_s)
    np.testing.assert_allclose(split.predict_itl_s(frame), itl_s, rtol=1e-6)
    assert np.max(np.abs(mean.predict_itl_s(frame) / itl_s - 1)) > 1e-2
    with pytest.raises(ConfigError, match="decode_context"):
        LLMVisorAgg(decode_context="both").fit(frame, e2e_s)


# --- the registry -------------------------------------------------------------------------

def test_the_registry_names_each_reading_once_with_one_main_per_baseline():
    variants = baseline_variants(HW)
    names = [v.name for v in variants]
    assert len(names) == len(set(names))
    assert sum(v.baseline == IMAI_LABEL for v in variants) >= 3
    assert sum(v.baseline == LLMVISOR_LABEL for v in variants) >= 2
    assert [v.name for v in variants if v.main] == ["imai_roofline_products", "llmvisor_two_segments"]
    assert IMAI_LABEL == IMAI and LLMVISOR_LABEL == LLMVISOR   # the headline's bootstrap names them so
    main = {v.baseline: v.estimator for v in variants if v.main}
    assert main[IMAI] is MAIN_IMAI and main[LLMVISOR] is MAIN_LLMVISOR
    assert MAIN_IMAI.get_params() == ImaiOodLr().get_params()
    assert MAIN_LLMVISOR.get_params() == LLMVisorAgg(nonnegative=True).get_params()
    for variant in variants:   # configurations, never fitted in place
        assert variant.new_estimator() is not variant.estimator
        assert variant.new_estimator().get_params() == variant.estimator.get_params()
    overhead = next(v for v in imai_variants(HW) if v.name == "imai_roofline_overhead").estimator
    assert overhead.peak_flops_per_s == HW.peak_flops_per_s


# --- the sensitivity table ----------------------------------------------------------------

def _clean(seed: int = 11) -> pd.DataFrame:
    """A small cleaned table of roofline-shaped runs with 1% noise (three OPT models, two OLs)."""
    frame = _frame(seed, models=("opt-1.3b", "opt-2.7b", "opt-6.7b"), input_lens=(256,), output_lens=(128, 256),
                   caps=(1, 2, 4, 8, 16, 32, 64))
    rng = np.random.default_rng(seed)
    arch, n_params = roofline_arrays(frame)
    workload = workload_arrays(frame)
    e2e_s = 1.3 * roofline_e2e_s(workload, arch, n_params, HW.peak_flops_per_s, HW.hbm_bandwidth_bytes_per_s) + 0.05
    e2e_s = e2e_s * rng.normal(1.0, 0.01, len(frame))
    frame[col.E2E_LATENCY_S] = e2e_s
    frame[col.TOTAL_TOKEN_THROUGHPUT] = workload.batch_size * (workload.input_len + workload.output_len) / e2e_s
    frame[col.MEAN_ITL_MS] = 1e3 * 0.95 * e2e_s / workload.output_len
    return frame


SETTINGS = [
    HeldOutSetting("same_curve", "Same curve", {col.MAX_NUM_SEQS: [1, 4, 8]},
                   {col.MAX_NUM_SEQS: [2, 16, 32, 64]}),
    HeldOutSetting("model", "Model (OPT-6.7B)", {col.MODEL: ["opt-1.3b", "opt-2.7b"], col.OUTPUT_LEN_NOMINAL: [256]},
                   {col.MODEL: ["opt-6.7b"], col.OUTPUT_LEN_NOMINAL: [256]}),
    HeldOutSetting("input_length", "Input length", not_applicable="no input-length sweep"),
]
REFERENCE = {"table3": {"same_curve": {IMAI: [55.3, 42.9], LLMVISOR: [55.8, 81.2]},
                        "model": {IMAI: [39.9, 72.8], LLMVISOR: [141.8, 59.9]}},
             "headline_mape_reduction_pct": 79.3}
SMALL_VARIANTS = tuple(v for v in baseline_variants(HW)
                       if v.name in ("imai_minimal", "imai_roofline_products", "imai_products_throughput",
                                     "llmvisor_two_segments", "llmvisor_one_segment"))


def _evaluation(clean: pd.DataFrame) -> pd.DataFrame:
    """What the main evaluation writes, for these settings: SLIM (here the measurement off by a
    run-dependent 3-12%) and the two main baselines."""
    main = tuple(v for v in SMALL_VARIANTS if v.main)
    baselines, _ = variant_predictions(clean, SETTINGS, CATALOG, HW, main)
    baselines[col.PREDICTOR] = baselines[col.PREDICTOR].map({v.name: v.baseline for v in main})
    slim = baselines[baselines[col.PREDICTOR] == IMAI].copy()
    factor = 1.03 + 0.09 * (np.arange(len(slim)) % 4) / 3
    slim[col.PREDICTOR] = SLIM
    slim[col.PREDICTED_THROUGHPUT] = slim[col.MEASURED_THROUGHPUT] * factor
    slim[col.PREDICTED_E2E_S] = slim[col.MEASURED_E2E_S] / factor
    return pd.concat([slim, baselines], ignore_index=True)


@pytest.fixture(scope="module")
def small_result():
    clean = _clean()
    evaluation = _evaluation(clean)
    return clean, evaluation, baseline_sensitivity(clean, evaluation, SETTINGS, CATALOG, HW, REFERENCE,
                                                   SMALL_VARIANTS)


def test_the_table_has_every_variant_setting_and_metric_and_a_headline_each(small_result):
    _, _, result = small_result
    table = result.table
    assert list(table.columns) == list(col.BASELINE_SENSITIVITY_COLUMNS)
    assert len(table) == len(SMALL_VARIANTS) * (2 * 2 + 1)           # two applicable settings, two metrics
    assert set(table[col.SETTING]) == {"same_curve", "model", HEADLINE_SETTING}
    cells = table[table[col.SETTING] != HEADLINE_SETTING]
    assert np.all(cells[col.VALUE_CI_LOW_PCT] <= cells[col.VALUE_PCT])
    assert np.all(cells[col.VALUE_PCT] <= cells[col.VALUE_CI_HIGH_PCT])
    low = cells[col.VALUE_CI_LOW_PCT].round(1)
    high = cells[col.VALUE_CI_HIGH_PCT].round(1)
    expected_inside = (low <= cells[col.PAPER_VALUE_PCT]) & (cells[col.PAPER_VALUE_PCT] <= high)
    assert list(cells[col.PAPER_INSIDE_CI]) == list(expected_inside)
    np.testing.assert_allclose(cells[col.PAPER_DISTANCE_PCT], (cells[col.VALUE_PCT] - cells[col.PAPER_VALUE_PCT]).abs())


def test_the_main_readings_reproduce_the_main_headline(small_result):
    clean, evaluation, result = small_result
    rounded = evaluation.copy()
    for metric in col.PREDICTION_METRICS:
        rounded[metric.predicted] = round_significant(rounded[metric.predicted].to_numpy())
    main = average_mape_reduction_interval(rounded, curve_labels(clean), ["same_curve", "model"])
    for name in ("imai_roofline_products", "llmvisor_two_segments"):
        headline = result.headline(name)
        assert headline[col.VALUE_PCT] == pytest.approx(main.estimate_pct, abs=1e-12)
        assert headline[col.VALUE_CI_LOW_PCT] == pytest.approx(main.ci_low_pct, abs=1e-12)
    other = result.headline("imai_products_throughput")[col.VALUE_PCT]
    assert other != pytest.approx(main.estimate_pct, abs=1e-3)   # a reading does move the headline


def test_a_stale_main_evaluation_is_refused(small_result):
    clean, evaluation, _ = small_result
    stale = evaluation.copy()
    stale.loc[stale[col.PREDICTOR] == IMAI, col.PREDICTED_E2E_S] *= 1.01
    with pytest.raises(SensitivityError, match="does not reproduce"):
        baseline_sensitivity(clean, stale, SETTINGS, CATALOG, HW, REFERENCE, SMALL_VARIANTS)


def test_the_same_input_gives_the_same_table(small_result):
    clean, evaluation, result = small_result
    again = baseline_sensitivity(clean, evaluation, SETTINGS, CATALOG, HW, REFERENCE, SMALL_VARIANTS)
    pd.testing.assert_frame_equal(result.table, again.table)


def test_the_readme_section_and_the_html_show_every_reading(small_result):
    _, _, result = small_result
    text = why_the_headline_differs(result.table, "tiny (synthetic)")
    assert text.startswith("### Why the headline differs: tiny (synthetic)")
    for variant in SMALL_VARIANTS:
        assert f"`{variant.name}`" in text
    assert "The main tables use `imai_roofline_products`" in text
    assert "The main tables use `llmvisor_two_segments`" in text
    assert "(paper: 79.3%)" in text
    page = sensitivity_html(result.table, "tiny (synthetic)")
    assert page.count("<tr>") >= len(SMALL_VARIANTS) + 2 and "\\%" not in page


def test_round_significant_keeps_six_digits_and_specials():
    values = np.array([123456.789, 0.000123456789, 0.0, np.nan, -9.87654321])
    np.testing.assert_array_equal(round_significant(values)[[0, 1, 4]], [123457.0, 0.000123457, -9.87654])
    assert round_significant(values)[2] == 0.0 and np.isnan(round_significant(values)[3])


def test_prediction_rows_of_a_variant_are_the_main_tables_format():
    clean = _clean()
    predictions, determined = variant_predictions(clean, SETTINGS, CATALOG, HW, (LLMVISOR_VARIANTS[1],))
    assert list(predictions.columns) == list(col.PREDICTION_COLUMNS)
    assert set(determined) == {("same_curve", "llmvisor_one_segment"), ("model", "llmvisor_one_segment")}


KERNEL_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import test_baseline_variants as t
from slim.paper.baseline_sensitivity import baseline_sensitivity
clean = t._clean()
result = baseline_sensitivity(clean, t._evaluation(clean), t.SETTINGS, t.CATALOG, t.HW, t.REFERENCE, t.SMALL_VARIANTS)
result.table.to_csv(sys.argv[2], index=False, float_format="%.17g")
"""


def _cpu_flags() -> set[str]:
    try:
        line = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return set()
    return set(line.split(":", 1)[1].split())


@pytest.mark.integration
@pytest.mark.skipif(not {"sse3", "avx2"} & _cpu_flags(), reason="no two x86-64 OpenBLAS kernels to compare")
def test_the_table_is_the_same_bytes_under_two_blas_kernels(tmp_path):
    """Prescott and Haswell solve the fits with other kernels (differences about 1e-15, up to 2.4e-9 where a
    prediction is undetermined); the scored table must not show it, to full precision."""
    outputs = []
    for kernel in ("Prescott", "Haswell"):
        out = tmp_path / f"{kernel}.csv"
        env = {"OPENBLAS_CORETYPE": kernel, "PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1"}
        result = subprocess.run([sys.executable, "-c", KERNEL_SCRIPT, str(Path(__file__).parent), str(out)],
                                env=env, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
