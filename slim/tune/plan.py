"""`slim tune` on a folder of benchmark results: the request, the session it builds from the usable
runs measured so far, and the exact benchmark command lines of the next measurements.

Online (``vllm bench serve``), every candidate cap is a client ``--max-concurrency`` against one
server started with ``--max-num-seqs`` at the largest candidate, so no restart is needed; the
result records the server's cap in ``--metadata`` and ingest reads the run's cap as the smaller of
the two (`slim.traces.ingest`). The client's concurrency is what caps the running batch, and it is
also what makes TTFT and E2EL measurable (`slim.specs.slo`): the client never sends more than the
cap, so nothing queues behind a full batch. Offline, a cap is the batch of ``vllm bench latency``.
Each result is written into its own folder under ``<traces>/slim-tune/``, named by the tool, where
the next `slim tune` (or the loop) ingests it with every other run; repeated runs of one cap are all
kept and combined. The command to serve a settled decision (`serve_command`) carries the chosen cap
and the memory flags that reserve only its KV cache (`slim.gpu.kv_memory`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.bca import DEFAULT_CANDIDATE_BATCH_SIZES, DEFAULT_EPSILON
from slim.advisor.decision import DEFAULT_TOLERANCE
from slim.advisor.training_runs import SkippedRun, trace_options
from slim.defaults import DEFAULT_ONLINE_PROMPTS, OFFLINE, ONLINE, TUNE_FOLDER
from slim.errors import AdvisorError
from slim.gpu.kv_memory import KvMemoryPlan, plan_kv_memory
from slim.predictors import tune_predictors
from slim.sim.client_latency import keeping_client_latencies
from slim.sim.constants import SIM_CONSTANTS_FILE
from slim.specs.architecture import MODELS_FILE, ArchitectureCatalog, load_architectures
from slim.specs.hardware import HARDWARE_FILE, Hardware, load_hardware_with_shipped, unknown_hardware_message
from slim.specs.hf_config import architecture_from_hf_config
from slim.specs.slo import Slos, judging_runs, why_not_judged
from slim.traces.clean import CleaningPolicy, clean_runs
from slim.traces.ingest import ingest_traces
from slim.tune.belief import CONFIG_COLUMNS, prior_prediction, roofline_gpu_seconds, tune_prior
from slim.tune.guard import DEFAULT_MARGIN
from slim.tune.kernel import load_kernels
from slim.tune.session import (
    DEFAULT_CONFIDENCE,
    DEFAULT_MAX_RUNS_PER_CAP,
    DEFAULT_SCATTER,
    WORKLOAD,
    Measurement,
    Proposal,
    TuneSession,
    TuneSettings,
    Workload,
    curve_label,
)

NOMINAL_MATCH = 0.02
"""A measured run belongs to a workload whose IL and OL are within 2 % of its nominal lengths."""


@dataclass(frozen=True)
class WorkloadSpec:
    """A workload as the user names it: the model as vLLM serves it (a Hugging Face id or a name
    of the models file), prompt and output tokens."""

    model: str
    input_len: int
    output_len: int

    @classmethod
    def parse(cls, text: str) -> "WorkloadSpec":
        """``MODEL:IL:OL`` (the model may itself contain ``/``)."""
        parts = text.rsplit(":", 2)
        if len(parts) != 3 or not parts[0]:
            raise AdvisorError(f"workload '{text}': expected MODEL:INPUT_LEN:OUTPUT_LEN, "
                               "e.g. facebook/opt-1.3b:512:128")
        try:
            il, ol = int(parts[1]), int(parts[2])
        except ValueError as error:
            raise AdvisorError(f"workload '{text}': input and output lengths must be whole numbers") from error
        if il < 1 or ol < 1:
            raise AdvisorError(f"workload '{text}': input and output lengths must be >= 1")
        return cls(parts[0], il, ol)


@dataclass(frozen=True)
class TuneRequest:
    """One `slim tune` call: the traces, the workloads, the accelerator, the SLOs (`slim.specs.slo`:
    relative ones against each workload's measured cap `Slos.reference_cap`, measured first where it
    is not yet) and how to decide. New results go to `results` (None: `results_folder`'s default).
    `model_config` is a Hugging Face ``config.json`` describing a model the models file lacks, named
    `model_config_name` (None: its own name). `margin` bounds each workload's GPU time to
    ``1 + margin`` times a bisection's (`slim.tune.guard`; None: unbounded)."""

    traces: Path
    workloads: tuple[WorkloadSpec, ...]
    hardware: str
    slos: Slos
    mode: str = ONLINE
    predictor: str = "sim"
    candidates: tuple[int, ...] = DEFAULT_CANDIDATE_BATCH_SIZES
    epsilon: float = DEFAULT_EPSILON
    tolerance: float = DEFAULT_TOLERANCE
    max_runs_per_cap: int = DEFAULT_MAX_RUNS_PER_CAP
    confidence: float = DEFAULT_CONFIDENCE
    num_prompts: int = DEFAULT_ONLINE_PROMPTS
    tensor_parallel: int = 1
    models_file: Path = MODELS_FILE
    hardware_file: Path = HARDWARE_FILE
    sim_constants_file: Path = SIM_CONSTANTS_FILE
    table_columns: Path | None = None
    results: Path | None = None
    model_config: Path | None = None
    model_config_name: str | None = None
    margin: float | None = DEFAULT_MARGIN

    def __post_init__(self) -> None:
        if not self.workloads:
            raise AdvisorError("name at least one workload (--model with --input-len and --output-len, or --workload)")
        if self.mode not in (ONLINE, OFFLINE):
            raise AdvisorError(f"mode must be {ONLINE} or {OFFLINE}, got '{self.mode}'")
        if self.predictor not in tune_predictors():
            raise AdvisorError(f"unknown predictor '{self.predictor}'; choose {' or '.join(sorted(tune_predictors()))}")
        if not (0 < self.confidence < 1):
            raise AdvisorError(f"confidence must lie in (0, 1), got {self.confidence}")
        if self.slos.relative and int(self.slos.reference_cap) not in self.candidate_caps:
            raise AdvisorError(f"the SLO's reference cap {self.slos.reference_cap:g} must be a candidate")
        if self.mode == OFFLINE:
            static = pd.DataFrame({col.BENCHMARK_MODE: [col.BenchmarkMode.OFFLINE_STATIC_BATCH]})
            for metric in self.slos.metrics:
                if not metric.in_batch:
                    raise AdvisorError(why_not_judged(metric, static))
            if self.slos.goodput is not None:
                raise AdvisorError("goodput cannot be judged from offline static batches (vllm bench latency keeps "
                                   "no request's latencies); tune online")

    @property
    def candidate_caps(self) -> tuple[int, ...]:
        """The candidates, always with cap 1 (``T(1)`` of the efficiency floor)."""
        return tuple(sorted({int(c) for c in self.candidates} | {1}))

    @property
    def results_folder(self) -> Path:
        """Where new results and the attempts ledger go: `results`, else ``slim-tune/`` inside the
        traces folder, or beside the traces when they are one file (a summary table)."""
        if self.results is not None:
            return self.results
        return (self.traces.parent if self.traces.is_file() else self.traces) / TUNE_FOLDER

    @property
    def trace_sources(self) -> tuple[Path, ...]:
        """What is ingested: the traces, and the results folder unless it lies inside them."""
        results = self.results_folder
        if self.traces.is_dir() and results.resolve().is_relative_to(self.traces.resolve()):
            return (self.traces,)
        return (self.traces, results)


@dataclass(frozen=True)
class TraceReadout:
    """What reading the traces found: whether they exist, how many runs, and the runs left out."""

    traces_exist: bool
    runs_found: int
    skipped: tuple[SkippedRun, ...]


@dataclass
class TunePlan:
    """A request resolved against the catalogs and the runs measured so far."""

    request: TuneRequest
    catalog: ArchitectureCatalog
    hardware: Hardware
    workloads: list[Workload]
    specs: dict[str, WorkloadSpec]          # by workload label
    session: TuneSession
    measured_runs: pd.DataFrame
    readout: TraceReadout
    failure_reasons: dict[int, str] = field(default_factory=dict)
    """Why the run of a failed candidate (a row of the session's candidates) gave nothing usable."""


def _benchmark_mode(mode: str) -> str:
    return col.BenchmarkMode.OFFLINE_STATIC_BATCH if mode == OFFLINE else col.BenchmarkMode.ONLINE


def measured_so_far(request: TuneRequest, catalog: ArchitectureCatalog,
                    hardware_catalog) -> tuple[pd.DataFrame, TraceReadout]:
    """The usable runs of the request's accelerator, mode and tensor-parallel degree under its trace
    sources (none where they are empty or missing), and what was found: every run left out with
    its cleaning status (the cleaning report `slim check` prints) or the setting that differs."""
    options = trace_options(hardware_catalog, request.hardware, request.table_columns)
    ingested = []
    for source in request.trace_sources:
        if source.exists():
            runs = ingest_traces(source, dataset=source.name, catalog=catalog, options=options)
            id_root = source.parent if source.is_file() else source
            runs[col.RUN_ID] = [str(id_root / str(run)) for run in runs[col.RUN_ID]]
            ingested.append(runs)
    found = pd.concat(ingested, ignore_index=True) if ingested else pd.DataFrame(columns=list(col.RUN_COLUMNS))
    readout = TraceReadout(request.traces.exists(), len(found), ())
    if found.empty:
        return pd.DataFrame(columns=list(col.RUN_COLUMNS)), readout
    usable, report = clean_runs(found, CleaningPolicy(rows={col.HARDWARE: (request.hardware,)}, keep_repeats=True))
    skipped = [SkippedRun(str(run[col.RUN_ID]), str(run[col.STATUS]), str(run[col.REASON_DETAIL]))
               for _, run in report[~report["kept"]].iterrows()]
    known = usable[col.MODEL].map(lambda name: name in catalog).astype(bool)
    skipped += [SkippedRun(str(run[col.RUN_ID]), "unknown_model", f"model '{run[col.MODEL]}' is not in the models "
                           "file (describe it with --model-config)") for _, run in usable[~known].iterrows()]
    usable = usable[known]
    if usable.empty:
        return pd.DataFrame(columns=list(col.RUN_COLUMNS)), TraceReadout(readout.traces_exist, len(found),
                                                                         tuple(skipped))
    degree = usable[col.TENSOR_PARALLEL].fillna(1).astype(int)
    mode = usable[col.BENCHMARK_MODE]
    other = (degree != request.tensor_parallel) | (mode != _benchmark_mode(request.mode))
    skipped += [SkippedRun(str(run[col.RUN_ID]), "other_settings",
                           f"{run[col.BENCHMARK_MODE]} at tensor parallel {int(degree[index])}, not "
                           f"{_benchmark_mode(request.mode)} at tensor parallel {request.tensor_parallel}")
                for index, run in usable[other].iterrows()]
    return usable[~other].reset_index(drop=True), TraceReadout(readout.traces_exist, len(found), tuple(skipped))


def _matches(runs: pd.DataFrame, model: str, il: float, ol: float) -> np.ndarray:
    return ((runs[col.MODEL] == model)
            & (np.abs(runs[col.INPUT_LEN_NOMINAL].astype(float) - il) <= NOMINAL_MATCH * il)
            & (np.abs(runs[col.OUTPUT_LEN_NOMINAL].astype(float) - ol) <= NOMINAL_MATCH * ol)).to_numpy()


def build_plan(request: TuneRequest) -> TunePlan:
    """The session: one candidate per (workload, cap), every measured run as a fact (those of the
    workloads and, as context, every other measured curve; repeated runs of a cap combined, the
    first one kept as what a bisection would have seen), the prior of the request's predictor for
    throughput and every quantity the SLOs name. Runs under the results folder are the session's
    own and count against the bound; the other traces are given."""
    catalog = load_architectures(request.models_file)
    if request.model_config is not None:
        catalog = catalog.with_architecture(architecture_from_hf_config(request.model_config,
                                                                        request.model_config_name))
    hardware_catalog = load_hardware_with_shipped(request.hardware_file)
    if request.hardware not in hardware_catalog:
        raise AdvisorError(unknown_hardware_message(request.hardware, hardware_catalog))
    hw = hardware_catalog[request.hardware]
    runs, readout = measured_so_far(request, catalog, hardware_catalog)
    mode = _benchmark_mode(request.mode)
    rows, workloads, specs = [], [], {}
    claimed = np.zeros(len(runs), dtype=bool)
    measured: list[tuple[int, pd.Series]] = []
    for spec in request.workloads:
        arch = catalog[spec.model]
        workload = Workload(arch.name, spec.input_len, spec.output_len, request.slos, request.epsilon)
        if workload.label in specs:
            raise AdvisorError(f"workload {workload.label} is named twice")
        workloads.append(workload)
        specs[workload.label] = spec
        of_workload = _matches(runs, arch.name, spec.input_len, spec.output_len) if len(runs) else np.zeros(0, bool)
        capacity = runs.loc[of_workload, col.KV_CAPACITY_TOKENS].max() if of_workload.any() else math.nan
        for cap in request.candidate_caps:
            at_cap = of_workload & (runs[col.MAX_NUM_SEQS].to_numpy(dtype=float) == cap) if len(runs) else of_workload
            rows.append({col.MODEL: arch.name, col.INPUT_LEN_NOMINAL: float(spec.input_len),
                         col.OUTPUT_LEN_NOMINAL: float(spec.output_len), col.INPUT_LEN_MEAN: float(spec.input_len),
                         col.OUTPUT_LEN_MEAN: float(spec.output_len), col.MAX_NUM_SEQS: float(cap),
                         col.NUM_PROMPTS: float(prompts_at(request, cap)),
                         col.BENCHMARK_MODE: mode, col.TENSOR_PARALLEL: request.tensor_parallel,
                         col.KV_CAPACITY_TOKENS: capacity,
                         col.MAX_CONCURRENCY: float(cap) if request.mode == ONLINE else math.nan,
                         WORKLOAD: workload.label})
            measured += [(len(rows) - 1, run) for _, run in runs[at_cap].sort_values(col.RUN_ID).iterrows()]
            claimed |= at_cap
    context = runs[~claimed]
    for (_, group) in context.groupby(list(col.WORKLOAD_KEYS), sort=True):
        for _, of_cap in group.groupby(col.MAX_NUM_SEQS, sort=True):
            row = {name: of_cap.iloc[0][name] for name in CONFIG_COLUMNS}
            concurrency = of_cap.iloc[0].get(col.MAX_CONCURRENCY, math.nan)
            row[col.MAX_CONCURRENCY] = concurrency if pd.notna(concurrency) else math.nan
            # Context, never a candidate: a run of another curve, or of a workload at a cap not asked for.
            row[WORKLOAD] = f"{curve_label(of_cap.iloc[:1]).iloc[0]} (context)"
            rows.append(row)
            measured += [(len(rows) - 1, run) for _, run in of_cap.sort_values(col.RUN_ID).iterrows()]
    candidates = pd.DataFrame(rows)
    entry = tune_predictors()[request.predictor]
    prior = tune_prior(entry, catalog, hw, _empty_schedules(request.sim_constants_file) if entry.needs_schedules
                       else None)
    settings = load_kernels().settings(request.predictor, TuneSettings(
        confidence=request.confidence, tolerance=request.tolerance, max_runs_per_cap=request.max_runs_per_cap,
        margin=request.margin))
    with keeping_client_latencies():    # the prior's schedules and its SLO metrics from one simulation each
        predicted = prior_prediction(prior, candidates, request.slos.metrics, request.slos.goodput)
    session = TuneSession(workloads, candidates, predicted, settings,
                          run_floor_gpu_seconds=roofline_gpu_seconds(candidates, catalog, hw))
    own = request.results_folder.resolve()
    by_candidate: dict[int, list[float]] = {}
    for index, run in measured:
        charged = Path(str(run[col.RUN_ID])).resolve().is_relative_to(own)
        session.record(index, measurement_of_run(run, request.slos, charged))
        by_candidate.setdefault(index, []).append(float(run[col.TOTAL_TOKEN_THROUGHPUT]))
    for index, throughputs in by_candidate.items():
        if len(throughputs) > 1:      # repeated runs: their own spread, where it exceeds the default scatter
            spread = float(np.std(throughputs) / np.mean(throughputs))
            session.measurements[index] = replace(session.measurements[index],
                                                  scatter=max(spread, session.measurements[index].scatter))
    return TunePlan(request, catalog, hw, workloads, specs, session, runs, readout)


def _empty_schedules(constants_file: Path):
    from slim.sim.constants import load_sim_constants
    from slim.sim.schedules import ScheduleTable

    return ScheduleTable([], load_sim_constants(constants_file))


def measurement_of_run(run: pd.Series, slos: Slos, charged: bool = True) -> Measurement:
    """One usable run as a measurement: its throughput and in-batch E2E, each SLO metric it judges
    (`slim.specs.slo.judging_runs`), its goodput where it kept each request's latencies, its GPU time
    (duration times GPUs) and its scatter (`DEFAULT_SCATTER`; a cleaned row that already averages
    repeats counts its `col.N_MEASUREMENTS`)."""
    frame = run.to_frame().T
    latencies = {metric.name: float(metric.values_ms(frame)[0]) for metric in slos.metrics
                 if not metric.in_batch and judging_runs(metric, frame)[0]}
    goodput = float(slos.goodput.of_runs(frame)[0]) if slos.goodput is not None else math.nan
    tensor_parallel = float(run[col.TENSOR_PARALLEL]) if pd.notna(run.get(col.TENSOR_PARALLEL)) else 1.0
    counts = run.get(col.N_MEASUREMENTS)
    return Measurement(float(run[col.TOTAL_TOKEN_THROUGHPUT]), float(run[col.E2E_LATENCY_S]),
                       float(run[col.DURATION_S]) * tensor_parallel, DEFAULT_SCATTER,
                       int(counts) if pd.notna(counts) and counts >= 1 else 1, latencies, goodput, charged)


def measurement_of_runs(runs: pd.DataFrame, slos: Slos, charged: bool = True) -> Measurement:
    """Repeated runs of one configuration as one measurement (`measurement_of_run` of each, combined),
    their scatter at least the spread of their throughputs."""
    ordered = runs.sort_values(col.RUN_ID) if col.RUN_ID in runs else runs
    measurements = [measurement_of_run(run, slos, charged) for _, run in ordered.iterrows()]
    combined = measurements[0]
    for other in measurements[1:]:
        combined = combined.combined(other)
    if len(runs) > 1:
        throughput = runs[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float)
        combined = replace(combined, scatter=max(float(np.std(throughput) / np.mean(throughput)), DEFAULT_SCATTER))
    return combined


# --- the benchmark command lines -----------------------------------------------------------

def run_folder_name(spec: WorkloadSpec, cap: int, mode: str) -> str:
    """The folder one proposed benchmark writes into, named by the tool only."""
    model = re.sub(r"[^A-Za-z0-9._-]+", "_", spec.model)
    kind = "concurrency" if mode == ONLINE else "bs"
    return f"{model}_in{spec.input_len}_out{spec.output_len}_{kind}{cap}"


REQUESTS_PER_SLOT = 2
"""An online benchmark at concurrency ``c`` sends at least this many requests per slot (``2 c``), so
that it runs at its concurrency rather than draining a first wave."""


def prompts_at(request: TuneRequest, cap: float) -> int:
    """The requests a benchmark at `cap` sends: the batch itself offline, else `TuneRequest.num_prompts`
    but at least `REQUESTS_PER_SLOT` per concurrency slot."""
    if request.mode == OFFLINE:
        return int(cap)
    return max(int(request.num_prompts), REQUESTS_PER_SLOT * int(cap))


def placeholders(request: TuneRequest, spec: WorkloadSpec, cap: int, repeat: int = 0) -> dict[str, str]:
    """Every value a benchmark command or a `--run` template may use: all chosen by the tool. A
    `repeat` > 0 (the cap's usable runs so far) names a folder of its own, ``..._run<repeat + 1>``."""
    folder = request.results_folder / (run_folder_name(spec, cap, request.mode)
                                       + (f"_run{repeat + 1}" if repeat > 0 else ""))
    result_file = ("result.json" if request.mode == ONLINE
                   else f"latency_{re.sub(r'[^A-Za-z0-9._-]+', '_', spec.model)}_bs{cap}_in{spec.input_len}"
                        f"_out{spec.output_len}.json")
    return {"model": spec.model, "input_len": str(spec.input_len), "output_len": str(spec.output_len),
            "max_concurrency": str(cap), "batch_size": str(cap), "cap": str(cap),
            "server_max_num_seqs": str(max(request.candidate_caps)), "num_prompts": str(prompts_at(request, cap)),
            "tensor_parallel": str(request.tensor_parallel), "result_dir": str(folder),
            "result_filename": result_file, "result_file": str(folder / result_file)}


def server_command(request: TuneRequest, spec: WorkloadSpec) -> list[str]:
    """The one server the online candidates share: its cap at the largest candidate."""
    return ["vllm", "serve", spec.model, "--max-num-seqs", str(max(request.candidate_caps)),
            "--tensor-parallel-size", str(request.tensor_parallel)]


VLLM_DEFAULT_PERCENTILE_METRICS = ("ttft", "tpot", "itl")
VLLM_DEFAULT_METRIC_PERCENTILES = (99.0,)
"""What ``vllm bench serve`` reports without ``--percentile-metrics`` and ``--metric-percentiles``."""


def slo_benchmark_options(slos: Slos) -> list[str]:
    """The ``vllm bench serve`` options that make it record what the SLOs name: E2EL and percentiles
    beyond its defaults, and for a goodput objective its ``--goodput`` with each request's latencies
    (``--save-detailed``)."""
    quantities = {m.quantity for m in slos.metrics if not m.in_batch}
    percentiles = {m.percentile for m in slos.metrics if m.percentile is not None}
    options = []
    if (not quantities <= set(VLLM_DEFAULT_PERCENTILE_METRICS)
            or not percentiles <= set(VLLM_DEFAULT_METRIC_PERCENTILES)):
        options += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles",
                    ",".join(f"{p:g}" for p in sorted(percentiles | set(VLLM_DEFAULT_METRIC_PERCENTILES)))]
    if slos.goodput is not None:
        options += ["--goodput", *slos.goodput.spec.split(), "--save-detailed"]
    return options


