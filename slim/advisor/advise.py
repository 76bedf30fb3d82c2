"""`slim advise` as a library call: fit SLIM (or calibrate the simulator, SIM) on a folder of vLLM
traces and choose a batch cap for one workload by the one decision `slim tune` makes too
(`slim.advisor.decision`: BCA's Eq. 13 on the SLOs vLLM users state, each candidate's measurement
where a run of the workload measured it, the prediction elsewhere), with its memory plan, the knee's
range, the held-out check, the warnings, and whether the decision is settled or which benchmark
settles it (`slim tune`'s session on the same runs and SLOs: `TuneState`).

    advice = advise(AdviceRequest(traces=Path("runs"), model="opt-1.3b", input_len=242,
                                  output_len=520, slos=Slos.of(["p99_tpot_ms=40"]), hardware="h100-64gb"))
    advice.recommendation.batch_cap, advice.memory.num_gpu_blocks_override, advice.tune.settled

``predictor="slim"`` (the default) evaluates SLIM at the running batch a cap allows;
``predictor="sim"`` simulates every candidate cap with the simulator calibrated on the training
runs (slower: each usable run and each candidate is simulated once) and refuses caps whose
simulated run preempts. SLIM is the default because it needs no simulation; how often each
advisor picks the full-profile cap is measured by the advisor study (`table_advisors.md` of each
dataset). The command line (`slim.cli`) only parses arguments into an
`AdviceRequest`, renders the `Advice` (`slim.advisor.report`) and maps errors to exit codes.
"""

from __future__ import annotations

import fnmatch
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.bca import DEFAULT_CANDIDATE_BATCH_SIZES, DEFAULT_EPSILON, CurvePredictor
from slim.advisor.decision import (
    THROUGHPUT,
    CandidateView,
    Constraint,
    Estimates,
    Recommendation,
    recommend,
)
from slim.advisor.predictor_bca import Target, curve_of, simulated_curve
from slim.advisor.training_runs import (
    HeldOutCheck,
    held_out_check,
    select_training_runs,
    single_tensor_parallel_degree,
    skipped_runs,
    trace_options,
    usable_runs,
)
from slim.errors import AdvisorError, NoFeasibleCapError
from slim.gpu.kv_memory import KvMemoryPlan, kv_capacity_sequences, kv_capacity_tokens_or_default, plan_kv_memory
from slim.gpu.roofline import KneeRecommendation, recommend_knee
from slim.model.calibration import CalibrationResult
from slim.predictors import FittedPredictor, RegisteredPredictor, TrainingRuns, advise_predictors
from slim.predictors.contract import predict_slo_metrics
from slim.predictors.slim_model import SLIM_SLO_METRICS
from slim.sim.constants import SIM_CONSTANTS_FILE, load_sim_constants
from slim.sim.schedules import DEFAULT_NUM_PROMPTS, ScheduleKey, keys_of_frame, simulate_schedules
from slim.specs.architecture import MODELS_FILE, Architecture, ArchitectureCatalog, load_architectures
from slim.specs.hardware import GIB, HARDWARE_FILE, Hardware, load_hardware_with_shipped, unknown_hardware_message
from slim.specs.hf_config import architecture_from_hf_config
from slim.specs.slo import IN_BATCH_E2E, SloMetric, Slos, judge, judging_runs

NOMINAL_MATCH = 0.02
"""A run measures the workload when its model is the target and its mean lengths are within 2 %."""


def default_predictor(slos: Slos) -> str:
    """``slim`` where SLIM predicts every metric of `slos` and no goodput is asked for, else ``sim``
    (which simulates each request, so every statistic but ITL's tail)."""
    if slos.goodput is None and all(metric.name in SLIM_SLO_METRICS for metric in slos.metrics):
        return "slim"
    return "sim"


