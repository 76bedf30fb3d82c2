"""The shared LLM-Inference-Bench CSV read through its dataset entry in config/config.yaml (a column
mapping and a per-row hardware map, no parser written for it), the catalogs' new accelerators and
models (hand-checked), and the refusal of models SLIM's dense formula does not cover."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
import yaml

from slim import cli
from slim import columns as col
from slim.errors import ConfigError, UnsupportedArchitectureError
from slim.pipeline.config import check_config, with_catalog_defaults
from slim.specs.architecture import load_architectures
from slim.specs.hardware import GIB, load_hardware
from slim.specs.hf_config import architecture_from_hf_config
from slim.traces.clean import clean_runs
from slim.traces.ingest import ingest_traces

REPO = Path(__file__).resolve().parents[1]
NAME = "llm-inference-bench"
SCHEMA = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())


def _config() -> dict:
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    raw["run_datasets"], raw["default_dataset"] = [NAME], NAME
    for section in ("characterisation", "simulator", "batch_scaling", "length_sweeps", "generalisation"):
        raw.pop(section, None)
    return with_catalog_defaults(raw)


@pytest.fixture(scope="module")
def bench(shared_traces_dir):
    """The dataset as the pipeline ingests and cleans it (rule ingest, which cleans too)."""
    if not (shared_traces_dir.parent / NAME).is_dir():
        pytest.skip(f"{shared_traces_dir.parent / NAME} not present")
    dataset = check_config(_config(), REPO)[NAME]
    runs = ingest_traces(REPO / dataset.trace_dir, NAME, load_architectures(), dataset.ingest_options)
    usable, report = clean_runs(runs)
    return runs, usable, report


def test_every_row_of_the_shared_csv_is_a_run_with_a_status(bench):
    runs, usable, report = bench
    assert len(runs) == len(report) == 997 and report[col.RUN_ID].is_unique
    assert report[col.STATUS].value_counts().to_dict() == {
        "ok": 798, "unsupported_model": 65, "aggregated": 55, "implausible": 52, "kv_cache_overflow": 22,
        "unknown_model": 5}
    assert len(usable) == 798
    assert usable.groupby(col.HARDWARE).size().to_dict() == {"a100-sxm-40gb": 198, "h100-sxm-80gb": 298,
                                                             "mi250-gcd": 302}
    assert (runs[col.TRACE_FORMAT] == "summary_table").all()
    assert (runs[col.BENCHMARK_MODE] == col.BenchmarkMode.OFFLINE_STATIC_BATCH).all()
    assert (usable[col.MEAN_BATCH_SIZE] == usable[col.MAX_NUM_SEQS]).all()   # the configured B


def test_repeated_points_are_averaged_with_count_and_spread(bench):
    runs, usable, report = bench
    key = [col.HARDWARE, col.MODEL, col.TENSOR_PARALLEL, col.INPUT_LEN_NOMINAL, col.MAX_NUM_SEQS]
    sizes = runs.groupby(key, dropna=False).size()
    assert (sizes > 1).sum() == 57 and sizes.max() == 2          # 57 points measured twice
    averaged = report[report[col.N_MEASUREMENTS] > 1]
    assert len(averaged) == 55 and (averaged[col.N_MEASUREMENTS] == 2).all() and averaged["kept"].all()
    assert averaged[col.MEASUREMENT_SPREAD_PCT].between(0.05, 3.1).all()
    # The other 2 repeated points are excluded for their own reason, both rows listed.
    repeated = runs.set_index(key).loc[sizes[sizes > 1].index]
    excluded = repeated[~repeated[col.STATUS].isin(["ok"])].groupby(level=list(range(5)))[col.STATUS].first()
    assert excluded.value_counts().to_dict() == {"unsupported_model": 1, "kv_cache_overflow": 1}
    # One averaged point, by hand: rows 167 and the row repeating it.
    point = usable.set_index(col.RUN_ID).loc["vllm_benchmark_latency.csv[167]"]
    same = runs[(runs[key] == point[key]).all(axis=1)]
    assert len(same) == 2
    assert point[col.DURATION_S] == pytest.approx(same[col.DURATION_S].mean(), rel=1e-12)
    assert point[col.TOTAL_TOKEN_THROUGHPUT] == pytest.approx(16 * 1024 / same[col.DURATION_S].mean(), rel=1e-12)


def test_exclusions_name_their_reason(bench):
    runs, _, report = bench
    by_status = report.groupby(col.STATUS)
    unsupported = by_status.get_group("unsupported_model")
    assert unsupported[col.MODEL].value_counts().to_dict() == {"decilm-7b": 65}
    assert unsupported[col.REASON_DETAIL].str.contains("variable grouped-query").all()
    implausible = by_status.get_group("implausible")
    assert set(implausible[col.HARDWARE]) == {"mi250-gcd"} and set(implausible[col.TENSOR_PARALLEL]) == {1, 2}
    assert set(implausible[col.MODEL]) == {"llama-2-70b", "llama-3-70b", "mixtral-8x7b"}
    # Mixtral's 46.7B parameters in 16 bits do not fit one 64 GiB GCD; the 70B models not two.
    assert implausible[col.REASON_DETAIL].str.contains(
        r"weights need (?:6[45]\.[0-9] GiB per rank at TP 2|87\.0 GiB per rank at TP 1)").all()
    overflow = by_status.get_group("kv_cache_overflow")
    assert overflow.groupby(col.HARDWARE).size().to_dict() == {"a100-sxm-40gb": 13, "h100-sxm-80gb": 3,
                                                               "mi250-gcd": 6}
    assert overflow[col.REASON_DETAIL].str.contains("its mean running batch is below").all()
    assert sorted(by_status.get_group("unknown_model")[col.MODEL]) == [
        "Aquila-7B", "Qwen1.5-7B", "bloom-7b1", "gpt-j-6b", "llama-7b"]


def test_the_dataset_entry_is_schema_valid_and_checked():
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    jsonschema.validate(raw, SCHEMA)
    bad = copy.deepcopy(raw)
    bad["datasets"][NAME]["table"]["columns"]["latency_ms"] = "Latency"
    with pytest.raises(jsonschema.ValidationError, match="latency_ms"):
        jsonschema.validate(bad, SCHEMA)
    neither = copy.deepcopy(raw)
    del neither["datasets"][NAME]["table"]["hardware_map"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(neither, SCHEMA)


@pytest.mark.parametrize("change, message", [
    (lambda entry: entry["table"]["hardware_map"].update({"AMD MI250 GPU": "mi250x"}),
     r"table\.hardware_map\.AMD MI250 GPU = 'mi250x' is not in the hardware file"),
    (lambda entry: entry.update(settings="config/settings/h100-public.yaml"), r"settings needs .*\.hardware"),
    # A dataset that fits SLIM (settings) refuses a model the catalog cannot describe; one only ingested may list it.
    (lambda entry: entry.update(hardware="h100-sxm-80gb", rows={"hardware": ["h100-sxm-80gb"]},
                                settings="config/settings/llm-inference-bench.yaml",
                                models=[*entry["models"], "deci/DeciLM-7B"]),
     r"models\[7\] = .*variable grouped-query"),
    (lambda entry: entry["table"]["columns"].update(batch_size="Batch"), r"vllm_benchmark_latency\.csv lacks Batch"),
])
def test_config_errors_name_the_key(shared_traces_dir, change, message):
    if not (shared_traces_dir.parent / NAME).is_dir():
        pytest.skip(f"{shared_traces_dir.parent / NAME} not present")
    config = _config()
    change(config["datasets"][NAME])
    with pytest.raises(ConfigError, match=message):
        check_config(config, REPO)


# ---------------------------------------------------------------- catalogs

def test_new_models_by_hand(catalog):
    """Parameter counts from config.json shapes, KV bytes per token = 2 x L x H_kv x d_h x 2."""
    qwen = catalog["Qwen/Qwen2-7B"]
    d, kv, ff, vocab, layers = 3584, 4 * 128, 18944, 152064, 28
    per_layer = (d * d + 2 * d * kv + d * d) + (d + 2 * kv) + 3 * d * ff + 2 * d   # attention + biases, FFN, norms
    assert qwen.n_params == 2 * vocab * d + layers * per_layer + d == 7_615_616_512
    assert qwen.kv_bytes_per_token() == 2 * 28 * 512 * 2 == 57_344
    llama = catalog["meta-llama/Llama-2-70b-hf"]
    d, kv, ff, vocab, layers = 8192, 8 * 128, 28672, 32000, 80
    per_layer = (2 * d * d + 2 * d * kv) + 3 * d * ff + 2 * d
    assert llama.n_params == 2 * vocab * d + layers * per_layer + d == 68_976_648_192
    assert llama.kv_bytes_per_token() == 327_680
    for name in ("qwen2-72b", "llama-3-70b", "llama-3-8b", "mistral-7b"):
        assert name in catalog


def test_new_accelerators_carry_their_datasheet_numbers():
    hardware = load_hardware()
    expected = {  # name: (dense BF16 TFLOP/s, TB/s, GiB)
        "a100-sxm-40gb": (312, 1.555, 40), "h100-pcie-80gb": (756.5, 2.0, 80), "h100-nvl": (835.5, 3.9, 94),
        "gh200-96gb": (989, 4.0, 96), "mi250": (362.1, 3.2768, 128), "mi250-gcd": (181.05, 1.6384, 64),
        "mi300x": (1307.4, 5.3, 192), "mi325x": (1307.4, 6.0, 256), "intel-max-1550": (838.9, 3.2768, 128)}
    for name, (tflops, tbps, gib) in expected.items():
        gpu = hardware[name]
        assert (gpu.peak_flops_per_s / 1e12, gpu.hbm_bandwidth_bytes_per_s / 1e12, gpu.memory_bytes / GIB) == \
            pytest.approx((tflops, tbps, gib)), name
    card, gcd = hardware["mi250"], hardware["mi250-gcd"]
    assert card.peak_flops_per_s == pytest.approx(2 * gcd.peak_flops_per_s)
    assert card.memory_bytes == 2 * gcd.memory_bytes
    text = (REPO / "slim" / "specs" / "hardware.yaml").read_text()
    for name in expected:   # every entry cites its datasheet (one GCD: the MI250's, halved)
        comment = text.split(f"\n{name}:\n", 1)[1].split("display_name")[0]
        assert comment.strip().startswith("#") and ("https://" in comment or name == "mi250-gcd"), name


# ---------------------------------------------------------------- refusal

def test_a_model_the_catalog_cannot_describe_is_refused_with_its_reason(catalog):
    assert "decilm-7b" not in catalog and catalog.unsupported("decilm-7b") is not None
    with pytest.raises(UnsupportedArchitectureError, match="variable grouped-query attention"):
        catalog["decilm-7b"]


def test_a_mixture_of_experts_is_served_beyond_the_dense_formula(catalog):
    mixtral = catalog["mistralai/Mixtral-8x7B-v0.1"]
    assert "mistralai/Mixtral-8x7B-v0.1" in catalog and catalog.unsupported("mixtral-8x7b") is None
    assert (mixtral.moe.n_routed_experts, mixtral.moe.experts_per_token) == (8, 2)
    assert "mixture of experts" in mixtral.dense_formula_gap     # served by the terms beyond the paper


def test_their_config_json_is_read_and_a_per_layer_kv_head_count_refused(tmp_path):
    base = json.loads((REPO / "tests" / "data" / "hf_configs" / "mistral-7b" / "config.json").read_text())
    mixtral = tmp_path / "mixtral" / "config.json"
    mixtral.parent.mkdir()
    mixtral.write_text(json.dumps({**base, "num_local_experts": 8, "num_experts_per_tok": 2}))
    described = architecture_from_hf_config(mixtral)      # described, for the decode-step physics
    assert described.moe.n_routed_experts == 8
    assert load_architectures().with_architecture(described)[described.name].moe.experts_per_token == 2
    deci = tmp_path / "deci" / "config.json"
    deci.parent.mkdir()
    deci.write_text(json.dumps({**base, "model_type": "deci", "num_key_value_heads_per_layer": [4, 4, 2, 1] * 8}))
    with pytest.raises(UnsupportedArchitectureError, match=r"varies by layer \(\[1, 2, 4\]\)"):
        architecture_from_hf_config(deci)
    same = tmp_path / "same" / "config.json"   # one value for every layer is ordinary GQA
    same.parent.mkdir()
    same.write_text(json.dumps({**base, "num_key_value_heads_per_layer": [8] * 32}))
    assert architecture_from_hf_config(same, "same").n_kv_heads == 8


def test_slim_advise_refuses_deci_naming_the_reason(capsys):
    code = cli.main(["advise", "--traces", str(REPO / "tests" / "data" / "formats" / "bench_serve_metadata"),
                     "--model", "decilm-7b", "--input-len", "256", "--output-len", "128", "--slo-ms", "8000",
                     "--hardware", "a100-80gb"])
    assert code == cli.EXIT_BAD_INPUT
    assert "is not supported: variable grouped-query" in capsys.readouterr().err


def test_the_catalog_says_how_each_accelerator_all_reduces(tmp_path):
    """NVLink-connected HGX boards run vLLM's one-shot custom all-reduce (one collective step at any
    degree); the others a ring (t - 1), the default; a wrong value names the key."""
    hardware = load_hardware()
    assert [hardware["a100-sxm-40gb"].tensor_parallel_collective_steps(t) for t in (1, 2, 4)] == [0, 1, 1]
    assert [hardware["mi250-gcd"].tensor_parallel_collective_steps(t) for t in (1, 2, 4)] == [0, 1, 3]
    assert {name for name, hw in hardware.items() if hw.tensor_parallel_allreduce == "one_shot"} == {
        "h100-sxm-80gb", "h200", "a100-80gb", "a100-sxm-40gb"}
    wrong = tmp_path / "hardware.yaml"
    wrong.write_text(yaml.safe_dump({"gpu": {"peak_flops_per_s": 1e14, "hbm_bandwidth_bytes_per_s": 1e12,
                                             "memory_bytes": 2**34, "gpu_memory_utilization": 0.9,
                                             "tensor_parallel_allreduce": "tree"}}))
    with pytest.raises(ConfigError, match=r"hardware 'gpu': tensor_parallel_allreduce must be one of one_shot, "
                                          r"ring, got 'tree'"):
        load_hardware(wrong)


def test_the_tp_step_overhead_fit_does_not_depend_on_noise_or_start_order(bench):
    """SIM calibrated on the MI250's TP 1 and 2 runs (setting tensor_parallel_4, where the TP step
    overhead is fitted): a 1e-9 perturbation of every measured throughput, or the start grid in
    reverse, lands on the same constants and the same TP 4 MAPE (to 0.05 points)."""
    import numpy as np

    import slim.sim.schedule_costs as schedule_costs
    import slim.sim.schedule_fit as schedule_fit
    from slim.model.metrics import mape_pct
    from slim.paper.splits import load_settings, split_setting
    from slim.sim.constants import load_sim_constants
    from slim.sim.schedules import schedules_of_runs

    _, usable, _ = bench
    rows = usable[usable[col.HARDWARE] == "mi250-gcd"]
    settings = {s.name: s for s in load_settings(REPO / "config" / "settings" / "llm-inference-bench.yaml")}
    split = split_setting(rows, settings["tensor_parallel_4"])
    catalog, hardware = load_architectures(), load_hardware()["mi250-gcd"]
    schedules = schedules_of_runs(pd.concat([split.train, split.validate]), catalog, hardware,
                                  load_sim_constants(REPO / "slim/sim/h100-64gb-sim.yaml"), workers=1)
    measured = split.validate[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float)
    costs = schedule_costs.prediction_costs(split.validate, schedules, catalog, hardware)

    def calibrated(train: pd.DataFrame, starts=None):
        calibration = schedule_fit.calibrate_schedules(
            schedules.for_frame(train), train[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float), catalog, hardware,
            schedules.constants, "tensor_parallel_4", starts=starts, sample_valley=False)
        return calibration, mape_pct(costs.predict(calibration.constants).throughput_per_s, measured)

    reference, reference_mape = calibrated(split.train)
    assert reference.constants.tensor_parallel_step_overhead_s > 1e-4       # fitted: the TP 2 runs pay it
    noise = 1.0 + 1e-9 * np.random.default_rng(7).uniform(-1.0, 1.0, len(split.train))
    perturbed = split.train.assign(**{col.TOTAL_TOKEN_THROUGHPUT: split.train[col.TOTAL_TOKEN_THROUGHPUT] * noise})
    for other, other_mape in (calibrated(perturbed), calibrated(split.train, list(reversed(schedule_fit.STARTS)))):
        assert abs(other_mape - reference_mape) < 0.05
        for name in col.SIM_FITTED_CONSTANTS:
            assert getattr(other.constants, name) == pytest.approx(getattr(reference.constants, name),
                                                                  rel=1e-3, abs=1e-9), name
