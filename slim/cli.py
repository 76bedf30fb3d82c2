"""The `slim` command: a thin layer over `slim.advisor.advise` (fit SLIM, or calibrate the simulator,
SIM, on a folder of vLLM traces and decide a batch cap), `slim.tune` (measure only what the decision
needs) and the cleaning report (check the folder).

    slim advise --traces DIR --model opt-1.3b --hardware h100-64gb --input-len 242 --output-len 520 \
        --slo p99_tpot_ms=20 [--slo mean_ttft_ms=500] [--predictor sim] [--json] [--plot FILE]
    slim tune --traces DIR --hardware h100-64gb --workload opt-1.3b:242:520 --slo p99_tpot_ms=20 [--run ...]
    slim check DIR

`build_parser` gives the arguments, `advice_request` turns them into an `AdviceRequest` for
`slim.advisor.advise.advise`, `render_text` (`slim.advisor.report`) or `advice_json` gives the
output, and `main` maps errors to exit codes (`EXIT_CODES`, the same for every command): 0 done; 2
bad input (arguments, trace folder, model, hardware, catalog, config.json, an SLO metric no run can
judge; for `check`, no usable run); 3 no candidate cap meets the SLOs and the efficiency floor; 4
`tune --run` stopped open; 130 interrupted; 141 the reader closed the output early (``| head``); 1
only for an unexpected failure (a bug). Every failure prints one line on stderr naming the problem
(``--json`` also prints a JSON object on stdout); when a folder holds runs but none is usable, that
line is followed by `slim check`'s line per run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from slim import __version__
from slim.defaults import (
    DEFAULT_CANDIDATE_CAPS,
    DEFAULT_EPSILON,
    DEFAULT_ONLINE_PROMPTS,
    DEFAULT_TOLERANCE,
    MODELS_FILE,
    PREDICTOR_OPTIONS,
    SIM_CONSTANTS_FILE,
    layout_sizes_for,
)
from slim.errors import NoFeasibleCapError, SlimError
from slim.specs.hardware import HARDWARE_FILE
from slim.tune.cli import (
    CATALOG_FILE_HELP,
    EXIT_INTERRUPTED,
    EXIT_OPEN,
    HARDWARE_FILE_HELP,
    MODELS_FILE_HELP,
    add_serving_arguments,
    add_slo_arguments,
    add_tune_parser,
    hardware_help,
    paragraphs,
    run_tune,
    slos_of,
    tolerance_fraction,
)

if TYPE_CHECKING:   # the commands import what they run (pandas, SciPy, the predictors) when they run it
    from slim.advisor.advise import Advice, AdviceRequest

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_NO_FEASIBLE_CAP = 3
EXIT_BROKEN_PIPE = 141
"""The reader of the output closed it early (``| head``): 128 + SIGPIPE, as a shell reports it."""
EXIT_CODES = {
    EXIT_OK: "done: advise printed a recommendation, tune its plan (with --run: every decision settled), check "
             "found a usable run",
    1: "unexpected failure (a bug: please report it with the traceback)",
    EXIT_BAD_INPUT: "bad input: arguments, trace folder (check: no usable run), model, hardware, catalog, "
                    "config.json, or an SLO metric no run can judge",
    EXIT_NO_FEASIBLE_CAP: "no candidate --max-num-seqs meets the SLOs and the efficiency floor (advise; tune once "
                          "that is settled), or none can run at any layout asked for (the weights or one request "
                          "do not fit each rank, vLLM refuses the tensor-parallel size, or it needs more GPUs)",
    EXIT_OPEN: "slim tune --run stopped with a decision open (a budget spent, the bound, or no benchmark left)",
    EXIT_INTERRUPTED: "slim tune --run was interrupted (Ctrl-C); run it again to resume",
    EXIT_BROKEN_PIPE: "the reader of the output closed it early (e.g. | head -1): the output stops there, "
                      "without a message",
}


# --- output ----------------------------------------------------------------------------

def advice_json(advice: Advice) -> dict[str, Any]:
    """`slim advise --json`'s document (units in the key names; null where a number is undefined)."""
    from slim.advisor.report import advice_fields

    return {"slim_version": __version__, "status": "ok", "exit_code": EXIT_OK, **advice_fields(advice)}


