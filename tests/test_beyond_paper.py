"""The simulator's accuracy beyond the paper (`slim.paper.beyond_paper`): the calibration choice, the
per-curve MAPEs by hand, the rows of a run the simulator cannot start, and the shared NVIDIA sweep
through it (every usable run predicted, the same numbers twice)."""

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.defaults import SIM_CONSTANTS_FILE
from slim.paper.beyond_paper import (
    accuracy_markdown,
    calibration_runs,
    curve_accuracy,
    curve_predictions,
    curve_run,
    model_accuracy,
)
from slim.sim.constants import load_sim_constants
from slim.specs.hardware import load_hardware
from slim.traces.clean import clean_runs
from slim.traces.ingest import IngestOptions, ingest_traces
from slim.tune.belief import ResidualKernel


def test_a_curve_is_calibrated_on_its_lowest_middle_and_highest_run():
    assert calibration_runs(pd.Series([4, 8, 16])) == []          # nothing left to predict
    assert calibration_runs(pd.Series([4, 8, 16, 32])) == [0, 2, 3]
    assert calibration_runs(pd.Series(range(7))) == [0, 3, 6]


def _curve(measured: list[float], predicted: list[float], status: list[str] | None = None) -> pd.DataFrame:
    n = len(measured)
    return pd.DataFrame({col.HARDWARE: "h", col.MODEL: "m", col.TENSOR_PARALLEL: 2, col.DATA_PARALLEL: 1,
                         col.INPUT_LEN_NOMINAL: 1024, col.OUTPUT_LEN_NOMINAL: 128,
                         col.BENCHMARK_MODE: "online", "in_flight": [4 * 2**i for i in range(n)],
                         "measured_mean_tpot_ms": measured, "zero_shot_mean_tpot_ms": predicted,
                         "shipped_mean_tpot_ms": [2 * value for value in predicted],
                         "measured_mean_ttft_ms": np.nan, "zero_shot_mean_ttft_ms": np.nan,
                         "shipped_mean_ttft_ms": np.nan, "measured_total_token_throughput": np.nan,
                         "zero_shot_total_token_throughput": np.nan, "shipped_total_token_throughput": np.nan,
                         "sim_status": status or ["ok"] * n, col.VLLM_VERSION: "0.18.0"})


def test_the_mapes_of_a_curve_by_hand():
    # Zero-shot 20% high everywhere but on run 1; calibration on runs 0, 2 and 4 finds 1 / 1.2.
    measured = [10.0, 12.0, 15.0, 20.0, 30.0]
    predicted = [12.0, 12.0, 18.0, 24.0, 36.0]
    (row,) = curve_accuracy(_curve(measured, predicted)).to_dict("records")
    assert row["zero_shot_mape"] == pytest.approx(100 * (0.2 * 4 + 0) / 5)
    assert row["calibrated_runs"] == 2                       # runs 1 and 3
    assert row["factor_mape"] == pytest.approx(100 * ((12 - 10) / 12 + 0) / 2)
    # tune's correction with an offset alone (wide prior, no trend): the same factor
    offset_only = ResidualKernel(offset_sd=10.0, slope_sd_per_doubling=0.0, model_offset_sd=0.0,
                                 model_slope_sd_per_doubling=0.0, smooth_sd=0.0, noise_sd=1e-6)
    (alone,) = curve_accuracy(_curve(measured, predicted), offset_only).to_dict("records")
    assert alone["calibrated_mape"] == pytest.approx(alone["factor_mape"], rel=1e-6)


def test_tunes_correction_follows_a_trend_across_concurrency_that_one_factor_cannot():
    """Measured 8% above the prediction per doubling of the concurrency: calibrated on runs 0, 3 and 6,
    tune's correction (the shipped kernel's trend) predicts the other runs far better than one factor."""
    predicted = [10.0 * 2 ** (0.5 * i) for i in range(7)]
    measured = [value * 1.08 ** i for i, value in enumerate(predicted)]
    (row,) = curve_accuracy(_curve(measured, predicted)).to_dict("records")
    assert row["calibrated_runs"] == 4
    assert row["calibrated_mape"] < 3.0 and row["factor_mape"] > 10.0   # 2.4% against 11.6%


