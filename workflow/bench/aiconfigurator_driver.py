"""Runs AIConfigurator's single-point estimate on every question of a CSV, in AIConfigurator's own
Python (its venv, not the project's): `python aiconfigurator_driver.py QUESTIONS.csv ANSWERS.csv`.

Started by `workflow/bench/aiconfigurator_anchor.py`, which writes the questions
(`slim.paper.aiconfigurator_anchor.REQUEST_COLUMNS`, one per run) and reads the answers back. It uses
the standard library and the package ``aiconfigurator`` only, and loads the perf database once for all
questions. Each answer row: the question's ``run_id``, ``ttft_ms`` and ``tpot_ms`` (empty on an
error), ``error`` (the exception, one line), the quant modes AIConfigurator ran (``gemm_used``,
``moe_used``, ``kvcache_used``), its release and the perf-database version it used. Exit status 3
(with one line on stderr) where ``aiconfigurator`` cannot be imported.
"""

from __future__ import annotations

import csv
import logging
import sys
from importlib import metadata

SYSTEM = "h100_sxm"
BACKEND = "vllm"
ANSWER_COLUMNS = ("run_id", "ttft_ms", "tpot_ms", "error", "gemm_used", "moe_used", "kvcache_used",
                  "aiconfigurator_version", "perf_database_version")
NOT_IMPORTABLE = 3


def _optional_int(text: str) -> int | None:
    return int(float(text)) if text.strip() else None


def answer(estimate, question: dict[str, str]) -> dict[str, object]:
    """AIConfigurator's answer to one question (its ``agg`` estimate), or the error it raised."""
    try:
        result = estimate(
            question["model_path"], SYSTEM, mode="agg", backend_name=BACKEND,
            isl=int(question["isl"]), osl=int(question["osl"]), batch_size=int(question["batch_size"]),
            tp_size=int(question["tp_size"]), attention_dp_size=int(question["attention_dp_size"]),
            moe_tp_size=_optional_int(question["moe_tp_size"]), moe_ep_size=_optional_int(question["moe_ep_size"]),
            gemm_quant_mode=question["gemm_quant_mode"] or None, moe_quant_mode=question["moe_quant_mode"] or None,
            kvcache_quant_mode=question["kvcache_quant_mode"] or None)
    except Exception as error:  # every failure is an answer: the row records it
        return {"error": f"{type(error).__name__}: {' '.join(str(error).split())}"[:300]}
    raw = result.raw
    return {"ttft_ms": f"{float(result.ttft):.6f}", "tpot_ms": f"{float(result.tpot):.6f}", "error": "",
            "gemm_used": raw.get("gemm", ""), "moe_used": raw.get("moe", ""), "kvcache_used": raw.get("kvcache", ""),
            "perf_database_version": result.backend_version}


def main(questions_path: str, answers_path: str) -> int:
    try:
        from aiconfigurator.cli.api import cli_estimate
    except ImportError as error:
        print(f"aiconfigurator is not importable by {sys.executable}: {error}", file=sys.stderr)
        return NOT_IMPORTABLE
    logging.disable(logging.WARNING)
    version = metadata.version("aiconfigurator")
    with open(questions_path, newline="") as handle:
        questions = list(csv.DictReader(handle))
    with open(answers_path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=ANSWER_COLUMNS, restval="")
        writer.writeheader()
        for index, question in enumerate(questions, start=1):
            writer.writerow({"run_id": question["run_id"], "aiconfigurator_version": version,
                             **answer(cli_estimate, question)})
            if index % 20 == 0 or index == len(questions):
                print(f"aiconfigurator: {index} of {len(questions)} runs estimated", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: aiconfigurator_driver.py QUESTIONS.csv ANSWERS.csv", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
