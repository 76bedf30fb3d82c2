"""The measured characterisation (paper Section V, Figs. 1 and 2): which runs Fig. 1 shows per
dataset, and the length sweeps Fig. 2 finds in a per-run table (columns of `slim.columns`).
The figures themselves are drawn by `slim.paper.figures.characterisation`."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from slim import columns as col
from slim.errors import PlotInputError

FIG1_STATUSES = ("ok", "preempted")
PREEMPTED = "preempted"
"""Run status set by ingest when vLLM preempted requests: the KV cache capacity was exceeded."""

FIG1_REQUIRED_COLUMNS = (col.MODEL, col.MAX_NUM_SEQS, col.MEAN_BATCH_SIZE, col.TOTAL_TOKEN_THROUGHPUT,
                         col.E2E_LATENCY_S, col.STATUS)
FIG2_REQUIRED_COLUMNS = (col.MODEL, col.MAX_NUM_SEQS, col.MEAN_BATCH_SIZE, col.TOTAL_TOKEN_THROUGHPUT,
                         col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL)

# Swept length -> (the length held fixed, short label used in titles and legends).
SWEEPS = {
    col.OUTPUT_LEN_NOMINAL: (col.INPUT_LEN_NOMINAL, "OL"),
    col.INPUT_LEN_NOMINAL: (col.OUTPUT_LEN_NOMINAL, "IL"),
}


# --- Fig. 1 -------------------------------------------------------------------------

def batch_scaling_runs(runs: pd.DataFrame, output_len: float | None = None) -> pd.DataFrame:
    """The runs Fig. 1 shows: status ``ok`` or ``preempted`` with measured metrics.

    A dataset with one workload per model (ShareGPT traces) is shown whole
    (``output_len=None``). A dataset with length sweeps is shown at one nominal
    output length: the runs at ``output_len`` and, per model, at the most common
    nominal input length among them (ties: the smallest), so each model gives one
    curve. Raises `PlotInputError` if nothing is left.
    """
    col.require_columns(runs, FIG1_REQUIRED_COLUMNS, "the runs table", PlotInputError)
    shown = runs[runs[col.STATUS].isin(FIG1_STATUSES)].dropna(
        subset=[col.MEAN_BATCH_SIZE, col.TOTAL_TOKEN_THROUGHPUT, col.E2E_LATENCY_S])
    if output_len is not None:
        col.require_columns(shown, (col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL), "the runs table",
                            PlotInputError)
        shown = shown[shown[col.OUTPUT_LEN_NOMINAL] == output_len]
        modal_input = shown.groupby(col.MODEL)[col.INPUT_LEN_NOMINAL].transform(_modal_value)
        shown = shown[shown[col.INPUT_LEN_NOMINAL] == modal_input]
    if shown.empty:
        where = "" if output_len is None else f" at output length {output_len:g}"
        raise PlotInputError(f"Fig. 1: no run with status in {FIG1_STATUSES} and measured metrics{where}")
    return shown


# --- Fig. 2 -------------------------------------------------------------------------

@dataclass(frozen=True)
class SweepPanel:
    """One model's sweep of one nominal length, the other held at `fixed_value`."""

    model: str
    swept_column: str          # col.OUTPUT_LEN_NOMINAL or col.INPUT_LEN_NOMINAL
    fixed_column: str
    fixed_value: float

    @property
    def title(self) -> str:
        swept_label = SWEEPS[self.swept_column][1]
        fixed_label = SWEEPS[self.fixed_column][1]
        return f"{self.model}: {swept_label} sweep ({fixed_label} {self.fixed_value:g})"


def sweep_panels(runs: pd.DataFrame) -> list[SweepPanel]:
    """The length sweeps in a per-run table: per model (sorted by name), an output-length
    panel and/or an input-length panel.

    A model gets a panel for each nominal length that takes more than one value
    among the runs at the other length's most common value (ties: the smallest),
    so a full IL x OL grid yields both panels and a one-dimensional sweep yields
    one. A model with no sweep at all gets a single output-length panel (one line).
    """
    col.require_columns(runs, FIG2_REQUIRED_COLUMNS, "the runs table", PlotInputError)
    panels = []
    for model in sorted(runs[col.MODEL].unique()):
        rows = runs[runs[col.MODEL] == model]
        model_panels = []
        for swept, (fixed, _) in SWEEPS.items():
            fixed_value = _modal_value(rows[fixed])
            if rows.loc[rows[fixed] == fixed_value, swept].nunique() > 1:
                model_panels.append(SweepPanel(model, swept, fixed, fixed_value))
        if not model_panels:
            model_panels.append(SweepPanel(model, col.OUTPUT_LEN_NOMINAL, col.INPUT_LEN_NOMINAL,
                                           _modal_value(rows[col.INPUT_LEN_NOMINAL])))
        panels += model_panels
    return panels


def _modal_value(values: pd.Series) -> float:
    """Most common value; the smallest among ties."""
    counts = values.value_counts()
    return float(min(counts.index[counts == counts.max()]))
