"""The residual kernel of `slim tune`, chosen by out-of-sample evidence instead of by hand.

The belief (`slim.tune.belief`) models a prior's log residual ``r = log(measured / prior)``
as a Gaussian process with kernel `ResidualKernel`. Its scales decide how much a measured run says
about an unmeasured cap, and so how much `slim tune` measures and whether its bounds hold. They are
fitted by **type-II maximum likelihood** (the evidence): on each dataset of measured curves the
residuals of throughput and of E2E are independent draws of the process (the dataset's offset
included, since every accelerator has its own), and the fitted scales maximise

    sum over sets  -1/2 r^T (K + diag(s^2))^-1 r - 1/2 log det(K + diag(s^2))

with ``s`` each run's run-to-run scatter. The optimiser (L-BFGS-B, bounded, in log scale, one fixed
start: the hand-set `ResidualKernel()`) is deterministic; each fitted scale is rounded to
`SIGNIFICANT_DIGITS` so that a 1e-9 perturbation of the runs or another BLAS kernel cannot move it.

A kernel is fitted per prior (SIM's residuals are a few percent, SLIM's ideal roofline is off by a
factor of ten). The replay fits the kernel of dataset D on the other datasets only; the kernels
`slim tune` ships (`TUNE_KERNELS_FILE`) are fitted on every real dataset and name them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import yaml

from slim import columns as col
from slim.errors import ConfigError
from slim.tune.belief import PriorPrediction, ResidualKernel
from slim.tune.workload import curve_label
from slim.yaml_files import read_yaml_mapping

TUNE_KERNELS_FILE = Path(__file__).with_name("kernels.yaml")
"""The kernels `slim tune` uses, per prior (rule ``tuning_kernels`` writes a fresh copy)."""
SIGNIFICANT_DIGITS = 2
SCORE_QUANTILES = 200
SCALE_BOUNDS = (1e-3, 4.0)           # the standard deviations, natural-log units
LENGTH_SCALE_BOUNDS = (0.3, 8.0)     # doublings
CORRELATION_LOGIT_BOUND = 4.0
FITTED_SCALES = ("offset_sd", "slope_sd_per_doubling", "model_offset_sd", "model_slope_sd_per_doubling",
                 "smooth_sd")
RESIDUAL_COLUMNS = ("dataset", "policy", "curve", col.MODEL, col.MAX_NUM_SEQS, col.INPUT_LEN_MEAN,
                    col.OUTPUT_LEN_MEAN, "scatter", "log_residual_throughput", "log_residual_e2e")
"""One row per run and prior: what the kernel is fitted on (`residual_table`)."""


@dataclass(frozen=True)
class ResidualSet:
    """One independent draw of the residual process: one dataset's runs, one quantity."""

    coordinates: np.ndarray
    models: np.ndarray
    residuals: np.ndarray
    scatter: np.ndarray


def residual_table(runs: pd.DataFrame, prior: PriorPrediction, dataset: str, policy: str,
                   scatter: float) -> pd.DataFrame:
    """The log residuals of a prior on a dataset's runs (`RESIDUAL_COLUMNS`), in the runs' order;
    `runs` carries the configuration columns and the measured throughput and E2E."""
    return pd.DataFrame({
        "dataset": dataset, "policy": policy, "curve": curve_label(runs).to_numpy(),
        col.MODEL: runs[col.MODEL].astype(str).to_numpy(),
        col.MAX_NUM_SEQS: runs[col.MAX_NUM_SEQS].to_numpy(dtype=float),
        col.INPUT_LEN_MEAN: runs[col.INPUT_LEN_MEAN].to_numpy(dtype=float),
        col.OUTPUT_LEN_MEAN: runs[col.OUTPUT_LEN_MEAN].to_numpy(dtype=float), "scatter": scatter,
        "log_residual_throughput": np.log(runs[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float)
                                          / prior.throughput_per_s),
        "log_residual_e2e": np.log(runs[col.E2E_LATENCY_S].to_numpy(dtype=float) / prior.e2e_latency_s),
    }, columns=list(RESIDUAL_COLUMNS))


