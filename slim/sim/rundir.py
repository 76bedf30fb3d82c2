"""Write a simulated run in the file layout of the public vLLM traces.

``<root>/<sweep>/<model>/_<B>__<N>/`` receives ``openai-infqps-<model>-<date>.json``,
``metrics_engine.csv``, ``cache_config.txt``, ``log_<job>.out`` / ``.err``,
``server_out.log`` / ``server_err.log`` (real vLLM V0 text) and the simulator-only
``sim_phase_times.yaml`` (prefill vs decode time; vLLM writes nothing like it, and it
is YAML so that the run directory still holds exactly one ``*.json``). A run whose
memory plan fails gets vLLM's startup error in ``server_err.log`` and no JSON.
Every byte is a function of the inputs: dates are a fixed fake date plus simulated time.
"""

from __future__ import annotations

import datetime as dt
import json
import zlib
from pathlib import Path

import numpy as np
import yaml

from slim.sim.metrics import METRICS_COLUMNS
from slim.sim.result import SimResult
from slim.specs.hardware import GIB

FAKE_DATE = dt.datetime(2025, 1, 1, 0, 0, 0)
VLLM_VERSION = "0.5.2.dev1210+g6f078ea3c"
MODEL_ROOT = "/models"
LOG_INTERVAL_S = 5.0
SERVER_START_OFFSET_S = 25.0   # server log header precedes the first scrape (model load, graphs)
PHASE_FILE = "sim_phase_times.yaml"
CUDA_CONTEXT_GIB = 0.66       # initial_memory_usage - weights in the real logs (cosmetic log field)


def run_dir_path(root: str | Path, sweep: str, model: str, max_num_seqs: int, num_prompts: int) -> Path:
    return Path(root) / sweep / model / f"_{max_num_seqs}__{num_prompts}"


def _stamp(seconds: float) -> str:
    return (FAKE_DATE + dt.timedelta(seconds=float(seconds))).strftime("%m-%d %H:%M:%S")


def _job_id(sweep: str, result: SimResult) -> int:
    key = (f"{sweep}/{result.model}/{result.input_len}/{result.output_len}/{result.max_num_seqs}/"
           f"{result.tensor_parallel}")
    return 16_000_000 + zlib.crc32(key.encode()) % 1_000_000


def _port(job: int) -> int:
    return 30000 + job % 30000


def _server_args(result: SimResult, port: int) -> str:
    args = (f"--port={port} --enable-chunked-prefill --disable-log-requests --model={MODEL_ROOT}/{result.model} "
            f"--max-num-seqs={result.max_num_seqs}")
    if result.tensor_parallel > 1:
        args += f" --tensor-parallel-size={result.tensor_parallel}"
    return args


def _client_namespace(result: SimResult, sweep: str, port: int) -> str:
    model_path = f"{MODEL_ROOT}/{result.model}"
    return (
        f"Namespace(backend='openai', base_url=None, host='localhost', port={port}, endpoint='/v1/completions', "
        f"dataset=None, dataset_name='random', dataset_path=None, model='{model_path}', tokenizer=None, best_of=1, "
        f"use_beam_search=False, num_prompts={result.num_prompts}, logprobs=None, request_rate=inf, "
        f"seed={result.seed}, trust_remote_code=False, disable_tqdm=True, profile=False, save_result=True, "
        f"metadata=None, result_dir='{sweep}/{result.model}/_{result.max_num_seqs}__{result.num_prompts}', "
        f"result_filename=None, ignore_eos=True, percentile_metrics='ttft,tpot,itl', metric_percentiles='99', "
        f"launch_server=True, server_args='{_server_args(result, port)}', launch_server_with_nsight=False, "
        f"disable_log_stats=False, sonnet_input_len=550, sonnet_output_len=150, sonnet_prefix_len=200, "
        f"sharegpt_output_len=None, random_input_len={result.input_len}, random_output_len={result.output_len}, "
        f"random_range_ratio=1.0, random_prefix_len=0, hf_subset=None, hf_split=None, hf_output_len=None)"
    )


