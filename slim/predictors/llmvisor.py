"""LLMVisor-Agg (`baselines.llmvisor`) behind the predictor contract (`slim.predictors.contract`).

A regression per deployment: its features are token counts and the measured mean batch, with no
model characteristics, so where every configuration's model was profiled it is fitted per model,
and otherwise on the pooled runs (`llmvisor_predictions`). It is fitted to the
runs' inter-token latency; runs that record none (offline static batches) leave it unfitted, and
its predictions NaN with the reason. It has no interval and no training-equivalent fits: where its
minimal-norm choice decides a prediction, `Prediction.determined` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from slim import columns as col
from slim.predictors.contract import Prediction, TrainingRuns
from slim.specs.architecture import ArchitectureCatalog

LLMVISOR_WITHOUT_ITL = ("not fitted: the training runs record no inter-token latency (offline static batches "
                        "measure one latency per batch), LLMVisor-Agg's decode target")


def records_inter_token_latency(rows: pd.DataFrame) -> bool:
    """Whether every row has a positive mean ITL, the decode target LLMVisor-Agg is fitted to."""
    if col.MEAN_ITL_MS not in rows:
        return False
    itl = pd.to_numeric(rows[col.MEAN_ITL_MS], errors="coerce").to_numpy(dtype=float)
    return bool(len(itl) and np.isfinite(itl).all() and (itl > 0).all())


def llmvisor_predictions(train_x: pd.DataFrame, validate_x: pd.DataFrame,
                         estimator: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LLMVisor-Agg's (throughput, E2E, prediction determined) for the validation rows, from
    `estimator` (an unfitted `LLMVisorAgg` configuration, cloned for each fit; default
    `baselines.variants.MAIN_LLMVISOR`, the main tables').

    LLMVisor profiles one deployment: its features are token counts only, with
    no model characteristics. Where every validation model was profiled (the
    same-curve setting) it is therefore fitted per model, as its authors use it;
    pooling models would let the small input-length difference between
    tokenizers stand in for model identity and extrapolate wildly. Where the
    validation model is unseen (the model transfers) it can only be fitted on
    the pooled training rows.

    The main configuration's coefficients are constrained non-negative: LLMVisor's terms are
    per-token and per-sequence costs. Unconstrained, a decode function fitted on
    B in {1, 4, 8} extrapolates to negative ITL at B = 512 (a third of the
    same-curve predictions were non-positive on the public traces).
    """
    from sklearn.base import clone

    from baselines.variants import MAIN_LLMVISOR

    template = MAIN_LLMVISOR if estimator is None else estimator

    per_model = set(validate_x[col.MODEL]) <= set(train_x[col.MODEL])
    groups = validate_x.groupby(col.MODEL, sort=False) if per_model else [(None, validate_x)]
    throughput = pd.Series(np.nan, index=validate_x.index)
    e2e_s = pd.Series(np.nan, index=validate_x.index)
    determined = pd.Series(False, index=validate_x.index)
    for model, validate_rows in groups:
        train_rows = train_x[train_x[col.MODEL] == model] if per_model else train_x
        fitted = clone(template).fit(train_rows, train_rows[col.E2E_LATENCY_S].to_numpy())
        throughput[validate_rows.index] = fitted.predict_throughput(validate_rows)
        e2e_s[validate_rows.index] = fitted.predict(validate_rows)
        determined[validate_rows.index] = fitted.prediction_determined(validate_rows)
    return throughput.to_numpy(), e2e_s.to_numpy(), determined.to_numpy()


@dataclass(frozen=True)
class FittedLLMVisor:
    """LLMVisor-Agg's training runs and estimator, fitted per predicted model set when predicting."""

    name: str
    train_x: pd.DataFrame
    catalog: ArchitectureCatalog
    estimator: Any = None
    not_fitted: str | None = None
    calibration: None = None   # no fitted constants to report (a regression)

    def predict(self, configs: pd.DataFrame, confidence: float | None = None) -> Prediction:
        from baselines.features import add_architecture_columns

        nothing = np.full(len(configs), np.nan)
        if self.not_fitted is not None:
            return Prediction(nothing, nothing, nothing, determined=np.zeros(len(configs), dtype=bool),
                              unidentified=self.not_fitted, not_fitted=self.not_fitted)
        configs_x = add_architecture_columns(configs, self.catalog)
        throughput, e2e_s, determined = llmvisor_predictions(self.train_x, configs_x, self.estimator)
        return Prediction(throughput, e2e_s, nothing, determined=determined)

    def refit(self, training: TrainingRuns) -> FittedLLMVisor:
        return LLMVisorPredictor(self.name, self.estimator).fit(training)


@dataclass(frozen=True)
class LLMVisorPredictor:
    """LLMVisor-Agg with `estimator` (an unfitted `LLMVisorAgg`; None: the main tables' configuration,
    `baselines.variants.MAIN_LLMVISOR`)."""

    name: str
    estimator: Any = None

    def fit(self, training: TrainingRuns) -> FittedLLMVisor:
        from baselines.features import add_architecture_columns

        if not records_inter_token_latency(training.runs):
            return FittedLLMVisor(self.name, training.runs, training.catalog, self.estimator, LLMVISOR_WITHOUT_ITL)
        return FittedLLMVisor(self.name, add_architecture_columns(training.runs, training.catalog), training.catalog,
                              self.estimator)
