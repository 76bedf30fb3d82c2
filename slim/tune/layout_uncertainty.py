"""How far a prior's scaling across tensor-parallel sizes is off, fitted on measured runs instead of set
by hand: the two scales of `slim.tune.belief.LayoutUncertainty`.

The belief adds to the log residual ``r = log(measured / prior)`` at size ``t`` a term ``s d + o_t``,
``d = log2 t - log2 t_min``: a slope ``s`` shared by the sizes and an offset ``o_t`` of each size but the
smallest. The terms shared by every size (the kernel's, `slim.tune.kernel`) cancel in the difference
``delta_t = r_t - r_(t_min)`` of one configuration (model, accelerator, lengths, cap) measured at several
sizes, so that over those sizes

    delta ~ N(0, s^2 d d^T + o^2 I + n^2 (I + 1 1^T))

with ``n`` the run-to-run scatter of one measurement (its ``r_(t_min)`` is in every difference).
Each configuration is taken as an independent draw: the offset then also covers how the scaling
error changes from cap to cap, which the belief's per-size offset cannot follow (wider, not
narrower). The fit maximises the Gaussian log-likelihood over ``(log s, log o)`` with L-BFGS-B from
one fixed start (the hand-set scales) within `SCALE_BOUNDS`, and rounds each scale to
`SIGNIFICANT_DIGITS`, so that the input's order, a 1e-9 perturbation or another BLAS kernel cannot
move it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.tune.belief import LayoutUncertainty
from slim.tune.kernel import SCALE_BOUNDS, SIGNIFICANT_DIGITS

LOG_RESIDUAL = "log_residual"
"""A residual frame's column: ``log(measured / prior)`` of one run and quantity."""
CONFIGURATION = "configuration"
"""A residual frame's column naming what is the same across sizes (model, accelerator, lengths, cap,
quantity): the runs of one configuration at several sizes are one draw."""


@dataclass(frozen=True)
class LayoutResidualSet:
    """One configuration measured at several sizes: each larger size's doublings over the smallest and
    its residual's difference from the smallest's."""

    doublings: np.ndarray
    differences: np.ndarray


def layout_residual_sets(residuals: pd.DataFrame) -> list[LayoutResidualSet]:
    """The draws of `residuals` (columns `CONFIGURATION`, `columns.TENSOR_PARALLEL`, `LOG_RESIDUAL`;
    several runs of a configuration at one size are averaged), in the order of their configuration's
    name; configurations at one size only are left out."""
    finite = residuals[np.isfinite(residuals[LOG_RESIDUAL].to_numpy(dtype=float))]
    sets = []
    for _, runs in finite.groupby(CONFIGURATION, sort=True):
        by_size = runs.groupby(col.TENSOR_PARALLEL, sort=True)[LOG_RESIDUAL].mean()
        if len(by_size) < 2:
            continue
        sizes, values = by_size.index.to_numpy(dtype=float), by_size.to_numpy(dtype=float)
        sets.append(LayoutResidualSet(np.log2(sizes[1:] / sizes[0]), values[1:] - values[0]))
    return sets


def _negative_log_likelihood(log_scales: np.ndarray, sets: Sequence[LayoutResidualSet], noise_sd: float) -> float:
    slope, offset = np.exp(log_scales)
    total = 0.0
    for draw in sets:
        d, n = draw.doublings, len(draw.doublings)
        covariance = slope ** 2 * np.outer(d, d) + offset ** 2 * np.eye(n) + noise_sd ** 2 * (np.eye(n) + 1.0)
        _, log_det = np.linalg.slogdet(covariance)
        total += 0.5 * float(draw.differences @ np.linalg.solve(covariance, draw.differences)) + 0.5 * log_det
    return total


def _rounded(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


def fit_layout_uncertainty(sets: Sequence[LayoutResidualSet], noise_sd: float) -> LayoutUncertainty:
    """The scales of most likelihood on `sets` (module docstring), rounded; raises ValueError on no set."""
    from scipy.optimize import minimize

    if not sets:
        raise ValueError("no configuration measured at two tensor-parallel sizes: nothing to fit the scaling on")
    start = LayoutUncertainty()
    bounds = [(math.log(SCALE_BOUNDS[0]), math.log(SCALE_BOUNDS[1]))] * 2
    result = minimize(_negative_log_likelihood, np.log([start.slope_sd_per_doubling, start.offset_sd]),
                      args=(tuple(sets), noise_sd), method="L-BFGS-B", bounds=bounds)
    slope, offset = np.exp(result.x)
    return LayoutUncertainty(slope_sd_per_doubling=_rounded(slope), offset_sd=_rounded(offset))


@dataclass(frozen=True)
class LayoutCoverage:
    """How often a belief's interval at a size not yet measured holds the residual found there: of
    `pairs` (configuration, larger size), the share `covered`, and the interval's mean half-width
    (log residual, so ``exp(half_width) - 1`` is its relative reach)."""

    pairs: int
    covered: float
    mean_half_width: float


def interval_coverage(sets: Sequence[LayoutResidualSet], scales: LayoutUncertainty, noise_sd: float,
                      level: float = 0.9) -> LayoutCoverage:
    """The `level` interval the scales give each larger size's difference ``delta_t`` before it is
    measured, the smallest size measured (module docstring: ``delta_t ~ N(0, s^2 d_t^2 + o^2 + 2 n^2)``),
    against the difference found; raises ValueError on no set."""
    if not sets:
        raise ValueError("no configuration measured at two tensor-parallel sizes: no interval to check")
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    doublings = np.concatenate([draw.doublings for draw in sets])
    differences = np.concatenate([draw.differences for draw in sets])
    half_width = z * np.sqrt(scales.slope_sd_per_doubling ** 2 * doublings ** 2 + scales.offset_sd ** 2
                             + 2.0 * noise_sd ** 2)
    return LayoutCoverage(len(differences), float(np.mean(np.abs(differences) <= half_width)),
                          float(np.mean(half_width)))
