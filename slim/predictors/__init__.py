"""Every predictor of the project, named once in `REGISTRY`; everything that uses predictors loops over it.

The contract they share is `slim.predictors.contract`: fitted on a frame of runs (`TrainingRuns`),
a predictor predicts any frame of configurations with its interval and its range over the
training-equivalent fits (`Prediction`). The held-out evaluation, Tables III and IV, Figs. 9 and 10,
and `slim advise --predictor` take their predictors from here. Adding a predictor is one module
with a `Predictor` and one `RegisteredPredictor` line here (or a `register` call).

Importing this package is light: each predictor imports its fitting code (SciPy's optimiser,
scikit-learn, the simulator) only when it is fitted.
"""

from __future__ import annotations

from slim.defaults import SIM_OPTION, SLIM_OPTION
from slim.model.equations import NO_DENSE_DECODE, NO_KV_SCAN
from slim.predictors.contract import (
    FittedPredictor,
    Interval,
    Prediction,
    Predictor,
    RegisteredPredictor,
    TrainingRuns,
)
from slim.predictors.imai import ImaiPredictor
from slim.predictors.llmvisor import LLMVisorPredictor
from slim.predictors.simulator import SimPredictor, SlimAtSimBatch
from slim.predictors.slim_model import SlimPredictor

SLIM = "SLIM"
SLIM_WITHOUT_KV_SCAN = "SLIM w/o KV scan"
SLIM_WITHOUT_DENSE_DECODE = "SLIM w/o dense decode"
LLMVISOR = "LLMVisor-Agg"
IMAI = "IMAI OOD-LR"
SIM = "SIM"
SLIM_PREDICTED_BATCH = "SLIM (predicted batch)"

_SLIM = SlimPredictor(SLIM)
_SIM = SimPredictor(SIM)

REGISTRY: list[RegisteredPredictor] = [
    RegisteredPredictor(_SLIM, in_table3=True, in_table4=True, predicts_training_rows=True, conformal=True,
                        fit_key="full", advise=SLIM_OPTION, bca="curve",
                        tune=SLIM_OPTION),
    RegisteredPredictor(SlimPredictor(SLIM_WITHOUT_KV_SCAN, NO_KV_SCAN), in_table4=True, fit_key="no_kv_scan"),
    RegisteredPredictor(SlimPredictor(SLIM_WITHOUT_DENSE_DECODE, NO_DENSE_DECODE), in_table4=True,
                        fit_key="no_dense_decode"),
    RegisteredPredictor(LLMVisorPredictor(LLMVISOR), in_table3=True),
    RegisteredPredictor(ImaiPredictor(IMAI), in_table3=True),
    RegisteredPredictor(_SIM, in_table3=True, needs_schedules=True, conformal=True, fit_key="sim",
                        advise=SIM_OPTION, bca="simulated", tune=SIM_OPTION),
    RegisteredPredictor(SlimAtSimBatch(SLIM_PREDICTED_BATCH, _SLIM, _SIM), in_table3=True, needs_schedules=True),
]
"""Every predictor, in the order of the evaluation's rows and of the tables' columns."""


def register(entry: RegisteredPredictor) -> None:
    """Add a predictor to the registry (and so to the held-out evaluation and the tables it asks for)."""
    if any(existing.name == entry.name for existing in REGISTRY):
        raise ValueError(f"a predictor named '{entry.name}' is registered already")
    REGISTRY.append(entry)


def registered(name: str) -> RegisteredPredictor:
    """The registry entry named `name`; `KeyError` naming the known ones otherwise."""
    for entry in REGISTRY:
        if entry.name == name:
            return entry
    raise KeyError(f"no predictor named '{name}'; registered: {', '.join(entry.name for entry in REGISTRY)}")


def table3_labels(present: set[str] | None = None) -> tuple[str, ...]:
    """Table III's predictors, in registry order: every one that runs on every dataset, and those that
    need the simulator's schedules where they were evaluated (`present`; None: all)."""
    return tuple(entry.name for entry in REGISTRY if entry.in_table3
                 and (not entry.needs_schedules or present is None or entry.name in present))


def table4_labels() -> tuple[str, ...]:
    """Table IV's predictors (SLIM and its ablations), in registry order."""
    return tuple(entry.name for entry in REGISTRY if entry.in_table4)


def ablation_labels() -> tuple[str, ...]:
    """Table IV's predictors other than SLIM: the ablations it compares SLIM with."""
    return tuple(label for label in table4_labels() if label != SLIM)


def advise_predictors() -> dict[str, RegisteredPredictor]:
    """The predictors `slim advise --predictor` offers, by their option name."""
    return {entry.advise: entry for entry in REGISTRY if entry.advise is not None}


def tune_predictors() -> dict[str, RegisteredPredictor]:
    """The priors `slim tune --predictor` offers, by their option name (registry order)."""
    return {entry.tune: entry for entry in REGISTRY if entry.tune is not None}


__all__ = ["REGISTRY", "FittedPredictor", "Interval", "Prediction", "Predictor", "RegisteredPredictor",
           "TrainingRuns", "register", "registered", "table3_labels", "table4_labels", "advise_predictors",
           "tune_predictors"]
