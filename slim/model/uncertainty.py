"""Prediction bands of a fitted SLIM model: what the training data leave uncertain about SLIM's
constants, carried to the predicted E2E latency (Eq. 5) and throughput (Eq. 6) at any configuration.

The band at a configuration ``x = (arch, IL, OL, B)`` has two parts.

1. **Delta method on the identified directions.** The fit minimises squared relative throughput
   residuals ``r_i = T_pred,i / T_meas,i - 1``, which to first order are
   ``log T_pred,i - log T_meas,i``. Its parameter covariance is
   ``Sigma = s^2 (J^T J)^+`` with ``s^2 = 2 cost / (n - p)`` (`slim.model.calibration.parameter_uncertainty`,
   the pseudo-inverse over the directions the data identify). Since ``log T = log B (IL + OL)
   - log E2E`` (Eq. 6), both metrics share one standard deviation on the log scale,

       ``sigma(x)^2 = g(x)^T Sigma g(x)``,  ``g_j(x) = d log E2E(x) / d theta_j``,

   with ``dE2E / d theta_j`` from Eqs. 5, 7, 9 and 10 (`slim.model.equations.e2e_derivatives_s`).
   ``kind="run"`` adds the residual variance, ``sigma^2 + s^2``: the band of a new run's
   measurement rather than of the curve (the analogue of an OLS prediction interval).
   The quantile is Student's ``t`` with ``n - p`` degrees of freedom: ``q = t((1 + c) / 2)``
   for a two-sided band at confidence ``c``, ``q = t(c)`` for a one-sided upper bound.

2. **Envelope over the unidentified directions.** Where the training data leave directions of
   the parameter space open (`slim.model.identifiability.Identifiability`), ``Sigma`` is zero along them,
   and the band instead spans the predictions of every sampled training-equivalent solution
   (``theta_0`` the chosen fit, ``theta_1..K`` its `Identifiability.equivalent`, data cost within
   1e-6 relative of the fit's). So a prediction the data do not determine shows a wide band
   rather than the prior's choice alone:

       ``E2E_low(x)  = min_k E2E(x; theta_k) exp(-q sigma(x))``
       ``E2E_high(x) = max_k E2E(x; theta_k) exp(+q sigma(x))``
       ``T_low(x) = B (IL + OL) / E2E_high(x)``, ``T_high(x) = B (IL + OL) / E2E_low(x)`` (Eq. 6).

   The envelope is a set, not a probability: the sample is seeded (`slim.model.calibration.VALLEY_SEED`)
   and bounded by the physically admissible box, so it is a lower bound of what is open.

Everything is a closed-form function of the fit, vectorised over configurations, with no
randomness of its own: a band is as deterministic as the fit it comes from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from slim.errors import FitError
from slim.model.equations import (
    ArchitectureLookup,
    WorkloadTerms,
    components_at,
    e2e_derivatives_from_terms,
    frame_terms,
    throughput_from_e2e,
)
from slim.model.fit import SlimFit
from slim.specs.hardware import Hardware

BandKind = Literal["curve", "run"]
BAND_KINDS: tuple[str, ...] = ("curve", "run")
"""``curve``: the uncertainty of SLIM's predicted curve (parameters only); ``run``: of a new run's
measured value (parameters plus the residual variance of the fit)."""


def check_confidence(confidence: float) -> float:
    """`confidence` as a float in (0, 1); `FitError` otherwise."""
    value = float(confidence)
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise FitError(f"confidence must lie in (0, 1), got {confidence}")
    return value


def band_quantile(fit: SlimFit, confidence: float, one_sided: bool = False) -> float:
    """Student's ``t`` quantile with the fit's ``n - p`` degrees of freedom: ``t((1 + c) / 2)``
    (two-sided band) or ``t(c)`` (one-sided bound)."""
    confidence = check_confidence(confidence)
    if fit.residual_dof <= 0:
        raise FitError(f"split '{fit.split_name}': {fit.n_train_points} training point(s) for "
                       f"{len(fit.free_parameters)} free parameters leave no residual degree of freedom, "
                       "so no prediction band; add training configurations")
    probability = confidence if one_sided else 0.5 * (1.0 + confidence)
    from scipy import stats  # here, not at the top: only a band needs it, and it costs ~0.5 CPU-s to import

    return float(stats.t.ppf(probability, fit.residual_dof))


def log_e2e_std(fit: SlimFit, terms: WorkloadTerms, hw: Hardware, kind: BandKind = "curve") -> np.ndarray:
    """``sigma(x)``, the delta-method standard deviation of ``log E2E`` (and of ``log T``) at each
    configuration of `terms` (`slim.model.equations.frame_terms`); with ``kind="run"``,
    ``sqrt(sigma^2 + s^2)``."""
    if kind not in BAND_KINDS:
        raise FitError(f"band kind must be one of {', '.join(BAND_KINDS)}, got {kind!r}")
    derivatives = e2e_derivatives_from_terms(terms, hw, fit.params, fit.ablation)
    e2e_s = components_at(terms, hw, fit.params, fit.ablation).total_s
    gradient = np.stack([derivatives[name] / e2e_s for name in fit.free_parameters], axis=-1)
    variance = np.einsum("...i,ij,...j->...", gradient, fit.covariance, gradient)
    if kind == "run":
        variance = variance + fit.residual_variance
    return np.sqrt(np.maximum(variance, 0.0))


@dataclass(frozen=True)
class PredictionBand:
    """SLIM's prediction at some configurations with its band (see the module docstring).

    ``e2e_s`` / ``throughput_per_s`` are the chosen fit's predictions; ``*_low`` / ``*_high`` the
    band; ``log_std`` the delta-method ``sigma`` (``kind="run"``: with the residual variance);
    ``envelope_ratio`` is ``max_k E2E_k / min_k E2E_k - 1`` over the training-equivalent
    solutions (0 where the data determine the prediction); ``envelope_sampled`` is False for a
    fit with unidentified directions but no such solutions (its envelope is missing). A one-sided band (`one_sided`)
    bounds E2E from above and throughput from below; its other ends are the envelope's alone.
    """

    confidence: float
    kind: str
    one_sided: bool
    quantile: float
    e2e_s: np.ndarray
    e2e_low_s: np.ndarray
    e2e_high_s: np.ndarray
    throughput_per_s: np.ndarray
    throughput_low_per_s: np.ndarray
    throughput_high_per_s: np.ndarray
    log_std: np.ndarray
    envelope_ratio: np.ndarray
    envelope_sampled: bool = True

    @property
    def e2e_relative_half_width(self) -> np.ndarray:
        """``(E2E_high - E2E_low) / (2 E2E)``, the band's half-width relative to the prediction."""
        return (self.e2e_high_s - self.e2e_low_s) / (2.0 * self.e2e_s)

    @property
    def throughput_relative_half_width(self) -> np.ndarray:
        """``(T_high - T_low) / (2 T)``."""
        return (self.throughput_high_per_s - self.throughput_low_per_s) / (2.0 * self.throughput_per_s)


