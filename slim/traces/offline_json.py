"""The JSON results of vLLM's offline benchmarks, and the arguments that give them meaning.

* ``vllm bench latency --output-json F`` (and the older ``benchmarks/benchmark_latency.py``)
  writes ``avg_latency`` (seconds for one static batch, the mean over ``--num-iters``
  iterations), ``latencies`` (one per iteration), ``percentiles`` and, in recent versions,
  ``std_latency``. The batch size, lengths and model are not in it.
* ``vllm bench throughput --output-json F`` writes ``elapsed_time``, ``num_requests``,
  ``total_num_tokens``, ``requests_per_second`` and ``tokens_per_second``.

Their arguments come, first found, from:

1. the companion ``F.pytorch.json`` both write when ``SAVE_TO_PYTORCH_BENCHMARK_FORMAT`` is set:
   a list of records whose ``benchmark.extra_info.args`` holds the command's arguments
   (``model``, ``batch_size``, ``input_len``, ``output_len``, ``tensor_parallel_size``,
   ``max_num_seqs``, ``n``, ``use_beam_search``, ``num_prompts``);
2. a sidecar ``F.args.json``: one JSON object with the same argument names (written by whoever
   ran the benchmark; ``hardware`` may name the accelerator);
3. the file name, `FILE_NAME_PATTERN`: ``<anything>_<model>_bs<B>_in<IL>_out<OL>[_tp<T>].json``,
   e.g. ``latency_llama-2-7b_bs16_in512_out512_tp2.json`` (the model as a key or alias of the
   models file).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from slim import columns as col
from slim.errors import TraceFormatError
from slim.traces.static_batch import OfflinePoint
from slim.traces.tree import read_text
from slim.traces.values import number
from slim.traces.verdict import Verdict

FORMAT_VLLM_BENCH_LATENCY = "vllm_bench_latency"
FORMAT_VLLM_BENCH_THROUGHPUT = "vllm_bench_throughput"
OFFLINE_FORMATS = (FORMAT_VLLM_BENCH_LATENCY, FORMAT_VLLM_BENCH_THROUGHPUT)
PYTORCH_SUFFIX = ".pytorch.json"
ARGS_SUFFIX = ".args.json"
FILE_NAME_PATTERN = re.compile(
    r"^(?:.*_)?(?P<model>[^_]+)_bs(?P<batch_size>\d+)_in(?P<input_len>\d+)_out(?P<output_len>\d+)"
    r"(?:_tp(?P<tensor_parallel_size>\d+))?\.json$")
"""The documented file name of an offline result without companion or sidecar (module docstring)."""

_LATENCY_KEYS = ("avg_latency", "latencies")
_THROUGHPUT_KEYS = ("elapsed_time", "num_requests", "total_num_tokens")


def offline_format(content: Any) -> str | None:
    """Which offline benchmark wrote a decoded result JSON, or None for any other."""
    if not isinstance(content, dict):
        return None
    if all(key in content for key in _LATENCY_KEYS):
        return FORMAT_VLLM_BENCH_LATENCY
    if all(key in content for key in _THROUGHPUT_KEYS):
        return FORMAT_VLLM_BENCH_THROUGHPUT
    return None


def _companion(path: Path, suffix: str) -> Path:
    return path.with_name(path.name.removesuffix(".json") + suffix)


def _json_object(path: Path) -> Any:
    try:
        return json.loads(read_text(path).removeprefix("\ufeff"))
    except (json.JSONDecodeError, RecursionError) as error:
        raise TraceFormatError(f"{path.name}: not valid JSON ({error})", path=path.name) from error


def benchmark_args(path: Path) -> tuple[dict[str, Any], str]:
    """The arguments of the offline result at `path` and where they came from (module docstring);
    ``({}, "")`` when nothing records them. Raises `TraceFormatError` for an unparseable companion."""
    pytorch = _companion(path, PYTORCH_SUFFIX)
    if pytorch.is_file():
        records = _json_object(pytorch)
        for record in records if isinstance(records, list) else [records]:
            args = (record.get("benchmark", {}).get("extra_info", {}).get("args")
                    if isinstance(record, dict) else None)
            if isinstance(args, dict):
                args = dict(args)
                model = record.get("model", {}).get("name") if isinstance(record.get("model"), dict) else None
                args.setdefault("model", model)
                return args, pytorch.name
        raise TraceFormatError(f"{pytorch.name}: no record with benchmark.extra_info.args", path=pytorch.name)
    sidecar = _companion(path, ARGS_SUFFIX)
    if sidecar.is_file():
        args = _json_object(sidecar)
        if not isinstance(args, dict):
            raise TraceFormatError(f"{sidecar.name}: expected a JSON object of arguments", path=sidecar.name)
        return args, sidecar.name
    match = FILE_NAME_PATTERN.match(path.name)
    if match:
        return {key: value for key, value in match.groupdict().items() if value is not None}, "the file name"
    return {}, ""


def offline_point(content: dict[str, Any], trace_format: str, path: Path) -> OfflinePoint | Verdict:
    """The point an offline result records, with its arguments; a `Verdict` where they are missing
    or describe something SLIM does not model."""
    args, source = benchmark_args(path)
    if not args:
        return Verdict("missing_metadata", f"{path.name}: no {path.name.removesuffix('.json')}{PYTORCH_SUFFIX}, "
                       f"no {path.name.removesuffix('.json')}{ARGS_SUFFIX} and a file name not of the form "
                       "<model>_bs<B>_in<IL>_out<OL>[_tp<T>].json: batch size, lengths and model unknown", path.name)
    if number(args.get("n"), 1) != 1 or args.get("use_beam_search"):
        return Verdict("unsupported_benchmark", f"{path.name}: n = {args.get('n')}, use_beam_search = "
                       f"{args.get('use_beam_search')} (from {source}): SLIM models one sequence per request",
                       path.name)
    common = dict(file=path.name, model=str(args.get("model") or ""), input_len=number(args.get("input_len")),
                  output_len=number(args.get("output_len")),
                  tensor_parallel=number(args.get("tensor_parallel_size"), 1.0),
                  hardware=args.get("hardware"), max_num_seqs=number(args.get("max_num_seqs")))
    if trace_format == FORMAT_VLLM_BENCH_LATENCY:
        latencies = content.get("latencies")
        iterations = f"{len(latencies)} iterations" if isinstance(latencies, list) else "iterations unknown"
        return OfflinePoint(trace_format=trace_format, benchmark_mode=col.BenchmarkMode.OFFLINE_STATIC_BATCH,
                            batch_size=number(args.get("batch_size")), latency_s=number(content.get("avg_latency")),
                            note=f"arguments from {source}; avg_latency over {iterations}", **common)
    requests = number(content.get("num_requests"))
    if math.isnan(common["input_len"]) or math.isnan(common["output_len"]):
        return Verdict("missing_metadata", f"{path.name}: input_len and output_len not recorded (from {source}): "
                       "requests of a dataset's lengths, the static batch's IL and OL unknown", path.name)
    tokens = number(content.get("total_num_tokens"))
    expected = requests * (common["input_len"] + common["output_len"])
    if math.isfinite(tokens) and math.isfinite(expected) and abs(tokens - expected) > 0.05 * expected:
        return Verdict("implausible", f"{path.name}: total_num_tokens = {tokens:g}, but {requests:g} requests x "
                       f"({common['input_len']:g} + {common['output_len']:g}) = {expected:g}: lengths vary", path.name)
    return OfflinePoint(trace_format=trace_format, benchmark_mode=col.BenchmarkMode.OFFLINE_THROUGHPUT,
                        batch_size=requests, latency_s=number(content.get("elapsed_time")),
                        total_token_throughput_per_s=number(content.get("tokens_per_second")),
                        note=f"arguments from {source}", **common)
