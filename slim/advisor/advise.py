"""`slim advise` as a library call: decide one workload's batch cap from a folder of vLLM traces by the
one decision `slim tune` makes too, with its memory plan, the knee's range and the warnings.

    advice = advise(AdviceRequest(traces=Path("runs"), model="opt-1.3b", input_len=242,
                                  output_len=520, slos=Slos.of(["p99_tpot_ms=40"]), hardware="h100-64gb"))
    advice.recommendation.batch_cap, advice.memory.num_gpu_blocks_override, advice.tune.settled

The decision is BCA's Eq. 13 on the SLOs vLLM users state (`slim.decision`): each candidate at its
measured values where a run of the workload measured it, at the predictor's prediction elsewhere.
``predictor="slim"`` evaluates SLIM at the running batch a cap allows; ``predictor="sim"`` simulates
every candidate cap with the simulator calibrated on the training runs and refuses caps whose
simulated run preempts. Where the runs are too few to fit the predictor, its uncalibrated prior
predicts instead (as `slim tune` starts from), and the advice says so. How often each predictor
picks the full-profile cap is measured by the advisor study (`table_advisors.md` of each dataset).
`slim tune`'s view of the same runs (`slim.tune.outlook`) says whether the decision is settled.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.candidates import (
    CandidateRow,
    advice_certificate,
    advice_limits,
    advice_view,
    candidate_rows,
    workload_runs,
)
from slim.advisor.predictions import predictor_advice
from slim.advisor.request import AdviceRequest
from slim.advisor.training_runs import HeldOutCheck, held_out_check, select_training_runs
from slim.advisor.warnings import (
    AdviceWarning,
    advice_warnings,
    data_parallel_warnings,
    engine_warnings,
    latency_order_warnings,
    served_model_warnings,
    tensor_parallel_warnings,
    unstated_statistic_warnings,
)
from slim.decision.candidates import CandidateView
from slim.decision.certificate import Certificate
from slim.decision.layouts import Layout
from slim.decision.rule import Recommendation, recommend
from slim.errors import AdvisorError, NoFeasibleCapError, UnjudgedSloError
from slim.gpu.kv_memory import KvMemoryPlan, kv_capacity_sequences, kv_capacity_tokens_or_default, plan_kv_memory
from slim.gpu.roofline import KneeRecommendation, recommend_knee
from slim.model.calibration import CalibrationResult
from slim.predictors import advise_predictors
from slim.predictors.data_parallel import moe_in_lockstep, one_engine_runs
from slim.sim.vllm_defaults import is_vllm_version
from slim.specs.architecture import Architecture, ArchitectureCatalog, load_architectures, vllm_model_argument
from slim.specs.data_parallel import per_rank_cap
from slim.specs.hardware import Hardware, load_hardware_with_shipped, unknown_hardware_message
from slim.specs.hf_config import architecture_from_hf_config, served_model_of_config
from slim.specs.served_precision import serving_flags_of
from slim.specs.slo import IN_BATCH_E2E, Slos, judge
from slim.specs.transformer import tensor_parallel_refusal
from slim.traces.usable import (
    SkippedRun,
    single_data_parallel_size,
    single_tensor_parallel_degree,
    skipped_runs,
    trace_options,
    usable_runs,
)
from slim.tune.outlook import TuneOutlook, tune_outlook
from slim.tune.request import OFFLINE, ONLINE, TuneRequest, WorkloadSpec
from slim.tune.server_sizes import layout_expert_parallel


@dataclass(frozen=True)
class Advice:
    """What `advise` found: the predictor's calibration (None where it could not be fitted and its prior
    predicted instead: `prior_reason` says why), the recommendation (the one decision on measurements
    and predictions, `slim.decision.rule.recommend`), every candidate, the SLO bounds (`predicted_bounds`:
    relative ones resolved on a prediction), the memory plan and the knee's range, the runs left out,
    and `slim tune`'s view (`tune`, None when not planned); `refused_caps` are candidates SIM refused."""

    model: str
    input_len: float
    output_len: float
    n_runs: int
    fit: CalibrationResult | None
    recommendation: Recommendation
    slos: Slos
    limits_ms: dict[str, float]
    epsilon: float
    candidates: tuple[CandidateRow, ...]
    kv_capacity_sequences: float
    kv_capacity_source: str
    memory: KvMemoryPlan
    max_model_len: int
    knee: KneeRecommendation
    hardware: str
    train_models: tuple[str, ...] = ()
    n_left_out: int = 0
    held_out: HeldOutCheck | None = None
    warnings: tuple[AdviceWarning, ...] = ()
    predictor: str = "slim"
    refused_caps: tuple[float, ...] = ()
    confidence: float | None = None
    runs_found: int = 0
    skipped: tuple[SkippedRun, ...] = ()
    tune: TuneOutlook | None = None
    prior_reason: str | None = None
    predicted_bounds: tuple[str, ...] = ()
    served_model: str = ""
    """The model as ``vllm serve`` loads it: as the user named it (a Hugging Face id or a local folder), a
    catalog name as its entry's Hugging Face id (`vllm_model_argument`)."""
    tensor_parallel: int = 1
    """The advised layout's tensor-parallel size: the runs', ``--tensor-parallel-size`` where given, else
    the smallest at which the model was measured (`slim.traces.usable.single_tensor_parallel_degree`)."""
    data_parallel: int = 1
    """The advised layout's data-parallel ranks: the cap is the server's requests in flight, each rank's
    vLLM ``--max-num-seqs`` its share (`max_num_seqs_per_rank`)."""
    expert_parallel: bool = False
    """Whether the advised layout's runs spread the experts over its GPUs (vLLM's
    ``--enable-expert-parallel``): the deployment serves with it too."""
    serving_flags: tuple[str, ...] = ()
    """vLLM's ``--quantization`` and ``--kv-cache-dtype`` the model is served with (the request's, or its
    catalog entry's): the deployment serves with them (`slim.specs.served_precision.serving_flags_of`)."""
    gpus_per_server: int = 1
    """The GPUs one server of the advised layout occupies (`columns.GPUS_PER_SERVER` of the workload's
    runs, else tensor x data parallel): what its throughput is per GPU over."""
    view: CandidateView | None = None
    """The candidates as the decision judged them (`slim.advisor.candidates.advice_view`)."""
    certificate: Certificate | None = None
    """Whether the cap decision is settled on the view (`slim.advisor.candidates.advice_certificate`, at
    the request's tolerance, under the run-to-run noise as `slim tune` certifies): its measured
    incumbent, what could still beat it, and what to measure again."""

    @property
    def max_num_seqs_per_rank(self) -> int:
        """vLLM's ``--max-num-seqs`` of the recommended cap: per data-parallel rank, its share of the
        server's requests in flight (`slim.specs.data_parallel.per_rank_cap`)."""
        return per_rank_cap(self.recommendation.batch_cap, self.data_parallel)


