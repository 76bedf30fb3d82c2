"""SIM-BCA: Eq. 13 on the calibrated simulator's predicted curve (paper Section VII, with SIM).

SLIM-BCA evaluates SLIM at a running batch it must guess from the cap and the KV capacity
(`slim.advisor.predictor_bca`). SIM simulates the cap itself: its prediction of throughput, mean
batch and Little's-law E2E at each candidate ``--max-num-seqs`` comes from the schedule vLLM
would run (`slim.sim.schedules`), and so does whether the KV cache overflows. A candidate cap
whose simulated run preempts is refused (a preempting configuration recomputes prompts and
is excluded from the measured data too), as is one the simulated server cannot start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slim.advisor.bca import BcaResult, select_batch_cap, throughput_at_one
from slim.errors import AdvisorError
from slim.predictors import Prediction


@dataclass(frozen=True)
class SimCurve:
    """SIM's prediction at a curve's candidate caps (ascending), and which caps it refuses."""

    max_num_seqs: np.ndarray
    prediction: Prediction       # slim.predictors: throughput and E2E per cap
    refused: np.ndarray          # bool per cap: the simulated run preempts or cannot start


def sim_bca(curve: SimCurve, slo_s: float, epsilon: float, candidates: np.ndarray | None = None) -> BcaResult:
    """Eq. 13 on SIM's predicted curve over the caps it does not refuse (of `candidates`,
    default every cap of the curve).

    ``T(1)`` is taken from the predicted curve over every cap that started, as for a
    measured curve (`throughput_at_one`: interpolated at 1, or ``T(B_min) / B_min``).
    Raises `AdvisorError` when SIM refuses every candidate.
    """
    admissible = ~curve.refused
    if candidates is not None:
        admissible &= np.isin(curve.max_num_seqs, np.asarray(candidates, dtype=float))
    if not admissible.any():
        raise AdvisorError(f"SIM refuses every candidate cap {curve.max_num_seqs.tolist()}: each simulated run "
                           "preempts (its KV demand overflows the cache) or cannot start")
    started = np.isfinite(curve.prediction.throughput_per_s)
    t_one = throughput_at_one(curve.max_num_seqs[started], curve.prediction.throughput_per_s[started])
    return select_batch_cap(curve.max_num_seqs[admissible], curve.prediction.throughput_per_s[admissible],
                            curve.prediction.e2e_latency_s[admissible], slo_s=slo_s, epsilon=epsilon,
                            throughput_at_one_per_s=t_one)
