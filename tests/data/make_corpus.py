"""Write the small, hand-made run directories that the ingest tests read.

Run from anywhere: ``python tests/data/make_corpus.py``. The output is committed
under ``tests/data`` so the tests never depend on running this script; rerun it
only after changing a case here, then review the diff.

* ``broken_runs/<case>/``: one deliberately broken (or deliberately good) run
  per case, mimicking the public-trace layout; ``broken_runs/EXPECTED.csv``
  records ``run_id,status`` where status is the cleaning-report status under the
  default policy (ingest gives ``ok`` to both runs of the duplicated pair; cleaning
  turns the second into ``duplicate``).
* ``formats/benchmark_serving/``: one good run of the public layout (old
  ``benchmark_serving.py`` JSON + ``metrics_engine.csv`` + logs + cache config).
* ``formats/vllm_bench_serve/``: good runs of the current ``vllm bench serve
  --save-result [--save-detailed]`` JSON with V1 and V0 Prometheus metric names
  and a V1 server log.

Every number is synthetic; none is taken from the real traces.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent
BROKEN_ROOT = DATA_DIR / "broken_runs"
FORMATS_ROOT = DATA_DIR / "formats"

OLD_METRICS_HEADER = (
    "time [s],scheduler_total_time,model_forward_total_time,gpu_cache_usage_perc,"
    "num_requests_running,num_requests_waiting,num_preemptions_total,request_success_total,"
    "prompt_tokens_total,generation_tokens_total"
)
NAN = float("nan")


# ---------------------------------------------------------------- file writers

def old_result_json(model_path: str, num_prompts: int, completed: int, duration_s: float,
                    total_input_tokens: int, total_output_tokens: int, date: str) -> dict[str, Any]:
    """Summary JSON of the old ``benchmark_serving.py`` client (request_rate=inf)."""
    out_per_request = total_output_tokens / completed if completed else 1.0
    return {
        "date": date, "backend": "openai", "model_id": model_path, "tokenizer_id": model_path,
        "best_of": 1, "num_prompts": num_prompts, "request_rate": "inf",
        "duration": duration_s, "completed": completed,
        "total_input_tokens": total_input_tokens, "total_output_tokens": total_output_tokens,
        "request_throughput": completed / duration_s,
        "output_throughput": total_output_tokens / duration_s,
        "total_token_throughput": (total_input_tokens + total_output_tokens) / duration_s,
        "mean_ttft_ms": 400.0 * duration_s, "median_ttft_ms": 410.0 * duration_s,
        "std_ttft_ms": 150.0 * duration_s, "p99_ttft_ms": 950.0 * duration_s,
        "mean_tpot_ms": 500.0 * duration_s / out_per_request,
        "median_tpot_ms": 495.0 * duration_s / out_per_request,
        "std_tpot_ms": 20.0 * duration_s / out_per_request,
        "p99_tpot_ms": 600.0 * duration_s / out_per_request,
        "mean_itl_ms": 498.0 * duration_s / out_per_request,
        "median_itl_ms": 480.0 * duration_s / out_per_request,
        "std_itl_ms": 300.0 * duration_s / out_per_request,
        "p99_itl_ms": 4000.0 * duration_s / out_per_request,
    }


def old_metrics_csv(running: list[float], waiting: list[float], kv_usage: list[float],
                    preemptions: list[float] | None = None) -> str:
    """``metrics_engine.csv`` with the public traces' bare column names, one sample a second."""
    preemptions = preemptions or [0.0] * len(running)
    lines = [OLD_METRICS_HEADER]
    success, prompt_tokens, generation_tokens = 0.0, 0.0, 0.0
    for second, (run, wait, kv, preempt) in enumerate(zip(running, waiting, kv_usage, preemptions)):
        generation_tokens += 0.0 if run != run else run  # NaN samples add nothing
        prompt_tokens += 242.0 * min(wait, 4.0) if wait == wait else 0.0
        success += 1.0 if (run == 0 and second > 0) else 0.0
        run_text = "" if run != run else f"{run:.1f}"
        lines.append(f"{0.15 + second:.3f},{0.01 * second:.4f},{0.2 * second:.4f},{kv},"
                     f"{run_text},{wait:.1f},{preempt:.1f},{success:.1f},{prompt_tokens:.1f},"
                     f"{generation_tokens:.1f}")
    return "\n".join(lines) + "\n"


