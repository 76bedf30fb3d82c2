"""The predictor contract: fitted on a frame of runs, a predictor predicts any frame of configurations.

Every predictor of the project (SLIM and its ablations, SIM, SLIM at SIM's batch, LLMVisor-Agg,
IMAI OOD-LR) implements it, and `slim.predictors.REGISTRY` names each once:

- **Fitting** (`Predictor.fit`): from `TrainingRuns` (a frame of runs in the columns of
  `slim.columns`, with the catalogs, and SIM's cached schedules where there are some) to a
  `FittedPredictor`.
- **Prediction** (`FittedPredictor.predict`): for any frame of configurations (model, mean IL and
  OL, the batch cap ``max_num_seqs`` or a static batch, tensor parallel degree, on the fitted
  accelerator), a `Prediction`: total-token throughput (Eq. 6), E2E latency (Eq. 5) and the mean
  running batch, each with its interval at a stated confidence where the predictor has one, and
  its range over the training-equivalent fits where the data leave directions open
  (`slim.model.identifiability.equivalent_solutions`).
- **Refitting** (`FittedPredictor.refit`): the same predictor fitted again on other runs, started
  from this fit (the conformal intervals' folds, `slim.model.conformal`, and the advisor study's
  leave-one-curve-out refits); None where those runs cannot determine it.
- **The prior** (`prior`, where a predictor has one): the predictor fitted on no run, from the
  catalogs alone; `slim tune` corrects it with the runs it measures.
- **SLO metrics** (`predict_slo_metrics`): the latency statistics users state SLOs on
  (`slim.specs.slo`), where the predictor's equations give them (its ``predict_latencies``), NaN
  ("cannot") elsewhere; every predictor gives the in-batch E2E.

Predictors that take the measured mean batch as an input (SLIM, the baselines) use the column
`columns.MEAN_BATCH_SIZE` where a configuration has it; the others predict it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.sim.run_cache import SimulationCache
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware

if TYPE_CHECKING:
    from slim.model.calibration import CalibrationResult
    from slim.sim.schedules import ScheduleTable
    from slim.specs.slo import Goodput, SloMetric

THROUGHPUT = col.THROUGHPUT_METRIC.name
E2E = col.E2E_METRIC.name
MEAN_BATCH = col.MEAN_BATCH_METRIC.name


@dataclass
class TrainingRuns:
    """A frame of runs to fit on, and what a predictor may need beside it.

    `label` names the runs in error messages (a held-out setting, a folder of traces);
    `sample_valley` asks the fits for their training-equivalent solutions (a prediction's range;
    32 refinements where the data leave directions open). Predictors fitted on the same
    `TrainingRuns` share their fits through `fitted` (SLIM at SIM's batch reuses both) and their
    simulated runs through `simulations`.
    """

    runs: pd.DataFrame
    catalog: ArchitectureCatalog
    hardware: Hardware
    schedules: ScheduleTable | None = None
    label: str = "training runs"
    sample_valley: bool = True
    fits: dict[str, FittedPredictor] = field(default_factory=dict)
    simulations: SimulationCache = field(default_factory=SimulationCache)
    """The runs a simulating predictor simulated (`slim.sim.run_cache`): shared by every predictor fitted
    here, and by whoever passes the same cache to another `TrainingRuns`."""

    def fitted(self, predictor: Predictor) -> FittedPredictor:
        """`predictor` fitted on these runs, fitted once however often it is asked for."""
        if predictor.name not in self.fits:
            self.fits[predictor.name] = predictor.fit(self)
        return self.fits[predictor.name]

    def with_runs(self, runs: pd.DataFrame, label: str) -> TrainingRuns:
        """Other runs with the same catalogs, schedules and simulations, no valley sample and no shared fits."""
        return TrainingRuns(runs, self.catalog, self.hardware, self.schedules, label, sample_valley=False,
                            simulations=self.simulations)


@dataclass(frozen=True)
class Interval:
    """A two-sided interval of a prediction at `confidence`, and how it was made (`kind`)."""

    low: np.ndarray
    high: np.ndarray
    confidence: float
    kind: str


@dataclass(frozen=True)
class Prediction:
    """What a fitted predictor says about a frame of configurations, one entry per row.

    `mean_batch` is NaN where the batch is an input (the configuration's measured mean batch).
    `e2e_interval` and `throughput_interval` are None where the predictor has no interval at the
    asked confidence (or none was asked for). `alternatives` holds the predictions of the chosen fit
    (first) and of each training-equivalent fit, keyed `THROUGHPUT`, `E2E` and, where predicted,
    `MEAN_BATCH`; `determined` says, for predictors without such fits (the linear baselines), which
    predictions the training data determine; `unidentified` says in words what the data leave open;
    `not_fitted` is the reason where the predictor could not be fitted at all (NaN predictions).
    """

    throughput_per_s: np.ndarray
    e2e_latency_s: np.ndarray
    mean_batch: np.ndarray
    e2e_interval: Interval | None = None
    throughput_interval: Interval | None = None
    alternatives: tuple[dict[str, np.ndarray], ...] = ()
    determined: np.ndarray | None = None
    unidentified: str = "identified"
    not_fitted: str | None = None
    refused: np.ndarray | None = None
    """Per configuration: the predictor refuses it (SIM: the simulated run preempts or cannot start);
    None where it refuses none."""

    def valley_range(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """``(lowest, highest)`` of `metric` over the training-equivalent fits, per configuration
        (the chosen prediction on both ends where the data determine it)."""
        values = np.stack([alternative[metric] for alternative in self.alternatives]) if self.alternatives else \
            np.stack([self.throughput_per_s if metric == THROUGHPUT else self.e2e_latency_s
                      if metric == E2E else self.mean_batch])
        return values.min(axis=0), values.max(axis=0)

    def to_frame(self, index: pd.Index | None = None) -> pd.DataFrame:
        """The prediction as columns: point, interval (NaN without one) and range over equivalent fits."""
        frame = pd.DataFrame({THROUGHPUT: self.throughput_per_s, E2E: self.e2e_latency_s,
                              MEAN_BATCH: self.mean_batch}, index=index)
        for metric, interval in ((THROUGHPUT, self.throughput_interval), (E2E, self.e2e_interval)):
            nothing = np.full(len(frame), np.nan)
            frame[f"{metric}_low"] = nothing if interval is None else interval.low
            frame[f"{metric}_high"] = nothing if interval is None else interval.high
            frame[f"{metric}_range_low"], frame[f"{metric}_range_high"] = self.valley_range(metric)
        return frame


def throughput_band_from_e2e(configs: pd.DataFrame, e2e_low_s: np.ndarray,
                             e2e_high_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The throughput band ``(low, high)`` an E2E band implies by Eq. 6 (``T = B (IL + OL) / E2E``:
    the low E2E gives the high throughput), at the configurations' measured mean batch; NaN where
    that E2E is <= 0 (or NaN)."""
    tokens = configs[col.MEAN_BATCH_SIZE].to_numpy(dtype=float) * (
        configs[col.INPUT_LEN_MEAN].to_numpy(dtype=float) + configs[col.OUTPUT_LEN_MEAN].to_numpy(dtype=float))
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.where(np.asarray(e2e_high_s) > 0, tokens / np.asarray(e2e_high_s), np.nan)
        high = np.where(np.asarray(e2e_low_s) > 0, tokens / np.asarray(e2e_low_s), np.nan)
    return low, high


def throughput_interval_from_e2e(configs: pd.DataFrame, e2e: Interval | None) -> Interval | None:
    """The throughput interval an E2E interval implies (`throughput_band_from_e2e`); None without one."""
    if e2e is None:
        return None
    return Interval(*throughput_band_from_e2e(configs, e2e.low, e2e.high), e2e.confidence, e2e.kind)


class FittedPredictor(Protocol):
    """A predictor fitted on some runs (see the module docstring)."""

    name: str
    calibration: CalibrationResult | None
    """The fitted constants with their uncertainty (`slim.model.calibration`), or None (a regression)."""

    def predict(self, configs: pd.DataFrame, confidence: float | None = None) -> Prediction: ...

    def refit(self, training: TrainingRuns) -> FittedPredictor | None: ...


GOODPUT = "goodput"
"""The key of a goodput objective's prediction (requests per second meeting every per-request bound)."""


def predict_slo_metrics(fitted: FittedPredictor, configs: pd.DataFrame, metrics: Sequence[SloMetric],
                        goodput: Goodput | None = None) -> dict[str, np.ndarray]:
    """Each of `metrics` (ms) for each configuration, and the goodput (`GOODPUT`, requests/s) where
    asked for: the predictor's own ``predict_latencies`` where it has one, else only the in-batch E2E
    of its `FittedPredictor.predict` (the rest NaN: it cannot predict them)."""
    own = getattr(fitted, "predict_latencies", None)
    if own is not None:
        return own(configs, metrics, goodput)
    e2e_ms = 1e3 * np.asarray(fitted.predict(configs).e2e_latency_s, dtype=float)
    out = {metric.name: (e2e_ms if metric.in_batch else np.full(len(configs), np.nan)) for metric in metrics}
    if goodput is not None:
        out[GOODPUT] = np.full(len(configs), np.nan)
    return out


class Predictor(Protocol):
    """A way of predicting runs, fitted by `fit` (see the module docstring). A predictor that
    `slim tune` can start from also has ``prior(training) -> FittedPredictor``: itself before any run
    of the accelerator is measured, from the catalogs alone (`training.runs` is not read)."""

    name: str

    def fit(self, training: TrainingRuns) -> FittedPredictor: ...


@dataclass(frozen=True)
class RegisteredPredictor:
    """A predictor as the registry names it, with how the held-out evaluation and the commands use it.

    - `needs_schedules`: it runs only with SIM's cached schedules (real datasets).
    - `predicts_training_rows`: the evaluation also predicts the training runs (the figures draw them).
    - `conformal`: its validation predictions get a conformal interval from its refits
      (`slim.paper.heldout.conformal_intervals`).
    - `fit_key`: where its calibration is kept in a setting's ``fits.json`` (None: not kept).
    - `option`: the name ``slim advise --predictor`` and ``slim tune --predictor`` offer it by (tune
      starts from its `prior`), and the tuning replay replays it as policy ``tune_<option>``; None:
      neither offers it.
    - `simulated`: its prediction of a cap is a simulated run, predicted configuration by configuration,
      which it may refuse (simulated preemption); else a curve it predicts at any cap
      (`slim.advisor.predictor_bca`).
    """

    predictor: Predictor
    needs_schedules: bool = False
    predicts_training_rows: bool = False
    conformal: bool = False
    fit_key: str | None = None
    option: str | None = None
    simulated: bool = False

    @property
    def name(self) -> str:
        return self.predictor.name