def benchmark_command(request: TuneRequest, spec: WorkloadSpec, cap: int, repeat: int = 0) -> list[str]:
    """The exact benchmark of one candidate (its `repeat`-th further run), as an argument list."""
    values = placeholders(request, spec, cap, repeat)
    if request.mode == ONLINE:
        return ["vllm", "bench", "serve", "--model", spec.model, "--dataset-name", "random",
                "--random-input-len", values["input_len"], "--random-output-len", values["output_len"],
                "--ignore-eos", "--num-prompts", values["num_prompts"], "--request-rate", "inf",
                "--max-concurrency", values["max_concurrency"], *slo_benchmark_options(request.slos),
                "--save-result", "--result-dir", values["result_dir"],
                "--result-filename", values["result_filename"], "--metadata",
                f"max_num_seqs={values['server_max_num_seqs']}", f"tensor_parallel_size={request.tensor_parallel}"]
    return ["vllm", "bench", "latency", "--model", spec.model, "--input-len", values["input_len"],
            "--output-len", values["output_len"], "--batch-size", values["batch_size"],
            "--tensor-parallel-size", values["tensor_parallel"], "--output-json", values["result_file"]]


def concurrency_sweep_note(request: TuneRequest) -> str:
    """What the online benchmarks measure, in one line: one server, the cap set by the client."""
    top = max(request.candidate_caps)
    return (f"one server at --max-num-seqs {top} (the largest candidate) for every benchmark: a benchmark's "
            f"--max-concurrency C keeps at most C requests in flight, so the running batch is at most C, the cap it "
            f"measures; --metadata max_num_seqs={top} records the server's cap and ingest reads the run's cap as the "
            "smaller of the two")