def cache_config_txt(num_gpu_blocks: int, block_size: int = 16) -> str:
    return (
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "# TYPE vllm:cache_config_info gauge\n"
        f'vllm:cache_config_info{{block_size="{block_size}",cache_dtype="auto",'
        'enable_prefix_caching="False",gpu_memory_utilization="0.9",num_cpu_blocks="512",'
        f'num_gpu_blocks="{num_gpu_blocks}",num_gpu_blocks_override="None",'
        'sliding_window="None"} 1.0\n'
    )


def client_namespace(model_path: str, port: int, server_flags: str, num_prompts: int,
                     sharegpt_output_len: int | None, result_dir: str, server_args: str | None = None) -> str:
    """The client's argparse line, as ``benchmark_serving.py`` prints it."""
    server_args = server_args or f"--port={port} --enable-chunked-prefill --model={model_path}{server_flags}"
    return (
        f"Namespace(backend='openai', base_url=None, host='localhost', port={port}, "
        "endpoint='/v1/completions', dataset=None, dataset_name='sharegpt', "
        f"dataset_path='/data/fixed_len.json', model='{model_path}', tokenizer=None, best_of=1, "
        f"use_beam_search=False, num_prompts={num_prompts}, logprobs=None, request_rate=inf, "
        "seed=0, trust_remote_code=False, disable_tqdm=True, profile=False, save_result=True, "
        f"metadata=None, result_dir='{result_dir}', result_filename=None, ignore_eos=False, "
        "percentile_metrics='ttft,tpot,itl', metric_percentiles='99', launch_server=True, "
        f"server_args='{server_args}', "
        "disable_log_stats=False, sonnet_input_len=550, sonnet_output_len=150, "
        f"sharegpt_output_len={sharegpt_output_len}, random_input_len=1024, random_output_len=128, "
        "random_range_ratio=1.0, random_prefix_len=0, hf_output_len=None)"
    )


def client_log(namespace: str, summary: str = "", tail: str = "Server terminated") -> str:
    lines = ["WARNING 03-01 10:00:00 _custom_ops.py:19] Failed to import from vllm._C", namespace]
    if summary:
        lines += ["Server started", "Traffic request rate: inf", summary]
    lines.append(tail)
    return "\n".join(lines) + "\n"


def summary_block(result: dict[str, Any]) -> str:
    return "\n".join([
        "============ Serving Benchmark Result ============",
        f"Successful requests:                     {result['completed']}",
        f"Benchmark duration (s):                  {result['duration']:.2f}",
        f"Total input tokens:                      {result['total_input_tokens']}",
        f"Total generated tokens:                  {result['total_output_tokens']}",
        f"Request throughput (req/s):              {result['request_throughput']:.2f}",
        "==================================================",
    ])


def server_args_line(model_path: str, max_num_seqs: int | None) -> str:
    return (
        "INFO 03-01 10:00:02 api_server.py:529] args: Namespace(host=None, port=40001, "
        f"model='{model_path}', block_size=16, swap_space=4, gpu_memory_utilization=0.9, "
        f"max_num_batched_tokens=None, max_num_seqs={max_num_seqs}, enable_chunked_prefill=True, "
        "disable_log_requests=True)"
    )


def v0_stats_line(second: int, running: int, pending: int, kv_percent: float) -> str:
    return (
        f"INFO 03-01 10:00:{10 + second:02d} metrics.py:351] Avg prompt throughput: "
        f"{242.0 * pending:.1f} tokens/s, Avg generation throughput: {float(running):.1f} tokens/s, "
        f"Running: {running} reqs, Swapped: 0 reqs, Pending: {pending} reqs, "
        f"GPU KV cache usage: {kv_percent:.1f}%, CPU KV cache usage: 0.0%."
    )


