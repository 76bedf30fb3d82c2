"""SLIM predicts a configuration at its own tensor-parallel size: the KV cache vLLM reserves by default is
each rank's (weights and KV heads split over the ranks), and `slim advise`'s target carries the size."""

import math

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.predictor_bca import Target
from slim.predictors.slim_model import running_batch
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware

MODEL = "llama-2-70b"


def _row(tensor_parallel) -> pd.Series:
    return pd.Series({col.MODEL: MODEL, col.INPUT_LEN_MEAN: 1024.0, col.OUTPUT_LEN_MEAN: 1024.0,
                      col.MAX_NUM_SEQS: 64.0, col.KV_CAPACITY_TOKENS: math.nan, col.NUM_PROMPTS: 640.0,
                      col.BENCHMARK_MODE: col.BenchmarkMode.ONLINE, col.TENSOR_PARALLEL: tensor_parallel})


def test_the_default_kv_cache_of_a_tensor_parallel_configuration_is_its_ranks():
    """70B in 16 bits does not fit one 80 GB GPU (batch 1 at TP 1), but at TP 4 every rank holds a
    quarter of the weights and of the KV heads: the cap's 64 sequences fit."""
    catalog, hw = load_architectures(), load_hardware()["a100-80gb"]
    assert running_batch(_row(1), catalog, hw) == 1.0
    assert running_batch(_row(np.nan), catalog, hw) == 1.0
    assert running_batch(_row(4), catalog, hw) == 64.0


def test_the_targets_configurations_carry_its_tensor_parallel_size():
    target = Target(MODEL, 1024.0, 1024.0, tensor_parallel=4)
    assert target.at_caps(np.array([1.0, 8.0]))[col.TENSOR_PARALLEL].tolist() == [4, 4]
    rows = pd.DataFrame({col.TENSOR_PARALLEL: [2, 2]})
    curve = type("Curve", (), {"model": MODEL, "input_len_mean": 1024.0, "output_len_mean": 1024.0,
                               "kv_capacity_tokens": math.nan})()
    assert Target.of_curve(curve, rows).tensor_parallel == 2
    assert Target.of_curve(curve).tensor_parallel == 1
