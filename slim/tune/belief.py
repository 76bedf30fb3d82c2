"""What `slim tune` believes about a configuration it has not measured: a prior predictor (SLIM or
SIM, from the accelerator's catalog entry alone) corrected by the residuals of the runs measured so
far, with calibrated intervals.

**The prior.** SLIM at the ideal roofline machine (``eta_c = eta_m = 1``, no offset, no overheads,
the dense decode streaming every layer's weights once per step at the peak bandwidth; Eqs. 5-12 at
`slim.predictors.slim_model.ideal_slim_params`), evaluated at the running batch
``min(cap, KV capacity in sequences, prompts)``; or SIM, the simulator with its shipped constants
(`slim.sim.constants`), on the accelerator's catalog entry. Neither is fitted to the runs: every
measured run is out of sample for the prior, so its residual is an honest error.

**The correction** (measurements are facts). The log residual ``r = log(measured / prior)`` of
throughput, and separately of E2E latency, is a Gaussian process over the configuration
``x = (log2 cap, log2 IL, log2 OL, model)`` with a kernel (`ResidualKernel`): an offset, a linear
trend in each log coordinate (how the prior's error grows with the batch or the length), both also
per model, a smooth term of length scale `ResidualKernel.length_scale_log2` shared across models at
`ResidualKernel.cross_model_correlation`, and the run-to-run scatter. A point measured for one
model or length therefore informs the others, most of all its neighbours. The kernel's scales are
chosen by the evidence of real datasets, per prior (`slim.tune.kernel`), not by hand.

**The calibration** (split conformal over leave-one-out). Each measured run is predicted from every
other one (closed form, `ResidualProcess.leave_one_out_scores`; its own curve's other caps included,
so the score checks extrapolation across caps); the standardised errors ``|r - mean| / sd`` are the
conformity scores, and the interval multiplier at confidence ``c`` is their ``ceil((n + 1) c)``-th
smallest (`conformal_multiplier`), and never below the same rank of the kernel's out-of-sample
extrapolation scores. Until there are enough scores for that rank the multiplier is the larger of
the largest score and that out-of-sample rank (or, without those scores, the normal quantile).

**Across layouts** (`LayoutUncertainty`, where a session decides between parallel layouts: tensor-
parallel sizes, each at one or more data-parallel sizes). The prior predicts every layout (a
data-parallel one as its ranks, each at its share of the server's requests in flight,
`slim.predictors.data_parallel`), but its scaling across them is not trusted: the residual at a
layout of ``g = t x d`` GPUs gains a term ``s u + o_L`` with ``u = log2 g - log2 g_min`` (the
session's fewest GPUs), a slope ``s`` shared by every layout and an offset ``o_L`` of each layout
but the session's first (fewest GPUs, then the smallest tensor-parallel size), both zero-mean
Gaussian. Two layouts of as many GPUs (TP 8, TP 4 x DP 2) share the slope's coordinate but not their
offsets. A run at one layout so corrects the prior at every other (the kernel's terms are shared),
while the interval at a layout with no run of its own keeps the slope's and offset's width: it
widens with the distance in doublings rather than trusting the prior's scaling.

Nothing here depends on the accelerator beyond its catalog entry and the runs measured on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Protocol, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.decision.candidates import THROUGHPUT
from slim.errors import AdvisorError
from slim.model.conformal import conformal_quantile
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware
from slim.specs.slo import IN_BATCH_E2E
from slim.tune.no_prior import bisection_order_bounds
from slim.tune.server_sizes import data_parallel_sizes, server_gpus, tensor_parallel_sizes

if TYPE_CHECKING:
    from slim.predictors import Prediction, RegisteredPredictor
    from slim.sim.run_cache import SimulationCache
    from slim.sim.schedules import ScheduleTable
    from slim.specs.slo import Goodput, SloMetric

CONFIG_COLUMNS = (col.MODEL, col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL, col.INPUT_LEN_MEAN,
                  col.OUTPUT_LEN_MEAN, col.MAX_NUM_SEQS, col.NUM_PROMPTS, col.BENCHMARK_MODE,
                  col.TENSOR_PARALLEL, col.KV_CAPACITY_TOKENS)
"""What a candidate configuration is: the columns of the runs table it is described by."""


@dataclass(frozen=True)
class PriorPrediction:
    """A prior's prediction per candidate configuration of each quantity: throughput (tokens/s), the
    in-batch E2E and every other SLO metric (ms), the goodput (requests/s); NaN where the prior
    cannot predict it (the quantity is then measure-only)."""

    values: dict[str, np.ndarray]
    no_prior: np.ndarray | None = None
    """Per candidate, whether no prior describes its model (a model or quantisation slim cannot size,
    `slim.tune.no_prior`): every quantity is NaN there, and only its curve's measured caps bound it."""

    @classmethod
    def of(cls, throughput_per_s: np.ndarray, e2e_latency_s: np.ndarray, **others: np.ndarray) -> PriorPrediction:
        """Throughput and in-batch E2E (seconds), and other quantities by name."""
        return cls({THROUGHPUT: np.asarray(throughput_per_s, dtype=float),
                    IN_BATCH_E2E: 1e3 * np.asarray(e2e_latency_s, dtype=float),
                    **{name: np.asarray(values, dtype=float) for name, values in others.items()}})

    @property
    def throughput_per_s(self) -> np.ndarray:
        return self.values[THROUGHPUT]

    @property
    def e2e_latency_s(self) -> np.ndarray:
        return self.values[IN_BATCH_E2E] / 1e3

    def take(self, rows: np.ndarray) -> PriorPrediction:
        return PriorPrediction({name: values[rows] for name, values in self.values.items()},
                               None if self.no_prior is None else self.no_prior[rows])