@dataclass(frozen=True)
class AdviceRequest:
    """One `advise` call: the traces, the target and its workload, and how to decide.

    The target is `model` (a name or alias of `models_file`), or the model a Hugging Face
    `model_config` (``config.json``) describes, named `model` if given. The SLOs are `slos`
    (`slim.specs.slo.Slos`), or `slo_s`, the paper's in-batch E2E in seconds; `epsilon` is the
    batching-efficiency floor of Eq. 13, over the `candidates` caps (cap 1 always added, for
    ``T(1)``, as `slim tune` adds it). `hardware` is the accelerator the runs ran on (a key of
    `hardware_file`; no default). SLIM (or SIM) is trained on the usable runs of `train_models`
    (None: every model) less those matching a glob of `exclude_runs`. `max_model_len` is vLLM's
    (None: ``IL + OL``). `sim_constants_file` and `num_prompts` are SIM's; `confidence` is SLIM's
    only. `plan` also builds `slim tune`'s session on the same runs, to say whether the decision is
    settled and which benchmark would settle it.

    Raises `AdvisorError` for an unknown predictor, a confidence outside (0, 1) or with SIM, or no
    objective at all.
    """

    traces: str | Path
    model: str | None
    input_len: float
    output_len: float
    slo_s: float | None = None
    slos: Slos | None = None
    epsilon: float = DEFAULT_EPSILON
    hardware: str | None = None
    models_file: str | Path = MODELS_FILE
    hardware_file: str | Path = HARDWARE_FILE
    candidates: Sequence[float] = DEFAULT_CANDIDATE_BATCH_SIZES
    max_model_len: int | None = None
    model_config: str | Path | None = None
    train_models: Sequence[str] | None = None
    exclude_runs: Sequence[str] = ()
    predictor: str | None = None
    """``slim``, ``sim``, or None: SLIM where it predicts every SLO metric (the in-batch E2E, the mean
    TPOT) and no goodput is asked for, else SIM (`default_predictor`)."""
    sim_constants_file: str | Path = SIM_CONSTANTS_FILE
    num_prompts: int = DEFAULT_NUM_PROMPTS
    confidence: float | None = None
    table_columns: str | Path | None = None
    """A YAML file with a summary table's ``columns`` (and ``hardware_map``), as a dataset's ``table:``."""
    plan: bool = True

    def __post_init__(self) -> None:
        offered = advise_predictors()
        if self.slos is None and self.slo_s is not None:
            object.__setattr__(self, "slos", Slos.of(slo_ms=1e3 * float(self.slo_s)))
        if self.predictor is None:
            object.__setattr__(self, "predictor", "slim" if self.confidence is not None or self.slos is None
                               else default_predictor(self.slos))
        if self.predictor not in offered:
            raise AdvisorError(f"unknown predictor '{self.predictor}'; choose one of {', '.join(offered)}")
        if self.confidence is not None:
            if not (np.isfinite(self.confidence) and 0 < self.confidence < 1):
                raise AdvisorError(f"confidence must lie in (0, 1), got {self.confidence}")
            if offered[self.predictor].bca != "curve":
                raise AdvisorError(f"--confidence bounds a predicted curve; --predictor {self.predictor} has no "
                                   "prediction band")
        if self.slos is None:
            raise AdvisorError("state an objective: --slo NAME=VALUE (e.g. p99_tpot_ms=50), --slo-ms or --goodput")
        for name in ("candidates", "exclude_runs", "train_models"):   # frozen means immutable all the way down
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(value))

    @property
    def candidate_caps(self) -> tuple[float, ...]:
        """The candidates, always with cap 1 (``T(1)`` of the efficiency floor)."""
        return tuple(sorted({float(c) for c in self.candidates} | {1.0}))


@dataclass(frozen=True)
class AdviceWarning:
    """Something the user should know about a recommendation; `code` is stable for scripts."""

    code: str
    message: str


@dataclass(frozen=True)
class CandidateRow:
    """One candidate cap: what the workload's runs measured (by quantity, vLLM's names; `THROUGHPUT`
    in tokens/s, SLO metrics in ms; absent where no run judged it) and what the predictor predicts
    (NaN where it cannot: SLIM gives the in-batch E2E and the mean TPOT only); `bound_ms` the
    upper bound a confident advice holds the in-batch E2E to; `refused` where the predictor refuses
    the cap (SIM: its simulated run preempts)."""

    max_num_seqs: float
    measured: dict[str, float]
    predicted: dict[str, float]
    runs: int = 0
    bound_ms: float = math.nan
    refused: bool = False