def _server_namespace(result: SimResult, port: int) -> str:
    return (
        f"Namespace(host=None, port={port}, uvicorn_log_level='info', allow_credentials=False, "
        f"allowed_origins=['*'], allowed_methods=['*'], allowed_headers=['*'], api_key=None, lora_modules=None, "
        f"model='{MODEL_ROOT}/{result.model}', tokenizer=None, dtype='auto', kv_cache_dtype='auto', "
        f"max_model_len=None, pipeline_parallel_size=1, tensor_parallel_size={result.tensor_parallel}, "
        f"block_size={result.plan.block_size}, enable_prefix_caching=False, seed=0, swap_space=4, cpu_offload_gb=0, "
        f"gpu_memory_utilization=0.9, num_gpu_blocks_override=None, max_num_batched_tokens=None, "
        f"max_num_seqs={result.max_num_seqs}, max_logprobs=20, disable_log_stats=False, quantization=None, "
        f"enforce_eager=False, max_seq_len_to_capture=8192, num_scheduler_steps=1, scheduler_delay_factor=0.0, "
        f"enable_chunked_prefill=True, preemption_mode=None, served_model_name=None, "
        f"disable_async_output_proc=False, scheduling_policy='fcfs', disable_log_requests=True)"
    )


def _header_lines(result: SimResult, port: int, budget_tokens: int) -> tuple[list[str], float]:
    plan = result.plan
    at = _stamp(0)
    weights_gib = plan.weights_bytes_per_rank / GIB
    lines = [
        f"INFO {at} api_server.py:528] vLLM API server version {VLLM_VERSION}",
        f"INFO {at} api_server.py:529] args: {_server_namespace(result, port)}",
        f"INFO {at} config.py:1021] Chunked prefill is enabled with max_num_batched_tokens={budget_tokens}.",
        f"INFO {at} llm_engine.py:237] Initializing an LLM engine (v{VLLM_VERSION}) with config: "
        f"model='{MODEL_ROOT}/{result.model}', tensor_parallel_size={result.tensor_parallel}, "
        f"max_seq_len={plan.max_model_len}, enable_chunked_prefill=True, seed=0",
        f"INFO {at} model_runner.py:1056] Starting to load model {MODEL_ROOT}/{result.model}...",
    ]
    return lines, weights_gib


def _memory_line(result: SimResult) -> str:
    plan = result.plan
    return (f"INFO {_stamp(1)} worker.py:262] Memory profiling results: "
            f"total_gpu_memory={plan.total_gpu_memory_bytes / GIB:.2f}GiB "
            f"initial_memory_usage={(plan.weights_bytes_per_rank / GIB) + CUDA_CONTEXT_GIB:.2f}GiB "
            f"peak_torch_memory={plan.peak_torch_bytes / GIB:.2f}GiB non_torch_memory=0.10GiB "
            f"kv_cache_size={plan.kv_cache_bytes / GIB:.2f}GiB gpu_memory_utilization=0.90")


