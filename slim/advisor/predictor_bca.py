"""Eq. 13 on any registered predictor's prediction of one workload: SLIM-BCA, SIM-BCA and whatever the
registry (`slim.predictors`) adds, for `slim advise` and the advisor study alike.

A registered predictor says how its prediction becomes a decision (`RegisteredPredictor.simulated`):

* a curve (SLIM-BCA): the predicted curve at any cap (`curve_of`: the workload at each cap,
  predicted at the running batch the cap allows, ``B = min(cap, KV capacity in sequences)`` with the
  capacity ``kv_capacity_tokens / (IL + OL)`` the server reported: vLLM cannot run more sequences
  than its KV cache holds), ``T(1)`` predicted at cap 1 (`slim.advisor.bca.bca_from_predictor`). On
  the public traces the measured mean batch also falls below large caps for a second reason (the
  client's finite request stream), which this approximation does not model; the predictions at the
  largest caps are the least reliable, and Table V's throughput variation shows the net effect.
  At a confidence ``c``, the SLO is held on the one-sided upper bound of E2E at ``c`` instead of the
  prediction (``E2E_upper(IL, OL, B) <= SLO`` in Eq. 13); for SLIM that bound is
  `slim.model.uncertainty`'s ``kind="run"`` (the delta method on the parameter covariance plus the
  fit's residual variance, times the envelope of the training-equivalent fits, ``q = t(c)`` on
  ``n - p`` degrees of freedom), as the SLO is judged on a run's measured E2E. Throughput and the
  efficiency floor stay on the prediction.
* simulated runs (SIM-BCA): the target's own configurations predicted one by one (a simulator runs them),
  ``T(1)`` from the predicted curve, and the caps the predictor refuses (simulated preemption, a
  server that cannot start) left out (`slim.advisor.sim_bca.sim_bca`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from slim import columns as col
from slim.advisor.bca import BcaResult, CurvePredictor, bca_from_predictor
from slim.advisor.measured import MeasuredCurve
from slim.advisor.sim_bca import SimCurve, sim_bca
from slim.errors import AdvisorError
from slim.predictors import FittedPredictor, RegisteredPredictor

ADVISOR_BAND_KIND = "run"
"""The band a confident curve BCA bounds: a run's measured E2E, not only the predicted curve."""


@dataclass(frozen=True)
class Target:
    """One workload to choose a cap for: its model, mean lengths and KV capacity (tokens; NaN: vLLM's
    default reservation), the configurations of its caps (`configs`, one row per cap: the runs'
    own where they were measured), which a simulated decision runs, the data-parallel ranks of
    its server (a cap is the server's requests in flight over all of them) and each rank's
    tensor-parallel size."""

    model: str
    input_len: float
    output_len: float
    kv_capacity_tokens: float = math.nan
    configs: pd.DataFrame | None = None
    data_parallel: int = 1
    tensor_parallel: int = 1

    @classmethod
    def of_curve(cls, curve: MeasuredCurve, rows: pd.DataFrame | None = None) -> Target:
        """A measured curve as a target: its workload and KV capacity, its runs' configurations and the
        tensor-parallel size they ran at (1 where they record none)."""
        sizes = (pd.to_numeric(rows[col.TENSOR_PARALLEL], errors="coerce").dropna().unique()
                 if rows is not None and col.TENSOR_PARALLEL in rows else ())
        tensor_parallel = int(sizes[0]) if len(sizes) == 1 else 1
        return cls(curve.model, curve.input_len_mean, curve.output_len_mean, curve.kv_capacity_tokens, rows,
                   tensor_parallel=tensor_parallel)

    def at_caps(self, caps: np.ndarray) -> pd.DataFrame:
        """The workload's configuration at each of `caps` (no measured batch: each cap's own)."""
        caps = np.asarray(caps, dtype=float)
        return pd.DataFrame({col.MODEL: self.model, col.INPUT_LEN_MEAN: float(self.input_len),
                             col.OUTPUT_LEN_MEAN: float(self.output_len), col.MAX_NUM_SEQS: caps,
                             col.KV_CAPACITY_TOKENS: float(self.kv_capacity_tokens),
                             col.TENSOR_PARALLEL: int(self.tensor_parallel),
                             col.DATA_PARALLEL: int(self.data_parallel)}, index=range(len(caps)))


