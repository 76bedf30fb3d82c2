"""`slim advise` as a library call: fit SLIM (or calibrate the simulator, SIM) on a folder of vLLM
traces and choose a batch cap for one workload with BCA (Eq. 13), with its memory plan, the
knee's range, the held-out check and the warnings.

    advice = advise(AdviceRequest(traces=Path("runs"), model="opt-1.3b", input_len=242,
                                  output_len=520, slo_s=8.0))
    advice.decision.batch_cap, advice.memory.num_gpu_blocks_override, advice.warnings

``predictor="slim"`` (the default) evaluates SLIM at the running batch a cap allows;
``predictor="sim"`` simulates every candidate cap with the simulator calibrated on the training
runs (slower: each usable run and each candidate is simulated once) and refuses caps whose
simulated run preempts. SLIM is the default because it needs no simulation; how often each
advisor picks the full-profile cap is measured by the advisor study (`table_advisors.md` of each
dataset). The command line (`slim.cli`) only parses arguments into an
`AdviceRequest`, renders the `Advice` (`slim.advisor.report`) and maps errors to exit codes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.bca import (
    DEFAULT_CANDIDATE_BATCH_SIZES,
    DEFAULT_EPSILON,
    BcaResult,
    CurvePredictor,
)
from slim.advisor.predictor_bca import Target, predicted_bca
from slim.advisor.training_runs import (
    HeldOutCheck,
    held_out_check,
    select_training_runs,
    single_tensor_parallel_degree,
    trace_options,
    usable_runs,
)
from slim.errors import AdvisorError, NoFeasibleCapError
from slim.gpu.kv_memory import KvMemoryPlan, kv_capacity_sequences, kv_capacity_tokens_or_default, plan_kv_memory
from slim.gpu.roofline import KneeRecommendation, recommend_knee
from slim.model.calibration import CalibrationResult
from slim.predictors import FittedPredictor, RegisteredPredictor, TrainingRuns, advise_predictors
from slim.sim.constants import SIM_CONSTANTS_FILE, load_sim_constants
from slim.sim.schedules import DEFAULT_NUM_PROMPTS, ScheduleKey, keys_of_frame, simulate_schedules
from slim.specs.architecture import MODELS_FILE, Architecture, ArchitectureCatalog, load_architectures
from slim.specs.hardware import GIB, HARDWARE_FILE, Hardware, load_hardware
from slim.specs.hf_config import architecture_from_hf_config

DEFAULT_HARDWARE = "h100-64gb"


@dataclass(frozen=True)
class AdviceRequest:
    """One `advise` call: the traces, the target and its workload, and how to decide.

    The target is `model` (a name or alias of `models_file`), or the model a Hugging Face
    `model_config` (``config.json``) describes, named `model` if given. `slo_s` is the E2E SLO and
    `epsilon` the batching-efficiency floor of Eq. 13, over the `candidates` caps. SLIM (or SIM) is
    trained on the usable runs of `train_models` (None: every model) less those matching a glob of
    `exclude_runs`. `max_model_len` is vLLM's (None: ``IL + OL``). `sim_constants_file` and
    `num_prompts` are SIM's; `confidence` is SLIM's only. The first five fields, in order, are what
    every request needs: ``AdviceRequest(traces, model, input_len, output_len, slo_s)``.

    Raises `AdvisorError` for an unknown predictor, or a confidence outside (0, 1) or with SIM.
    """

    traces: str | Path
    model: str | None
    input_len: float
    output_len: float
    slo_s: float
    epsilon: float = DEFAULT_EPSILON
    hardware: str = DEFAULT_HARDWARE
    models_file: str | Path = MODELS_FILE
    hardware_file: str | Path = HARDWARE_FILE
    candidates: Sequence[float] = DEFAULT_CANDIDATE_BATCH_SIZES
    max_model_len: int | None = None
    model_config: str | Path | None = None
    train_models: Sequence[str] | None = None
    exclude_runs: Sequence[str] = ()
    predictor: str = "slim"
    sim_constants_file: str | Path = SIM_CONSTANTS_FILE
    num_prompts: int = DEFAULT_NUM_PROMPTS
    confidence: float | None = None
    table_columns: str | Path | None = None
    """A YAML file with a summary table's ``columns`` (and ``hardware_map``), as a dataset's ``table:``."""

    def __post_init__(self) -> None:
        offered = advise_predictors()
        if self.predictor not in offered:
            raise AdvisorError(f"unknown predictor '{self.predictor}'; choose one of {', '.join(offered)}")
        if self.confidence is not None:
            if not (np.isfinite(self.confidence) and 0 < self.confidence < 1):
                raise AdvisorError(f"confidence must lie in (0, 1), got {self.confidence}")
            if offered[self.predictor].bca != "curve":
                raise AdvisorError(f"--confidence bounds a predicted curve; --predictor {self.predictor} has no "
                                   "prediction band")
        for name in ("candidates", "exclude_runs", "train_models"):   # frozen means immutable all the way down
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(value))


@dataclass(frozen=True)
class AdviceWarning:
    """Something the user should know about a recommendation; `code` is stable for scripts."""

    code: str
    message: str


@dataclass(frozen=True)
class Advice:
    """What `advise` found: the SLIM fit (or SIM's calibration), the BCA decision, its memory
    plan and the knee's range; `refused_caps` are candidates SIM refused (simulated preemption)."""

    model: str
    input_len: float
    output_len: float
    n_runs: int
    fit: CalibrationResult
    decision: BcaResult
    kv_capacity_sequences: float
    kv_capacity_source: str
    memory: KvMemoryPlan
    max_model_len: int
    knee: KneeRecommendation
    hardware: str = DEFAULT_HARDWARE
    train_models: tuple[str, ...] = ()
    n_left_out: int = 0
    held_out: HeldOutCheck | None = None
    warnings: tuple[AdviceWarning, ...] = ()
    predictor: str = "slim"
    refused_caps: tuple[float, ...] = ()
    confidence: float | None = None


def advise(request: AdviceRequest) -> Advice:
    """Fit SLIM on the usable runs under ``request.traces`` and run SLIM-BCA (Eq. 13) for one
    workload, or with ``predictor="sim"`` calibrate the simulator on them and run SIM-BCA.

    A target described by a ``config.json`` joins the catalog, so runs of it become usable too.
    SLIM (or SIM) is fitted on the runs `select_training_runs` keeps. SLIM is evaluated at the
    running batch ``min(cap, KV capacity in sequences)`` (see `slim.paper.advisor_study`). SIM
    simulates each candidate cap (``num_prompts`` requests at once, the fixed constants of
    `sim_constants_file`) and refuses those that preempt or exceed vLLM's token budget. With a
    `confidence` (SLIM only), the SLO is held on the one-sided upper bound of E2E at that
    confidence (`slim.advisor.predictor_bca.curve_of`).

    Raises a `SlimError` subclass on unusable input and `NoFeasibleCapError` when no candidate cap
    meets the SLO and the efficiency floor of Eq. 13 (or one sequence does not fit the KV cache).
    """
    r = request
    catalog = load_architectures(r.models_file)
    model = r.model
    if r.model_config is not None:
        described = architecture_from_hf_config(r.model_config, model)
        catalog, model = catalog.with_architecture(described), described.name
    if model is None:
        raise AdvisorError("name the target model (--model) or describe it (--model-config)")
    hardware_catalog = load_hardware(r.hardware_file)
    if r.hardware not in hardware_catalog:
        raise AdvisorError(f"unknown hardware '{r.hardware}' in {r.hardware_file}; "
                           f"known: {', '.join(hardware_catalog)}")
    hw = hardware_catalog[r.hardware]
    arch = catalog[model]
    # The accelerator goes to ingest (a static batch's KV-cache check) and keeps its rows only.
    options = trace_options(hardware_catalog, r.hardware, r.table_columns)
    every_degree = usable_runs(Path(r.traces), catalog, options, hardware=hw.name)
    runs, other_degrees = single_tensor_parallel_degree(every_degree)
    train = select_training_runs(runs, catalog, r.train_models, r.exclude_runs)
    of_model = runs[runs[col.MODEL] == arch.name]
    capacity_tokens, capacity_source = kv_capacity_tokens_or_default(
        float(of_model[col.KV_CAPACITY_TOKENS].max()) if not of_model.empty else float("nan"), arch, hw)
    capacity = kv_capacity_sequences(capacity_tokens, r.input_len, r.output_len)
    if capacity < 1:
        raise NoFeasibleCapError(f"one sequence of {r.input_len:g} + {r.output_len:g} tokens does not fit the KV "
                                 f"cache ({capacity_tokens:.0f} tokens) of {arch.name} on {hw.name}")
    advice = predictor_advice(advise_predictors()[r.predictor], r, train, catalog, hw, arch, capacity_tokens)
    fit, decision, refused = advice.fit, advice.decision, advice.refused
    if not decision.feasible:
        raise NoFeasibleCapError(f"no batch cap meets the constraints: {decision.reason}", decision)
    blocks = of_model[col.NUM_GPU_BLOCKS].dropna()
    max_model_len = int(np.ceil(r.input_len + r.output_len)) if r.max_model_len is None else int(r.max_model_len)
    memory = plan_kv_memory(arch, hw, decision.batch_cap, r.input_len, r.output_len,
                            num_gpu_blocks=int(blocks.max()) if not blocks.empty else None,
                            max_model_len=max_model_len)
    return Advice(model=arch.name, input_len=float(r.input_len), output_len=float(r.output_len), n_runs=len(runs),
                  fit=fit, decision=decision, kv_capacity_sequences=capacity,
                  kv_capacity_source=capacity_source, memory=memory, max_model_len=max_model_len,
                  knee=recommend_knee(arch, hw, r.input_len + r.output_len), hardware=hw.name,
                  train_models=tuple(sorted(train[col.MODEL].unique())), n_left_out=len(runs) - len(train),
                  held_out=None if advice.curve is None else held_out_check(runs, train, arch, advice.fitted),
                  warnings=advice_warnings(arch, runs, train, decision, capacity, capacity_source, advice.curve, memory,
                                           r.input_len + r.output_len)
                  + tensor_parallel_warnings(runs, every_degree, other_degrees),
                  predictor=r.predictor, refused_caps=refused, confidence=r.confidence)


def tensor_parallel_warnings(runs: pd.DataFrame, every_degree: pd.DataFrame,
                             other_degrees: tuple[int, ...]) -> tuple[AdviceWarning, ...]:
    """A warning where `single_tensor_parallel_degree` left runs of other degrees out."""
    if not other_degrees:
        return ()
    kept = int(runs[col.TENSOR_PARALLEL].fillna(1).iloc[0])
    return (AdviceWarning(
        "other_tensor_parallel_left_out",
        f"{len(every_degree) - len(runs)} usable run(s) at tensor_parallel {', '.join(map(str, other_degrees))} "
        f"are left out: the advice is fitted on the {len(runs)} run(s) at tensor_parallel {kept} and holds for "
        "that degree (SLIM has no tensor-parallel term); pass traces of one degree to advise on another"),)


def advice_warnings(arch: Architecture, runs: pd.DataFrame, train: pd.DataFrame, decision: BcaResult,
                    capacity: float, capacity_source: str, predict: CurvePredictor | None, memory: KvMemoryPlan,
                    sequence_tokens: float) -> tuple[AdviceWarning, ...]:
    """What the user should know about `decision` (Eq. 13's choice): the target `arch` has no usable
    run among `runs`, or its runs are left out of `train` (a transfer); the cap exceeds the KV
    `capacity` in sequences of `sequence_tokens` (vLLM then runs fewer sequences than the cap;
    with a predicted curve `predict` (SLIM's), what the capacity itself would give; without one
    (`PredictorAdvice.curve` is None: SIM's decision rests on simulated runs, which queued the rest));
    the cap's KV cache exceeds vLLM's default reservation (`memory`)."""
    warnings = []
    trained = sorted(train[col.MODEL].unique())
    if not (runs[col.MODEL] == arch.name).any():
        warnings.append(AdviceWarning(
            "target_not_profiled",
            f"{arch.name} has no usable run under the traces: its prediction rests on the other models "
            f"({', '.join(trained)}) alone; profile a few caps of it, or see how well SLIM transfers "
            "between the profiled models with --train-models"))
    elif arch.name not in trained:
        warnings.append(AdviceWarning(
            "target_not_trained",
            f"{arch.name}'s runs are left out of training (--train-models/--exclude-runs): the prediction "
            "is a transfer from the other models"))
    if decision.batch_cap > capacity and predict is None:
        warnings.append(AdviceWarning(
            "cap_exceeds_kv_capacity",
            f"--max-num-seqs {int(decision.batch_cap)} exceeds the KV capacity of {capacity:.1f} sequences of "
            f"{sequence_tokens:g} tokens ({capacity_source}): vLLM runs at most about {int(np.floor(capacity))} "
            "at once and queues the rest, as the simulated run did"))
    elif decision.batch_cap > capacity:
        running = int(np.floor(capacity))
        at_capacity = float(np.asarray(predict(np.array([float(running)]))[0])[0])
        loss_pct = 100.0 * (1.0 - at_capacity / decision.throughput_per_s)
        warnings.append(AdviceWarning(
            "cap_exceeds_kv_capacity",
            f"--max-num-seqs {int(decision.batch_cap)} exceeds the KV capacity of {capacity:.1f} sequences of "
            f"{sequence_tokens:g} tokens ({capacity_source}): vLLM runs at most about {running} at once and "
            f"queues the rest, and the prediction assumes that; --max-num-seqs {running} predicts "
            f"{at_capacity:,.0f} tokens/s ({loss_pct:.1f}% less) with no sequence waiting for KV blocks"))
    if memory.memory_saved_bytes < 0:
        warnings.append(AdviceWarning(
            "kv_exceeds_reservation",
            f"the cap needs {memory.kv_bytes_needed / GIB:.2f} GiB of KV cache, more than the "
            f"{memory.kv_reservation_bytes / GIB:.2f} GiB of vLLM's default reservation; vLLM will queue requests"))
    return tuple(warnings)


@dataclass(frozen=True)
class PredictorAdvice:
    """One predictor's Eq. 13 decision for a request: the calibration behind it, the decision, the
    candidates the predictor refused, and the predicted curve where the predictor has one (SLIM's;
    None where the decision rests on simulated runs, SIM's, which queue beyond the KV capacity
    themselves and have no held-out check)."""

    fitted: FittedPredictor
    decision: BcaResult
    refused: tuple[float, ...] = ()
    curve: CurvePredictor | None = None

    @property
    def fit(self) -> CalibrationResult | None:
        return self.fitted.calibration


def predictor_advice(entry: RegisteredPredictor, request: AdviceRequest, train: pd.DataFrame,
                     catalog: ArchitectureCatalog, hw: Hardware, arch: Architecture,
                     capacity_tokens: float) -> PredictorAdvice:
    """The registered predictor `entry` fitted on `train`, and its Eq. 13 decision for the request's
    workload over its candidates (`slim.advisor.predictor_bca`). A predictor that needs simulated
    schedules (SIM) gets those of the training runs and of each candidate cap (cap 1 too, for T(1):
    ``num_prompts`` requests at once at the constants of `sim_constants_file`); the caps above vLLM's
    token budget are refused."""
    candidates = np.asarray(request.candidates, dtype=float)
    target = Target(arch.name, request.input_len, request.output_len, capacity_tokens)
    schedules, over_budget = None, ()
    if entry.needs_schedules:
        constants = load_sim_constants(request.sim_constants_file)
        budget = constants.max_num_batched_tokens
        caps = sorted({int(cap) for cap in candidates} | {1})
        workload = [ScheduleKey(arch.name, int(round(request.input_len)), int(round(request.output_len)), cap,
                                request.num_prompts)
                    for cap in caps if cap <= budget]
        workers = min(4, os.cpu_count() or 1)
        schedules = simulate_schedules([*keys_of_frame(train), *workload], catalog, hw, constants, workers=workers)
        target = replace(target, configs=pd.DataFrame(
            {col.MODEL: [key.model for key in workload], col.INPUT_LEN_MEAN: [key.input_len for key in workload],
             col.OUTPUT_LEN_MEAN: [key.output_len for key in workload],
             col.MAX_NUM_SEQS: [key.max_num_seqs for key in workload],
             col.NUM_PROMPTS: [key.num_prompts for key in workload]}))
        over_budget = tuple(float(cap) for cap in candidates if cap > budget)
    # A band needs the training-equivalent fits (32 refinements) where the data leave directions open.
    training = TrainingRuns(train, catalog, hw, schedules, f"usable runs under {request.traces}",
                            sample_valley=request.confidence is not None and entry.bca == "curve")
    fitted = entry.predictor.fit(training)
    decided = predicted_bca(entry, fitted, target, candidates, request.slo_s, request.epsilon, request.confidence)
    return PredictorAdvice(fitted, decided.decision, over_budget + decided.refused, decided.curve)