def model_directory(model: str | None) -> Path | None:
    """`model` where it is a local checkpoint folder vLLM would serve (one holding a ``config.json``)."""
    if model is None:
        return None
    folder = Path(model).expanduser()
    return folder if folder.is_dir() and (folder / "config.json").is_file() else None


def recorded_version(measured_runs: pd.DataFrame, runs: pd.DataFrame) -> str | None:
    """The vLLM release the workload's runs record most often (else the other runs'), whose scheduler
    SIM simulates the candidates under; None where no run records a release it can read."""
    for frame in (measured_runs, runs):
        if col.VLLM_VERSION not in frame:
            continue
        versions = frame[col.VLLM_VERSION].dropna().astype(str)
        versions = versions[versions.map(is_vllm_version)]
        if len(versions):
            return str(versions.value_counts().sort_index().idxmax())
    return None


def resolve_target(request: AdviceRequest) -> tuple[ArchitectureCatalog, Architecture, Hardware, dict]:
    """The catalog (with a described model joined: `model_config`, or `model` naming a checkpoint
    folder as ``vllm serve DIR`` does), the target's architecture and the accelerator."""
    r = request
    catalog = load_architectures(r.models_file)
    model, config = r.model, r.model_config
    folder = model_directory(model) if config is None else None
    if folder is not None:
        config, model = folder / "config.json", None
    if config is not None:
        described = architecture_from_hf_config(config, model)
        catalog, model = catalog.with_architecture(described), described.name
    if model is None:
        raise AdvisorError("name the target model (--model) or describe it (--model-config)")
    hardware_catalog = load_hardware_with_shipped(r.hardware_file)
    if r.hardware is None:
        raise AdvisorError(f"name the accelerator the runs ran on (--hardware; shipped: {', '.join(hardware_catalog)}"
                           "; or add yours to a hardware file, --hardware-file)")
    if r.hardware not in hardware_catalog:
        raise AdvisorError(unknown_hardware_message(r.hardware, hardware_catalog))
    catalog = catalog.serving(model, r.quantization, r.kv_cache_dtype)
    return catalog, catalog[model], hardware_catalog[r.hardware], hardware_catalog