@dataclass(frozen=True)
class PredictedDecision:
    """A predictor's Eq. 13 decision for a target, the candidates it refused, and the curve it decided
    on where it predicts one at any cap (a ``"curve"`` decision)."""

    decision: BcaResult
    refused: tuple[float, ...] = ()
    curve: CurvePredictor | None = None


def curve_of(fitted: FittedPredictor, target: Target, confidence: float | None = None) -> CurvePredictor:
    """``cap -> (T, E2E)`` of `fitted` at the target's workload, or with `confidence`
    ``cap -> (T, E2E, E2E upper bound)``."""
    if confidence is not None and hasattr(fitted, "with_interval"):
        fitted = fitted.with_interval(ADVISOR_BAND_KIND, one_sided=True)

    def predict(caps: np.ndarray) -> tuple[np.ndarray, ...]:
        prediction = fitted.predict(target.at_caps(caps), confidence)
        if confidence is None:
            return prediction.throughput_per_s, prediction.e2e_latency_s
        if prediction.e2e_interval is None:
            raise AdvisorError(f"{fitted.name} has no interval to hold the SLO on at confidence {confidence:g}")
        return prediction.throughput_per_s, prediction.e2e_latency_s, prediction.e2e_interval.high

    return predict


def simulated_curve(fitted: FittedPredictor, configs: pd.DataFrame) -> SimCurve:
    """The predictor's prediction of each of `configs` (ascending cap), and which caps it refuses."""
    ordered = configs.sort_values(col.MAX_NUM_SEQS, kind="stable")
    prediction = fitted.predict(ordered)
    refused = (np.zeros(len(ordered), dtype=bool) if prediction.refused is None
               else np.asarray(prediction.refused, dtype=bool))
    return SimCurve(ordered[col.MAX_NUM_SEQS].to_numpy(dtype=float), prediction, refused)


def predicted_once(curve: CurvePredictor) -> CurvePredictor:
    """`curve`, predicting each set of caps once and returning the same arrays when asked again: a
    decider's decisions under many SLOs and epsilons (Fig. 12's grid) all ask for the same caps and
    ``T(1)``, and a prediction does not depend on either."""
    predictions: dict[bytes, tuple[ArrayLike, ...]] = {}

    def predict(caps: np.ndarray) -> tuple[ArrayLike, ...]:
        key = np.asarray(caps, dtype=float).tobytes()
        if key not in predictions:
            predictions[key] = curve(caps)
        return predictions[key]

    return predict


Decider = Callable[[np.ndarray, float, float], PredictedDecision]
"""``(candidates, SLO in s, epsilon) -> PredictedDecision``: one predictor's decisions for one target."""


def decider(entry: RegisteredPredictor, fitted: FittedPredictor, target: Target,
            confidence: float | None = None) -> Decider:
    """Eq. 13 on `fitted`'s prediction of `target`, as `entry.simulated` says (module docstring), for any
    candidates, SLO and epsilon; the target is predicted once. A simulated decision runs
    `target.configs` and has no confidence."""
    if not entry.simulated:
        curve = predicted_once(curve_of(fitted, target, confidence))

        def on_curve(candidates: np.ndarray, slo_s: float, epsilon: float) -> PredictedDecision:
            return PredictedDecision(bca_from_predictor(curve, candidate_batch_sizes=candidates, epsilon=epsilon,
                                                        slo_s=slo_s), curve=curve)

        return on_curve
    if confidence is not None:
        raise AdvisorError(f"{entry.name} has no interval: its decision cannot hold the SLO at a confidence")
    if target.configs is None:
        raise AdvisorError(f"{entry.name} decides on the target's configurations; the target has none")
    simulated = simulated_curve(fitted, target.configs)

    def on_simulated(candidates: np.ndarray, slo_s: float, epsilon: float) -> PredictedDecision:
        candidates = np.asarray(candidates, dtype=float)
        refused = tuple(float(cap) for cap, no in zip(simulated.max_num_seqs, simulated.refused)
                        if no and cap in candidates)
        return PredictedDecision(sim_bca(simulated, slo_s, epsilon, candidates), refused)

    return on_simulated


def predicted_bca(entry: RegisteredPredictor, fitted: FittedPredictor, target: Target, candidates: np.ndarray,
                  slo_s: float, epsilon: float, confidence: float | None = None) -> PredictedDecision:
    """`decider`'s decision for one set of candidates, SLO and epsilon."""
    return decider(entry, fitted, target, confidence)(np.asarray(candidates, dtype=float), slo_s, epsilon)
