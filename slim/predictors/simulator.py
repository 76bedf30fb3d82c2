"""SIM, the calibrated simulator, and SLIM at SIM's predicted batch, behind the predictor contract.

SIM (`slim.sim`) is calibrated on the training runs' measured throughput against their cached
schedules (`slim.sim.schedule_fit.calibrate_on_rows`), and predicts each configuration from the
configuration alone: model, IL, OL, ``max_num_seqs`` and prompts. It predicts the mean running
batch too. It has no interval of its own (its conformal interval comes from its refits); its range
is over the training-equivalent calibrations. Configurations without a cached schedule are
simulated once at the table's constants.

"SLIM (predicted batch)" is SLIM fed with SIM's predicted mean batch instead of a measured one, as a
user without the run would have to; it is open along both fits' valleys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import FitError
from slim.model.equations import predict_frame
from slim.predictors.contract import E2E, GOODPUT, MEAN_BATCH, THROUGHPUT, Prediction, Predictor, TrainingRuns
from slim.predictors.data_parallel import moe_in_lockstep, server_latencies, server_prediction
from slim.sim.run_cache import SimulationCache
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware

if TYPE_CHECKING:
    from slim.predictors.slim_model import FittedSlim
    from slim.sim.constants import SimConstants
    from slim.sim.schedule_fit import SimCalibration
    from slim.sim.schedules import ScheduleTable
    from slim.specs.slo import Goodput, SloMetric


def schedules_for(configs: pd.DataFrame, schedules: ScheduleTable, catalog: ArchitectureCatalog,
                  hardware: Hardware, simulations: SimulationCache | None = None) -> ScheduleTable:
    """`schedules` with every configuration of `configs` it lacks simulated at its constants (once for
    whoever shares `simulations`, which keeps what was simulated)."""
    from slim.sim.schedules import ScheduleTable, keys_of_frame, simulate_schedules

    missing = sorted({key for key in keys_of_frame(configs) if key not in schedules})
    if not missing:
        return schedules
    return ScheduleTable([*schedules, *simulate_schedules(missing, catalog, hardware, schedules.constants,
                                                          cache=simulations)], schedules.constants)


def measure_only(metric: SloMetric) -> bool:
    """Whether SIM leaves `metric` to measurement: ITL's percentiles above the median."""
    return metric.quantity == "itl" and metric.percentile is not None and metric.percentile > 50.0


def statistic_ms(values_ms, metric: SloMetric) -> float:
    """A metric's statistic of per-request (or per-gap) values, as vLLM's benchmark computes it (or of
    a `GapDistribution`)."""
    from slim.sim.client_latency import GapDistribution

    if isinstance(values_ms, GapDistribution):
        if metric.statistic == "mean":
            return values_ms.mean_ms
        return values_ms.percentile(50.0 if metric.statistic == "median" else float(metric.percentile))
    if not len(values_ms):
        return float("nan")
    if metric.statistic == "mean":
        return float(np.mean(values_ms))
    if metric.statistic == "median":
        return float(np.median(values_ms))
    return float(np.percentile(values_ms, metric.percentile))


def simulated_latencies(configs: pd.DataFrame, metrics: Sequence[SloMetric], goodput: Goodput | None,
                        catalog: ArchitectureCatalog, hardware: Hardware, constants: SimConstants,
                        in_batch_ms: np.ndarray, simulations: SimulationCache | None = None) -> dict[str, np.ndarray]:
    """`FittedSim.predict_latencies` at `constants`: each configuration simulated once (a static batch
    as `slim.sim.schedules` runs it), its client-side latencies under the configuration's client
    (`columns.MAX_CONCURRENCY` requests in flight where set, else every request at once;
    `slim.sim.result.SimResult.client_latencies_ms`) reduced by each metric's statistic; the
    in-batch E2E is `in_batch_ms` (SIM's own, from the schedule)."""
    from slim.sim.client_latency import client_latencies
    from slim.sim.schedules import key_of_row

    out = {metric.name: np.full(len(configs), np.nan) for metric in metrics}
    if goodput is not None:
        out[GOODPUT] = np.full(len(configs), np.nan)
    needed = [m for m in metrics if not m.in_batch and not measure_only(m)]
    for m in metrics:
        if m.in_batch:
            out[m.name] = np.asarray(in_batch_ms, dtype=float).copy()
    if not needed and goodput is None:
        return out
    for position, (_, row) in enumerate(configs.iterrows()):
        key = key_of_row(row)
        concurrency = row.get(col.MAX_CONCURRENCY)
        simulated = client_latencies(catalog[key.model], hardware, constants, key,
                                     int(concurrency) if pd.notna(concurrency) else None, simulations)
        if simulated is None:
            continue
        latencies, completed, duration_s = simulated
        for metric in needed:
            out[metric.name][position] = statistic_ms(latencies[metric.quantity], metric)
        if goodput is not None:
            fraction = goodput.good_fraction({key_: latencies[key_] for key_ in goodput.bounds_ms})
            out[GOODPUT][position] = fraction * completed / duration_s
    return out


