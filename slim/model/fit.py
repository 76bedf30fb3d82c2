"""Calibrating SLIM's constants by nonlinear least squares on relative throughput errors.

One global parameter set is fit over every training configuration (all models and
lengths together, no per-model refit), minimising ``sum_i (T_pred,i / T_meas,i - 1)^2``
(paper Section VI-E, Eqs. 5-12) with `scipy.optimize.least_squares` from a fixed grid of
starting points, plus a weak roofline prior that makes the answer unique where the
training data leave directions of the parameter space undetermined (see `fit_slim`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import ConfigError, FitError
from slim.model.calibration import (
    POLISH_TOLERANCE,
    VALLEY_SAMPLES,
    VALLEY_SEED,
    CalibrationResult,
    IdentifiabilitySummary,
    LastPoint,
    Parameter,
    best_of_starts,
    bounded_least_squares,
    bounds_of,
    equivalent_solutions,
    identifiability_summary,
    json_float,
    parameter_uncertainty,
    units_of,
)
from slim.model.equations import (
    FULL,
    GAMMA_REFERENCE_HIDDEN_DIM,
    PARAM_NAMES,
    Ablation,
    ArchitectureLookup,
    SlimParams,
    architectures_for_frame,
    components_at,
    frame_workload,
    kv_bytes_read_per_request,
    prefill_flops,
    throughput_from_e2e,
    workload_terms,
)
from slim.model.metrics import mape_pct
from slim.specs.architecture import ArchitectureArrays
from slim.specs.hardware import Hardware

ETA_LOWER_BOUND = 1e-4
"""Efficiencies are physically in (0, 1]; the optimiser keeps them above this."""

ROOFLINE_PRIOR_WEIGHT = 1e-6
"""``lambda``: weight of the roofline prior against the data term (see `fit_slim`).