@dataclass(frozen=True)
class TuneState:
    """What `slim tune` makes of the same runs and SLOs: whether the decision is settled, the cap its
    belief recommends, its next benchmark (its command lines), and one line where it recommends
    another cap than `advise`."""

    settled: bool
    batch_cap: float
    next_cap: float | None = None
    next_reason: str = ""
    next_commands: dict[str, str] = field(default_factory=dict)
    disagreement: str | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Advice:
    """What `advise` found: the SLIM fit (or SIM's calibration), the recommendation (the one decision
    on measurements and predictions, `slim.advisor.decision.recommend`), every candidate, its memory
    plan and the knee's range, the runs left out, and `slim tune`'s view (`tune`, None when not
    planned); `refused_caps` are candidates SIM refused (simulated preemption)."""

    model: str
    input_len: float
    output_len: float
    n_runs: int
    fit: CalibrationResult
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
    skipped: tuple = ()
    tune: TuneState | None = None


def resolve_target(request: AdviceRequest) -> tuple[ArchitectureCatalog, Architecture, Hardware, dict]:
    """The catalog (with a described model joined), the target's architecture and the accelerator."""
    r = request
    catalog = load_architectures(r.models_file)
    model = r.model
    if r.model_config is not None:
        described = architecture_from_hf_config(r.model_config, model)
        catalog, model = catalog.with_architecture(described), described.name
    if model is None:
        raise AdvisorError("name the target model (--model) or describe it (--model-config)")
    hardware_catalog = load_hardware_with_shipped(r.hardware_file)
    if r.hardware is None:
        raise AdvisorError(f"name the accelerator the runs ran on (--hardware; shipped: {', '.join(hardware_catalog)}"
                           "; or add yours to a hardware file, --hardware-file)")
    if r.hardware not in hardware_catalog:
        raise AdvisorError(unknown_hardware_message(r.hardware, hardware_catalog))
    return catalog, catalog[model], hardware_catalog[r.hardware], hardware_catalog


def workload_runs(runs: pd.DataFrame, model: str, input_len: float, output_len: float) -> pd.DataFrame:
    """The runs that measured the workload: its model, mean lengths within `NOMINAL_MATCH`."""
    if runs.empty:
        return runs
    il, ol = runs[col.INPUT_LEN_MEAN].astype(float), runs[col.OUTPUT_LEN_MEAN].astype(float)
    return runs[(runs[col.MODEL] == model) & ((il - input_len).abs() <= NOMINAL_MATCH * input_len)
                & ((ol - output_len).abs() <= NOMINAL_MATCH * output_len)]


