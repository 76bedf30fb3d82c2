"""NVIDIA's AIConfigurator as an anchor beside the simulator on the NVIDIA vLLM sweeps on H100 SXM
(dataset `DATASET` of target ``beyond_paper``): what it is asked per run, and the MAPE table of its
TTFT and TPOT beside the simulator's zero-shot and shipped-constants predictions on the same runs.

The project never imports AIConfigurator: `workflow/bench/aiconfigurator_anchor.py` writes the
questions built here (`anchor_requests`) to a CSV, runs AIConfigurator's estimate in its own Python
(`workflow/bench/aiconfigurator_driver.py`) and reads its answers back.

One question per usable run of ``results/beyond_paper/predictions.csv`` (AIConfigurator's ``agg``
estimate, one aggregated vLLM server):

- the model's Hugging Face id from the catalog entry the run was filed under (`AICONFIGURATOR_MODEL_PATHS`
  where AIConfigurator bundles the same config under another id), and its quant modes from that
  entry's weight formats (`aiconfigurator_quant_mode`): the dense layers' for the GEMMs, the routed
  experts' for the MoE layers, the entry's KV-cache dtype for the cache (vLLM's ``auto``: the
  checkpoint's KV scheme, else 16 bits);
- the run's lengths, tensor-parallel size, attention data-parallel size and requests per
  data-parallel rank (``in_flight / DP``);
- the experts' layout (expert-parallel and expert tensor-parallel sizes), which the predictions table
  does not carry, from the sweep's own row of the same (model, TP, DP, lengths, requests in flight)
  (`expert_layouts`).

The sweep's TTFT and TPOT are central values of a statistic the source does not state (mean or
median); both predictors are compared with them as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from slim import columns as col
from slim.markdown import markdown_table
from slim.specs.architecture import Architecture, ArchitectureCatalog
from slim.specs.formats import TensorFormat
from slim.specs.served_precision import weight_precision

DATASET = "aiconfigurator-h100"
"""The dataset of predictions.csv that AIConfigurator is asked about (its system `SYSTEM`)."""
SYSTEM = "h100_sxm"
BACKEND = "vllm"
METRICS = ("mean_tpot_ms", "mean_ttft_ms")
"""The metrics AIConfigurator estimates, in vLLM's names."""
SOURCES = {"aiconfigurator": "AIConfigurator", "zero_shot": "simulator zero-shot",
           "shipped": "simulator shipped constants"}
"""Column prefix of each predictor in the joined frame -> its label in the table."""
AICONFIGURATOR_MODEL_PATHS = {"meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B"}
"""Hugging Face ids whose config.json AIConfigurator bundles (it runs offline) under the repository's
earlier name: the same checkpoint."""
JOIN_KEY = (col.MODEL, col.TENSOR_PARALLEL, col.DATA_PARALLEL, col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL,
            "in_flight")
"""What a run of predictions.csv and a row of the sweep share: the experts' layout is joined on it."""
REQUEST_COLUMNS = ("run_id", "model_path", "isl", "osl", "tp_size", "attention_dp_size", "batch_size",
                   "moe_tp_size", "moe_ep_size", "gemm_quant_mode", "moe_quant_mode", "kvcache_quant_mode")
"""The questions' CSV, as the driver reads it (sizes of a dense model's experts empty)."""


def aiconfigurator_quant_mode(fmt: TensorFormat) -> str:
    """AIConfigurator's quant mode for weights stored in `fmt` as vLLM runs them on H100: 16-bit as
    ``bfloat16``, fp8 with a scale per tensor as ``fp8``, per 128 x 128 block as ``fp8_block``, and
    MXFP4 as ``w4a16_mxfp4`` (Hopper has no fp4 tensor cores: the 4-bit weights meet 16-bit
    activations). Raises ValueError for another format."""
    if fmt.name == "bf16":
        return "bfloat16"
    if fmt.name.startswith("fp8 block"):
        return "fp8_block"
    if fmt.name.startswith("fp8"):
        return "fp8"
    if fmt.name == "mxfp4":
        return "w4a16_mxfp4"
    raise ValueError(f"no AIConfigurator quant mode for weight format '{fmt.name}'")


