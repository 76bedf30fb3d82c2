"""A small stand-in for ``vllm bench serve``, for testing `slim tune --run`: it takes the real
command's arguments, simulates the run with the project's simulator (`slim.sim.engine.simulate_run`,
the server's cap at the client's ``--max-concurrency``) and writes the result file ``vllm bench serve
--save-result`` writes, with ``--metadata`` entries at its top level.

    python tests/fake_vllm_bench.py --model facebook/opt-125m --random-input-len 128 \
        --random-output-len 32 --max-concurrency 8 --num-prompts 64 --result-dir DIR \
        --result-filename result.json --metadata max_num_seqs=64 [--hardware h100-64gb] [--fail-at 16] \
        [--corrupt-at 32]

``--fail-at CAP`` makes the run at that concurrency fail (exit code 1, no result), as a crashed
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
    parser.add_argument("--fail-at", type=int, default=None)
    parser.add_argument("--corrupt-at", type=int, default=None)
    args = parser.parse_args(argv)
    if args.fail_at == args.max_concurrency:
        print(f"fake benchmark: the server crashed at concurrency {args.max_concurrency}", file=sys.stderr)
        return 1
    if args.corrupt_at == args.max_concurrency:
        args.result_dir.mkdir(parents=True, exist_ok=True)
        (args.result_dir / args.result_filename).write_text('{"date": "20260101-000000", "num_prompts": ')
        return 0
    arch = load_architectures(MODELS_FILE)[args.model]
    hw = load_hardware(HARDWARE_FILE)[args.hardware]
    result = simulate_run(arch, hw, load_sim_constants(SIM_CONSTANTS_FILE), args.random_input_len,
                          args.random_output_len, args.max_concurrency, args.num_prompts)
    summary = result.benchmark_summary()
    e2el_ms = result.e2e_s * 1000.0
    summary.update({"mean_e2el_ms": float(e2el_ms.mean()), "median_e2el_ms": float(np.median(e2el_ms)),
                    "std_e2el_ms": float(e2el_ms.std()), "p99_e2el_ms": float(np.percentile(e2el_ms, 99))})
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