Small enough that it moves no identified quantity measurably (validation MAPEs of the
public traces change by at most 0.001 points against the unregularised fit), large
enough that the optimum along an unidentified direction is fixed far above
floating-point noise (the prior's curvature there is 1e10 times the noise level)."""

@dataclass(frozen=True)
class FitParameter(Parameter):
    """A SLIM constant (`slim.model.calibration.Parameter`; ``alpha`` in milliseconds, ``gamma`` in
    microseconds) with its starting values (optimiser units) and the value it takes when an
    ablation removes its term (it then does not vary: `free_parameter_names`)."""

    starts: tuple[float, ...] = ()
    ablated_value_si: float = 0.0


FIT_PARAMETERS: tuple[FitParameter, ...] = (
    FitParameter("eta_compute", 1.0, "1", ETA_LOWER_BOUND, 1.0, ideal=1.0, starts=(0.25, 0.75), ablated_value_si=1.0),
    FitParameter("eta_memory", 1.0, "1", ETA_LOWER_BOUND, 1.0, ideal=1.0, starts=(0.25, 0.75), ablated_value_si=1.0),
    FitParameter("batch_offset", 1.0, "requests", 0.0, np.inf, starts=(1.0, 16.0)),
    FitParameter("alpha_s_per_token", 1e-3, "ms/token", 0.0, np.inf, starts=(0.5, 3.0)),
    FitParameter("gamma_s_per_token", 1e-6, "us/token/layer/(D/1024)^2", 0.0, np.inf, starts=(10.0,)),
    FitParameter("t_fixed_s", 1.0, "s", 0.0, np.inf, starts=(0.1,)),
)
assert tuple(parameter.name for parameter in FIT_PARAMETERS) == PARAM_NAMES

FIT_INPUT_COLUMNS = (col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.MEAN_BATCH_SIZE,
                     col.TOTAL_TOKEN_THROUGHPUT)


def fit_parameters(ablation: Ablation) -> tuple[FitParameter, ...]:
    """`FIT_PARAMETERS` under `ablation`: the ablated terms' constants do not vary (they cannot be
    identified and take their ``ablated_value_si``)."""
    fixed = set()
    if not ablation.use_kv_scan:
        fixed |= {"eta_memory", "batch_offset"}
    if not ablation.use_dense_decode:
        fixed |= {"alpha_s_per_token", "gamma_s_per_token"}
    return tuple(replace(parameter, vary=parameter.name not in fixed) for parameter in FIT_PARAMETERS)


def free_parameter_names(ablation: Ablation) -> tuple[str, ...]:
    """Constants a fit under `ablation` can identify (`fit_parameters` that vary)."""
    return tuple(parameter.name for parameter in fit_parameters(ablation) if parameter.vary)


def start_grid(free_specs: Sequence[FitParameter]) -> list[tuple[float, ...]]:
    """Every combination of the free parameters' starting values, in a fixed order."""
    return sorted(set(itertools.product(*(parameter.starts for parameter in free_specs))))


def start_at(params: SlimParams) -> Callable[[Sequence[FitParameter]], list[tuple[float, ...]]]:
    """A one-point start "grid" at `params` (in optimiser units, clipped to the bounds).

    For refits on nearly the same data (leave-one-curve-out), starting from the full fit
    replaces the 16-start grid: one refinement instead of sixteen.
    """
    def starts(free_specs: Sequence[FitParameter]) -> list[tuple[float, ...]]:
        return [tuple(float(np.clip(getattr(params, p.name) / p.unit_in_si, p.lower, p.upper)) for p in free_specs)]

    return starts


@dataclass(frozen=True)
class Identifiability(IdentifiabilitySummary):
    """What the training data of a fit determine (see `fit_slim`).

    ``unidentified_dimensions`` is the number of directions of the free, not-at-bound
    parameters along which the training cost is flat (relative singular value below
    `slim.model.calibration.NULL_SINGULAR_VALUE_RATIO`); ``unidentified_parameters`` are the parameters with a
    share of at least 1e-3 in that null space (basis-independent: the diagonal of its
    projector). ``at_bounds`` are free parameters the optimum pushed onto a bound.
    ``equivalent_params`` are distinct training-equivalent solutions (data cost within
    `slim.model.calibration.EQUIVALENT_COST_TOLERANCE` of the fit's), found by projecting `VALLEY_SAMPLES`
    seeded reference points onto that set; they bound what the data cannot decide.
    """

    equivalent_params: tuple[SlimParams, ...]

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary_dict(),
                "equivalent_params": [params.to_dict() for params in self.equivalent_params]}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "Identifiability":
        return cls(
            unidentified_dimensions=int(values["unidentified_dimensions"]),
            unidentified_parameters=tuple(values["unidentified_parameters"]),
            at_bounds=tuple(values["at_bounds"]),
            equivalent_params=tuple(SlimParams.from_dict(p) for p in values["equivalent_params"]),
        )


