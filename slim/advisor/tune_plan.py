"""`slim tune` on a folder of benchmark results: the request, the session it builds from the usable
runs measured so far, and the exact benchmark command lines of the next measurements.

Online (``vllm bench serve``), every candidate cap is a client ``--max-concurrency`` against one
server started with ``--max-num-seqs`` at the largest candidate, so no restart is needed; the
result records the server's cap in ``--metadata`` and ingest reads the run's cap as the smaller of
the two (`slim.traces.ingest`). Offline, a cap is the batch of ``vllm bench latency``. Each result
is written into its own folder under ``<traces>/slim-tune/``, named by the tool, where the next
`slim tune` (or the loop) ingests it with every other run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.bca import DEFAULT_CANDIDATE_BATCH_SIZES, DEFAULT_EPSILON
from slim.advisor.certificate import DEFAULT_TOLERANCE
from slim.advisor.training_runs import trace_options
from slim.advisor.tune import (
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
from slim.advisor.tune_kernel import load_kernels
from slim.advisor.tune_model import CONFIG_COLUMNS, prior_prediction, tune_prior
from slim.errors import AdvisorError
from slim.predictors import tune_predictors
from slim.sim.constants import SIM_CONSTANTS_FILE
from slim.specs.architecture import MODELS_FILE, ArchitectureCatalog, load_architectures
from slim.specs.hardware import HARDWARE_FILE, Hardware, load_hardware
from slim.specs.hf_config import architecture_from_hf_config
from slim.traces.clean import CleaningPolicy, clean_runs
from slim.traces.ingest import ingest_traces

TUNE_FOLDER = "slim-tune"
ONLINE, OFFLINE = "online", "offline"
DEFAULT_ONLINE_PROMPTS = 1000   # vllm bench serve's --num-prompts default
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
    """One `slim tune` call. The SLO is `slo_ms`, or `slo_relative` times the E2E at cap
    `slo_reference_cap` of each workload (measured first where it is not yet). New results go to
    `results` (None: `results_folder`'s default). `model_config` is a Hugging Face ``config.json``
    describing a model the models file lacks, named `model_config_name` (None: its own name)."""

    traces: Path
    workloads: tuple[WorkloadSpec, ...]
    hardware: str
    slo_ms: float | None = None
    slo_relative: float | None = None
    slo_reference_cap: int = 1
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

    def __post_init__(self) -> None:
        if not self.workloads:
            raise AdvisorError("name at least one workload (--model with --input-len and --output-len, or --workload)")
        if (self.slo_ms is None) == (self.slo_relative is None):
            raise AdvisorError("give the SLO either in milliseconds (--slo-ms) or relative to a reference run "
                               "(--slo-relative)")
        if self.mode not in (ONLINE, OFFLINE):
            raise AdvisorError(f"mode must be {ONLINE} or {OFFLINE}, got '{self.mode}'")
        if self.predictor not in tune_predictors():
            raise AdvisorError(f"unknown predictor '{self.predictor}'; choose {' or '.join(sorted(tune_predictors()))}")
        if not (0 < self.confidence < 1):
            raise AdvisorError(f"confidence must lie in (0, 1), got {self.confidence}")
        if self.slo_relative is not None and self.slo_reference_cap not in self.candidate_caps:
            raise AdvisorError(f"the SLO's reference cap {self.slo_reference_cap} must be a candidate")

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
class SkippedRun:
    """A run found under the traces or the results folder that the plan does not use, and why: its
    cleaning status (`slim.traces.verdict.REASON_CODES`, as `slim check` prints it) and the detail."""

    path: str
    status: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "status": self.status, "reason": self.reason}


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
        return pd.DataFrame(columns=list(CONFIG_COLUMNS)), readout
    usable, report = clean_runs(found, CleaningPolicy(rows={col.HARDWARE: (request.hardware,)}))
    skipped = [SkippedRun(str(run[col.RUN_ID]), str(run[col.STATUS]), str(run[col.REASON_DETAIL]))
               for _, run in report[~report["kept"]].iterrows()]
    known = usable[col.MODEL].map(lambda name: name in catalog).astype(bool)
    skipped += [SkippedRun(str(run[col.RUN_ID]), "unknown_model", f"model '{run[col.MODEL]}' is not in the models "
                           "file (describe it with --model-config)") for _, run in usable[~known].iterrows()]
    usable = usable[known]
    if usable.empty:
        return pd.DataFrame(columns=list(CONFIG_COLUMNS)), TraceReadout(readout.traces_exist, len(found),
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
    """The session: one candidate per (workload, cap), the measured runs as facts (those of the
    workloads and, as context, every other measured curve), the prior of the request's predictor."""
    catalog = load_architectures(request.models_file)
    if request.model_config is not None:
        catalog = catalog.with_architecture(architecture_from_hf_config(request.model_config,
                                                                        request.model_config_name))
    hardware_catalog = load_hardware(request.hardware_file)
    if request.hardware not in hardware_catalog:
        raise AdvisorError(f"unknown hardware '{request.hardware}'; known: {', '.join(hardware_catalog)}")
    hw = hardware_catalog[request.hardware]
    runs, readout = measured_so_far(request, catalog, hardware_catalog)
    mode = _benchmark_mode(request.mode)
    rows, workloads, specs = [], [], {}
    claimed = np.zeros(len(runs), dtype=bool)
    measured: dict[int, Measurement] = {}
    for spec in request.workloads:
        arch = catalog[spec.model]
        workload = Workload(arch.name, spec.input_len, spec.output_len,
                            request.slo_ms / 1e3 if request.slo_ms is not None else math.nan, request.epsilon,
                            request.slo_relative, float(request.slo_reference_cap) if request.slo_relative else None)
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
                         col.NUM_PROMPTS: float(cap if request.mode == OFFLINE else request.num_prompts),
                         col.BENCHMARK_MODE: mode, col.TENSOR_PARALLEL: request.tensor_parallel,
                         col.KV_CAPACITY_TOKENS: capacity, WORKLOAD: workload.label})
            if at_cap.any():
                measured[len(rows) - 1] = measurement_of_runs(runs[at_cap])
                claimed |= at_cap
    context = runs[~claimed]
    for (_, group) in context.groupby(list(col.WORKLOAD_KEYS), sort=True):
        for _, run in group.groupby(col.MAX_NUM_SEQS, sort=True):
            row = {name: run.iloc[0][name] for name in CONFIG_COLUMNS}
            # Context, never a candidate: a run of another curve, or of a workload at a cap not asked for.
            row[WORKLOAD] = f"{curve_label(run.iloc[:1]).iloc[0]} (context)"
            rows.append(row)
            measured[len(rows) - 1] = measurement_of_runs(run)
    candidates = pd.DataFrame(rows)
    entry = tune_predictors()[request.predictor]
    prior = tune_prior(entry, catalog, hw, _empty_schedules(request.sim_constants_file) if entry.needs_schedules
                       else None)
    session = TuneSession(workloads, candidates, prior_prediction(prior, candidates),
                          load_kernels().settings(request.predictor, TuneSettings(
                              confidence=request.confidence, tolerance=request.tolerance,
                              max_runs_per_cap=request.max_runs_per_cap)))
    for index, measurement in measured.items():
        session.record(index, measurement)
    return TunePlan(request, catalog, hw, workloads, specs, session, runs, readout)


