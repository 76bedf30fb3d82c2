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
chosen by the evidence of real datasets, per prior (`slim.advisor.tune_kernel`), not by hand.

**The calibration** (split conformal over leave-one-out). Each measured run is predicted from every
other one (closed form, `ResidualProcess.leave_one_out_scores`; its own curve's other caps included,
so the score checks extrapolation across caps); the standardised errors ``|r - mean| / sd`` are the
conformity scores, and the interval multiplier at confidence ``c`` is their ``ceil((n + 1) c)``-th
smallest (`conformal_multiplier`), and never below the same rank of the kernel's out-of-sample
extrapolation scores. Until there are enough scores for that rank the multiplier is the larger of
the largest score and that out-of-sample rank (or, without those scores, the normal quantile).

Nothing here depends on the accelerator beyond its catalog entry and the runs measured on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Sequence

import numpy as np
import pandas as pd
from scipy.linalg import cho_factor, cho_solve
from scipy.stats import norm

from slim import columns as col
from slim.errors import AdvisorError
from slim.model.conformal import conformal_quantile
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware

if TYPE_CHECKING:
    from slim.predictors import Prediction, RegisteredPredictor
    from slim.sim.schedules import ScheduleTable

CONFIG_COLUMNS = (col.MODEL, col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL, col.INPUT_LEN_MEAN,
                  col.OUTPUT_LEN_MEAN, col.MAX_NUM_SEQS, col.NUM_PROMPTS, col.BENCHMARK_MODE,
                  col.TENSOR_PARALLEL, col.KV_CAPACITY_TOKENS)
"""What a candidate configuration is: the columns of the runs table it is described by."""


