"""Calibrating SLIM's constants by nonlinear least squares on relative throughput errors.

One global parameter set is fit over every training configuration (all models
and lengths together, no per-model refit), minimising
``sum_i (T_pred,i / T_meas,i - 1)^2`` (paper Section VI-E) with
`scipy.optimize.least_squares` from a fixed grid of starting points.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from slim import columns as col
from slim.errors import ConfigError, FitError
from slim.model.equations import (
    FULL,
    GAMMA_REFERENCE_HIDDEN_DIM,
    PARAM_NAMES,
    Ablation,
    ArchitectureLookup,
    SlimParams,
    architectures_for_frame,
    e2e_components_s,
    frame_workload,
    kv_bytes_read_per_request,
    throughput_from_e2e,
)
from slim.model.metrics import mape_pct
from slim.specs.architecture import ArchitectureArrays
from slim.specs.hardware import Hardware

ETA_LOWER_BOUND = 1e-4
"""Efficiencies are physically in (0, 1]; the optimiser keeps them above this."""


@dataclass(frozen=True)
class FitParameter:
    """How the optimiser sees one SLIM constant.

    The optimiser works in ``unit_in_si`` units (milliseconds for ``alpha``,
    microseconds for ``gamma``) so every free variable is of order one.
    """

    name: str
    unit_in_si: float
    unit_label: str
    lower: float                  # bounds and starts are in optimiser units
    upper: float
    starts: tuple[float, ...]
    ablated_value_si: float       # value used when an ablation removes the term


FIT_PARAMETERS: tuple[FitParameter, ...] = (
    FitParameter("eta_compute", 1.0, "1", ETA_LOWER_BOUND, 1.0, (0.25, 0.75), 1.0),
    FitParameter("eta_memory", 1.0, "1", ETA_LOWER_BOUND, 1.0, (0.25, 0.75), 1.0),
    FitParameter("batch_offset", 1.0, "requests", 0.0, np.inf, (1.0, 16.0), 0.0),
    FitParameter("alpha_s_per_token", 1e-3, "ms/token", 0.0, np.inf, (0.5, 3.0), 0.0),
    FitParameter("gamma_s_per_token", 1e-6, "us/token/layer/(D/1024)^2", 0.0, np.inf, (10.0,), 0.0),
    FitParameter("t_fixed_s", 1.0, "s", 0.0, np.inf, (0.1,), 0.0),
)
assert tuple(parameter.name for parameter in FIT_PARAMETERS) == PARAM_NAMES

FIT_INPUT_COLUMNS = (col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.MEAN_BATCH_SIZE,
                     col.TOTAL_TOKEN_THROUGHPUT)


def free_parameter_names(ablation: Ablation) -> tuple[str, ...]:
    """Constants a fit under `ablation` can identify; the ablated terms' constants are fixed."""
    fixed = set()
    if not ablation.use_kv_scan:
        fixed |= {"eta_memory", "batch_offset"}
    if not ablation.use_dense_decode:
        fixed |= {"alpha_s_per_token", "gamma_s_per_token"}
    return tuple(name for name in PARAM_NAMES if name not in fixed)