class PriorPredictor(Protocol):
    """Predicts candidate configurations (`CONFIG_COLUMNS`) from the catalog alone: a registered
    predictor at constants no run of the accelerator fitted (`tune_prior`)."""

    name: str

    def predict(self, configs: pd.DataFrame, confidence: float | None = None) -> Prediction: ...


def is_static_batch(configs: pd.DataFrame) -> np.ndarray:
    """Per configuration: an offline static batch (every request at once, B = the cap)."""
    return (configs[col.BENCHMARK_MODE] == col.BenchmarkMode.OFFLINE_STATIC_BATCH).to_numpy()


def requests_per_run(configs: pd.DataFrame) -> np.ndarray:
    """Requests one benchmark of each configuration serves: the cap for a static batch, else its
    prompts (vLLM's default 1000 where none are recorded)."""
    prompts = configs[col.NUM_PROMPTS].to_numpy(dtype=float)
    prompts = np.where(np.isfinite(prompts) & (prompts > 0), prompts, 1000.0)
    return np.where(is_static_batch(configs), configs[col.MAX_NUM_SEQS].to_numpy(dtype=float), prompts)


def predicted_gpu_seconds(configs: pd.DataFrame, throughput_per_s: np.ndarray) -> np.ndarray:
    """GPU-seconds one benchmark of each configuration takes at a throughput: its tokens over the
    throughput (a static batch's latency), times the GPUs its server occupies (``t x d``)."""
    tokens = requests_per_run(configs) * (configs[col.INPUT_LEN_MEAN].to_numpy(dtype=float)
                                          + configs[col.OUTPUT_LEN_MEAN].to_numpy(dtype=float))
    return server_gpus(configs) * tokens / np.asarray(throughput_per_s, dtype=float)


def tune_prior(entry: RegisteredPredictor, architectures: ArchitectureCatalog, hardware: Hardware,
               schedules: ScheduleTable | None = None, simulations: SimulationCache | None = None) -> PriorPredictor:
    """The registered predictor's prior (`Predictor.prior`: SLIM at the ideal roofline machine, SIM at
    the constants of `schedules`, each configuration simulated once and kept in `simulations`), fitted
    on no run."""
    from slim.predictors import TrainingRuns

    training = TrainingRuns(pd.DataFrame(), architectures, hardware, schedules, "no runs (prior)")
    if simulations is not None:
        training.simulations = simulations
    return entry.predictor.prior(training)


def slim_prior(architectures: ArchitectureCatalog, hardware: Hardware) -> PriorPredictor:
    """SLIM's prior (`tune_prior` of the registry's ``slim``)."""
    from slim.predictors import tune_predictors

    return tune_prior(tune_predictors()["slim"], architectures, hardware)