def kv_cache_quant_mode(arch: Architecture) -> str:
    """AIConfigurator's KV-cache mode for the entry's cache: fp8 where the entry (or, at vLLM's
    ``auto``, its checkpoint) stores it in fp8, else ``bfloat16``."""
    dtype = (arch.formats.kv_cache_scheme or "bfloat16") if arch.kv_cache_dtype == "auto" else arch.kv_cache_dtype
    return "fp8" if dtype.startswith("fp8") else "bfloat16"


def expert_layouts(sweep_rows: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Per `JOIN_KEY` of the sweep's readable rows, its expert-parallel and expert tensor-parallel sizes
    (NaN: a dense model); a key whose rows record different layouts is left out."""
    frame = pd.DataFrame([row for row in sweep_rows if row.get(col.MODEL) and row.get(col.STATUS) == "ok"])
    if frame.empty:
        return pd.DataFrame(columns=[*JOIN_KEY, col.EXPERT_PARALLEL, col.EXPERT_TENSOR_PARALLEL])
    frame["in_flight"] = frame[col.MAX_NUM_SEQS]
    frame = frame[[*JOIN_KEY, col.EXPERT_PARALLEL, col.EXPERT_TENSOR_PARALLEL]].astype({key: "int64" for key in
                                                                                         JOIN_KEY[1:]})
    frame = frame.drop_duplicates()
    return frame[~frame.duplicated(list(JOIN_KEY), keep=False)].reset_index(drop=True)


def _size(value: object) -> int | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)


def anchor_requests(predictions: pd.DataFrame, catalog: ArchitectureCatalog, layouts: pd.DataFrame) -> pd.DataFrame:
    """One question per run of `DATASET` the simulator started (module docstring), sorted by run:
    `REQUEST_COLUMNS`, the run's facts and its precision, and ``request_error`` (empty, or why the run
    cannot be asked: no catalog entry, a format AIConfigurator has no mode for, requests that do not
    split evenly over the data-parallel ranks, a mixture of experts whose layout the sweep lacks)."""
    runs = predictions[(predictions["dataset"] == DATASET) & (predictions["sim_status"] == "ok")]
    runs = runs.merge(layouts, on=list(JOIN_KEY), how="left", validate="many_to_one")
    rows = []
    for _, run in runs.sort_values(col.RUN_ID).iterrows():
        row: dict[str, Any] = {col.RUN_ID: run[col.RUN_ID], **{key: run[key] for key in JOIN_KEY},
                               "precision": "", "model_path": "", "isl": int(run[col.INPUT_LEN_NOMINAL]),
                               "osl": int(run[col.OUTPUT_LEN_NOMINAL]), "tp_size": int(run[col.TENSOR_PARALLEL]),
                               "attention_dp_size": int(run[col.DATA_PARALLEL]), "batch_size": None,
                               "moe_tp_size": None, "moe_ep_size": None, "gemm_quant_mode": "",
                               "moe_quant_mode": "", "kvcache_quant_mode": "", "request_error": ""}
        problems = []
        if run[col.MODEL] not in catalog:
            problems.append(f"model '{run[col.MODEL]}' is not in the catalog")
        else:
            arch = catalog.architecture(run[col.MODEL])
            row["precision"] = weight_precision(arch)
            row["model_path"] = AICONFIGURATOR_MODEL_PATHS.get(arch.hf_id or "", arch.hf_id or "")
            try:
                row["gemm_quant_mode"] = aiconfigurator_quant_mode(arch.formats.dense)
                if arch.moe is not None:
                    row["moe_quant_mode"] = aiconfigurator_quant_mode(arch.formats.routed_experts)
            except ValueError as error:
                problems.append(str(error))
            row["kvcache_quant_mode"] = kv_cache_quant_mode(arch)
            if arch.moe is not None:
                row["moe_tp_size"] = _size(run[col.EXPERT_TENSOR_PARALLEL])
                row["moe_ep_size"] = _size(run[col.EXPERT_PARALLEL])
                if row["moe_tp_size"] is None or row["moe_ep_size"] is None:
                    problems.append("the sweep records no expert layout for this run")
        if run["in_flight"] % run[col.DATA_PARALLEL]:
            problems.append(f"{run['in_flight']} requests do not split over {run[col.DATA_PARALLEL]} ranks")
        else:
            row["batch_size"] = int(run["in_flight"] // run[col.DATA_PARALLEL])
        row["request_error"] = "; ".join(problems)
        rows.append(row)
    columns = [col.RUN_ID, *JOIN_KEY, "precision", *REQUEST_COLUMNS[1:], "request_error"]
    return pd.DataFrame(rows, columns=columns).astype({"batch_size": "Int64", "moe_tp_size": "Int64",
                                                       "moe_ep_size": "Int64"})


def anchor_accuracy(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (model, precision), then over all runs (model ``all``): the runs on which every predictor of
    `SOURCES` and the measurement have both metrics, and each predictor's MAPE (%) per metric on them
    (``<source>_<metric>_mape``). `frame` has ``measured_<metric>`` and ``<source>_<metric>``."""
    columns = [f"{prefix}_{metric}" for prefix in ("measured", *SOURCES) for metric in METRICS]
    complete = frame[np.isfinite(frame[columns].to_numpy(dtype=float)).all(axis=1)]
    groups = [(model, precision, group) for (model, precision), group
              in complete.groupby([col.MODEL, "precision"], sort=True)] + [("all", "", complete)]
    rows = []
    for model, precision, group in groups:
        row: dict[str, Any] = {col.MODEL: model, "precision": precision, "runs": len(group)}
        for metric in METRICS:
            measured = group[f"measured_{metric}"].to_numpy(dtype=float)
            for source in SOURCES:
                predicted = group[f"{source}_{metric}"].to_numpy(dtype=float)
                row[f"{source}_{metric}_mape"] = (float(np.mean(100.0 * np.abs(predicted - measured) / measured))
                                                  if len(group) else math.nan)
        rows.append(row)
    return pd.DataFrame(rows)