@dataclass(frozen=True)
class SlimFit(CalibrationResult):
    """Result of `fit_slim`: parameters, uncertainties, identifiability, fit quality and provenance.

    `standard_errors` (`CalibrationResult`) maps every parameter name to its standard error; it
    is NaN too for a parameter fixed by the ablation (see `free_parameters`).
    `covariance` is the parameters' covariance on the identified subspace (`parameter_uncertainty`):
    a square matrix over `free_parameters`, in SI units, whose diagonal is the square of
    every finite standard error; `slim.model.uncertainty` carries it to predictions.
    """

    params: SlimParams
    train_mape_e2e_pct: float
    ablation: Ablation
    free_parameters: tuple[str, ...]
    identifiability: Identifiability
    covariance: np.ndarray = field(repr=False, compare=False)

    @property
    def residual_dof(self) -> int:
        """``n - p``: training points less free parameters, the residual variance's degrees of freedom."""
        return self.n_train_points - len(self.free_parameters)

    @property
    def residual_variance(self) -> float:
        """``s^2 = 2 cost / (n - p)``, the variance of the relative throughput residuals (NaN if n <= p)."""
        return 2.0 * self.cost / self.residual_dof if self.residual_dof > 0 else math.nan

    def fitted_values(self) -> dict[str, float]:
        return {name: float(getattr(self.params, name)) for name in self.free_parameters}

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (NaN becomes ``None``)."""
        return {
            "split_name": self.split_name,
            "ablation": self.ablation.to_dict(),
            "params": self.params.to_dict(),
            "standard_errors": {name: json_float(value) for name, value in self.standard_errors.items()},
            "free_parameters": list(self.free_parameters),
            "train_mape_throughput_pct": self.train_mape_throughput_pct,
            "train_mape_e2e_pct": self.train_mape_e2e_pct,
            "n_train_points": self.n_train_points,
            "cost": self.cost,
            "converged": self.converged,
            "message": self.message,
            "n_starts": self.n_starts,
            "n_converged_starts": self.n_converged_starts,
            "identifiability": self.identifiability.to_dict(),
            "residuals": [float(value) for value in self.residuals],
            "covariance": [[json_float(value) for value in row] for row in self.covariance],
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "SlimFit":
        """Inverse of `to_dict`."""
        try:
            return cls(
                params=SlimParams.from_dict(values["params"]),
                standard_errors={name: (math.nan if value is None else float(value))
                                 for name, value in values["standard_errors"].items()},
                train_mape_throughput_pct=float(values["train_mape_throughput_pct"]),
                train_mape_e2e_pct=float(values["train_mape_e2e_pct"]),
                n_train_points=int(values["n_train_points"]),
                cost=float(values["cost"]),
                message=str(values["message"]),
                ablation=Ablation.from_dict(values["ablation"]),
                split_name=str(values["split_name"]),
                free_parameters=tuple(values["free_parameters"]),
                n_starts=int(values["n_starts"]),
                n_converged_starts=int(values["n_converged_starts"]),
                identifiability=Identifiability.from_dict(values["identifiability"]),
                residuals=np.asarray(values["residuals"], dtype=float),
                covariance=np.array([[math.nan if value is None else float(value) for value in row]
                                     for row in values["covariance"]], dtype=float).reshape(
                                         len(values["free_parameters"]), len(values["free_parameters"])),
            )
        except KeyError as error:
            raise ConfigError(f"SLIM fit record lacks key {error}") from error


@dataclass(frozen=True)
class _TrainingData:
    arch: ArchitectureArrays
    il: np.ndarray
    ol: np.ndarray
    batch: np.ndarray
    throughput: np.ndarray

    @property
    def measured_e2e_s(self) -> np.ndarray:
        """Little's-law E2E implied by the measured throughput (Eq. 6 inverted)."""
        return self.batch * (self.il + self.ol) / self.throughput


def _training_data(frame: pd.DataFrame, architectures: ArchitectureLookup, split_name: str) -> _TrainingData:
    col.require_columns(frame, FIT_INPUT_COLUMNS, f"split '{split_name}': training table", FitError)
    if len(frame) == 0:
        raise FitError(f"split '{split_name}': training table is empty; check the split's selection")
    il, ol, batch = frame_workload(frame)
    throughput = frame[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float)
    checks = {col.INPUT_LEN_MEAN: (il, 0.0), col.OUTPUT_LEN_MEAN: (ol, 0.0),
              col.MEAN_BATCH_SIZE: (batch, 0.0), col.TOTAL_TOKEN_THROUGHPUT: (throughput, 0.0)}
    for name, (values, minimum) in checks.items():
        bad = ~(np.isfinite(values) & (values > minimum))
        if bad.any():
            rows = list(frame.index[bad][:5])
            raise FitError(
                f"split '{split_name}': column '{name}' has {int(bad.sum())} row(s) that are NaN, "
                f"infinite or not positive (first index labels: {rows}); drop them before fitting"
            )
    try:
        arch = architectures_for_frame(architectures, frame)
    except ConfigError as error:
        raise FitError(f"split '{split_name}': {error}") from error
    return _TrainingData(arch, il, ol, batch, throughput)