def _empty_schedules(constants_file: Path):
    from slim.sim.constants import load_sim_constants
    from slim.sim.schedules import ScheduleTable

    return ScheduleTable([], load_sim_constants(constants_file))


def measurement_of_runs(runs: pd.DataFrame) -> Measurement:
    """Repeated runs of one configuration: their mean, with their scatter and how many runs they
    are (a cleaned row that already averages repeats counts its `col.N_MEASUREMENTS`)."""
    throughput = runs[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float)
    e2e = runs[col.E2E_LATENCY_S].to_numpy(dtype=float)
    seconds = (runs[col.DURATION_S].to_numpy(dtype=float) * runs[col.TENSOR_PARALLEL].fillna(1).to_numpy(dtype=float))
    scatter = float(np.std(throughput) / np.mean(throughput)) if len(runs) > 1 else DEFAULT_SCATTER
    counts = (runs[col.N_MEASUREMENTS].fillna(1).to_numpy(dtype=float) if col.N_MEASUREMENTS in runs
              else np.ones(len(runs)))
    return Measurement(float(np.mean(throughput)), float(np.mean(e2e)), float(np.nansum(seconds)),
                       max(scatter, DEFAULT_SCATTER), int(max(counts.sum(), 1)))


# --- the benchmark command lines -----------------------------------------------------------

def run_folder_name(spec: WorkloadSpec, cap: int, mode: str) -> str:
    """The folder one proposed benchmark writes into, named by the tool only."""
    model = re.sub(r"[^A-Za-z0-9._-]+", "_", spec.model)
    kind = "concurrency" if mode == ONLINE else "bs"
    return f"{model}_in{spec.input_len}_out{spec.output_len}_{kind}{cap}"


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
            "server_max_num_seqs": str(max(request.candidate_caps)), "num_prompts": str(request.num_prompts),
            "tensor_parallel": str(request.tensor_parallel), "result_dir": str(folder),
            "result_filename": result_file, "result_file": str(folder / result_file)}


def server_command(request: TuneRequest, spec: WorkloadSpec) -> list[str]:
    """The one server the online candidates share: its cap at the largest candidate."""
    return ["vllm", "serve", spec.model, "--max-num-seqs", str(max(request.candidate_caps)),
            "--tensor-parallel-size", str(request.tensor_parallel)]


def benchmark_command(request: TuneRequest, spec: WorkloadSpec, cap: int, repeat: int = 0) -> list[str]:
    """The exact benchmark of one candidate (its `repeat`-th further run), as an argument list."""
    values = placeholders(request, spec, cap, repeat)
    if request.mode == ONLINE:
        return ["vllm", "bench", "serve", "--model", spec.model, "--dataset-name", "random",
                "--random-input-len", values["input_len"], "--random-output-len", values["output_len"],
                "--ignore-eos", "--num-prompts", values["num_prompts"], "--request-rate", "inf",
                "--max-concurrency", values["max_concurrency"], "--save-result", "--result-dir", values["result_dir"],
                "--result-filename", values["result_filename"], "--metadata",
                f"max_num_seqs={values['server_max_num_seqs']}", f"tensor_parallel_size={request.tensor_parallel}"]
    return ["vllm", "bench", "latency", "--model", spec.model, "--input-len", values["input_len"],
            "--output-len", values["output_len"], "--batch-size", values["batch_size"],
            "--tensor-parallel-size", values["tensor_parallel"], "--output-json", values["result_file"]]


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