def roofline_gpu_seconds(configs: pd.DataFrame, architectures: ArchitectureCatalog, hardware: Hardware) -> np.ndarray:
    """A lower bound of one run's GPU time per configuration: its tokens at SLIM's ideal roofline
    machine (`slim_prior`: the datasheet's peak bandwidth and FLOP/s, efficiencies of one, no
    overheads; Eqs. 5-12) on each of its GPUs, so no run of it can take less."""
    throughput = np.asarray(slim_prior(architectures, hardware).predict(configs).throughput_per_s, dtype=float)
    return predicted_gpu_seconds(configs, throughput * server_gpus(configs))


def prior_prediction(prior: PriorPredictor, configs: pd.DataFrame, metrics: Sequence[SloMetric] = (),
                     goodput: Goodput | None = None) -> PriorPrediction:
    """`prior`'s prediction of every candidate configuration: throughput, the in-batch E2E, each SLO
    metric of `metrics` and the goodput where asked (`slim.predictors.contract.predict_slo_metrics`);
    `AdvisorError` naming the first configuration it cannot predict at all (SIM: the KV cache cannot
    hold one request)."""
    from slim.predictors.contract import predict_slo_metrics

    prediction = prior.predict(configs)
    throughput = np.asarray(prediction.throughput_per_s, dtype=float)
    e2e = np.asarray(prediction.e2e_latency_s, dtype=float)
    if not (np.isfinite(throughput).all() and np.isfinite(e2e).all()):
        bad = configs[~(np.isfinite(throughput) & np.isfinite(e2e))]
        raise AdvisorError(f"{prior.name} cannot start {len(bad)} candidate configuration(s) (first: "
                           f"{bad.iloc[0][col.MODEL]} cap {bad.iloc[0][col.MAX_NUM_SEQS]:g}): the KV cache "
                           "cannot hold one request; drop those candidates")
    others = [metric for metric in metrics if not metric.in_batch]
    extra = predict_slo_metrics(prior, configs, others, goodput) if others or goodput is not None else {}
    return PriorPrediction.of(throughput, e2e, **extra)


# --- the residual process ----------------------------------------------------------------

@dataclass(frozen=True)
class ResidualKernel:
    """The covariance of the log residual between two configurations (module docstring). Standard
    deviations are in natural-log units (0.3: about 30 %), slopes per doubling of the coordinate."""

    offset_sd: float = 0.5
    slope_sd_per_doubling: float = 0.1
    model_offset_sd: float = 0.3
    model_slope_sd_per_doubling: float = 0.05
    smooth_sd: float = 0.15
    length_scale_log2: float = 1.5
    cross_model_correlation: float = 0.5
    noise_sd: float = 0.02
    centre_log2: tuple[float, float, float] = (4.0, 9.0, 9.0)
    """Where the linear trends pivot: cap 16, IL 512, OL 512."""

    def coordinates(self, configs: pd.DataFrame) -> np.ndarray:
        """``(log2 cap, log2 IL, log2 OL)`` less `centre_log2`, one row per configuration."""
        values = np.column_stack([configs[col.MAX_NUM_SEQS].to_numpy(dtype=float),
                                  configs[col.INPUT_LEN_MEAN].to_numpy(dtype=float),
                                  configs[col.OUTPUT_LEN_MEAN].to_numpy(dtype=float)])
        return np.log2(values) - np.asarray(self.centre_log2)

    def variance(self, coordinates: np.ndarray) -> np.ndarray:
        """The diagonal of `covariance` of a set of configurations with itself."""
        linear = (coordinates ** 2).sum(axis=1)
        return (self.offset_sd ** 2 + self.model_offset_sd ** 2 + self.smooth_sd ** 2
                + (self.slope_sd_per_doubling ** 2 + self.model_slope_sd_per_doubling ** 2) * linear)

    def covariance(self, left: np.ndarray, left_models: np.ndarray, right: np.ndarray,
                   right_models: np.ndarray) -> np.ndarray:
        same_model = (left_models[:, None] == right_models[None, :]).astype(float)
        linear = left @ right.T
        squared = ((left[:, None, :] - right[None, :, :]) ** 2).sum(axis=2)
        smooth = np.exp(-0.5 * squared / self.length_scale_log2 ** 2)
        rho = self.cross_model_correlation
        return (self.offset_sd ** 2 + self.slope_sd_per_doubling ** 2 * linear
                + same_model * (self.model_offset_sd ** 2 + self.model_slope_sd_per_doubling ** 2 * linear)
                + self.smooth_sd ** 2 * smooth * (rho + (1.0 - rho) * same_model))