def prediction_band(fit: SlimFit, terms: WorkloadTerms, hw: Hardware, confidence: float = 0.9,
                    kind: BandKind = "curve", one_sided: bool = False) -> PredictionBand:
    """SLIM's E2E (Eq. 5) and throughput (Eq. 6) with their band at confidence `confidence`, at the
    configurations of `terms` (`slim.model.equations.frame_terms`).

    Two-sided by default (``q = t((1 + c) / 2)``, both ends); ``one_sided=True`` gives the upper
    bound of E2E and the lower bound of throughput at ``q = t(c)`` (the other ends are then the
    envelope's alone, without the delta term). A fit with unidentified directions but no
    training-equivalent solutions (fitted with ``sample_valley=False``, or none found within the cost
    tolerance) has no envelope to show: its band is the delta method's alone, and ``envelope_sampled``
    is False. Raises `FitError` when the fit leaves no residual degree of freedom.
    """
    identifiability = fit.identifiability
    quantile = band_quantile(fit, confidence, one_sided)
    sigma = log_e2e_std(fit, terms, hw, kind)
    alternatives = np.stack([components_at(terms, hw, params, fit.ablation).total_s
                             for params in (fit.params, *identifiability.equivalent)])
    e2e_s = alternatives[0]
    lowest, highest = alternatives.min(axis=0), alternatives.max(axis=0)
    e2e_high = highest * np.exp(quantile * sigma)
    e2e_low = lowest if one_sided else lowest * np.exp(-quantile * sigma)
    il, ol, batch = terms.il, terms.ol, terms.batch
    return PredictionBand(
        confidence=check_confidence(confidence), kind=kind, one_sided=one_sided, quantile=quantile,
        e2e_s=e2e_s, e2e_low_s=e2e_low, e2e_high_s=e2e_high,
        throughput_per_s=throughput_from_e2e(il, ol, batch, e2e_s),
        throughput_low_per_s=throughput_from_e2e(il, ol, batch, e2e_high),
        throughput_high_per_s=throughput_from_e2e(il, ol, batch, e2e_low),
        log_std=np.broadcast_to(sigma, e2e_s.shape).copy(),
        envelope_ratio=highest / lowest - 1.0,
        envelope_sampled=identifiability.identified or bool(identifiability.equivalent),
    )


def prediction_band_frame(fit: SlimFit, architectures: ArchitectureLookup, hw: Hardware, frame: pd.DataFrame,
                          confidence: float = 0.9, kind: BandKind = "curve", one_sided: bool = False) -> PredictionBand:
    """`prediction_band` (two-sided unless `one_sided`) at every row of a configuration table (the
    columns of `slim.model.equations.predict_frame`: model, IL, OL and the measured mean batch)."""
    return prediction_band(fit, frame_terms(architectures, hw, frame), hw, confidence, kind, one_sided)
