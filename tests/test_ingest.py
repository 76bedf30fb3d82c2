"""Ingest classifies every run directory: a hand-made corpus of broken runs, two good
trace formats with hand-computed values, and the real public traces' known counts."""

from __future__ import annotations

import csv
import filecmp
import importlib.util
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from slim import columns as col
from slim.errors import ConfigError
from slim.traces.ingest import REASON_CODES, find_run_dirs, ingest_run_dir, ingest_traces
from slim.traces.results import FORMAT_BENCHMARK_SERVING, FORMAT_VLLM_BENCH_SERVE

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
BROKEN = DATA / "broken_runs"
FORMATS = DATA / "formats"


def _expected_statuses() -> dict[str, str]:
    with open(BROKEN / "EXPECTED.csv", newline="") as handle:
        return {row["run_id"]: row["status"] for row in csv.DictReader(handle)}


EXPECTED = _expected_statuses()


@pytest.fixture(scope="module")
def corpus(catalog) -> pd.DataFrame:
    return ingest_traces(BROKEN, "broken", catalog).set_index(col.RUN_ID)


# ---------------------------------------------------------------- the broken-run corpus

def test_corpus_is_complete_and_committed_in_sync_with_its_generator(tmp_path):
    """EXPECTED.csv names every run directory, and the committed files equal the generator's output."""
    assert len(EXPECTED) >= 20
    assert {p.relative_to(BROKEN).as_posix() for p in find_run_dirs(BROKEN)} == set(EXPECTED)
    assert set(EXPECTED.values()) <= set(REASON_CODES)

    spec = importlib.util.spec_from_file_location("make_corpus", DATA / "make_corpus.py")
    make_corpus = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_corpus)
    regenerated = make_corpus.build_broken_runs(tmp_path / "broken_runs")
    assert dict(regenerated) == EXPECTED
    make_corpus.build_benchmark_serving_format(tmp_path / "formats" / "benchmark_serving")
    make_corpus.build_bench_serve_formats(tmp_path / "formats" / "vllm_bench_serve")
    for generated in (tmp_path / "broken_runs", tmp_path / "formats"):
        for path in generated.rglob("*"):
            if path.is_file():
                committed = DATA / path.relative_to(tmp_path)
                assert committed.is_file(), f"{committed} missing: rerun tests/data/make_corpus.py"
                assert filecmp.cmp(path, committed, shallow=False), f"{committed} differs from its generator"


@pytest.mark.parametrize("run_id", sorted(EXPECTED))
def test_each_corpus_run_gets_its_expected_status(run_id, catalog):
    row = ingest_run_dir(BROKEN / run_id, BROKEN, "broken", catalog)  # must not raise
    # Ingest gives "ok" to both runs of a duplicated pair; cleaning marks the second.
    expected = "ok" if EXPECTED[run_id] == "duplicate" else EXPECTED[run_id]
    assert row[col.STATUS] == expected, row[col.REASON_DETAIL]
    if expected != "ok":
        assert row[col.REASON_DETAIL], "a rejected run must say why"


def test_ingest_of_the_whole_corpus_gives_one_row_per_directory_with_every_column(corpus):
    assert len(corpus) == len(EXPECTED)
    expected = {run_id: "ok" if status == "duplicate" else status for run_id, status in EXPECTED.items()}
    assert corpus[col.STATUS].to_dict() == expected
    assert set(corpus.reset_index().columns) == set(col.RUN_COLUMNS)
    # Every column name slim.columns declares belongs to the runs table or to a named table schema.
    column_names = {value for name, value in vars(col).items() if name.isupper() and isinstance(value, str)}
    schemas = set(col.RUN_COLUMNS) | set(col.PREDICTION_COLUMNS) | set(col.MAPE_COLUMNS) | set(
        col.IDENTIFIABILITY_COLUMNS) | set(col.GENERALISATION_MAPE_COLUMNS) | set(col.SIM_CONSTANTS_COLUMNS) | set(
        col.MAPE_INTERVAL_COLUMNS) | set(col.MAPE_COMPARISON_COLUMNS) | set(col.MAPE_REDUCTION_COLUMNS) | set(
        col.BASELINE_SENSITIVITY_COLUMNS) | set(col.PER_REQUEST_COLUMNS)
    generated = {col.latency_column(statistic, quantity) for statistic in col.LATENCY_STATISTICS
                 for quantity in col.LATENCY_QUANTITIES}
    assert column_names == schemas - (generated - column_names)
    assert generated <= set(col.RUN_COLUMNS)
    assert corpus[col.DATASET].eq("broken").all()