@dataclass(frozen=True)
class SlimFit:
    """Result of `fit_slim`: parameters, uncertainties, fit quality and provenance.

    `standard_errors` maps every parameter name to its standard error in SI
    units; it is NaN for a parameter the data cannot identify (singular
    ``J^T J``) and for a parameter fixed by the ablation (see `free_parameters`).
    `residuals` are the relative throughput errors ``pred / meas - 1`` per row.
    `message` is the optimiser's termination message of the best start.
    """

    params: SlimParams
    standard_errors: dict[str, float]
    train_mape_throughput_pct: float
    train_mape_e2e_pct: float
    n_train_points: int
    cost: float
    message: str
    ablation: Ablation
    split_name: str
    free_parameters: tuple[str, ...]
    n_starts: int
    n_converged_starts: int
    residuals: np.ndarray = field(repr=False, compare=False)

    @property
    def converged(self) -> bool:
        """Every start of the grid converged (least-squares status > 0). A fit only exists
        when at least one did; False flags one whose optimum may depend on the start."""
        return self.n_converged_starts == self.n_starts

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form (NaN becomes ``None``)."""
        return {
            "split_name": self.split_name,
            "ablation": self.ablation.to_dict(),
            "params": self.params.to_dict(),
            "standard_errors": {name: _json_float(value) for name, value in self.standard_errors.items()},
            "free_parameters": list(self.free_parameters),
            "train_mape_throughput_pct": self.train_mape_throughput_pct,
            "train_mape_e2e_pct": self.train_mape_e2e_pct,
            "n_train_points": self.n_train_points,
            "cost": self.cost,
            "converged": self.converged,
            "message": self.message,
            "n_starts": self.n_starts,
            "n_converged_starts": self.n_converged_starts,
            "residuals": [float(value) for value in self.residuals],
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
                residuals=np.asarray(values["residuals"], dtype=float),
            )
        except KeyError as error:
            raise ConfigError(f"SLIM fit record lacks key {error}") from error


def _json_float(value: float) -> float | None:
    return None if not math.isfinite(value) else float(value)


@dataclass(frozen=True)
class _TrainingData:
    arch: ArchitectureArrays
    il: np.ndarray
    ol: np.ndarray
    batch: np.ndarray
    throughput: np.ndarray


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
        self.units = np.array([p.unit_in_si for p in FIT_PARAMETERS if p.name in free_names])
        # Derivatives of E2E that do not depend on the parameters.
        self.kv_bytes = kv_bytes_read_per_request(data.arch, data.il, data.ol)
        self.width_factor_ol = (data.arch.n_layers * (data.arch.hidden_dim / GAMMA_REFERENCE_HIDDEN_DIM) ** 2
                                * data.ol)

    def _predict(self, free_values: np.ndarray):
        params = _params_from_vector(free_values, self.free_names)
        data = self.data
        components = e2e_components_s(data.arch, self.hw, params, data.il, data.ol, data.batch, self.ablation)
        e2e_s = components.total_s
        return params, components, e2e_s, throughput_from_e2e(data.il, data.ol, data.batch, e2e_s)

    def residuals(self, free_values: np.ndarray) -> np.ndarray:
        return self._predict(free_values)[3] / self.data.throughput - 1.0

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


def _standard_errors_free(jacobian: np.ndarray, cost: float, n_points: int) -> np.ndarray:
    """``sqrt(diag((J^T J)^-1) s^2)`` with ``s^2 = 2 cost / (n - p)``, NaN where unidentifiable.

    A parameter with a component along a (numerically) null direction of ``J``
    cannot be identified; the others' variances come from the non-null part of
    the SVD, which equals the inverse on the identifiable subspace.
    """
    n_free = jacobian.shape[1]
    if n_points <= n_free:
        return np.full(n_free, np.nan)
    residual_variance = 2.0 * cost / (n_points - n_free)
    _, singular_values, vt = np.linalg.svd(jacobian, full_matrices=False)
    tolerance = max(jacobian.shape) * np.finfo(float).eps * (singular_values[0] if singular_values.size else 0.0)
    null = singular_values <= max(tolerance, 1e-300)
    variances = (vt[~null].T ** 2) @ (1.0 / singular_values[~null] ** 2) * residual_variance
    unidentifiable = (np.abs(vt[null]) > 1e-6).any(axis=0) if null.any() else np.zeros(n_free, dtype=bool)
    return np.where(unidentifiable, np.nan, np.sqrt(variances))


def fit_slim(frame: pd.DataFrame, architectures: ArchitectureLookup, hw: Hardware,
             ablation: Ablation = FULL, split_name: str = "?") -> SlimFit:
    """Fit one global `SlimParams` to measured throughput (paper Section VI-E, Eqs. 5-12).

    `frame` needs `columns.MODEL`, `INPUT_LEN_MEAN`, `OUTPUT_LEN_MEAN`,
    `MEAN_BATCH_SIZE` and `TOTAL_TOKEN_THROUGHPUT` (measured ``T``). Minimises
    ``sum (T_pred / T_meas - 1)^2`` under ``0 < eta_c, eta_m <= 1`` and
    ``B0, alpha, gamma, t_fixed >= 0`` from every start of the grid in
    `FIT_PARAMETERS`, keeping the converged start of lowest cost. Constants of
    terms removed by `ablation` are fixed (they cannot be identified).

    Raises `FitError` (naming `split_name`) on missing columns, NaN or
    non-positive inputs, fewer rows than free parameters, no converged start,
    or non-finite fitted parameters.
    """
    data = _training_data(frame, architectures, split_name)
    free_names = free_parameter_names(ablation)
    free_specs = [p for p in FIT_PARAMETERS if p.name in free_names]
    n_points = len(data.throughput)
    if n_points < len(free_names):
        raise FitError(
            f"split '{split_name}': {n_points} training point(s) for {len(free_names)} free SLIM "
            f"parameters ({', '.join(free_names)}); add training configurations"
        )
    objective = _Objective(data, hw, ablation, free_names)
    lower = np.array([p.lower for p in free_specs])
    upper = np.array([p.upper for p in free_specs])
    starts = sorted(set(itertools.product(*(p.starts for p in free_specs))))
    results = []
    for start in starts:
        try:
            result = least_squares(objective.residuals, np.array(start), jac=objective.jacobian,
                                   bounds=(lower, upper), method="trf", xtol=1e-10, ftol=1e-10,
                                   gtol=1e-10, max_nfev=2000)
        except ValueError as error:  # non-finite residuals at a start
            raise FitError(f"split '{split_name}': least squares failed from start {start}: {error}") from error
        results.append(result)
    converged = [result for result in results if result.status > 0]
    if not converged:
        raise FitError(
            f"split '{split_name}': no start of the SLIM fit converged "
            f"(last message: {results[-1].message}); check the training data"
        )
    best = min(converged, key=lambda result: result.cost)
    if not np.isfinite(best.x).all() or not np.isfinite(best.cost):
        raise FitError(f"split '{split_name}': SLIM fit produced non-finite parameters {best.x}")

    params = _params_from_vector(best.x, free_names)
    free_se = _standard_errors_free(best.jac, best.cost, n_points) * objective.units
    standard_errors = {name: math.nan for name in PARAM_NAMES}
    standard_errors.update({name: float(se) for name, se in zip(free_names, free_se)})

    residuals = objective.residuals(best.x)
    predicted = data.throughput * (1.0 + residuals)
    measured_e2e_s = data.batch * (data.il + data.ol) / data.throughput
    predicted_e2e_s = data.batch * (data.il + data.ol) / predicted
    return SlimFit(
        params=params,
        standard_errors=standard_errors,
        train_mape_throughput_pct=mape_pct(predicted, data.throughput),
        train_mape_e2e_pct=mape_pct(predicted_e2e_s, measured_e2e_s),
        n_train_points=n_points,
        cost=float(best.cost),
        message=str(best.message),
        ablation=ablation,
        split_name=split_name,
        free_parameters=free_names,
        n_starts=len(starts),
        n_converged_starts=len(converged),
        residuals=residuals,
    )
