"""`slim tune` on a folder of benchmark results: the session a request builds from the usable runs
measured so far (`build_plan`), with every measured run as a fact and the prior's prediction of
every candidate.

Runs under the request's results folder are the session's own and count against the bound; the
other traces are given. A run of a workload's cap that the cleaning left out because the
configuration itself failed (it preempted, ran out of memory) marks that candidate failed, as the
loop does for a run it makes; its reason is kept for the report. A model slim cannot describe has no
prior (`slim.tune.models`): nothing predicts its candidates, no run floor or memory fit is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from slim import columns as col
from slim.decision.layouts import Layout
from slim.errors import AdvisorError, ConfigError, NoFeasibleCapError
from slim.gpu.kv_memory import static_batch_fit
from slim.predictors import tune_predictors
from slim.sim.run_cache import SimulationCache
from slim.specs.architecture import Architecture, ArchitectureCatalog
from slim.specs.hardware import Hardware, load_hardware_with_shipped, unknown_hardware_message
from slim.specs.transformer import block_split_refusal, tensor_parallel_refusal
from slim.traces.clean import CleaningPolicy, clean_runs
from slim.traces.ingest import ingest_traces
from slim.traces.usable import SkippedRun, trace_options
from slim.tune.belief import (
    CONFIG_COLUMNS,
    LayoutUncertainty,
    PriorPrediction,
    prior_prediction,
    roofline_gpu_seconds,
    tune_prior,
)
from slim.tune.kernel import load_kernels
from slim.tune.layouts import layout_order
from slim.tune.measurement import measurement_of_run
from slim.tune.models import request_models
from slim.tune.no_prior import unpredicted_quantities
from slim.tune.request import OFFLINE, ONLINE, MeasuredPrompts, TuneRequest, WorkloadSpec, most_common, prompts_at
from slim.tune.server_sizes import (
    data_parallel_sizes,
    layout_expert_parallel,
    layout_sizes,
    pipeline_parallel_sizes,
    tensor_parallel_sizes,
)
from slim.tune.session import TuneSession, TuneSettings
from slim.tune.workload import WORKLOAD, Workload, curve_label

NOMINAL_MATCH = 0.02
"""A measured run belongs to a workload whose IL and OL are within 2 % of its nominal lengths."""


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
    layout_exclusions: dict[str, dict[Layout, str]] = field(default_factory=dict)
    """Per curve (`Workload.curve`), the layouts asked for that take no run, with why (more GPUs than
    given, weights and one request's KV cache do not fit per rank)."""
    no_prior: dict[str, str] = field(default_factory=dict)
    """The models no prior describes (catalog name -> why, in one line): tuned by measurement alone."""

    def model_of(self, label: str) -> str:
        """The catalog name of a workload's model."""
        return next(w for w in self.workloads if w.label == label).model

    def architecture_of(self, label: str) -> Architecture | None:
        """The architecture of a workload's model, or None where no prior describes it (`no_prior`)."""
        return None if self.model_of(label) in self.no_prior else self.catalog[self.specs[label].model]

    def layout_of(self, label: str) -> Layout:
        """The layout a workload runs at (decided alone: one replica of the request's tensor-parallel size)."""
        workload = next(w for w in self.workloads if w.label == label)
        alone = Layout.of_sizes(self.request.tensor_parallel, 1, workload.expert_parallel)
        return workload.layout if workload.layout is not None else alone


def _benchmark_mode(mode: str) -> str:
    return col.BenchmarkMode.OFFLINE_STATIC_BATCH if mode == OFFLINE else col.BenchmarkMode.ONLINE


CONFIGURATION_FAILURES = ("preempted", "out_of_memory", "kv_cache_overflow")
"""Cleaning statuses that say the configuration itself failed (not the run's files): such a run of a
candidate counts as that candidate's failed run."""


def measured_so_far(request: TuneRequest, catalog: ArchitectureCatalog, hardware_catalog
                    ) -> tuple[pd.DataFrame, TraceReadout, pd.DataFrame, dict[WorkloadSpec, tuple[Layout, ...]]]:
    """The usable runs of the request's accelerator, mode and layouts under its trace sources (none
    where they are empty or missing), what was found (every run left out with its cleaning status,
    the cleaning report `slim check` prints, or the setting that differs), the cleaning report's rows
    of runs whose configuration failed (`CONFIGURATION_FAILURES`), and each workload's layouts
    (`request_layouts`)."""
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
        empty = pd.DataFrame(columns=list(col.RUN_COLUMNS))
        return empty, readout, empty, request_layouts(request, catalog, empty)
    usable, report = clean_runs(found, CleaningPolicy(rows={col.HARDWARE: (request.hardware,)}, keep_repeats=True))
    known = usable[col.MODEL].map(lambda name: name in catalog).astype(bool)
    skipped = [SkippedRun(str(run[col.RUN_ID]), str(run[col.STATUS]), str(run[col.REASON_DETAIL]))
               for _, run in report[~report["kept"]].iterrows()]
    skipped += [SkippedRun(str(run[col.RUN_ID]), "unknown_model", f"model '{run[col.MODEL]}' is not in the models "
                           "file (describe it with --model-config)") for _, run in usable[~known].iterrows()]
    usable = usable[known]
    in_mode = usable[usable[col.BENCHMARK_MODE] == _benchmark_mode(request.mode)] if len(usable) else usable
    layouts = request_layouts(request, catalog, in_mode)
    asked = {(layout.tensor_parallel, layout.ranks) for of_spec in layouts.values() for layout in of_spec}
    failed = report[report[col.STATUS].isin(CONFIGURATION_FAILURES)
                    & pd.Series([size in asked for size in layout_sizes(report)], index=report.index, dtype=bool)
                    & (report[col.BENCHMARK_MODE] == _benchmark_mode(request.mode))]
    failed = failed[failed[col.MODEL].map(lambda name: isinstance(name, str) and name in catalog).astype(bool)]
    if usable.empty:
        return (pd.DataFrame(columns=list(col.RUN_COLUMNS)),
                TraceReadout(readout.traces_exist, len(found), tuple(skipped)), failed, layouts)
    sizes = layout_sizes(usable)
    mode = usable[col.BENCHMARK_MODE]
    other = (~pd.Series([size in asked for size in sizes], index=usable.index, dtype=bool)
             | (mode != _benchmark_mode(request.mode)))
    names = " or ".join(sorted({Layout.of_sizes(t, d).label for t, d in asked}, key=lambda label: label))
    skipped += [SkippedRun(str(run[col.RUN_ID]), "other_settings",
                           f"{run[col.BENCHMARK_MODE]} at {Layout.of_sizes(*size).label}, not "
                           f"{_benchmark_mode(request.mode)} at {names}")
                for size, (index, run) in zip(sizes, usable.iterrows()) if other[index]]
    return (usable[~other].reset_index(drop=True), TraceReadout(readout.traces_exist, len(found), tuple(skipped)),
            failed, layouts)


def request_layouts(request: TuneRequest, catalog: ArchitectureCatalog,
                    runs: pd.DataFrame) -> dict[WorkloadSpec, tuple[Layout, ...]]:
    """Each workload's layouts, in `slim.tune.layouts.layout_order`: decided alone, the request's
    tensor-parallel size; across layouts, every tensor-parallel size at every data-parallel size of
    ``--data-parallel-sizes``, or where none is given at 1 and every data-parallel size the workload's
    online `runs` record at that tensor-parallel size. A layout whose runs spread the experts
    (``--enable-expert-parallel``) keeps doing so (`slim.tune.server_sizes.layout_expert_parallel`)."""
    out = {}
    for spec in request.workloads:
        of_spec = (runs[_matches(runs, model_name(catalog, spec.model), spec.input_len, spec.output_len)]
                   if len(runs) else runs)
        arch = _described(catalog, model_name(catalog, spec.model))
        if not request.across_layouts:
            out[spec] = (_with_recorded_experts(of_spec, request.tensor_parallel, 1, arch),)
            continue
        recorded = set()
        if len(of_spec) and not request.data_parallel_sizes and request.mode == ONLINE:     # offline: one engine
            recorded = set(layout_sizes(of_spec))
        layouts = set()
        for size in request.layout_sizes:
            ranks = request.data_parallel_sizes or (1, *(d for t, d in recorded if t == size))
            layouts |= {_with_recorded_experts(of_spec, size, d, arch) for d in ranks}
        out[spec] = tuple(sorted(layouts, key=layout_order))
    return out


def _described(catalog: ArchitectureCatalog, name: str) -> Architecture | None:
    """The architecture of `name`, or None where the catalog cannot describe it (tuned by measurement)."""
    try:
        return catalog[name]
    except ConfigError:
        return None


def _with_recorded_experts(runs: pd.DataFrame, tensor_parallel: int, data_parallel: int,
                           arch: Architecture | None = None) -> Layout:
    """The layout of `tensor_parallel` x `data_parallel`, with expert parallelism where its `runs` used it;
    at a layout no run measured, where vLLM cannot split `arch`'s block-quantised experts over its ranks
    but can keep each whole on one (`block_split_refusal`: ``--enable-expert-parallel`` is how it loads)."""
    layout = Layout.of_sizes(tensor_parallel, data_parallel)
    at_layout = runs[_at_layout(runs, layout)] if len(runs) else runs
    if not len(at_layout):
        needs_experts_whole = (arch is not None and block_split_refusal(arch, tensor_parallel) is not None
                               and block_split_refusal(arch, tensor_parallel, expert_parallel=True) is None)
        return Layout.of_sizes(tensor_parallel, data_parallel, needs_experts_whole)
    return Layout.of_sizes(tensor_parallel, data_parallel, layout_expert_parallel(at_layout, layout.label))


def _at_layout(runs: pd.DataFrame, layout: Layout) -> np.ndarray:
    """Runs at `layout`'s tensor- and data-parallel sizes (a pipeline-parallel run's server is no such layout)."""
    return ((tensor_parallel_sizes(runs) == layout.tensor_parallel) & (data_parallel_sizes(runs) == layout.ranks)
            & (pipeline_parallel_sizes(runs) == 1))


def _matches(runs: pd.DataFrame, model: str, il: float, ol: float, layout: Layout | None = None) -> np.ndarray:
    """Runs of `model` at lengths within `NOMINAL_MATCH` of `il` and `ol` (at `layout`'s tensor- and
    data-parallel sizes, where given; a pipeline-parallel run's server is no such layout)."""
    match = ((runs[col.MODEL] == model)
             & (np.abs(runs[col.INPUT_LEN_NOMINAL].astype(float) - il) <= NOMINAL_MATCH * il)
             & (np.abs(runs[col.OUTPUT_LEN_NOMINAL].astype(float) - ol) <= NOMINAL_MATCH * ol)).to_numpy()
    return match & _at_layout(runs, layout) if layout is not None else match


def layout_exclusion(arch: Architecture | None, hw: Hardware, spec: WorkloadSpec, layout: Layout,
                     gpus: int | None) -> str | None:
    """Why a layout takes no run, or None: its server needs more GPUs (``t x d``) than `gpus`, vLLM
    refuses its tensor-parallel size (`tensor_parallel_refusal`), or the weights and
    one request's KV cache do not fit on each rank (`slim.gpu.kv_memory.static_batch_fit`:
    the weights and the KV heads split over the tensor-parallel ranks, each data-parallel rank a copy;
    not checked without an architecture, `arch` None: its runs will tell)."""
    tensor_parallel = layout.tensor_parallel
    if gpus is not None and layout.gpus > gpus:
        return f"needs {layout.gpus} GPUs, {gpus} available (--gpus)"
    if arch is None:
        return None
    refused = tensor_parallel_refusal(arch, tensor_parallel, layout.expert_parallel)
    if refused is not None:
        return refused
    fit = static_batch_fit(arch, hw, 1, spec.input_len, spec.output_len, tensor_parallel=tensor_parallel)
    if not fit.weights_fit:
        return f"the weights split over {tensor_parallel} rank(s) leave no KV cache on each {hw.name}"
    if not fit.fits:
        return (f"one request needs {fit.kv_tokens_needed:,} KV tokens per rank, {fit.kv_capacity_tokens:,} fit on "
                f"a {hw.name} at tensor parallel {tensor_parallel}")
    return None


def build_plan(request: TuneRequest) -> TunePlan:
    """The session: one candidate per (workload, cap), every measured run as a fact (those of the
    workloads and, as context, every other measured curve; repeated runs of a cap combined, the
    first one kept as what a bisection would have seen), the prior of the request's predictor for
    throughput and every quantity the SLOs name. Runs under the results folder are the session's
    own and count against the bound; the other traces are given."""
    models = request_models(request)
    catalog = models.catalog
    if models.no_prior and request.mode == OFFLINE:
        model, why = next(iter(models.no_prior.items()))
        raise AdvisorError(f"no prior for {model}: {why}; without one slim tune measures online runs only (an "
                           "offline static batch is checked against the KV cache its architecture sizes)")
    hardware_catalog = load_hardware_with_shipped(request.hardware_file)
    if request.hardware not in hardware_catalog:
        raise AdvisorError(unknown_hardware_message(request.hardware, hardware_catalog))
    hw = hardware_catalog[request.hardware]
    runs, readout, failed_runs, layouts = measured_so_far(request, catalog, hardware_catalog)
    request = replace(request, measured_prompts=_measured_prompts(request, catalog, runs))
    mode = _benchmark_mode(request.mode)
    rows, workloads, specs = [], [], {}
    exclusions: dict[str, dict[Layout, str]] = {}
    claimed = np.zeros(len(runs), dtype=bool)
    measured: list[tuple[int, pd.Series]] = []
    for spec, layout in [(spec, layout) for spec in request.workloads for layout in layouts[spec]]:
        name = model_name(catalog, spec.model)
        arch = None if name in models.no_prior else catalog[name]
        workload = Workload(name, spec.input_len, spec.output_len, request.slos, request.epsilon,
                            tensor_parallel=layout.tensor_parallel if request.across_layouts else None,
                            data_parallel=layout.ranks, expert_parallel=layout.expert_parallel)
        if workload.label in specs:
            raise AdvisorError(f"workload {workload.label} is named twice")
        excluded = layout_exclusion(arch, hw, spec, layout, request.gpus if request.across_layouts else None)
        if excluded is not None and not request.across_layouts:
            refused = (arch is not None
                       and tensor_parallel_refusal(arch, layout.tensor_parallel, layout.expert_parallel) is not None)
            hint = ("give a size that divides them" if refused else "give a larger --tensor-parallel-size")
            # No cap can run at the one layout asked for: infeasible, as `slim advise` says it (exit 3).
            raise NoFeasibleCapError(f"{name} at tensor parallel {layout.tensor_parallel}: {excluded}; {hint} (or "
                                     "--gpus N to compare the layouts that fit)")
        if excluded is not None:
            exclusions.setdefault(workload.curve, {})[layout] = excluded
            continue
        workloads.append(workload)
        specs[workload.label] = spec
        of_workload = (_matches(runs, name, spec.input_len, spec.output_len, layout) if len(runs)
                       else np.zeros(0, bool))
        capacity = runs.loc[of_workload, col.KV_CAPACITY_TOKENS].max() if of_workload.any() else math.nan
        for cap in request.candidate_caps:
            at_cap = of_workload & (runs[col.MAX_NUM_SEQS].to_numpy(dtype=float) == cap) if len(runs) else of_workload
            rows.append({col.MODEL: name, col.INPUT_LEN_NOMINAL: float(spec.input_len),
                         col.OUTPUT_LEN_NOMINAL: float(spec.output_len), col.INPUT_LEN_MEAN: float(spec.input_len),
                         col.OUTPUT_LEN_MEAN: float(spec.output_len), col.MAX_NUM_SEQS: float(cap),
                         col.NUM_PROMPTS: float(prompts_at(request, spec, cap)),
                         col.BENCHMARK_MODE: mode, col.TENSOR_PARALLEL: layout.tensor_parallel,
                         col.DATA_PARALLEL: layout.ranks,
                         col.KV_CAPACITY_TOKENS: capacity,
                         col.MAX_CONCURRENCY: float(cap) if request.mode == ONLINE else math.nan,
                         WORKLOAD: workload.label})
            measured += [(len(rows) - 1, run) for _, run in runs[at_cap].sort_values(col.RUN_ID).iterrows()]
            claimed |= at_cap
    if not workloads:
        reasons = "; ".join(f"{curve} {layout.label}: {why}" for curve, of_curve in exclusions.items()
                            for layout, why in of_curve.items())
        raise NoFeasibleCapError(f"no layout asked for can run: {reasons}")   # infeasible: exit 3, as advise
    context = runs[~claimed]
    context = context.assign(**{col.TENSOR_PARALLEL: tensor_parallel_sizes(context),
                                col.DATA_PARALLEL: data_parallel_sizes(context)})
    for (_, group) in context.groupby(list(col.WORKLOAD_KEYS), sort=True):
        # A layout's runs are a curve of their own: context at one (cap, layout) is one row.
        for _, of_cap in group.groupby([col.MAX_NUM_SEQS, col.TENSOR_PARALLEL, col.DATA_PARALLEL], sort=True,
                                       dropna=False):
            row = {name: of_cap.iloc[0][name] for name in CONFIG_COLUMNS}
            row[col.DATA_PARALLEL] = int(data_parallel_sizes(of_cap.iloc[:1])[0])
            concurrency = of_cap.iloc[0].get(col.MAX_CONCURRENCY, math.nan)
            row[col.MAX_CONCURRENCY] = concurrency if pd.notna(concurrency) else math.nan
            # Context, never a candidate: a run of another curve, or of a workload at a cap not asked for.
            row[WORKLOAD] = f"{curve_label(of_cap.iloc[:1]).iloc[0]} (context)"
            rows.append(row)
            measured += [(len(rows) - 1, run) for _, run in of_cap.sort_values(col.RUN_ID).iterrows()]
    candidates = pd.DataFrame(rows)
    no_prior = candidates[col.MODEL].isin(list(models.no_prior)).to_numpy()
    settings = load_kernels().settings(request.predictor, TuneSettings(
        confidence=request.confidence, tolerance=request.tolerance, max_runs_per_cap=request.max_runs_per_cap,
        margin=request.margin, layouts=LayoutUncertainty() if request.across_layouts else None))
    run_floor = np.zeros(len(candidates))
    if (~no_prior).any():
        run_floor[~no_prior] = roofline_gpu_seconds(candidates[~no_prior].reset_index(drop=True), catalog, hw)
    session = TuneSession(workloads, candidates, _prior_of_candidates(request, catalog, hw, candidates, no_prior),
                          settings, run_floor_gpu_seconds=run_floor)
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
    plan = TunePlan(request, catalog, hw, workloads, specs, session, runs, readout, layout_exclusions=exclusions,
                    no_prior=models.no_prior)
    if not request.retry_failed:
        _record_failed_runs(plan, failed_runs)
    return plan


def model_name(catalog: ArchitectureCatalog, model: str) -> str:
    """The catalog's name of a model (described or known by name only); the catalog's error naming the
    nearest for an unknown one."""
    name = catalog.resolve_name(model)
    return name if name is not None else catalog[model].name


def _prior_of_candidates(request: TuneRequest, catalog: ArchitectureCatalog, hw: Hardware, candidates: pd.DataFrame,
                         no_prior: np.ndarray) -> PriorPrediction:
    """The request's prior of every candidate: throughput and every quantity the SLOs name; NaN where
    no prior describes the candidate's model (`no_prior`), the prior built only where one does."""
    slos = request.slos
    values = {name: np.full(len(candidates), np.nan) for name in unpredicted_quantities(
        [metric.name for metric in slos.metrics], slos.goodput is not None)}
    if (~no_prior).any():
        entry = tune_predictors()[request.predictor]
        # One simulation of each candidate gives the prior's schedule and its SLO metrics alike.
        prior = tune_prior(entry, catalog, hw, _empty_schedules(request.sim_constants_file) if entry.needs_schedules
                           else None, request.simulations if request.simulations is not None else SimulationCache())
        predicted = prior_prediction(prior, candidates[~no_prior].reset_index(drop=True), slos.metrics, slos.goodput)
        for name, of_described in predicted.values.items():
            values.setdefault(name, np.full(len(candidates), np.nan))[~no_prior] = of_described
    return PriorPrediction(values, no_prior if no_prior.any() else None)


def _measured_prompts(request: TuneRequest, catalog: ArchitectureCatalog, runs: pd.DataFrame) -> MeasuredPrompts:
    """What the measured runs of each workload sent, at each cap and over the workload."""
    by_cap, by_workload = {}, {}
    for spec in request.workloads:
        of_workload = (runs[_matches(runs, model_name(catalog, spec.model), spec.input_len, spec.output_len)]
                       if len(runs) else runs)
        if not len(of_workload) or col.NUM_PROMPTS not in of_workload:
            continue
        workload = most_common(of_workload[col.NUM_PROMPTS])
        if workload is not None:
            by_workload[spec] = workload
        for cap, at_cap in of_workload.groupby(col.MAX_NUM_SEQS):
            sent = most_common(at_cap[col.NUM_PROMPTS])
            if sent is not None:
                by_cap[(spec, int(cap))] = sent
    return MeasuredPrompts(by_cap, by_workload)


def _record_failed_runs(plan: TunePlan, failed_runs: pd.DataFrame) -> None:
    """A candidate with no usable run but a run whose configuration failed (it preempted, ran out of
    memory) is failed, as the loop records a run it makes, with the run's reason."""
    candidates = plan.session.candidates
    for _, run in failed_runs.sort_values(col.RUN_ID).iterrows():
        model = model_name(plan.catalog, str(run[col.MODEL]))
        [(size, ranks)] = layout_sizes(run.to_frame().T)
        rows = candidates.index[(candidates[col.MODEL] == model) & candidates[WORKLOAD].isin(list(plan.specs))
                                & (candidates[col.TENSOR_PARALLEL] == size) & (candidates[col.DATA_PARALLEL] == ranks)
                                & (candidates[col.MAX_NUM_SEQS] == float(run[col.MAX_NUM_SEQS]))
                                & _near(candidates[col.INPUT_LEN_NOMINAL], float(run[col.INPUT_LEN_NOMINAL]))
                                & _near(candidates[col.OUTPUT_LEN_NOMINAL], float(run[col.OUTPUT_LEN_NOMINAL]))]
        for index in rows:
            if int(index) not in plan.session.measurements and int(index) not in plan.session.failed:
                plan.session.record(int(index), None)
                plan.failure_reasons[int(index)] = f"{run[col.STATUS]}: {run[col.REASON_DETAIL]}"


def _near(nominal: pd.Series, value: float) -> pd.Series:
    return (nominal.astype(float) - value).abs() <= NOMINAL_MATCH * nominal.astype(float)


def _empty_schedules(constants_file: Path):
    from slim.sim.constants import load_sim_constants
    from slim.sim.schedules import ScheduleTable

    return ScheduleTable([], load_sim_constants(constants_file))