def test_failure_details_name_the_log_file_and_line(corpus):
    assert corpus.loc["port_clash", col.REASON_DETAIL] == (
        "server_err.log: OSError: [Errno 98] Address already in use")
    assert corpus.loc["oom_no_cache_blocks", col.REASON_DETAIL].startswith(
        "server_err.log: ValueError: No available memory for the cache blocks")
    assert "uncorrectable ECC error" in corpus.loc["ecc_error", col.REASON_DETAIL]
    assert "illegal memory access" in corpus.loc["illegal_memory_access", col.REASON_DETAIL]
    assert "log_1000.out" in corpus.loc["unknown_failure", col.REASON_DETAIL]
    # A failed run still says which model it was, from the client's Namespace line.
    assert corpus.loc["port_clash", col.MODEL] == "opt-1.3b"
    assert corpus.loc["unknown_model", col.MODEL] == "gpt-j-6b"


def test_corrupt_details_name_the_file_and_the_problem(corpus):
    json_name = "openai-infqps-opt-1.3b-20250301-100030.json"
    assert corpus.loc["corrupt_truncated_json", col.REASON_DETAIL].startswith(f"{json_name}: not valid JSON")
    assert corpus.loc["corrupt_json_is_list", col.REASON_DETAIL] == f"{json_name}: expected a JSON object, got list"
    assert corpus.loc["corrupt_json_missing_keys", col.REASON_DETAIL] == (
        f"{json_name}: missing key(s) completed, total_output_tokens")
    assert "openai-infqps-opt-1.3b-20250301-120000.json" in corpus.loc["two_json_files", col.REASON_DETAIL]


def test_invalid_and_incomplete_details(corpus):
    assert corpus.loc["nan_throughput", col.REASON_DETAIL].endswith(
        "non-positive, infinite or NaN request_throughput, total_token_throughput")
    assert corpus.loc["negative_duration", col.REASON_DETAIL].endswith("non-positive, infinite or NaN duration")
    assert corpus.loc["completed_is_null", col.REASON_DETAIL].endswith("non-positive, infinite or NaN completed")
    assert corpus.loc["zero_completed", col.REASON_DETAIL] == "completed = 0 of 100 prompts"
    assert corpus.loc["partial_completion", col.REASON_DETAIL] == "completed = 97 of 100 prompts"


def test_batch_size_falls_back_to_the_server_log_when_the_csv_is_unusable(corpus):
    # Stats lines (idle first and last excluded): running 14, 16, 15 -> 15; and 2, 4, 3 -> 3.
    run = corpus.loc["empty_metrics_csv_with_log_stats"]
    assert (run[col.BATCH_SIZE_SOURCE], run[col.MEAN_BATCH_SIZE]) == ("server_log", 15.0)
    assert math.isnan(run[col.NUM_PREEMPTIONS])  # the V0 stats line carries no preemption count
    assert "metrics_engine.csv: empty file" in run[col.REASON_DETAIL]
    # One NaN sample of num_requests_running makes ingest distrust the whole CSV.
    run = corpus.loc["nan_running_samples_with_log_stats"]
    assert (run[col.BATCH_SIZE_SOURCE], run[col.MEAN_BATCH_SIZE]) == ("server_log", 3.0)
    assert "NaN or negative samples" in run[col.REASON_DETAIL]
    assert "NaN or negative samples" in corpus.loc["nan_running_samples_no_log_stats", col.REASON_DETAIL]
    assert corpus.loc["header_only_metrics_csv", col.REASON_DETAIL] == "metrics_engine.csv: header only, no samples"


def test_good_corpus_runs_have_hand_computed_values(corpus):
    # ramp(8): running [0, 4, 8, 8, 8, 2, 0, 0] with waiting > 0 at samples 1..3 -> active 1..5 -> 30/5.
    run = corpus.loc["good_old_format"]
    assert run[col.MEAN_BATCH_SIZE] == pytest.approx(6.0)
    assert run[col.REQUEST_THROUGHPUT] == pytest.approx(10.0)  # 100 requests in 10 s
    assert run[col.E2E_LATENCY_S] == pytest.approx(0.6)
    assert run[col.KV_CAPACITY_TOKENS] == 4096 * 16
    assert corpus.loc["max_num_seqs_after_bare_flag", col.MAX_NUM_SEQS] == 128
    assert corpus.loc["preempted", col.NUM_PREEMPTIONS] == 7
    mixed = corpus.loc["mixed_formats"]
    assert mixed[col.TRACE_FORMAT] == FORMAT_VLLM_BENCH_SERVE
    assert (mixed[col.MODEL], mixed[col.MAX_NUM_SEQS], mixed[col.MEAN_BATCH_SIZE]) == ("opt-1.3b", 2, 1.5)