def v1_stats_line(second: int, running: int, waiting: int, kv_percent: float) -> str:
    return (
        f"INFO 09-01 10:15:{10 + second:02d} [loggers.py:123] Engine 000: Avg prompt throughput: "
        f"{100.0 * waiting:.1f} tokens/s, Avg generation throughput: {10.0 * running:.1f} tokens/s, "
        f"Running: {running} reqs, Waiting: {waiting} reqs, GPU KV cache usage: {kv_percent:.1f}%, "
        "Prefix cache hit rate: 0.0%"
    )


def server_out_log(model_path: str, max_num_seqs: int | None, stats_lines: list[str],
                   extra: str = "") -> str:
    lines = ["INFO:     Started server process [4242]", "INFO:     Application startup complete.",
             "INFO 03-01 10:00:01 api_server.py:528] vLLM API server version 0.6.4",
             server_args_line(model_path, max_num_seqs)]
    lines += stats_lines
    if extra:
        lines.append(extra)
    lines.append("INFO:     Shutting down")
    return "\n".join(lines) + "\n"


SERVER_ERR_OK = (
    "Loading safetensors checkpoint shards: 100% Completed | 1/1\n"
    "INFO:     Uvicorn running on socket ('0.0.0.0', 40001)\n"
)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_json(path: Path, content: Any) -> None:
    write(path, json.dumps(content) + "\n")


# ---------------------------------------------------------------- one good old run

# A run sends everything at once; batch ramps up, holds at max_num_seqs, drains,
# then the server idles while the client writes its results (the idle tail must
# not count in the mean batch).
def ramp(max_num_seqs: int) -> tuple[list[float], list[float], list[float]]:
    running = [0.0, max_num_seqs / 2, max_num_seqs, max_num_seqs, max_num_seqs, max_num_seqs / 4, 0.0, 0.0]
    waiting = [0.0, 3.0 * max_num_seqs, 2.0 * max_num_seqs, max_num_seqs, 0.0, 0.0, 0.0, 0.0]
    kv = [0.0, 0.05, 0.1, 0.11, 0.1, 0.02, 0.0, 0.0]
    return running, waiting, kv


def write_old_run(run_dir: Path, *, model_path: str = "/m/opt-1.3b", max_num_seqs: int | None = 8,
                  num_prompts: int = 100, completed: int = 100, duration_s: float = 10.0,
                  input_per_request: int = 242, output_per_request: int = 130,
                  sharegpt_output_len: int | None = 130, with_json: bool = True,
                  json_overrides: dict[str, Any] | None = None, metrics: str | None = None,
                  stats_lines: list[str] | None = None, server_extra: str = "",
                  server_err: str = SERVER_ERR_OK, client_tail: str = "Server terminated",
                  server_args: str | None = None, server_log_max_num_seqs: int | None = -1,
                  job: int = 1000, date: str = "20250301-100030") -> None:
    """A complete public-layout run; keyword arguments break one part of it."""
    model_name = model_path.rsplit("/", 1)[-1]
    result = old_result_json(model_path, num_prompts, completed, duration_s,
                             input_per_request * completed, output_per_request * completed, date)
    result.update(json_overrides or {})
    if with_json:
        write_json(run_dir / f"openai-infqps-{model_name}-{date}.json", result)
    if metrics is None:
        metrics = old_metrics_csv(*ramp(max_num_seqs or 8))
    if metrics != "<absent>":
        write(run_dir / "metrics_engine.csv", metrics)
    if with_json:
        write(run_dir / "cache_config.txt", cache_config_txt(4096))
    flags = f" --max-num-seqs={max_num_seqs}" if max_num_seqs is not None else ""
    namespace = client_namespace(model_path, 40001, flags, num_prompts, sharegpt_output_len,
                                 f"results/{run_dir.name}", server_args)
    if server_log_max_num_seqs == -1:
        server_log_max_num_seqs = max_num_seqs
    write(run_dir / f"log_{job}.out",
          client_log(namespace, summary_block(result) if with_json else "", client_tail))
    write(run_dir / f"log_{job}.err", "load SINGULARITY/3.11.5 (PATH)\n")
    write(run_dir / "server_out.log", server_out_log(model_path, server_log_max_num_seqs,
                                                     stats_lines or [], server_extra))
    write(run_dir / "server_err.log", server_err)


