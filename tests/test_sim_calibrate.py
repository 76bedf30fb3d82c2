"""slim.sim.calibrate recovers constants from throughputs the simulator itself produced."""

import pandas as pd
import pytest

from slim import columns as col
from slim.sim import SimConstants, load_sim_constants, simulate_run
from slim.sim.calibrate import calibrate, validate, write_calibration_yaml
from slim.sim.schedule_costs import prediction_costs
from slim.sim.schedules import keys_of_frame, simulate_schedules
from slim.specs.architecture import MODELS_FILE, load_architectures
from slim.specs.hardware import HARDWARE_FILE, load_hardware


def test_calibration_recovers_known_constants(tmp_path):
    catalog = load_architectures(MODELS_FILE)
    h100 = load_hardware(HARDWARE_FILE)["h100-64gb"]
    truth = SimConstants().with_fitted({"gemm_compute_efficiency": 0.45, "gemm_memory_efficiency": 0.85,
                                        "attention_memory_efficiency": 0.7, "kernel_latency_s": 8e-6,
                                        "step_overhead_base_s": 0.5e-3, "step_overhead_per_seq_s": 30e-6})
    rows = []
    for model in ("opt-125m", "opt-1.3b", "opt-2.7b"):
        for il, ol in ((128, 64), (512, 32)):
            for batch in (1, 8, 64, 256):
                result = simulate_run(catalog[model], h100, truth, il, ol, batch, 120, seed=0)
                rows.append({col.MODEL: model, col.MAX_NUM_SEQS: batch, col.INPUT_LEN_MEAN: il,
                             col.OUTPUT_LEN_MEAN: ol, col.NUM_PROMPTS: 120, col.NUM_PREEMPTIONS: 0,
                             col.TOTAL_TOKEN_THROUGHPUT: result.total_token_throughput_per_s,
                             col.MEAN_BATCH_SIZE: result.mean_batch_size,
                             col.KV_CAPACITY_TOKENS: result.plan.kv_capacity_tokens})
    frame = pd.DataFrame(rows)
    # A 120-prompt run lasts seconds, so its once-a-second scrapes say little about its batch:
    # "measure" the time-averaged one, which is what validate predicts.
    schedules = simulate_schedules(keys_of_frame(frame), catalog, h100, truth)
    frame[col.MEAN_BATCH_SIZE] = prediction_costs(frame, schedules, catalog, h100).predict(truth).mean_batch_size
    fitted, residuals = calibrate(frame, catalog, h100)          # from the fixed start grid
    assert residuals["relative_error"].abs().max() < 1e-4
    for name in ("gemm_compute_efficiency", "gemm_memory_efficiency", "attention_memory_efficiency",
                 "step_overhead_per_seq_s"):
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), rel=0.05), name
    runs, curves = validate(frame, catalog, h100, fitted, schedules=schedules)
    assert curves["throughput_mape"].max() < 0.1 and curves["batch_mape"].max() < 0.1
    assert curves["kv_saturation_agreement"].eq(1.0).all()
    # The runs "record" the simulator's own KV capacity: its plan matches it; the advisor's estimate is scored.
    assert curves["kv_capacity_mape"].eq(0.0).all() and curves["advisor_kv_capacity_mape"].notna().all()
    unrecorded = validate(frame.drop(columns=[col.KV_CAPACITY_TOKENS]), catalog, h100, fitted, schedules=schedules)[1]
    assert unrecorded["kv_capacity_mape"].isna().all()
    path = write_calibration_yaml(fitted, residuals, tmp_path / "sim.yaml", curves)
    assert load_sim_constants(path) == fitted