def test_missing_trace_root_raises_config_error_naming_the_directory(tmp_path, catalog):
    missing = tmp_path / "no_such_traces"
    with pytest.raises(ConfigError, match=str(missing)):
        ingest_traces(missing, "x", catalog)


def test_empty_trace_root_gives_an_empty_table_with_all_columns(tmp_path, catalog):
    frame = ingest_traces(tmp_path, "x", catalog)
    assert frame.empty
    assert col.STATUS in frame.columns and col.MEAN_BATCH_SIZE in frame.columns


# ---------------------------------------------------------------- the two good formats

def test_public_layout_every_column(catalog):
    """formats/benchmark_serving/_8__100, values computed by hand (see make_corpus.py)."""
    frame = ingest_traces(FORMATS / "benchmark_serving", "public", catalog)
    assert len(frame) == 1
    row = frame.iloc[0].to_dict()
    expected = {
        col.DATASET: "public", col.RUN_ID: "_8__100", col.TRACE_FORMAT: FORMAT_BENCHMARK_SERVING,
        col.MODEL: "opt-1.3b", col.MAX_NUM_SEQS: 8, col.TENSOR_PARALLEL: 1, col.NUM_PROMPTS: 100,
        col.INPUT_LEN_MEAN: 24200 / 100, col.OUTPUT_LEN_MEAN: 12800 / 100,
        col.INPUT_LEN_NOMINAL: 242,            # rounded mean (sharegpt fixes only the output)
        col.OUTPUT_LEN_NOMINAL: 130,           # the client's sharegpt_output_len, not the mean 128
        col.COMPLETED: 100, col.DURATION_S: 12.5,
        col.REQUEST_THROUGHPUT: 100 / 12.5, col.TOTAL_TOKEN_THROUGHPUT: (24200 + 12800) / 12.5,
        col.OUTPUT_TOKEN_THROUGHPUT: 12800 / 12.5,
        col.MEAN_TTFT_MS: 400.0 * 12.5, col.MEAN_TPOT_MS: 500.0 * 12.5 / 128, col.MEAN_ITL_MS: 498.0 * 12.5 / 128,
        "median_ttft_ms": 410.0 * 12.5, "std_ttft_ms": 150.0 * 12.5, "p99_ttft_ms": 950.0 * 12.5,
        "median_tpot_ms": 495.0 * 12.5 / 128, "std_tpot_ms": 20.0 * 12.5 / 128, "p99_tpot_ms": 600.0 * 12.5 / 128,
        "median_itl_ms": 480.0 * 12.5 / 128, "std_itl_ms": 300.0 * 12.5 / 128, "p99_itl_ms": 4000.0 * 12.5 / 128,
        col.REQUEST_RATE: math.inf, col.LATENCY_SOURCE: "client",   # request_rate "inf": every prompt at once
        col.MEAN_BATCH_SIZE: (3 + 8 + 8 + 8 + 6) / 5,  # active window: samples with running + waiting > 0
        col.BATCH_SIZE_SOURCE: "metrics_csv",          # the server log's stats lines would give 5.0
        col.MAX_KV_CACHE_USAGE: 0.0081, col.NUM_PREEMPTIONS: 0,
        col.NUM_GPU_BLOCKS: 18293, col.BLOCK_SIZE: 16, col.KV_CAPACITY_TOKENS: 18293 * 16,
        col.E2E_LATENCY_S: ((3 + 8 + 8 + 8 + 6) / 5) / (100 / 12.5),  # Little's law: 0.825 s
        col.STATUS: "ok", col.REASON_DETAIL: "batch size from metrics_csv", col.FAULT_FILE: "",
        col.BENCHMARK_MODE: "online", col.N_MEASUREMENTS: 1,
        col.PIPELINE_PARALLEL: 1, col.DATA_PARALLEL: 1, col.GPUS_PER_SERVER: 1,   # vLLM's defaults, not logged
        col.VLLM_VERSION: "0.6.4",                     # server_out.log: "vLLM API server version 0.6.4"
    }
    for column, value in expected.items():
        if isinstance(value, str):
            assert row[column] == value, column
        else:
            assert row[column] == pytest.approx(value, rel=1e-12), column
    not_recorded = {col.FAILED, col.MAX_CONCURRENCY, col.REQUEST_GOODPUT,       # not in the old JSON, nor is E2EL
                    col.EXPERT_PARALLEL, col.EXPERT_TENSOR_PARALLEL,           # a dense model, no expert layout
                    *(col.latency_column(statistic, "e2el") for statistic in col.LATENCY_STATISTICS)}
    assert all(math.isnan(row[name]) for name in not_recorded)
    assert row[col.HARDWARE] is None and math.isnan(row[col.MEASUREMENT_SPREAD_PCT])   # no accelerator given
    assert set(expected) | not_recorded | {col.HARDWARE, col.MEASUREMENT_SPREAD_PCT} == set(row)
    assert row[col.E2E_LATENCY_S] == pytest.approx(0.825)


