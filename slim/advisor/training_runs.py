"""The runs an advice is fitted on (`select_training_runs`: the usable runs of a trace folder,
`slim.traces.usable`, less those left out) and the fit's error on the target's runs left out of
training (`held_out_check`)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Sequence

import pandas as pd

from slim import columns as col
from slim.errors import TraceFormatError
from slim.model.metrics import mape_pct
from slim.predictors import FittedPredictor
from slim.specs.architecture import Architecture, ArchitectureCatalog


@dataclass(frozen=True)
class HeldOutCheck:
    """SLIM's error on the target model's usable runs that were left out of training."""

    model: str
    n_runs: int
    throughput_mape_pct: float
    e2e_mape_pct: float


def select_training_runs(usable: pd.DataFrame, catalog: ArchitectureCatalog, train_models: Sequence[str] | None,
                         exclude_runs: Sequence[str] = ()) -> pd.DataFrame:
    """The usable runs SLIM is fitted on: those of `train_models` (names or aliases; None: every
    model), less the runs whose directory (`columns.RUN_ID`) matches a glob of `exclude_runs`.

    Raises `TraceFormatError` naming a model without usable runs, a pattern that matches no run,
    or a selection that leaves nothing to fit.
    """
    keep = pd.Series(True, index=usable.index)
    if train_models:
        wanted = [catalog[name].name for name in train_models]
        for name, canonical in zip(train_models, wanted):
            if not (usable[col.MODEL] == canonical).any():
                raise TraceFormatError(f"--train-models: '{name}' has no usable run under the traces "
                                       f"(models with usable runs: {', '.join(sorted(usable[col.MODEL].unique()))})")
        keep &= usable[col.MODEL].isin(wanted)
    for pattern in exclude_runs:
        matches = usable[col.RUN_ID].map(lambda run, pattern=pattern: fnmatch.fnmatchcase(str(run), pattern))
        if not matches.any():
            raise TraceFormatError(f"--exclude-runs '{pattern}' matches no usable run (runs are named by their "
                                   f"directory under the traces, e.g. '{usable[col.RUN_ID].iloc[0]}')")
        keep &= ~matches
    if not keep.any():
        raise TraceFormatError("--train-models and --exclude-runs leave no run to fit SLIM on")
    return usable[keep]


def held_out_check(usable: pd.DataFrame, train: pd.DataFrame, arch: Architecture,
                   fitted: FittedPredictor) -> HeldOutCheck | None:
    """The fitted predictor's MAPE (SLIM: Eqs. 5-12 at the fitted parameters) on the usable runs of
    `arch` that `train` lacks: how well the fit transfers to the target; None if every run of it was
    trained on."""
    left_out = usable[(usable[col.MODEL] == arch.name) & ~usable.index.isin(train.index)]
    if left_out.empty:
        return None
    prediction = fitted.predict(left_out)
    throughput, e2e_s = prediction.throughput_per_s, prediction.e2e_latency_s
    return HeldOutCheck(arch.name, len(left_out),
                        mape_pct(throughput, left_out[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float)),
                        mape_pct(e2e_s, left_out[col.E2E_LATENCY_S].to_numpy(dtype=float)))