def named_model(request: AdviceRequest, arch: Architecture) -> str:
    """The model as the user named it: ``--model``, else as the config that described it names its
    checkpoint (`served_model_of_config`), else the catalog's name."""
    if request.model is not None:
        return request.model
    if request.model_config is not None:
        return served_model_of_config(request.model_config)
    return arch.name


def advise(request: AdviceRequest) -> Advice:
    """Decide one workload's cap on the usable runs under ``request.traces`` (module docstring).

    SLIM (or SIM) is fitted on the runs `select_training_runs` keeps; SLIM is evaluated at the running
    batch ``min(cap, KV capacity in sequences)``, predicts the in-batch E2E and the mean TPOT, nothing
    else; SIM simulates each candidate cap as the workload's benchmarks send it, predicts every SLO
    metric but ITL's tail, and refuses caps whose simulated run preempts or exceeds vLLM's token
    budget. With a `confidence` (SLIM only), the in-batch E2E SLO is held on its one-sided upper bound.

    Raises a `SlimError` subclass on unusable input, an `AdvisorError` naming an SLO metric no usable
    run can judge (and the benchmark that would), and `NoFeasibleCapError` when no candidate cap meets
    the SLOs and the efficiency floor of Eq. 13 (or one sequence does not fit the KV cache).
    """
    r = request
    catalog, arch, hw, hardware_catalog = resolve_target(r)
    # Whether the runs spread the experts is read from them below: the experts' block split is theirs to tell.
    refused = (tensor_parallel_refusal(arch, int(r.tensor_parallel), expert_parallel=True)
               if r.tensor_parallel is not None else None)
    if refused is not None:
        raise NoFeasibleCapError(f"{arch.name} at --tensor-parallel-size {r.tensor_parallel}: {refused}")
    # The accelerator goes to ingest (a static batch's KV-cache check) and keeps its rows only.
    options = trace_options(hardware_catalog, r.hardware, r.table_columns)
    every_degree, report = usable_runs(Path(r.traces), catalog, options, hardware=hw.name, with_report=True)
    runs, other_degrees = single_tensor_parallel_degree(every_degree, r.tensor_parallel, arch.name)
    tensor_parallel = int(runs[col.TENSOR_PARALLEL].fillna(1).iloc[0]) if col.TENSOR_PARALLEL in runs and len(runs) \
        else int(r.tensor_parallel or 1)
    # Whether one sequence fits comes first: a size the weights leave no room at is no candidate, runs or not.
    of_model = runs[runs[col.MODEL] == arch.name]
    capacity_tokens, capacity_source = kv_capacity_tokens_or_default(
        float(of_model[col.KV_CAPACITY_TOKENS].max()) if not of_model.empty else float("nan"), arch, hw,
        tensor_parallel)
    if capacity_tokens <= 0:
        raise NoFeasibleCapError(f"the weights of {arch.name} split over {tensor_parallel} rank(s) leave no KV "
                                 f"cache on each {hw.name}")
    capacity = kv_capacity_sequences(capacity_tokens, r.input_len, r.output_len, arch, tensor_parallel)
    if capacity < 1:
        raise NoFeasibleCapError(f"one sequence of {r.input_len:g} + {r.output_len:g} tokens does not fit the KV "
                                 f"cache ({capacity_tokens:.0f} tokens) of {arch.name} on {hw.name}")
    if runs.empty and len(every_degree):
        raise AdvisorError(f"no usable run at --tensor-parallel-size {r.tensor_parallel} under {r.traces} (their "
                           f"sizes: {', '.join(map(str, other_degrees))})")
    judgement = judge(r.slos, runs)
    if judgement.problems:
        raise UnjudgedSloError(judgement.problems[0])
    train = select_training_runs(runs, catalog, r.train_models, r.exclude_runs)
    # A dense model's data-parallel run measured its ranks' sum: the predictor is fitted on one engine's runs.
    train = train[one_engine_runs(train, moe_in_lockstep(catalog))]
    kept = without_excluded(runs, r.exclude_runs)
    every_size = workload_runs(kept, arch.name, r.input_len, r.output_len)   # --exclude-runs: not facts either
    # One layout's measurements: a server at another data-parallel size uses other GPUs.
    measured_runs, other_sizes = single_data_parallel_size(every_size, r.data_parallel)
    data_parallel = int(measured_runs[col.DATA_PARALLEL].fillna(1).iloc[0]) if len(measured_runs) \
        and col.DATA_PARALLEL in measured_runs else int(r.data_parallel or 1)
    expert_parallel = layout_expert_parallel(measured_runs, Layout.of_sizes(tensor_parallel, data_parallel).label)
    throttled = col.MAX_CONCURRENCY in measured_runs and measured_runs[col.MAX_CONCURRENCY].notna().any()
    advice = predictor_advice(advise_predictors()[r.predictor], r, train, catalog, hw, arch, capacity_tokens,
                              measured_runs, throttled, tensor_parallel, recorded_version(measured_runs, runs),
                              data_parallel)
    rows = candidate_rows(r, advice, measured_runs)
    resolved = advice_limits(r.slos, rows)
    limits = resolved.limits_ms
    upper = frozenset({IN_BATCH_E2E}) if r.confidence is not None else frozenset()
    view = advice_view(rows, r.slos, limits)
    recommendation = recommend(view, r.epsilon, upper)
    if not recommendation.feasible:
        raise NoFeasibleCapError(f"no batch cap meets the constraints: {recommendation.reason}", rows)
    blocks = of_model[col.NUM_GPU_BLOCKS].dropna()
    max_model_len = int(np.ceil(r.input_len + r.output_len)) if r.max_model_len is None else int(r.max_model_len)
    # The runs' cap is the server's requests in flight; each data-parallel rank holds its share of them.
    memory = plan_kv_memory(arch, hw, per_rank_cap(recommendation.batch_cap, data_parallel), r.input_len, r.output_len,
                            num_gpu_blocks=int(blocks.max()) if not blocks.empty else None,
                            max_model_len=max_model_len, tensor_parallel=tensor_parallel)
    named = named_model(r, arch)
    tune = _outlook(r, named, measured_runs, recommendation.batch_cap, data_parallel) if r.plan else None
    return Advice(model=arch.name, input_len=float(r.input_len), output_len=float(r.output_len), n_runs=len(runs),
                  fit=advice.fit, recommendation=recommendation, slos=r.slos, limits_ms=limits, epsilon=r.epsilon,
                  candidates=rows, kv_capacity_sequences=capacity, kv_capacity_source=capacity_source, memory=memory,
                  max_model_len=max_model_len, knee=recommend_knee(arch, hw, r.input_len + r.output_len),
                  hardware=hw.name, train_models=tuple(sorted(train[col.MODEL].unique())),
                  n_left_out=len(runs) - len(train),
                  held_out=(None if advice.curve is None or advice.prior_reason is not None
                            else held_out_check(runs, train, arch, advice.fitted)),
                  # the server's ranks hold d x one rank's sequences against its cap over all of them
                  warnings=advice_warnings(arch, runs, train, recommendation, capacity * data_parallel,
                                           capacity_source, advice.curve, memory, r.input_len + r.output_len)
                  + tensor_parallel_warnings(runs, every_degree, other_degrees)
                  + data_parallel_warnings(data_parallel, len(measured_runs), len(every_size), other_sizes)
                  # judged on the workload's own runs where it has some, else on what the prediction learnt from
                  + unstated_statistic_warnings(r.slos, measured_runs if len(measured_runs) else runs)
                  + engine_warnings(measured_runs) + latency_order_warnings(measured_runs)
                  + served_model_warnings(vllm_model_argument(named, arch)),
                  predictor=r.predictor, refused_caps=advice.refused, confidence=r.confidence,
                  runs_found=len(report), skipped=skipped_runs(report), tune=tune, prior_reason=advice.prior_reason,
                  predicted_bounds=resolved.predicted, served_model=vllm_model_argument(named, arch),
                  serving_flags=tuple(serving_flags_of(arch)),
                  tensor_parallel=tensor_parallel, data_parallel=data_parallel, expert_parallel=expert_parallel,
                  gpus_per_server=server_gpus(measured_runs, tensor_parallel, data_parallel), view=view,
                  certificate=advice_certificate(view, r.epsilon, r.tolerance))