@pytest.fixture(scope="module")
def bench_serve(catalog) -> pd.DataFrame:
    return ingest_traces(FORMATS / "vllm_bench_serve", "current", catalog).set_index(col.RUN_ID)


def test_bench_serve_detailed_json_with_v1_metric_names(bench_serve):
    row = bench_serve.loc["v1_metrics"].to_dict()
    expected = {
        col.TRACE_FORMAT: FORMAT_VLLM_BENCH_SERVE, col.MODEL: "opt-125m",  # from facebook/opt-125m
        col.MAX_NUM_SEQS: 4,                                               # --metadata max_num_seqs=4
        col.NUM_PROMPTS: 10, col.COMPLETED: 10, col.FAILED: 0, col.DURATION_S: 4.0,
        col.INPUT_LEN_MEAN: 1000 / 10, col.OUTPUT_LEN_MEAN: 640 / 10,     # from input_lens/output_lens
        col.INPUT_LEN_NOMINAL: 100, col.OUTPUT_LEN_NOMINAL: 64,            # no client log: rounded means
        col.REQUEST_THROUGHPUT: 2.5, col.TOTAL_TOKEN_THROUGHPUT: 1640 / 4, col.OUTPUT_TOKEN_THROUGHPUT: 160,
        col.MEAN_TTFT_MS: 95.0, col.MEAN_TPOT_MS: 20.0, col.MEAN_ITL_MS: 20.0, col.MEAN_E2EL_MS: 1350.0,
        col.MEAN_BATCH_SIZE: 18 / 5, col.BATCH_SIZE_SOURCE: "metrics_csv",
        col.MAX_KV_CACHE_USAGE: 0.3, col.NUM_PREEMPTIONS: 0,
        col.NUM_GPU_BLOCKS: 2000, col.BLOCK_SIZE: 16, col.KV_CAPACITY_TOKENS: 32000,
        col.E2E_LATENCY_S: (18 / 5) / 2.5, col.STATUS: "ok",
    }
    for column, value in expected.items():
        assert row[column] == (value if isinstance(value, str) else pytest.approx(value, rel=1e-12)), column


def test_bench_serve_json_with_v0_metric_names_and_general_length_flags(bench_serve):
    row = bench_serve.loc["v0_metrics_v1_log"]
    assert row[col.MODEL] == "llama-2-7b"                 # meta-llama/Llama-2-7b-hf via its alias
    assert row[col.MAX_NUM_SEQS] == 16
    assert row[col.INPUT_LEN_MEAN] == pytest.approx(126.5)  # totals / completed (no per-request lists)
    # --input-len/--output-len override the random dataset's defaults printed in the Namespace line.
    assert (row[col.INPUT_LEN_NOMINAL], row[col.OUTPUT_LEN_NOMINAL]) == (128, 32)
    assert row[col.BATCH_SIZE_SOURCE] == "metrics_csv"     # the CSV wins over the V1 server log
    assert row[col.MEAN_BATCH_SIZE] == pytest.approx(44 / 3)
    assert row[col.MAX_KV_CACHE_USAGE] == pytest.approx(0.35)  # vllm:gpu_cache_usage_perc
    assert row[col.E2E_LATENCY_S] == pytest.approx((44 / 3) / 4.0)
    assert math.isnan(row[col.KV_CAPACITY_TOKENS])         # no cache_config file
    assert row[col.STATUS] == "ok"