def _params_from_vector(free_values: np.ndarray, free_names: tuple[str, ...]) -> SlimParams:
    values = {parameter.name: parameter.ablated_value_si for parameter in FIT_PARAMETERS}
    units = {parameter.name: parameter.unit_in_si for parameter in FIT_PARAMETERS}
    for name, value in zip(free_names, free_values):
        values[name] = float(value) * units[name]
    return SlimParams(**values)


class _Objective:
    """Relative throughput residuals and their analytic Jacobian in optimiser units."""

    def __init__(self, data: _TrainingData, hw: Hardware, ablation: Ablation, free_names: tuple[str, ...]):
        self.data, self.hw, self.ablation, self.free_names = data, hw, ablation, free_names
        self.units = units_of([p for p in FIT_PARAMETERS if p.name in free_names])
        # Derivatives of E2E that do not depend on the parameters.
        self.kv_bytes = kv_bytes_read_per_request(data.arch, data.il, data.ol)
        self.width_factor_ol = (data.arch.n_layers * (data.arch.hidden_dim / GAMMA_REFERENCE_HIDDEN_DIM) ** 2
                                * data.ol)
        self._terms = workload_terms(data.arch, data.il, data.ol, data.batch)   # the same at every trial point
        self._predict = LastPoint(self._predict_at)

    def _predict_at(self, free_values: np.ndarray):
        params = _params_from_vector(free_values, self.free_names)
        data = self.data
        components = components_at(self._terms, self.hw, params, self.ablation)
        e2e_s = components.total_s
        return params, components, e2e_s, throughput_from_e2e(data.il, data.ol, data.batch, e2e_s)

    def residuals(self, free_values: np.ndarray) -> np.ndarray:
        return self._predict(free_values)[3] / self.data.throughput - 1.0

    def cost(self, free_values: np.ndarray) -> float:
        residuals = self.residuals(free_values)
        return 0.5 * float(residuals @ residuals)

    def jacobian(self, free_values: np.ndarray) -> np.ndarray:
        params, components, e2e_s, predicted = self._predict(free_values)
        d_e2e = {
            "eta_compute": -components.prefill_s / params.eta_compute,
            "eta_memory": -components.kv_scan_s / params.eta_memory,
            "batch_offset": self.kv_bytes / (params.eta_memory * self.hw.hbm_bandwidth_bytes_per_s),
            "alpha_s_per_token": self.data.ol,
            "gamma_s_per_token": self.width_factor_ol,
            "t_fixed_s": np.ones_like(e2e_s),
        }
        # r = T / T_meas - 1 with T = B (IL + OL) / E2E, so dr/dE2E = -(T / T_meas) / E2E.
        d_residual_d_e2e = -(predicted / self.data.throughput) / e2e_s
        columns = [d_residual_d_e2e * d_e2e[name] for name in self.free_names]
        return np.column_stack(columns) * self.units


@dataclass(frozen=True)
class RooflineReference:
    """A point in the prior's linear coordinates (see `_RooflinePrior`).

    ``inverse_eta_*`` are ``1 / eta``; ``kv_offset_over_eta`` is ``B0 / eta_m``; the
    rest are the SI constants. The ideal roofline machine is ``(1, 1, 0, 0, 0, 0)``.
    """

    inverse_eta_compute: float = 1.0
    inverse_eta_memory: float = 1.0
    kv_offset_over_eta: float = 0.0
    alpha_s_per_token: float = 0.0
    gamma_s_per_token: float = 0.0
    t_fixed_s: float = 0.0


IDEAL_ROOFLINE = RooflineReference()


