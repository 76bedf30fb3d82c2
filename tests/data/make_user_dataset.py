"""Write the runs of the tiny user dataset (``tests/data/user_dataset/traces/``) that
tests/test_user_dataset.py builds end to end through ``snakemake all``.

Run from anywhere: ``python tests/data/make_user_dataset.py``; the output is committed (a test checks
that it equals this generator's). A user's own benchmark, as `vllm bench serve --save-result
--metadata max_num_seqs=B` writes it: one run per folder, the result JSON only (no metrics series,
no server log, so no KV capacity: the mean batch comes from Little's law). Two models, two output
lengths and six caps, 24 runs, every number from the made-up servers below (nothing from real
traces): a decode step of ``base + per_seq B`` ms, ``per_seq`` growing with the context.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from make_layouts import MadeUpServer, bench_serve_json, num_prompts_for, write_json

TRACES = Path(__file__).resolve().parent / "user_dataset" / "traces"
INPUT_LEN = 256
OUTPUT_LENS = (128, 256)
CAPS = (1, 2, 4, 8, 16, 32)
MODELS = {   # model id: (step base ms, per-sequence ms per 256 tokens of mean context)
    "facebook/opt-1.3b": (6.0, 0.04),
    "facebook/opt-2.7b": (10.0, 0.07),
}


def server(model_id: str, output_len: int) -> MadeUpServer:
    base_ms, per_seq_ms = MODELS[model_id]
    mean_context = INPUT_LEN + output_len / 2
    return MadeUpServer(model_id, INPUT_LEN, output_len, base_ms, per_seq_ms * mean_context / 256)


def build(root: Path) -> None:
    """Every run under `root` (``root/<model>/ol<OL>/max_num_seqs_<B>/``)."""
    index = 0
    for model_id in MODELS:
        name = model_id.rsplit("/", 1)[-1]
        for output_len in OUTPUT_LENS:
            for cap in CAPS:
                date = f"20250910-{index // 60:02d}{index % 60:02d}00"
                result = bench_serve_json(cap, num_prompts_for(cap), True, date, max_concurrency=None,
                                          metadata={"max_num_seqs": str(cap)}, server=server(model_id, output_len))
                write_json(root / name / f"ol{output_len}" / f"max_num_seqs_{cap}"
                           / f"openai-infqps-{name}-{date}.json", result)
                index += 1


def main() -> None:
    shutil.rmtree(TRACES, ignore_errors=True)
    build(TRACES)


if __name__ == "__main__":
    main()
