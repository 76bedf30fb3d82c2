"""IMAI OOD-LR (`baselines.imai`) behind the predictor contract (`slim.predictors.contract`).

A linear regression of E2E latency on workload and model features, taking the measured mean batch
as an input. Its interval is statsmodels' band of the fitted line (``obs=False``); it has no
training-equivalent fits: where its minimal-norm choice decides a prediction,
`Prediction.determined` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from slim import columns as col
from slim.predictors.contract import Interval, Prediction, TrainingRuns, throughput_interval_from_e2e
from slim.specs.architecture import ArchitectureCatalog

BAND_KIND = "fitted line"


@dataclass(frozen=True)
class FittedImai:
    """A fitted `baselines.imai.ImaiOodLr`."""

    name: str
    estimator: Any
    catalog: ArchitectureCatalog
    calibration: None = None   # no fitted constants to report (a regression)

    def predict(self, configs: pd.DataFrame, confidence: float | None = None) -> Prediction:
        from baselines.features import add_architecture_columns

        x = add_architecture_columns(configs, self.catalog)
        interval = None
        if confidence is not None:
            low, high = self.estimator.predict_band(x, confidence)
            interval = Interval(low, high, confidence, BAND_KIND)
        return Prediction(self.estimator.predict_throughput(x), self.estimator.predict(x),
                          np.full(len(configs), np.nan), interval, throughput_interval_from_e2e(configs, interval),
                          determined=self.estimator.prediction_determined(x))

    def refit(self, training: TrainingRuns) -> FittedImai:
        return ImaiPredictor(self.name, self.estimator).fit(training)


@dataclass(frozen=True)
class ImaiPredictor:
    """IMAI OOD-LR with `estimator` (an `ImaiOodLr` configuration, cloned for each fit; None: the main
    tables' configuration, `baselines.variants.MAIN_IMAI`)."""

    name: str
    estimator: Any = None

    def fit(self, training: TrainingRuns) -> FittedImai:
        from sklearn.base import clone

        from baselines.features import add_architecture_columns
        from baselines.variants import MAIN_IMAI

        train_x = add_architecture_columns(training.runs, training.catalog)
        estimator = clone(MAIN_IMAI if self.estimator is None else self.estimator)
        return FittedImai(self.name, estimator.fit(train_x, train_x[col.E2E_LATENCY_S].to_numpy()), training.catalog)