class _RooflinePrior:
    """Residuals ``sqrt(lambda) excess_ij / E2E_i`` of the time each term adds beyond a reference.

    Per training row ``i`` and free term ``j`` the excess is the term's time minus the
    time it would take at the reference, in coordinates in which E2E is linear:
    ``F_pre/F_max (1/eta_c - r)``, ``B M_dec/BW_max (1/eta_m - r)``,
    ``M_dec/BW_max (B0/eta_m - r)``, ``OL (alpha - r)``, ``L (D/1024)^2 OL (gamma - r)``,
    ``t_fixed - r`` (Eq. 7, 9, 10, 5). Divided by the measured E2E, each is a share of the
    measured latency, so the prior is unit-free. Being a positive-definite quadratic in
    those coordinates, it has a unique minimiser on every set of training-equivalent
    solutions (an affine subspace in the same coordinates, cut by the bounds).
    """

    def __init__(self, objective: _Objective, weight: float, reference: RooflineReference = IDEAL_ROOFLINE):
        data, hw = objective.data, objective.hw
        self.objective, self.reference = objective, reference
        self.root_weight_over_e2e = math.sqrt(weight) / data.measured_e2e_s
        self.ideal_prefill_s = prefill_flops(data.arch, data.il, data.batch) / hw.peak_flops_per_s
        self.kv_per_request_s = objective.kv_bytes / hw.hbm_bandwidth_bytes_per_s
        self.ideal_kv_scan_s = data.batch * self.kv_per_request_s
        self._terms = LastPoint(self._terms_at)

    def _terms_at(self, free_values: np.ndarray) -> list[tuple[np.ndarray, dict[str, np.ndarray]]]:
        """(excess seconds per row, {parameter: d excess / d parameter in SI}) per free term."""
        names = self.objective.free_names
        params = _params_from_vector(free_values, names)
        ref, data = self.reference, self.objective.data
        ones = np.ones_like(data.il)
        terms = []
        if "eta_compute" in names:
            terms.append((self.ideal_prefill_s * (1.0 / params.eta_compute - ref.inverse_eta_compute),
                          {"eta_compute": -self.ideal_prefill_s / params.eta_compute**2}))
        if "eta_memory" in names:
            terms.append((self.ideal_kv_scan_s * (1.0 / params.eta_memory - ref.inverse_eta_memory),
                          {"eta_memory": -self.ideal_kv_scan_s / params.eta_memory**2}))
        if "batch_offset" in names:
            terms.append((self.kv_per_request_s * (params.batch_offset / params.eta_memory - ref.kv_offset_over_eta),
                          {"batch_offset": self.kv_per_request_s / params.eta_memory,
                           "eta_memory": -self.kv_per_request_s * params.batch_offset / params.eta_memory**2}))
        if "alpha_s_per_token" in names:
            terms.append((data.ol * (params.alpha_s_per_token - ref.alpha_s_per_token),
                          {"alpha_s_per_token": data.ol}))
        if "gamma_s_per_token" in names:
            terms.append((self.objective.width_factor_ol * (params.gamma_s_per_token - ref.gamma_s_per_token),
                          {"gamma_s_per_token": self.objective.width_factor_ol}))
        if "t_fixed_s" in names:
            terms.append((ones * (params.t_fixed_s - ref.t_fixed_s), {"t_fixed_s": ones}))
        return terms

    def residuals(self, free_values: np.ndarray) -> np.ndarray:
        return np.concatenate([excess * self.root_weight_over_e2e for excess, _ in self._terms(free_values)])

    def jacobian(self, free_values: np.ndarray) -> np.ndarray:
        names = self.objective.free_names
        blocks = []
        for _, derivatives in self._terms(free_values):
            block = np.zeros((len(self.root_weight_over_e2e), len(names)))
            for name, derivative in derivatives.items():
                block[:, names.index(name)] = derivative * self.root_weight_over_e2e
            blocks.append(block)
        return np.vstack(blocks) * self.objective.units


