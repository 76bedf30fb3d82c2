"""Predictors per accelerator on small synthetic data: a dataset restricted to
one accelerator's rows (`rows`, its config errors and the cleaning report's `other_rows`), the shared
LLM-Inference-Bench settings file, SIM on static batches (simulated as such, calibrated on them), and
the cross-accelerator table and goals."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from slim import columns as col
from slim.errors import AdvisorError, ConfigError
from slim.paper.cross_accelerator import (
    AcceleratorResult,
    cross_accelerator_display,
    cross_accelerator_markdown,
    cross_accelerator_table,
    goal_report,
)
from slim.paper.heldout import IMAI, LLMVISOR, SIM, SLIM
from slim.paper.splits import HeldOutSetting, load_settings, split_setting
from slim.pipeline.config import check_config, with_catalog_defaults
from slim.predictors.llmvisor import LLMVISOR_WITHOUT_ITL, records_inter_token_latency
from slim.sim.constants import SimConstants
from slim.sim.engine import simulate_run
from slim.sim.schedule_costs import ScheduleCosts
from slim.sim.schedule_fit import calibrate_schedules
from slim.sim.schedules import ScheduleKey, ScheduleTable, key_of_row, simulate_schedule
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware
from slim.traces.clean import CleaningPolicy, clean_runs
from slim.traces.ingest import ingest_traces
from slim.traces.summary_table import load_table_layout

REPO = Path(__file__).resolve().parents[1]
SETTINGS_FILE = REPO / "config" / "settings" / "llm-inference-bench.yaml"
MODELS = ("llama-2-7b", "llama-3-8b", "mistral-7b", "qwen2-7b")


@pytest.fixture(scope="module")
def catalog():
    return load_architectures()


@pytest.fixture(scope="module")
def hardware():
    return load_hardware()


# ---------------------------------------------------------------- one accelerator's rows

def _table(tmp_path: Path) -> Path:
    """A summary table with its own headers: two accelerators, one model, B 1-32, IL = OL 128."""
    rows = []
    for label, seconds_per_token in (("A100 card", 0.02), ("H100 card", 0.012)):
        for batch in (1, 4, 16, 32):
            latency = 128 * seconds_per_token * (1 + batch / 64)
            rows.append({"Model": "llama-2-7b", "Hardware": label, "Batch Size": batch, "Length": 128,
                         "Latency": latency})
    folder = tmp_path / "bench"
    folder.mkdir()
    pd.DataFrame(rows).to_csv(folder / "points.csv", index=False)
    return folder


TABLE = {"columns": {"model": "Model", "hardware": "Hardware", "batch_size": "Batch Size", "input_len": "Length",
                     "output_len": "Length", "latency_s": "Latency"},
         "hardware_map": {"A100 card": "a100-sxm-40gb", "H100 card": "h100-sxm-80gb"}}


def _config(tmp_path: Path, **entry) -> dict:
    settings = tmp_path / "settings.yaml"
    settings.write_text(yaml.safe_dump({"settings": [
        {"name": "same_curve", "label": "Same curve", "train": {"max_num_seqs": [1, 4, 16]},
         "validate": {"max_num_seqs": [32]}}]}))
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for section in ("characterisation", "simulator", "batch_scaling", "length_sweeps", "generalisation"):
        raw.pop(section, None)
    raw["run_datasets"], raw["default_dataset"] = ["mine"], "mine"
    raw["datasets"]["mine"] = {"kind": "real", "trace_dir": str(_table(tmp_path)), "table": copy.deepcopy(TABLE),
                               "rows": {"hardware": ["a100-sxm-40gb"]}, "hardware": "a100-sxm-40gb",
                               "models": ["llama-2-7b"], "settings": str(settings), **entry}
    return with_catalog_defaults(raw)


def test_a_per_accelerator_dataset_keeps_its_rows_and_accounts_for_the_others(tmp_path, catalog):
    dataset = check_config(_config(tmp_path), REPO)["mine"]
    assert dataset.rows == {"hardware": ("a100-sxm-40gb",)}
    runs = ingest_traces(dataset.trace_dir, "mine", catalog, dataset.ingest_options)
    usable, report = clean_runs(runs, CleaningPolicy(rows=dataset.rows))
    assert len(report) == len(runs) == 8
    assert set(usable[col.HARDWARE]) == {"a100-sxm-40gb"} and len(usable) == 4
    others = report[report[col.STATUS] == "other_rows"]
    assert len(others) == 4 and set(others[col.HARDWARE]) == {"h100-sxm-80gb"}
    assert others[col.REASON_DETAIL].str.contains("hardware = h100-sxm-80gb: left out by").all()
    # Its KV-cache check ran on each row's own accelerator (ingest saw the hardware map).
    assert set(runs[col.HARDWARE]) == {"a100-sxm-40gb", "h100-sxm-80gb"}


@pytest.mark.parametrize("change, message", [
    ({"rows": {"hardwar": ["a100-sxm-40gb"]}}, r"datasets\.mine\.rows\.hardwar: 'hardwar' is not a column"),
    ({"rows": {"hardware": ["a100-40gb"]}}, r"rows\.hardware\[0\] = 'a100-40gb' is not in the hardware file"),
    ({"rows": {"hardware": ["h100-sxm-80gb"]}}, r"rows\.hardware = \['h100-sxm-80gb'\] must be \[a100-sxm-40gb\]"),
    ({"rows": None}, r"hardware_map maps rows to 2 accelerators.*add `rows: \{hardware: \[a100-sxm-40gb\]\}`"),
])
def test_per_accelerator_config_errors_name_the_key(tmp_path, change, message):
    config = _config(tmp_path)
    entry = config["datasets"]["mine"]
    entry.update(change)
    if entry.get("rows") is None:
        entry.pop("rows")
    with pytest.raises(ConfigError, match=message):
        check_config(config, REPO)


def test_the_schema_describes_rows():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    rows = schema["properties"]["datasets"]["additionalProperties"]["properties"]["rows"]
    assert rows["description"] and rows["additionalProperties"]["minItems"] == 1


def test_table_columns_file_for_slim_advise(tmp_path):
    good = tmp_path / "columns.yaml"
    good.write_text(yaml.safe_dump({"table": TABLE}))
    assert load_table_layout(good).hardware_map == TABLE["hardware_map"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"columns": {"latency_ms": "Latency"}}))
    with pytest.raises(ConfigError, match=r"bad\.yaml: .*latency_ms"):
        load_table_layout(bad)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(yaml.safe_dump({"colums": {}}))
    with pytest.raises(ConfigError, match=r"wrong\.yaml: expected the keys columns and hardware_map"):
        load_table_layout(wrong)


# ---------------------------------------------------------------- the shared settings file

def _grid() -> pd.DataFrame:
    """Every model x TP x B x L point of the benchmark's grid, as a cleaned table."""
    rows = []
    for model in MODELS:
        for tp in (1, 2, 4):
            for batch in (1, 16, 32, 64):
                for length in (128, 256, 512, 1024, 2048):
                    rows.append({col.RUN_ID: f"{model}-{tp}-{batch}-{length}", col.MODEL: model,
                                 col.TENSOR_PARALLEL: tp, col.MAX_NUM_SEQS: batch,
                                 col.INPUT_LEN_NOMINAL: length, col.OUTPUT_LEN_NOMINAL: length})
    return pd.DataFrame(rows)


