"""``slim tune``'s arguments and run: plan the next benchmarks of one or more workloads from a trace
folder, or (``--run``) run them through a command template until every decision is settled.

    slim tune --traces DIR --hardware h100-64gb --workload facebook/opt-1.3b:512:128 --slo-ms 4000
    slim tune --traces DIR ... --run 'python bench.py --cap {max_concurrency} --out {result_file}' --budget-runs 8

`add_tune_parser` declares the arguments on `slim`'s parser, `tune_request` turns them into a
`slim.tune.plan.TuneRequest`, and `run_tune` prints the report (`slim.tune.report`)
and returns the exit code (`EXIT_OPEN`, `EXIT_INTERRUPTED`, or `slim.cli`'s).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from slim.defaults import (
    DEFAULT_CANDIDATE_CAPS,
    DEFAULT_CONFIDENCE,
    DEFAULT_EPSILON,
    DEFAULT_MARGIN,
    DEFAULT_MAX_RUNS_PER_CAP,
    DEFAULT_ONLINE_PROMPTS,
    DEFAULT_TOLERANCE,
    MODELS_FILE,
    OFFLINE,
    ONLINE,
    PREDICTOR_OPTIONS,
    SIM_CONSTANTS_FILE,
    SIM_OPTION,
    TUNE_FOLDER,
    layout_sizes_for,
)
from slim.errors import AdvisorError
from slim.specs.hardware import HARDWARE_FILE

if TYPE_CHECKING:   # the plan and the loop import pandas, SciPy and the predictors: only when they run
    from slim.specs.slo import Slos
    from slim.tune.request import TuneRequest

EXIT_INFEASIBLE = 3
"""Every decision is settled, and some workload has no cap within its SLOs (as `slim advise`'s 3)."""
EXIT_OPEN = 4
"""``slim tune --run`` stopped with a decision still open (a budget spent, the bound, or no benchmark left)."""
EXIT_INTERRUPTED = 130
"""``slim tune --run`` was interrupted (Ctrl-C): 128 + SIGINT, as a shell reports it."""

TUNE_EPILOG = """placeholders of --run (every value chosen by slim tune, none read from a trace file):
  {model} {input_len} {output_len} {max_concurrency} {batch_size} {cap} {server_max_num_seqs}
  {server_max_num_seqs_per_rank} {num_prompts} {tensor_parallel_size} {data_parallel_size}
  {expert_parallel_flag} {enable_expert_parallel} {serving_flags}
  {result_dir} {result_filename} {result_file}
  ({tensor_parallel} is the same as {tensor_parallel_size}; across layouts, start the server at both
  sizes, its --max-num-seqs at {server_max_num_seqs_per_rank} per data-parallel rank, and record them
  in the result: --metadata tensor_parallel_size={tensor_parallel_size}
  data_parallel_size={data_parallel_size} max_num_seqs={server_max_num_seqs})
The template runs without a shell; inside `sh -c '...'` the values are shell-quoted.
A recorded failure excludes its cap only while the template, the server settings and slim's
version are the same (--retry-failed: never).

example (online: one server at the largest cap, the client's --max-concurrency varies):
  slim tune --traces runs/ --hardware h100-64gb --workload facebook/opt-1.3b:512:128 --slo-ms 4000
"""


CATALOG_FILE_HELP = ("the catalog of model architectures, in place of the one shipped with slim "
                     "(slim/specs/models.yaml; format in config/README.md)")
MODELS_FILE_HELP = CATALOG_FILE_HELP + "; to add one model, --model-config"
HARDWARE_FILE_HELP = ("GPUs to add to the catalog shipped with slim (slim/specs/hardware.yaml), an entry of the "
                      "file replacing the shipped one of the same key: a YAML mapping of key -> peak_flops_per_s "
                      "(dense BF16), hbm_bandwidth_bytes_per_s, memory_bytes, gpu_memory_utilization "
                      "(format in config/README.md)")


def add_serving_arguments(parser: argparse.ArgumentParser, server: str = "the server") -> None:
    """vLLM's ``--quantization`` and ``--kv-cache-dtype``, as `server` runs them (advise and tune)."""
    parser.add_argument("--quantization", default=None, metavar="METHOD",
                        help=f"vLLM --quantization of {server}, applied to the checkpoint (fp8 on a 16-bit one); sizes "
                             "the weights and the GEMMs' peak (default: served as published)")
    parser.add_argument("--kv-cache-dtype", default=None, metavar="DTYPE",
                        help=f"vLLM --kv-cache-dtype of {server} (auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16, "
                             "float16; default auto: the checkpoint's own)")


def hardware_help(ran_on: str = "the runs ran on") -> str:
    """--hardware's help, naming the keys of the shipped catalog."""
    from slim.errors import SlimError
    from slim.specs.hardware import load_hardware

    try:
        shipped = ", ".join(load_hardware(HARDWARE_FILE))
    except SlimError:   # a broken catalog is reported when it is used, not by --help
        shipped = "?"
    return f"key of the GPU {ran_on}: one of the shipped catalog ({shipped}) or of --hardware-file"


SLO_HELP = ("an SLO in vLLM's names, NAME=MILLISECONDS or NAME=Kx (K times its value at --slo-reference-cap), "
            "repeatable, all must hold: p99_tpot_ms=50, mean_ttft_ms=500, p90_e2el_ms=8000, p99_itl_ms=2x; "
            "mean_in_batch_e2e_ms is the paper's in-batch E2E")


def paragraphs(*texts: str, width: int = 79) -> str:
    """A help description of several paragraphs, each filled to `width` (the description formatter
    keeps line breaks as written)."""
    import textwrap

    return "\n\n".join(textwrap.fill(text, width) for text in texts)


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not (value >= 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def tolerance_fraction(text: str) -> float:
    """A tolerance: a share in [0, 1) (0: settled only when nothing can beat the choice at all)."""
    value = non_negative_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1), got {text}")
    return value


def add_slo_arguments(parser: argparse.ArgumentParser, positive_float: Callable, positive_int: Callable) -> None:
    """The objectives `slim advise` and `slim tune` share (`slim.specs.slo.Slos.of`)."""
    parser.add_argument("--slo", action="append", default=[], metavar="NAME=VALUE", help=SLO_HELP)
    parser.add_argument("--slo-ms", type=positive_float, default=None,
                        help="the paper's in-batch E2E SLO in milliseconds (--slo mean_in_batch_e2e_ms=VALUE)")
    parser.add_argument("--slo-relative", type=positive_float, default=None, metavar="K",
                        help="in-batch E2E at most K x its value at --slo-reference-cap "
                             "(--slo mean_in_batch_e2e_ms=Kx)")
    parser.add_argument("--goodput", nargs="+", default=None, metavar="KEY:MS",
                        help="choose the cap of highest goodput, in vLLM's syntax: ttft:2000 tpot:50 e2el:8000 (a "
                             "request is good when it meets every bound; needs per-request latencies)")
    parser.add_argument("--slo-reference-cap", type=positive_int, default=1,
                        help="the cap relative SLOs refer to (default 1)")


def slos_of(args: argparse.Namespace) -> Slos:
    """The objectives of a parsed command line."""
    from slim.specs.slo import Slos

    return Slos.of(args.slo, args.slo_ms, args.slo_relative, args.goodput, float(args.slo_reference_cap))


def add_tune_parser(commands: argparse._SubParsersAction, positive_int: Callable,
                    positive_float: Callable, fraction: Callable, candidates: Callable) -> None:
    tune = commands.add_parser(
        "tune", help="measure only what the --max-num-seqs decision needs: the next benchmarks, or run them",
        description=paragraphs(
            "Decide vLLM's --max-num-seqs for each workload (--workload MODEL:IL:OL) as slim advise does (the cap "
            "of highest throughput, with --goodput of highest goodput, within every SLO, stated in vLLM's metric "
            "names, and the efficiency floor; BCA, Eq. 13), measuring only what the decision needs. What no run "
            "measured is predicted by SIM (default) or SLIM from the accelerator's catalog entry, corrected by "
            "every measured run, with calibrated intervals; a metric the prior does not predict is measured.",
            "A decision is settled when its cap was measured within every SLO and no other cap can beat it by more "
            "than --tolerance at --confidence: then the vllm serve command with its memory flags is printed. "
            "Otherwise the next benchmarks, the most useful per predicted GPU-second, are printed as exact vllm "
            "serve and vllm bench command lines, spending at most (1 + --margin) x a bisection's GPU time; with "
            "--run, each is run through the template and read back, until every decision is settled, the bound "
            "is reached or a budget is spent."),
        epilog=TUNE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    tune.add_argument("--traces", required=True, type=Path,
                      help="folder (or summary table) of benchmark results measured so far, any layout `slim check` "
                           "reads; with --run, one that does not exist yet means starting from no runs")
    tune.add_argument("--results", type=Path, default=None, metavar="DIR",
                      help="where new results and the attempts ledger go, read with the traces (default: "
                           f"{TUNE_FOLDER}/ inside --traces, or beside it when --traces is a table file)")
    tune.add_argument("--workload", action="append", default=[], metavar="MODEL:IL:OL",
                      help="a workload: the model as vLLM serves it (Hugging Face id or catalog name), prompt and "
                           "output tokens (repeatable)")
    tune.add_argument("--model", help="one workload's model (with --input-len and --output-len; --model-config "
                                      "alone names it too)")
    tune.add_argument("--model-config", type=Path, metavar="CONFIG_JSON",
                      help="Hugging Face config.json describing a workload's model the models file lacks (as slim "
                           "advise --model-config), named --model if given, else served as its folder where it holds "
                           "weights, else by the Hugging Face id its _name_or_path records; runs of it "
                           "become usable too")
    tune.add_argument("--input-len", type=positive_int, help="prompt tokens per request")
    tune.add_argument("--output-len", type=positive_int, help="generated tokens per request")
    add_slo_arguments(tune, positive_float, positive_int)
    tune.add_argument("--hardware", required=True, help=hardware_help("the benchmarks run on"))
    tune.add_argument("--mode", choices=(ONLINE, OFFLINE), default=ONLINE,
                      help="online: vllm bench serve (default); offline: vllm bench latency static batches")
    tune.add_argument("--predictor", choices=PREDICTOR_OPTIONS, default=SIM_OPTION,
                      help="the prior the measurements correct: sim (the simulator, default) or slim")
    tune.add_argument("--candidates", type=candidates, default=DEFAULT_CANDIDATE_CAPS,
                      help="comma-separated candidate caps (default 1,2,4,...,512; cap 1 is always added)")
    tune.add_argument("--epsilon", type=fraction, default=DEFAULT_EPSILON, help="batching-efficiency floor")
    tune.add_argument("--max-runs-per-cap", type=positive_int, default=DEFAULT_MAX_RUNS_PER_CAP, metavar="N",
                      help="a measured E2E within the run-to-run scatter of the SLO, where its side decides, is run "
                           f"again up to N runs of that cap (default {DEFAULT_MAX_RUNS_PER_CAP}; 1: never)")
    tune.add_argument("--tolerance", type=tolerance_fraction, default=DEFAULT_TOLERANCE,
                      help="settled when no cap can beat the choice by more than this share of throughput "
                           f"(default {DEFAULT_TOLERANCE:g})")
    tune.add_argument("--margin", type=non_negative_float, default=DEFAULT_MARGIN, metavar="M",
                      help="spend at most (1 + M) x the GPU time of a plain bisection over the candidates on each "
                           f"workload, whatever the prior (default {DEFAULT_MARGIN:g}; docs/tuning.md)")
    tune.add_argument("--confidence", type=fraction, default=DEFAULT_CONFIDENCE,
                      help=f"confidence of each bound the certificate uses (default {DEFAULT_CONFIDENCE:g})")
    tune.add_argument("--num-prompts", type=positive_int, default=None,
                      help=f"requests per online benchmark, at least 2 per concurrency slot (default: as the "
                           f"workload's measured runs sent them, else vllm bench serve's {DEFAULT_ONLINE_PROMPTS}; "
                           "slim advise chooses the same)")
    tune.add_argument("--tensor-parallel-size", "--tensor-parallel", dest="tensor_parallel", type=positive_int,
                      default=None, help="GPUs per model (default 1; with --gpus or --request-rate and neither size "
                                         "option, tensor-parallel sizes 1, 2, 4, 8 are compared)")
    tune.add_argument("--tensor-parallel-sizes", type=candidates, default=None, metavar="T1,T2,...",
                      help="decide the layout too: tune each tensor-parallel size's cap and choose the most tokens/s "
                           "per GPU (docs/tuning.md, 'Tuning across layouts'; default with --gpus N or --request-rate "
                           "and no --tensor-parallel-size: 1,2,4,8 up to N)")
    tune.add_argument("--data-parallel-sizes", type=candidates, default=None, metavar="D1,D2,...",
                      help="decide across data-parallel layouts too (vLLM's --data-parallel-size): each "
                           "tensor-parallel size at each of these; a cap is the server's requests in flight "
                           "(default across layouts: 1 and every size the workload's runs record)")
    tune.add_argument("--gpus", type=positive_int, default=None, metavar="N",
                      help="GPUs available: a layout whose server needs more (TP x DP) is excluded; the deployment "
                           "is N / (TP x DP) replicas (with --request-rate, those the rate needs)")
    tune.add_argument("--request-rate", type=positive_float, default=None, metavar="R",
                      help="requests per second to serve: the replicas and GPUs the chosen layout needs "
                           "(independent replicas behind a load balancer)")
    tune.add_argument("--next", type=positive_int, default=3, metavar="N",
                      help="how many next benchmarks to print, one per open workload (default 3)")
    tune.add_argument("--run", metavar="TEMPLATE", help="run each proposed benchmark through this command template")
    tune.add_argument("--budget-runs", type=positive_int, default=None, help="with --run: at most this many runs")
    tune.add_argument("--budget-gpu-hours", type=positive_float, default=None,
                      help="with --run: stop once this many GPU-hours are spent")
    tune.add_argument("--timeout-s", type=positive_float, default=None, help="with --run: per-run time limit")
    tune.add_argument("--retry-failed", action="store_true",
                      help="ignore every recorded failed attempt: its cap may be proposed (and, with --run, run) again")
    tune.add_argument("--models-file", type=Path, default=MODELS_FILE, metavar="YAML", help=MODELS_FILE_HELP)
    tune.add_argument("--hardware-file", type=Path, default=HARDWARE_FILE, metavar="YAML", help=HARDWARE_FILE_HELP)
    add_serving_arguments(tune, "the servers (the commands printed pass it)")
    tune.add_argument("--sim-constants", type=Path, default=SIM_CONSTANTS_FILE, metavar="YAML",
                      help="the simulator's constants file, for the SIM prior (as slim advise --sim-constants)")
    tune.add_argument("--table-columns", type=Path, default=None, metavar="YAML",
                      help="a summary table's column mapping (as slim advise --table-columns)")
    tune.add_argument("--json", action="store_true", help="print one JSON object instead of the report")


def tune_request(args: argparse.Namespace) -> TuneRequest:
    from slim.tune.request import TuneRequest, WorkloadSpec

    specs = [WorkloadSpec.parse(text) for text in args.workload]
    model = args.model
    if model is None and args.model_config is not None and (args.input_len is not None or args.output_len is not None):
        from slim.specs.hf_config import served_model_of_config

        model = served_model_of_config(args.model_config)     # the workload is the described model
    if model is not None or args.input_len is not None or args.output_len is not None:
        if model is None or args.input_len is None or args.output_len is None:
            raise AdvisorError("--model (or --model-config), --input-len and --output-len go together")
        specs.append(WorkloadSpec(model, args.input_len, args.output_len))
    if args.run is None and (args.budget_runs is not None or args.budget_gpu_hours is not None):
        raise AdvisorError("--budget-runs and --budget-gpu-hours limit the loop: give --run too")
    return TuneRequest(args.traces, tuple(specs), args.hardware, slos_of(args), mode=args.mode,
                       predictor=args.predictor,
                       candidates=args.candidates, epsilon=args.epsilon, tolerance=args.tolerance,
                       max_runs_per_cap=args.max_runs_per_cap,
                       confidence=args.confidence, num_prompts=args.num_prompts,
                       tensor_parallel=args.tensor_parallel or 1, tensor_parallel_sizes=layout_sizes_of(args),
                       data_parallel_sizes=tuple(args.data_parallel_sizes or ()), gpus=args.gpus,
                       request_rate=args.request_rate,
                       models_file=args.models_file, hardware_file=args.hardware_file,
                       sim_constants_file=args.sim_constants, table_columns=args.table_columns,
                       results=args.results, model_config=args.model_config, model_config_name=args.model,
                       quantization=args.quantization, kv_cache_dtype=args.kv_cache_dtype,
                       margin=args.margin, retry_failed=args.retry_failed)


def layout_sizes_of(args: argparse.Namespace) -> tuple[int, ...]:
    """The tensor-parallel sizes to decide across: ``--tensor-parallel-sizes``; with ``--gpus`` or
    ``--request-rate`` (a deployment to size) and no ``--data-parallel-sizes``, ``--tensor-parallel-size``
    alone, else every default size up to the GPUs (`layout_sizes_for`, as slim advise compares them);
    otherwise none (the cap alone, or each data-parallel size, at ``--tensor-parallel-size``)."""
    sizing = args.gpus is not None or args.request_rate is not None
    if not args.tensor_parallel_sizes and (args.data_parallel_sizes or not sizing):
        return ()       # the cap alone, or --data-parallel-sizes at --tensor-parallel-size
    return layout_sizes_for(args.tensor_parallel_sizes, args.tensor_parallel, args.gpus)


def run_tune(args: argparse.Namespace) -> int:
    """``slim tune``: the plan, or the loop; 0 when printed (and, with --run, settled), `EXIT_INFEASIBLE`
    when every decision is settled and some workload has no cap within its SLOs, `EXIT_OPEN` when the
    loop stopped with a decision open, `EXIT_INTERRUPTED` on Ctrl-C with --run (one line on stderr;
    the run in progress is stopped and logged as interrupted).

    Raises `AdvisorError` for bad input, e.g. a --traces that does not exist without --run, and
    `NoFeasibleCapError` (exit 3) where no layout asked for can run (`slim.tune.plan.layout_exclusion`)."""
    if not args.traces.exists() and args.run is None:
        raise AdvisorError(f"--traces '{args.traces}' does not exist; name a folder or summary table of benchmark "
                           "results (with --run, a new folder to start from no runs)")
    if args.run is None:
        return _plan_or_loop(args)
    try:
        return _plan_or_loop(args)
    except KeyboardInterrupt:
        print("slim tune: interrupted; the run in progress was stopped and logged as interrupted in the results "
              "folder's attempts.jsonl; run the same command again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED


def _plan_or_loop(args: argparse.Namespace) -> int:
    """The plan (trusted failures marked), with --run the loop, then the report; the exit code."""
    from slim.specs.hf_config import folder_without_weights
    from slim.tune.commands import served_model
    from slim.tune.models import no_prior_line
    from slim.tune.plan import build_plan
    from slim.tune.proposals import propose, select_proposals
    from slim.tune.report import tune_json, tune_text
    from slim.tune.runner import failure_reason, mark_failed_attempts, run_tuning_loop

    plan = build_plan(tune_request(args))
    for model, why in plan.no_prior.items():
        print(f"slim tune: {no_prior_line(model, why)}", file=sys.stderr)
    for served in sorted({served_model(plan, label) for label in plan.specs}):
        unloadable = folder_without_weights(served)
        if unloadable is not None:
            print(f"slim tune: {unloadable}", file=sys.stderr)
    retried = mark_failed_attempts(plan, args.run, args.retry_failed)
    stopped, runs_done = None, 0
    if args.run is not None:
        for attempt in retried:
            why = "--retry-failed" if args.retry_failed else "it ran under another template, settings or slim version"
            print(f"slim tune: {attempt.workload} cap {attempt.max_num_seqs:g} gave no usable run before "
                  f"({failure_reason(attempt)}); it may run again: {why}", file=sys.stderr)

        def progress(proposal, attempt) -> None:
            state = "usable" if attempt.usable else f"no usable run ({attempt.reason})"
            print(f"slim tune: ran {proposal.workload} cap {proposal.max_num_seqs:g}: {state}; "
                  f"{plan.request.results_folder / attempt.folder}", file=sys.stderr)

        budget_s = None if args.budget_gpu_hours is None else args.budget_gpu_hours * 3600.0
        steps, stopped = run_tuning_loop(plan, args.run, args.budget_runs, budget_s, args.timeout_s, progress)
        runs_done = len(steps)
    proposals = select_proposals(propose(plan.session), args.next)
    code = tune_exit_code(plan, ran=args.run is not None)
    print(json.dumps(tune_json(plan, proposals, stopped, runs_done, code), indent=2) if args.json
          else tune_text(plan, proposals, stopped, runs_done), end="" if not args.json else "\n")
    return code


def tune_exit_code(plan, ran: bool) -> int:
    """`EXIT_INFEASIBLE` when every decision is settled and some workload (across layouts: every
    layout of a curve) has no cap within its SLOs or no layout that can run, `EXIT_OPEN` when the loop
    ran and stopped with a decision open, else 0."""
    from slim.tune.layouts import all_settled, layout_decisions

    alone = [plan.session.certificate(w) for w in plan.workloads if w.tensor_parallel is None]
    settled = all_settled(plan.session)
    decisions = layout_decisions(plan.session)
    # A curve every layout of which was excluded (more GPUs than given, no fit per rank) has no decision.
    unrunnable = [curve for curve in plan.layout_exclusions if curve not in decisions]
    feasible = (all(c.feasible for c in alone) and not unrunnable
                and all(d.chosen is not None for d in decisions.values()))
    if settled and not feasible:
        return EXIT_INFEASIBLE
    return 0 if not ran or settled else EXIT_OPEN