def test_bench_serve_json_with_only_a_v1_server_log(bench_serve):
    # No metrics series: Little's law on the client's latencies, 8 requests x (1350 - 95) ms / 2 s,
    # wins over the server log's few periodic stats lines ((5 + 6 + 7) / 3 = 6, kept in the detail).
    row = bench_serve.loc["v1_log_only"]
    assert (row[col.BATCH_SIZE_SOURCE], row[col.MEAN_BATCH_SIZE]) == ("littles_law", pytest.approx(5.02))
    assert "server_out.log stats lines give 6" in row[col.REASON_DETAIL]
    assert row[col.MAX_KV_CACHE_USAGE] == pytest.approx(0.044)   # still from the stats lines
    assert row[col.MAX_NUM_SEQS] == 8  # metadata
    assert row[col.E2E_LATENCY_S] == pytest.approx(5.02 / 4.0)
    assert row[col.STATUS] == "ok"


def test_a_detailed_result_keeps_every_request_latency(bench_serve):
    # v1_metrics saved --save-detailed: request 0 has TTFT 50 ms, then 59 gaps of 20 ms over 60 tokens.
    row = bench_serve.loc["v1_metrics"]
    assert len(row[col.REQUEST_TTFT_MS]) == 10
    assert row[col.REQUEST_TTFT_MS][0] == pytest.approx(50.0)
    assert row[col.REQUEST_E2EL_MS][0] == pytest.approx(50.0 + 59 * 20.0)
    assert row[col.REQUEST_TPOT_MS][0] == pytest.approx(20.0)           # (E2EL - TTFT) / (60 - 1)
    assert row["p99_e2el_ms"] == 1460.0 and row[col.LATENCY_SOURCE] == "client"
    assert math.isnan(row[col.MAX_CONCURRENCY]) and row[col.REQUEST_RATE] == math.inf


def _bench_serve_result(**latencies) -> dict:
    result = {"endpoint_type": "openai", "model_id": "facebook/opt-125m", "num_prompts": 40, "max_num_seqs": "8",
              "request_rate": 4.0, "max_concurrency": 8, "duration": 10.0, "completed": 40, "failed": 0,
              "total_input_tokens": 4000, "total_output_tokens": 1280, "request_throughput": 4.0,
              "request_goodput": 3.5, "output_throughput": 128.0, "total_token_throughput": 528.0}
    return {**result, **latencies}


def test_every_percentile_a_run_recorded_gets_a_column_of_vllms_name(tmp_path, catalog):
    # vllm bench serve --metric-percentiles 50,90,99.9 --percentile-metrics ttft,tpot,itl,e2el
    stats = {"mean_ttft_ms": 30.0, "median_ttft_ms": 28.0, "p50_ttft_ms": 28.0, "p90_ttft_ms": 41.0,
             "p99.9_ttft_ms": 77.0, "mean_itl_ms": 12.0, "p90_itl_ms": 15.0, "mean_tpot_ms": 12.1,
             "mean_e2el_ms": 420.0, "p90_e2el_ms": 450.0, "mean_batch_size_ms": 1.0}
    run = tmp_path / "cap8"
    run.mkdir()
    (run / "result.json").write_text(json.dumps(_bench_serve_result(**stats)))
    frame = ingest_traces(tmp_path, "percentiles", catalog)
    row = frame.iloc[0]
    assert row["p90_ttft_ms"] == 41.0 and row["p99.9_ttft_ms"] == 77.0 and row["p90_e2el_ms"] == 450.0
    assert math.isnan(row["p99_ttft_ms"])                     # not asked for, not invented
    extra = [name for name in frame.columns if name not in col.RUN_COLUMNS]
    assert extra == ["p50_ttft_ms", "p90_ttft_ms", "p99.9_ttft_ms", "p90_itl_ms", "p90_e2el_ms"]
    assert (row[col.REQUEST_RATE], row[col.MAX_CONCURRENCY], row[col.REQUEST_GOODPUT]) == (4.0, 8, 3.5)
    assert "mean_batch_size_ms" not in frame.columns            # not a latency statistic vLLM names