def test_the_llm_inference_bench_settings_hold_out_each_dimension_once():
    settings = {setting.name: setting for setting in load_settings(SETTINGS_FILE)}
    assert list(settings) == ["same_curve", "length", "model", "model_length", "tensor_parallel",
                              "tensor_parallel_4"]
    grid = _grid()
    splits = {name: split_setting(grid, setting) for name, setting in settings.items()}
    same = splits["same_curve"]
    assert set(same.train[col.MAX_NUM_SEQS]) == {1, 16, 32} and set(same.validate[col.MAX_NUM_SEQS]) == {64}
    length = splits["length"]
    assert set(length.train[col.INPUT_LEN_NOMINAL]) == {128, 256, 512}
    assert set(length.validate[col.INPUT_LEN_NOMINAL]) == {1024, 2048}
    model = splits["model"]
    assert set(model.train[col.MODEL]) == {"llama-2-7b", "mistral-7b"}
    assert set(model.validate[col.MODEL]) == {"llama-3-8b", "qwen2-7b"}
    both = splits["model_length"]
    assert set(both.train[col.MODEL]).isdisjoint(both.validate[col.MODEL])
    assert both.train[col.INPUT_LEN_NOMINAL].max() <= 512 < both.validate[col.INPUT_LEN_NOMINAL].min()
    tp = splits["tensor_parallel"]
    assert set(tp.train[col.TENSOR_PARALLEL]) == {1} and set(tp.validate[col.TENSOR_PARALLEL]) == {2, 4}
    assert set(tp.validate[col.MODEL]) <= set(tp.train[col.MODEL])
    tp4 = splits["tensor_parallel_4"]   # TP rows in training: SIM fits its TP step overhead
    assert set(tp4.train[col.TENSOR_PARALLEL]) == {1, 2} and set(tp4.validate[col.TENSOR_PARALLEL]) == {4}
    for name in ("same_curve", "length", "model", "model_length"):   # single-GPU settings
        assert set(splits[name].train[col.TENSOR_PARALLEL]) == set(splits[name].validate[col.TENSOR_PARALLEL]) == {1}
    assert settings["model"].predicts_an_unseen_model