def test_a_run_the_simulator_cannot_start_is_counted_but_not_scored():
    curve = _curve([10.0, 12.0, 15.0, 20.0, 30.0], [12.0, np.nan, 18.0, 24.0, 36.0],
                   ["ok", "no_cache_memory", "ok", "ok", "ok"])
    (row,) = curve_accuracy(curve).to_dict("records")
    assert (row["runs"], row["simulated"]) == (5, 4)
    assert row["zero_shot_mape"] == pytest.approx(20.0)
    # Calibrated on the started runs' lowest, middle and highest (4, 16, 64), scored on 32.
    assert row["calibrated_runs"] == 1 and row["factor_mape"] == pytest.approx(0.0, abs=1e-12)
    assert row["calibrated_mape"] == pytest.approx(0.0, abs=0.5)   # the kernel's prior shrinks a little
    models = model_accuracy(curve_accuracy(curve))
    assert models.loc[0, "runs"] == 4


def test_the_summary_says_which_goal_is_met():
    curves = curve_accuracy(_curve([10.0, 12.0, 15.0, 20.0, 30.0], [12.0, 12.0, 18.0, 24.0, 36.0]))
    text = accuracy_markdown(model_accuracy(curves), ["mine (real)"])
    # The shipped constants' predictions are twice the zero-shot ones here: 10, 12, 15, 20, 30 against 24, ...
    assert "| h | m | mean_tpot_ms | 1 | 5 | 132.0 | 16.0 | 8.5 | 8.3 | missed / missed |" in text
    assert "mine (real)" in text and "Left without" not in text
    assert "- a note" in accuracy_markdown(model_accuracy(curves), ["mine (real)"], ["a note"])


def test_an_unrecorded_version_runs_the_named_release_and_dp_runs_carry_every_request():
    row = pd.Series({col.MODEL: "qwen3-32b", col.HARDWARE: "h100-sxm-80gb", col.INPUT_LEN_MEAN: 1024.0,
                     col.OUTPUT_LEN_MEAN: 128.0, col.MAX_NUM_SEQS: 16.0, col.TENSOR_PARALLEL: 4,
                     col.DATA_PARALLEL: 4, col.VLLM_VERSION: None, col.BENCHMARK_MODE: "online"})
    run = curve_run(row)
    assert (run.in_flight, run.tensor_parallel, run.vllm_version, run.offline) == (16, 4, "0.12.0", False)


@pytest.fixture(scope="module")
def sweep_predictions(shared_traces_dir, catalog):
    folder = shared_traces_dir.parent / "aiconfigurator-silicon"
    if not folder.is_dir():
        pytest.skip(f"{folder} not present")
    hardware = load_hardware()
    usable, _ = clean_runs(ingest_traces(folder, "aiconfigurator-h100", catalog,
                                         IngestOptions.on(hardware, "h100-sxm-80gb")))
    consts = load_sim_constants(SIM_CONSTANTS_FILE)
    return usable, curve_predictions(usable, catalog, hardware, consts), (catalog, hardware, consts)


@pytest.mark.integration
def test_every_usable_run_of_the_sweep_is_predicted(sweep_predictions):
    usable, predictions, _ = sweep_predictions
    assert len(predictions) == len(usable) == 222
    assert (predictions["sim_status"] == "ok").all()
    assert predictions[[f"shipped_{m}" for m in ("mean_tpot_ms", "mean_ttft_ms", "total_token_throughput")]] \
        .gt(0).all().all()
    assert predictions["zero_shot_mean_tpot_ms"].isna().all()     # no other-model constants were given
    # each run carries the release it records (None where none), which keys its curve
    recorded = usable.set_index(col.RUN_ID)[col.VLLM_VERSION].reindex(predictions[col.RUN_ID])
    assert (predictions[col.VLLM_VERSION].fillna("") == recorded.fillna("").to_numpy()).all()
    assert {"0.11.2", "0.12.0", "0.18.0"} <= set(predictions[col.VLLM_VERSION].dropna())
    models = model_accuracy(curve_accuracy(predictions))
    assert set(models[col.MODEL]) == {"qwen3-32b", "qwen3-32b-fp8", "llama-3.1-70b-fp8", "gpt-oss-120b",
                                      "minimax-m2.5"}