def advise(request: AdviceRequest) -> Advice:
    """Fit SLIM on the usable runs under ``request.traces`` (or with ``predictor="sim"`` calibrate the
    simulator on them) and decide one workload's cap: Eq. 13 on the SLOs (`slim.advisor.decision`),
    each candidate at its measured values where a usable run of the workload measured it, at the
    prediction elsewhere.

    A target described by a ``config.json`` joins the catalog, so runs of it become usable too.
    SLIM (or SIM) is fitted on the runs `select_training_runs` keeps. SLIM is evaluated at the
    running batch ``min(cap, KV capacity in sequences)`` (see `slim.paper.advisor_study`); it
    predicts the in-batch E2E and the mean TPOT, nothing else. SIM simulates each candidate cap
    (``num_prompts`` requests at once, the fixed constants of `sim_constants_file`), predicts every
    SLO metric but ITL's tail, and refuses caps whose simulated run preempts or exceeds vLLM's token
    budget. With a `confidence` (SLIM only), the in-batch E2E SLO is held on its one-sided upper bound
    at that confidence (`slim.advisor.predictor_bca.curve_of`).

    Raises a `SlimError` subclass on unusable input, an `AdvisorError` naming an SLO metric no usable
    run can judge (and the benchmark that would), and `NoFeasibleCapError` when no candidate cap meets
    the SLOs and the efficiency floor of Eq. 13 (or one sequence does not fit the KV cache).
    """
    r = request
    catalog, arch, hw, hardware_catalog = resolve_target(r)
    # The accelerator goes to ingest (a static batch's KV-cache check) and keeps its rows only.
    options = trace_options(hardware_catalog, r.hardware, r.table_columns)
    every_degree, report = usable_runs(Path(r.traces), catalog, options, hardware=hw.name, with_report=True)
    runs, other_degrees = single_tensor_parallel_degree(every_degree)
    judgement = judge(r.slos, runs)
    if judgement.problems:
        raise AdvisorError(judgement.problems[0])
    train = select_training_runs(runs, catalog, r.train_models, r.exclude_runs)
    of_model = runs[runs[col.MODEL] == arch.name]
    capacity_tokens, capacity_source = kv_capacity_tokens_or_default(
        float(of_model[col.KV_CAPACITY_TOKENS].max()) if not of_model.empty else float("nan"), arch, hw)
    capacity = kv_capacity_sequences(capacity_tokens, r.input_len, r.output_len)
    if capacity < 1:
        raise NoFeasibleCapError(f"one sequence of {r.input_len:g} + {r.output_len:g} tokens does not fit the KV "
                                 f"cache ({capacity_tokens:.0f} tokens) of {arch.name} on {hw.name}")
    kept = runs[~runs[col.RUN_ID].map(lambda run: any(fnmatch.fnmatchcase(str(run), glob) for glob in r.exclude_runs))]
    measured_runs = workload_runs(kept, arch.name, r.input_len, r.output_len)   # --exclude-runs: not facts either
    throttled = col.MAX_CONCURRENCY in measured_runs and measured_runs[col.MAX_CONCURRENCY].notna().any()
    advice = predictor_advice(advise_predictors()[r.predictor], r, train, catalog, hw, arch, capacity_tokens,
                              throttled)
    rows = candidate_rows(r, advice, measured_runs)
    limits = slo_limits(r.slos, rows)
    view = candidate_view(rows, r.slos, limits)
    upper = frozenset({IN_BATCH_E2E}) if r.confidence is not None else frozenset()
    recommendation = recommend(view, r.epsilon, upper)
    if not recommendation.feasible:
        raise NoFeasibleCapError(f"no batch cap meets the constraints: {recommendation.reason}", rows)
    blocks = of_model[col.NUM_GPU_BLOCKS].dropna()
    max_model_len = int(np.ceil(r.input_len + r.output_len)) if r.max_model_len is None else int(r.max_model_len)
    memory = plan_kv_memory(arch, hw, recommendation.batch_cap, r.input_len, r.output_len,
                            num_gpu_blocks=int(blocks.max()) if not blocks.empty else None,
                            max_model_len=max_model_len)
    tune = tune_state(r, arch, measured_runs, recommendation) if r.plan else None
    return Advice(model=arch.name, input_len=float(r.input_len), output_len=float(r.output_len), n_runs=len(runs),
                  fit=advice.fit, recommendation=recommendation, slos=r.slos, limits_ms=limits, epsilon=r.epsilon,
                  candidates=rows, kv_capacity_sequences=capacity, kv_capacity_source=capacity_source, memory=memory,
                  max_model_len=max_model_len, knee=recommend_knee(arch, hw, r.input_len + r.output_len),
                  hardware=hw.name, train_models=tuple(sorted(train[col.MODEL].unique())),
                  n_left_out=len(runs) - len(train),
                  held_out=None if advice.curve is None else held_out_check(runs, train, arch, advice.fitted),
                  warnings=advice_warnings(arch, runs, train, recommendation, capacity, capacity_source, advice.curve,
                                           memory, r.input_len + r.output_len)
                  + tensor_parallel_warnings(runs, every_degree, other_degrees),
                  predictor=r.predictor, refused_caps=advice.refused, confidence=r.confidence,
                  runs_found=len(report), skipped=skipped_runs(report), tune=tune)


