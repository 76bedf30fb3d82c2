"""Calibrating SLIM's constants by nonlinear least squares on relative throughput errors.

One global parameter set is fit over every training configuration (all models and
lengths together, no per-model refit), minimising ``sum_i (T_pred,i / T_meas,i - 1)^2``
(paper Section VI-E, Eqs. 5-12) plus a weak roofline prior that makes the answer unique where
the training data leave directions of the parameter space undetermined (see `fit_slim`). This
module is SLIM's problem definition (`SlimProblem`); the method is `slim.model.calibration`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import ConfigError, FitError
from slim.model.calibration import (
    CalibrationProblem,
    CalibrationResult,
    Excess,
    LastPoint,
    Parameter,
    calibrate,
    float_of_json,
    json_float,
    start_grid,
)
from slim.model.calibration import start_at as start_at
from slim.model.equations import (
    FULL,
    PARAM_NAMES,
    Ablation,
    ArchitectureLookup,
    SlimParams,
    WorkloadTerms,
    components_at,
    frame_terms,
    frame_workload,
    throughput_from_e2e,
)
from slim.model.identifiability import residual_variance
from slim.model.metrics import mape_pct
from slim.specs.hardware import Hardware

ETA_LOWER_BOUND = 1e-4
"""Efficiencies are physically in (0, 1]; the optimiser keeps them above this."""

FIT_PARAMETERS: tuple[Parameter, ...] = (
    Parameter("eta_compute", 1.0, "1", ETA_LOWER_BOUND, 1.0, ideal=1.0, starts=(0.25, 0.75)),
    Parameter("eta_memory", 1.0, "1", ETA_LOWER_BOUND, 1.0, ideal=1.0, starts=(0.25, 0.75)),
    Parameter("batch_offset", 1.0, "requests", 0.0, np.inf, starts=(1.0, 16.0)),
    Parameter("alpha_s_per_token", 1e-3, "ms/token", 0.0, np.inf, starts=(0.5, 3.0)),
    Parameter("gamma_s_per_token", 1e-6, "us/token/layer/(D/1024)^2", 0.0, np.inf, starts=(10.0,)),
    Parameter("t_fixed_s", 1.0, "s", 0.0, np.inf, starts=(0.1,)),
)
"""SLIM's constants in optimiser units (``alpha`` in milliseconds, ``gamma`` in microseconds); one
an ablation removes the term of takes its ideal value (`fit_parameters`)."""
assert tuple(parameter.name for parameter in FIT_PARAMETERS) == PARAM_NAMES

FIT_INPUT_COLUMNS = (col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.MEAN_BATCH_SIZE,
                     col.TOTAL_TOKEN_THROUGHPUT)


def fit_parameters(ablation: Ablation) -> tuple[Parameter, ...]:
    """`FIT_PARAMETERS` under `ablation`: the ablated terms' constants do not vary (they cannot be
    identified and take their ideal value)."""
    fixed = set()
    if not ablation.use_kv_scan:
        fixed |= {"eta_memory", "batch_offset"}
    if not ablation.use_dense_decode:
        fixed |= {"alpha_s_per_token", "gamma_s_per_token"}
    return tuple(replace(parameter, vary=parameter.name not in fixed) for parameter in FIT_PARAMETERS)


def free_parameter_names(ablation: Ablation) -> tuple[str, ...]:
    """Constants a fit under `ablation` can identify (`fit_parameters` that vary)."""
    return tuple(parameter.name for parameter in fit_parameters(ablation) if parameter.vary)


@dataclass(frozen=True)
class SlimFit(CalibrationResult):
    """Result of `fit_slim`: parameters, uncertainties, identifiability, fit quality and provenance.

    `standard_errors` (`CalibrationResult`) maps every parameter name to its standard error; it
    is NaN too for a parameter fixed by the ablation (see `free_parameters`). The training-equivalent
    solutions (`identifiability.equivalent`) are `SlimParams`.
    `covariance` is the parameters' covariance on the identified subspace (`parameter_uncertainty`):
    a square matrix over `free_parameters`, in SI units, whose diagonal is the square of
    every finite standard error; `slim.model.uncertainty` carries it to predictions.
    """

    params: SlimParams
    train_mape_e2e_pct: float
    ablation: Ablation
    free_parameters: tuple[str, ...]
    covariance: np.ndarray = field(repr=False, compare=False)

    VALUES_KEY: ClassVar[str] = "params"
    encode = staticmethod(SlimParams.to_dict)
    decode = staticmethod(SlimParams.from_dict)

    @property
    def residual_dof(self) -> int:
        """``n - p``: training points less free parameters, the residual variance's degrees of freedom."""
        return self.n_train_points - len(self.free_parameters)

    @property
    def residual_variance(self) -> float:
        """``s^2 = 2 cost / (n - p)``, the variance of the relative throughput residuals (NaN if n <= p)."""
        return residual_variance(self.cost, self.residual_dof)

    def fitted_values(self) -> dict[str, float]:
        return {name: float(getattr(self.params, name)) for name in self.free_parameters}

    def own_dict(self) -> dict[str, Any]:
        return {"ablation": self.ablation.to_dict(), "free_parameters": list(self.free_parameters),
                "train_mape_e2e_pct": self.train_mape_e2e_pct,
                "covariance": [[json_float(value) for value in row] for row in self.covariance]}

    @classmethod
    def own_fields(cls, record: Mapping[str, Any]) -> dict[str, Any]:
        n_free = len(record["free_parameters"])
        return {"ablation": Ablation.from_dict(record["ablation"]), "free_parameters": tuple(record["free_parameters"]),
                "train_mape_e2e_pct": float(record["train_mape_e2e_pct"]),
                "covariance": np.array([[float_of_json(value) for value in row] for row in record["covariance"]],
                                       dtype=float).reshape(n_free, n_free)}