@pytest.mark.integration
def test_the_predictions_are_the_same_twice(sweep_predictions):
    usable, predictions, (catalog, hardware, consts) = sweep_predictions
    subset = usable[usable[col.MODEL] == "minimax-m2.5"]
    again = curve_predictions(subset, catalog, hardware, consts)
    pd.testing.assert_frame_equal(again.reset_index(drop=True),
                                  predictions[predictions[col.MODEL] == "minimax-m2.5"].reset_index(drop=True))


def test_the_goal_verdicts_per_model():
    from slim.paper.beyond_paper import goal_verdicts

    curves = curve_accuracy(_curve([10.0, 12.0, 15.0, 20.0, 30.0], [11.0, 12.0, 16.5, 22.0, 33.0]))
    (row,) = goal_verdicts(model_accuracy(curves)).to_dict("records")
    assert row["zero_shot_mape <= 15%"] == "met" and row["calibrated_mape <= 5%"] == "met"
    three = curve_accuracy(_curve([10.0, 12.0, 15.0], [20.0, 24.0, 30.0]))
    (row,) = goal_verdicts(model_accuracy(three)).to_dict("records")
    assert row["zero_shot_mape <= 15%"] == "missed" and row["calibrated_mape <= 5%"] == "n/a"


@pytest.mark.integration
def test_zero_shot_constants_leave_the_model_out(sweep_predictions):
    usable, _, (catalog, hardware, consts) = sweep_predictions
    from slim.paper.beyond_paper import other_models_constants

    subset = usable[usable[col.MODEL].isin(["minimax-m2.5", "llama-3.1-70b-fp8"])]
    constants, notes = other_models_constants(subset, catalog, hardware, consts, ["minimax-m2.5"])
    assert list(constants) == [("h100-sxm-80gb", "minimax-m2.5")] and notes == []
    assert constants[("h100-sxm-80gb", "minimax-m2.5")] != consts        # fitted on Llama's runs alone
    alone, notes = other_models_constants(subset[subset[col.MODEL] == "minimax-m2.5"], catalog, hardware, consts)
    assert alone == {} and "no zero-shot constants" in notes[0]


def test_a_predictions_table_without_the_curve_keys_is_refused():
    with pytest.raises(ValueError, match="vllm_version"):
        curve_accuracy(_curve([10.0, 12.0, 15.0, 20.0], [12.0, 12.0, 18.0, 24.0]).drop(columns=[col.VLLM_VERSION]))


def test_runs_of_another_vllm_release_are_another_curve_not_scored_by_its_calibration():
    """The fifth run was measured on another engine: the first four are calibrated and scored alone, and
    the other is a curve of one run, counted zero-shot but never calibrated on the others."""
    measured, predicted = [10.0, 12.0, 15.0, 20.0, 5.0], [12.0, 12.0, 18.0, 24.0, 36.0]
    curve = _curve(measured, predicted).assign(**{col.VLLM_VERSION: ["0.18.0"] * 4 + [np.nan]})
    rows = curve_accuracy(curve).set_index(col.VLLM_VERSION, drop=False)
    newest, other = rows.loc["0.18.0"], rows[rows[col.VLLM_VERSION].isna()].iloc[0]
    assert (newest["runs"], newest["calibrated_runs"], other["runs"], other["calibrated_runs"]) == (4, 1, 1, 0)
    assert np.isnan(other["calibrated_mape"]) and other["zero_shot_mape"] == pytest.approx(620.0)
    assert model_accuracy(curve_accuracy(curve)).loc[0, "runs"] == 5