def error_json(error: SlimError, exit_code: int) -> dict[str, Any]:
    """`slim advise --json`'s document for a failure: the message, and per run why it is unusable
    (``runs``) or per candidate what SLIM predicts (``candidates``) where the error has them."""
    from slim.advisor.report import candidates_fields

    document: dict[str, Any] = {
        "slim_version": __version__, "status": "no_feasible_cap" if exit_code == EXIT_NO_FEASIBLE_CAP else "error",
        "exit_code": exit_code, "message": " ".join(str(error).split())}
    runs = getattr(error, "runs", ())
    if runs:
        document["runs"] = list(runs)
    rows = getattr(error, "decision", None)
    if isinstance(rows, tuple) and rows:
        document["candidates"] = candidates_fields(rows, {}, DEFAULT_EPSILON)
    return document


# --- argument parsing ------------------------------------------------------------------

def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def _fraction(text: str) -> float:
    value = _positive_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1), got {text}")
    return value


def _candidates(text: str) -> tuple[int, ...]:
    try:
        return tuple(sorted({_positive_int(part.strip()) for part in text.split(",") if part.strip()}))
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"candidate list: {error}") from None


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError("give at least one model name")
    return names


class _OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but an argument error is one line on stderr (no usage block), exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


_EXIT_CODES_HELP = "exit codes:\n" + "\n".join(f"  {code}  {meaning}" for code, meaning in sorted(EXIT_CODES.items()))
_ADVISE_EPILOG = f"""example (the public traces beside this repository):
  slim advise --traces ../shared/traces/vllm-h100-public/output_length --model opt-1.3b \\
      --hardware h100-64gb --input-len 242 --output-len 520 --slo p99_tpot_ms=20 --json

{_EXIT_CODES_HELP}"""


