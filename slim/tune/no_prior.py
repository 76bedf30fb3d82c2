"""What a tuning session believes of a model no prior describes (an ``unsupported:`` entry of the
models file, a checkpoint whose feature or quantisation slim cannot size): nothing is predicted, and
only the measured caps of its curve bound the caps between them, in the order a plain bisection
assumes.

A bisection over the caps for the largest within every SLO assumes two things: latency grows with
the cap (the certificate's own rule, `slim.decision.certificate`), and throughput does not fall as
the cap grows, so that the largest cap within the SLOs is the one to serve. With no prior those
assumptions are all a session has, so it holds an unmeasured cap's throughput and latencies between
those of the nearest measured caps of the same curve: at most the next larger measured cap's, and
(throughput) at least the next smaller one's. Where no measured cap lies on a side the interval
stays open (0 or inf). The goodput is not bounded: it can fall as the cap grows.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.decision.candidates import GOODPUT, THROUGHPUT
from slim.specs.slo import IN_BATCH_E2E
from slim.tune.server_sizes import data_parallel_sizes

CURVE_COLUMNS = (col.MODEL, col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL, col.TENSOR_PARALLEL, col.BENCHMARK_MODE)
"""What one curve over the caps is: a model at its lengths, tensor-parallel size and benchmark mode (and
its data-parallel size, `slim.tune.server_sizes.data_parallel_sizes`, where the table records one)."""


def unpredicted_quantities(metric_names: Sequence[str], goodput: bool) -> list[str]:
    """The quantities a session judges (throughput, the in-batch E2E, each SLO metric, the goodput
    where it is the objective): those a prior predicts, here predicted by none."""
    names = [THROUGHPUT, IN_BATCH_E2E, *metric_names]
    return list(dict.fromkeys(names + ([GOODPUT] if goodput else [])))


def bisection_order_bounds(candidates: pd.DataFrame, quantity: str, measured: np.ndarray, values: np.ndarray,
                           rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate, the ``(low, high)`` bounds the measured caps of its curve give an unmeasured
    candidate among `rows` (module docstring); ``(0, inf)`` elsewhere and for the goodput. `measured`
    and `values` are the quantity's measured mask and values, one per candidate."""
    n = len(candidates)
    low, high = np.zeros(n), np.full(n, np.inf)
    if quantity == GOODPUT or not rows.any():
        return low, high
    caps = candidates[col.MAX_NUM_SEQS].to_numpy(dtype=float)
    curves = candidates[list(CURVE_COLUMNS)].fillna({col.TENSOR_PARALLEL: 1}).astype(str).agg("|".join, axis=1)
    # A data-parallel layout's caps are a curve of their own beside the same tensor-parallel size's.
    curve_of = curves.to_numpy() + "|DP " + data_parallel_sizes(candidates).astype(str)
    for i in np.flatnonzero(rows & ~measured):
        same = measured & (curve_of == curve_of[i])
        above = same & (caps > caps[i])
        if above.any():
            high[i] = float(np.min(values[above]))
        below = same & (caps < caps[i])
        if quantity == THROUGHPUT and below.any():
            # Run-to-run noise can invert two measured neighbours: the bound never crosses itself.
            low[i] = min(float(np.max(values[below])), high[i])
    return low, high