@dataclass(frozen=True)
class PriorPrediction:
    """A prior's throughput (total tokens/s) and E2E latency (s) per candidate configuration."""

    throughput_per_s: np.ndarray
    e2e_latency_s: np.ndarray


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
    throughput (a static batch's latency), times the GPUs it runs on."""
    tokens = requests_per_run(configs) * (configs[col.INPUT_LEN_MEAN].to_numpy(dtype=float)
                                          + configs[col.OUTPUT_LEN_MEAN].to_numpy(dtype=float))
    gpus = configs[col.TENSOR_PARALLEL].fillna(1).to_numpy(dtype=float)
    return gpus * tokens / np.asarray(throughput_per_s, dtype=float)


def tune_prior(entry: RegisteredPredictor, architectures: ArchitectureCatalog, hardware: Hardware,
               schedules: ScheduleTable | None = None) -> PriorPredictor:
    """The registered predictor's prior (`Predictor.prior`: SLIM at the ideal roofline machine, SIM at
    the constants of `schedules`, each configuration simulated once), fitted on no run."""
    from slim.predictors import TrainingRuns

    return entry.predictor.prior(TrainingRuns(pd.DataFrame(), architectures, hardware, schedules, "no runs (prior)"))


def slim_prior(architectures: ArchitectureCatalog, hardware: Hardware) -> PriorPredictor:
    """SLIM's prior (`tune_prior` of the registry's ``slim``)."""
    from slim.predictors import tune_predictors

    return tune_prior(tune_predictors()["slim"], architectures, hardware)


def prior_prediction(prior: PriorPredictor, configs: pd.DataFrame) -> PriorPrediction:
    """`prior`'s prediction of every candidate configuration; `AdvisorError` naming the first it cannot
    predict (SIM: the KV cache cannot hold one request)."""
    prediction = prior.predict(configs)
    throughput = np.asarray(prediction.throughput_per_s, dtype=float)
    e2e = np.asarray(prediction.e2e_latency_s, dtype=float)
    if not (np.isfinite(throughput).all() and np.isfinite(e2e).all()):
        bad = configs[~(np.isfinite(throughput) & np.isfinite(e2e))]
        raise AdvisorError(f"{prior.name} cannot start {len(bad)} candidate configuration(s) (first: "
                           f"{bad.iloc[0][col.MODEL]} cap {bad.iloc[0][col.MAX_NUM_SEQS]:g}): the KV cache "
                           "cannot hold one request; drop those candidates")
    return PriorPrediction(throughput, e2e)


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


def conformal_multiplier(scores: np.ndarray, confidence: float, reference_scores: Sequence[float] = ()) -> float:
    """Split-conformal multiplier of the standardised interval at `confidence`
    (`slim.model.conformal.conformal_quantile`), never below the same rank of `reference_scores`
    (scores of the same prediction made out of sample on other datasets: a session's own scores
    can widen its intervals, not narrow them below what other accelerators needed); with too few
    scores for the rank, the larger of the largest score and that reference, or without
    reference scores the normal quantile."""
    reference = conformal_quantile(np.asarray(reference_scores, dtype=float), confidence)
    quantile = conformal_quantile(scores, confidence)
    if math.isfinite(quantile):
        return max(quantile, reference) if math.isfinite(reference) else quantile
    base = reference if math.isfinite(reference) else float(norm.ppf(0.5 + confidence / 2.0))
    return max(base, float(np.max(scores))) if len(scores) else base


class ResidualProcess:
    """The Gaussian process of one log residual, conditioned on the measured configurations."""

    def __init__(self, kernel: ResidualKernel, coordinates: np.ndarray, models: np.ndarray,
                 residuals: np.ndarray, curves: np.ndarray, noise_sd: np.ndarray):
        self.kernel, self.coordinates, self.models = kernel, coordinates, models
        self.residuals, self.curves = residuals, curves
        covariance = kernel.covariance(coordinates, models, coordinates, models)
        self.covariance = covariance + np.diag(noise_sd ** 2)
        if len(residuals):
            self._factor = cho_factor(self.covariance, lower=True)
            self._weights = cho_solve(self._factor, residuals)

    def predict(self, coordinates: np.ndarray, models: np.ndarray, noise_sd: float) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard deviation of a new run's log residual (scatter included)."""
        prior_var = self.kernel.variance(coordinates) + noise_sd ** 2
        if not len(self.residuals):
            return np.zeros(len(coordinates)), np.sqrt(prior_var)
        cross = self.kernel.covariance(self.coordinates, self.models, coordinates, models)
        mean = cross.T @ self._weights
        explained = (cross * cho_solve(self._factor, cross)).sum(axis=0)
        return mean, np.sqrt(np.maximum(prior_var - explained, noise_sd ** 2))

    def leave_one_out_scores(self) -> np.ndarray:
        """``|r_i - mean_i| / sd_i`` of every measured run, predicted from every other measured run
        (its own curve's other caps included: extrapolation across caps), in closed form:
        ``e_i = (K^-1 r)_i / (K^-1)_ii``, ``sd_i^2 = 1 / (K^-1)_ii``."""
        if not len(self.residuals):
            return np.zeros(0)
        inverse_diagonal = cho_solve(self._factor, np.eye(len(self.residuals))).diagonal()
        return np.abs(self._weights / inverse_diagonal) * np.sqrt(inverse_diagonal)

    def leave_one_curve_out_scores(self) -> np.ndarray:
        """``|r_i - mean_i| / sd_i`` of every measured run, predicted from the other curves only
        (the block form of leave-one-out: ``e_C = (K^-1)_CC^-1 (K^-1 r)_C``)."""
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
class Belief:
    """Per candidate: the prior, the corrected prediction and its interval at a confidence, for
    throughput (tokens/s) and E2E (s); measured candidates carry their measurement."""

    throughput_per_s: np.ndarray
    throughput_low: np.ndarray
    throughput_high: np.ndarray
    e2e_latency_s: np.ndarray
    e2e_low: np.ndarray
    e2e_high: np.ndarray
    throughput_log_sd: np.ndarray    # standard deviation of log T the interval implies (half-width / z)
    e2e_log_sd: np.ndarray
    multipliers: tuple[float, float]  # the conformal multipliers of throughput and E2E


def belief(candidates: pd.DataFrame, prior: PriorPrediction, measured_index: Sequence[int],
           measured_throughput: np.ndarray, measured_e2e_s: np.ndarray, measured_scatter: np.ndarray,
           confidence: float, kernel: ResidualKernel = ResidualKernel(),
           reference_scores: Sequence[float] = (), measured_runs: np.ndarray | None = None) -> Belief:
    """The corrected prediction of every candidate given the measured ones (module docstring).

    `measured_index` are row positions in `candidates`; `measured_scatter` each run's relative
    run-to-run scatter (one standard deviation, at least the kernel's noise), over the root of
    `measured_runs` (how many runs each measurement averages; one by default); `reference_scores`
    the kernel's out-of-sample extrapolation scores (`conformal_multiplier`)."""
    index = np.asarray(measured_index, dtype=int)
    coordinates = kernel.coordinates(candidates)
    models = candidates[col.MODEL].astype(str).to_numpy()
    curves = (candidates[col.MODEL].astype(str) + "|" + candidates[col.INPUT_LEN_NOMINAL].astype(str) + "|"
              + candidates[col.OUTPUT_LEN_NOMINAL].astype(str)).to_numpy()
    runs = np.ones(len(index)) if measured_runs is None else np.asarray(measured_runs, dtype=float)
    noise = np.maximum(np.asarray(measured_scatter, dtype=float), kernel.noise_sd) / np.sqrt(runs)
    z = float(norm.ppf(0.5 + confidence / 2.0))
    values = {}
    for name, prior_values, measured in (("throughput", prior.throughput_per_s, measured_throughput),
                                         ("e2e", prior.e2e_latency_s, measured_e2e_s)):
        log_prior = np.log(prior_values)
        residuals = np.log(np.asarray(measured, dtype=float)) - log_prior[index]
        process = ResidualProcess(kernel, coordinates[index], models[index], residuals, curves[index], noise)
        multiplier = conformal_multiplier(process.leave_one_out_scores(), confidence, reference_scores)
        mean, sd = process.predict(coordinates, models, kernel.noise_sd)
        centre, half = log_prior + mean, multiplier * sd
        centre[index], half[index] = np.log(np.asarray(measured, dtype=float)), z * noise
        point = np.exp(centre)
        point[index] = np.asarray(measured, dtype=float)      # a measurement is the fact itself, not exp(log)
        values[name] = (point, np.exp(centre - half), np.exp(centre + half), half / z, multiplier)
    t, e = values["throughput"], values["e2e"]
    return Belief(t[0], t[1], t[2], e[0], e[1], e[2], t[3], e[3], (t[4], e[4]))