def build_parser() -> argparse.ArgumentParser:
    """The `slim` command line: ``advise``, ``tune`` and ``check``."""
    parser = _OneLineErrorParser(prog="slim", description="SLIM: performance model and batching advisor for vLLM.",
                                 epilog=_EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"slim {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    advise_parser = commands.add_parser(
        "advise", help="recommend --max-num-seqs for a workload and its SLOs from your benchmark results",
        description=paragraphs(
            "Recommend vLLM's --max-num-seqs for one workload from a folder of benchmark results: the candidate "
            "cap of highest throughput (with --goodput: of highest goodput) that meets every SLO and whose "
            "batching efficiency T(B) / (B T(1)) exceeds --epsilon (BCA, Eq. 13). SLOs bound the statistics "
            "vLLM's benchmark prints, by their names (--slo p99_tpot_ms=50, --slo mean_ttft_ms=500, --goodput "
            "ttft:2000 tpot:50); --slo-ms bounds the paper's in-batch E2E.",
            "A cap that a usable run of the workload measured is judged on its measured values; the others on a "
            "prediction from every usable run: SLIM's where its equations give every SLO metric (the in-batch "
            "E2E, mean_tpot_ms) and no goodput is asked for, else the simulator's, SIM, calibrated on the runs "
            "(--predictor chooses). A metric no run can judge is refused, naming the benchmark that would.",
            "Prints the cap, the vLLM memory flags that reserve only the KV cache it needs, the knee's range, "
            "and whether the decision is settled or which benchmark would settle it (slim tune's session on "
            "the same runs; --no-plan skips it)."),
        epilog=_ADVISE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    advise_parser.add_argument("--traces", required=True, type=Path,
                               help="folder of vLLM or GuideLLM benchmark results, in any layout `slim check` reads")
    advise_parser.add_argument("--model", help="target model: a name or alias of the models file (with "
                                               "--model-config: the name to give the model it describes)")
    advise_parser.add_argument("--model-config", type=Path, metavar="CONFIG_JSON",
                               help="Hugging Face config.json describing the target model (hidden_size, "
                                    "num_hidden_layers, num_attention_heads, num_key_value_heads, intermediate_size, "
                                    "vocab_size), for a model the models file lacks; runs of it become usable too")
    advise_parser.add_argument("--input-len", required=True, type=_positive_int, help="prompt tokens per request")
    advise_parser.add_argument("--output-len", required=True, type=_positive_int, help="generated tokens per request")
    add_slo_arguments(advise_parser, _positive_float, _positive_int)
    advise_parser.add_argument("--epsilon", type=_fraction, default=DEFAULT_EPSILON,
                               help=f"batching-efficiency floor in (0, 1): a cap's T(B) / (B T(1)) must exceed it "
                                    f"(default {DEFAULT_EPSILON})")
    advise_parser.add_argument("--tolerance", type=tolerance_fraction, default=DEFAULT_TOLERANCE,
                               help="the decision is settled when no other cap (with --tensor-parallel-sizes: no "
                                    "other layout or cap, per GPU) can beat the choice by more than this share of "
                                    f"its throughput or goodput (default {DEFAULT_TOLERANCE:g})")
    advise_parser.add_argument("--confidence", type=_fraction, default=None, metavar="C",
                               help="SLIM only (the default predictor with it): hold the in-batch E2E SLO "
                                    "(--slo-ms) of a cap no run measured on the one-sided upper bound of SLIM's "
                                    "prediction at confidence C in (0, 1), e.g. 0.9: parameter uncertainty, what the "
                                    "runs leave undetermined and run-to-run scatter (default: on the prediction)")
    advise_parser.add_argument("--hardware", required=True, help=hardware_help())
    advise_parser.add_argument("--plot", type=Path, default=None, metavar="FILE",
                               help="draw the workload's frontier to FILE (.pdf, .png or .svg): throughput per GPU "
                                    "against output tokens/s per user (from the metric of the first bound on a TPOT, "
                                    "ITL or in-batch E2E statistic, so that the bound is drawn against its own "
                                    "metric; else 1000 / mean TPOT) at every candidate cap, measured and predicted, "
                                    "the caps SIM refused and the chosen cap; comparing layouts "
                                    "(--tensor-parallel-sizes), one curve per layout, per GPU of its whole server, "
                                    "the chosen layout and cap ringed and the layouts without advice named")
    advise_parser.add_argument("--no-plan", action="store_true",
                               help="skip slim tune's session on the same runs (whether the decision is settled, "
                                    "the next benchmark)")
    advise_parser.add_argument("--models-file", type=Path, default=MODELS_FILE, metavar="YAML", help=MODELS_FILE_HELP)
    advise_parser.add_argument("--hardware-file", type=Path, default=HARDWARE_FILE, metavar="YAML",
                               help=HARDWARE_FILE_HELP)
    advise_parser.add_argument("--candidates", type=_candidates, default=DEFAULT_CANDIDATE_CAPS,
                               help="comma-separated candidate --max-num-seqs values (default 1,2,4,...,512)")
    add_serving_arguments(advise_parser, "the server (the vllm serve lines printed pass it)")
    advise_parser.add_argument("--tensor-parallel-size", type=_positive_int, default=None, metavar="T",
                               help="advise for the runs at this vLLM --tensor-parallel-size (default: the "
                                    "smallest the traces hold); the memory plan is each rank's")
    advise_parser.add_argument("--tensor-parallel-sizes", type=_candidates, default=None, metavar="T1,T2",
                               help="compare these tensor-parallel sizes, each advised on its runs, by tokens/s "
                                    "per GPU under the SLOs (default with --gpus or --request-rate: "
                                    "--tensor-parallel-size if given, else 1,2,4,8)")
    advise_parser.add_argument("--gpus", type=_positive_int, default=None, metavar="N",
                               help="GPUs available: layouts above N are left out and the choice is N / TP replicas")
    advise_parser.add_argument("--request-rate", type=_positive_float, default=None, metavar="R",
                               help="requests per second to serve: the replicas and GPUs the chosen layout needs "
                                    "(independent replicas behind a load balancer)")
    advise_parser.add_argument("--max-model-len", type=_positive_int, default=None,
                               help="vLLM --max-model-len the server will use (default IL + OL)")
    advise_parser.add_argument("--train-models", type=_names, default=None, metavar="M1,M2",
                               help="fit the predictor only on the runs of these models (default: every usable "
                                    "run; the target's runs still count as measurements); leave the target out to "
                                    "see how well SLIM predicts a model it never saw")
    advise_parser.add_argument("--exclude-runs", action="append", default=[], metavar="GLOB",
                               help="leave the runs whose directory under --traces matches GLOB out of the fit "
                                    "and out of the measurements (repeatable)")
    advise_parser.add_argument("--table-columns", type=Path, default=None, metavar="YAML",
                               help="how a summary table (CSV or Parquet, one offline point per row) names its "
                                    "columns and accelerators: a YAML file with a dataset's table: section "
                                    "(keys columns, hardware_map; config/README.md); only the --hardware rows "
                                    "are used")
    advise_parser.add_argument("--json", action="store_true",
                               help="print one JSON object (recommendation, memory flags, candidates, warnings) "
                                    "instead of the report; on failure, one with status, exit_code and message")
    advise_parser.add_argument("--predictor", choices=PREDICTOR_OPTIONS, default=None,
                               help="what predicts the caps no run of the workload measured. slim: SLIM at the "
                                    "running batch a cap allows (the in-batch E2E and mean_tpot_ms only); sim: the "
                                    "calibrated simulator, which simulates each cap's requests, predicts the goodput "
                                    "and every SLO metric but ITL's tail, and refuses caps whose simulated run "
                                    "preempts (slower). Default: slim with --confidence, or where every SLO metric "
                                    "is one SLIM gives and no --goodput is asked for; else sim")
    advise_parser.add_argument("--num-prompts", type=_positive_int, default=None,
                               help="requests each benchmark sends, the next one's and SIM's simulation of each "
                                    "cap (default: as the workload's runs sent them, else vllm bench serve's "
                                    f"{DEFAULT_ONLINE_PROMPTS}; slim tune chooses the same)")
    advise_parser.add_argument("--sim-constants", type=Path, default=SIM_CONSTANTS_FILE, metavar="YAML",
                               help="the simulator's constants file, --predictor sim only (its fixed scheduler and "
                                    "memory fields are used; default: the H100 constants shipped with slim, "
                                    f"slim/sim/{SIM_CONSTANTS_FILE.name})")
    add_tune_parser(commands, _positive_int, _positive_float, _fraction, _candidates)
    check_parser = commands.add_parser(
        "check", help="say, for every run of a trace folder, whether it is usable and why not",
        description=paragraphs(
            "Ingest and clean a folder of vLLM or GuideLLM benchmark results and print a header line, then "
            "one tab-separated line per run: status (ok: usable), run (its folder under the traces), "
            "fault_file (the file at fault), model, input_len and output_len (mean tokens per request, to "
            "0.1), max_num_seqs (the run's cap; a static batch's batch size), reason; - where a value is "
            "unknown. --json prints one JSON object instead: the runs with those fields and usable, and the "
            "counts. A summary line goes to stderr.",
            f"Exit status 0 when at least one run is usable, {EXIT_BAD_INPUT} when none is or the input is bad "
            "(1 only for a bug)."), formatter_class=argparse.RawDescriptionHelpFormatter)
    check_parser.add_argument("traces", type=Path,
                              help="folder of vLLM or GuideLLM benchmark results (or one trace file: a summary "
                                   "table, an offline result)")
    check_parser.add_argument("--models-file", type=Path, default=MODELS_FILE, metavar="YAML", help=CATALOG_FILE_HELP)
    check_parser.add_argument("--table-columns", type=Path, default=None, metavar="YAML",
                              help="a summary table's column mapping (as slim advise --table-columns)")
    check_parser.add_argument("--hardware", default=None,
                              help=hardware_help("the runs ran on (a static batch's KV-cache check needs it; "
                                                 "default: each row's own label)"))
    check_parser.add_argument("--hardware-file", type=Path, default=HARDWARE_FILE, metavar="YAML",
                              help=HARDWARE_FILE_HELP)
    check_parser.add_argument("--json", action="store_true",
                              help="print one JSON object (runs, counts) instead of the lines; on bad input, one "
                                   "with status, exit_code and message")
    return parser


# --- running a command -----------------------------------------------------------------

def advice_request(args: argparse.Namespace) -> AdviceRequest:
    """``slim advise``'s parsed arguments as the request `advise` answers (the SLO in seconds)."""
    from slim.advisor.advise import AdviceRequest

    return AdviceRequest(args.traces, args.model, args.input_len, args.output_len, slos=slos_of(args),
                         epsilon=args.epsilon, tolerance=args.tolerance, hardware=args.hardware,
                         models_file=args.models_file,
                         hardware_file=args.hardware_file, candidates=args.candidates,
                         max_model_len=args.max_model_len, model_config=args.model_config,
                         quantization=args.quantization, kv_cache_dtype=args.kv_cache_dtype,
                         tensor_parallel=args.tensor_parallel_size,
                         train_models=args.train_models, exclude_runs=args.exclude_runs, predictor=args.predictor,
                         sim_constants_file=args.sim_constants, num_prompts=args.num_prompts,
                         confidence=args.confidence, table_columns=args.table_columns, plan=not args.no_plan)


def _check(args: argparse.Namespace) -> int:
    """``slim check DIR``: the cleaning report, a header line and a line per run (``--json``: one
    document, `check_json`); a summary line on stderr."""
    from slim import columns as col
    from slim.specs.architecture import load_architectures
    from slim.specs.hardware import load_hardware_with_shipped
    from slim.traces.clean import check_lines, clean_runs
    from slim.traces.usable import check_traces, trace_options

    options = trace_options(load_hardware_with_shipped(args.hardware_file), args.hardware, args.table_columns)
    _, report = clean_runs(check_traces(args.traces, load_architectures(args.models_file), options))
    code = EXIT_OK if report["kept"].any() else EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(check_json(report, args.traces, code), indent=2))
    else:
        for line in check_lines(report, header=True):
            print(line)
    counts = ", ".join(f"{status}: {count}" for status, count in report[col.STATUS].value_counts().items())
    print(f"{len(report)} runs, {int(report['kept'].sum())} usable ({counts})", file=sys.stderr)
    return code


