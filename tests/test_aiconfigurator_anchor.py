"""slim.paper.aiconfigurator_anchor: the MAPE table on a hand-written frame, the quant modes the catalog's
weight formats map to, and the questions built from predictions.csv rows."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from slim import columns as col
from slim.paper.aiconfigurator_anchor import (
    DATASET,
    REQUEST_COLUMNS,
    aiconfigurator_quant_mode,
    anchor_accuracy,
    anchor_markdown,
    anchor_requests,
    expert_layouts,
)
from slim.specs.architecture import load_architectures
from slim.specs.formats import MXFP4, SIXTEEN_BIT, fp8_format, nvfp4_format


def _run(model: str, precision: str, measured: float, aic: float, zero_shot: float, shipped: float) -> dict:
    metrics = ("mean_tpot_ms", "mean_ttft_ms")
    return {col.MODEL: model, "precision": precision,
            **{f"measured_{metric}": measured for metric in metrics},
            **{f"aiconfigurator_{metric}": aic for metric in metrics},
            **{f"zero_shot_{metric}": zero_shot for metric in metrics},
            **{f"shipped_{metric}": shipped for metric in metrics}}


def test_mape_table_per_model_and_overall_on_the_runs_every_predictor_answers():
    frame = pd.DataFrame([_run("a", "fp8", 10.0, 11.0, 8.0, 10.0),     # 10%, 20%, 0%
                          _run("a", "fp8", 20.0, 10.0, 20.0, 30.0),    # 50%, 0%, 50%
                          _run("b", "16-bit", 10.0, 13.0, 9.0, 10.0),  # 30%, 10%, 0%
                          _run("b", "16-bit", 10.0, math.nan, 9.0, 10.0)])  # AIConfigurator gave none
    table = anchor_accuracy(frame).set_index(col.MODEL)
    assert list(table.index) == ["a", "b", "all"]
    assert table.loc["a", "runs"] == 2 and table.loc["b", "runs"] == 1 and table.loc["all", "runs"] == 3
    assert table.loc["a", "aiconfigurator_mean_tpot_ms_mape"] == pytest.approx(30.0)
    assert table.loc["a", "zero_shot_mean_ttft_ms_mape"] == pytest.approx(10.0)
    assert table.loc["a", "shipped_mean_tpot_ms_mape"] == pytest.approx(25.0)
    assert table.loc["b", "zero_shot_mean_tpot_ms_mape"] == pytest.approx(10.0)
    assert table.loc["all", "aiconfigurator_mean_ttft_ms_mape"] == pytest.approx(30.0)
    text = anchor_markdown(table.reset_index(), "release x, perf database vllm y", ["r1 (b): no estimate"])
    assert "| **all** |  | 3 | 30.0 |" in text and "unstated statistic" in text and "r1 (b): no estimate" in text


def test_quant_modes_follow_the_weight_format():
    assert aiconfigurator_quant_mode(SIXTEEN_BIT) == "bfloat16"
    assert aiconfigurator_quant_mode(fp8_format()) == "fp8"
    assert aiconfigurator_quant_mode(fp8_format((128, 128))) == "fp8_block"
    assert aiconfigurator_quant_mode(MXFP4) == "w4a16_mxfp4"
    with pytest.raises(ValueError, match="nvfp4"):
        aiconfigurator_quant_mode(nvfp4_format())


def test_questions_carry_the_served_precision_the_per_rank_batch_and_the_sweeps_expert_layout():
    runs = pd.DataFrame([
        {col.RUN_ID: "s[1]", col.MODEL: "minimax-m2.5", col.TENSOR_PARALLEL: 4, col.DATA_PARALLEL: 4,
         col.INPUT_LEN_NOMINAL: 1024, col.OUTPUT_LEN_NOMINAL: 1024, "in_flight": 32, "sim_status": "ok",
         "dataset": DATASET},
        {col.RUN_ID: "s[0]", col.MODEL: "llama-3.1-70b-fp8", col.TENSOR_PARALLEL: 2, col.DATA_PARALLEL: 1,
         col.INPUT_LEN_NOMINAL: 1024, col.OUTPUT_LEN_NOMINAL: 8192, "in_flight": 8, "sim_status": "ok",
         "dataset": DATASET},
        {col.RUN_ID: "s[2]", col.MODEL: "minimax-m2.5", col.TENSOR_PARALLEL: 4, col.DATA_PARALLEL: 1,
         col.INPUT_LEN_NOMINAL: 1024, col.OUTPUT_LEN_NOMINAL: 1024, "in_flight": 4, "sim_status": "ok",
         "dataset": DATASET},
        {col.RUN_ID: "o[0]", col.MODEL: "qwen3-32b", col.TENSOR_PARALLEL: 2, col.DATA_PARALLEL: 1,
         col.INPUT_LEN_NOMINAL: 1024, col.OUTPUT_LEN_NOMINAL: 128, "in_flight": 8, "sim_status": "ok",
         "dataset": "other"}])
    layouts = pd.DataFrame([{col.MODEL: "minimax-m2.5", col.TENSOR_PARALLEL: 4, col.DATA_PARALLEL: 4,
                             col.INPUT_LEN_NOMINAL: 1024, col.OUTPUT_LEN_NOMINAL: 1024, "in_flight": 32,
                             col.EXPERT_PARALLEL: 16.0, col.EXPERT_TENSOR_PARALLEL: 1.0}])
    questions = anchor_requests(runs, load_architectures(), layouts).set_index(col.RUN_ID)
    assert list(questions.index) == ["s[0]", "s[1]", "s[2]"]
    llama, minimax, unlaid = questions.loc["s[0]"], questions.loc["s[1]"], questions.loc["s[2]"]
    assert (llama["model_path"], llama["precision"], llama["gemm_quant_mode"], llama["moe_quant_mode"]) == (
        "meta-llama/Meta-Llama-3.1-70B", "fp8", "fp8", "")
    assert llama["kvcache_quant_mode"] == "bfloat16" and llama["request_error"] == ""
    assert (minimax["batch_size"], minimax["moe_ep_size"], minimax["moe_tp_size"]) == (8, 16, 1)
    assert minimax["gemm_quant_mode"] == minimax["moe_quant_mode"] == "fp8_block"
    assert "expert layout" in unlaid["request_error"]


def test_no_run_of_the_sweep_gives_no_question_rather_than_an_error():
    """The bench script says how to build predictions.csv where it has no run of the sweep."""
    runs = pd.DataFrame([{col.RUN_ID: "o[0]", col.MODEL: "qwen3-32b", col.TENSOR_PARALLEL: 2, col.DATA_PARALLEL: 1,
                          col.INPUT_LEN_NOMINAL: 1024, col.OUTPUT_LEN_NOMINAL: 128, "in_flight": 8,
                          "sim_status": "ok", "dataset": "other"}])
    questions = anchor_requests(runs, load_architectures(), expert_layouts([]))
    assert questions.empty and set(REQUEST_COLUMNS) <= set(questions.columns)