@dataclass(frozen=True)
class _TrainingData:
    terms: WorkloadTerms
    il: np.ndarray
    ol: np.ndarray
    batch: np.ndarray
    throughput: np.ndarray

    @property
    def measured_e2e_s(self) -> np.ndarray:
        """Little's-law E2E implied by the measured throughput (Eq. 6 inverted)."""
        return self.batch * (self.il + self.ol) / self.throughput


def _training_data(frame: pd.DataFrame, architectures: ArchitectureLookup, hw: Hardware,
                   split_name: str) -> _TrainingData:
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
        terms = frame_terms(architectures, hw, frame)
    except ConfigError as error:
        raise FitError(f"split '{split_name}': {error}") from error
    return _TrainingData(terms, il, ol, batch, throughput)


@dataclass(frozen=True)
class RooflineReference:
    """A point in the prior's linear coordinates (see `SlimProblem.excess`).

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


class SlimProblem(CalibrationProblem):
    """SLIM's problem: relative throughput residuals of Eqs. 5-12 and their analytic Jacobian in
    optimiser units, over the constants `ablation` leaves free."""

    label = "SLIM fit"
    ideal_reference = IDEAL_ROOFLINE

    def __init__(self, data: _TrainingData, hw: Hardware, ablation: Ablation, split_name: str = "?"):
        super().__init__([p for p in fit_parameters(ablation) if p.vary], data.throughput, data.measured_e2e_s,
                         split_name)
        self.data, self.hw, self.ablation = data, hw, ablation
        # Derivatives of E2E that do not depend on the parameters.
        self._terms = data.terms     # the same at every trial point
        self.kv_bytes = self._terms.kv_bytes
        self.width_factor_ol = self._terms.width_factor * data.ol
        self._predict = LastPoint(self._predict_at)
        self.ideal_prefill_s = self._terms.prefill_flops / hw.peak_flops_per_s
        self.kv_per_request_s = self.kv_bytes / hw.hbm_bandwidth_bytes_per_s
        self.ideal_kv_scan_s = data.batch * self.kv_per_request_s

    def excess(self, x: np.ndarray, reference: RooflineReference) -> Excess:
        """The time each free term adds beyond `reference`, in coordinates in which E2E is linear:
        ``F_pre/F_max (1/eta_c - r)``, ``B M_dec/BW_max (1/eta_m - r)``, ``M_dec/BW_max (B0/eta_m - r)``,
        ``OL (alpha - r)``, ``L (D/1024)^2 OL (gamma - r)``, ``t_fixed - r`` (Eqs. 7, 9, 10, 5)."""
        names, params, data = self.names, self.values_at(x), self.data
        ones = np.ones_like(data.il)
        terms = []
        if "eta_compute" in names:
            terms.append((self.ideal_prefill_s * (1.0 / params.eta_compute - reference.inverse_eta_compute),
                          {"eta_compute": -self.ideal_prefill_s / params.eta_compute**2}))
        if "eta_memory" in names:
            terms.append((self.ideal_kv_scan_s * (1.0 / params.eta_memory - reference.inverse_eta_memory),
                          {"eta_memory": -self.ideal_kv_scan_s / params.eta_memory**2}))
        if "batch_offset" in names:
            terms.append((self.kv_per_request_s * (params.batch_offset / params.eta_memory
                                                   - reference.kv_offset_over_eta),
                          {"batch_offset": self.kv_per_request_s / params.eta_memory,
                           "eta_memory": -self.kv_per_request_s * params.batch_offset / params.eta_memory**2}))
        if "alpha_s_per_token" in names:
            terms.append((data.ol * (params.alpha_s_per_token - reference.alpha_s_per_token),
                          {"alpha_s_per_token": data.ol}))
        if "gamma_s_per_token" in names:
            terms.append((self.width_factor_ol * (params.gamma_s_per_token - reference.gamma_s_per_token),
                          {"gamma_s_per_token": self.width_factor_ol}))
        if "t_fixed_s" in names:
            terms.append((ones * (params.t_fixed_s - reference.t_fixed_s), {"t_fixed_s": ones}))
        return terms

    def references(self, rng: np.random.Generator, count: int) -> list[RooflineReference]:
        """Seeded references spread over the physically admissible box.

        Efficiencies are drawn uniformly in ``[ETA_LOWER_BOUND, 1]``; each overhead constant
        uniformly between zero and the value at which its term alone would take the median
        measured E2E of the training rows.
        """
        e2e_s = self.data.measured_e2e_s
        caps = (float(np.median(e2e_s / self.kv_per_request_s)), float(np.median(e2e_s / self.data.ol)),
                float(np.median(e2e_s / self.width_factor_ol)), float(np.median(e2e_s)))
        references = []
        for _ in range(count):
            draws = rng.uniform(size=6)
            references.append(RooflineReference(
                inverse_eta_compute=1.0 / (ETA_LOWER_BOUND + draws[0] * (1.0 - ETA_LOWER_BOUND)),
                inverse_eta_memory=1.0 / (ETA_LOWER_BOUND + draws[1] * (1.0 - ETA_LOWER_BOUND)),
                kv_offset_over_eta=draws[2] * caps[0], alpha_s_per_token=draws[3] * caps[1],
                gamma_s_per_token=draws[4] * caps[2], t_fixed_s=draws[5] * caps[3]))
        return references

    def values_at(self, x: np.ndarray) -> SlimParams:
        values = {parameter.name: parameter.ideal for parameter in FIT_PARAMETERS}
        for parameter, value in zip(self.parameters, x):
            values[parameter.name] = float(value) * parameter.unit_in_si
        return SlimParams(**values)

    def _predict_at(self, x: np.ndarray):
        params = self.values_at(x)
        data = self.data
        components = components_at(self._terms, self.hw, params, self.ablation)
        e2e_s = components.total_s
        return params, components, e2e_s, throughput_from_e2e(data.il, data.ol, data.batch, e2e_s)

    def residuals(self, x: np.ndarray) -> np.ndarray:
        return self._predict(x)[3] / self.data.throughput - 1.0

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        params, components, e2e_s, predicted = self._predict(x)
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
        return np.column_stack([d_residual_d_e2e * d_e2e[name] for name in self.names]) * self.units


def fit_slim(frame: pd.DataFrame, architectures: ArchitectureLookup, hw: Hardware,
             ablation: Ablation = FULL, split_name: str = "?",
             starts: Callable[[Sequence[Parameter]], list[tuple[float, ...]]] | None = None,
             sample_valley: bool = True) -> SlimFit:
    """Fit one global `SlimParams` to measured throughput (paper Section VI-E, Eqs. 5-12).

    `frame` needs `columns.MODEL`, `INPUT_LEN_MEAN`, `OUTPUT_LEN_MEAN`,
    `MEAN_BATCH_SIZE` and `TOTAL_TOKEN_THROUGHPUT` (measured ``T``). Minimises

        ``0.5 sum_i (T_pred,i / T_meas,i - 1)^2 + 0.5 lambda sum_i sum_j (x_ij / E2E_i)^2``

    under ``0 < eta_c, eta_m <= 1`` and ``B0, alpha, gamma, t_fixed >= 0`` with the calibration
    engine (`slim.model.calibration.calibrate`) from every start of ``starts(parameters)``
    (default `start_grid`, the grid in `FIT_PARAMETERS`). Constants of terms removed by `ablation`
    are fixed (they cannot be identified).

    **The identifiability rule.** The second sum is a weak prior toward the ideal roofline
    machine: ``x_ij`` is the time term ``j`` adds to row ``i`` beyond the ideal roofline
    (efficiencies of one, no offset, no dense-decode or fixed overhead; `SlimProblem.excess`), as
    a share of the row's measured E2E (`slim.model.calibration.RooflinePrior`), with ``lambda =
    ROOFLINE_PRIOR_WEIGHT = 1e-6``. Where the training data determine the parameters, it changes
    nothing measurable. Where they do not (e.g. two models at one output length: ``t_fixed + alpha
    OL``, ``gamma L (D/1024)^2 OL`` and ``B0 M_dec`` act as per-model constants, three unknowns
    from two models), every point of the resulting valley fits equally well, and the rule
    picks the one whose overhead terms account for the least time: the unique minimiser of
    the prior on the valley. The fit is then a function of the data alone, not of the
    BLAS kernel, the start order or floating-point noise.

    What the data cannot decide is recorded in `SlimFit.identifiability`: the unidentified
    directions (from the SVD of the data Jacobian), the parameters on a bound, and a seeded
    sample of training-equivalent solutions (`slim.model.identifiability`), over which a
    validation MAPE can be given as a range. Sampling costs one refinement per reference;
    callers that use only the chosen fit (the advisor) pass ``sample_valley=False`` and get the
    directions without the sample.

    Raises `FitError` (naming `split_name`) on missing columns, NaN or
    non-positive inputs, fewer rows than free parameters, no converged start,
    or non-finite fitted parameters.
    """
    data = _training_data(frame, architectures, hw, split_name)
    problem = SlimProblem(data, hw, ablation, split_name)
    calibration = calibrate(problem, (starts or start_grid)(problem.parameters), sample_valley)
    standard_errors = {name: math.nan for name in PARAM_NAMES} | dict(zip(problem.names,
                                                                          calibration.standard_errors.tolist()))
    predicted = data.throughput * (1.0 + calibration.residuals)
    return SlimFit(**calibration.result_fields(standard_errors), params=problem.values_at(calibration.x),
                   train_mape_e2e_pct=mape_pct(data.batch * (data.il + data.ol) / predicted, data.measured_e2e_s),
                   ablation=ablation, free_parameters=problem.names, covariance=calibration.covariance)
