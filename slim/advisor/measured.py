"""Measured throughput curves (one model, IL and OL over the profiled ``--max-num-seqs``) read
from a table of runs, and full-profile BCA on them: Eq. 13 on the measured points."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.bca import BcaResult, bca_from_measured, slo_from_curve
from slim.errors import AdvisorError
from slim.gpu.kv_memory import VLLM_BLOCK_SIZE_TOKENS

CURVE_COLUMNS = (col.MODEL, col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL, col.INPUT_LEN_MEAN,
                 col.OUTPUT_LEN_MEAN, col.MAX_NUM_SEQS, col.TOTAL_TOKEN_THROUGHPUT, col.E2E_LATENCY_S,
                 col.MEAN_BATCH_SIZE, col.DURATION_S, col.KV_CAPACITY_TOKENS, col.NUM_GPU_BLOCKS,
                 col.BLOCK_SIZE)
"""Columns of the runs table a measured curve is read from."""


@dataclass(frozen=True)
class MeasuredCurve:
    """One measured curve (runs sharing `columns.WORKLOAD_KEYS`), sorted by ``max_num_seqs``."""

    model: str
    input_len_nominal: float
    output_len_nominal: float
    input_len_mean: float
    output_len_mean: float
    max_num_seqs: np.ndarray
    throughput_per_s: np.ndarray
    e2e_latency_s: np.ndarray
    kv_capacity_tokens: float      # largest over the curve's server starts; NaN if no run recorded it
    num_gpu_blocks: np.ndarray     # per run: vLLM's KV reservation in blocks (NaN where not recorded)
    block_size: int                # vLLM's default (16) where no run recorded its cache config

    @property
    def label(self) -> str:
        return f"{self.model} IL {self.input_len_nominal:g} OL {self.output_len_nominal:g}"

    def slo_s(self, multiplier: float, reference_max_num_seqs: float | None = None) -> float:
        """``multiplier x E2E_meas(reference)``; reference default: smallest profiled point."""
        return slo_from_curve(self.max_num_seqs, self.e2e_latency_s, multiplier, reference_max_num_seqs)

    def reservation_blocks_at(self, batch_cap: float) -> float:
        """vLLM's KV reservation (blocks) of the profiled run nearest to `batch_cap` in ``log B``
        (NaN when that run recorded no cache config)."""
        nearest = int(np.argmin(np.abs(np.log(self.max_num_seqs) - np.log(batch_cap))))
        return float(self.num_gpu_blocks[nearest])


def curve_from_rows(rows: pd.DataFrame) -> MeasuredCurve:
    """The curve of the runs of one (model, IL, OL); raises `AdvisorError` naming missing columns."""
    col.require_columns(rows, CURVE_COLUMNS, "runs table", AdvisorError, fix="BCA curves need them")
    rows = rows.sort_values(col.MAX_NUM_SEQS, kind="stable")
    first = rows.iloc[0]
    repeated = rows[col.MAX_NUM_SEQS][rows[col.MAX_NUM_SEQS].duplicated()].unique()
    if len(repeated):
        hint = (f" (tensor_parallel {sorted(rows[col.TENSOR_PARALLEL].dropna().unique().tolist())}: select one, "
                "e.g. the BCA config's `rows: {tensor_parallel: [1]}`)"
                if col.TENSOR_PARALLEL in rows and rows[col.TENSOR_PARALLEL].nunique() > 1 else "")
        raise AdvisorError(f"curve {first[col.MODEL]} IL {first[col.INPUT_LEN_NOMINAL]:g} OL "
                           f"{first[col.OUTPUT_LEN_NOMINAL]:g} has several runs at max_num_seqs "
                           f"{sorted(float(b) for b in repeated)}{hint}; a measured curve has one run per cap")
    return MeasuredCurve(
        model=str(first[col.MODEL]),
        input_len_nominal=float(first[col.INPUT_LEN_NOMINAL]),
        output_len_nominal=float(first[col.OUTPUT_LEN_NOMINAL]),
        input_len_mean=float(rows[col.INPUT_LEN_MEAN].mean()),
        output_len_mean=float(rows[col.OUTPUT_LEN_MEAN].mean()),
        max_num_seqs=rows[col.MAX_NUM_SEQS].to_numpy(dtype=float),
        throughput_per_s=rows[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float),
        e2e_latency_s=rows[col.E2E_LATENCY_S].to_numpy(dtype=float),
        kv_capacity_tokens=float(rows[col.KV_CAPACITY_TOKENS].max()),
        num_gpu_blocks=rows[col.NUM_GPU_BLOCKS].to_numpy(dtype=float),
        block_size=int(rows[col.BLOCK_SIZE].dropna().iloc[0]) if rows[col.BLOCK_SIZE].notna().any()
        else VLLM_BLOCK_SIZE_TOKENS,
    )


def measured_curves(frame: pd.DataFrame) -> list[MeasuredCurve]:
    """Every measured curve of a cleaned table, in (model, IL, OL) order."""
    if frame.empty:
        raise AdvisorError("the cleaned table has no rows, so no measured curve")
    return [curve_from_rows(rows) for _, rows in frame.groupby(list(col.WORKLOAD_KEYS), sort=True)]


def full_profile_bca(curve: MeasuredCurve, slo_s: float, epsilon: float) -> BcaResult:
    """Eq. 13 on the measured curve, candidates = its profiled ``--max-num-seqs``."""
    return bca_from_measured(curve.max_num_seqs, curve.throughput_per_s, curve.e2e_latency_s,
                             epsilon=epsilon, slo_s=slo_s)
