"""SLIM (Eqs. 5-12) and its ablations behind the predictor contract (`slim.predictors.contract`).

Fitted by `slim.model.fit.fit_slim` on the runs' measured throughput. SLIM takes the mean running
batch as an input: a configuration's measured mean batch (`columns.MEAN_BATCH_SIZE`) where it has
one, else the batch its cap allows, ``B = min(cap, KV capacity in sequences, prompts)`` (a static
batch runs the cap at once), as `slim tune` and `slim advise` use it. Its interval is
`slim.model.uncertainty.prediction_band` (delta method over the fitted constants, widened to the
training-equivalent fits' envelope); its range is over those fits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import FitError
from slim.gpu.kv_memory import kv_capacity_sequences, kv_capacity_tokens_or_default
from slim.model.equations import (
    FULL,
    GAMMA_REFERENCE_HIDDEN_DIM,
    Ablation,
    SlimParams,
    frame_terms,
    predict_terms,
)
from slim.predictors.contract import (
    E2E,
    GOODPUT,
    THROUGHPUT,
    Interval,
    Prediction,
    TrainingRuns,
    throughput_interval_from_e2e,
)
from slim.predictors.data_parallel import moe_in_lockstep, server_latencies, server_prediction
from slim.specs.architecture import BYTES_PER_FP16, ArchitectureCatalog
from slim.specs.hardware import Hardware
from slim.specs.slo import IN_BATCH_E2E

if TYPE_CHECKING:
    from slim.model.fit import SlimFit
    from slim.model.uncertainty import BandKind
    from slim.specs.slo import Goodput, SloMetric


def has_measured_batch(configs: pd.DataFrame) -> bool:
    """Whether every configuration carries its measured mean running batch."""
    return col.MEAN_BATCH_SIZE in configs and bool(
        np.isfinite(configs[col.MEAN_BATCH_SIZE].to_numpy(dtype=float)).all())


def running_batch(row: pd.Series, catalog: ArchitectureCatalog, hardware: Hardware) -> float:
    """The batch a configuration's cap allows: ``min(cap, KV capacity in sequences, prompts)``, at
    least one; the KV capacity is the recorded one, else vLLM's default reservation
    (`slim.gpu.kv_memory.kv_capacity_tokens_or_default`, at the configuration's tensor-parallel size);
    a static batch runs the cap at once."""
    arch = catalog[str(row[col.MODEL])]
    il, ol = float(row[col.INPUT_LEN_MEAN]), float(row[col.OUTPUT_LEN_MEAN])
    recorded = float(row[col.KV_CAPACITY_TOKENS]) if pd.notna(row.get(col.KV_CAPACITY_TOKENS)) else math.nan
    tensor_parallel = int(row[col.TENSOR_PARALLEL]) if pd.notna(row.get(col.TENSOR_PARALLEL)) else 1
    capacity_tokens, _ = kv_capacity_tokens_or_default(recorded, arch, hardware, tensor_parallel)
    batch = min(float(row[col.MAX_NUM_SEQS]), kv_capacity_sequences(capacity_tokens, il, ol, arch, tensor_parallel))
    if row.get(col.BENCHMARK_MODE) != col.BenchmarkMode.OFFLINE_STATIC_BATCH and pd.notna(row.get(col.NUM_PROMPTS)):
        batch = min(batch, float(row[col.NUM_PROMPTS]))
    return max(batch, 1.0)


SLIM_SLO_METRICS = frozenset({IN_BATCH_E2E, col.MEAN_TPOT_MS})
"""The SLO metrics SLIM's equations give: the in-batch E2E (Eq. 5) and the mean TPOT (Eq. 5 over OL)."""


@dataclass(frozen=True)
class FittedSlim:
    """SLIM with fitted constants (`calibration`, a `SlimFit`), or at given constants with no fit
    behind them (`at_constants`: the ideal roofline machine of `slim tune`'s prior)."""

    name: str
    calibration: SlimFit | None
    catalog: ArchitectureCatalog
    hardware: Hardware
    params: SlimParams
    ablation: Ablation = FULL
    interval_kind: BandKind = "curve"
    one_sided: bool = False

    @classmethod
    def of_fit(cls, name: str, fit: SlimFit, catalog: ArchitectureCatalog, hardware: Hardware) -> FittedSlim:
        return cls(name, fit, catalog, hardware, fit.params, fit.ablation)

    @classmethod
    def at_constants(cls, name: str, params: SlimParams, catalog: ArchitectureCatalog,
                     hardware: Hardware) -> FittedSlim:
        return cls(name, None, catalog, hardware, params)

    def with_interval(self, kind: BandKind, one_sided: bool = False) -> FittedSlim:
        """The same fit whose interval bounds `kind` (``curve``: the predicted curve; ``run``: a run's
        measurement); `one_sided`: its high end is the one-sided upper bound of E2E at the confidence
        (and the low end the training-equivalent fits' lowest alone)."""
        return replace(self, interval_kind=kind, one_sided=one_sided)

    def predict(self, configs: pd.DataFrame, confidence: float | None = None) -> Prediction:
        """Throughput and E2E at the measured mean batch (or the batch each cap allows: see the
        module docstring), with the band at `confidence` and the range over equivalent fits; a
        data-parallel configuration's are its ranks' (`slim.predictors.data_parallel`)."""
        return server_prediction(lambda engines: self._predict_engines(engines, confidence), configs,
                                 moe_in_lockstep(self.catalog))

    def _predict_engines(self, configs: pd.DataFrame, confidence: float | None = None) -> Prediction:
        """`predict` of configurations each served by one engine."""
        if not has_measured_batch(configs):
            batch = np.array([running_batch(row, self.catalog, self.hardware) for _, row in configs.iterrows()],
                             dtype=float)
            at_batch = self._predict_engines(configs.assign(**{col.MEAN_BATCH_SIZE: batch}), confidence)
            return replace(at_batch, mean_batch=batch)
        terms = frame_terms(self.catalog, self.hardware, configs)
        e2e_s, throughput = predict_terms(terms, self.hardware, self.params, self.ablation)
        fit = self.calibration
        alternatives = [{THROUGHPUT: throughput, E2E: e2e_s}]
        interval = None
        if fit is not None:
            for params in fit.identifiability.equivalent:
                other_e2e_s, other_throughput = predict_terms(terms, self.hardware, params, self.ablation)
                alternatives.append({THROUGHPUT: other_throughput, E2E: other_e2e_s})
            if confidence is not None:
                from slim.model.uncertainty import prediction_band

                band = prediction_band(fit, terms, self.hardware, confidence, kind=self.interval_kind,
                                       one_sided=self.one_sided)
                kind = f"{self.interval_kind}, one-sided" if self.one_sided else self.interval_kind
                interval = Interval(band.e2e_low_s, band.e2e_high_s, confidence, kind)
        return Prediction(throughput, e2e_s, np.full(len(configs), np.nan), interval,
                          throughput_interval_from_e2e(configs, interval), tuple(alternatives),
                          unidentified="identified" if fit is None else fit.identifiability.describe())

    def predict_latencies(self, configs: pd.DataFrame, metrics: Sequence[SloMetric],
                          goodput: Goodput | None = None) -> dict[str, np.ndarray]:
        """The SLO metrics SLIM's equations give, ms: the in-batch E2E (Eq. 5) and the mean TPOT, Eq. 5
        over OL (the mean step a request's tokens wait for: its decode steps carry the batch's
        prefill chunks, Eqs. 7-10, as the all-at-once benchmark runs them); NaN for every other
        statistic and for goodput (SLIM predicts means, not a request's distribution). A data-parallel
        configuration's are its ranks' (`slim.predictors.data_parallel`)."""
        return server_latencies(lambda engines: self._engine_latencies(engines, metrics, goodput),
                                lambda engines: self._predict_engines(engines).throughput_per_s, configs, metrics,
                                moe_in_lockstep(self.catalog))

    def _engine_latencies(self, configs: pd.DataFrame, metrics: Sequence[SloMetric],
                          goodput: Goodput | None) -> dict[str, np.ndarray]:
        """`predict_latencies` of configurations each served by one engine."""
        e2e_ms = 1e3 * np.asarray(self._predict_engines(configs).e2e_latency_s, dtype=float)
        ol = configs[col.OUTPUT_LEN_MEAN].to_numpy(dtype=float)
        nan = np.full(len(configs), np.nan)
        out = {metric.name: (e2e_ms if metric.in_batch else e2e_ms / ol if metric.name == col.MEAN_TPOT_MS else nan)
               for metric in metrics}
        if goodput is not None:
            out[GOODPUT] = nan
        return out

    def refit(self, training: TrainingRuns) -> FittedSlim | None:
        """SLIM fitted on other runs by one refinement from these constants; None where those runs
        cannot determine its free constants."""
        from slim.model.fit import fit_slim, start_at

        fit = self.calibration
        if fit is None or len(training.runs) < len(fit.free_parameters):
            return None
        try:
            refit = fit_slim(training.runs, training.catalog, training.hardware, ablation=self.ablation,
                             split_name=training.label, starts=start_at(fit.params), sample_valley=False)
        except FitError:
            return None
        return FittedSlim.of_fit(self.name, refit, training.catalog, training.hardware)


IDEAL_SLIM_PARAMS = SlimParams(eta_compute=1.0, eta_memory=1.0, batch_offset=0.0, alpha_s_per_token=0.0,
                               gamma_s_per_token=0.0, t_fixed_s=0.0)
"""SLIM's efficiencies of one, no offset and no overheads; `ideal_slim_params` adds the dense
decode's weight traffic of an ideal machine."""
DENSE_PARAMS_PER_LAYER_PER_WIDTH = 12.0
"""Dense weights per layer in units of ``D^2`` (attention 4 ``D^2``, an MLP of 4 ``D`` 8 ``D^2``): what
one decode step streams once, whatever the batch."""


def ideal_slim_params(hw: Hardware) -> SlimParams:
    """SLIM's ideal roofline machine on `hw` (Eqs. 5-12 with efficiencies of one, no offset, no
    overheads): the dense decode of Eq. 10 streams every layer's weights once per step at the peak
    bandwidth, ``gamma = 12 x 1024^2 x 2 B / BW_max`` per layer and ``(D / 1024)^2``. Its prior
    before any run of the accelerator is measured."""
    weight_bytes = DENSE_PARAMS_PER_LAYER_PER_WIDTH * GAMMA_REFERENCE_HIDDEN_DIM ** 2 * BYTES_PER_FP16
    return replace(IDEAL_SLIM_PARAMS, gamma_s_per_token=weight_bytes / hw.hbm_bandwidth_bytes_per_s)


@dataclass(frozen=True)
class SlimPredictor:
    """SLIM under `ablation` (the full model by default), fitted by `slim.model.fit.fit_slim`."""

    name: str
    ablation: Ablation = FULL

    def prior(self, training: TrainingRuns) -> FittedSlim:
        """SLIM at `ideal_slim_params` of the accelerator's catalog entry."""
        return replace(FittedSlim.at_constants(self.name, ideal_slim_params(training.hardware), training.catalog,
                                               training.hardware),
                       ablation=self.ablation)

    def fit(self, training: TrainingRuns) -> FittedSlim:
        from slim.model.fit import fit_slim

        fit = fit_slim(training.runs, training.catalog, training.hardware, ablation=self.ablation,
                       split_name=training.label, sample_valley=training.sample_valley)
        return FittedSlim.of_fit(self.name, fit, training.catalog, training.hardware)