def memory_plan(plan: TunePlan, workload_label: str, cap: float) -> KvMemoryPlan:
    """The KV memory a cap needs and the flags that reserve only it (`slim.gpu.kv_memory`), for the
    workload's model at its lengths, on the request's accelerator."""
    spec = plan.specs[workload_label]
    arch = plan.catalog[spec.model]
    of_model = plan.measured_runs[plan.measured_runs[col.MODEL] == arch.name] if len(plan.measured_runs) else None
    blocks = (of_model[col.NUM_GPU_BLOCKS].dropna() if of_model is not None and col.NUM_GPU_BLOCKS in of_model
              else pd.Series(dtype=float))
    return plan_kv_memory(arch, plan.hardware, cap, spec.input_len, spec.output_len,
                          num_gpu_blocks=int(blocks.max()) if not blocks.empty else None,
                          max_model_len=spec.input_len + spec.output_len)


def serve_command(plan: TunePlan, workload_label: str, cap: float) -> list[str]:
    """``vllm serve`` at the chosen cap with the memory flags that reserve only its KV cache."""
    spec = plan.specs[workload_label]
    memory = memory_plan(plan, workload_label, cap)
    return ["vllm", "serve", spec.model, "--max-num-seqs", f"{int(cap)}", "--max-model-len",
            str(spec.input_len + spec.output_len), "--gpu-memory-utilization",
            f"{memory.gpu_memory_utilization_needed:.3f}", "--num-gpu-blocks-override",
            str(memory.num_gpu_blocks_override), "--tensor-parallel-size", str(plan.request.tensor_parallel)]


def proposal_commands(plan: TunePlan, proposal: Proposal) -> dict[str, list[str]]:
    spec = plan.specs[proposal.workload]
    cap = int(proposal.max_num_seqs)
    commands = {"benchmark": benchmark_command(plan.request, spec, cap, plan.session.runs_of(proposal.candidate))}
    if plan.request.mode == ONLINE:
        commands = {"server": server_command(plan.request, spec), **commands}
    return commands


def select_proposals(proposals: Sequence[Proposal], limit: int) -> list[Proposal]:
    """The best proposal of each open workload, best first, at most `limit`."""
    chosen, seen = [], set()
    for proposal in proposals:
        if proposal.workload in seen:
            continue
        seen.add(proposal.workload)
        chosen.append(proposal)
    return chosen[:limit]
