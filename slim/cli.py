"""The `slim` command: fit SLIM (or calibrate the simulator, SIM) on a folder of vLLM traces and
advise a batch cap, or check the folder.

    slim advise --traces DIR --model opt-1.3b --input-len 242 --output-len 520 --slo-ms 8000 \
        [--predictor sim] [--json]
    slim check DIR

The command is built in four steps, one function each: `build_parser` (the arguments),
`advise` (the library call: fit, decide, plan memory, warn), `render_text` / `advice_json`
(the output) and `main` (errors to exit codes). Exit codes (`EXIT_CODES`): 0 a recommendation;
2 bad input (arguments, trace folder, model, hardware, catalog or config.json); 3 no candidate cap
meets the SLO and the efficiency floor; 1 only for an unexpected failure (a bug). Every failure
prints one line on stderr naming the problem (``--json`` also prints a JSON object on stdout);
when a folder holds runs but none is usable, that line is followed by `slim check`'s line per run.

``advise --predictor slim`` (the default) evaluates SLIM at the running batch a cap allows;
``--predictor sim`` simulates every candidate cap with the simulator calibrated on the
training runs (slower: each usable run and each candidate is simulated once) and refuses caps
whose simulated run preempts. On the public traces' leave-one-curve-out study SIM-BCA picked the
full-profile cap on 11 of 12 curves and SLIM-BCA on 10 (README), too close to change the
default, which needs no simulation.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from slim import __version__
from slim import columns as col
from slim.advisor.bca import DEFAULT_CANDIDATE_BATCH_SIZES, DEFAULT_EPSILON, BcaResult, bca_from_predictor
from slim.advisor.sim_bca import SimCurve, sim_bca
from slim.advisor.slim_bca import (
    kv_capacity_sequences,
    kv_capacity_tokens_or_default,
    slim_bounded_curve_predictor,
    slim_curve_predictor,
)
from slim.errors import AdvisorError, NoFeasibleCapError, NoUsableRunsError, SlimError, TraceFormatError
from slim.gpu.kv_memory import KvMemoryPlan, plan_kv_memory
from slim.gpu.roofline import KneeRecommendation, recommend_knee
from slim.model.equations import predict_frame
from slim.model.fit import SlimFit, fit_slim
from slim.model.metrics import mape_pct
from slim.sim.constants import SIM_CONSTANTS_FILE, load_sim_constants
from slim.sim.schedule_fit import SimCalibration, calibrate_on_rows
from slim.sim.schedules import DEFAULT_NUM_PROMPTS, ScheduleKey, keys_of_frame, simulate_schedules
from slim.specs.architecture import MODELS_FILE, Architecture, ArchitectureCatalog, load_architectures
from slim.specs.hardware import GIB, HARDWARE_FILE, Hardware, load_hardware
from slim.specs.hf_config import architecture_from_hf_config
from slim.traces.clean import check_lines, clean_runs
from slim.traces.ingest import ingest_traces

DEFAULT_HARDWARE = "h100-64gb"
PREDICTORS = ("slim", "sim")

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_NO_FEASIBLE_CAP = 3
EXIT_CODES = {
    EXIT_OK: "a recommendation was printed",
    1: "unexpected failure (a bug: please report it with the traceback)",
    EXIT_BAD_INPUT: "bad input: arguments, trace folder, model, hardware, catalog or config.json",
    EXIT_NO_FEASIBLE_CAP: "no candidate --max-num-seqs meets the SLO and the efficiency floor",
}


@dataclass(frozen=True)
class AdviceWarning:
    """Something the user should know about a recommendation; `code` is stable for scripts."""

    code: str
    message: str


@dataclass(frozen=True)
class HeldOutCheck:
    """SLIM's error on the target model's usable runs that were left out of training."""

    model: str
    n_runs: int
    throughput_mape_pct: float
    e2e_mape_pct: float


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
    hardware: str = DEFAULT_HARDWARE
    train_models: tuple[str, ...] = ()
    n_left_out: int = 0
    held_out: HeldOutCheck | None = None
    warnings: tuple[AdviceWarning, ...] = ()
    predictor: str = "slim"
    refused_caps: tuple[float, ...] = ()
    confidence: float | None = None


# --- the advice ------------------------------------------------------------------------

def check_traces(traces: Path, catalog) -> pd.DataFrame:
    """Every run under `traces`, ingested (one row and a status per run directory)."""
    if not traces.exists():   # a folder of runs, or one trace file (a summary table, an offline result)
        raise TraceFormatError(f"trace directory '{traces}' does not exist")
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


def select_training_runs(usable: pd.DataFrame, catalog: ArchitectureCatalog, train_models: Sequence[str] | None,
                         exclude_runs: Sequence[str] = ()) -> pd.DataFrame:
    """The usable runs SLIM is fitted on: those of `train_models` (names or aliases; None: every
    model), less the runs whose directory (`columns.RUN_ID`) matches a glob of `exclude_runs`.

    Raises `TraceFormatError` naming a model without usable runs, a pattern that matches no run,
    or a selection that leaves nothing to fit.
    """
    keep = pd.Series(True, index=usable.index)
    if train_models:
        wanted = [catalog[name].name for name in train_models]
        for name, canonical in zip(train_models, wanted):
            if not (usable[col.MODEL] == canonical).any():
                raise TraceFormatError(f"--train-models: '{name}' has no usable run under the traces "
                                       f"(models with usable runs: {', '.join(sorted(usable[col.MODEL].unique()))})")
        keep &= usable[col.MODEL].isin(wanted)
    for pattern in exclude_runs:
        matches = usable[col.RUN_ID].map(lambda run, pattern=pattern: fnmatch.fnmatchcase(str(run), pattern))
        if not matches.any():
            raise TraceFormatError(f"--exclude-runs '{pattern}' matches no usable run (runs are named by their "
                                   f"directory under the traces, e.g. '{usable[col.RUN_ID].iloc[0]}')")
        keep &= ~matches
    if not keep.any():
        raise TraceFormatError("--train-models and --exclude-runs leave no run to fit SLIM on")
    return usable[keep]


def _held_out_check(runs: pd.DataFrame, train: pd.DataFrame, arch: Architecture, catalog, hw, fit: SlimFit
                    ) -> HeldOutCheck | None:
    """SLIM's MAPE on the target's usable runs left out of training (None if there are none)."""
    left_out = runs[(runs[col.MODEL] == arch.name) & ~runs.index.isin(train.index)]
    if left_out.empty:
        return None
    e2e_s, throughput = predict_frame(catalog, hw, fit.params, left_out)
    return HeldOutCheck(arch.name, len(left_out),
                        mape_pct(throughput, left_out[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float)),
                        mape_pct(e2e_s, left_out[col.E2E_LATENCY_S].to_numpy(dtype=float)))


def _warnings(arch: Architecture, runs: pd.DataFrame, train: pd.DataFrame, decision: BcaResult,
              capacity: float, capacity_source: str, predict: Callable | None, memory: KvMemoryPlan,
              sequence_tokens: float
              ) -> tuple[AdviceWarning, ...]:
    """What the user should know: a target never profiled or left out of training, a cap above the
    KV capacity (vLLM then runs fewer sequences than the cap), a cap above the reservation."""
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
    if decision.batch_cap > capacity and predict is None:   # SIM: the simulated run queued the rest
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


def advise(traces: str | Path, model: str | None, input_len: float, output_len: float, slo_s: float,
           epsilon: float = DEFAULT_EPSILON, hardware: str = DEFAULT_HARDWARE,
           models_file: str | Path = MODELS_FILE, hardware_file: str | Path = HARDWARE_FILE,
           candidates: Sequence[float] = DEFAULT_CANDIDATE_BATCH_SIZES,
           max_model_len: int | None = None, model_config: str | Path | None = None,
           train_models: Sequence[str] | None = None, exclude_runs: Sequence[str] = (),
           predictor: str = "slim", sim_constants_file: str | Path = SIM_CONSTANTS_FILE,
           num_prompts: int = DEFAULT_NUM_PROMPTS, confidence: float | None = None) -> Advice:
    """Fit SLIM on the usable runs under `traces` and run SLIM-BCA (Eq. 13) for one workload,
    or with ``predictor="sim"`` calibrate the simulator on them and run SIM-BCA.

    The target is `model` (a name or alias of the models file), or the model a Hugging Face
    `model_config` (``config.json``) describes, named `model` if given; that architecture joins the
    catalog, so runs of it become usable too. SLIM (or SIM) is fitted on the runs
    `select_training_runs` keeps. SLIM is evaluated at the running batch
    ``min(cap, KV capacity in sequences)`` (see `slim.paper.advisor_study`). SIM simulates each
    candidate cap (``num_prompts`` requests at once, the fixed constants of `sim_constants_file`)
    and refuses those that preempt or exceed vLLM's token budget. With `confidence` (SLIM only), the
    SLO is held on the one-sided upper bound of E2E at that confidence
    (`slim.advisor.slim_bca.slim_bounded_curve_predictor`). Raises a `SlimError` subclass on
    unusable input and `NoFeasibleCapError` when no candidate cap meets the SLO and the efficiency
    floor.
    """
    if predictor not in PREDICTORS:
        raise AdvisorError(f"unknown predictor '{predictor}'; choose one of {', '.join(PREDICTORS)}")
    if confidence is not None:
        if not (np.isfinite(confidence) and 0 < confidence < 1):
            raise AdvisorError(f"confidence must lie in (0, 1), got {confidence}")
        if predictor != "slim":
            raise AdvisorError("--confidence bounds SLIM's prediction; --predictor sim has no prediction band")
    catalog = load_architectures(models_file)
    if model_config is not None:
        described = architecture_from_hf_config(model_config, model)
        catalog, model = catalog.with_architecture(described), described.name
    if model is None:
        raise AdvisorError("name the target model (--model) or describe it (--model-config)")
    hardware_catalog = load_hardware(hardware_file)
    if hardware not in hardware_catalog:
        raise AdvisorError(f"unknown hardware '{hardware}' in {hardware_file}; known: {', '.join(hardware_catalog)}")
    hw = hardware_catalog[hardware]
    arch = catalog[model]
    runs = _usable_runs(Path(traces), catalog)
    train = select_training_runs(runs, catalog, train_models, exclude_runs)
    of_model = runs[runs[col.MODEL] == arch.name]
    capacity_tokens, capacity_source = kv_capacity_tokens_or_default(
        float(of_model[col.KV_CAPACITY_TOKENS].max()) if not of_model.empty else float("nan"), arch, hw)
    capacity = kv_capacity_sequences(capacity_tokens, input_len, output_len)
    if capacity < 1:
        raise NoFeasibleCapError(f"one sequence of {input_len:g} + {output_len:g} tokens does not fit the KV cache "
                                 f"({capacity_tokens:.0f} tokens) of {arch.name} on {hw.name}")
    refused: tuple[float, ...] = ()
    predict = None
    if predictor == "sim":
        fit, decision, refused = _sim_advice(train, catalog, hw, arch.name, input_len, output_len, slo_s, epsilon,
                                             candidates, sim_constants_file, num_prompts, str(traces))
    else:
        # A band needs the training-equivalent fits (32 refinements) where the data leave directions open.
        fit = fit_slim(train, catalog, hw, split_name=f"usable runs under {traces}",
                       sample_valley=confidence is not None)
        predict = (slim_curve_predictor(arch, hw, fit.params, input_len, output_len, capacity) if confidence is None
                   else slim_bounded_curve_predictor(fit, arch, hw, input_len, output_len, capacity, confidence))
        decision = bca_from_predictor(predict, candidate_batch_sizes=candidates, epsilon=epsilon, slo_s=slo_s)
    if not decision.feasible:
        raise NoFeasibleCapError(f"no batch cap meets the constraints: {decision.reason}", decision)
    blocks = of_model[col.NUM_GPU_BLOCKS].dropna()
    max_model_len = int(np.ceil(input_len + output_len)) if max_model_len is None else int(max_model_len)
    memory = plan_kv_memory(arch, hw, decision.batch_cap, input_len, output_len,
                            num_gpu_blocks=int(blocks.max()) if not blocks.empty else None,
                            max_model_len=max_model_len)
    return Advice(model=arch.name, input_len=float(input_len), output_len=float(output_len), n_runs=len(runs),
                  fit=fit, decision=decision, kv_capacity_sequences=capacity,
                  kv_capacity_source=capacity_source, memory=memory, max_model_len=max_model_len,
                  knee=recommend_knee(arch, hw, input_len + output_len), hardware=hw.name,
                  train_models=tuple(sorted(train[col.MODEL].unique())), n_left_out=len(runs) - len(train),
                  held_out=None if predict is None else _held_out_check(runs, train, arch, catalog, hw, fit),
                  warnings=_warnings(arch, runs, train, decision, capacity, capacity_source, predict, memory,
                                     input_len + output_len),
                  predictor=predictor, refused_caps=refused, confidence=confidence)


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
    calibration = calibrate_on_rows(runs, schedules, catalog, hw, split_name=f"usable runs under {traces}",
                                    sample_valley=False)
    curve = SimCurve.from_schedules([schedules.get(key) for key in workload], catalog, hw, constants,
                                    calibration.constants)
    refused = tuple(float(cap) for cap in candidates if cap > budget) + tuple(
        float(cap) for cap, no in zip(curve.max_num_seqs, curve.refused) if no and cap in candidates)
    return calibration, sim_bca(curve, slo_s, epsilon, np.asarray(candidates, dtype=float)), refused


# --- output ----------------------------------------------------------------------------

def render_text(advice: Advice) -> str:
    """The human-readable report `slim advise` prints."""
    d, m, k = advice.decision, advice.memory, advice.knee
    constraint = ("the throughput peak is admissible" if not d.binding
                  else "limited by " + " and ".join({"slo": "the SLO", "efficiency": "the efficiency floor"}[b]
                                                    for b in d.binding))
    left_out = (f"; {advice.n_left_out} left out, trained on {', '.join(advice.train_models)}"
                if advice.n_left_out else "")
    fitted = ("SLIM fitted" if advice.predictor == "slim"
              else "SIM (the simulator) calibrated, every candidate cap simulated,")
    lines = [
        f"{fitted} on {advice.fit.n_train_points} runs ({advice.n_runs} usable{left_out}): "
        f"train MAPE {advice.fit.train_mape_throughput_pct:.1f}% (throughput)",
        f"Workload: {advice.model}, IL {advice.input_len:g}, OL {advice.output_len:g}; "
        f"SLO {d.slo_s * 1e3:.0f} ms E2E, epsilon {d.epsilon:g}"
        + ("" if advice.confidence is None else
           f"; SLO held on E2E's upper bound at confidence {advice.confidence:g}"),
        "",
        f"Recommended --max-num-seqs {int(d.batch_cap)} ({constraint})",
        f"  predicted throughput   {d.throughput_per_s:,.0f} tokens/s",
        f"  predicted E2E latency  {d.e2e_latency_s * 1e3:,.0f} ms",
        *([] if d.e2e_bound_s is None else
          [f"  E2E upper bound        {d.e2e_bound_s * 1e3:,.0f} ms (one-sided {advice.confidence:g}: parameter "
           "uncertainty, training-equivalent fits and run-to-run scatter)"]),
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
    if advice.held_out is not None:
        h = advice.held_out
        lines.append(f"Held-out check: SLIM, not trained on them, predicts the {h.n_runs} usable runs of {h.model} "
                     f"to {h.throughput_mape_pct:.1f}% throughput MAPE ({h.e2e_mape_pct:.1f}% E2E)")
    lines += [f"Warning: {warning.message}" for warning in advice.warnings]
    return "\n".join(lines)


format_advice = render_text
"""The earlier name of `render_text`."""


def _number(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _candidates_json(decision: BcaResult) -> list[dict[str, Any]]:
    """Per candidate: the prediction, and with a confidence the E2E upper bound the SLO is held on."""
    bounds = decision.candidate_e2e_bound_s or decision.candidate_e2e_latency_s
    rows = zip(decision.candidate_batch_sizes, decision.candidate_throughput_per_s, decision.candidate_e2e_latency_s,
               bounds, decision.candidate_efficiency)
    candidates = []
    for cap, throughput, e2e_s, bound_s, efficiency in rows:
        candidate = {"max_num_seqs": int(cap), "predicted_throughput_tokens_per_s": _number(throughput),
                     "predicted_e2e_latency_ms": _number(1e3 * e2e_s)}
        if decision.candidate_e2e_bound_s:
            candidate["e2e_upper_bound_ms"] = _number(1e3 * bound_s)
        candidates.append({**candidate, "batching_efficiency": _number(efficiency),
                           "meets_slo": bool(bound_s <= decision.slo_s),
                           "meets_efficiency_floor": bool(efficiency > decision.epsilon)})
    return candidates


def advice_json(advice: Advice) -> dict[str, Any]:
    """`slim advise --json`'s document (units in the key names; null where a number is undefined)."""
    d, m, k = advice.decision, advice.memory, advice.knee
    return {
        "slim_version": __version__, "status": "ok", "exit_code": EXIT_OK,
        "workload": {"model": advice.model, "hardware": advice.hardware, "input_len": advice.input_len,
                     "output_len": advice.output_len, "slo_ms": 1e3 * d.slo_s, "epsilon": d.epsilon,
                     "confidence": advice.confidence},
        "fit": {"n_usable_runs": advice.n_runs, "n_train_runs": advice.fit.n_train_points,
                "n_left_out_runs": advice.n_left_out, "train_models": list(advice.train_models),
                "train_mape_throughput_pct": advice.fit.train_mape_throughput_pct,
                "train_mape_e2e_pct": advice.fit.train_mape_e2e_pct, "params": advice.fit.params.to_dict()},
        "recommendation": {"max_num_seqs": int(d.batch_cap), "predicted_throughput_tokens_per_s": d.throughput_per_s,
                           "predicted_e2e_latency_ms": 1e3 * d.e2e_latency_s,
                           "e2e_upper_bound_ms": None if d.e2e_bound_s is None else 1e3 * d.e2e_bound_s,
                           "batching_efficiency": d.batching_efficiency, "limited_by": list(d.binding)},
        "kv_capacity": {"sequences": advice.kv_capacity_sequences, "source": advice.kv_capacity_source},
        "memory": {"kv_bytes_needed": m.kv_bytes_needed, "kv_reservation_bytes": m.kv_reservation_bytes,
                   "memory_saved_bytes": m.memory_saved_bytes, "weight_bytes": m.weight_bytes,
                   "activation_overhead_bytes": m.activation_overhead_bytes,
                   "gpu_memory_utilization": m.gpu_memory_utilization_needed,
                   "num_gpu_blocks_override": m.num_gpu_blocks_override, "max_model_len": advice.max_model_len},
        "knee": {"ctx_len": k.ctx_len, "b_knee": k.b_knee, "low": k.low, "high": k.high,
                 "suggested_max_num_seqs": k.suggested_max_num_seqs},
        "held_out_check": None if advice.held_out is None else {
            "model": advice.held_out.model, "n_runs": advice.held_out.n_runs,
            "throughput_mape_pct": advice.held_out.throughput_mape_pct,
            "e2e_mape_pct": advice.held_out.e2e_mape_pct},
        "candidates": _candidates_json(d),
        "warnings": [{"code": warning.code, "message": warning.message} for warning in advice.warnings],
    }