def without_excluded(runs: pd.DataFrame, globs: Sequence[str]) -> pd.DataFrame:
    """The runs whose directory matches no glob of `globs` (``--exclude-runs``)."""
    return runs[~runs[col.RUN_ID].map(lambda run: any(fnmatch.fnmatchcase(str(run), glob) for glob in globs))]


@dataclass(frozen=True)
class MeasuredLayout:
    """A layout the workload's runs measured: the GPUs one server of it occupies (`server_gpus`) and
    whether its runs spread the experts (`slim.tune.server_sizes.layout_expert_parallel`)."""

    server_gpus: int
    expert_parallel: bool = False


def workload_layouts(request: AdviceRequest) -> dict[tuple[int, int], MeasuredLayout]:
    """Every (tensor-parallel, data-parallel) size at which a usable run measured the workload, in
    order (runs that record neither count as 1), with what its runs say of its server."""
    catalog, arch, hw, hardware_catalog = resolve_target(request)
    options = trace_options(hardware_catalog, request.hardware, request.table_columns)
    runs = without_excluded(usable_runs(Path(request.traces), catalog, options, hardware=hw.name),
                            request.exclude_runs)
    measured = workload_runs(runs, arch.name, request.input_len, request.output_len)
    sizes = measured.reindex(columns=[col.TENSOR_PARALLEL, col.DATA_PARALLEL]).fillna(1).astype(int)
    out = {}
    for t, d in sorted(set(map(tuple, sizes.to_numpy().tolist()))):
        at = measured[(sizes[col.TENSOR_PARALLEL] == t) & (sizes[col.DATA_PARALLEL] == d)]
        out[(t, d)] = MeasuredLayout(server_gpus(at, t, d),
                                     layout_expert_parallel(at, Layout.of_sizes(t, d).label))
    return out