def _solver(objective: _Objective, lower: np.ndarray, upper: np.ndarray, split_name: str,
            reference: RooflineReference = IDEAL_ROOFLINE) -> Callable[[np.ndarray, float], Any]:
    """``solve(start, tolerance)`` of the data term plus the roofline prior toward `reference`."""
    prior = _RooflinePrior(objective, ROOFLINE_PRIOR_WEIGHT, reference)

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.concatenate([objective.residuals(x), prior.residuals(x)])

    def jacobian(x: np.ndarray) -> np.ndarray:
        return np.vstack([objective.jacobian(x), prior.jacobian(x)])

    return lambda start, tolerance: bounded_least_squares(residuals, jacobian, start, lower, upper, tolerance,
                                                          f"split '{split_name}': least squares failed")


def _valley_references(prior: _RooflinePrior, rng: np.random.Generator, count: int) -> list[RooflineReference]:
    """Seeded references spread over the physically admissible box.

    Efficiencies are drawn uniformly in ``[ETA_LOWER_BOUND, 1]``; each overhead constant
    uniformly between zero and the value at which its term alone would take the median
    measured E2E of the training rows.
    """
    data, objective = prior.objective.data, prior.objective
    e2e_s = data.measured_e2e_s
    caps = (float(np.median(e2e_s / prior.kv_per_request_s)), float(np.median(e2e_s / data.ol)),
            float(np.median(e2e_s / objective.width_factor_ol)), float(np.median(e2e_s)))
    references = []
    for _ in range(count):
        draws = rng.uniform(size=6)
        references.append(RooflineReference(
            inverse_eta_compute=1.0 / (ETA_LOWER_BOUND + draws[0] * (1.0 - ETA_LOWER_BOUND)),
            inverse_eta_memory=1.0 / (ETA_LOWER_BOUND + draws[1] * (1.0 - ETA_LOWER_BOUND)),
            kv_offset_over_eta=draws[2] * caps[0], alpha_s_per_token=draws[3] * caps[1],
            gamma_s_per_token=draws[4] * caps[2], t_fixed_s=draws[5] * caps[3]))
    return references


def _identifiability(objective: _Objective, best_x: np.ndarray, lower: np.ndarray, upper: np.ndarray,
                     split_name: str, sample_valley: bool) -> Identifiability:
    names = objective.free_names
    summary = identifiability_summary(names, best_x, lower, upper, objective.jacobian(best_x))
    equivalent = []
    if summary.unidentified_dimensions and sample_valley:
        references = _valley_references(_RooflinePrior(objective, ROOFLINE_PRIOR_WEIGHT),
                                        np.random.default_rng(VALLEY_SEED), VALLEY_SAMPLES)
        equivalent = equivalent_solutions(
            lambda reference: _solver(objective, lower, upper, split_name, reference)(best_x, POLISH_TOLERANCE),
            references, objective.cost, best_x, len(objective.data.il))
    return Identifiability(summary.unidentified_dimensions, summary.unidentified_parameters, summary.at_bounds,
                           tuple(_params_from_vector(x, names) for x in equivalent))