def _cpu_blocks(result: SimResult, block_bytes: float) -> int:
    return int(4 * GIB // block_bytes)


def _oom_texts(result: SimResult, port: int, budget_tokens: int) -> tuple[str, str]:
    plan = result.plan
    lines, weights_gib = _header_lines(result, port, budget_tokens)
    trace_head = (
        "Traceback (most recent call last):\n"
        '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/entrypoints/openai/api_server.py", '
        'line 585, in <module>\n'
        "    uvloop.run(run_server(args))\n"
    )
    if plan.failure == "cuda_oom":
        error = (f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 500.00 MiB. GPU 0 has a total "
                 f"capacity of {plan.total_gpu_memory_bytes / GIB:.2f} GiB of which 412.00 MiB is free. "
                 f"Process has {plan.total_gpu_memory_bytes / GIB - 0.4:.2f} GiB memory in use.")
    else:
        lines.append(f"INFO {_stamp(1)} model_runner.py:1067] Loading model weights took {weights_gib:.4f} GB")
        lines.append(_memory_line(result))
        if plan.failure == "no_cache_memory":
            error = ("ValueError: No available memory for the cache blocks. Try increasing "
                     "`gpu_memory_utilization` when initializing the engine.")
        else:
            error = (f"ValueError: The model's max seq len ({plan.max_model_len}) is larger than the maximum number "
                     f"of tokens that can be stored in KV cache ({plan.kv_capacity_tokens}). Try increasing "
                     "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.")
    server_out = "\n".join(lines) + "\n"
    server_err = trace_head + error + "\n"
    return server_out, server_err


def _metrics_csv(result: SimResult) -> str:
    """The scraped samples as ``metrics_engine.csv`` (values as Python's float repr, like the
    public traces; the first scrape, before the server counts anything, is all zeros)."""
    columns = [result.samples[name].to_numpy(dtype=float).tolist() for name in METRICS_COLUMNS]
    success_col = METRICS_COLUMNS.index("request_success_total")
    text_columns = [list(map(repr, values)) for values in columns]
    text_columns[success_col] = ["0" if value == 0 else text for value, text in
                                 zip(columns[success_col], text_columns[success_col])]
    rows = [",".join(METRICS_COLUMNS)]
    for index, fields in enumerate(zip(*text_columns)):
        if index == 0:
            rows.append(f"{fields[0]}," + ",".join("0" for _ in METRICS_COLUMNS[1:]))
        else:
            rows.append(",".join(fields))
    return "\n".join(rows) + "\n"


def _stats_lines(result: SimResult) -> list[str]:
    """vLLM's periodic ``metrics.py`` lines, every 5 s from the 1-s samples."""
    samples = result.samples
    # Plain float lists: indexing a DataFrame row by row costs far more than the formatting.
    times = samples["time [s]"].to_numpy(dtype=float).tolist()
    prompt = samples["prompt_tokens_total"].to_numpy(dtype=float).tolist()
    generation = samples["generation_tokens_total"].to_numpy(dtype=float).tolist()
    running = samples["num_requests_running"].to_numpy(dtype=float).tolist()
    waiting = samples["num_requests_waiting"].to_numpy(dtype=float).tolist()
    usage = samples["gpu_cache_usage_perc"].to_numpy(dtype=float).tolist()
    lines, last = [], None
    start_index = int(np.searchsorted(times, result.benchmark_start_s - 2 * LOG_INTERVAL_S))
    for i in range(max(start_index, 1), len(times), int(LOG_INTERVAL_S)):
        if last is not None:
            elapsed = times[i] - times[last]
            prompt_rate = (prompt[i] - prompt[last]) / elapsed
            gen_rate = (generation[i] - generation[last]) / elapsed
            lines.append(
                f"INFO {_stamp(SERVER_START_OFFSET_S + times[i])} metrics.py:360] Avg prompt throughput: "
                f"{prompt_rate:.1f} tokens/s, Avg generation throughput: {gen_rate:.1f} tokens/s, "
                f"Running: {int(running[i])} reqs, Swapped: 0 reqs, "
                f"Pending: {int(waiting[i])} reqs, "
                f"GPU KV cache usage: {100 * usage[i]:.1f}%, CPU KV cache usage: 0.0%.")
        last = i
        if running[i] + waiting[i] == 0 and times[i] > result.benchmark_start_s + result.duration_s:
            break
    return lines


def _preemption_lines(result: SimResult) -> list[str]:
    samples = result.samples
    lines = []
    counts = samples["num_preemptions_total"].to_numpy()
    times = samples["time [s]"].to_numpy()
    for total in range(1, result.num_preemptions + 1, 50):
        index = min(int(np.searchsorted(counts, total)), len(times) - 1)
        lines.append(
            f"WARNING {_stamp(SERVER_START_OFFSET_S + times[index])} scheduler.py:1483] Sequence group "
            f"cmpl-{total:032x}-0 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV "
            "cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or "
            f"tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption={total}")
    return lines


def _client_summary(summary: dict) -> str:
    return "\n".join([
        "============ Serving Benchmark Result ============",
        f"{'Successful requests:':<40} {summary['completed']:<10}",
        f"{'Benchmark duration (s):':<40} {summary['duration']:<10.2f}",
        f"{'Total input tokens:':<40} {summary['total_input_tokens']:<10}",
        f"{'Total generated tokens:':<40} {summary['total_output_tokens']:<10}",
        f"{'Request throughput (req/s):':<40} {summary['request_throughput']:<10.2f}",
        f"{'Output token throughput (tok/s):':<40} {summary['output_throughput']:<10.2f}",
        f"{'Total Token throughput (tok/s):':<40} {summary['total_token_throughput']:<10.2f}",
        "{s:{c}^{n}}".format(s="Time to First Token", n=50, c="-"),
        f"{'Mean TTFT (ms):':<40} {summary['mean_ttft_ms']:<10.2f}",
        f"{'Median TTFT (ms):':<40} {summary['median_ttft_ms']:<10.2f}",
        f"{'P99 TTFT (ms):':<40} {summary['p99_ttft_ms']:<10.2f}",
        "{s:{c}^{n}}".format(s="Time per Output Token (excl. 1st token)", n=50, c="-"),
        f"{'Mean TPOT (ms):':<40} {summary['mean_tpot_ms']:<10.2f}",
        f"{'Median TPOT (ms):':<40} {summary['median_tpot_ms']:<10.2f}",
        f"{'P99 TPOT (ms):':<40} {summary['p99_tpot_ms']:<10.2f}",
        "{s:{c}^{n}}".format(s="Inter-token Latency", n=50, c="-"),
        f"{'Mean ITL (ms):':<40} {summary['mean_itl_ms']:<10.2f}",
        f"{'Median ITL (ms):':<40} {summary['median_itl_ms']:<10.2f}",
        f"{'P99 ITL (ms):':<40} {summary['p99_itl_ms']:<10.2f}",
        "=" * 50,
    ])


_SERVER_ERR_OK = """INFO:     Started server process [{pid}]
INFO:     Waiting for application startup.
INFO:     Application startup complete.
INFO:     Uvicorn running on socket ('0.0.0.0', {port}) (Press CTRL+C to quit)
INFO:     Shutting down
INFO:     Waiting for application shutdown.
INFO:     Application shutdown complete.
"""

_CLIENT_ERR = """load SINGULARITY/3.11.5 (PATH)
"""


def write_run_dir(result: SimResult, root: str | Path, sweep: str, budget_tokens: int = 512) -> Path:
    """Write one simulated run under ``root/sweep/model/_B__N/`` and return that directory."""
    run_dir = run_dir_path(root, sweep, result.model, result.max_num_seqs, result.num_prompts)
    run_dir.mkdir(parents=True, exist_ok=True)
    job = _job_id(sweep, result)
    port = _port(job)
    client_lines = [_client_namespace(result, sweep, port)]
    if result.status != "ok":
        server_out, server_err = _oom_texts(result, port, budget_tokens)
        (run_dir / "server_out.log").write_text(server_out)
        (run_dir / "server_err.log").write_text(server_err)
        client_lines.append("Server terminated")
        (run_dir / f"log_{job}.out").write_text("\n".join(client_lines) + "\n")
        (run_dir / f"log_{job}.err").write_text(
            _CLIENT_ERR + "Traceback (most recent call last):\n"
            '  File "benchmark_serving_with_metrics.py", line 733, in main\n'
            '    raise Exception("Server did not start on time")\n'
            "Exception: Server did not start on time\n")
        return run_dir

    plan = result.plan
    summary = result.benchmark_summary()
    model_path = f"{MODEL_ROOT}/{result.model}"
    date = FAKE_DATE.strftime("%Y%m%d-%H%M%S")
    content = {"date": date, "backend": "openai", "model_id": model_path, "tokenizer_id": model_path,
               "best_of": 1, "num_prompts": result.num_prompts, "request_rate": "inf", **summary}
    (run_dir / f"openai-infqps-{result.model}-{date}.json").write_text(json.dumps(content))
    (run_dir / "metrics_engine.csv").write_text(_metrics_csv(result))
    block_bytes = plan.kv_cache_bytes / max(plan.num_gpu_blocks, 1)
    (run_dir / "cache_config.txt").write_text(
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "# TYPE vllm:cache_config_info gauge\n"
        f'vllm:cache_config_info{{block_size="{plan.block_size}",cache_dtype="auto",cpu_offload_gb="0",'
        f'enable_prefix_caching="False",gpu_memory_utilization="0.9",is_attention_free="False",'
        f'num_cpu_blocks="{_cpu_blocks(result, block_bytes)}",num_gpu_blocks="{plan.num_gpu_blocks}",'
        f'num_gpu_blocks_override="None",sliding_window="None",swap_space_bytes="4294967296"}} 1.0\n')
    client_lines += ["Server started", "Starting initial single prompt test run...",
                     "Initial test run completed. Starting main benchmark run...", "Traffic request rate: inf",
                     _client_summary(summary), "Concurrent checker terminated", "Server terminated"]
    (run_dir / f"log_{job}.out").write_text("\n".join(client_lines) + "\n")
    (run_dir / f"log_{job}.err").write_text(_CLIENT_ERR)
    lines, weights_gib = _header_lines(result, port, budget_tokens)
    lines += [
        f"INFO {_stamp(1)} model_runner.py:1067] Loading model weights took {weights_gib:.4f} GB",
        _memory_line(result),
        f"INFO {_stamp(1)} gpu_executor.py:122] # GPU blocks: {plan.num_gpu_blocks}, "
        f"# CPU blocks: {_cpu_blocks(result, block_bytes)}",
        f"INFO {_stamp(1)} gpu_executor.py:126] Maximum concurrency for {plan.max_model_len} tokens per request: "
        f"{plan.kv_capacity_tokens / plan.max_model_len:.2f}x",
        f"INFO {_stamp(SERVER_START_OFFSET_S)} launcher.py:27] Route: /v1/completions, Methods: POST",
    ]
    body = sorted(_stats_lines(result) + _preemption_lines(result), key=lambda line: line.split(" ", 3)[1:3])
    end_time = float(result.samples["time [s]"].iloc[-1]) if len(result.samples) else 0.0
    shutdown_stamp = _stamp(SERVER_START_OFFSET_S + end_time)
    lines += body + [f"INFO {shutdown_stamp} launcher.py:57] Shutting down FastAPI HTTP server."]
    (run_dir / "server_out.log").write_text("\n".join(lines) + "\n")
    (run_dir / "server_err.log").write_text(_SERVER_ERR_OK.format(pid=job % 4_000_000, port=port))
    phases = {
        "simulator_only": "prefill/decode time split of the simulated engine steps; vLLM writes no such file",
        "prefill_time_s": float(result.prefill_time_s), "decode_time_s": float(result.decode_time_s),
        "num_steps": int(result.num_steps), **{f"{kind}_steps": int(n) for kind, n in result.step_counts.items()},
        "num_preemptions": int(result.num_preemptions), "num_gpu_blocks": int(plan.num_gpu_blocks),
        "duration_s": float(result.duration_s), "mean_batch_size_sampled": float(result.mean_batch_size),
    }
    (run_dir / PHASE_FILE).write_text(yaml.safe_dump(phases, sort_keys=False))
    return run_dir
