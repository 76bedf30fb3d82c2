"""A `slim tune` request: the workloads as the user names them, the accelerator, the SLOs and how to
decide, where its results go, and how many requests each benchmark sends."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import pandas as pd

from slim import columns as col
from slim.decision.candidates import DEFAULT_CANDIDATE_CAPS, DEFAULT_EPSILON, DEFAULT_TOLERANCE
from slim.defaults import DEFAULT_ONLINE_PROMPTS, OFFLINE, ONLINE, TUNE_FOLDER
from slim.errors import AdvisorError
from slim.predictors import tune_predictors
from slim.sim.constants import SIM_CONSTANTS_FILE
from slim.sim.run_cache import SimulationCache
from slim.specs.architecture import MODELS_FILE
from slim.specs.hardware import HARDWARE_FILE
from slim.specs.slo import Slos, why_not_judged
from slim.tune.guard import DEFAULT_MARGIN
from slim.tune.session import DEFAULT_CONFIDENCE, DEFAULT_MAX_RUNS_PER_CAP


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
    ``1 + margin`` times a bisection's (`slim.tune.guard`; None: unbounded); across layouts, each
    curve's to that of a bisection at every layout (`slim.tune.layouts`)."""

    traces: Path
    workloads: tuple[WorkloadSpec, ...]
    hardware: str
    slos: Slos
    mode: str = ONLINE
    predictor: str = "sim"
    candidates: tuple[int, ...] = DEFAULT_CANDIDATE_CAPS
    epsilon: float = DEFAULT_EPSILON
    tolerance: float = DEFAULT_TOLERANCE
    max_runs_per_cap: int = DEFAULT_MAX_RUNS_PER_CAP
    confidence: float = DEFAULT_CONFIDENCE
    num_prompts: int | None = None
    """Requests per online benchmark (at least `REQUESTS_PER_SLOT` per concurrency slot); None: as the
    measured runs sent them (`benchmark_prompts`)."""
    measured_prompts: MeasuredPrompts = field(default_factory=lambda: MeasuredPrompts())
    """What the workloads' measured runs sent (`slim.tune.plan.build_plan` fills it in)."""
    tensor_parallel: int = 1
    tensor_parallel_sizes: tuple[int, ...] = ()
    """The tensor-parallel sizes of the layouts to decide across (`slim.tune.layouts`); empty: the cap
    alone at `tensor_parallel`, unless `data_parallel_sizes` are given (then its layouts are
    `tensor_parallel` at each)."""
    data_parallel_sizes: tuple[int, ...] = ()
    """The data-parallel sizes each tensor-parallel size is a layout at (vLLM's
    ``--data-parallel-size``); empty: 1 and every data-parallel size the workload's runs record at
    that tensor-parallel size (`slim.tune.plan.request_layouts`)."""
    gpus: int | None = None
    """GPUs available: a layout whose server needs more (``t x d``) is excluded, and the deployment's
    replicas are ``gpus // (t x d)``, or with `request_rate` those it needs (None: not given)."""
    request_rate: float | None = None
    """Requests per second to serve: the replicas and GPUs the chosen layout needs
    (`slim.decision.layouts.rate_deployment`; None: not given)."""
    models_file: Path = MODELS_FILE
    hardware_file: Path = HARDWARE_FILE
    sim_constants_file: Path = SIM_CONSTANTS_FILE
    table_columns: Path | None = None
    results: Path | None = None
    model_config: Path | None = None
    model_config_name: str | None = None
    quantization: str | None = None      # vLLM --quantization the servers apply (None: not given)
    kv_cache_dtype: str | None = None    # vLLM --kv-cache-dtype (None: not given, i.e. auto)
    margin: float | None = DEFAULT_MARGIN
    retry_failed: bool = False
    """Ignore every recorded failure (the ledger's, and runs whose configuration failed): any cap may run."""
    simulations: SimulationCache | None = field(default=None, compare=False, repr=False)
    """The simulated runs the prior reads from and keeps (`slim.sim.run_cache`); None: its own."""

    def __post_init__(self) -> None:
        if not self.workloads:
            raise AdvisorError("name at least one workload (--model with --input-len and --output-len, or --workload)")
        if self.mode not in (ONLINE, OFFLINE):
            raise AdvisorError(f"mode must be {ONLINE} or {OFFLINE}, got '{self.mode}'")
        if self.predictor not in tune_predictors():
            raise AdvisorError(f"unknown predictor '{self.predictor}'; choose {' or '.join(sorted(tune_predictors()))}")
        if any(size < 1 for size in self.tensor_parallel_sizes) or self.tensor_parallel < 1:
            raise AdvisorError("tensor-parallel sizes must be positive whole numbers")
        if any(size < 1 for size in self.data_parallel_sizes):
            raise AdvisorError("data-parallel sizes must be positive whole numbers")
        if self.mode == OFFLINE and any(size > 1 for size in self.data_parallel_sizes):
            raise AdvisorError("data-parallel layouts are tuned online only: vllm bench latency runs one engine; "
                               "drop --data-parallel-sizes or tune --mode online")
        if self.gpus is not None and self.gpus < 1:
            raise AdvisorError(f"--gpus must be a positive count, got {self.gpus}")
        if self.request_rate is not None and not self.request_rate > 0:
            raise AdvisorError(f"--request-rate must be positive requests per second, got {self.request_rate}")
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
    def across_layouts(self) -> bool:
        """Whether the layout is part of the decision (`tensor_parallel_sizes` or `data_parallel_sizes`
        given)."""
        return bool(self.tensor_parallel_sizes) or bool(self.data_parallel_sizes)

    @property
    def layout_sizes(self) -> tuple[int, ...]:
        """The tensor-parallel sizes the session runs at, ascending."""
        return tuple(sorted(set(self.tensor_parallel_sizes or (self.tensor_parallel,))))

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


