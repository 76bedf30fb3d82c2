"""The candidate caps of one `slim advise` workload: what the workload's runs measured at each and what
the predictor predicts (`CandidateRow`), the SLO bounds they resolve, and the view the one decision
of `slim.decision` judges."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.predictions import PredictorAdvice
from slim.advisor.request import AdviceRequest
from slim.decision.candidates import CandidateView, Estimates, candidate_view
from slim.decision.certificate import Certificate, certify
from slim.decision.slo_limits import ResolvedLimits, resolve_limits
from slim.defaults import DEFAULT_CONFIDENCE, DEFAULT_MAX_RUNS_PER_CAP
from slim.errors import AdvisorError
from slim.specs.slo import SloMetric, Slos, judging_runs
from slim.tune.measurement import measurement_of_runs

NOMINAL_MATCH = 0.02
"""A run measures the workload when its model is the target and its mean lengths are within 2 %."""


@dataclass(frozen=True)
class CandidateRow:
    """One candidate cap: what the workload's runs measured (by quantity, vLLM's names; `THROUGHPUT`
    in tokens/s, SLO metrics in ms; absent where no run judged it) and what the predictor predicts
    (NaN where it cannot: SLIM gives the in-batch E2E and the mean TPOT only); `bound_ms` the
    upper bound a confident advice holds the in-batch E2E to; `refused` where the predictor refuses
    the cap (SIM: its simulated run preempts). `averaged_runs` is how many runs its measurement averages
    (`slim.tune.measurement.Measurement.runs`: a cleaned row that averages repeats counts them) and
    `log_sd` that measurement's run-to-run scatter (the standard deviation of its log; NaN unmeasured)."""

    max_num_seqs: float
    measured: dict[str, float]
    predicted: dict[str, float]
    runs: int = 0
    bound_ms: float = math.nan
    refused: bool = False
    averaged_runs: int = 0
    log_sd: float = math.nan


def workload_runs(runs: pd.DataFrame, model: str, input_len: float, output_len: float) -> pd.DataFrame:
    """The runs that measured the workload: its model, mean lengths within `NOMINAL_MATCH`."""
    if runs.empty:
        return runs
    il, ol = runs[col.INPUT_LEN_MEAN].astype(float), runs[col.OUTPUT_LEN_MEAN].astype(float)
    return runs[(runs[col.MODEL] == model) & ((il - input_len).abs() <= NOMINAL_MATCH * input_len)
                & ((ol - output_len).abs() <= NOMINAL_MATCH * output_len)]


def candidate_rows(request: AdviceRequest, advice: PredictorAdvice,
                   measured_runs: pd.DataFrame) -> tuple[CandidateRow, ...]:
    """Every candidate cap: the workload's measurements (each SLO metric from the runs that judge it,
    repeated runs combined as `slim tune` combines them) and the predictor's predictions."""
    rows = []
    tpot = SloMetric.parse(col.MEAN_TPOT_MS)
    for position, cap in enumerate(request.candidate_caps):
        at_cap = (measured_runs[measured_runs[col.MAX_NUM_SEQS].astype(float) == cap] if len(measured_runs)
                  else measured_runs)
        measurement = measurement_of_runs(at_cap, request.slos) if len(at_cap) else None
        measured = measurement.values() if measurement is not None else {}
        judged = at_cap[judging_runs(tpot, at_cap)] if len(at_cap) else at_cap
        if len(judged) and tpot.name not in measured:     # the frontier's x axis
            measured[tpot.name] = float(np.mean(tpot.values_ms(judged)))
        predicted = {name: float(values[position]) for name, values in advice.predicted.items()}
        rows.append(CandidateRow(float(cap), measured, predicted, len(at_cap),
                                 float(advice.bound_ms[position]) if advice.bound_ms is not None else math.nan,
                                 cap in advice.refused, measurement.runs if measurement is not None else 0,
                                 measurement.log_sd if measurement is not None else math.nan))
    return tuple(rows)


def advice_limits(slos: Slos, rows: Sequence[CandidateRow]) -> ResolvedLimits:
    """Each SLO's bound (`slim.decision.slo_limits.resolve_limits`): a relative one at the reference
    cap's measured value, else at its prediction (named in `ResolvedLimits.predicted`, said so in the
    report). Raises `AdvisorError` where neither gives it."""
    reference = next((row for row in rows if row.max_num_seqs == slos.reference_cap), None)
    if slos.relative and reference is None:
        raise AdvisorError(f"the relative SLO's reference cap {slos.reference_cap:g} is not a candidate")
    resolved = resolve_limits(slos, reference.measured if reference is not None else None,
                              reference.predicted if reference is not None else None)
    if not resolved.resolved:
        name = resolved.waiting[0]
        bound = next(b for b in slos.bounds if b.metric.name == name)
        raise AdvisorError(f"{name}={bound.multiplier:g}x needs its value at cap {slos.reference_cap:g}: no run of "
                           "the workload measured it and the predictor cannot predict it; measure that cap first "
                           "(slim tune proposes it)")
    return resolved


def advice_view(rows: Sequence[CandidateRow], slos: Slos, limits_ms: dict[str, float]) -> CandidateView:
    """The candidates as the decision reads them (`slim.decision.candidates.candidate_view`): measured
    values where measured, with their run-to-run scatter, predictions elsewhere (no interval but a
    confident advice's bound on the in-batch E2E); a refused cap counts as failed; a measured cap may
    be measured again while it has fewer than `DEFAULT_MAX_RUNS_PER_CAP` runs, as `slim tune` repeats."""
    in_batch = {bound.metric.name for bound in slos.bounds if bound.metric.in_batch}

    def estimates(name: str) -> Estimates:
        measured = np.array([name in row.measured for row in rows])
        value = np.array([row.measured.get(name, math.nan) for row in rows])
        mean = np.array([row.predicted.get(name, math.nan) for row in rows])
        high = np.array([row.bound_ms if name in in_batch and np.isfinite(row.bound_ms) else m
                         for row, m in zip(rows, mean)])
        scatter = np.array([row.log_sd if row.averaged_runs else 0.0 for row in rows])
        return Estimates(measured, value, mean, mean, high, np.where(measured, scatter, 0.0))

    return candidate_view([row.max_num_seqs for row in rows], estimates, limits_ms,
                          goodput=slos.goodput is not None, failed=[row.refused for row in rows],
                          repeatable=[0 < row.averaged_runs < DEFAULT_MAX_RUNS_PER_CAP for row in rows])


def advice_certificate(view: CandidateView, epsilon: float, tolerance: float) -> Certificate:
    """Whether the cap decision is settled on an advice's view: `slim.decision.certificate.certify`
    under the run-to-run noise at `DEFAULT_CONFIDENCE`, as `slim tune` certifies (a measured SLO metric
    within that noise of its bound, on the side that decides, is to be measured again)."""
    from scipy.stats import norm

    return certify(view, epsilon, tolerance, float(norm.ppf(DEFAULT_CONFIDENCE)))
