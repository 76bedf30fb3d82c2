"""The `slim` command: fit SLIM (or calibrate the simulator, SIM) on a folder of vLLM traces and
advise a batch cap, or check the folder.

    python -m slim advise --traces DIR --model opt-1.3b --input-len 242 --output-len 520 \
        --slo-ms 8000 --epsilon 0.1 [--predictor sim]
    python -m slim check DIR

``advise --predictor slim`` (the default) evaluates SLIM at the running batch a cap allows;
``--predictor sim`` simulates every candidate cap with the simulator calibrated on the
traces (slower: each usable run and each candidate is simulated once) and refuses caps whose
simulated run preempts. On the public traces' leave-one-curve-out study SIM-BCA picked the
full-profile cap on 11 of 12 curves and SLIM-BCA on 10 (README), too close to change the
default, which needs no simulation.

Every failure the user can cause (bad arguments, missing or unusable traces, an
unknown model, constraints no batch cap meets) ends with one line on stderr naming
the problem and a non-zero exit status (2 for argument errors, 1 otherwise); when a folder
holds runs but none is usable, that line is followed by `slim check`'s line for every run.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.bca import DEFAULT_CANDIDATE_BATCH_SIZES, DEFAULT_EPSILON, BcaResult, bca_from_predictor
from slim.advisor.sim_bca import SimCurve, sim_bca
from slim.advisor.slim_bca import kv_capacity_sequences, slim_curve_predictor
from slim.errors import AdvisorError, NoUsableRunsError, SlimError, TraceFormatError
from slim.gpu.kv_memory import KvMemoryPlan, default_kv_reservation_bytes, plan_kv_memory
from slim.gpu.roofline import KneeRecommendation, recommend_knee
from slim.model.fit import SlimFit, fit_slim
from slim.sim.constants import load_sim_constants
from slim.sim.schedule_fit import SimCalibration, calibrate_on_rows
from slim.sim.schedules import DEFAULT_NUM_PROMPTS, ScheduleKey, keys_of_frame, simulate_schedules
from slim.specs.architecture import Architecture, load_architectures
from slim.specs.hardware import GIB, Hardware, load_hardware
from slim.traces.clean import check_lines, clean_runs
from slim.traces.ingest import ingest_traces

DEFAULT_HARDWARE = "h100-64gb"
PREDICTORS = ("slim", "sim")
DEFAULT_SIM_CONSTANTS = "config/hardware/h100-64gb-sim.yaml"


@dataclass(frozen=True)
class Advice:
    """What `advise` found: the SLIM fit (or SIM's calibration), the BCA decision, its memory
    plan and the knee's range; `refused_caps` are candidates SIM refused (simulated preemption)."""

    model: str
    input_len: float
    output_len: float
    n_runs: int
    fit: SlimFit | SimCalibration
    decision: BcaResult
    kv_capacity_sequences: float
    kv_capacity_source: str
    memory: KvMemoryPlan
    max_model_len: int
    knee: KneeRecommendation
    predictor: str = "slim"
    refused_caps: tuple[float, ...] = ()


def check_traces(traces: Path, catalog) -> pd.DataFrame:
    """The cleaning report of every run under `traces` (ingest, then the default cleaning policy)."""
    if not traces.is_dir():
        problem = "is a file, not a folder" if traces.is_file() else "does not exist"
        raise TraceFormatError(f"trace directory '{traces}' {problem}")
    runs = ingest_traces(traces, dataset=traces.name, catalog=catalog)
    if runs.empty:
        raise TraceFormatError(f"no vLLM benchmark runs found under '{traces}'")
    return runs


def _usable_runs(traces: Path, catalog) -> pd.DataFrame:
    runs = check_traces(traces, catalog)
    usable, report = clean_runs(runs)
    usable = usable[usable[col.MODEL].map(lambda name: name in catalog)]
    if usable.empty:
        statuses = ", ".join(f"{status}: {count}" for status, count in report[col.STATUS].value_counts().items())
        raise NoUsableRunsError(f"no usable runs of a known model under '{traces}' ({len(runs)} runs; {statuses})",
                                tuple(check_lines(report)))
    return usable.reset_index(drop=True)


def _kv_capacity_tokens(runs: pd.DataFrame, arch: Architecture, hw: Hardware) -> tuple[float, str]:
    """KV capacity from the traces' server logs when they hold this model, else vLLM's default formula."""
    of_model = runs[(runs[col.MODEL] == arch.name) & runs[col.KV_CAPACITY_TOKENS].notna()]
    if not of_model.empty:
        return float(of_model[col.KV_CAPACITY_TOKENS].max()), "traces"
    return default_kv_reservation_bytes(arch, hw) / arch.kv_bytes_per_token(), "default reservation"


def advise(traces: str | Path, model: str, input_len: float, output_len: float, slo_s: float,
           epsilon: float = DEFAULT_EPSILON, hardware: str = DEFAULT_HARDWARE,
           models_file: str | Path = "config/models.yaml", hardware_file: str | Path = "config/hardware.yaml",
           candidates: Sequence[float] = DEFAULT_CANDIDATE_BATCH_SIZES,
           max_model_len: int | None = None, predictor: str = "slim",
           sim_constants_file: str | Path = DEFAULT_SIM_CONSTANTS,
           num_prompts: int = DEFAULT_NUM_PROMPTS) -> Advice:
    """Fit SLIM on every usable run under `traces` and run SLIM-BCA (Eq. 13) for one workload,
    or with ``predictor="sim"`` calibrate the simulator on them and run SIM-BCA.

    SLIM is evaluated at the running batch ``min(cap, KV capacity in sequences)``
    (see `slim.paper.advisor_study`). SIM simulates each candidate cap (``num_prompts``
    requests at once, the fixed constants of `sim_constants_file`) and refuses those that
    preempt or exceed vLLM's token budget. Raises a `SlimError` subclass on any unusable input
    and `AdvisorError` when no candidate cap meets the SLO and the efficiency floor.
    """
    if predictor not in PREDICTORS:
        raise AdvisorError(f"unknown predictor '{predictor}'; choose one of {', '.join(PREDICTORS)}")
    catalog = load_architectures(models_file)
    hardware_catalog = load_hardware(hardware_file)
    if hardware not in hardware_catalog:
        raise AdvisorError(f"unknown hardware '{hardware}' in {hardware_file}; known: {', '.join(hardware_catalog)}")
    hw = hardware_catalog[hardware]
    arch = catalog[model]
    runs = _usable_runs(Path(traces), catalog)
    capacity_tokens, capacity_source = _kv_capacity_tokens(runs, arch, hw)
    capacity = kv_capacity_sequences(capacity_tokens, input_len, output_len)
    if capacity < 1:
        raise AdvisorError(f"one sequence of {input_len:g} + {output_len:g} tokens does not fit the KV cache "
                           f"({capacity_tokens:.0f} tokens) of {arch.name} on {hw.name}")
    refused: tuple[float, ...] = ()
    if predictor == "sim":
        fit, decision, refused = _sim_advice(runs, catalog, hw, arch.name, input_len, output_len, slo_s, epsilon,
                                             candidates, sim_constants_file, num_prompts, str(traces))
    else:
        fit = fit_slim(runs, catalog, hw, split_name=f"all usable runs under {traces}", sample_valley=False)
        predict = slim_curve_predictor(arch, hw, fit.params, input_len, output_len, capacity)
        decision = bca_from_predictor(predict, candidate_batch_sizes=candidates, epsilon=epsilon, slo_s=slo_s)
    if not decision.feasible:
        raise AdvisorError(f"no batch cap meets the constraints: {decision.reason}")
    of_model = runs[(runs[col.MODEL] == arch.name) & runs[col.NUM_GPU_BLOCKS].notna()]
    max_model_len = int(np.ceil(input_len + output_len)) if max_model_len is None else int(max_model_len)
    memory = plan_kv_memory(
        arch, hw, decision.batch_cap, input_len, output_len,
        num_gpu_blocks=int(of_model[col.NUM_GPU_BLOCKS].max()) if not of_model.empty else None,
        max_model_len=max_model_len)
    return Advice(model=arch.name, input_len=float(input_len), output_len=float(output_len), n_runs=len(runs),
                  fit=fit, decision=decision, kv_capacity_sequences=capacity,
                  kv_capacity_source=capacity_source, memory=memory, max_model_len=max_model_len,
                  knee=recommend_knee(arch, hw, input_len + output_len), predictor=predictor, refused_caps=refused)


def _sim_advice(runs: pd.DataFrame, catalog, hw: Hardware, model: str, input_len: float, output_len: float,
                slo_s: float, epsilon: float, candidates: Sequence[float], sim_constants_file: str | Path,
                num_prompts: int, traces: str) -> tuple[SimCalibration, BcaResult, tuple[float, ...]]:
    """SIM calibrated on `runs`, SIM-BCA over the candidates (cap 1 is simulated too, for T(1))."""
    constants = load_sim_constants(sim_constants_file)
    budget = constants.max_num_batched_tokens
    caps = sorted({int(cap) for cap in candidates} | {1})
    workload = [ScheduleKey(model, int(round(input_len)), int(round(output_len)), cap, num_prompts)
                for cap in caps if cap <= budget]
    workers = min(4, os.cpu_count() or 1)
    schedules = simulate_schedules([*keys_of_frame(runs), *workload], catalog, hw, constants, workers=workers)
    calibration = calibrate_on_rows(runs, schedules, catalog, hw, split_name=f"all usable runs under {traces}",
                                    sample_valley=False)
    curve = SimCurve.from_schedules([schedules.get(key) for key in workload], catalog, hw, constants,
                                    calibration.constants)
    refused = tuple(float(cap) for cap in candidates if cap > budget) + tuple(
        float(cap) for cap, no in zip(curve.max_num_seqs, curve.refused) if no and cap in candidates)
    return calibration, sim_bca(curve, slo_s, epsilon, np.asarray(candidates, dtype=float)), refused


def format_advice(advice: Advice) -> str:
    """The human-readable report `slim advise` prints."""
    d, m, k = advice.decision, advice.memory, advice.knee
    constraint = ("the throughput peak is admissible" if not d.binding
                  else "limited by " + " and ".join({"slo": "the SLO", "efficiency": "the efficiency floor"}[b]
                                                    for b in d.binding))
    fitted = ("SLIM fitted" if advice.predictor == "slim"
              else "SIM (the simulator) calibrated, every candidate cap simulated,")
    lines = [
        f"{fitted} on {advice.fit.n_train_points} runs ({advice.n_runs} usable): "
        f"train MAPE {advice.fit.train_mape_throughput_pct:.1f}% (throughput)",
        f"Workload: {advice.model}, IL {advice.input_len:g}, OL {advice.output_len:g}; "
        f"SLO {d.slo_s * 1e3:.0f} ms E2E, epsilon {d.epsilon:g}",
        "",
        f"Recommended --max-num-seqs {int(d.batch_cap)} ({constraint})",
        f"  predicted throughput   {d.throughput_per_s:,.0f} tokens/s",
        f"  predicted E2E latency  {d.e2e_latency_s * 1e3:,.0f} ms",
        f"  batching efficiency    {d.batching_efficiency:.2f} (T(B) / (B T(1)))",
        f"  KV capacity            {advice.kv_capacity_sequences:,.0f} sequences ({advice.kv_capacity_source})",
        "",
        f"KV memory for {m.batch_cap} sequences: {m.kv_bytes_needed / GIB:.2f} GiB "
        f"of vLLM's default {m.kv_reservation_bytes / GIB:.2f} GiB reservation "
        f"({m.memory_saved_bytes / GIB:.2f} GiB freed)",
        f"  --gpu-memory-utilization {m.gpu_memory_utilization_needed:.3f}"
        f"   (weights {m.weight_bytes / GIB:.2f} GiB + KV + {m.activation_overhead_bytes / GIB:.2f} GiB overhead)",
        f"  --num-gpu-blocks-override {m.num_gpu_blocks_override}   (with --max-model-len {advice.max_model_len})",
        "",
        f"Knee advisor (roofline, ctx {k.ctx_len:g}): B_knee {k.b_knee:.1f}, "
        f"--max-num-seqs in [{k.low:.0f}, {k.high:.0f}], suggests {k.suggested_max_num_seqs}",
    ]
    if advice.refused_caps:
        lines.insert(8, "  SIM refused --max-num-seqs " + ", ".join(f"{cap:g}" for cap in advice.refused_caps)
                     + " (simulated preemption: KV demand overflows, or above the token budget)")
    if m.memory_saved_bytes < 0:
        lines.append("Warning: the cap needs more KV than the default reservation holds; vLLM will queue requests.")
    return "\n".join(lines)


# --- argument parsing ------------------------------------------------------------------

def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not (np.isfinite(value) and value > 0):
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


class _OneLineErrorParser(argparse.ArgumentParser):
    """argparse, but an argument error is one line on stderr (no usage block), exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineErrorParser(prog="slim", description="SLIM: performance model and batching advisor for vLLM.")
    commands = parser.add_subparsers(dest="command", required=True)
    advise_parser = commands.add_parser(
        "advise", help="fit SLIM on traces and recommend --max-num-seqs for a workload",
        description="Fit SLIM on every usable run of a trace folder, then choose the batch cap with the "
                    "highest predicted throughput that meets the E2E SLO and the batching-efficiency floor "
                    "(BCA, Eq. 13), and the vLLM memory flags that reserve only the KV cache it needs.")
    advise_parser.add_argument("--traces", required=True, type=Path, help="folder of vLLM benchmark runs")
    advise_parser.add_argument("--model", required=True, help="model name or alias from the models file")
    advise_parser.add_argument("--input-len", required=True, type=_positive_int, help="prompt tokens per request")
    advise_parser.add_argument("--output-len", required=True, type=_positive_int, help="generated tokens per request")
    advise_parser.add_argument("--slo-ms", required=True, type=_positive_float, help="E2E latency SLO in milliseconds")
    advise_parser.add_argument("--epsilon", type=_fraction, default=DEFAULT_EPSILON,
                               help=f"batching-efficiency floor, in (0, 1) (default {DEFAULT_EPSILON})")
    advise_parser.add_argument("--hardware", default=DEFAULT_HARDWARE,
                               help=f"GPU name from the hardware file (default {DEFAULT_HARDWARE})")
    advise_parser.add_argument("--models-file", type=Path, default=Path("config/models.yaml"))
    advise_parser.add_argument("--hardware-file", type=Path, default=Path("config/hardware.yaml"))
    advise_parser.add_argument("--candidates", type=_candidates, default=DEFAULT_CANDIDATE_BATCH_SIZES,
                               help="comma-separated candidate --max-num-seqs values (default 1,2,4,...,512)")
    advise_parser.add_argument("--max-model-len", type=_positive_int, default=None,
                               help="vLLM --max-model-len the server will use (default IL + OL)")
    advise_parser.add_argument("--predictor", choices=PREDICTORS, default="slim",
                               help="slim: SLIM at the running batch a cap allows (default); sim: the calibrated "
                                    "simulator, which simulates each cap and refuses those that preempt (slower)")
    advise_parser.add_argument("--num-prompts", type=_positive_int, default=DEFAULT_NUM_PROMPTS,
                               help=f"requests sent at once per simulated cap, --predictor sim only "
                                    f"(default {DEFAULT_NUM_PROMPTS}, as the public traces)")
    advise_parser.add_argument("--sim-constants", type=Path, default=Path(DEFAULT_SIM_CONSTANTS),
                               help="the simulator's constants file, --predictor sim only (its fixed scheduler and "
                                    f"memory fields are used; default {DEFAULT_SIM_CONSTANTS})")
    check_parser = commands.add_parser(
        "check", help="say, for every run of a trace folder, whether it is usable and why not",
        description="Ingest and clean a folder of vLLM or GuideLLM benchmark results and print one "
                    "tab-separated line per run: status, run, file at fault (- if none), reason. "
                    "Exit status 0 when at least one run is usable, 1 otherwise.")
    check_parser.add_argument("traces", type=Path, help="folder of vLLM benchmark runs")
    check_parser.add_argument("--models-file", type=Path, default=Path("config/models.yaml"),
                              help="model catalog (default config/models.yaml)")
    return parser


def _check(args: argparse.Namespace) -> int:
    """``slim check DIR``: the cleaning report, a line per run; a summary line on stderr."""
    _, report = clean_runs(check_traces(args.traces, load_architectures(args.models_file)))
    for line in check_lines(report):
        print(line)
    counts = ", ".join(f"{status}: {count}" for status, count in report[col.STATUS].value_counts().items())
    print(f"{len(report)} runs, {int(report['kept'].sum())} usable ({counts})", file=sys.stderr)
    return 0 if report["kept"].any() else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m slim`` and the ``slim`` console script."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "check":
            return _check(args)
        advice = advise(args.traces, args.model, args.input_len, args.output_len, args.slo_ms / 1e3,
                        epsilon=args.epsilon, hardware=args.hardware, models_file=args.models_file,
                        hardware_file=args.hardware_file, candidates=args.candidates,
                        max_model_len=args.max_model_len, predictor=args.predictor,
                        sim_constants_file=args.sim_constants, num_prompts=args.num_prompts)
    except SlimError as error:
        message = " ".join(str(error).split())  # one line, whatever the message holds
        print(f"slim {args.command}: error: {message}", file=sys.stderr)
        for line in getattr(error, "lines", ()):   # NoUsableRunsError: why each run is unusable
            print(f"  {line}", file=sys.stderr)
        return 1
    print(format_advice(advice))
    return 0