def _histogram(name: str, bounds: list[float], counts: list[float], total_s: float) -> str:
    lines = [f"# TYPE {name} histogram"]
    for bound, count in zip([*map(str, bounds), "+Inf"], counts):
        lines.append(f'{name}_bucket{{engine="0",le="{bound}",model_name="m"}} {count}')
    lines += [f'{name}_count{{engine="0",model_name="m"}} {counts[-1]}',
              f'{name}_sum{{engine="0",model_name="m"}} {total_s}']
    return "\n".join(lines) + "\n"


def test_the_servers_latency_histograms_fill_what_the_client_did_not_record(tmp_path, catalog):
    run = tmp_path / "cap8"
    run.mkdir()
    (run / "result.json").write_text(json.dumps(_bench_serve_result(mean_tpot_ms=12.0, p99_tpot_ms=14.0)))
    gauges = ('vllm:num_requests_running{engine="0",model_name="m"} %g\n'
              'vllm:num_requests_waiting{engine="0",model_name="m"} 0\n')
    bounds = [0.01, 0.02, 0.05, 0.1]
    # Counters since the server started: 10 TTFTs before the run, 50 after it (40 in the run).
    before = _histogram("vllm:time_to_first_token_seconds", bounds, [10, 10, 10, 10, 10], 0.05)
    after = _histogram("vllm:time_to_first_token_seconds", bounds, [10, 30, 46, 50, 50], 1.05)
    tpot = _histogram("vllm:request_time_per_output_token_seconds", bounds, [0, 40, 40, 40, 40], 0.6)
    (run / "metrics.prom").write_text(gauges % 0 + before + tpot + gauges % 8 + after + tpot)
    row = ingest_traces(tmp_path, "histograms", catalog).iloc[0]
    # 40 TTFTs: 20 in (0.01, 0.02], 16 in (0.02, 0.05], 4 in (0.05, 0.1]; mean (1.05 - 0.05) / 40 s.
    assert row["mean_ttft_ms"] == pytest.approx(25.0)
    assert row["median_ttft_ms"] == pytest.approx(20.0)                    # rank 20 ends the second bucket
    assert row["p90_ttft_ms"] == pytest.approx(50.0)                       # rank 36: the third bucket's end
    assert row["p99_ttft_ms"] == pytest.approx(50.0 + 50.0 * (39.6 - 36) / 4)
    assert row["p99_tpot_ms"] == 14.0                                      # the client's, not the server's
    assert row[col.LATENCY_SOURCE] == "client+prometheus_histogram"


def test_guidellm_percentiles_under_vllms_names(catalog):
    frame = ingest_traces(FORMATS / "guidellm_sweep", "guidellm", catalog)
    row = frame.iloc[0]
    assert row["p90_ttft_ms"] == row["mean_ttft_ms"] and row["p99_e2el_ms"] == pytest.approx(row["mean_e2el_ms"])
    assert row[col.LATENCY_SOURCE] == "guidellm"


# ---------------------------------------------------------------- the real public traces

USABLE_POINTS_PER_OUTPUT_LENGTH = {  # OL 130, 260, 390, 520 (status ok, before cleaning)
    "opt-1.3b": (8, 10, 10, 10),
    "opt-2.7b": (9, 9, 9, 8),
    "llama-2-7b": (9, 8, 8, 7),
}


def test_real_output_length_traces(shared_traces_dir, catalog):
    runs = ingest_traces(shared_traces_dir / "output_length", "output_length", catalog)
    assert len(runs) == 120
    assert runs[col.STATUS].value_counts().to_dict() == {"ok": 105, "preempted": 10, "server_start_failed": 5}
    ok = runs[runs[col.STATUS] == "ok"]
    per_curve = ok.groupby([col.MODEL, col.OUTPUT_LEN_NOMINAL]).size()
    for model, counts in USABLE_POINTS_PER_OUTPUT_LENGTH.items():
        assert tuple(per_curve[model].loc[[130.0, 260.0, 390.0, 520.0]]) == counts, model
    usable = runs[runs[col.STATUS].isin(["ok", "preempted"])]
    assert usable[col.BATCH_SIZE_SOURCE].eq("metrics_csv").all()
    assert (usable[col.MEAN_BATCH_SIZE] <= usable[col.MAX_NUM_SEQS] + 1e-9).all()
    assert (usable[col.E2E_LATENCY_S] > 0).all()


def test_real_background_traces(shared_traces_dir, catalog):
    runs = ingest_traces(shared_traces_dir / "background", "background", catalog)
    assert len(runs) == 40
    assert runs[col.STATUS].value_counts().to_dict() == {"ok": 37, "preempted": 3}