def candidate_rows(request: AdviceRequest, advice: PredictorAdvice,
                   measured_runs: pd.DataFrame) -> tuple[CandidateRow, ...]:
    """Every candidate cap: the workload's measurements (each SLO metric from the runs that judge it)
    and the predictor's predictions."""
    from slim.tune.plan import measurement_of_runs

    rows = []
    for position, cap in enumerate(request.candidate_caps):
        at_cap = measured_runs[measured_runs[col.MAX_NUM_SEQS].astype(float) == cap] if len(measured_runs) else \
            measured_runs
        measured = measurement_of_runs(at_cap, request.slos).values() if len(at_cap) else {}
        tpot = SloMetric.parse(col.MEAN_TPOT_MS)
        judged = at_cap[judging_runs(tpot, at_cap)] if len(at_cap) else at_cap
        if len(judged) and tpot.name not in measured:     # the frontier's x axis
            measured[tpot.name] = float(np.mean(tpot.values_ms(judged)))
        predicted = {name: float(values[position]) for name, values in advice.predicted.items()}
        rows.append(CandidateRow(float(cap), measured, predicted, len(at_cap),
                                 float(advice.bound_ms[position]) if advice.bound_ms is not None else math.nan,
                                 cap in advice.refused))
    return tuple(rows)


def slo_limits(slos: Slos, rows: Sequence[CandidateRow]) -> dict[str, float]:
    """Each SLO's bound in ms: a relative one at the reference cap's measured value (else its
    prediction, said so in the report), as `slim tune` resolves it."""
    reference = next((row for row in rows if row.max_num_seqs == slos.reference_cap), None)
    limits = {}
    for bound in slos.bounds:
        if not bound.relative:
            limits[bound.metric.name] = bound.limit()
            continue
        if reference is None:
            raise AdvisorError(f"the relative SLO's reference cap {slos.reference_cap:g} is not a candidate")
        value = reference.measured.get(bound.metric.name, reference.predicted.get(bound.metric.name, math.nan))
        if not np.isfinite(value):
            raise AdvisorError(f"{bound.metric.name}={bound.multiplier:g}x needs its value at cap "
                               f"{slos.reference_cap:g}: no run of the workload measured it and the predictor "
                               "cannot predict it; measure that cap first (slim tune proposes it)")
        limits[bound.metric.name] = bound.limit(value)
    return limits


def candidate_view(rows: Sequence[CandidateRow], slos: Slos, limits: dict[str, float]) -> CandidateView:
    """The candidates as the decision reads them: measured values where measured, predictions elsewhere
    (no interval but a confident advice's bound); a refused cap counts as failed."""
    caps = np.array([row.max_num_seqs for row in rows])

    def estimates(name: str, bound: bool = False) -> Estimates:
        measured = np.array([name in row.measured for row in rows])
        value = np.array([row.measured.get(name, math.nan) for row in rows])
        mean = np.array([row.predicted.get(name, math.nan) for row in rows])
        high = np.array([row.bound_ms if bound and np.isfinite(row.bound_ms) else m for row, m in zip(rows, mean)])
        return Estimates(measured, value, mean, mean, high, np.zeros(len(rows)))

    constraints = tuple(Constraint(b.metric.name, limits[b.metric.name], estimates(b.metric.name, b.metric.in_batch))
                        for b in slos.bounds)
    failed = np.array([row.refused for row in rows])
    return CandidateView(caps, failed, estimates(THROUGHPUT), constraints,
                         estimates("goodput") if slos.goodput is not None else None)