def check_json(report, traces: Path, exit_code: int) -> dict[str, Any]:
    """`slim check --json`'s document: per run the fields of its line (`CHECK_COLUMNS`, null where
    unknown) and whether it is usable, and the counts (runs, usable, per status)."""
    from slim import columns as col
    from slim.traces.clean import check_records

    usable = int(report["kept"].sum())
    runs = [{**record, "usable": bool(kept)} for record, kept in zip(check_records(report), report["kept"])]
    return {"slim_version": __version__, "status": "ok" if usable else "no_usable_run", "exit_code": exit_code,
            "traces": str(traces), "runs": runs,
            "counts": {"runs": len(report), "usable": usable,
                       "by_status": {str(status): int(count)
                                     for status, count in report[col.STATUS].value_counts().items()}}}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m slim`` and the ``slim`` console script; returns the exit code.

    A reader that closes the output early (``slim check DIR | head -1``) ends the command quietly
    with `EXIT_BROKEN_PIPE`, as a shell reports a program that SIGPIPE stopped: stdout is flushed
    here, where that shows, and then pointed at the null device, so the interpreter's own flush at
    exit has nothing left to complain about."""
    try:
        try:
            return _command(argv)
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _advise_layouts(args: argparse.Namespace) -> int:
    """``slim advise`` across tensor-parallel sizes (`slim.advisor.layouts`)."""
    from slim.advisor.layout_report import layout_fields, layout_lines
    from slim.advisor.layouts import advise_layouts

    sizes = layout_sizes_for(args.tensor_parallel_sizes, args.tensor_parallel_size, args.gpus)
    layouts = advise_layouts(advice_request(args), sizes, args.gpus, args.request_rate)
    if args.plot is not None:
        from slim.paper.figures.frontier import save_frontier
        from slim.paper.figures.layout_frontier import advice_layout_frontier, layout_frontier_figure

        save_frontier(layout_frontier_figure(advice_layout_frontier(layouts)), args.plot)
    code = EXIT_OK if layouts.chosen is not None else EXIT_NO_FEASIBLE_CAP
    if args.json:
        print(json.dumps({"slim_version": __version__, "status": "ok" if code == EXIT_OK else "no_feasible_cap",
                          "exit_code": code, **layout_fields(layouts)}, indent=2))
    else:
        print("\n".join(layout_lines(layouts)))
    return code


def _command(argv: Sequence[str] | None) -> int:
    """Parse `argv`, run its command and map its errors to exit codes (`main`)."""
    args = build_parser().parse_args(argv)
    as_json = getattr(args, "json", False)
    try:
        if args.command == "check":
            return _check(args)
        if args.command == "tune":
            return run_tune(args)
        from slim.advisor.advise import advise
        from slim.advisor.report import render_text

        if args.tensor_parallel_sizes is not None or args.gpus is not None or args.request_rate is not None:
            return _advise_layouts(args)
        advice = advise(advice_request(args))
        if args.plot is not None:
            from slim.paper.figures.frontier import advice_frontier_figure, save_frontier

            save_frontier(advice_frontier_figure(advice), args.plot)
    except SlimError as error:
        code = EXIT_NO_FEASIBLE_CAP if isinstance(error, NoFeasibleCapError) else EXIT_BAD_INPUT
        message = " ".join(str(error).split())  # one line, whatever the message holds
        print(f"slim {args.command}: error: {message}", file=sys.stderr)
        for line in getattr(error, "lines", ()):   # NoUsableRunsError: why each run is unusable
            print(f"  {line}", file=sys.stderr)
        if as_json:
            print(json.dumps(error_json(error, code), indent=2))
        return code
    print(json.dumps(advice_json(advice), indent=2) if as_json else render_text(advice))
    return EXIT_OK
