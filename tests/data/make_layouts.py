"""Write one small batch-cap sweep in each layout that vLLM and GuideLLM users produce
(``tests/data/formats/<layout>/``), for the ingest and ``slim advise`` tests of every layout.

Run from anywhere: ``python tests/data/make_layouts.py``; the output is committed (a test checks
that it equals this generator's). Every number is synthetic, from one made-up server: OPT-1.3B,
256 prompt and 128 output tokens per request, a decode step of ``6 + 0.08 B`` ms at running
batch B, a running batch of 95% of the cap, and Little's law for the request rate; nothing is
taken from real traces. File formats follow vLLM's ``vllm/benchmarks/serve.py`` and
``vllm/benchmarks/sweep/serve.py``, its V1 server log (``vllm/v1/metrics/loggers.py``) and
Prometheus exposition, and GuideLLM's report schema.

Layouts (folder: what it is):

* ``bench_serve_metadata``: ``vllm bench serve --save-result --metadata max_num_seqs=B``, one run
  per folder, a metrics CSV with V1 Prometheus names;
* ``bench_serve_v1_log``: the same without metadata, the V1 server log as ``server_out.log``;
* ``bench_serve_vllm_serve_log``: the same, the server log as ``vllm_serve.log``;
* ``flat_result_dir``: one ``--result-dir`` holding every run's JSON (a client concurrency sweep
  against one server, whose log lies beside them);
* ``bench_sweep_serve``: ``vllm bench sweep serve`` over ``max_num_seqs``, two repetitions per
  point (``run=0.json``, ``run=1.json``, ``summary.json``), the experiment's ``summary.csv``;
* ``client_concurrency``: ``vllm bench serve --max-concurrency C``, one run per folder, the
  server at its default cap, no server files;
* ``append_result``: ``--append-result``, every run one JSON object in one file;
* ``guidellm_sweep``: one GuideLLM ``benchmarks.json`` holding a concurrent sweep;
* ``guidellm_per_folder``: one GuideLLM report per folder, one benchmark each;
* ``prometheus_scrapes``: raw ``/metrics`` text scrapes appended to ``metrics.prom``, per run;
* ``grafana_export``: a Grafana panel's CSV export, headers carrying the label sets, per run.

Offline layouts (`OFFLINE_LAYOUTS`; a static batch of B requests at IL = OL = 1024 of OPT-1.3B,
its latency ``B IL 0.02 ms + OL (6 + 0.08 B) ms``; on the A100 80 GB of the tests the batch of
256 overflows the KV cache, the others fit), following ``vllm/benchmarks/latency.py``,
``throughput.py`` and ``lib/utils.py`` (``convert_to_pytorch_benchmark_format``):

* ``bench_latency_pytorch``: ``vllm bench latency --output-json latency_bs<B>.json`` with
  ``SAVE_TO_PYTORCH_BENCHMARK_FORMAT=1``: each result beside its ``.pytorch.json`` (the args);
* ``bench_latency_sidecar``: the results alone, each with a ``<name>.args.json`` sidecar;
* ``bench_latency_file_names``: the results alone, named ``latency_<model>_bs<B>_in<IL>_out<OL>.json``;
* ``bench_throughput``: ``vllm bench throughput --output-json`` of N requests under
  ``--max-num-seqs 64`` (waves of 64; N = 100 leaves a last wave of 36), with ``.pytorch.json``;
* ``summary_table``: a CSV in the summary-table vocabulary, one row per B, B = 16 measured twice.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMATS_ROOT = Path(__file__).resolve().parent / "formats"
OFFLINE_LAYOUTS = ("bench_latency_pytorch", "bench_latency_sidecar", "bench_latency_file_names", "bench_throughput",
                   "summary_table")
LAYOUTS = ("bench_serve_metadata", "bench_serve_v1_log", "bench_serve_vllm_serve_log", "flat_result_dir",
           "bench_sweep_serve", "client_concurrency", "append_result", "guidellm_sweep", "guidellm_per_folder",
           "prometheus_scrapes", "grafana_export")

MODEL_ID = "facebook/opt-1.3b"
INPUT_LEN, OUTPUT_LEN = 256, 128
CAPS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
KV_CACHE_TOKENS = 1_234_560          # V1 log: 77,160 blocks of 16
SAMPLE_PERIOD_S = 1.0


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_json(path: Path, content: Any) -> None:
    write(path, json.dumps(content) + "\n")


# ---------------------------------------------------------------- the made-up server

@dataclass(frozen=True)
class MadeUpServer:
    """A made-up server: a decode step of ``step_base_ms + step_per_seq_ms B`` ms at running batch B,
    serving requests of `input_len` prompt and `output_len` output tokens of `model_id`."""

    model_id: str = MODEL_ID
    input_len: int = INPUT_LEN
    output_len: int = OUTPUT_LEN
    step_base_ms: float = 6.0
    step_per_seq_ms: float = 0.08


SERVER = MadeUpServer()
"""The server of every layout here (tests/data/make_user_dataset.py makes others)."""


def running_batch(cap: int) -> int:
    return max(1, round(0.95 * cap))


def step_ms(batch: int, server: MadeUpServer = SERVER) -> float:
    return server.step_base_ms + server.step_per_seq_ms * batch


def measurement(cap: int, num_prompts: int, queued: bool, server: MadeUpServer = SERVER) -> dict[str, float]:
    """The client-side numbers of one run at batch cap `cap`; `queued`: all prompts sent at once to a
    server that queues them (TTFT includes the wait), else a client that keeps `cap` in flight."""
    batch = running_batch(cap)
    itl_ms = step_ms(batch, server)
    decode_s = (server.output_len - 1) * itl_ms / 1000.0
    request_rate = batch / decode_s                        # Little's law over the decode residence
    duration = round(num_prompts / request_rate, 4)
    ttft_ms = round(1000.0 * duration / 2.0 if queued else 2.0 * itl_ms, 3)
    return {"batch": batch, "duration": duration, "itl_ms": round(itl_ms, 4), "ttft_ms": ttft_ms,
            "e2el_ms": round(ttft_ms + (server.output_len - 1) * itl_ms, 3)}


def bench_serve_json(cap: int, num_prompts: int, queued: bool, date: str, *, max_concurrency: int | None,
                     metadata: dict[str, str] | None = None, server: MadeUpServer = SERVER) -> dict[str, Any]:
    """A ``vllm bench serve --save-result`` result (keys in serve.py's order, no per-request lists)."""
    m = measurement(cap, num_prompts, queued, server)
    total_input, total_output = server.input_len * num_prompts, server.output_len * num_prompts
    result: dict[str, Any] = {"date": date, "endpoint_type": "openai", "backend": "openai", "label": None,
                              "model_id": server.model_id, "tokenizer_id": server.model_id, "num_prompts": num_prompts}
    result.update(metadata or {})
    result.update({"request_rate": "inf", "burstiness": 1.0, "max_concurrency": max_concurrency})
    result.update({
        "duration": m["duration"], "completed": num_prompts, "failed": 0,
        "total_input_tokens": total_input, "total_output_tokens": total_output,
        "request_throughput": num_prompts / m["duration"], "request_goodput": None,
        "output_throughput": total_output / m["duration"],
        "total_token_throughput": (total_input + total_output) / m["duration"],
        "max_output_tokens_per_s": 1.2 * total_output / m["duration"], "max_concurrent_requests": m["batch"],
    })
    for metric, mean in (("ttft", m["ttft_ms"]), ("tpot", m["itl_ms"]), ("itl", m["itl_ms"]), ("e2el", m["e2el_ms"])):
        result[f"mean_{metric}_ms"], result[f"median_{metric}_ms"] = mean, mean
        result[f"std_{metric}_ms"], result[f"p99_{metric}_ms"] = 0.05 * mean, 1.3 * mean
    return result


def num_prompts_for(cap: int) -> int:
    return max(20, 4 * cap)


def samples(cap: int, num_prompts: int) -> list[tuple[float, int, int, float]]:
    """(time, running, waiting, kv usage) once a second: idle, the plateau, idle."""
    m = measurement(cap, num_prompts, queued=True)
    batch, seconds = m["batch"], max(3, int(m["duration"] / SAMPLE_PERIOD_S))
    rows = [(0.0, 0, 0, 0.0)]
    for second in range(1, seconds + 1):
        waiting = max(0, round(num_prompts * (1 - second / seconds)) - batch)
        rows.append((float(second), batch, waiting, round(batch * (INPUT_LEN + OUTPUT_LEN) / KV_CACHE_TOKENS, 6)))
    rows.append((float(seconds + 1), 0, 0, 0.0))
    return rows


def v1_server_log(cap: int | None, num_prompts: int, name_the_cap: bool = True) -> str:
    """A V1 ``vllm serve`` log: non-default args, the KV cache size, stats lines every 10 s."""
    args = {"model": MODEL_ID, "max_num_seqs": cap} if name_the_cap and cap else {"model": MODEL_ID}
    lines = ["INFO 09-04 10:00:00 [__init__.py:241] Automatically detected platform cuda.",
             "INFO 09-04 10:00:02 [api_server.py:1805] vLLM API server version 0.10.1",
             f"INFO 09-04 10:00:02 [utils.py:326] non-default args: {args!r}",
             f"INFO 09-04 10:00:31 [kv_cache_utils.py:849] GPU KV cache size: {KV_CACHE_TOKENS:,} tokens",
             "INFO 09-04 10:00:31 [kv_cache_utils.py:853] Maximum concurrency for 2,048 tokens per request: 602.81x"]
    if cap:
        for second, running, waiting, kv in samples(cap, num_prompts)[::10]:
            minute, sec = divmod(40 + int(second), 60)
            lines.append(f"INFO 09-04 10:{1 + minute:02d}:{sec:02d} [loggers.py:123] Engine 000: Avg prompt "
                         f"throughput: {100.0 * waiting:.1f} tokens/s, Avg generation throughput: "
                         f"{10.0 * running:.1f} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, "
                         f"GPU KV cache usage: {100 * kv:.1f}%, Prefix cache hit rate: 0.0%")
    return "\n".join(lines) + "\n"


def v1_metrics_csv(cap: int, num_prompts: int) -> str:
    rows = ["timestamp,vllm:num_requests_running,vllm:num_requests_waiting,vllm:kv_cache_usage_perc,"
            "vllm:num_preemptions_total"]
    rows += [f"{1757000000 + t:.0f},{r},{w},{kv},0" for t, r, w, kv in samples(cap, num_prompts)]
    return "\n".join(rows) + "\n"


def date_for(index: int) -> str:
    return f"20250904-{10 + index:02d}0000"


# ---------------------------------------------------------------- vllm bench serve, one run per folder

def _runs_with_metadata(root: Path, server_file: str, server_text: Callable[[int, int, int], str]) -> None:
    """One ``--metadata max_num_seqs=B`` run per folder, with ``server_text(cap, num_prompts, index)``
    written to `server_file` beside its JSON."""
    for index, cap in enumerate(CAPS):
        n, date = num_prompts_for(cap), date_for(index)
        run_dir = root / f"max_num_seqs_{cap}"
        write_json(run_dir / f"openai-infqps-opt-1.3b-{date}.json",
                   bench_serve_json(cap, n, True, date, max_concurrency=None, metadata={"max_num_seqs": str(cap)}))
        write(run_dir / server_file, server_text(cap, n, index))


def build_bench_serve_metadata(root: Path) -> None:
    _runs_with_metadata(root, "metrics_engine.csv", lambda cap, n, index: v1_metrics_csv(cap, n))


def _bench_serve_with_log(root: Path, log_name: str) -> None:
    for index, cap in enumerate(CAPS):
        n, date = num_prompts_for(cap), date_for(index)
        run_dir = root / f"run_{index:02d}"
        write_json(run_dir / f"openai-infqps-opt-1.3b-{date}.json",
                   bench_serve_json(cap, n, True, date, max_concurrency=None))
        write(run_dir / log_name, v1_server_log(cap, n))


def build_bench_serve_v1_log(root: Path) -> None:
    _bench_serve_with_log(root, "server_out.log")


def build_bench_serve_vllm_serve_log(root: Path) -> None:
    _bench_serve_with_log(root, "vllm_serve.log")


# ---------------------------------------------------------------- several runs per folder or file

def client_run(cap: int, index: int) -> dict[str, Any]:
    """A ``--max-concurrency cap`` run against a server left at its default cap."""
    return bench_serve_json(cap, num_prompts_for(cap), False, date_for(index), max_concurrency=cap)


def build_flat_result_dir(root: Path) -> None:
    for index, cap in enumerate(CAPS):
        write_json(root / f"openai-infqps-concurrency{cap}-opt-1.3b-{date_for(index)}.json", client_run(cap, index))
    write(root / "vllm_serve.log", v1_server_log(None, 0))


def build_client_concurrency(root: Path) -> None:
    for index, cap in enumerate(CAPS):
        write_json(root / f"concurrency_{cap}" / f"openai-infqps-concurrency{cap}-opt-1.3b-{date_for(index)}.json",
                   client_run(cap, index))


def build_append_result(root: Path) -> None:
    # serve.py appends "\n" + json.dump(result) for every run after the first.
    write(root / "results.json", "\n".join(json.dumps(client_run(cap, index)) for index, cap in enumerate(CAPS)))


def build_bench_sweep_serve(root: Path) -> None:
    experiment = root / "20250905_120000"
    summary_rows = []
    for index, cap in enumerate(CAPS):
        point = experiment / f"SERVE--max_num_seqs={cap}"
        repetitions = []
        for run_number in range(2):
            n, date = num_prompts_for(cap), date_for(index)
            run = bench_serve_json(cap, n, True, date, max_concurrency=None)
            run.update({"run_number": run_number, "max_num_seqs": cap})
            write_json(point / f"run={run_number}.json", run)
            repetitions.append(run)
        write_json(point / "summary.json", repetitions)
        summary_rows += [(len(summary_rows), run["run_number"], cap, run["total_token_throughput"])
                         for run in repetitions]
    write(experiment / "summary.csv", ",run_number,max_num_seqs,total_token_throughput\n"
          + "".join(f"{i},{r},{c},{t}\n" for i, r, c, t in summary_rows))


# ---------------------------------------------------------------- GuideLLM

def _distribution(values: list[float]) -> dict[str, Any]:
    mean = sum(values) / len(values)
    return {"mean": mean, "median": mean, "mode": mean, "variance": 0.0, "std_dev": 0.0,
            "min": min(values), "max": max(values), "count": len(values), "total_sum": sum(values),
            "percentiles": {"p50": mean, "p90": mean, "p99": mean}}


def _by_status(values: list[float]) -> dict[str, Any]:
    empty = {"mean": 0.0, "median": 0.0, "mode": 0.0, "variance": 0.0, "std_dev": 0.0, "min": 0.0, "max": 0.0,
             "count": 0, "total_sum": 0.0, "percentiles": {"p50": 0.0, "p90": 0.0, "p99": 0.0}}
    return {"successful": _distribution(values), "incomplete": empty, "errored": empty,
            "total": _distribution(values)}


def guidellm_benchmark(cap: int, index: int) -> dict[str, Any]:
    """One benchmark of a GuideLLM report (``--profile concurrent --rate cap``)."""
    n = num_prompts_for(cap)
    m = measurement(cap, n, queued=False)
    start = 1757080000.0 + 1000.0 * index
    return {
        "type_": "generative_benchmark",
        "config": {"run_id": "5f0c8d0e", "run_index": index,
                   "strategy": {"type_": "concurrent", "streams": cap, "startup_duration": 0.0},
                   "constraints": {"max_requests": {"max_num": n}},
                   "backend": {"type_": "openai_http", "target": "http://localhost:8000", "model": MODEL_ID}},
        "start_time": start, "end_time": start + m["duration"], "duration": m["duration"],
        "scheduler_metrics": {"start_time": start, "request_start_time": start, "measure_start_time": start,
                              "measure_end_time": start + m["duration"], "request_end_time": start + m["duration"],
                              "end_time": start + m["duration"],
                              "requests_made": {"successful": n, "incomplete": 0, "errored": 0, "total": n}},
        "metrics": {
            "request_totals": {"successful": n, "incomplete": 0, "errored": 0, "total": n},
            "requests_per_second": _by_status([n / m["duration"]]),
            "request_concurrency": _by_status([float(m["batch"])]),
            "request_latency": _by_status([m["e2el_ms"] / 1000.0] * n),
            "prompt_token_count": _by_status([float(INPUT_LEN)] * n),
            "output_token_count": _by_status([float(OUTPUT_LEN)] * n),
            "time_to_first_token_ms": _by_status([m["ttft_ms"]] * n),
            "time_per_output_token_ms": _by_status([m["itl_ms"]] * n),
            "inter_token_latency_ms": _by_status([m["itl_ms"]] * n),
            "output_tokens_per_second": _by_status([n * OUTPUT_LEN / m["duration"]]),
            "tokens_per_second": _by_status([n * (INPUT_LEN + OUTPUT_LEN) / m["duration"]]),
        },
    }


def guidellm_report(benchmarks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"args": {"target": "http://localhost:8000", "model": MODEL_ID, "profile": "concurrent",
                     "data": f"prompt_tokens={INPUT_LEN},output_tokens={OUTPUT_LEN}"},
            "benchmarks": benchmarks}


def build_guidellm_sweep(root: Path) -> None:
    write_json(root / "benchmarks.json",
               guidellm_report([guidellm_benchmark(cap, index) for index, cap in enumerate(CAPS)]))


def build_guidellm_per_folder(root: Path) -> None:
    for index, cap in enumerate(CAPS):
        write_json(root / f"concurrent_{cap}" / "benchmarks.json", guidellm_report([guidellm_benchmark(cap, index)]))


# ---------------------------------------------------------------- server metrics as scrapes or exports

def _labels(engine: str = "0") -> str:
    return f'engine="{engine}",model_name="{MODEL_ID}"'


def scrape(running: int, waiting: int, kv: float) -> str:
    """One ``/metrics`` text scrape: the families ingest reads among others it must skip."""
    labels = _labels()
    return "\n".join([
        "# HELP python_gc_objects_collected_total Objects collected during gc",
        "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 12345.0',
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{{{labels}}} {float(running)}",
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{{{labels}}} {float(waiting)}",
        "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:kv_cache_usage_perc gauge",
        f"vllm:kv_cache_usage_perc{{{labels}}} {kv}",
        "# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.",
        "# TYPE vllm:num_preemptions_total counter",
        f"vllm:num_preemptions_total{{{labels}}} 0.0",
        "# HELP vllm:iteration_tokens_total Histogram of number of tokens per engine_step.",
        "# TYPE vllm:iteration_tokens_total histogram",
        f'vllm:iteration_tokens_total_bucket{{engine="0",le="1.0",model_name="{MODEL_ID}"}} 0.0',
        f'vllm:iteration_tokens_total_bucket{{engine="0",le="+Inf",model_name="{MODEL_ID}"}} {float(running)}',
        f"vllm:iteration_tokens_total_count{{{labels}}} {float(running)}",
        f"vllm:iteration_tokens_total_sum{{{labels}}} {float(running * 3)}",
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
        "# TYPE vllm:cache_config_info gauge",
        f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",engine="0",gpu_memory_utilization="0.9",'
        f'num_gpu_blocks="{KV_CACHE_TOKENS // 16}",prefix_caching_hash_algo="builtin"}} 1.0',
    ]) + "\n"


def build_prometheus_scrapes(root: Path) -> None:
    _runs_with_metadata(root, "metrics.prom",
                        lambda cap, n, index: "".join(scrape(r, w, kv) for _, r, w, kv in samples(cap, n)))


def grafana_csv(cap: int, num_prompts: int, index: int) -> str:
    """A Grafana panel's CSV export ("Series joined by time"): a time column, one column per series."""
    series = ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
              "vllm:num_preemptions_total")
    labels = f'engine="0", instance="localhost:8000", job="vllm", model_name="{MODEL_ID}"'
    header = ",".join(['"Time"'] + ['"' + f"{name}{{{labels}}}".replace('"', '""') + '"' for name in series])
    rows = [header] + [f"2025-09-04 {10 + index:02d}:{int(t) // 60:02d}:{int(t) % 60:02d},{r},{w},{kv},0"
                       for t, r, w, kv in samples(cap, num_prompts)]
    return "\n".join(rows) + "\n"


