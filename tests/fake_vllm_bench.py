"""A small stand-in for ``vllm bench serve``, for testing `slim tune --run`: it takes the real
command's arguments, simulates the run with the project's simulator (`slim.sim.engine.simulate_run`,
the server's cap at the client's ``--max-concurrency``, the client's clocks starting when it sends
each request) and writes the result file ``vllm bench serve --save-result`` writes, with
``--metadata`` entries at its top level, the latency statistics ``--percentile-metrics`` and
``--metric-percentiles`` ask for, and each request's latencies with ``--save-detailed``.

    python tests/fake_vllm_bench.py --model facebook/opt-125m --random-input-len 128 \
        --random-output-len 32 --max-concurrency 8 --num-prompts 64 --result-dir DIR \
        --result-filename result.json --metadata max_num_seqs=64 [--hardware h100-64gb] \
        [--tensor-parallel-size 2] [--data-parallel-size 4] [--simulate-as mistral-7b] [--fail-at 16] \
        [--corrupt-at 32] [--percentile-metrics ttft,tpot,itl,e2el] [--metric-percentiles 90,99] [--save-detailed]

``--data-parallel-size D`` stands for a server of D data-parallel ranks, each serving its share of
the requests in flight (``max_concurrency / D``) and of the prompts: one rank is simulated and the
server's counts and throughputs are D times its own, its latencies the rank's.
``--simulate-as MODEL`` simulates the run with another catalog model's architecture, for a model the
catalog cannot describe (DeciLM-7B, a checkpoint of a quantisation not modelled): the result still
names ``--model``. ``--fail-at CAP`` makes the run at that concurrency fail (exit code 1, no result), as a crashed
benchmark would; ``--corrupt-at CAP`` makes it exit 0 with a result file that is not valid JSON, as
a benchmark killed while writing it would.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from slim.sim.constants import SIM_CONSTANTS_FILE, load_sim_constants
from slim.sim.engine import simulate_run
from slim.specs.architecture import MODELS_FILE, load_architectures
from slim.specs.hardware import HARDWARE_FILE, load_hardware


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fake_vllm_bench")
    parser.add_argument("--model", required=True)
    parser.add_argument("--random-input-len", type=int, required=True)
    parser.add_argument("--random-output-len", type=int, required=True)
    parser.add_argument("--max-concurrency", type=int, required=True)
    parser.add_argument("--num-prompts", type=int, default=64)
    parser.add_argument("--result-dir", type=Path, required=True)
    parser.add_argument("--result-filename", required=True)
    parser.add_argument("--metadata", nargs="*", default=[])
    parser.add_argument("--hardware", default="h100-64gb")
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--data-parallel-size", type=int, default=1)
    parser.add_argument("--simulate-as", default=None)
    parser.add_argument("--fail-at", type=int, default=None)
    parser.add_argument("--corrupt-at", type=int, default=None)
    parser.add_argument("--percentile-metrics", default="ttft,tpot,itl,e2el")
    parser.add_argument("--metric-percentiles", default="99")
    parser.add_argument("--goodput", nargs="*", default=None)
    parser.add_argument("--save-detailed", action="store_true")
    args = parser.parse_args(argv)
    if args.fail_at == args.max_concurrency:
        print(f"fake benchmark: the server crashed at concurrency {args.max_concurrency}", file=sys.stderr)
        return 1
    if args.corrupt_at == args.max_concurrency:
        args.result_dir.mkdir(parents=True, exist_ok=True)
        (args.result_dir / args.result_filename).write_text('{"date": "20260101-000000", "num_prompts": ')
        return 0
    arch = load_architectures(MODELS_FILE)[args.simulate_as or args.model]
    hw = load_hardware(HARDWARE_FILE)[args.hardware]
    ranks = args.data_parallel_size
    per_rank = -(-args.max_concurrency // ranks)
    result = simulate_run(arch, hw, load_sim_constants(SIM_CONSTANTS_FILE), args.random_input_len,
                          args.random_output_len, per_rank, -(-args.num_prompts // ranks),
                          tensor_parallel=args.tensor_parallel_size)
    summary = {key: value for key, value in result.benchmark_summary().items() if not key.endswith("_ms")}
    for key in ("completed", "total_input_tokens", "total_output_tokens", "request_throughput", "output_throughput",
                "total_token_throughput"):
        summary[key] *= ranks
    # The client keeps --max-concurrency requests in flight: its clocks start when it sends each one.
    latencies = result.client_latencies_ms(per_rank)
    percentiles = [float(p) for p in args.metric_percentiles.split(",")]
    for metric in args.percentile_metrics.split(","):
        values = latencies[metric]
        summary.update({f"mean_{metric}_ms": float(np.mean(values)), f"median_{metric}_ms": float(np.median(values)),
                        f"std_{metric}_ms": float(np.std(values))})
        for p in percentiles:
            summary[f"p{int(p) if p == int(p) else p}_{metric}_ms"] = float(np.percentile(values, p))
    if args.save_detailed:    # each request's TTFT and gaps (s), as vllm bench serve --save-detailed keeps them
        gaps_s = (latencies["e2el"] - latencies["ttft"]) / 1000.0 / max(args.random_output_len - 1, 1)
        summary.update({"input_lens": [args.random_input_len] * result.completed * ranks,
                        "output_lens": [args.random_output_len] * result.completed * ranks,
                        "ttfts": (latencies["ttft"] / 1000.0).tolist() * ranks,
                        "itls": [[float(gap)] * (args.random_output_len - 1) for gap in gaps_s] * ranks,
                        "errors": [""] * result.completed * ranks})
    content = {"date": "20260101-000000", "endpoint_type": "openai", "backend": "openai", "label": None,
               "model_id": args.model, "tokenizer_id": args.model, "num_prompts": args.num_prompts,
               "request_rate": "inf", "burstiness": 1.0, "max_concurrency": args.max_concurrency,
               "failed": 0, **summary}
    for entry in args.metadata:
        key, _, value = entry.partition("=")
        content[key] = value
    args.result_dir.mkdir(parents=True, exist_ok=True)
    (args.result_dir / args.result_filename).write_text(json.dumps(content, indent=2) + "\n")
    print(f"fake benchmark: concurrency {args.max_concurrency}: {summary['total_token_throughput']:.1f} tokens/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