def tune_state(request: AdviceRequest, arch: Architecture, measured_runs: pd.DataFrame,
               recommendation: Recommendation) -> TuneState:
    """`slim tune`'s plan on the same traces, workload, SLOs and candidates (the SIM prior): settled or
    not, its recommendation and next benchmark, and why it differs where it does."""
    import shlex

    from slim.tune.plan import (
        OFFLINE,
        ONLINE,
        TuneRequest,
        WorkloadSpec,
        build_plan,
        proposal_commands,
        select_proposals,
    )

    offline = len(measured_runs) and (measured_runs[col.BENCHMARK_MODE] != col.BenchmarkMode.ONLINE).all()
    prompts = measured_runs[col.NUM_PROMPTS].dropna() if len(measured_runs) else pd.Series(dtype=float)
    tensor_parallel = (int(measured_runs[col.TENSOR_PARALLEL].fillna(1).iloc[0]) if len(measured_runs) else 1)
    tune_request = TuneRequest(
        Path(request.traces), (WorkloadSpec(request.model or arch.name, int(round(request.input_len)),
                                            int(round(request.output_len))),),
        str(request.hardware), request.slos, mode=OFFLINE if offline else ONLINE,
        candidates=tuple(int(c) for c in request.candidate_caps), epsilon=request.epsilon,
        num_prompts=int(prompts.mode().iloc[0]) if len(prompts) and not offline else DEFAULT_NUM_PROMPTS,
        tensor_parallel=tensor_parallel, models_file=Path(request.models_file),
        hardware_file=Path(request.hardware_file), sim_constants_file=Path(request.sim_constants_file),
        table_columns=Path(request.table_columns) if request.table_columns is not None else None,
        model_config=Path(request.model_config) if request.model_config is not None else None,
        model_config_name=request.model)
    plan = build_plan(tune_request)
    workload = plan.workloads[0]
    certificate = plan.session.certificate(workload)
    tuned = plan.session.recommendation(workload)
    tuned_cap = tuned.batch_cap if tuned is not None else math.nan
    settled = certificate.settled and certificate.batch_cap == recommendation.batch_cap
    proposals = select_proposals(plan.session.proposals(), 1)
    proposal = proposals[0] if proposals else None
    commands = ({name: shlex.join(argv) for name, argv in proposal_commands(plan, proposal).items()}
                if proposal is not None else {})
    disagreement = None
    if not np.isfinite(tuned_cap):
        disagreement = ("slim tune recommends no cap yet: "
                        + (f"a relative SLO's bound rests on a measured cap {request.slos.reference_cap:g}, which "
                           "no run of this workload measured (advise predicted it); it measures that first"
                           if request.slos.relative and not (measured_runs[col.MAX_NUM_SEQS]
                                                             == request.slos.reference_cap).any()
                           else f"it measures cap {proposal.max_num_seqs:g} first ({proposal.reason})"
                           if proposal is not None else "no candidate is known to meet the SLOs"))
    elif tuned_cap != recommendation.batch_cap:
        disagreement = (f"slim tune's belief (SIM's prior corrected by {len(plan.session.measurements)} measured "
                        f"run(s)) recommends --max-num-seqs {tuned_cap:g}, not {recommendation.batch_cap:g}: the two "
                        "predict the caps no run of this workload measured differently"
                        + (f"; measuring cap {proposal.max_num_seqs:g} (below) decides between them"
                           if proposal is not None else ""))
    return TuneState(settled, tuned_cap, proposal.max_num_seqs if proposal is not None else None,
                     proposal.reason if proposal is not None else "", commands, disagreement,
                     tuple(certificate.notes))


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