REQUESTS_PER_SLOT = 2
"""An online benchmark at concurrency ``c`` sends at least this many requests per slot (``2 c``), so
that it runs at its concurrency rather than draining a first wave."""


@dataclass(frozen=True)
class MeasuredPrompts:
    """The requests the measured online runs of each workload sent: the most common number at each of
    its caps, and over all of them (the smaller of a tie)."""

    by_cap: Mapping[tuple[WorkloadSpec, int], int] = field(default_factory=dict)
    by_workload: Mapping[WorkloadSpec, int] = field(default_factory=dict)


def benchmark_prompts(requested: int | None, cap: float, at_cap: int | None = None, in_workload: int | None = None,
                      per_slot: bool = True) -> int:
    """The requests an online benchmark of `cap` sends, one rule for `slim advise` and `slim tune`: the
    number asked for (``--num-prompts``); else what the measured runs sent at that cap (a repeat is the
    same benchmark again); else what the workload's runs sent; else vLLM's default
    (`DEFAULT_ONLINE_PROMPTS`); with a client that keeps the cap in flight (`per_slot`), at least
    `REQUESTS_PER_SLOT` per slot."""
    chosen = next((n for n in (requested, at_cap, in_workload) if n is not None), DEFAULT_ONLINE_PROMPTS)
    return max(int(chosen), REQUESTS_PER_SLOT * int(cap)) if per_slot else int(chosen)


def most_common(values) -> int | None:
    """The most common positive number of `values` (the smaller of a tie), None where there is none."""
    numbers = pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").dropna()
    numbers = numbers[numbers >= 1]
    return int(numbers.mode().min()) if len(numbers) else None


def prompts_at(request: TuneRequest, spec: WorkloadSpec, cap: float) -> int:
    """The requests a benchmark of `spec` at `cap` sends: the batch itself offline, else
    `benchmark_prompts` of the request and its measured runs."""
    if request.mode == OFFLINE:
        return int(cap)
    measured = request.measured_prompts
    return benchmark_prompts(request.num_prompts, cap, measured.by_cap.get((spec, int(cap))),
                             measured.by_workload.get(spec))