def build_grafana_export(root: Path) -> None:
    _runs_with_metadata(root, "grafana_data_export.csv", grafana_csv)


# ---------------------------------------------------------------- offline benchmarks

OFFLINE_MODEL = "facebook/opt-1.3b"
OFFLINE_LEN = 1024                       # IL = OL (OPT-1.3B: max_model_len 2048 = IL + OL)
OFFLINE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
OFFLINE_ITERATIONS = 3
THROUGHPUT_CAP = 64
THROUGHPUT_REQUESTS = (64, 128, 256, 100)


def static_batch_latency_s(batch: int, input_len: int = OFFLINE_LEN, output_len: int = OFFLINE_LEN) -> float:
    """The made-up GPU's time for one static batch: prefill at 0.02 ms per token, then OL decode steps."""
    return (batch * input_len * 0.02 + output_len * step_ms(batch)) / 1000.0


def latency_result(batch: int) -> dict[str, Any]:
    """``vllm bench latency --output-json``: avg, std, every iteration and the percentiles."""
    base = static_batch_latency_s(batch)
    latencies = [round(base * factor, 6) for factor in (0.995, 1.0, 1.005)][:OFFLINE_ITERATIONS]
    mean = sum(latencies) / len(latencies)
    std = (sum((value - mean) ** 2 for value in latencies) / len(latencies)) ** 0.5
    ordered = sorted(latencies)
    return {"avg_latency": mean, "std_latency": std, "latencies": latencies,
            "percentiles": {str(p): ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]
                            for p in (10, 25, 50, 75, 90, 99)}}