def v0_stats(max_num_seqs: int) -> list[str]:
    """Stats lines whose active-window mean running batch is exactly max_num_seqs - 1."""
    return [v0_stats_line(0, 0, 0, 0.0), v0_stats_line(5, max_num_seqs - 2, 40, 9.5),
            v0_stats_line(10, max_num_seqs, 12, 11.0), v0_stats_line(15, max_num_seqs - 1, 0, 10.2),
            v0_stats_line(20, 0, 0, 0.0)]


def traceback(*frames_and_error: str) -> str:
    lines = ["Traceback (most recent call last):"]
    lines += [f'  File "/usr/lib/python3/dist-packages/vllm/{frame}", line 1, in run'
              for frame in frames_and_error[:-1]]
    lines.append(frames_and_error[-1])
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the corpus

def bench_serve_result(model_id: str, num_prompts: int, completed: int, duration_s: float,
                       input_lens: list[int], output_lens: list[int], date: str,
                       metadata: dict[str, str], detailed: bool) -> dict[str, Any]:
    """Result JSON of ``vllm bench serve --save-result [--save-detailed] --metadata k=v``.

    Key order and types follow vllm/benchmarks/serve.py: setup keys, metadata
    (values kept as strings), traffic keys, then the benchmark result.
    """
    successful = [(i, o) for i, o in zip(input_lens, output_lens) if o > 0]
    total_input = sum(i for i, _ in successful)
    total_output = sum(o for _, o in successful)
    result: dict[str, Any] = {
        "date": date, "endpoint_type": "vllm", "backend": "vllm", "label": None,
        "model_id": model_id, "tokenizer_id": model_id, "num_prompts": num_prompts,
    }
    result.update(metadata)
    result.update({"request_rate": "inf", "burstiness": 1.0, "max_concurrency": None})
    result.update({
        "duration": duration_s, "completed": completed, "failed": num_prompts - completed,
        "total_input_tokens": total_input, "total_output_tokens": total_output,
        "request_throughput": completed / duration_s, "request_goodput": None,
        "output_throughput": total_output / duration_s,
        "total_token_throughput": (total_input + total_output) / duration_s,
    })
    if detailed:
        ttfts = [0.05 + 0.01 * k for k in range(num_prompts)]
        result.update({
            "input_lens": input_lens, "output_lens": output_lens, "ttfts": ttfts,
            "itls": [[0.02] * max(o - 1, 0) for o in output_lens],
            "generated_texts": [" word" * min(o, 3) for o in output_lens],
            "errors": ["" if o > 0 else "ServerDisconnectedError" for o in output_lens],
        })
    result.update({"max_output_tokens_per_s": 2.0 * total_output / duration_s,
                   "max_concurrent_requests": num_prompts})
    for metric, (mean, median, std, p99) in {
        "ttft": (95.0, 90.0, 30.0, 140.0), "tpot": (20.0, 20.0, 0.5, 21.0),
        "itl": (20.0, 19.8, 2.0, 30.0), "e2el": (1350.0, 1340.0, 60.0, 1460.0),
    }.items():
        result[f"mean_{metric}_ms"], result[f"median_{metric}_ms"] = mean, median
        result[f"std_{metric}_ms"], result[f"p99_{metric}_ms"] = std, p99
    return result