def fit_slim(frame: pd.DataFrame, architectures: ArchitectureLookup, hw: Hardware,
             ablation: Ablation = FULL, split_name: str = "?",
             starts: Callable[[Sequence[FitParameter]], list[tuple[float, ...]]] | None = None,
             sample_valley: bool = True) -> SlimFit:
    """Fit one global `SlimParams` to measured throughput (paper Section VI-E, Eqs. 5-12).

    `frame` needs `columns.MODEL`, `INPUT_LEN_MEAN`, `OUTPUT_LEN_MEAN`,
    `MEAN_BATCH_SIZE` and `TOTAL_TOKEN_THROUGHPUT` (measured ``T``). Minimises

        ``0.5 sum_i (T_pred,i / T_meas,i - 1)^2 + 0.5 lambda sum_i sum_j (x_ij / E2E_i)^2``

    under ``0 < eta_c, eta_m <= 1`` and ``B0, alpha, gamma, t_fixed >= 0`` from every
    start of ``starts(free_specs)`` (default `start_grid`, the grid in `FIT_PARAMETERS`), keeping the start of lowest
    objective and refining it with tolerance `POLISH_TOLERANCE`. Constants of terms removed
    by `ablation` are fixed (they cannot be identified).

    **The identifiability rule.** The second sum is a weak prior toward the ideal roofline
    machine: ``x_ij`` is the time term ``j`` adds to row ``i`` beyond the ideal roofline
    (efficiencies of one, no offset, no dense-decode or fixed overhead), as a share of the
    row's measured E2E (`_RooflinePrior`), with ``lambda = ROOFLINE_PRIOR_WEIGHT = 1e-6``.
    Where the training data determine the parameters, it changes nothing measurable. Where
    they do not (e.g. two models at one output length: ``t_fixed + alpha OL``,
    ``gamma L (D/1024)^2 OL`` and ``B0 M_dec`` act as per-model constants, three unknowns
    from two models), every point of the resulting valley fits equally well, and the rule
    picks the one whose overhead terms account for the least time: the unique minimiser of
    the prior on the valley. The fit is then a function of the data alone, not of the
    BLAS kernel, the start order or floating-point noise.

    What the data cannot decide is recorded in `SlimFit.identifiability`: the unidentified
    directions (from the SVD of the data Jacobian), the parameters on a bound, and a seeded
    sample of training-equivalent solutions (data cost within `slim.model.calibration.EQUIVALENT_COST_TOLERANCE`),
    over which a validation MAPE can be given as a range. Sampling costs `VALLEY_SAMPLES`
    refinements; callers that use only the chosen fit (the advisor) pass
    ``sample_valley=False`` and get the directions without the sample.

    Raises `FitError` (naming `split_name`) on missing columns, NaN or
    non-positive inputs, fewer rows than free parameters, no converged start,
    or non-finite fitted parameters.
    """
    data = _training_data(frame, architectures, split_name)
    free_names = free_parameter_names(ablation)
    free_specs = [p for p in fit_parameters(ablation) if p.vary]
    n_points = len(data.throughput)
    if n_points < len(free_names):
        raise FitError(
            f"split '{split_name}': {n_points} training point(s) for {len(free_names)} free SLIM "
            f"parameters ({', '.join(free_names)}); add training configurations"
        )
    objective = _Objective(data, hw, ablation, free_names)
    lower, upper = bounds_of(free_specs)
    search = best_of_starts(_solver(objective, lower, upper, split_name), (starts or start_grid)(free_specs),
                            f"split '{split_name}': no start of the SLIM fit converged")
    best = search.best
    if not np.isfinite(best.x).all() or not np.isfinite(best.cost):
        raise FitError(f"split '{split_name}': SLIM fit produced non-finite parameters {best.x}")

    params = _params_from_vector(best.x, free_names)
    cost = objective.cost(best.x)
    uncertainty = parameter_uncertainty(objective.jacobian(best.x), cost, n_points)
    free_se = uncertainty.standard_errors * objective.units
    covariance = uncertainty.covariance * np.outer(objective.units, objective.units)
    standard_errors = {name: math.nan for name in PARAM_NAMES}
    standard_errors.update({name: float(se) for name, se in zip(free_names, free_se)})

    residuals = objective.residuals(best.x)
    predicted = data.throughput * (1.0 + residuals)
    predicted_e2e_s = data.batch * (data.il + data.ol) / predicted
    return SlimFit(
        params=params,
        standard_errors=standard_errors,
        train_mape_throughput_pct=mape_pct(predicted, data.throughput),
        train_mape_e2e_pct=mape_pct(predicted_e2e_s, data.measured_e2e_s),
        n_train_points=n_points,
        cost=cost,
        message=str(best.message),
        ablation=ablation,
        split_name=split_name,
        free_parameters=free_names,
        n_starts=search.n_starts,
        n_converged_starts=search.n_converged_starts,
        identifiability=_identifiability(objective, best.x, lower, upper, split_name, sample_valley),
        residuals=residuals,
        covariance=covariance,
    )
