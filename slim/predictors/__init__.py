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
    RegisteredPredictor(_SLIM, predicts_training_rows=True, conformal=True, fit_key="full", option=SLIM_OPTION),
    RegisteredPredictor(SlimPredictor(SLIM_WITHOUT_KV_SCAN, NO_KV_SCAN), fit_key="no_kv_scan"),
    RegisteredPredictor(SlimPredictor(SLIM_WITHOUT_DENSE_DECODE, NO_DENSE_DECODE), fit_key="no_dense_decode"),
    RegisteredPredictor(LLMVisorPredictor(LLMVISOR)),
    RegisteredPredictor(ImaiPredictor(IMAI)),
    RegisteredPredictor(_SIM, needs_schedules=True, conformal=True, fit_key="sim", option=SIM_OPTION, simulated=True),
    RegisteredPredictor(SlimAtSimBatch(SLIM_PREDICTED_BATCH, _SLIM, _SIM), needs_schedules=True),
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


def advise_predictors() -> dict[str, RegisteredPredictor]:
    """The predictors `slim advise --predictor` offers, by their option name."""
    return {entry.option: entry for entry in REGISTRY if entry.option is not None}


def tune_predictors() -> dict[str, RegisteredPredictor]:
    """The priors `slim tune --predictor` offers, by their option name (registry order): the offered
    predictors that have a prior."""
    return {entry.option: entry for entry in REGISTRY
            if entry.option is not None and hasattr(entry.predictor, "prior")}


__all__ = ["REGISTRY", "FittedPredictor", "Interval", "Prediction", "Predictor", "RegisteredPredictor",
           "TrainingRuns", "register", "registered", "advise_predictors", "tune_predictors"]