def test_a_selected_model_an_accelerator_lacks_is_simply_absent():
    """The A100 has no Qwen2-7B at TP 1: the model setting validates on Llama-3-8B alone there."""
    grid = _grid()
    a100 = grid[~((grid[col.MODEL] == "qwen2-7b") & (grid[col.TENSOR_PARALLEL] == 1))]
    setting = next(s for s in load_settings(SETTINGS_FILE) if s.name == "model")
    assert set(split_setting(a100, setting).validate[col.MODEL]) == {"llama-3-8b"}


def test_llmvisor_needs_inter_token_latencies():
    online = pd.DataFrame({col.MEAN_ITL_MS: [12.0, 15.5]})
    assert records_inter_token_latency(online)
    assert not records_inter_token_latency(pd.DataFrame({col.MEAN_ITL_MS: [12.0, np.nan]}))
    assert not records_inter_token_latency(pd.DataFrame({col.MODEL: ["opt-1.3b"]}))


# ---------------------------------------------------------------- SIM on static batches

TRUE_CONSTANTS = SimConstants(gemm_compute_efficiency=0.55, gemm_memory_efficiency=0.75,
                              attention_memory_efficiency=0.5, kernel_latency_s=4e-6, step_overhead_base_s=1.5e-3,
                              step_overhead_per_seq_s=25e-6)


def test_an_offline_row_is_a_static_batch_key():
    row = pd.Series({col.MODEL: "llama-2-7b", col.INPUT_LEN_MEAN: 128.0, col.OUTPUT_LEN_MEAN: 128.0,
                     col.MAX_NUM_SEQS: 16.0, col.NUM_PROMPTS: 16.0, col.TENSOR_PARALLEL: 2.0,
                     col.BENCHMARK_MODE: col.BenchmarkMode.OFFLINE_STATIC_BATCH})
    assert key_of_row(row) == ScheduleKey("llama-2-7b", 128, 128, 16, 16, 2, True)
    online = row.copy()
    online[col.BENCHMARK_MODE] = col.BenchmarkMode.ONLINE
    assert not key_of_row(online).static_batch