def latency_args(batch: int, output_json: str) -> dict[str, Any]:
    """``vars(args)`` of ``vllm bench latency`` (the options the project reads, and a few others)."""
    return {"model": OFFLINE_MODEL, "input_len": OFFLINE_LEN, "output_len": OFFLINE_LEN, "batch_size": batch,
            "n": 1, "use_beam_search": False, "num_iters_warmup": 1, "num_iters": OFFLINE_ITERATIONS,
            "output_json": output_json, "tensor_parallel_size": 1, "max_num_seqs": None, "dtype": "auto",
            "enable_prefix_caching": False}


def pytorch_records(args: dict[str, Any], metrics: dict[str, list], extra_info: dict[str, Any]) -> list:
    """``convert_to_pytorch_benchmark_format``: one record per metric, the args under benchmark.extra_info."""
    return [{"benchmark": {"name": "vLLM benchmark", "extra_info": {"args": args}},
             "model": {"name": args["model"]},
             "metric": {"name": name, "benchmark_values": values, "extra_info": extra_info}}
            for name, values in metrics.items()]


def build_bench_latency_pytorch(root: Path) -> None:
    for batch in OFFLINE_BATCHES:
        name = f"latency_bs{batch}.json"
        result = latency_result(batch)
        write_json(root / name, result)
        extra = {key: result[key] for key in ("avg_latency", "std_latency", "percentiles")}
        write_json(root / name.replace(".json", ".pytorch.json"),
                   pytorch_records(latency_args(batch, name), {"latency": result["latencies"]}, extra))