def build_broken_runs(root: Path) -> list[tuple[str, str]]:
    expected: list[tuple[str, str]] = []

    def case(name: str, status: str) -> Path:
        expected.append((name, status))
        return root / name

    # Good runs (each a distinct configuration, so cleaning sees no accidental duplicate).
    write_old_run(case("good_old_format", "ok"), max_num_seqs=8, stats_lines=v0_stats(8))
    write_old_run(case("duplicate_a", "ok"), max_num_seqs=32, job=1001)
    write_old_run(case("duplicate_b", "duplicate"), max_num_seqs=32, job=1002, date="20250301-110030")
    running, waiting, kv = ramp(64)
    write_old_run(case("preempted", "preempted"), max_num_seqs=64,
                  metrics=old_metrics_csv(running, waiting, kv, [0, 0, 0, 3, 7, 7, 7, 7]))

    # The same configuration measured twice, first preempted: the default policy keeps the
    # second run; with keep_preempted the first is kept and the second is the duplicate.
    running, waiting, kv = ramp(256)
    write_old_run(case("rerun_after_preemption_a", "preempted"), max_num_seqs=256, job=1007,
                  metrics=old_metrics_csv(running, waiting, kv, [0, 0, 2, 5, 5, 5, 5, 5]))
    write_old_run(case("rerun_after_preemption_b", "ok"), max_num_seqs=256, job=1008)
    # max_num_seqs only in the client's server_args, after a bare flag.
    write_old_run(case("max_num_seqs_after_bare_flag", "ok"), max_num_seqs=128,
                  server_args="--port=40001 --enable-chunked-prefill --max-num-seqs=128 --model=/m/opt-1.3b",
                  server_log_max_num_seqs=None)

    # The metrics CSV is unusable; the server log's stats lines may stand in.
    write_old_run(case("empty_metrics_csv_with_log_stats", "ok"), max_num_seqs=16, metrics="",
                  stats_lines=v0_stats(16))
    write_old_run(case("empty_metrics_csv_no_log_stats", "missing_metrics"), max_num_seqs=16,
                  metrics="", output_per_request=260, sharegpt_output_len=260)
    write_old_run(case("header_only_metrics_csv", "missing_metrics"), max_num_seqs=16,
                  metrics=OLD_METRICS_HEADER + "\n", output_per_request=390, sharegpt_output_len=390)
    running, waiting, kv = ramp(4)
    running[3] = NAN  # a missed scrape
    write_old_run(case("nan_running_samples_with_log_stats", "ok"), max_num_seqs=4,
                  metrics=old_metrics_csv(running, waiting, kv), stats_lines=v0_stats(4))
    write_old_run(case("nan_running_samples_no_log_stats", "missing_metrics"), max_num_seqs=2,
                  metrics=old_metrics_csv(running, waiting, kv))

    # Broken benchmark JSON.
    broken = case("corrupt_truncated_json", "corrupt")
    write_old_run(broken, max_num_seqs=8, job=1003)
    json_path = next(broken.glob("*.json"))
    write(json_path, json_path.read_text()[:150])
    broken = case("corrupt_json_is_list", "corrupt")
    write_old_run(broken, max_num_seqs=8, job=1004)
    json_path = next(broken.glob("*.json"))
    write(json_path, "[" + json_path.read_text().strip() + "]\n")
    broken = case("corrupt_json_missing_keys", "corrupt")
    write_old_run(broken, max_num_seqs=8, job=1005)
    json_path = next(broken.glob("*.json"))
    content = json.loads(json_path.read_text())
    del content["completed"], content["total_output_tokens"]
    write_json(json_path, content)
    broken = case("two_json_files", "ambiguous_results")
    write_old_run(broken, max_num_seqs=8, job=1006)
    write_old_run(broken, max_num_seqs=8, job=1006, date="20250301-120000")

    # Values that are present but unusable.
    write_old_run(case("nan_throughput", "invalid_values"), max_num_seqs=8,
                  json_overrides={"request_throughput": NAN, "total_token_throughput": NAN})
    write_old_run(case("negative_duration", "invalid_values"), max_num_seqs=8,
                  json_overrides={"duration": -10.0})
    write_old_run(case("completed_is_null", "invalid_values"), max_num_seqs=8,
                  json_overrides={"completed": None})
    write_old_run(case("zero_completed", "incomplete"), max_num_seqs=8, completed=0,
                  duration_s=600.0)
    write_old_run(case("partial_completion", "incomplete"), max_num_seqs=8, completed=97)
    write_old_run(case("unknown_model", "unknown_model"), model_path="/m/gpt-j-6b", max_num_seqs=8)

    # max_num_seqs cannot be determined from metadata, client args, server log or directory name.
    write_old_run(case("max_num_seqs_unknown", "missing_metadata"), max_num_seqs=None)
    write_old_run(case("max_num_seqs_not_an_integer", "missing_metadata"), max_num_seqs=None,
                  json_overrides={"max_num_seqs": "auto"})

    # No JSON: the logs say why.
    write_old_run(case("oom_cuda_out_of_memory", "out_of_memory"), with_json=False, metrics="<absent>",
                  server_err=traceback("worker/model_runner.py",
                                       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                                       "1.95 GiB. GPU 0 has a total capacity of 63.43 GiB"))
    write_old_run(case("oom_no_cache_blocks", "out_of_memory"), with_json=False, metrics="<absent>",
                  server_err=traceback("engine/llm_engine.py", "worker/worker.py",
                                       "ValueError: No available memory for the cache blocks. Try "
                                       "increasing `gpu_memory_utilization` when initializing the engine."))
    write_old_run(case("oom_max_seq_len_exceeds_kv_cache", "out_of_memory"), with_json=False,
                  metrics="<absent>",
                  server_err=traceback("worker/worker.py",
                                       "ValueError: The model's max seq len (2048) is larger than the "
                                       "maximum number of tokens that can be stored in KV cache (1024)."))
    write_old_run(case("port_clash", "server_start_failed"), with_json=False, metrics="<absent>",
                  server_err=traceback("entrypoints/openai/api_server.py",
                                       "OSError: [Errno 98] Address already in use"),
                  client_tail="Exception: Server did not start on time\nServer terminated")
    write_old_run(case("ecc_error", "hardware_error"), with_json=False, metrics="<absent>",
                  server_err=traceback("worker/model_runner.py",
                                       "RuntimeError: CUDA error: uncorrectable ECC error encountered"))
    write_old_run(case("illegal_memory_access", "hardware_error"), with_json=False, metrics="<absent>",
                  server_err=traceback("attention/backends/flash_attn.py",
                                       "RuntimeError: CUDA error: an illegal memory access was encountered"))
    write_old_run(case("unknown_failure", "failed_unknown"), with_json=False, metrics="<absent>",
                  server_err=traceback("engine/multiprocessing/engine.py",
                                       "RuntimeError: Engine process failed to start. See stack trace "
                                       "for the root cause."),
                  client_tail="Exception: Server did not start on time\nServer terminated")

    # Mixed formats: a current `vllm bench serve` JSON beside the old-style metrics CSV.
    mixed = case("mixed_formats", "ok")
    write_json(mixed / "vllm-infqps-opt-1.3b-20250901-101500.json",
               bench_serve_result("facebook/opt-1.3b", 6, 6, 3.0, [200] * 6, [50] * 6,
                                  "20250901-101500", {"max_num_seqs": "2"}, detailed=False))
    write(mixed / "metrics_engine.csv", old_metrics_csv(*ramp(2)))
    write(mixed / "server_out.log", server_out_log("facebook/opt-1.3b", 2, []))
    return expected