@dataclass(frozen=True)
class LayoutUncertainty:
    """The residual's extra terms across layouts (module docstring): standard deviations in
    natural-log units, the slope per doubling of the server's GPUs. Half a doubling's worth of slope
    (0.5) covers, at the intervals' multiplier, a prior wrong by 2x per doubling over two doublings:
    wider on purpose than SIM's zero-shot errors on the development data (fitted by
    `slim.tune.layout_uncertainty`: slope 0.11 and offset 0.09-0.14; docs/tuning.md)."""

    slope_sd_per_doubling: float = 0.5
    offset_sd: float = 0.3

    @staticmethod
    def coordinates(configs: pd.DataFrame) -> np.ndarray:
        """One row per configuration: ``u = log2 g - log2 g_min`` (``g = t x d`` the GPUs of its server,
        ``g_min`` the fewest among `configs`) and its layout's key: 0 for the first layout (fewest GPUs,
        then the smallest tensor-parallel size), which has no offset of its own, else a positive number
        one layout ``(t, d)`` alone has."""
        sizes, ranks = tensor_parallel_sizes(configs), data_parallel_sizes(configs)
        gpus = (sizes * ranks).astype(float)
        if not len(gpus):
            return np.zeros((0, 2))
        first = min(zip(gpus.tolist(), sizes.tolist(), ranks.tolist()))
        keys = np.where((sizes == first[1]) & (ranks == first[2]), 0.0, sizes * 65536.0 + ranks)
        return np.column_stack([np.log2(gpus) - np.log2(first[0]), keys])

    def covariance(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        own = (left[:, None, 1] == right[None, :, 1]) & (left[:, None, 1] > 0)
        return self.slope_sd_per_doubling ** 2 * np.outer(left[:, 0], right[:, 0]) + self.offset_sd ** 2 * own

    def variance(self, coordinates: np.ndarray) -> np.ndarray:
        return self.slope_sd_per_doubling ** 2 * coordinates[:, 0] ** 2 + self.offset_sd ** 2 * (coordinates[:, 1] > 0)


def conformal_multiplier(scores: np.ndarray, confidence: float, reference_scores: Sequence[float] = ()) -> float:
    """Split-conformal multiplier of the standardised interval at `confidence`
    (`slim.model.conformal.conformal_quantile`), never below the same rank of `reference_scores`
    (scores of the same prediction made out of sample on other datasets: a session's own scores
    can widen its intervals, not narrow them below what other accelerators needed); with too few
    scores for the rank, the larger of the largest score and that reference, or without
    reference scores the normal quantile."""
    from scipy.stats import norm

    reference = conformal_quantile(np.asarray(reference_scores, dtype=float), confidence)
    quantile = conformal_quantile(scores, confidence)
    if math.isfinite(quantile):
        return max(quantile, reference) if math.isfinite(reference) else quantile
    base = reference if math.isfinite(reference) else float(norm.ppf(0.5 + confidence / 2.0))
    return max(base, float(np.max(scores))) if len(scores) else base


class ResidualProcess:
    """The Gaussian process of one log residual, conditioned on the measured configurations."""

    def __init__(self, kernel: ResidualKernel, coordinates: np.ndarray, models: np.ndarray,
                 residuals: np.ndarray, curves: np.ndarray, noise_sd: np.ndarray,
                 layouts: LayoutUncertainty | None = None, layout_coordinates: np.ndarray | None = None):
        from scipy.linalg import cho_factor, cho_solve

        self.kernel, self.coordinates, self.models = kernel, coordinates, models
        self.residuals, self.curves = residuals, curves
        self.layouts, self.layout_coordinates = layouts, layout_coordinates
        covariance = kernel.covariance(coordinates, models, coordinates, models)
        if layouts is not None:
            covariance = covariance + layouts.covariance(layout_coordinates, layout_coordinates)
        self.covariance = covariance + np.diag(noise_sd ** 2)
        if len(residuals):
            self._factor = cho_factor(self.covariance, lower=True)
            self._weights = cho_solve(self._factor, residuals)

    def predict(self, coordinates: np.ndarray, models: np.ndarray, noise_sd: float,
                layout_coordinates: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of a new run's log residual (scatter included)."""
        from scipy.linalg import cho_solve

        prior_var = self.kernel.variance(coordinates) + noise_sd ** 2
        if self.layouts is not None:
            prior_var = prior_var + self.layouts.variance(layout_coordinates)
        if not len(self.residuals):
            return np.zeros(len(coordinates)), np.sqrt(prior_var)
        cross = self.kernel.covariance(self.coordinates, self.models, coordinates, models)
        if self.layouts is not None:
            cross = cross + self.layouts.covariance(self.layout_coordinates, layout_coordinates)
        mean = cross.T @ self._weights
        explained = (cross * cho_solve(self._factor, cross)).sum(axis=0)
        return mean, np.sqrt(np.maximum(prior_var - explained, noise_sd ** 2))

    def leave_one_out_scores(self) -> np.ndarray:
        """``|r_i - mean_i| / sd_i`` of every measured run, predicted from every other measured run
        (its own curve's other caps included: extrapolation across caps), in closed form:
        ``e_i = (K^-1 r)_i / (K^-1)_ii``, ``sd_i^2 = 1 / (K^-1)_ii``."""
        from scipy.linalg import cho_solve

        if not len(self.residuals):
            return np.zeros(0)
        inverse_diagonal = cho_solve(self._factor, np.eye(len(self.residuals))).diagonal()
        return np.abs(self._weights / inverse_diagonal) * np.sqrt(inverse_diagonal)

    def leave_one_curve_out_scores(self) -> np.ndarray:
        """``|r_i - mean_i| / sd_i`` of every measured run, predicted from the other curves only
        (the block form of leave-one-out: ``e_C = (K^-1)_CC^-1 (K^-1 r)_C``)."""
        from scipy.linalg import cho_solve

        if not len(self.residuals):
            return np.zeros(0)
        inverse = cho_solve(self._factor, np.eye(len(self.residuals)))
        scores = np.empty(len(self.residuals))
        for curve in np.unique(self.curves):
            block = np.flatnonzero(self.curves == curve)
            block_inverse = inverse[np.ix_(block, block)]
            errors = np.linalg.solve(block_inverse, self._weights[block])
            variances = np.linalg.inv(block_inverse).diagonal()
            scores[block] = np.abs(errors) / np.sqrt(variances)
        return scores


@dataclass(frozen=True)
class QuantityBelief:
    """One quantity per candidate: the measurement where `measured`, else the corrected prediction
    (NaN where nothing predicts it), the interval at the belief's confidence (0 and inf where nothing
    predicts it), the standard deviation of the log that interval implies (half-width / z; a
    measurement's scatter where measured) and the conformal multiplier of its intervals."""

    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    log_sd: np.ndarray
    measured: np.ndarray
    multiplier: float


@dataclass(frozen=True)
class Belief:
    """What is believed of every quantity of every candidate (`QuantityBelief` by quantity name:
    `THROUGHPUT`, the SLO metrics, the goodput)."""

    quantities: dict[str, QuantityBelief]

    def __getitem__(self, name: str) -> QuantityBelief:
        return self.quantities[name]

    @property
    def throughput_per_s(self) -> np.ndarray:
        return self.quantities[THROUGHPUT].mean

    @property
    def throughput_low(self) -> np.ndarray:
        return self.quantities[THROUGHPUT].low

    @property
    def throughput_high(self) -> np.ndarray:
        return self.quantities[THROUGHPUT].high

    @property
    def throughput_log_sd(self) -> np.ndarray:
        return self.quantities[THROUGHPUT].log_sd

    @property
    def e2e_latency_s(self) -> np.ndarray:
        return self.quantities[IN_BATCH_E2E].mean / 1e3

    @property
    def e2e_low(self) -> np.ndarray:
        return self.quantities[IN_BATCH_E2E].low / 1e3

    @property
    def e2e_high(self) -> np.ndarray:
        return self.quantities[IN_BATCH_E2E].high / 1e3

    @property
    def e2e_log_sd(self) -> np.ndarray:
        return self.quantities[IN_BATCH_E2E].log_sd

    @property
    def multipliers(self) -> dict[str, float]:
        return {name: q.multiplier for name, q in self.quantities.items()}


def belief(candidates: pd.DataFrame, prior: PriorPrediction, measured: Mapping[str, Mapping[int, float]],
           scatter: Mapping[int, float], confidence: float, kernel: ResidualKernel = ResidualKernel(),
           reference_scores: Sequence[float] = (), runs: Mapping[int, int] | None = None,
           layouts: LayoutUncertainty | None = None) -> Belief:
    """The corrected prediction of every quantity of `prior` for every candidate, given the measured
    ones (module docstring). `measured` maps each quantity to its measurements by row position in
    `candidates` (a run judges the SLO metrics it judges); `scatter` is each measured candidate's
    relative run-to-run scatter (one standard deviation, at least the kernel's noise), over the root
    of its `runs` (how many runs its measurement averages; one by default); `reference_scores` the
    kernel's out-of-sample extrapolation scores (`conformal_multiplier`). Every quantity has its own
    residual process on the same kernel; a quantity the prior cannot predict at a candidate is
    unknown there until measured; at a candidate no prior describes (`PriorPrediction.no_prior`), only
    its curve's measured caps bound it (`slim.tune.no_prior.bisection_order_bounds`). With `layouts`,
    the residual has its terms across layouts (`LayoutUncertainty`)."""
    from scipy.stats import norm

    coordinates = kernel.coordinates(candidates)
    layout_coordinates = layouts.coordinates(candidates) if layouts is not None else None
    models = candidates[col.MODEL].astype(str).to_numpy()
    curves = (candidates[col.MODEL].astype(str) + "|" + candidates[col.INPUT_LEN_NOMINAL].astype(str) + "|"
              + candidates[col.OUTPUT_LEN_NOMINAL].astype(str)).to_numpy()
    z = float(norm.ppf(0.5 + confidence / 2.0))
    runs = runs or {}
    quantities = {}
    for name, prior_values in prior.values.items():
        values = measured.get(name, {})
        index = np.array(sorted(values), dtype=int)
        measurement = np.array([values[i] for i in index], dtype=float)
        noise = (np.maximum(np.array([scatter.get(i, kernel.noise_sd) for i in index], dtype=float), kernel.noise_sd)
                 / np.sqrt(np.array([runs.get(i, 1) for i in index], dtype=float)))
        with np.errstate(divide="ignore", invalid="ignore"):
            log_prior = np.log(np.asarray(prior_values, dtype=float))
        predicted = np.isfinite(log_prior)
        fitted = predicted[index] if len(index) else np.zeros(0, dtype=bool)
        process = ResidualProcess(kernel, coordinates[index[fitted]], models[index[fitted]],
                                  np.log(measurement[fitted]) - log_prior[index[fitted]], curves[index[fitted]],
                                  noise[fitted], layouts,
                                  layout_coordinates[index[fitted]] if layouts is not None else None)
        multiplier = conformal_multiplier(process.leave_one_out_scores(), confidence, reference_scores)
        mean, sd = process.predict(coordinates, models, kernel.noise_sd, layout_coordinates)
        centre = np.where(predicted, log_prior + mean, np.nan)
        half = np.where(predicted, multiplier * sd, np.inf)
        is_measured = np.zeros(len(candidates), dtype=bool)
        if len(index):
            centre[index], half[index] = np.log(measurement), z * noise
            is_measured[index] = True
        with np.errstate(invalid="ignore", over="ignore"):
            point, low, high = np.exp(centre), np.exp(centre - half), np.exp(centre + half)
        low = np.where(np.isfinite(centre), low, 0.0)
        high = np.where(np.isfinite(centre), high, np.inf)
        if prior.no_prior is not None and prior.no_prior.any():
            measured_values = np.full(len(candidates), np.nan)
            measured_values[index] = measurement
            order_low, order_high = bisection_order_bounds(candidates, name, is_measured, measured_values,
                                                           prior.no_prior)
            unbounded = prior.no_prior & ~is_measured
            low, high = np.where(unbounded, order_low, low), np.where(unbounded, order_high, high)
        point[index] = measurement      # a measurement is the fact itself, not exp(log)
        quantities[name] = QuantityBelief(point, low, high, half / z, is_measured, multiplier)
    return Belief(quantities)
