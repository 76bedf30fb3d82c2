"""AIConfigurator's silicon sweeps (slim/traces/silicon_sweep.py): the hand-written fixture
tests/data/aiconfigurator_silicon/sweep.csv (one row per status the reader gives) and the shared
file ../shared/traces/aiconfigurator-silicon/vllm_h100_silicon.csv."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from slim import cli
from slim import columns as col
from slim.advisor.warnings import unstated_statistic_warnings
from slim.errors import ConfigError
from slim.pipeline.config import check_config, with_catalog_defaults
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware
from slim.specs.slo import Slos
from slim.traces.clean import clean_runs
from slim.traces.ingest import ingest_traces
from slim.traces.offline_ingest import IngestOptions
from slim.traces.silicon_sweep import (
    FORMAT_SILICON_SWEEP,
    LATENCY_SOURCE_UNSTATED,
    PROMPTS_PER_REQUEST_IN_FLIGHT,
    closed_loop_measurement,
)
from slim.traces.summary_table import TableLayout

REPO = Path(__file__).resolve().parents[1]
SWEEP = REPO / "tests" / "data" / "aiconfigurator_silicon" / "sweep.csv"
NAME = "aiconfigurator-h100"

EXPECTED = {   # fixture row -> (status after cleaning, model)
    "sweep.csv[00]": ("ok", "qwen3-32b"),                         # head_dim 128 != D / H_q
    "sweep.csv[01]": ("ok", "llama-3.1-70b-fp8"),                 # the 16-bit checkpoint with --quantization fp8
    "sweep.csv[02]": ("ok", "gpt-oss-120b"),                      # its own MXFP4 experts (quant modes say nvfp4)
    "sweep.csv[03]": ("ok", "minimax-m2.5"),                      # its own fp8 blocks; DP 4, EP 16
    "sweep.csv[04]": ("ok", "qwen3-32b-fp8"),                     # no concurrency in the source: batch_size x DP
    "sweep.csv[05]": ("unknown_model", "Falcon-9B"),
    "sweep.csv[06]": ("invalid_values", "Qwen3-32B"),             # silicon_ttft_ms "n/a"
    "sweep.csv[07]": ("corrupt", None),                           # a truncated row
    "sweep.csv[08]": ("ok", "llama-3.1-70b"),                     # a dense 16-bit model SLIM covers
    "sweep.csv[09]": ("duplicate", "llama-3.1-70b"),              # row 08 measured again
    "sweep.csv[10]": ("ok", "llama-3.1-70b"),                     # row 08's workload at TP 8: no duplicate
    "sweep.csv[11]": ("unknown_model", "Qwen3-32B (fp4)"),        # no entry serves Qwen3-32B at fp4
    "sweep.csv[12]": ("unknown_hardware", "Qwen3-32B"),
    "sweep.csv[13]": ("implausible", "Qwen3-32B"),                # concurrency 8, batch_size x DP = 4
    "sweep.csv[14]": ("unsupported_benchmark", "Qwen3-32B"),      # mode disagg
}


@pytest.fixture(scope="module")
def fixture_runs(catalog) -> pd.DataFrame:
    return ingest_traces(SWEEP, "fixture", catalog)


# ---------------------------------------------------------------- the fixture

def test_every_row_of_the_fixture_is_a_run_with_a_status_and_a_reason(fixture_runs):
    _, report = clean_runs(fixture_runs)
    assert {run: status for run, status in zip(report[col.RUN_ID], report[col.STATUS])} == {
        run: status for run, (status, _) in EXPECTED.items()}
    models = fixture_runs.set_index(col.RUN_ID)[col.MODEL].replace({math.nan: None})
    assert models.to_dict() == {run: model for run, (_, model) in EXPECTED.items()}
    assert report[col.REASON_DETAIL].str.len().gt(0).all()
    assert (fixture_runs[col.TRACE_FORMAT] == FORMAT_SILICON_SWEEP).all()


def test_a_usable_row_holds_the_measured_and_the_derived_values(fixture_runs):
    row = fixture_runs.set_index(col.RUN_ID).loc["sweep.csv[08]"]   # TTFT 100 ms, TPOT 20 ms, 1024 x 1024, N 8
    e2e_s = (100.0 + 1023 * 20.0) / 1000.0                           # 20.56 s
    expected = {
        col.MEAN_TTFT_MS: 100.0, col.MEAN_TPOT_MS: 20.0, col.MEAN_E2EL_MS: 20560.0, col.E2E_LATENCY_S: e2e_s,
        col.REQUEST_THROUGHPUT: 8 / e2e_s, col.TOTAL_TOKEN_THROUGHPUT: 8 * 2048 / e2e_s,   # 796.9 tokens/s
        col.OUTPUT_TOKEN_THROUGHPUT: 8 * 1024 / e2e_s, col.MEAN_BATCH_SIZE: 8, col.MAX_NUM_SEQS: 8,
        col.MAX_CONCURRENCY: 8, col.NUM_PROMPTS: 80, col.COMPLETED: 80, col.FAILED: 0, col.DURATION_S: 80 * e2e_s / 8,
        col.INPUT_LEN_MEAN: 1024, col.OUTPUT_LEN_NOMINAL: 1024, col.TENSOR_PARALLEL: 4, col.PIPELINE_PARALLEL: 1,
        col.DATA_PARALLEL: 1, col.GPUS_PER_SERVER: 4, col.REQUEST_RATE: math.inf,
    }
    for column, value in expected.items():
        assert row[column] == pytest.approx(value, rel=1e-12), column
    assert row[col.TOTAL_TOKEN_THROUGHPUT] == pytest.approx(796.887, rel=1e-5)
    assert (row[col.HARDWARE], row[col.VLLM_VERSION], row[col.BENCHMARK_MODE]) == ("h100-sxm-80gb", "0.12.0", "online")
    assert row[col.LATENCY_SOURCE] == LATENCY_SOURCE_UNSTATED
    assert math.isnan(row[col.EXPERT_PARALLEL]) and math.isnan(row["median_ttft_ms"])   # a dense model; one statistic
    for said in ("unstated statistic (mean or median)", "derived, not measured", "E2E = TTFT + (OSL - 1) x TPOT",
                 f"num_prompts = {PROMPTS_PER_REQUEST_IN_FLIGHT} x N"):
        assert said in row[col.REASON_DETAIL]


def test_the_closed_loop_formulas():
    loop = closed_loop_measurement(ttft_ms=100.0, tpot_ms=20.0, input_len=1024, output_len=1024, in_flight=8)
    assert loop.e2e_ms == 20560.0
    assert loop.request_throughput_per_s == pytest.approx(8 / 20.56)
    assert loop.total_token_throughput_per_s == pytest.approx(8 * 2048 / 20.56)
    assert loop.output_token_throughput_per_s == pytest.approx(8 * 1024 / 20.56)


def test_the_layout_columns_of_an_expert_parallel_row(fixture_runs):
    runs = fixture_runs.set_index(col.RUN_ID)
    minimax = runs.loc["sweep.csv[03]"]   # TP 4, attention DP 4, experts over 16 ranks, 4 requests per rank
    assert [minimax[name] for name in (col.TENSOR_PARALLEL, col.PIPELINE_PARALLEL, col.DATA_PARALLEL,
                                       col.EXPERT_PARALLEL, col.EXPERT_TENSOR_PARALLEL, col.GPUS_PER_SERVER)] == \
        [4, 1, 4, 16, 1, 16]
    assert minimax[col.MAX_NUM_SEQS] == minimax[col.MEAN_BATCH_SIZE] == 16
    assert "about 4 per data-parallel rank" in minimax[col.REASON_DETAIL]
    qwen = runs.loc["sweep.csv[04]"]      # moe_tp_size 0, moe_ep_size 0 on a dense model: no expert layout
    assert math.isnan(qwen[col.EXPERT_PARALLEL]) and math.isnan(qwen[col.EXPERT_TENSOR_PARALLEL])
    assert qwen[col.MAX_NUM_SEQS] == 24 and "N = batch_size x attention_dp_size" in qwen[col.REASON_DETAIL]
    assert pd.isna(runs.loc["sweep.csv[01]", col.VLLM_VERSION])   # backend_version empty: unknown


def test_rows_of_models_beyond_the_dense_formula_carry_every_measured_column(fixture_runs):
    runs = fixture_runs.set_index(col.RUN_ID)
    beyond = ["sweep.csv[00]", "sweep.csv[01]", "sweep.csv[02]", "sweep.csv[03]", "sweep.csv[04]"]
    measured = [col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.TENSOR_PARALLEL, col.GPUS_PER_SERVER,
                col.MAX_NUM_SEQS, col.MEAN_TTFT_MS, col.MEAN_TPOT_MS, col.TOTAL_TOKEN_THROUGHPUT, col.E2E_LATENCY_S,
                col.MEAN_BATCH_SIZE, col.DURATION_S, col.HARDWARE]
    assert (runs.loc[beyond, col.STATUS] == "ok").all()
    assert runs.loc[beyond, measured].notna().all().all()


def test_the_datasets_hardware_map_wins_over_the_formats_own(catalog):
    hardware = load_hardware()
    options = IngestOptions.on(hardware, None, TableLayout(hardware_map={"mystery_gpu": "h100-sxm-80gb",
                                                                         "h100_sxm": "h100-64gb"}))
    runs = ingest_traces(SWEEP, "fixture", catalog, options).set_index(col.RUN_ID)
    assert runs.loc["sweep.csv[12]", col.STATUS] == "ok"
    assert runs.loc["sweep.csv[12]", col.HARDWARE] == "h100-sxm-80gb"
    assert runs.loc["sweep.csv[00]", col.HARDWARE] == "h100-64gb"


def test_a_sweep_lacking_a_column_is_one_corrupt_row_naming_it(catalog, tmp_path):
    header, *rows = SWEEP.read_text().splitlines()
    lacking = tmp_path / "lacking.csv"
    lacking.write_text("\n".join([header.replace(",tp_size,", ",tensor_parallel,"), *rows]) + "\n")
    runs = ingest_traces(lacking, "x", catalog)
    assert runs[[col.RUN_ID, col.STATUS]].values.tolist() == [["lacking.csv", "corrupt"]]
    assert "tp_size" in runs.loc[0, col.REASON_DETAIL]


def test_slim_check_prints_a_line_per_row(capsys):
    assert cli.main(["check", str(SWEEP)]) == 0   # seven rows are usable
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split("\t")[:4] == ["status", "run", "fault_file", "model"] and len(lines) == len(EXPECTED)
    minimax = next(line.split("\t") for line in lines if "[03]" in line)
    assert minimax[:7] == ["ok", "sweep.csv[03]", "-", "minimax-m2.5", "1024", "1024", "16"]


def test_an_slo_judged_on_central_values_of_unstated_statistic_is_warned_about(fixture_runs):
    usable, _ = clean_runs(fixture_runs)
    (warning,) = unstated_statistic_warnings(Slos.of(["mean_tpot_ms=25"]), usable)
    assert warning.code == "latency_statistic_unstated" and "mean_tpot_ms" in warning.message
    assert "mean or median" in warning.message
    assert unstated_statistic_warnings(Slos.of(["mean_tpot_ms=25"]), usable.assign(**{col.LATENCY_SOURCE: "client"})) \
        == ()


def test_runs_of_several_vllm_releases_are_warned_about_as_one_curve(fixture_runs):
    from slim.advisor.warnings import engine_warnings

    usable, _ = clean_runs(fixture_runs)
    one = usable.assign(**{col.VLLM_VERSION: "0.18.0"})
    assert engine_warnings(one) == () and engine_warnings(one.drop(columns=[col.VLLM_VERSION])) == ()
    assert engine_warnings(one.assign(**{col.VLLM_VERSION: None})) == ()        # one engine, release unknown
    mixed = one.copy()
    mixed.loc[mixed.index[0], col.VLLM_VERSION] = "0.11.2"
    mixed.loc[mixed.index[1], col.VLLM_VERSION] = " "                           # blank: no release recorded
    (warning,) = engine_warnings(mixed)
    assert warning.code == "several_vllm_releases"
    assert f"{len(mixed) - 2} on vLLM 0.18.0" in warning.message and "1 on vLLM 0.11.2" in warning.message
    assert "1 recording no release" in warning.message


# ---------------------------------------------------------------- the shared file

@pytest.fixture(scope="module")
def silicon(shared_traces_dir):
    """The shared CSV ingested on the H100 SXM and cleaned: (its path, the runs, the cleaning report)."""
    folder = shared_traces_dir.parent / "aiconfigurator-silicon"
    if not folder.is_dir():
        pytest.skip(f"{folder} not present")
    runs = ingest_traces(folder, NAME, load_architectures(), IngestOptions.on(load_hardware(), "h100-sxm-80gb"))
    return folder / "vllm_h100_silicon.csv", runs, clean_runs(runs)[1]


def test_every_row_of_the_shared_file_is_a_run_in_the_cleaning_report(silicon):
    _, runs, report = silicon
    assert len(runs) == len(report) == 237 and report[col.RUN_ID].is_unique
    assert report[col.RUN_ID].iloc[12] == "vllm_h100_silicon.csv[012]"
    assert report[col.STATUS].value_counts().to_dict() == {"ok": 222, "duplicate": 15}
    assert runs.groupby(col.MODEL).size().to_dict() == {"qwen3-32b": 90, "qwen3-32b-fp8": 3, "llama-3.1-70b-fp8": 45,
                                                       "gpt-oss-120b": 69, "minimax-m2.5": 30}
    assert (runs[col.HARDWARE] == "h100-sxm-80gb").all() and runs[col.TOTAL_TOKEN_THROUGHPUT].notna().all()
    assert runs[col.VLLM_VERSION].fillna("unknown").value_counts().to_dict() == {
        "0.12.0": 93, "0.18.0": 88, "unknown": 50, "0.11.2": 6}


def test_the_layouts_of_the_shared_file(silicon):
    _, runs, _ = silicon
    layouts = runs.groupby([col.MODEL, col.TENSOR_PARALLEL, col.DATA_PARALLEL, col.EXPERT_PARALLEL,
                            col.GPUS_PER_SERVER], dropna=False).size()
    assert {key: count for key, count in layouts.items() if key[0] == "minimax-m2.5"} == {
        ("minimax-m2.5", 4, 1, 4.0, 4.0): 15, ("minimax-m2.5", 4, 4, 16.0, 16.0): 15}
    dense = runs[runs[col.MODEL].isin(["qwen3-32b", "qwen3-32b-fp8", "llama-3.1-70b-fp8"])]
    assert dense[col.EXPERT_PARALLEL].isna().all() and (dense[col.GPUS_PER_SERVER] == dense[col.TENSOR_PARALLEL]).all()
    assert sorted(runs[col.TENSOR_PARALLEL].unique()) == [1, 2, 4, 8] and (runs[col.PIPELINE_PARALLEL] == 1).all()
    assert (runs[col.MAX_NUM_SEQS] == runs[col.MAX_CONCURRENCY]).all()


def test_a_hand_computed_row_of_the_shared_file(silicon):
    _, runs, _ = silicon
    row = runs.iloc[0]   # Qwen3-32B, 1024 x 128, TP 2, 8 in flight: TTFT 154.2481599 ms, TPOT 18.0370482875 ms
    e2e_ms = 154.2481599 + 127 * 18.0370482875                    # 2444.9532924 ms
    assert row[col.MEAN_E2EL_MS] == pytest.approx(2444.9532924, rel=1e-10)
    assert row[col.TOTAL_TOKEN_THROUGHPUT] == pytest.approx(8 * (1024 + 128) / (e2e_ms / 1000), rel=1e-12)
    assert row[col.TOTAL_TOKEN_THROUGHPUT] == pytest.approx(3769.397, rel=1e-6)
    assert (row[col.MODEL], row[col.TENSOR_PARALLEL], row[col.MAX_NUM_SEQS]) == ("qwen3-32b", 2, 8)


def test_only_repeated_measurements_are_left_out(silicon):
    _, _, report = silicon
    repeated = report[report[col.STATUS] == "duplicate"]
    assert set(repeated[col.MODEL]) == {"gpt-oss-120b"}   # measured twice, on two dates, with vLLM 0.18.0


@pytest.mark.parametrize("as_json", [False, True])
def test_slim_check_on_the_shared_file(silicon, capsys, as_json):
    path, _, _ = silicon
    code = cli.main(["check", str(path), *(["--json"] if as_json else [])])
    out = capsys.readouterr().out
    assert code == 0
    if as_json:
        assert json.loads(out)["counts"]["by_status"] == {"ok": 222, "duplicate": 15}
    else:
        header, *lines = out.splitlines()
        assert header.startswith("status\trun") and len(lines) == 237
        assert lines[0].split("\t")[:7] == ["ok", "vllm_h100_silicon.csv[000]", "-",
                                           "qwen3-32b", "1024", "128", "8"]


# ---------------------------------------------------------------- the dataset's config

def _config_of(name: str) -> dict:
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    raw["run_datasets"], raw["default_dataset"] = [name], name
    for section in ("characterisation", "simulator", "batch_scaling", "length_sweeps", "generalisation"):
        raw.pop(section, None)
    return with_catalog_defaults(raw)


def test_the_dataset_as_the_pipeline_reads_it(silicon):
    path, runs, _ = silicon
    dataset = check_config(_config_of(NAME), REPO)[NAME]
    assert dataset.trace_dir.resolve() == path.parent.resolve() and dataset.hardware_key == "h100-sxm-80gb"
    assert dataset.models == ("qwen3-32b", "qwen3-32b-fp8", "llama-3.1-70b-fp8", "gpt-oss-120b", "minimax-m2.5")
    assert set(runs[col.MODEL]) == set(dataset.models)
    piped = ingest_traces(dataset.trace_dir, NAME, load_architectures(), dataset.ingest_options)
    pd.testing.assert_frame_equal(piped, runs)


def test_a_dataset_with_settings_refuses_a_model_the_catalog_cannot_describe(tmp_path):
    settings = tmp_path / "settings.yaml"
    settings.write_text(yaml.safe_dump({"settings": [
        {"name": "s", "label": "S", "train": {"max_num_seqs": [8]}, "validate": {"max_num_seqs": [16]}}]}))
    raw = _config_of("simulated")
    raw["run_datasets"], raw["default_dataset"] = ["mine"], "mine"
    raw["datasets"]["mine"] = {"kind": "real", "trace_dir": str(SWEEP.parent), "hardware": "h100-sxm-80gb",
                               "models": ["llama-3.1-70b", "gpt-oss-120b", "decilm-7b"]}
    assert check_config(raw, REPO)["mine"].models == ("llama-3.1-70b", "gpt-oss-120b", "decilm-7b")
    raw["datasets"]["mine"]["settings"] = str(settings)
    with pytest.raises(ConfigError, match=r"datasets\.mine\.models\[2\] = 'decilm-7b': .*variable grouped-query"):
        check_config(raw, REPO)