@dataclass(frozen=True)
class FittedSim:
    """SIM at calibrated constants (`calibration`), or at the schedule table's own constants with no
    calibration behind them (`at_table_constants`: the shipped constants, `slim tune`'s prior)."""

    name: str
    calibration: SimCalibration | None
    catalog: ArchitectureCatalog
    hardware: Hardware
    schedules: ScheduleTable
    simulations: SimulationCache = field(default_factory=SimulationCache, compare=False)
    """The runs it simulated beyond `schedules` (`slim.sim.run_cache`), shared with its training runs."""

    @classmethod
    def at_table_constants(cls, name: str, schedules: ScheduleTable, catalog: ArchitectureCatalog,
                           hardware: Hardware, simulations: SimulationCache | None = None) -> FittedSim:
        return cls(name, None, catalog, hardware, schedules, simulations or SimulationCache())

    @property
    def constants(self) -> SimConstants:
        return self.schedules.constants if self.calibration is None else self.calibration.constants

    def predict(self, configs: pd.DataFrame, confidence: float | None = None) -> Prediction:
        """Throughput, E2E and mean batch of each configuration, with the range over the
        training-equivalent calibrations (no interval: SIM has none of its own). A configuration the
        simulated server cannot start (its KV cache or weights do not fit) is predicted NaN; it and
        those whose simulated run preempts are `Prediction.refused`. A data-parallel configuration is
        its ranks' (`slim.predictors.data_parallel`)."""
        return server_prediction(self._predict_engines, configs, moe_in_lockstep(self.catalog))

    def _predict_engines(self, configs: pd.DataFrame) -> Prediction:
        """`predict` of configurations each served by one engine."""
        from slim.sim.schedule_costs import ScheduleCosts

        table = schedules_for(configs, self.schedules, self.catalog, self.hardware, self.simulations)
        schedules = table.for_frame(configs)
        started = np.array([schedule.ok for schedule in schedules], dtype=bool)
        equivalent = () if self.calibration is None else self.calibration.identifiability.equivalent
        alternatives = []
        costs = (ScheduleCosts([s for s in schedules if s.ok], self.catalog, self.hardware, table.constants)
                 if started.any() else None)
        preempts = np.zeros(len(configs), dtype=bool)
        for constants in (self.constants, *equivalent):
            values = {name: np.full(len(configs), np.nan) for name in (THROUGHPUT, E2E, MEAN_BATCH)}
            if costs is not None:
                predicted = costs.predict(constants)
                values[THROUGHPUT][started] = predicted.throughput_per_s
                values[E2E][started] = predicted.e2e_latency_s
                values[MEAN_BATCH][started] = predicted.mean_batch_size
                if not alternatives:
                    preempts[started] = predicted.num_preemptions > 0
            alternatives.append(values)
        chosen = alternatives[0]
        return Prediction(chosen[THROUGHPUT], chosen[E2E], chosen[MEAN_BATCH], alternatives=tuple(alternatives),
                          unidentified=("identified" if self.calibration is None
                                        else self.calibration.identifiability.describe()),
                          refused=~started | preempts)

    def predict_latencies(self, configs: pd.DataFrame, metrics: Sequence[SloMetric],
                          goodput: Goodput | None = None) -> dict[str, np.ndarray]:
        """Each SLO metric (ms) and the goodput (requests/s) of each configuration, from one simulated
        run of it at these constants (`simulated_latencies`); NaN where the simulated server cannot
        start, and for ITL's percentiles above the median: the tail of the public traces' ITL (p99
        180-270 ms from 256 concurrent streams on, whatever the model) is made outside the engine
        step, which is all SIM models, so it is measured, not predicted (docs/simulator.md). A
        data-parallel configuration's are its ranks' (`slim.predictors.data_parallel`)."""
        return server_latencies(lambda engines: self._engine_latencies(engines, metrics, goodput),
                                lambda engines: self._predict_engines(engines).throughput_per_s, configs, metrics,
                                moe_in_lockstep(self.catalog))

    def _engine_latencies(self, configs: pd.DataFrame, metrics: Sequence[SloMetric],
                          goodput: Goodput | None) -> dict[str, np.ndarray]:
        """`predict_latencies` of configurations each served by one engine."""
        in_batch = (1e3 * np.asarray(self._predict_engines(configs).e2e_latency_s, dtype=float)
                    if any(metric.in_batch for metric in metrics) else np.full(len(configs), np.nan))
        return simulated_latencies(configs, metrics, goodput, self.catalog, self.hardware, self.constants, in_batch,
                                   self.simulations)

    def refit(self, training: TrainingRuns) -> FittedSim | None:
        """SIM recalibrated on other runs by one refinement from these constants; None where the
        recalibration does not converge."""
        from slim.sim.schedule_fit import calibrate_on_rows

        start = [[getattr(self.constants, name) for name in col.SIM_FITTED_CONSTANTS]]
        try:
            refit = calibrate_on_rows(training.runs, self.schedules, training.catalog, training.hardware,
                                      split_name=training.label, starts=start, sample_valley=False)
        except FitError:
            return None
        return FittedSim(self.name, refit, training.catalog, training.hardware, self.schedules, self.simulations)