def build_bench_latency_sidecar(root: Path) -> None:
    for batch in OFFLINE_BATCHES:
        name = f"run{batch:03d}.json"
        write_json(root / name, latency_result(batch))
        args = latency_args(batch, name)
        write_json(root / name.replace(".json", ".args.json"),
                   {key: args[key] for key in ("model", "batch_size", "input_len", "output_len",
                                               "tensor_parallel_size")})


def build_bench_latency_file_names(root: Path) -> None:
    for batch in OFFLINE_BATCHES:
        write_json(root / f"latency_opt-1.3b_bs{batch}_in{OFFLINE_LEN}_out{OFFLINE_LEN}.json", latency_result(batch))


def throughput_result(requests: int) -> dict[str, Any]:
    """``vllm bench throughput --output-json``: waves of THROUGHPUT_CAP identical requests."""
    full, rest = divmod(requests, THROUGHPUT_CAP)
    elapsed = round(full * static_batch_latency_s(THROUGHPUT_CAP) + (static_batch_latency_s(rest) if rest else 0), 6)
    tokens = requests * 2 * OFFLINE_LEN
    return {"elapsed_time": elapsed, "num_requests": requests, "total_num_tokens": tokens,
            "requests_per_second": requests / elapsed, "tokens_per_second": tokens / elapsed}