def anchor_markdown(accuracy: pd.DataFrame, versions: str, unanswered: Iterable[str] = ()) -> str:
    """The generated section: the MAPE table of `anchor_accuracy`, what AIConfigurator was asked
    (`versions`: its release and perf database) and the runs it gave no estimate for."""
    def cell(value: float) -> str:
        return "n/a" if math.isnan(value) else f"{value:.1f}"

    header = ["model (as served)", "precision", "runs", *(f"{metric} MAPE {label} %" for metric in ("TPOT", "TTFT")
                                                          for label in SOURCES.values())]
    table = [[f"**{row[col.MODEL]}**" if row[col.MODEL] == "all" else row[col.MODEL], row["precision"],
              str(row["runs"]), *(cell(row[f"{source}_{metric}_mape"]) for metric in METRICS for source in SOURCES)]
             for _, row in accuracy.iterrows()]
    missing = "".join(f"\n- {line}" for line in unanswered)
    return ("### AIConfigurator beside the simulator, NVIDIA's H100 SXM sweeps\n\n"
            f"AIConfigurator ({versions}) asked for each run's TTFT and TPOT (`agg` estimate, system "
            f"`{SYSTEM}`, backend `{BACKEND}`) at the run's model as served (quant modes from its catalog entry), "
            "lengths, tensor-parallel size, attention data-parallel size, requests per data-parallel rank and "
            "the sweep's expert layout; the simulator's zero-shot and shipped-constants predictions of the same "
            "runs from results/beyond_paper/predictions.csv. Only runs all three predict are counted. The "
            "sweep's TTFT and TPOT are central values of an unstated statistic (mean or median), compared "
            "with each prediction as they are. Method: `slim.paper.aiconfigurator_anchor`.\n\n"
            + "\n".join(markdown_table(header, table)) + "\n"
            + (f"\nRuns AIConfigurator gave no estimate for:{missing}\n" if missing else ""))