# ---------------------------------------------------------------- good format fixtures

def build_benchmark_serving_format(root: Path) -> None:
    """The public layout, values chosen so every ingested column is checkable by hand.

    Metrics CSV: running [0, 3, 8, 8, 8, 6, 0, 0], waiting [0, 5, 4, 1, 0, 0, 0, 0]
    -> active window = samples 1..5 -> mean batch 33/5 = 6.6. JSON: 100 of 100
    requests in 12.5 s -> 8 req/s -> e2e = 6.6 / 8 = 0.825 s. Tokens: 24200 in,
    12800 out -> means 242 and 128, nominal output 130 (client's sharegpt_output_len).
    Cache: 18293 blocks x 16 = 292688 tokens. The server log's stats lines give a
    different mean (5.0) to show the CSV wins.
    """
    run_dir = root / "_8__100"
    model_path = "/m/opt-1.3b"
    result = old_result_json(model_path, 100, 100, 12.5, 24200, 12800, "20250301-093000")
    write_json(run_dir / "openai-infqps-opt-1.3b-20250301-093000.json", result)
    write(run_dir / "metrics_engine.csv",
          old_metrics_csv([0, 3, 8, 8, 8, 6, 0, 0], [0, 5, 4, 1, 0, 0, 0, 0],
                          [0.0, 0.004, 0.0072, 0.0081, 0.0075, 0.0031, 0.0, 0.0]))
    write(run_dir / "cache_config.txt", cache_config_txt(18293, 16))
    namespace = client_namespace(model_path, 1, " --max-num-seqs=8", 100, 130, "results/_8__100")
    write(run_dir / "log_2000.out", client_log(namespace, summary_block(result)))
    write(run_dir / "log_2000.err", "load SINGULARITY/3.11.5 (PATH)\n")
    write(run_dir / "server_out.log", server_out_log(
        model_path, 8, [v0_stats_line(0, 2, 6, 0.3), v0_stats_line(5, 8, 2, 0.8),
                        v0_stats_line(10, 5, 0, 0.6), v0_stats_line(15, 0, 0, 0.0)]))
    write(run_dir / "server_err.log", SERVER_ERR_OK)