def server_gpus(measured_runs: pd.DataFrame, tensor_parallel: int, data_parallel: int) -> int:
    """The GPUs a server of the layout occupies: as its runs record them (`columns.GPUS_PER_SERVER`:
    tensor x pipeline x data parallel), else ``tensor_parallel x data_parallel``."""
    recorded = (measured_runs[col.GPUS_PER_SERVER].dropna() if col.GPUS_PER_SERVER in measured_runs
                else pd.Series(dtype=float))
    return int(recorded.max()) if len(recorded) else tensor_parallel * data_parallel


def _outlook(request: AdviceRequest, named: str, measured_runs: pd.DataFrame, advised_cap: float,
             data_parallel: int = 1) -> TuneOutlook:
    """`slim tune`'s plan on the same traces, workload, SLOs, candidates and tolerance (the SIM prior), at
    the advised layout (its data-parallel size too)."""
    offline = len(measured_runs) and (measured_runs[col.BENCHMARK_MODE] != col.BenchmarkMode.ONLINE).all()
    tensor_parallel = int(measured_runs[col.TENSOR_PARALLEL].fillna(1).iloc[0]) if len(measured_runs) else 1
    model_config = request.model_config
    if model_config is None and model_directory(request.model) is not None:
        model_config = model_directory(request.model) / "config.json"
    tune_request = TuneRequest(
        Path(request.traces), (WorkloadSpec(named, int(round(request.input_len)), int(round(request.output_len))),),
        str(request.hardware), request.slos, mode=OFFLINE if offline else ONLINE,
        candidates=tuple(int(c) for c in request.candidate_caps), epsilon=request.epsilon,
        tolerance=request.tolerance, num_prompts=request.num_prompts, tensor_parallel=tensor_parallel,
        data_parallel_sizes=(data_parallel,) if data_parallel > 1 else (), models_file=Path(request.models_file),
        hardware_file=Path(request.hardware_file), sim_constants_file=Path(request.sim_constants_file),
        table_columns=Path(request.table_columns) if request.table_columns is not None else None,
        model_config=Path(model_config) if model_config is not None else None,
        model_config_name=None if model_directory(request.model) is not None else request.model,
        quantization=request.quantization, kv_cache_dtype=request.kv_cache_dtype, simulations=request.simulations)
    reference_measured = bool(request.slos.relative and len(measured_runs)
                              and (measured_runs[col.MAX_NUM_SEQS] == request.slos.reference_cap).any())
    return tune_outlook(tune_request, advised_cap, reference_measured)
