"""The predictor registry: a predictor registered in one place is evaluated and shown in Table III."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

import slim.predictors as registry
from slim import columns as col
from slim.model.equations import SlimParams, predict_frame
from slim.paper.heldout import IMAI, LLMVISOR, SLIM, evaluate_setting, mape_table
from slim.paper.predictor_tables import TABLE3
from slim.paper.splits import HeldOutSetting
from slim.paper.tables import table3
from slim.predictors import Prediction, RegisteredPredictor, TrainingRuns
from slim.specs.architecture import MODELS_FILE, load_architectures
from slim.specs.hardware import HARDWARE_FILE, load_hardware

CATALOG = load_architectures(MODELS_FILE)
H100 = load_hardware(HARDWARE_FILE)["h100-64gb"]
TOY = "Toy (training mean)"


def synthetic_runs() -> pd.DataFrame:
    """Runs whose throughput is SLIM's at known constants with 2% seeded noise, in the clean table's columns."""
    params = SlimParams(eta_compute=0.55, eta_memory=0.7, batch_offset=6.0, alpha_s_per_token=1.2e-3,
                        gamma_s_per_token=15e-6, t_fixed_s=0.08)
    grid = list(itertools.product(("opt-1.3b", "mistral-7b"), (128.0, 512.0), (64.0, 256.0), (1, 4, 16, 64)))
    frame = pd.DataFrame(grid, columns=[col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.MAX_NUM_SEQS])
    frame[col.MEAN_BATCH_SIZE] = frame[col.MAX_NUM_SEQS].astype(float) * 0.9
    _, throughput = predict_frame(CATALOG, H100, params, frame)
    frame[col.TOTAL_TOKEN_THROUGHPUT] = throughput * (1 + 0.02 * np.random.default_rng(0).standard_normal(len(frame)))
    frame[col.E2E_LATENCY_S] = (frame[col.MEAN_BATCH_SIZE] * (frame[col.INPUT_LEN_MEAN] + frame[col.OUTPUT_LEN_MEAN])
                                / frame[col.TOTAL_TOKEN_THROUGHPUT])
    frame[col.INPUT_LEN_NOMINAL] = frame[col.INPUT_LEN_MEAN].astype(int)
    frame[col.TENSOR_PARALLEL] = 1
    frame[col.OUTPUT_LEN_NOMINAL] = frame[col.OUTPUT_LEN_MEAN].astype(int)
    frame[col.RUN_ID] = [f"run-{index}" for index in range(len(frame))]
    return frame


@dataclass(frozen=True)
class FittedToy:
    """Every configuration predicted at the training runs' mean throughput."""

    name: str
    mean_throughput: float
    calibration: None = None

    def predict(self, configs: pd.DataFrame, confidence: float | None = None) -> Prediction:
        throughput = np.full(len(configs), self.mean_throughput)
        e2e_s = (configs[col.MEAN_BATCH_SIZE] * (configs[col.INPUT_LEN_MEAN] + configs[col.OUTPUT_LEN_MEAN])
                 / throughput).to_numpy()
        return Prediction(throughput, e2e_s, np.full(len(configs), np.nan), determined=np.ones(len(configs), bool))

    def refit(self, training: TrainingRuns) -> FittedToy:
        return ToyPredictor(self.name).fit(training)


@dataclass(frozen=True)
class ToyPredictor:
    name: str

    def fit(self, training: TrainingRuns) -> FittedToy:
        return FittedToy(self.name, float(training.runs[col.TOTAL_TOKEN_THROUGHPUT].mean()))


@pytest.fixture
def with_toy():
    entry = RegisteredPredictor(ToyPredictor(TOY))
    registry.register(entry)
    TABLE3.append(TOY)
    yield
    TABLE3.remove(TOY)
    registry.REGISTRY.remove(entry)


def test_a_registered_predictor_appears_in_table3_built_from_synthetic_runs(with_toy):
    runs = synthetic_runs()
    setting = HeldOutSetting("same_curve", "Same curve", {col.MAX_NUM_SEQS: [1, 4, 16]}, {col.MAX_NUM_SEQS: [64]})
    evaluation = evaluate_setting(runs, setting, CATALOG, H100)
    mapes = mape_table(evaluation.predictions, evaluation.identifiability)
    table = table3(mapes, [setting])
    shown = list(dict.fromkeys(predictor for predictor, _ in table.columns))
    assert shown == [SLIM, LLMVISOR, IMAI, TOY]
    toy = mapes.set_index(col.PREDICTOR).loc[TOY]
    assert toy[col.N_VALIDATION] == 8
    validate = runs[runs[col.MAX_NUM_SEQS] == 64]
    expected = 100 * np.mean(np.abs(runs[runs[col.MAX_NUM_SEQS] < 64][col.TOTAL_TOKEN_THROUGHPUT].mean()
                                    / validate[col.TOTAL_TOKEN_THROUGHPUT] - 1))
    assert toy[col.THROUGHPUT_METRIC.mape] == pytest.approx(expected)
    assert mapes.set_index(col.PREDICTOR).loc[SLIM, col.THROUGHPUT_METRIC.mape] < toy[col.THROUGHPUT_METRIC.mape]


def test_without_the_registration_table3_has_the_paper_predictors_only():
    setting = HeldOutSetting("same_curve", "Same curve", {col.MAX_NUM_SEQS: [1, 4, 16]}, {col.MAX_NUM_SEQS: [64]})
    evaluation = evaluate_setting(synthetic_runs(), setting, CATALOG, H100)
    table = table3(mape_table(evaluation.predictions, evaluation.identifiability), [setting])
    assert list(dict.fromkeys(predictor for predictor, _ in table.columns)) == [SLIM, LLMVISOR, IMAI]