@dataclass(frozen=True)
class SimPredictor:
    """SIM calibrated on the runs' cached schedules (`TrainingRuns.schedules`)."""

    name: str

    def prior(self, training: TrainingRuns) -> FittedSim:
        """SIM at the constants of `training.schedules` (the shipped ones): each configuration's
        schedule simulated once, taken from those schedules where it is there."""
        if training.schedules is None:
            raise FitError("SIM's prior needs a schedule table at its constants (it may hold no schedule)")
        return FittedSim.at_table_constants(self.name, training.schedules, training.catalog, training.hardware,
                                            training.simulations)

    def fit(self, training: TrainingRuns) -> FittedSim:
        from slim.sim.schedule_fit import calibrate_on_rows

        if training.schedules is None:
            raise FitError(f"split '{training.label}': SIM needs the runs' cached simulator schedules")
        calibration = calibrate_on_rows(training.runs, training.schedules, training.catalog, training.hardware,
                                        split_name=training.label, sample_valley=training.sample_valley)
        return FittedSim(self.name, calibration, training.catalog, training.hardware, training.schedules,
                         training.simulations)


@dataclass(frozen=True)
class FittedSlimAtSimBatch:
    """SLIM's fit evaluated at SIM's predicted mean batch."""

    name: str
    slim: FittedSlim
    sim: FittedSim
    calibration: None = None   # its constants are the two fits' (`slim`, `sim`)

    def predict(self, configs: pd.DataFrame, confidence: float | None = None) -> Prediction:
        """SLIM at SIM's chosen batch; the range covers SLIM's equivalent fits at that batch and
        SLIM's chosen fit at each equivalent SIM calibration's batch. A data-parallel configuration is
        its ranks' (`slim.predictors.data_parallel`)."""
        return server_prediction(self._predict_engines, configs, moe_in_lockstep(self.sim.catalog))

    def _predict_engines(self, configs: pd.DataFrame) -> Prediction:
        """`predict` of configurations each served by one engine."""
        sim = self.sim.predict(configs)
        fit = self.slim.calibration

        def slim_at(params, batch: np.ndarray) -> dict[str, np.ndarray]:
            rows = configs.assign(**{col.MEAN_BATCH_SIZE: batch})
            e2e_s, throughput = predict_frame(self.slim.catalog, self.slim.hardware, params, rows, self.slim.ablation)
            return {THROUGHPUT: throughput, E2E: e2e_s, MEAN_BATCH: batch}

        chosen_batch = sim.alternatives[0][MEAN_BATCH]
        alternatives = ([slim_at(fit.params, chosen_batch)]
                        + [slim_at(params, chosen_batch) for params in fit.identifiability.equivalent]
                        + [slim_at(fit.params, other[MEAN_BATCH]) for other in sim.alternatives[1:]])
        first = alternatives[0]
        return Prediction(first[THROUGHPUT], first[E2E], first[MEAN_BATCH], alternatives=tuple(alternatives),
                          unidentified=f"SLIM: {fit.identifiability.describe()}; SIM: {sim.unidentified}")

    def refit(self, training: TrainingRuns) -> FittedSlimAtSimBatch | None:
        slim, sim = self.slim.refit(training), self.sim.refit(training)
        return None if slim is None or sim is None else FittedSlimAtSimBatch(self.name, slim, sim)


@dataclass(frozen=True)
class SlimAtSimBatch:
    """SLIM at SIM's predicted batch: the two predictors' fits on the same runs, shared with them."""

    name: str
    slim: Predictor
    sim: Predictor

    def fit(self, training: TrainingRuns) -> FittedSlimAtSimBatch:
        return FittedSlimAtSimBatch(self.name, training.fitted(self.slim), training.fitted(self.sim))