def build_bench_serve_formats(root: Path) -> None:
    """Three good runs of the current client.

    * ``v1_metrics``: detailed JSON, opt-125m via its Hugging Face id, max_num_seqs=4 by
      ``--metadata``; CSV with V1 names: running [0, 4, 4, 4, 4, 2, 0], waiting
      [0, 6, 2, 0, 0, 0, 0] -> mean 18/5 = 3.6; 10/10 requests in 4 s -> 2.5 req/s
      -> e2e 1.44 s; lengths from the per-request lists: means 100 and 64.
      Cache 2000 blocks x 16.
    * ``v0_metrics_v1_log``: plain JSON (no per-request lists) for Llama-2-7B,
      max_num_seqs=16; CSV with V0 names: running [0, 16, 16, 12, 0], waiting
      [0, 4, 0, 0, 0] -> mean 44/3; input lengths 125 and 128 (mean 126.5, nominal 128
      from the general ``--input-len 128 --output-len 32`` in the client Namespace,
      not its default random_input_len=1024); the V1 server log is
      present but the CSV wins. No cache config.
    * ``v1_log_only``: no metrics CSV; the V1 server log's stats lines give
      running [5, 6, 7] over the active window (idle lines excluded) -> mean 6.
    """
    run_dir = root / "v1_metrics"
    input_lens = [120, 80, 100, 95, 105, 110, 90, 100, 100, 100]
    output_lens = [60, 70, 64, 64, 58, 66, 64, 64, 62, 68]
    write_json(run_dir / "vllm-infqps-opt-125m-20250901-101500.json",
               bench_serve_result("facebook/opt-125m", 10, 10, 4.0, input_lens, output_lens,
                                  "20250901-101500", {"max_num_seqs": "4"}, detailed=True))
    rows = ["timestamp,vllm:num_requests_running,vllm:num_requests_waiting,"
            "vllm:kv_cache_usage_perc,vllm:num_preemptions_total"]
    for second, (run, wait, kv) in enumerate(zip([0, 4, 4, 4, 4, 2, 0], [0, 6, 2, 0, 0, 0, 0],
                                                 [0.0, 0.1, 0.2, 0.25, 0.3, 0.12, 0.0])):
        rows.append(f"{1756721700 + second},{run},{wait},{kv},0")
    write(run_dir / "metrics_engine.csv", "\n".join(rows) + "\n")
    write(run_dir / "cache_config.txt", cache_config_txt(2000, 16))

    run_dir = root / "v0_metrics_v1_log"
    write_json(run_dir / "vllm-infqps-llama-2-7b-hf-20250902-080000.json",
               bench_serve_result("meta-llama/Llama-2-7b-hf", 20, 20, 5.0, [125] * 10 + [128] * 10,
                                  [32] * 20, "20250902-080000", {"max_num_seqs": "16"}, detailed=False))
    rows = ["time,vllm:num_requests_running,vllm:num_requests_waiting,vllm:gpu_cache_usage_perc,"
            "vllm:num_preemptions_total"]
    for second, (run, wait, kv) in enumerate(zip([0, 16, 16, 12, 0], [0, 4, 0, 0, 0],
                                                 [0.0, 0.3, 0.35, 0.2, 0.0])):
        rows.append(f"{second}.0,{run},{wait},{kv},0")
    write(run_dir / "metrics_engine.csv", "\n".join(rows) + "\n")
    write(run_dir / "log_3000.out", client_log(
        "Namespace(subparser='bench', bench_type='serve', seed=0, num_prompts=20, "
        "dataset_name='random', dataset_path=None, input_len=128, output_len=32, "
        "random_input_len=1024, random_output_len=128, random_range_ratio=0.0, "
        "model='meta-llama/Llama-2-7b-hf', request_rate=inf, burstiness=1.0, max_concurrency=None, "
        "save_result=True, save_detailed=False, metadata=['max_num_seqs=16'])", tail=""))
    write(run_dir / "server_out.log", "\n".join([
        "INFO 09-02 07:59:50 [api_server.py:1805] vLLM API server version 0.10.1",
        "INFO 09-02 07:59:50 [utils.py:326] non-default args: {'model': 'meta-llama/Llama-2-7b-hf', "
        "'max_num_seqs': 16}",
        v1_stats_line(0, 16, 4, 30.5), v1_stats_line(10, 12, 0, 20.1), v1_stats_line(20, 0, 0, 0.0),
    ]) + "\n")

    run_dir = root / "v1_log_only"
    write_json(run_dir / "vllm-infqps-opt-350m-20250903-080000.json",
               bench_serve_result("facebook/opt-350m", 8, 8, 2.0, [64] * 8, [16] * 8,
                                  "20250903-080000", {"max_num_seqs": "8"}, detailed=False))
    write(run_dir / "server_out.log", "\n".join([
        "INFO 09-03 07:59:50 [utils.py:326] non-default args: {'model': 'facebook/opt-350m', "
        "'max_num_seqs': 8}",
        v1_stats_line(0, 0, 0, 0.0), v1_stats_line(10, 5, 2, 3.1), v1_stats_line(20, 6, 0, 3.9),
        v1_stats_line(30, 7, 0, 4.4), v1_stats_line(40, 0, 0, 0.0),
    ]) + "\n")


def main() -> None:
    # Only the folders written here: formats/ also holds the layouts of make_layouts.py.
    for folder in (BROKEN_ROOT, FORMATS_ROOT / "benchmark_serving", FORMATS_ROOT / "vllm_bench_serve"):
        if folder.exists():
            shutil.rmtree(folder)
    expected = build_broken_runs(BROKEN_ROOT)
    write(BROKEN_ROOT / "EXPECTED.csv",
          "run_id,status\n" + "".join(f"{run_id},{status}\n" for run_id, status in sorted(expected)))
    build_benchmark_serving_format(FORMATS_ROOT / "benchmark_serving")
    build_bench_serve_formats(FORMATS_ROOT / "vllm_bench_serve")


if __name__ == "__main__":
    main()