def test_a_static_batch_is_simulated_at_once_without_a_test_prompt(catalog, hardware):
    hw = hardware["a100-sxm-40gb"]
    key = ScheduleKey("llama-2-7b", 128, 64, 16, 16, 1, True)
    schedule = simulate_schedule(key, catalog, hw, SimConstants())
    assert schedule.ok and schedule.completed == 16 and schedule.test is None
    run = simulate_run(catalog["llama-2-7b"], hw, TRUE_CONSTANTS, 128, 64, 16, 16, 0, 1, include_test_prompt=False,
                       max_model_len=192)
    predicted = ScheduleCosts([schedule], catalog, hw, SimConstants()).predict(TRUE_CONSTANTS)
    assert predicted.throughput_per_s[0] == pytest.approx(16 * 192 / run.duration_s, rel=1e-9)
    assert predicted.e2e_latency_s[0] == pytest.approx(run.duration_s, rel=1e-9)   # the batch's latency
    assert 1 < predicted.mean_batch_size[0] <= 16
    # The parquet round trip keeps it a static batch.
    again = list(ScheduleTable.from_frame(ScheduleTable([schedule], SimConstants()).to_frame(), SimConstants()))[0]
    assert again.key == key and again.test is None


def test_sim_calibrated_on_static_batches_predicts_a_larger_batch(catalog, hardware):
    """Throughputs made by the simulator at known constants: calibrated on B 1-16 of two models, SIM
    predicts B 32 of both within 1% (the static-batch path fits and predicts the same windows)."""
    hw = hardware["h100-sxm-80gb"]
    keys = [ScheduleKey(model, length, length, batch, batch, 1, True)
            for model in ("llama-2-7b", "mistral-7b") for length in (64, 128) for batch in (1, 4, 8, 16, 32)]
    schedules = [simulate_schedule(key, catalog, hw, SimConstants()) for key in keys]
    measured = ScheduleCosts(schedules, catalog, hw, SimConstants()).predict(TRUE_CONSTANTS).throughput_per_s
    train = [i for i, key in enumerate(keys) if key.max_num_seqs <= 16]
    held_out = [i for i, key in enumerate(keys) if key.max_num_seqs == 32]
    calibration = calibrate_schedules([schedules[i] for i in train], measured[train], catalog, hw, SimConstants(),
                                      "static", sample_valley=False)
    predicted = ScheduleCosts([schedules[i] for i in held_out], catalog, hw, SimConstants()).predict(
        calibration.constants).throughput_per_s
    errors = np.abs(predicted / measured[held_out] - 1)
    assert calibration.train_mape_throughput_pct < 0.5
    assert errors.max() < 0.01


# ---------------------------------------------------------------- the cross-accelerator table

def _table3(scale: float, with_sim: bool = True) -> pd.DataFrame:
    rows = []
    for k, setting in enumerate(("same_curve", "model")):
        for predictor, mape in ((SLIM, 8.0), (LLMVISOR, math.nan), (IMAI, 12.0), (SIM, 4.0)):
            if predictor == SIM and not with_sim:
                continue
            value = mape * scale + k
            rows.append({col.SETTING: setting, col.PREDICTOR: predictor, col.N_VALIDATION: 10 + k,
                         col.THROUGHPUT_METRIC.mape: value, col.THROUGHPUT_METRIC.mape_ci_low: value - 1,
                         col.THROUGHPUT_METRIC.mape_ci_high: value + 1, col.E2E_METRIC.mape: value,
                         col.E2E_METRIC.mape_ci_low: math.nan, col.E2E_METRIC.mape_ci_high: math.nan})
    return pd.DataFrame(rows)


SETTINGS = [HeldOutSetting("same_curve", "Same curve", {"max_num_seqs": [1]}, {"max_num_seqs": [64]}),
            HeldOutSetting("length", "Length", not_applicable="n/a: no sweep"),
            HeldOutSetting("model", "Model", {"model": ["a"]}, {"model": ["b"]})]


