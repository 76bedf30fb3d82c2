"""Split-conformal prediction intervals: a predictor's errors on runs it was not fitted on, turned
into an interval that covers a new run at a stated confidence.

**Scores.** Each fold refits the predictor on part of the training runs and predicts the rest; a
predicted run's score is ``|log(measured / predicted)|``. Two kinds of fold:

* leave one curve out (`curve_folds`): each measured curve (one model, IL and OL) predicted from the
  others. A curve is the unit because its runs share their errors;
* extrapolate as the held-out setting does (`extrapolation_folds`): where the validation runs lie
  beyond the training runs along one coordinate (larger caps, longer lengths, a higher tensor
  parallel degree, other models), each training value along it predicted from the values before it
  (from the other models). These errors are one step of the setting's own extrapolation, which
  leaving out a curve does not show.

**Interval.** With ``n`` scores, the multiplier at confidence ``c`` is the ``ceil((n + 1) c)``-th
smallest (`conformal_quantile`); a new run's interval is ``predicted x exp(+/- q)``. Where
``ceil((n + 1) c) > n`` no finite interval has that guarantee and the quantile is infinite.
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


Fold = tuple[pd.DataFrame, pd.DataFrame]
"""(runs to fit on, runs to predict)."""

ORDERED_COORDINATES = (col.MAX_NUM_SEQS, col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL, col.TENSOR_PARALLEL)


def curve_folds(train: pd.DataFrame) -> list[Fold]:
    """Each measured curve of `train` left out in turn."""
    return [(train.drop(index=rows.index), rows) for _, rows in train.groupby(list(col.WORKLOAD_KEYS), sort=True)]


def extrapolation_folds(train: pd.DataFrame, validate: pd.DataFrame) -> list[Fold]:
    """Folds that extrapolate along each coordinate the validation runs lie beyond (module docstring):
    for an ordered coordinate whose validation values are all above (below) the training values, each
    training value but the first (last) predicted from the values below (above) it; for the model,
    where no validation model is a training model, each training model from the others."""
    folds: list[Fold] = []
    for name in ORDERED_COORDINATES:
        trained = np.sort(train[name].dropna().unique())
        asked = validate[name].dropna().unique()
        if len(trained) < 2 or not len(asked) or set(trained) & set(asked):
            continue
        if asked.min() > trained.max():
            folds += [(train[train[name] < value], train[train[name] == value]) for value in trained[1:]]
        elif asked.max() < trained.min():
            folds += [(train[train[name] > value], train[train[name] == value]) for value in trained[:-1]]
    models = sorted(set(train[col.MODEL]))
    if len(models) > 1 and not set(models) & set(validate[col.MODEL]):
        folds += [(train[train[col.MODEL] != model], train[train[col.MODEL] == model]) for model in models]
    return folds


def fold_scores(folds: list[Fold], fit_predict: FitPredict) -> tuple[np.ndarray, np.ndarray]:
    """``|log(measured / predicted)|`` of throughput and of E2E for every run a fold predicts; folds
    the predictor cannot be fitted on give none.

    A curve's fold and an extrapolation's can be the same split of the runs (the last curve along a
    coordinate is also its last step); both count, but the predictor is fitted once for them, as a
    refit is a deterministic function of the runs it is given."""
    throughput_scores, e2e_scores = [], []
    predicted_by_fold: dict[tuple[tuple, tuple], tuple[np.ndarray, np.ndarray] | None] = {}
    for rest, rows in folds:
        if rest.empty or rows.empty:
            continue
        fold = (tuple(rest.index), tuple(rows.index))
        if fold not in predicted_by_fold:
            predicted_by_fold[fold] = fit_predict(rest, rows)
        predicted = predicted_by_fold[fold]
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
