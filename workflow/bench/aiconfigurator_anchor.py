"""AIConfigurator beside the simulator on NVIDIA's H100 SXM vLLM sweeps:
`python workflow/bench/aiconfigurator_anchor.py [--predictions CSV] [--aiconfigurator-python PATH]`.

Reads the simulator's per-run predictions (default results/beyond_paper/predictions.csv, built by
`snakemake --cores 2 beyond_paper --configfile config/config.yaml config/beyond_paper.yaml`), asks
AIConfigurator (installed in a Python of its own, default /tmp/aic/bin/python; the project does not
depend on it) for the TTFT and TPOT of each run of the sweep through
`workflow/bench/aiconfigurator_driver.py`, and writes to results/beyond_paper/ (or --output-dir)
aiconfigurator_predictions.csv (one row per run; NaN and the error where AIConfigurator gave none)
and aiconfigurator_anchor.md (MAPE per model and precision of AIConfigurator and the simulator
zero-shot and at the shipped constants on the same runs; `slim.paper.aiconfigurator_anchor`). The
experts' layout comes from the sweep's CSV (--silicon-csv). A measurement, not a test: it exits 0
whatever the errors are, and 1 with one line when an input or AIConfigurator is missing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from slim import columns as col  # noqa: E402
from slim.paper.aiconfigurator_anchor import (  # noqa: E402
    METRICS,
    REQUEST_COLUMNS,
    anchor_accuracy,
    anchor_markdown,
    anchor_requests,
    expert_layouts,
)
from slim.specs.architecture import load_architectures  # noqa: E402
from slim.traces.silicon_sweep import sweep_rows  # noqa: E402
from slim.traces.static_batch import AcceleratorLookup  # noqa: E402

DRIVER = Path(__file__).with_name("aiconfigurator_driver.py")
DEFAULT_PYTHON = Path("/tmp/aic/bin/python")
DEFAULT_OUTPUT = REPO / "results" / "beyond_paper"
DEFAULT_PREDICTIONS = DEFAULT_OUTPUT / "predictions.csv"
DEFAULT_SWEEP = (REPO / ".." / "shared" / "traces" / "aiconfigurator-silicon" / "vllm_h100_silicon.csv").resolve()
BUILD_HINT = ("build it with: snakemake --cores 2 beyond_paper --configfile config/config.yaml "
              "config/beyond_paper.yaml")
FLOAT_FORMAT = "%.4f"


def ask_aiconfigurator(python: Path, questions: pd.DataFrame) -> pd.DataFrame | str:
    """The driver's answers to `questions` (by run), or a one-line reason it could not run."""
    with tempfile.TemporaryDirectory() as folder:
        asked, answered = Path(folder) / "questions.csv", Path(folder) / "answers.csv"
        questions[list(REQUEST_COLUMNS)].to_csv(asked, index=False)
        process = subprocess.run([str(python), str(DRIVER), str(asked), str(answered)], stdout=subprocess.PIPE,
                                 stderr=None, text=True)
        if process.returncode != 0 or not answered.is_file():
            return f"the AIConfigurator driver failed (exit status {process.returncode}; {python})"
        return pd.read_csv(answered, dtype={"error": str}, keep_default_na=False,
                           na_values={"ttft_ms": [""], "tpot_ms": [""]})


def versions_line(answers: pd.DataFrame) -> str:
    """E.g. ``release 0.12.0, perf database vllm 0.24.0``, from the answers' own columns."""
    def joined(column: str) -> str:
        return ", ".join(sorted({str(value) for value in answers[column] if str(value)})) or "unknown"
    return f"release {joined('aiconfigurator_version')}, perf database vllm {joined('perf_database_version')}"