def build_bench_throughput(root: Path) -> None:
    for requests in THROUGHPUT_REQUESTS:
        name = f"throughput_n{requests}.json"
        result = throughput_result(requests)
        write_json(root / name, result)
        args = {"backend": "vllm", "dataset_name": "random", "model": OFFLINE_MODEL, "input_len": OFFLINE_LEN,
                "output_len": OFFLINE_LEN, "num_prompts": requests, "n": 1, "output_json": name,
                "tensor_parallel_size": 1, "max_num_seqs": THROUGHPUT_CAP, "random_range_ratio": 0.0}
        write_json(root / name.replace(".json", ".pytorch.json"), pytorch_records(
            args, {"requests_per_second": [result["requests_per_second"]],
                   "tokens_per_second": [result["tokens_per_second"]]},
            {key: result[key] for key in ("elapsed_time", "num_requests", "total_num_tokens")}))


def build_summary_table(root: Path) -> None:
    """A summary table in the vocabulary: one row per batch size; B = 16 measured a second time, 2% slower."""
    lines = ["model,hardware,tensor_parallel,batch_size,input_len,output_len,latency_s,total_token_throughput_per_s"]
    rows = [(batch, static_batch_latency_s(batch)) for batch in OFFLINE_BATCHES]
    rows.append((16, static_batch_latency_s(16) * 1.02))
    for batch, latency in rows:
        tokens = batch * 2 * OFFLINE_LEN
        lines.append(f"opt-1.3b,a100-80gb,1,{batch},{OFFLINE_LEN},{OFFLINE_LEN},{latency:.6f},{tokens / latency:.4f}")
    write(root / "points.csv", "\n".join(lines) + "\n")


BUILDERS = {name: globals()[f"build_{name}"] for name in LAYOUTS + OFFLINE_LAYOUTS}


def build_layouts(root: Path) -> None:
    """Write every layout under `root` (``root/<layout>/``)."""
    for name, build in BUILDERS.items():
        build(root / name)


def main() -> None:
    for name in LAYOUTS + OFFLINE_LAYOUTS:
        if (FORMATS_ROOT / name).exists():
            shutil.rmtree(FORMATS_ROOT / name)
    build_layouts(FORMATS_ROOT)


if __name__ == "__main__":
    main()