def residual_sets(table: pd.DataFrame, kernel: ResidualKernel = ResidualKernel()) -> list[ResidualSet]:
    """Per dataset of a `residual_table`, one set of throughput and one of E2E residuals (rows in
    a canonical order, so that the fit does not depend on the table's)."""
    sets = []
    for _, part in table.groupby("dataset", sort=True):
        part = part.sort_values(["curve", col.MAX_NUM_SEQS], kind="stable")
        coordinates = kernel.coordinates(part)
        models = part[col.MODEL].astype(str).to_numpy()
        scatter = np.maximum(part["scatter"].to_numpy(dtype=float), kernel.noise_sd)
        for column in ("log_residual_throughput", "log_residual_e2e"):
            sets.append(ResidualSet(coordinates, models, part[column].to_numpy(dtype=float), scatter))
    return sets


def _kernel_of(theta: np.ndarray, start: ResidualKernel) -> ResidualKernel:
    scales = dict(zip(FITTED_SCALES, np.exp(theta[:len(FITTED_SCALES)])))
    return replace(start, **{name: float(value) for name, value in scales.items()},
                   length_scale_log2=float(np.exp(theta[len(FITTED_SCALES)])),
                   cross_model_correlation=float(1.0 / (1.0 + np.exp(-theta[-1]))))


def negative_log_evidence(kernel: ResidualKernel, sets: Sequence[ResidualSet]) -> float:
    """``-log p(r | kernel)`` summed over independent sets, without the constant."""
    from scipy.linalg import cho_factor, cho_solve

    total = 0.0
    for data in sets:
        covariance = (kernel.covariance(data.coordinates, data.models, data.coordinates, data.models)
                      + np.diag(data.scatter ** 2))
        factor = cho_factor(covariance, lower=True)
        total += 0.5 * float(data.residuals @ cho_solve(factor, data.residuals)) + float(
            np.log(np.diag(factor[0])).sum())
    return total