def test_the_cross_accelerator_table_has_a_row_per_accelerator_and_setting():
    results = [AcceleratorResult("NVIDIA A", "a", _table3(1.0)), AcceleratorResult("AMD B", "b", _table3(2.0, False))]
    long = cross_accelerator_table(results, SETTINGS)
    assert len(long) == 2 * 4 + 2 * 3          # the n/a setting has no rows; B has no SIM
    display = cross_accelerator_display(long)
    assert list(display["accelerator"]) == ["NVIDIA A", "NVIDIA A", "AMD B", "AMD B"]
    assert list(display["setting"]) == ["Same curve", "Model"] * 2
    first = display.iloc[0]
    assert first[SLIM] == "8.0 (7.0-9.0)" and first[SIM] == "4.0 (3.0-5.0)" and first[LLMVISOR] == "n/a"
    assert first["better of SIM, SLIM"] == "4.0" and first["validation runs"] == 10
    assert display.iloc[2][SIM] == "--" and display.iloc[2]["better of SIM, SLIM"] == "16.0"
    markdown = cross_accelerator_markdown(display)
    assert markdown.count("\n| NVIDIA A |") == 2 and "95% BCa" in markdown

    goals = goal_report(long, nvidia={"NVIDIA A"})
    assert list(goals["best_goal_met"]) == [True, True, False, False]      # 4.0, 5.0 <= 5 < 16.0, 17.0
    assert list(goals["slim_goal_met"][:2]) == [True, True] and goals["slim_goal_met"][2:].isna().all()


def test_an_accelerator_without_runs_of_a_setting_has_no_rows_for_it():
    table = _table3(1.0)
    long = cross_accelerator_table([AcceleratorResult("A", "a", table),
                                    AcceleratorResult("B", "b", table[table[col.SETTING] != "model"])], SETTINGS)
    assert set(long.loc[long[col.DATASET] == "b", col.SETTING]) == set(table[col.SETTING]) - {"model"}
    assert set(long.loc[long[col.DATASET] == "a", col.SETTING]) == set(table[col.SETTING])


# ---------------------------------------------------------------- slim advise on a summary table

def test_slim_advise_reads_a_summary_table_on_one_accelerator(tmp_path):
    """Through --table-columns, on --hardware's rows only; the other accelerator's are left out."""
    from slim.advisor.advise import AdviceRequest, advise

    rows = []
    for label, seconds_per_token in (("A100 card", 0.02), ("H100 card", 0.012)):
        for length in (128, 256):
            for batch in (1, 2, 4, 8, 16, 32):
                rows.append({"Model": "llama-2-7b", "Hardware": label, "Batch Size": batch, "Length": length,
                             "Latency": length * seconds_per_token * (1 + batch / 48) * (1 + length / 4096)})
    table = tmp_path / "points.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    columns = tmp_path / "columns.yaml"
    columns.write_text(yaml.safe_dump(TABLE))
    advice = advise(AdviceRequest(table, "llama-2-7b", 256, 256, 60.0, hardware="a100-sxm-40gb",
                                  table_columns=columns))
    assert advice.n_runs == 12 and advice.hardware == "a100-sxm-40gb"
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(yaml.safe_dump({"columns": TABLE["columns"], "hardware_map": {"A100 card": "a100-41gb"}}))
    with pytest.raises(AdvisorError, match=r"hardware_map\.A100 card = 'a100-41gb' is not in the hardware file"
                                           r" \(known: .*\); add it with --hardware-file FILE"):
        advise(AdviceRequest(table, "llama-2-7b", 256, 256, 60.0, hardware="a100-sxm-40gb", table_columns=unknown))


def test_a_predictor_that_predicted_nothing_shows_n_a():
    from slim.paper.tables import NOT_FITTED_NOTE, identifiability_notes, mape_cell

    row = pd.Series({col.THROUGHPUT_METRIC.mape: math.nan, col.VALIDATION_DETERMINED: False,
                     col.THROUGHPUT_METRIC.mape_low: math.nan, col.THROUGHPUT_METRIC.mape_high: math.nan})
    assert mape_cell(row, col.THROUGHPUT_METRIC) == "n/a"
    assert NOT_FITTED_NOTE in identifiability_notes(pd.DataFrame({"a": ["n/a", "3.0"]}))


