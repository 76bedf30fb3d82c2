"""Split-conformal prediction intervals: a predictor's errors on curves it was not fitted on,
turned into an interval that covers a new run at a stated confidence.

**Scores.** Leave one curve out (`leave_one_curve_out_scores`): for each measured curve (one model,
IL and OL) of the training runs, the predictor is refitted on the other curves and predicts the
left-out curve's runs; each run's score is ``|log(measured / predicted)|``. A curve is the unit
left out because runs of one curve share their errors: leaving out single runs would score
interpolation within a curve that the held-out settings never ask for.

**Interval.** With ``n`` scores, the multiplier at confidence ``c`` is the ``ceil((n + 1) c)``-th
smallest (`conformal_quantile`); a new run's interval is ``predicted x exp(+/- q)``. Under
exchangeability of the scores this covers at least ``c`` of new runs; where ``ceil((n + 1) c) > n``
no finite interval has that guarantee and the quantile is infinite (no interval).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np
import pandas as pd

from slim import columns as col


def conformal_quantile(scores: np.ndarray, confidence: float) -> float:
    """The ``ceil((n + 1) c)``-th smallest score; infinite where there are too few scores."""
    scores = np.sort(np.asarray(scores, dtype=float))
    rank = math.ceil((len(scores) + 1) * confidence)
    return float(scores[rank - 1]) if rank <= len(scores) else math.inf


FitPredict = Callable[[pd.DataFrame, pd.DataFrame], tuple[np.ndarray, np.ndarray] | None]
"""``(training runs, runs to predict) -> (throughput, E2E)``, or None where the predictor cannot be
fitted on those runs (too few of them)."""


def leave_one_curve_out_scores(train: pd.DataFrame, fit_predict: FitPredict) -> tuple[np.ndarray, np.ndarray]:
    """``|log(measured / predicted)|`` of throughput and of E2E for every training run, predicted
    by the predictor fitted on the other curves (module docstring); folds it cannot fit give none."""
    throughput_scores, e2e_scores = [], []
    for _, rows in train.groupby(list(col.WORKLOAD_KEYS), sort=True):
        rest = train.drop(index=rows.index)
        if rest.empty:
            continue
        predicted = fit_predict(rest, rows)
        if predicted is None:
            continue
        throughput, e2e = predicted
        throughput_scores.append(np.abs(np.log(rows[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float) / throughput)))
        e2e_scores.append(np.abs(np.log(rows[col.E2E_LATENCY_S].to_numpy(dtype=float) / e2e)))
    def joined(parts: list[np.ndarray]) -> np.ndarray:
        values = np.concatenate(parts) if parts else np.zeros(0)
        return values[np.isfinite(values)]
    return joined(throughput_scores), joined(e2e_scores)


def conformal_bounds(predicted: np.ndarray, scores: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """``predicted x exp(-/+ q)`` at `confidence` (NaN where the quantile is infinite)."""
    q = conformal_quantile(scores, confidence)
    predicted = np.asarray(predicted, dtype=float)
    if not math.isfinite(q):
        return np.full(predicted.shape, np.nan), np.full(predicted.shape, np.nan)
    return predicted * math.exp(-q), predicted * math.exp(q)