def _rounded(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def fit_residual_kernel(sets: Sequence[ResidualSet], start: ResidualKernel = ResidualKernel()) -> ResidualKernel:
    """The kernel of largest evidence on `sets` (module docstring); `start` where there is no set."""
    from scipy.optimize import minimize

    if not sets:
        return start
    theta0 = np.r_[np.log([getattr(start, name) for name in FITTED_SCALES]), np.log(start.length_scale_log2),
                   math.log(start.cross_model_correlation / (1.0 - start.cross_model_correlation))]
    bounds = ([tuple(np.log(SCALE_BOUNDS))] * len(FITTED_SCALES) + [tuple(np.log(LENGTH_SCALE_BOUNDS))]
              + [(-CORRELATION_LOGIT_BOUND, CORRELATION_LOGIT_BOUND)])

    def objective(theta: np.ndarray) -> float:
        try:
            return negative_log_evidence(_kernel_of(theta, start), sets)
        except np.linalg.LinAlgError:
            return 1e12
    result = minimize(objective, theta0, method="L-BFGS-B", bounds=bounds)
    fitted = _kernel_of(result.x, start)
    return replace(fitted, **{name: _rounded(getattr(fitted, name))
                              for name in (*FITTED_SCALES, "length_scale_log2", "cross_model_correlation")})


def extrapolation_scores(table: pd.DataFrame, kernel: ResidualKernel) -> tuple[float, ...]:
    """How far the process extrapolates across caps, out of sample: on every curve of a
    `residual_table`, conditioned on its smallest cap alone and then with each other cap, the
    standardised errors ``|r - mean| / sd`` at the caps left out (the curve's other runs unseen, as
    in a session that tunes one workload), throughput and E2E. Every dataset weighs the same (a
    sweep of ten caps must not outvote curves of four): the `SCORE_QUANTILES` - 1 quantiles of the
    weighted scores at levels ``k / SCORE_QUANTILES``, or the scores themselves where there are
    fewer; sorted, to `SIGNIFICANT_DIGITS` + 1 digits."""
    from slim.tune.belief import ResidualProcess

    scores: list[float] = []
    weights: list[float] = []
    for _, dataset in table.groupby("dataset", sort=True):
        of_dataset: list[float] = []
        for _, curve in dataset.groupby("curve", sort=True):
            curve = curve.sort_values(col.MAX_NUM_SEQS, kind="stable")
            coordinates, models = kernel.coordinates(curve), curve[col.MODEL].astype(str).to_numpy()
            noise = np.maximum(curve["scatter"].to_numpy(dtype=float), kernel.noise_sd)
            same = np.zeros(len(curve))
            for column in ("log_residual_throughput", "log_residual_e2e"):
                residuals = curve[column].to_numpy(dtype=float)
                for other in range(len(curve)):
                    seen = [0] if other == 0 else [0, other]
                    unseen = [i for i in range(len(curve)) if i not in seen]
                    if not unseen:
                        continue
                    process = ResidualProcess(kernel, coordinates[seen], models[seen], residuals[seen], same[seen],
                                              noise[seen])
                    mean, sd = process.predict(coordinates[unseen], models[unseen], kernel.noise_sd)
                    of_dataset += (np.abs(residuals[unseen] - mean) / sd).tolist()
        scores += of_dataset
        weights += [1.0 / len(of_dataset)] * len(of_dataset)
    if len(scores) >= SCORE_QUANTILES:
        order = np.argsort(scores, kind="stable")
        ordered, cumulative = np.asarray(scores)[order], np.cumsum(np.asarray(weights)[order])
        levels = np.arange(1, SCORE_QUANTILES) / SCORE_QUANTILES * cumulative[-1]
        scores = ordered[np.minimum(np.searchsorted(cumulative, levels - 1e-12), len(ordered) - 1)].tolist()
    return tuple(sorted(float(f"{score:.{SIGNIFICANT_DIGITS + 1}g}") for score in scores))


# --- the kernels file -------------------------------------------------------------------------

@dataclass(frozen=True)
class FittedKernels:
    """One kernel per prior (a registered tuning predictor's name) and the datasets they were
    fitted on (none: the hand-set `ResidualKernel()`)."""

    kernels: Mapping[str, ResidualKernel]
    fitted_on: tuple[str, ...]
    scores: Mapping[str, tuple[float, ...]] = field(default_factory=dict)

    def kernel(self, predictor: str) -> ResidualKernel:
        return self.kernels.get(predictor, ResidualKernel())

    def extrapolation_scores(self, predictor: str) -> tuple[float, ...]:
        """The kernel's `extrapolation_scores` on the datasets it was fitted on (none: the normal
        quantile stands in)."""
        return tuple(self.scores.get(predictor, ()))

    def settings(self, predictor: str, base):
        """`base` (a `slim.tune.session.TuneSettings`) with this predictor's kernel and scores."""
        return replace(base, kernel=self.kernel(predictor), extrapolation_scores=self.extrapolation_scores(predictor))

    def to_yaml(self) -> str:
        document = {"description": "slim tune's residual kernels per prior, fitted by type-II maximum likelihood "
                                   "(slim.tune.kernel) on the log residuals of the datasets below",
                    "fitted_on": list(self.fitted_on),
                    "kernels": {name: {key: (list(value) if isinstance(value, tuple) else value)
                                       for key, value in asdict(kernel).items()}
                                for name, kernel in sorted(self.kernels.items())},
                    "extrapolation_scores": {name: list(scores) for name, scores in sorted(self.scores.items())}}
        return yaml.safe_dump(document, sort_keys=False, default_flow_style=None, width=110)


def fit_kernels(table: pd.DataFrame, policies: Mapping[str, str], exclude: Iterable[str] = ()) -> FittedKernels:
    """A kernel per prior on the datasets of a `residual_table` other than `exclude`; `policies` maps
    each replay policy (``tune_sim``) to its predictor's name (``sim``)."""
    excluded = set(exclude)
    kept = table[~table["dataset"].isin(excluded)]
    kernels, scores = {}, {}
    for policy, predictor in policies.items():
        part = kept[kept["policy"] == policy]
        if not part.empty:
            kernels[predictor] = fit_residual_kernel(residual_sets(part))
            scores[predictor] = extrapolation_scores(part, kernels[predictor])
    return FittedKernels(kernels, tuple(sorted(kept["dataset"].unique())), scores)


def load_kernels(path: str | Path = TUNE_KERNELS_FILE) -> FittedKernels:
    """The kernels file (`FittedKernels.to_yaml`)."""
    path = Path(path)
    raw = read_yaml_mapping(path, f"tuning kernels file not found: {path}")
    known = {field.name for field in fields(ResidualKernel)}
    kernels = {}
    for name, values in (raw.get("kernels") or {}).items():
        if not isinstance(values, dict) or set(values) - known:
            raise ConfigError(f"{path}: kernel '{name}' must be a mapping of {sorted(known)}")
        kernels[str(name)] = ResidualKernel(**{key: (tuple(value) if isinstance(value, list) else float(value))
                                               for key, value in values.items()})
    scores = {str(name): tuple(float(v) for v in values) for name, values in
              (raw.get("extrapolation_scores") or {}).items()}
    return FittedKernels(kernels, tuple(str(name) for name in raw.get("fitted_on") or ()), scores)