def error_json(error: SlimError, exit_code: int) -> dict[str, Any]:
    """`slim advise --json`'s document for a failure: the message, and per run why it is unusable
    (``runs``) or per candidate what SLIM predicts (``candidates``) where the error has them."""
    document: dict[str, Any] = {
        "slim_version": __version__, "status": "no_feasible_cap" if exit_code == EXIT_NO_FEASIBLE_CAP else "error",
        "exit_code": exit_code, "message": " ".join(str(error).split())}
    lines = getattr(error, "lines", ())
    if lines:
        document["runs"] = [dict(zip(("status", "run", "fault_file", "reason"), line.split("\t", 3)))
                            for line in lines]
    decision = getattr(error, "decision", None)
    if isinstance(decision, BcaResult):
        document["candidates"] = _candidates_json(decision)
    return document


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
      --input-len 242 --output-len 520 --slo-ms 8000 --epsilon 0.1 --json

{_EXIT_CODES_HELP}"""


def _catalog_names(load, path: Path) -> str:
    try:
        return ", ".join(load(path))
    except SlimError:  # a broken catalog is reported when it is used, not by --help
        return "?"


def build_parser() -> argparse.ArgumentParser:
    """The `slim` command line: ``advise`` and ``check``."""
    parser = _OneLineErrorParser(prog="slim", description="SLIM: performance model and batching advisor for vLLM.",
                                 epilog=_EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"slim {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    advise_parser = commands.add_parser(
        "advise", help="fit SLIM on traces and recommend --max-num-seqs for a workload",
        description="Fit SLIM on every usable run of a trace folder, then choose the batch cap with the "
                    "highest predicted throughput that meets the E2E SLO and the batching-efficiency floor "
                    "(BCA, Eq. 13), and the vLLM memory flags that reserve only the KV cache it needs.",
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
    advise_parser.add_argument("--slo-ms", required=True, type=_positive_float, help="E2E latency SLO in milliseconds")
    advise_parser.add_argument("--epsilon", type=_fraction, default=DEFAULT_EPSILON,
                               help=f"batching-efficiency floor, in (0, 1) (default {DEFAULT_EPSILON})")
    advise_parser.add_argument("--confidence", type=_fraction, default=None, metavar="C",
                               help="hold the SLO on the one-sided upper bound of SLIM's E2E at confidence C in "
                                    "(0, 1), e.g. 0.9: parameter uncertainty, what the runs leave undetermined and "
                                    "run-to-run scatter (default: on the prediction itself)")
    advise_parser.add_argument("--hardware", default=DEFAULT_HARDWARE,
                               help=f"GPU key of the hardware file (default {DEFAULT_HARDWARE}; shipped: "
                                    f"{_catalog_names(load_hardware, HARDWARE_FILE)})")
    advise_parser.add_argument("--models-file", type=Path, default=MODELS_FILE, metavar="YAML",
                               help="catalog of model architectures (default: the one shipped with slim, "
                                    "slim/specs/models.yaml; its format is in config/README.md)")
    advise_parser.add_argument("--hardware-file", type=Path, default=HARDWARE_FILE, metavar="YAML",
                               help="catalog of GPUs: dense BF16 FLOP/s, HBM bandwidth, memory (default: the one "
                                    "shipped with slim, slim/specs/hardware.yaml)")
    advise_parser.add_argument("--candidates", type=_candidates, default=DEFAULT_CANDIDATE_BATCH_SIZES,
                               help="comma-separated candidate --max-num-seqs values (default 1,2,4,...,512)")
    advise_parser.add_argument("--max-model-len", type=_positive_int, default=None,
                               help="vLLM --max-model-len the server will use (default IL + OL)")
    advise_parser.add_argument("--train-models", type=_names, default=None, metavar="M1,M2",
                               help="fit SLIM only on the runs of these models (default: every usable run); "
                                    "leave the target out to see how well SLIM predicts a model it never saw")
    advise_parser.add_argument("--exclude-runs", action="append", default=[], metavar="GLOB",
                               help="leave the runs whose directory under --traces matches GLOB out of the fit "
                                    "(repeatable)")
    advise_parser.add_argument("--json", action="store_true",
                               help="print one JSON object (recommendation, memory flags, candidates, warnings) "
                                    "instead of the report; on failure, one with status, exit_code and message")
    advise_parser.add_argument("--predictor", choices=PREDICTORS, default="slim",
                               help="slim: SLIM at the running batch a cap allows (default); sim: the calibrated "
                                    "simulator, which simulates each cap and refuses those that preempt (slower)")
    advise_parser.add_argument("--num-prompts", type=_positive_int, default=DEFAULT_NUM_PROMPTS,
                               help=f"requests sent at once per simulated cap, --predictor sim only "
                                    f"(default {DEFAULT_NUM_PROMPTS}, as the public traces)")
    advise_parser.add_argument("--sim-constants", type=Path, default=SIM_CONSTANTS_FILE, metavar="YAML",
                               help="the simulator's constants file, --predictor sim only (its fixed scheduler and "
                                    "memory fields are used; default: the H100 constants shipped with slim, "
                                    f"slim/sim/{SIM_CONSTANTS_FILE.name})")
    check_parser = commands.add_parser(
        "check", help="say, for every run of a trace folder, whether it is usable and why not",
        description="Ingest and clean a folder of vLLM or GuideLLM benchmark results and print one "
                    "tab-separated line per run: status, run, file at fault (- if none), reason. "
                    f"Exit status 0 when at least one run is usable, 1 when none is, {EXIT_BAD_INPUT} for bad input.")
    check_parser.add_argument("traces", type=Path, help="folder of vLLM benchmark runs")
    check_parser.add_argument("--models-file", type=Path, default=MODELS_FILE, metavar="YAML",
                              help="catalog of model architectures (default: the one shipped with slim)")
    return parser


# --- running a command -----------------------------------------------------------------

def run_advice(args: argparse.Namespace) -> Advice:
    """``slim advise``: the parsed arguments to one `advise` call (which names a missing target)."""
    return advise(args.traces, args.model, args.input_len, args.output_len, args.slo_ms / 1e3,
                  epsilon=args.epsilon, hardware=args.hardware, models_file=args.models_file,
                  hardware_file=args.hardware_file, candidates=args.candidates,
                  max_model_len=args.max_model_len, model_config=args.model_config,
                  train_models=args.train_models, exclude_runs=args.exclude_runs, predictor=args.predictor,
                  sim_constants_file=args.sim_constants, num_prompts=args.num_prompts,
                  confidence=args.confidence)


def _check(args: argparse.Namespace) -> int:
    """``slim check DIR``: the cleaning report, a line per run; a summary line on stderr."""
    _, report = clean_runs(check_traces(args.traces, load_architectures(args.models_file)))
    for line in check_lines(report):
        print(line)
    counts = ", ".join(f"{status}: {count}" for status, count in report[col.STATUS].value_counts().items())
    print(f"{len(report)} runs, {int(report['kept'].sum())} usable ({counts})", file=sys.stderr)
    return 0 if report["kept"].any() else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m slim`` and the ``slim`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    as_json = getattr(args, "json", False)
    try:
        if args.command == "check":
            return _check(args)
        advice = run_advice(args)
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
