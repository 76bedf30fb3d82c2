"""Unit tests of the parsers of a vLLM run directory's files: client and server logs, cache config,
metrics CSV and benchmark JSON (slim/traces/client_log.py, server_log.py, prometheus_text.py,
metrics_csv.py, results.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from slim.errors import TraceFormatError
from slim.traces.client_log import parse_namespace_line, parse_server_flags
from slim.traces.engine_metrics import mean_running_over_active_window
from slim.traces.metrics_csv import parse_engine_metrics
from slim.traces.prometheus_text import parse_cache_config
from slim.traces.results import FORMAT_BENCHMARK_SERVING, FORMAT_VLLM_BENCH_SERVE, load_benchmark_json
from slim.traces.server_log import (
    classify_failure,
    find_max_num_seqs_in_log,
    find_tensor_parallel_in_log,
    parse_server_log_batch,
)

FORMATS = Path(__file__).resolve().parent / "data" / "formats"

V0_LINE = ("INFO 02-21 19:32:31 metrics.py:360] Avg prompt throughput: 15952.9 tokens/s, Avg generation "
           "throughput: 6328.8 tokens/s, Running: 175 reqs, Swapped: 0 reqs, Pending: 1668 reqs, "
           "GPU KV cache usage: 18.7%, CPU KV cache usage: 0.0%.")
V1_LINE = ("INFO 09-01 10:15:20 [loggers.py:123] Engine 000: Avg prompt throughput: 512.0 tokens/s, "
           "Avg generation throughput: 40.1 tokens/s, Running: 5 reqs, Waiting: 2 reqs, "
           "GPU KV cache usage: 3.1%, Prefix cache hit rate: 0.0%")


# ---------------------------------------------------------------- client Namespace line

def test_namespace_line_with_infinite_request_rate():
    text = ("WARNING 02-21 19:31:51 _custom_ops.py:19] Failed to import from vllm._C\n"
            "Namespace(backend='openai', port=1, num_prompts=2000, request_rate=inf, seed=0, metadata=None, "
            "dataset_name='sharegpt', sharegpt_output_len=130, percentile_metrics='ttft,tpot,itl', "
            "server_args='--port=1 --enable-chunked-prefill --model=/m/opt-1.3b --max-num-seqs=8', "
            "save_result=True, metric_percentiles='99', random_range_ratio=1.0)\n"
            "Server started\n")
    args = parse_namespace_line(text)
    assert args["request_rate"] == "inf"  # not a literal: kept as its source text
    assert args["num_prompts"] == 2000 and args["sharegpt_output_len"] == 130
    assert args["metadata"] is None and args["save_result"] is True
    assert args["random_range_ratio"] == 1.0 and args["dataset_name"] == "sharegpt"
    assert args["server_args"] == "--port=1 --enable-chunked-prefill --model=/m/opt-1.3b --max-num-seqs=8"


def test_namespace_line_absent_or_unparseable_gives_empty_dict():
    assert parse_namespace_line("Server started\nServer terminated\n") == {}
    # The server's own args line holds enum reprs (<ConfigFormat.AUTO: 'auto'>): not Python syntax.
    server_args = "INFO api_server.py:529] args: Namespace(model='/m/x', config_format=<ConfigFormat.AUTO: 'auto'>)"
    assert parse_namespace_line(server_args) == {}
    # An unparseable Namespace line is skipped and a later one is read.
    assert parse_namespace_line(server_args + "\nNamespace(max_num_seqs=4)\n") == {"max_num_seqs": 4}


def test_namespace_line_of_vllm_bench_serve_keeps_lists():
    args = parse_namespace_line("Namespace(input_len=128, metadata=['max_num_seqs=16'], max_concurrency=None)")
    assert args == {"input_len": 128, "metadata": ["max_num_seqs=16"], "max_concurrency": None}


# ---------------------------------------------------------------- server flags

def test_server_flags_with_equals_and_bare_flags():
    flags = parse_server_flags("--port=1 --enable-chunked-prefill --model=/m/opt-1.3b --max-num-seqs=8")
    assert flags == {"port": "1", "enable-chunked-prefill": "", "model": "/m/opt-1.3b", "max-num-seqs": "8"}


def test_bare_flag_does_not_swallow_the_next_flag():
    assert parse_server_flags("--enable-chunked-prefill --max-num-seqs=8") == {
        "enable-chunked-prefill": "", "max-num-seqs": "8"}
    assert parse_server_flags("--disable-log-requests --max-num-seqs 16 --enforce-eager") == {
        "disable-log-requests": "", "max-num-seqs": "16", "enforce-eager": ""}


def test_server_flags_empty():
    assert parse_server_flags("") == {}


# ---------------------------------------------------------------- server log stats lines

def test_stats_line_v0_format():
    metrics = parse_server_log_batch(V0_LINE)
    assert metrics.mean_batch_size == 175.0
    assert metrics.max_kv_cache_usage == pytest.approx(0.187)
    assert metrics.n_active_samples == 1
    assert math.isnan(metrics.num_preemptions)  # the log line does not carry it


def test_stats_line_v1_format():
    metrics = parse_server_log_batch(V1_LINE)
    assert metrics.mean_batch_size == 5.0
    assert metrics.max_kv_cache_usage == pytest.approx(0.031)


def test_stats_lines_mean_over_the_active_window_only():
    idle = V1_LINE.replace("Running: 5 reqs, Waiting: 2 reqs", "Running: 0 reqs, Waiting: 0 reqs")
    queued = V1_LINE.replace("Running: 5 reqs, Waiting: 2 reqs", "Running: 9 reqs, Waiting: 0 reqs")
    text = "\n".join([idle, V1_LINE, queued, "INFO some other line", idle]) + "\n"
    metrics = parse_server_log_batch(text)
    assert metrics.mean_batch_size == pytest.approx(7.0)  # (5 + 9) / 2; idle lines excluded
    assert metrics.n_active_samples == 2


def test_stats_lines_leave_out_the_clients_test_prompt():
    # V0 logs the first step after an idle pause: the client's single test prompt, before its burst.
    test_prompt = V0_LINE.replace("Running: 175", "Running: 1").replace("Pending: 1668", "Pending: 0")
    later = V0_LINE.replace("Running: 175", "Running: 180").replace("Pending: 1668", "Pending: 20")
    metrics = parse_server_log_batch("\n".join([test_prompt, V0_LINE, later]) + "\n")
    assert metrics.mean_batch_size == pytest.approx((175 + 180) / 2) and metrics.n_active_samples == 2
    # A run at cap 1 keeps its lines of one request: only the leading one, before the queue, goes.
    single = [V0_LINE.replace("Running: 175", "Running: 1").replace("Pending: 1668", f"Pending: {n}")
              for n in (0, 40, 0)]
    assert parse_server_log_batch("\n".join(single)).mean_batch_size == 1.0


def test_stats_line_without_kv_usage_and_no_stats_lines():
    metrics = parse_server_log_batch("Running: 3 reqs, Swapped: 0 reqs, Pending: 1 reqs")
    assert metrics.mean_batch_size == 3.0 and math.isnan(metrics.max_kv_cache_usage)
    assert parse_server_log_batch("INFO: Application startup complete.\n") is None


def test_stats_lines_all_idle_give_nan_batch():
    idle = V0_LINE.replace("Running: 175", "Running: 0").replace("Pending: 1668", "Pending: 0")
    metrics = parse_server_log_batch(idle)
    assert math.isnan(metrics.mean_batch_size) and metrics.n_active_samples == 0


def test_mean_running_over_active_window():
    running = np.array([0.0, 2.0, 4.0, 4.0, 0.0, 0.0])
    waiting = np.array([0.0, 6.0, 0.0, 0.0, 3.0, 0.0])
    mean, n_active = mean_running_over_active_window(running, waiting)
    assert (mean, n_active) == (pytest.approx(10.0 / 4), 4)  # sample 4: only waiting, still active
    mean, n_active = mean_running_over_active_window(np.zeros(3), np.zeros(3))
    assert math.isnan(mean) and n_active == 0


# ---------------------------------------------------------------- failure classification

@pytest.mark.parametrize("line, reason", [
    ("OSError: [Errno 98] Address already in use", "server_start_failed"),
    ("ERROR: [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000)", "server_start_failed"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB.", "out_of_memory"),
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
     "out_of_memory"),
    ("ValueError: The model's max seq len (4096) is larger than the maximum number of tokens that can be "
     "stored in KV cache (2048).", "out_of_memory"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "hardware_error"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "hardware_error"),
    ("NVRM: Xid 79, pid=1234, GPU has fallen off the bus", "hardware_error"),
])
def test_classify_failure_recognises_each_cause(line, reason):
    logs = {"server_err.log": f"Traceback (most recent call last):\n  File \"x.py\", line 1\n{line}\n"}
    assert classify_failure(logs) == (reason, f"server_err.log: {line[:200]}")


def test_classify_failure_prefers_the_most_specific_cause():
    # An ECC fault often surfaces as a later OOM or a port left bound: the hardware fault is the cause.
    logs = {"log_1.out": "OSError: [Errno 98] Address already in use",
            "server_err.log": "CUDA out of memory\nuncorrectable ECC error encountered"}
    reason, detail = classify_failure(logs)
    assert reason == "hardware_error"
    assert detail == "server_err.log: uncorrectable ECC error encountered"


def test_classify_failure_unknown_gives_none():
    assert classify_failure({"server_err.log": "RuntimeError: Engine process failed to start."}) is None
    assert classify_failure({}) is None


# ---------------------------------------------------------------- cache config

def test_cache_config(tmp_path):
    path = tmp_path / "cache_config.txt"
    path.write_text(
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "# TYPE vllm:cache_config_info gauge\n"
        'vllm:cache_config_info{block_size="16",gpu_memory_utilization="0.9",num_gpu_blocks="18293",'
        'sliding_window="None"} 1.0\n')
    assert parse_cache_config(path) == {"block_size": "16", "gpu_memory_utilization": "0.9",
                                        "num_gpu_blocks": "18293", "sliding_window": "None"}


def test_cache_config_without_info_line_names_the_file(tmp_path):
    path = tmp_path / "cache_config_x.txt"
    path.write_text("# HELP nothing here\n")
    with pytest.raises(TraceFormatError, match="cache_config_x.txt: no vllm:cache_config_info line"):
        parse_cache_config(path)


# ---------------------------------------------------------------- metrics CSV

def _write(tmp_path: Path, text: str, name: str = "metrics_engine.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_engine_metrics_bare_names(tmp_path):
    path = _write(tmp_path, "time [s],gpu_cache_usage_perc,num_requests_running,num_requests_waiting,"
                            "num_preemptions_total\n0.1,0,0,0,0\n1.1,0.2,4,10,0\n2.1,0.4,8,0,2\n3.1,0.1,2,0,3\n"
                            "4.1,0,0,0,3\n")
    metrics = parse_engine_metrics(path)
    assert metrics.mean_batch_size == pytest.approx(14 / 3)
    assert (metrics.max_kv_cache_usage, metrics.num_preemptions, metrics.n_active_samples) == (0.4, 3.0, 3)


@pytest.mark.parametrize("kv_name", ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"])
def test_engine_metrics_prometheus_names_of_v1_and_v0(tmp_path, kv_name):
    path = _write(tmp_path, f"timestamp,vllm:num_requests_running,vllm:num_requests_waiting,{kv_name},"
                            "vllm:num_preemptions_total\n1,0,0,0.0,0\n2,6,1,0.5,0\n3,4,0,0.6,0\n4,0,0,0.0,0\n")
    metrics = parse_engine_metrics(path)
    assert (metrics.mean_batch_size, metrics.max_kv_cache_usage, metrics.num_preemptions) == (5.0, 0.6, 0.0)


def test_engine_metrics_without_waiting_or_preemption_columns(tmp_path):
    metrics = parse_engine_metrics(_write(tmp_path, "num_requests_running\n0\n3\n5\n0\n"))
    # No counter column: the preemptions are unknown (NaN), never silently 0.
    assert metrics.mean_batch_size == 4.0 and math.isnan(metrics.num_preemptions)
    assert math.isnan(metrics.max_kv_cache_usage)


@pytest.mark.parametrize("text, message", [
    ("", "metrics_engine.csv: empty file"),
    ("time [s],num_requests_running,num_requests_waiting\n", "metrics_engine.csv: header only, no samples"),
    ("time [s],num_requests_waiting\n1,0\n", "metrics_engine.csv: no num_requests_running column"),
    ("num_requests_running,num_requests_waiting\n1,0\n,0\n", "num_requests_running has NaN or negative samples"),
    ("num_requests_running,num_requests_waiting\n1,0\n-1,0\n", "num_requests_running has NaN or negative samples"),
])
def test_engine_metrics_errors_name_the_file_and_problem(tmp_path, text, message):
    with pytest.raises(TraceFormatError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_engine_metrics(_write(tmp_path, text))


# ---------------------------------------------------------------- benchmark JSON

def test_load_benchmark_json_detects_both_formats():
    old = next((FORMATS / "benchmark_serving" / "_8__100").glob("*.json"))
    content, trace_format = load_benchmark_json(old)
    assert trace_format == FORMAT_BENCHMARK_SERVING and content["completed"] == 100
    current = next((FORMATS / "vllm_bench_serve" / "v1_metrics").glob("*.json"))
    content, trace_format = load_benchmark_json(current)
    assert trace_format == FORMAT_VLLM_BENCH_SERVE
    assert content["max_num_seqs"] == "4"  # --metadata values are strings
    for key in ("date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
                "request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
                "total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
                "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
                "max_concurrent_requests", "input_lens", "output_lens", "ttfts", "itls",
                "generated_texts", "errors"):
        assert key in content, key
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p99"):
            assert f"{stat}_{metric}_ms" in content


@pytest.mark.parametrize("text, message", [
    ('{"completed": 10, "dur', "bad.json: not valid JSON"),
    ('[{"completed": 10}]', "bad.json: expected a JSON object, got list"),
    ('{"completed": 10, "duration": 1.0}', "bad.json: missing key\\(s\\) total_input_tokens, total_output_tokens"),
])
def test_load_benchmark_json_errors(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TraceFormatError, match=message):
        load_benchmark_json(path)


def test_load_benchmark_json_accepts_nan_tokens(tmp_path):
    path = tmp_path / "nan.json"
    path.write_text(json.dumps({"completed": 1, "duration": 1.0, "total_input_tokens": 1,
                                "total_output_tokens": 1, "request_throughput": float("nan")}))
    content, _ = load_benchmark_json(path)
    assert math.isnan(content["request_throughput"])


# ---------------------------------------------------------------- max_num_seqs in server logs

def test_find_max_num_seqs_in_v0_and_v1_server_logs():
    assert find_max_num_seqs_in_log("args: Namespace(max_num_batched_tokens=None, max_num_seqs=512, x=1)") == 512
    assert find_max_num_seqs_in_log("non-default args: {'model': 'm', 'max_num_seqs': 16}") == 16
    assert find_max_num_seqs_in_log("args: Namespace(max_num_seqs=None)") is None


def test_find_tensor_parallel_in_v0_and_v1_server_logs():
    assert find_tensor_parallel_in_log("args: Namespace(pipeline_parallel_size=1, tensor_parallel_size=4, x=1)") == 4
    assert find_tensor_parallel_in_log("non-default args: {'model': 'm', 'tensor_parallel_size': 2}") == 2
    assert find_tensor_parallel_in_log("non-default args: {'model': 'm'}") is None   # unset: vLLM's default, 1


# ---------------------------------------------------------------- a large metrics CSV

_PEAK_MEMORY = """
import resource, sys
from pathlib import Path
from slim.traces.metrics_csv import parse_engine_metrics
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
metrics = parse_engine_metrics(Path(sys.argv[1]))
print(metrics.mean_batch_size, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


@pytest.mark.integration
def test_a_large_metrics_csv_is_read_in_bounded_memory(tmp_path):
    """Only the needed columns, as float64, in chunks: about 30 MB of CSV grows the process by far
    less than its size (reading every column as objects took three times the file's size)."""
    import subprocess
    import sys

    rows = 300_000
    path = tmp_path / "metrics_engine.csv"
    running = np.arange(rows) % 64
    with open(path, "w") as handle:
        handle.write("time [s],scheduler_total_time,model_forward_total_time,gpu_cache_usage_perc,"
                     "num_requests_running,num_requests_waiting,num_preemptions_total,request_success_total,"
                     "prompt_tokens_total,generation_tokens_total\n")
        handle.write("".join(f"{i + 0.137:.6f},{i * 0.01:.6f},{i * 0.2:.6f},{r / 2048:.6f},{r}.0,3.0,0.0,{i}.0,"
                             f"{i * 242}.0,{i * 130}.0\n" for i, r in enumerate(running)))
    assert path.stat().st_size > 25e6
    result = subprocess.run([sys.executable, "-c", _PEAK_MEMORY, str(path)], capture_output=True, text=True,
                            check=True, cwd=Path(__file__).resolve().parents[1])
    mean_batch, grown_mb = map(float, result.stdout.split())
    assert mean_batch == pytest.approx(running.mean())
    assert grown_mb < 60, f"reading {path.stat().st_size / 1e6:.0f} MB of CSV grew the process by {grown_mb:.0f} MB"