def first_sentence(error: str) -> str:
    """An error's first sentence (AIConfigurator's add advice after it)."""
    return error.split(". ", 1)[0].rstrip(".")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--predictions", type=Path, default=DEFAULT_PREDICTIONS)
    parser.add_argument("--silicon-csv", type=Path, default=DEFAULT_SWEEP,
                        help="the sweep's CSV (vllm_h100_silicon.csv), for the experts' layouts")
    parser.add_argument("--aiconfigurator-python", type=Path, default=DEFAULT_PYTHON,
                        help="a Python with the package aiconfigurator installed")
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    if not args.predictions.is_file():
        print(f"{args.predictions} does not exist; {BUILD_HINT}", file=sys.stderr)
        return 1
    if not args.silicon_csv.is_file():
        print(f"{args.silicon_csv} does not exist: the sweep's CSV (traces_root of config/config.yaml, "
              "aiconfigurator-silicon/vllm_h100_silicon.csv)", file=sys.stderr)
        return 1
    if not args.aiconfigurator_python.is_file():
        print(f"AIConfigurator is not installed: {args.aiconfigurator_python} does not exist (install aiconfigurator "
              "in a venv of its own and pass its python with --aiconfigurator-python)", file=sys.stderr)
        return 1
    probe = subprocess.run([str(args.aiconfigurator_python), "-c", "import aiconfigurator"], capture_output=True)
    if probe.returncode != 0:
        print(f"AIConfigurator is not installed: {args.aiconfigurator_python} cannot import aiconfigurator (pass a "
              "python that can with --aiconfigurator-python)", file=sys.stderr)
        return 1
    catalog = load_architectures()
    layouts = expert_layouts(sweep_rows(args.silicon_csv, ".", "sweep", catalog, AcceleratorLookup()))
    predictions = pd.read_csv(args.predictions)
    questions = anchor_requests(predictions, catalog, layouts)
    if questions.empty:
        print(f"{args.predictions} has no usable run of the sweep; {BUILD_HINT}", file=sys.stderr)
        return 1
    askable = questions[questions["request_error"] == ""]
    answers = ask_aiconfigurator(args.aiconfigurator_python, askable)
    if isinstance(answers, str):
        print(answers, file=sys.stderr)
        return 1
    answers = answers.rename(columns={"ttft_ms": "aiconfigurator_mean_ttft_ms",
                                      "tpot_ms": "aiconfigurator_mean_tpot_ms"})
    joined = questions.merge(answers, on=col.RUN_ID, how="left", validate="one_to_one")
    joined["aiconfigurator_error"] = joined["request_error"].where(joined["request_error"] != "",
                                                                   joined["error"].fillna(""))
    simulated = predictions.set_index(col.RUN_ID)
    for prefix in ("measured", "zero_shot", "shipped"):
        for metric in METRICS:
            joined[f"{prefix}_{metric}"] = joined[col.RUN_ID].map(simulated[f"{prefix}_{metric}"])
    output = args.output_dir
    output.mkdir(parents=True, exist_ok=True)
    keep = [col.RUN_ID, col.MODEL, "precision", col.TENSOR_PARALLEL, col.DATA_PARALLEL, col.INPUT_LEN_NOMINAL,
            col.OUTPUT_LEN_NOMINAL, "in_flight", *REQUEST_COLUMNS[1:], "gemm_used", "moe_used", "kvcache_used",
            *(f"measured_{metric}" for metric in METRICS), *(f"aiconfigurator_{metric}" for metric in METRICS),
            "aiconfigurator_error"]
    table = joined[list(dict.fromkeys(keep))].sort_values(col.RUN_ID)
    table.to_csv(output / "aiconfigurator_predictions.csv", index=False, float_format=FLOAT_FORMAT)
    accuracy = anchor_accuracy(joined)
    unanswered = [f"{row[col.RUN_ID]} ({row[col.MODEL]}, TP {row[col.TENSOR_PARALLEL]}, "
                  f"DP {row[col.DATA_PARALLEL]}, {row[col.INPUT_LEN_NOMINAL]} x {row[col.OUTPUT_LEN_NOMINAL]} "
                  f"tokens, {row['in_flight']} in flight): {first_sentence(row['aiconfigurator_error'])}"
                  for _, row in table.iterrows() if row["aiconfigurator_error"]]
    (output / "aiconfigurator_anchor.md").write_text(anchor_markdown(accuracy, versions_line(answers), unanswered))
    print(accuracy.to_string(index=False, float_format=lambda value: f"{value:.1f}"))
    print(f"{len(table) - len(unanswered)} of {len(table)} runs estimated by AIConfigurator "
          f"({versions_line(answers)}); wrote {output / 'aiconfigurator_predictions.csv'} and "
          f"{output / 'aiconfigurator_anchor.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