def test_evaluate_setting_on_static_batches_runs_sim_and_says_why_llmvisor_does_not(tmp_path, catalog, hardware):
    """A synthetic static-batch table (latencies from the simulator at known constants) through ingest,
    cleaning and the held-out evaluation: SIM and SLIM predict, LLMVisor-Agg carries its reason."""
    from slim.paper.heldout import evaluate_setting, mape_table
    from slim.sim.schedules import schedules_of_runs

    hw = hardware["a100-sxm-40gb"]
    rows = []
    for model in ("llama-2-7b", "mistral-7b"):
        for length in (64, 128):
            for batch in (1, 4, 8, 16, 32):
                key = ScheduleKey(model, length, length, batch, batch, 1, True)
                schedule = simulate_schedule(key, catalog, hw, SimConstants())
                latency = float(ScheduleCosts([schedule], catalog, hw, SimConstants()).predict(
                    TRUE_CONSTANTS).e2e_latency_s[0])
                rows.append({"model": model, "batch_size": batch, "input_len": length, "output_len": length,
                             "latency_s": latency})
    folder = tmp_path / "static"
    folder.mkdir()
    pd.DataFrame(rows).to_csv(folder / "points.csv", index=False)
    dataset = check_config(_config(tmp_path, trace_dir=str(folder), table={}, rows={"hardware": ["a100-sxm-40gb"]},
                                   models=["llama-2-7b", "mistral-7b"]), REPO)["mine"]
    runs = ingest_traces(folder, "mine", catalog, dataset.ingest_options)
    assert (runs[col.STATUS] == "ok").all() and set(runs[col.HARDWARE]) == {"a100-sxm-40gb"}
    clean, _ = clean_runs(runs, CleaningPolicy(rows=dataset.rows))
    schedules = schedules_of_runs(runs, catalog, hw, SimConstants())
    assert all(schedule.key.static_batch for schedule in schedules)
    setting = HeldOutSetting("same_curve", "Same curve", {"max_num_seqs": [1, 4, 8, 16]}, {"max_num_seqs": [32]})
    evaluation = evaluate_setting(clean, setting, catalog, hw, schedules)
    mapes = mape_table(evaluation.predictions, evaluation.identifiability).set_index(col.PREDICTOR)
    assert mapes.loc[SIM, col.THROUGHPUT_METRIC.mape] < 1.0       # the simulator's own batches, recovered
    assert math.isfinite(mapes.loc[SLIM, col.THROUGHPUT_METRIC.mape])
    assert math.isnan(mapes.loc[LLMVISOR, col.THROUGHPUT_METRIC.mape])
    assert mapes.loc[LLMVISOR, col.UNIDENTIFIED] == LLMVISOR_WITHOUT_ITL


# ---------------------------------------------------------------- the advisor per accelerator

def _tp_table(tmp_path: Path) -> tuple[Path, Path]:
    """One accelerator, one model, IL = OL 128 and 256, B 1-32 at TP 1 and (faster) at TP 2."""
    rows = []
    for tp, speedup in ((1, 1.0), (2, 1.3)):
        for length in (128, 256):
            for batch in (1, 2, 4, 8, 16, 32):
                latency = length * 0.02 * (1 + batch / 48) * (1 + length / 4096) / speedup
                rows.append({"Model": "llama-2-7b", "Hardware": "A100 card", "TP": tp, "Batch Size": batch,
                             "Length": length, "Latency": latency})
    table = tmp_path / "points.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    columns = tmp_path / "columns.yaml"
    columns.write_text(yaml.safe_dump({"columns": {**TABLE["columns"], "tensor_parallel": "TP"},
                                       "hardware_map": {"A100 card": "a100-sxm-40gb"}}))
    return table, columns


def test_slim_advise_fits_one_tensor_parallel_degree_and_says_which(tmp_path):
    from slim.advisor.advise import AdviceRequest, advise

    table, columns = _tp_table(tmp_path)
    advice = advise(AdviceRequest(table, "llama-2-7b", 256, 256, 60.0, hardware="a100-sxm-40gb",
                                  table_columns=columns))
    assert advice.n_runs == 12            # the TP 1 runs; TP 2's would read as faster runs of the same caps
    [warning] = [w for w in advice.warnings if w.code == "other_tensor_parallel_left_out"]
    assert "12 usable run(s) at tensor_parallel 2 are left out" in warning.message
    assert "tensor_parallel 1" in warning.message