def advice_warnings(arch: Architecture, runs: pd.DataFrame, train: pd.DataFrame, decision: Recommendation,
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
    """One predictor fitted for a request: the calibration behind it, its prediction of every candidate
    cap (by quantity: `THROUGHPUT` in tokens/s, SLO metrics in ms; NaN where it cannot), the upper
    bound of the in-batch E2E at the request's confidence (None without one), the candidates it
    refused, and the predicted curve where it has one (SLIM's; None where the prediction rests on
    simulated runs, SIM's, which queue beyond the KV capacity themselves and have no held-out check)."""

    fitted: FittedPredictor
    predicted: dict[str, np.ndarray]
    refused: tuple[float, ...] = ()
    curve: CurvePredictor | None = None
    bound_ms: np.ndarray | None = None

    @property
    def fit(self) -> CalibrationResult | None:
        return self.fitted.calibration


def predictor_advice(entry: RegisteredPredictor, request: AdviceRequest, train: pd.DataFrame,
                     catalog: ArchitectureCatalog, hw: Hardware, arch: Architecture,
                     capacity_tokens: float, throttled: bool = False) -> PredictorAdvice:
    """The registered predictor `entry` fitted on `train`, and its prediction of the request's workload
    at every candidate cap: throughput, the in-batch E2E and each SLO metric
    (`slim.predictors.contract.predict_slo_metrics`; under a client that keeps the cap in flight where
    the workload's runs were `throttled` so, else every request at once). A predictor that needs
    simulated schedules (SIM) gets those of the training runs and of each candidate cap (cap 1 too,
    for T(1): ``num_prompts`` requests at once at the constants of `sim_constants_file`); the caps
    above vLLM's token budget are refused."""
    caps = np.asarray(request.candidate_caps, dtype=float)
    target = Target(arch.name, request.input_len, request.output_len, capacity_tokens)
    schedules, over_budget = None, ()
    configs = target.at_caps(caps).assign(**{col.NUM_PROMPTS: float(request.num_prompts),
                                             col.BENCHMARK_MODE: col.BenchmarkMode.ONLINE, col.TENSOR_PARALLEL: 1,
                                             col.MAX_CONCURRENCY: caps if throttled else np.nan})
    if entry.needs_schedules:
        constants = load_sim_constants(request.sim_constants_file)
        budget = constants.max_num_batched_tokens
        over_budget = tuple(float(cap) for cap in caps if cap > budget)
        workload = [ScheduleKey(arch.name, int(round(request.input_len)), int(round(request.output_len)), int(cap),
                                request.num_prompts) for cap in caps if cap <= budget]
        workers = min(4, os.cpu_count() or 1)
        schedules = simulate_schedules([*keys_of_frame(train), *workload], catalog, hw, constants, workers=workers)
        configs = configs[configs[col.MAX_NUM_SEQS] <= budget].reset_index(drop=True)
    # A band needs the training-equivalent fits (32 refinements) where the data leave directions open.
    training = TrainingRuns(train, catalog, hw, schedules, f"usable runs under {request.traces}",
                            sample_valley=request.confidence is not None and entry.bca == "curve")
    fitted = entry.predictor.fit(training)
    metrics = tuple(dict.fromkeys([*request.slos.metrics, SloMetric.parse(col.MEAN_TPOT_MS)]))   # the frontier's
    predicted = {THROUGHPUT: np.full(len(caps), np.nan)}
    predicted.update({metric.name: np.full(len(caps), np.nan) for metric in metrics})
    if request.slos.goodput is not None:
        predicted["goodput"] = np.full(len(caps), np.nan)
    at = np.searchsorted(caps, configs[col.MAX_NUM_SEQS].to_numpy(dtype=float))
    bound_ms, curve, refused = None, None, ()
    if entry.bca == "curve":
        curve = curve_of(fitted, target, request.confidence)
        values = curve(caps)
        predicted[THROUGHPUT] = np.asarray(values[0], dtype=float)
        if len(values) == 3:
            bound_ms = 1e3 * np.asarray(values[2], dtype=float)
    else:
        simulated = simulated_curve(fitted, configs)
        predicted[THROUGHPUT][at] = simulated.prediction.throughput_per_s
        refused = tuple(float(cap) for cap, no in zip(simulated.max_num_seqs, simulated.refused) if no)
    for name, values in predict_slo_metrics(fitted, configs, metrics, request.slos.goodput).items():
        predicted[name][at] = values
    if entry.bca == "curve" and IN_BATCH_E2E in predicted:
        predicted[IN_BATCH_E2E] = 1e3 * np.asarray(curve(caps)[1], dtype=float)
    return PredictorAdvice(fitted, predicted, over_budget + refused, curve, bound_ms)
