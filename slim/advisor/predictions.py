"""A predictor's view of one `slim advise` workload: the registered predictor fitted on the usable
runs (or, where they are too few to fit it, its uncalibrated prior, as `slim tune` starts from) and
its prediction of every candidate cap, quantity by quantity."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.bca import CurvePredictor
from slim.advisor.predictor_bca import Target, curve_of, simulated_curve
from slim.advisor.request import AdviceRequest
from slim.decision.candidates import GOODPUT, THROUGHPUT
from slim.errors import FitError
from slim.model.calibration import CalibrationResult
from slim.predictors import FittedPredictor, RegisteredPredictor, TrainingRuns
from slim.predictors.contract import predict_slo_metrics
from slim.predictors.data_parallel import engine_rows, moe_in_lockstep
from slim.sim.constants import load_sim_constants
from slim.sim.run_cache import SimulationCache
from slim.sim.schedules import keys_of_frame, simulate_schedules
from slim.sim.vllm_defaults import constants_for_vllm_version
from slim.specs.architecture import Architecture, ArchitectureCatalog
from slim.specs.data_parallel import per_rank_cap
from slim.specs.hardware import Hardware
from slim.specs.slo import IN_BATCH_E2E, SloMetric
from slim.tune.request import benchmark_prompts, most_common


@dataclass(frozen=True)
class PredictorAdvice:
    """One predictor for a request: fitted on the runs (`prior_reason` None), or its prior because
    they could not fit it (`prior_reason` says why); its prediction of every candidate cap (by
    quantity: `THROUGHPUT` in tokens/s, SLO metrics in ms; NaN where it cannot), the upper bound of
    the in-batch E2E at the request's confidence (None without one), the candidates it refused, and
    the predicted curve where it has one (SLIM's; None where the prediction rests on simulated runs,
    SIM's, which queue beyond the KV capacity themselves and have no held-out check)."""

    fitted: FittedPredictor
    predicted: dict[str, np.ndarray]
    refused: tuple[float, ...] = ()
    curve: CurvePredictor | None = None
    bound_ms: np.ndarray | None = None
    prior_reason: str | None = None

    @property
    def fit(self) -> CalibrationResult | None:
        return self.fitted.calibration


def candidate_prompts(request: AdviceRequest, measured_runs: pd.DataFrame) -> np.ndarray:
    """Requests each candidate's simulated benchmark sends, by `slim tune`'s rule
    (`slim.tune.request.benchmark_prompts`): a measured cap's own (so that prediction and measurement
    are of one benchmark), else what the workload's runs sent, at least two per concurrency slot (a
    benchmark of fewer requests than its cap never runs at the cap)."""
    in_workload = most_common(measured_runs[col.NUM_PROMPTS]) if len(measured_runs) else None
    prompts = []
    for cap in request.candidate_caps:
        at_cap = (most_common(measured_runs.loc[measured_runs[col.MAX_NUM_SEQS].astype(float) == cap,
                                                col.NUM_PROMPTS]) if len(measured_runs) else None)
        prompts.append(benchmark_prompts(request.num_prompts, cap, at_cap, in_workload))
    return np.asarray(prompts, dtype=float)


def predictor_advice(entry: RegisteredPredictor, request: AdviceRequest, train: pd.DataFrame,
                     catalog: ArchitectureCatalog, hw: Hardware, arch: Architecture,
                     capacity_tokens: float, measured_runs: pd.DataFrame, throttled: bool = False,
                     tensor_parallel: int = 1, vllm_version: str | None = None,
                     data_parallel: int = 1) -> PredictorAdvice:
    """The registered predictor `entry` fitted on `train` (its prior where they cannot fit it), and its
    prediction of the request's workload at every candidate cap: throughput, the in-batch E2E and each
    SLO metric (`slim.predictors.contract.predict_slo_metrics`; under a client that keeps the cap in
    flight where the workload's runs were `throttled` so, else every request at once). A predictor
    that needs simulated schedules (SIM) gets those of the training runs and of each candidate cap
    (cap 1 too, for T(1), at the constants of `sim_constants_file`); the caps above vLLM's token
    budget are refused. The candidates run at the runs' `tensor_parallel` size and, where they record
    it, their `vllm_version`'s scheduler; at `data_parallel` ranks a cap is the server's requests in
    flight, each rank holding its share (`slim.predictors.data_parallel`), and the budget holds per
    rank."""
    caps = np.asarray(request.candidate_caps, dtype=float)
    prompts = candidate_prompts(request, measured_runs)
    target = Target(arch.name, request.input_len, request.output_len, capacity_tokens, data_parallel=data_parallel,
                    tensor_parallel=tensor_parallel)
    schedules, over_budget = None, ()
    configs = target.at_caps(caps).assign(**{col.NUM_PROMPTS: prompts,
                                             col.BENCHMARK_MODE: col.BenchmarkMode.ONLINE,
                                             col.TENSOR_PARALLEL: tensor_parallel,
                                             col.MAX_CONCURRENCY: caps if throttled else np.nan})
    if vllm_version is not None:
        configs[col.VLLM_VERSION] = vllm_version
    constants = load_sim_constants(request.sim_constants_file) if entry.needs_schedules else None
    simulations = request.simulations if request.simulations is not None else SimulationCache()
    if constants is not None:
        rank_caps = np.array([per_rank_cap(cap, data_parallel) for cap in caps], dtype=float)
        budget = constants_for_vllm_version(constants, vllm_version, hw, int(rank_caps.max())).max_num_batched_tokens
        over_budget = tuple(float(cap) for cap, rank_cap in zip(caps, rank_caps) if rank_cap > budget)
        configs = configs[rank_caps <= budget].reset_index(drop=True)
        workers = min(4, os.cpu_count() or 1)
        engines = engine_rows(configs, moe_in_lockstep(catalog))
        schedules = simulate_schedules([*keys_of_frame(train), *keys_of_frame(engines)], catalog, hw,
                                       constants, workers=workers, cache=simulations)
    curve_decision = not entry.simulated
    # A band needs the training-equivalent fits (32 refinements) where the data leave directions open.
    training = TrainingRuns(train, catalog, hw, schedules, f"usable runs under {request.traces}",
                            sample_valley=request.confidence is not None and curve_decision, simulations=simulations)
    prior_reason = None
    try:
        fitted = entry.predictor.fit(training)
    except FitError as error:
        if request.confidence is not None or not hasattr(entry.predictor, "prior"):
            raise
        # Too few runs to fit: the predictor before any run, as slim tune starts from; measurements still decide.
        prior_reason = re.sub(r" \([^()]*\); add training runs$", "", str(error).split(": ", 1)[-1])
        fitted = entry.predictor.prior(training.with_runs(train.iloc[:0], "no runs (prior)"))
    metrics = tuple(dict.fromkeys([*request.slos.metrics, SloMetric.parse(col.MEAN_TPOT_MS)]))   # the frontier's
    predicted = {THROUGHPUT: np.full(len(caps), np.nan)}
    predicted.update({metric.name: np.full(len(caps), np.nan) for metric in metrics})
    if request.slos.goodput is not None:
        predicted[GOODPUT] = np.full(len(caps), np.nan)
    at = np.searchsorted(caps, configs[col.MAX_NUM_SEQS].to_numpy(dtype=float))
    bound_ms, curve, refused = None, None, ()
    if curve_decision:
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
    if curve_decision and IN_BATCH_E2E in predicted:
        predicted[IN_BATCH_E2E] = 1e3 * np.asarray(curve(caps)[1], dtype=float)
    return PredictorAdvice(fitted, predicted, over_budget + refused, curve, bound_ms, prior_reason)
