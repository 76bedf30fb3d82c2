"""What a user should know about an advice beyond the recommendation: the target was never profiled
or left out of training, the cap exceeds the KV capacity or vLLM's reservation, runs at another
tensor-parallel degree (or the workload's at another data-parallel size) were left out, the runs'
latencies are central values of unstated statistic, the workload's runs come from several vLLM
releases (`AdviceWarning`, each with a stable code)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.bca import CurvePredictor
from slim.decision.rule import Recommendation
from slim.gpu.kv_memory import KvMemoryPlan
from slim.specs.architecture import Architecture
from slim.specs.hardware import GIB
from slim.specs.hf_config import folder_without_weights
from slim.specs.slo import Slos, judging_runs
from slim.traces.silicon_sweep import LATENCY_SOURCE_UNSTATED
from slim.traces.verdict import recorded_vllm_version


@dataclass(frozen=True)
class AdviceWarning:
    """Something the user should know about a recommendation; `code` is stable for scripts."""

    code: str
    message: str



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
        "that degree (one fit and memory plan per degree); --tensor-parallel-size T advises another, "
        "--tensor-parallel-sizes compares them per GPU"),)


def data_parallel_warnings(data_parallel: int, measured: int, every_size: int,
                           other_sizes: tuple[int, ...]) -> tuple[AdviceWarning, ...]:
    """A warning where `single_data_parallel_size` left the workload's runs at other data-parallel
    sizes out of its `measured` runs at `data_parallel` (of `every_size` runs)."""
    if not other_sizes:
        return ()
    return (AdviceWarning(
        "other_data_parallel_left_out",
        f"{every_size - measured} run(s) of the workload at data_parallel {', '.join(map(str, other_sizes))} are "
        f"left out of its measurements: they measure a server of other GPUs than data_parallel {data_parallel}; "
        "compare the layouts with --tensor-parallel-sizes"),)


def unstated_statistic_warnings(slos: Slos, runs: pd.DataFrame) -> tuple[AdviceWarning, ...]:
    """A warning where an SLO is judged on runs that record one central TTFT and TPOT of unstated
    statistic (AIConfigurator's silicon sweeps: `slim.traces.silicon_sweep`), filed as means."""
    if col.LATENCY_SOURCE not in runs or not len(runs):
        return ()
    unstated = (runs[col.LATENCY_SOURCE] == LATENCY_SOURCE_UNSTATED).to_numpy()
    judged = [metric.name for metric in slos.metrics if (judging_runs(metric, runs) & unstated).any()]
    if not judged:
        return ()
    return (AdviceWarning(
        "latency_statistic_unstated",
        f"{int(unstated.sum())} run(s) record one central TTFT and TPOT each whose statistic (mean or median) "
        f"their source does not state: {', '.join(judged)} are judged on them, and on the E2E derived from them, "
        "as if they were means"),)


def engine_warnings(measured_runs: pd.DataFrame) -> tuple[AdviceWarning, ...]:
    """A warning where the workload's runs record more than one vLLM release, or some a release and
    others none (`slim.traces.verdict.recorded_vllm_version`): they were measured on different servers,
    and their caps are judged as one curve."""
    if col.VLLM_VERSION not in measured_runs or not len(measured_runs):
        return ()
    releases = measured_runs[col.VLLM_VERSION].map(recorded_vllm_version)
    named = sorted(set(releases.dropna()))
    unrecorded = int(releases.isna().sum())
    if len(named) + (unrecorded > 0) < 2:
        return ()
    kinds = [f"{(releases == name).sum()} on vLLM {name}" for name in named]
    kinds += [f"{unrecorded} recording no release"] if unrecorded else []
    return (AdviceWarning(
        "several_vllm_releases",
        f"the workload's runs come from several engines ({', '.join(kinds)}) and are judged as one curve; a "
        "curve is one server's: pass --traces a folder of one release"),)


def served_model_warnings(served_model: str) -> tuple[AdviceWarning, ...]:
    """A warning where the model the commands serve is a local folder vLLM cannot load (a config.json
    without weights: `slim.specs.hf_config.folder_without_weights`)."""
    unloadable = folder_without_weights(served_model)
    return () if unloadable is None else (AdviceWarning("served_folder_holds_no_weights", unloadable),)


TPOT_DROP = 0.1
"""How far below a smaller cap's a cap's measured mean TPOT may lie before `latency_order_warnings`
names it: run-to-run scatter is a few per cent, and a larger batch only lengthens each decode step."""


def latency_order_warnings(measured_runs: pd.DataFrame) -> tuple[AdviceWarning, ...]:
    """A warning where a cap's measured mean TPOT lies more than `TPOT_DROP` below a smaller cap's of the
    same workload: a larger running batch makes each decode step longer, so such a run most likely held
    fewer requests at once than its cap (a server cap or memory setting its record does not hold), and
    measures another configuration than the one it is judged as."""
    if col.MEAN_TPOT_MS not in measured_runs or col.MAX_NUM_SEQS not in measured_runs or len(measured_runs) < 2:
        return ()
    by_cap = measured_runs.groupby(col.MAX_NUM_SEQS)[col.MEAN_TPOT_MS].mean().dropna().sort_index()
    slowest_cap, slowest, suspects = None, -np.inf, []
    for cap, tpot in by_cap.items():
        if tpot < (1 - TPOT_DROP) * slowest:
            suspects.append(f"{cap:g} ({tpot:.3g} ms against {slowest:.3g} at {slowest_cap:g})")
        if tpot > slowest:
            slowest_cap, slowest = cap, tpot
    if not suspects:
        return ()
    return (AdviceWarning(
        "tpot_falls_with_the_cap",
        f"the run(s) at --max-num-seqs {', '.join(suspects)} record a mean TPOT more than "
        f"{100 * TPOT_DROP:g}% below a smaller cap's, where a larger batch only lengthens each step: they most "
        "likely held fewer requests at once than their cap; --exclude-runs leaves them out"),)


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