def test_a_measured_curve_with_two_runs_at_one_cap_names_the_tensor_parallel_degrees():
    from slim.advisor.measured import measured_curves

    rows = pd.DataFrame({col.MODEL: "llama-2-7b", col.INPUT_LEN_NOMINAL: 128.0, col.OUTPUT_LEN_NOMINAL: 128.0,
                         col.INPUT_LEN_MEAN: 128.0, col.OUTPUT_LEN_MEAN: 128.0,
                         col.MAX_NUM_SEQS: [1.0, 16.0, 1.0, 16.0], col.TENSOR_PARALLEL: [1, 1, 2, 2],
                         col.TOTAL_TOKEN_THROUGHPUT: [100.0, 1000.0, 150.0, 1400.0],
                         col.E2E_LATENCY_S: [2.6, 4.1, 1.7, 2.9], col.MEAN_BATCH_SIZE: [1.0, 16.0, 1.0, 16.0],
                         col.DURATION_S: [2.6, 4.1, 1.7, 2.9], col.KV_CAPACITY_TOKENS: np.nan,
                         col.NUM_GPU_BLOCKS: np.nan, col.BLOCK_SIZE: np.nan})
    with pytest.raises(AdvisorError, match=r"several runs at max_num_seqs \[1.0, 16.0\] \(tensor_parallel \[1, 2\]"):
        measured_curves(rows)
    assert len(measured_curves(rows[rows[col.TENSOR_PARALLEL] == 1])[0].max_num_seqs) == 2


def test_the_advisor_config_selects_its_rows(tmp_path):
    from slim.paper.advisor_study_config import load_bca_config

    study = load_bca_config(REPO / "config" / "bca" / "llm-inference-bench.yaml")
    frame = pd.DataFrame({col.TENSOR_PARALLEL: [1, 2, 4, 1], col.MODEL: ["a", "a", "a", "b"]})
    assert study.rows == {col.TENSOR_PARALLEL: [1]}
    assert study.study_rows(frame)[col.MODEL].tolist() == ["a", "b"]
    with pytest.raises(ConfigError, match=r"`rows` \{'tensor_parallel': \[1\]\} selects none"):
        study.study_rows(frame[frame[col.TENSOR_PARALLEL] > 1])
    wrong = tmp_path / "bca.yaml"
    wrong.write_text(yaml.safe_dump({"rows": {"tensor_parallel": 1}}))
    with pytest.raises(ConfigError, match=r"bca.yaml: rows/tensor_parallel: 1 is not of type 'array'"):
        load_bca_config(wrong)
    assert load_bca_config(REPO / "config" / "bca" / "h100-public.yaml").study_rows(frame) is frame


def test_the_advisor_summary_counts_agreements_per_accelerator():
    from slim.paper.cross_accelerator import AcceleratorAdvice, advisor_summary, advisor_summary_markdown

    advisors = pd.DataFrame({"full_cap": [16, 32, 64], "full_retained_pct": [70.0, 80.0, 100.0],
                             "slim_cap": [16, 16, 64], "slim_retained_pct": [70.0, 50.0, 100.0],
                             "sim_cap": [16, 32, 32], "sim_retained_pct": [70.0, 80.0, np.nan]})
    cost = pd.DataFrame({"setting": ["a", "Mean"], "Time save (%)": [40.0, 40.0]})
    summary = advisor_summary([AcceleratorAdvice("GPU X", advisors, cost)])
    row = summary.iloc[0]
    assert (row["curves"], row["slim_agrees"], row["sim_agrees"]) == (3, 2, 2)
    assert row["slim_retained_pct"] == pytest.approx(220.0 / 3) and row["sim_retained_pct"] == pytest.approx(75.0)
    assert "| GPU X | 3 | 83.3% | 2 of 3 | 73.3% | 2 of 3 | 75.0% | 40.0% |" in advisor_summary_markdown(summary)


def test_no_advised_accelerator_gives_an_empty_summary():
    from slim.paper.cross_accelerator import ACCELERATOR, advisor_summary

    summary = advisor_summary([])
    assert summary.empty and list(summary.columns) == [ACCELERATOR, "curves"]
