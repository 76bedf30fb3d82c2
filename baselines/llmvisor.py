"""LLMVisor-Agg: the aggregate, per-configuration adaptation of LLMVisor (Jin et al.).

A reconstruction (no public code exists); paper Section VI-E. Two piecewise-linear
token-count functions, one for the prefill (fitted to TTFT) and one for decode
steps (fitted to mean ITL), combined into the end-to-end latency.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls
from sklearn.base import BaseEstimator, RegressorMixin

from baselines.features import (
    DesignNullSpace,
    ThroughputFromE2EMixin,
    Workload,
    check_fitted,
    column_array,
    target_array,
    workload_arrays,
)
from slim import columns as col
from slim.errors import ConfigError, FitError

PREFILL_FEATURE_NAMES = ("intercept", "batch_prefill_tokens", "batch_squared_prefill_tokens", "batch_size")
DECODE_FEATURE_NAMES = ("intercept", "batch_size", "batch_context_tokens")
SPLIT_DECODE_FEATURE_NAMES = ("intercept", "batch_size", "batch_prompt_context_tokens",
                              "batch_generated_context_tokens")
DECODE_CONTEXTS = ("mean", "split")
TTFT_TARGETS = ("in_batch", "measured")

MINIMUM_NORM_RIDGE = 1e-10
"""Ridge on the unit-norm scaled columns of every segment fit (see `weighted_least_squares`)."""

BREAKPOINT_TIE_TOLERANCE = 1e-9
"""Relative SSE difference below which two breakpoints count as equally good."""
LOSSES = ("relative", "absolute")


def prefill_features(workload: Workload) -> np.ndarray:
    """Prefill design ``[1, sum p_i, sum p_i^2, |B|] = [1, B IL, B IL^2, B]``.

    LLMVisor's step terms with every one of the ``B`` requests of the batch
    prefilling its ``IL`` prompt tokens (``p_i = IL``); the context term
    ``sum c_i`` is zero for a prefill without prefix caching, so it is left out.
    """
    b, il = workload.batch_size, workload.input_len
    return np.column_stack([np.ones_like(b), b * il, b * il**2, b])


def decode_features(workload: Workload, context: str = "mean") -> np.ndarray:
    """Decode design ``[1, |B|, sum c_i] = [1, B, B (IL + OL / 2)]``.

    In a decode step each running request processes one token (``sum p_i = B``
    and ``sum p_i^2 = B``, both collinear with ``|B|``, so one column) and
    attends to its context. Averaged over a request's decode steps the context
    is ``(1 / OL) sum_j (IL + j) ~ IL + OL / 2``; under continuous batching the
    running requests are spread over their progress, so the mean number of
    context tokens attended per step is ``B (IL + OL / 2)`` (SLIM's active
    context).

    ``context="split"`` gives the prompt's and the generated part of that context a
    coefficient each, ``[1, B, B IL, B OL / 2]`` (`SPLIT_DECODE_FEATURE_NAMES`): the
    paper's "context tokens" feature read as two.
    """
    b, il, ol = workload.batch_size, workload.input_len, workload.output_len
    if context == "split":
        return np.column_stack([np.ones_like(b), b, b * il, b * ol / 2.0])
    return np.column_stack([np.ones_like(b), b, b * (il + ol / 2.0)])


@dataclass(frozen=True)
class PiecewiseLinearFit:
    """Two linear segments of one design, split on a scalar variable.

    Rows with ``split <= breakpoint`` use `coef_low`, the others `coef_high`;
    ``breakpoint = inf`` means a single segment (both coefficient vectors equal).
    `null_low` / `null_high` are the directions each segment's training rows leave
    undetermined (see `baselines.features.DesignNullSpace`).
    """

    breakpoint: float
    coef_low: np.ndarray
    coef_high: np.ndarray
    weighted_sse: float
    null_low: DesignNullSpace
    null_high: DesignNullSpace

    def predict(self, design: np.ndarray, split: np.ndarray) -> np.ndarray:
        low = split <= self.breakpoint
        return np.where(low, design @ self.coef_low, design @ self.coef_high)

    def determined(self, design: np.ndarray, split: np.ndarray) -> np.ndarray:
        """Per row: True where every equally good fit of its segment predicts the same."""
        low = split <= self.breakpoint
        return np.where(low, self.null_low.determines(design), self.null_high.determines(design))


def weighted_least_squares(
    design: np.ndarray, target: np.ndarray, weights: np.ndarray, *, nonnegative: bool = False
) -> tuple[np.ndarray, float]:
    """Minimise ``sum_i w_i (design_i . coef - target_i)^2``; return ``(coef, sse)``.

    Columns are scaled to unit weighted norm before solving, so the answer does
    not depend on feature units. Rank-deficient designs (e.g. one input length
    only, where ``B IL`` and ``B`` are proportional) get the minimal-norm
    solution in those scaled units; predictions inside the span of the training
    rows are unique either way. With `nonnegative`, every coefficient is
    constrained to ``>= 0`` (`scipy.optimize.nnls`), and the minimal-norm
    non-negative solution is taken.

    The minimal-norm choice is made by a ridge of `MINIMUM_NORM_RIDGE` on the
    scaled columns (rows ``sqrt(ridge) I`` appended), not by a rank cut-off: a
    cut-off or an active-set choice between equally good solutions flips with
    floating-point noise (another BLAS kernel), the ridge does not. The returned
    SSE is that of the data rows alone.
    """
    root_w = np.sqrt(weights)
    weighted_design = design * root_w[:, None]
    weighted_target = target * root_w
    scale = np.linalg.norm(weighted_design, axis=0)
    scale[scale == 0] = 1.0
    scaled = weighted_design / scale
    n_features = scaled.shape[1]
    augmented = np.vstack([scaled, math.sqrt(MINIMUM_NORM_RIDGE) * np.eye(n_features)])
    augmented_target = np.concatenate([weighted_target, np.zeros(n_features)])
    if nonnegative:
        scaled_coef, _ = nnls(augmented, augmented_target)
    else:
        scaled_coef = np.linalg.lstsq(augmented, augmented_target, rcond=None)[0]
    coef = scaled_coef / scale
    residual = weighted_design @ coef - weighted_target
    return coef, float(residual @ residual)


def fit_two_segments(
    design: np.ndarray,
    target: np.ndarray,
    weights: np.ndarray,
    split: np.ndarray,
    *,
    min_segment_size: int,
    n_segments: int = 2,
    nonnegative: bool = False,
) -> PiecewiseLinearFit:
    """Piecewise-linear least squares with one breakpoint on `split`.

    Candidate breakpoints are the midpoints between consecutive distinct values
    of `split` that leave at least `min_segment_size` rows on each side. Each
    segment is fitted independently by `weighted_least_squares`; the candidate
    with the smallest total weighted SSE wins. Candidates within
    `BREAKPOINT_TIE_TOLERANCE` (relative) of the smallest SSE are ties, and the
    smallest breakpoint among them wins, so noise cannot pick between them.
    Without any admissible candidate (or with ``n_segments = 1``) one segment
    is fitted to all rows.
    """
    candidates: list[PiecewiseLinearFit] = []
    if n_segments == 2:
        distinct = np.unique(split)
        for breakpoint in (distinct[:-1] + distinct[1:]) / 2.0:
            low = split <= breakpoint
            if low.sum() < min_segment_size or (~low).sum() < min_segment_size:
                continue
            coef_low, sse_low = weighted_least_squares(design[low], target[low], weights[low], nonnegative=nonnegative)
            coef_high, sse_high = weighted_least_squares(
                design[~low], target[~low], weights[~low], nonnegative=nonnegative
            )
            candidates.append(PiecewiseLinearFit(float(breakpoint), coef_low, coef_high, sse_low + sse_high,
                                                 DesignNullSpace.of(design[low]), DesignNullSpace.of(design[~low])))
    best: PiecewiseLinearFit | None = None
    if candidates:
        smallest_sse = min(candidate.weighted_sse for candidate in candidates)
        tied = [c for c in candidates if c.weighted_sse <= smallest_sse * (1.0 + BREAKPOINT_TIE_TOLERANCE)]
        best = min(tied, key=lambda candidate: candidate.breakpoint)
    if best is None:
        coef, sse = weighted_least_squares(design, target, weights, nonnegative=nonnegative)
        null_space = DesignNullSpace.of(design)
        best = PiecewiseLinearFit(float("inf"), coef, coef.copy(), sse, null_space, null_space)
    if not (np.all(np.isfinite(best.coef_low)) and np.all(np.isfinite(best.coef_high))):
        raise FitError("LLMVisor-Agg: piecewise least squares produced non-finite coefficients")
    return best


class LLMVisorAgg(ThroughputFromE2EMixin, RegressorMixin, BaseEstimator):
    """LLMVisor-Agg baseline (reconstruction after Jin et al., LLMVisor; no public code).

    The original LLMVisor predicts the latency of one engine step as
    ``T = beta + a1 sum p_i + a2 sum c_i + a3 sum p_i^2 + a4 |B|`` (``p_i``
    tokens processed, ``c_i`` context tokens attended), piecewise linear with
    two segments for prefill and two for decode, fitted by least squares on
    per-step timings. Only one mean TTFT and one mean ITL per configuration are
    available here, so, as in the SLIM paper, the terms are aggregated per
    configuration ``(B, IL, OL)`` with ``B`` the measured mean running batch:

    * prefill function ``TTFT ~ [1, B IL, B IL^2, B] . a`` (`prefill_features`);
    * decode function ``ITL ~ [1, B, B (IL + OL/2)] . c`` (`decode_features`);
    * ``E2E = TTFT + ITL (OL - 1)`` and throughput by Eq. 6,
      ``T = B (IL + OL) / E2E``.

    Features are token counts only (no model characteristics), which is why the
    baseline can extrapolate along output length but cannot tell one model
    from another.

    Breakpoints: each function has two segments split on the batch size ``B``.
    The breakpoint is chosen from the training data: every midpoint between
    consecutive distinct training ``B`` values that leaves at least
    `min_segment_size` rows per side is tried, each segment is fitted
    separately, and the smallest total weighted SSE wins (`fit_two_segments`).
    New configurations go to the segment on their side of the breakpoint.

    Loss: weighted linear least squares per segment. ``loss="relative"``
    (default) weights each function's residuals by how they enter the relative
    E2E error judged in the evaluation: a prefill residual ``r`` moves E2E by
    ``r``, a decode residual by ``r (OL - 1)``, so the weights are ``1/E2E^2``
    and ``((OL - 1)/E2E)^2`` with ``E2E = y``; this is the same objective SLIM is
    fitted with (squared relative error). ``loss="absolute"`` is plain ordinary
    least squares on TTFT and ITL in seconds (the original's step-latency fit).
    Coefficients are unconstrained by default: a segment's intercept is not a
    physical time (the upper segment of a convex latency curve extrapolates to a
    negative intercept), so non-negativity would bias the fit;
    ``nonnegative=True`` switches to non-negative least squares. Rank-deficient
    designs (a single input length makes ``B IL``, ``B IL^2`` and ``B``
    proportional) get the minimal-norm solution in unit-norm scaled columns.

    Targets (read from X, not y, except the E2E):
    * decode: ``X[mean_itl_ms] / 1000`` (seconds);
    * prefill, ``ttft_target="in_batch"`` (default): the in-batch prefill time
      implied by the measurements, ``max(y - ITL (OL - 1), ttft_floor_s)``.
      With request rate ``inf`` the measured mean TTFT is dominated by queueing
      before admission (tens of seconds), while the judged E2E (Little's law,
      ``y``) counts only time in the running batch; fitting raw TTFT would make
      ``TTFT + ITL (OL - 1)`` include the queue and miss the target by orders of
      magnitude, which is unfair to the baseline.
    * prefill, ``ttft_target="measured"``: raw ``X[mean_ttft_ms] / 1000``.

    Predicted TTFT and ITL are clipped at zero (durations), so E2E is never
    negative.

    Parameters
    ----------
    ttft_target : {"in_batch", "measured"}
    ttft_floor_s : lower bound of the in-batch prefill target (seconds, >= 0).
    loss : {"relative", "absolute"}
    n_segments : 1 or 2 segments per function.
    decode_context : {"mean", "split"}: the decode function's context feature(s), see
        `decode_features`.
    min_segment_size : rows required on each side of a breakpoint; ``None`` means
        the number of features of that function plus one.
    nonnegative : constrain all coefficients to be >= 0.

    Fitted attributes
    -----------------
    prefill_fit_, decode_fit_ : `PiecewiseLinearFit` of each function.
    prefill_breakpoint_, decode_breakpoint_ : breakpoints on ``B`` (inf: one segment).
    prefill_coef_, decode_coef_ : arrays (2, n_features), rows = low / high segment,
        columns as in `PREFILL_FEATURE_NAMES` / `DECODE_FEATURE_NAMES` (`SPLIT_DECODE_FEATURE_NAMES` with
        ``decode_context="split"``; seconds per unit).
    prefill_target_s_ : the prefill targets the function was fitted to.
    n_train_ : number of training configurations.
    """

    def __init__(
        self,
        ttft_target: str = "in_batch",
        ttft_floor_s: float = 0.0,
        loss: str = "relative",
        n_segments: int = 2,
        min_segment_size: int | None = None,
        nonnegative: bool = False,
        decode_context: str = "mean",
    ):
        self.ttft_target = ttft_target
        self.ttft_floor_s = ttft_floor_s
        self.loss = loss
        self.n_segments = n_segments
        self.min_segment_size = min_segment_size
        self.nonnegative = nonnegative
        self.decode_context = decode_context

    def _check_params(self) -> None:
        if self.ttft_target not in TTFT_TARGETS:
            raise ConfigError(f"LLMVisorAgg: ttft_target '{self.ttft_target}' is not one of {TTFT_TARGETS}")
        if self.loss not in LOSSES:
            raise ConfigError(f"LLMVisorAgg: loss '{self.loss}' is not one of {LOSSES}")
        if self.decode_context not in DECODE_CONTEXTS:
            raise ConfigError(f"LLMVisorAgg: decode_context '{self.decode_context}' is not one of {DECODE_CONTEXTS}")
        if self.n_segments not in (1, 2):
            raise ConfigError(f"LLMVisorAgg: n_segments must be 1 or 2, got {self.n_segments}")
        if not (np.isfinite(self.ttft_floor_s) and self.ttft_floor_s >= 0):
            raise ConfigError(f"LLMVisorAgg: ttft_floor_s must be finite and >= 0, got {self.ttft_floor_s}")
        if self.min_segment_size is not None and self.min_segment_size < 1:
            raise ConfigError(f"LLMVisorAgg: min_segment_size must be >= 1, got {self.min_segment_size}")

    def fit(self, X, y) -> "LLMVisorAgg":
        """Fit both functions. `X`: configurations incl. mean ITL (and mean TTFT
        for ``ttft_target="measured"``); `y`: measured E2E latency (s, Little's law)."""
        self._check_params()
        workload = workload_arrays(X)
        e2e_s = target_array(y, len(workload.batch_size))
        itl_s = column_array(X, col.MEAN_ITL_MS, positive=True) / 1e3
        decode_steps = workload.output_len - 1.0
        if self.ttft_target == "in_batch":
            prefill_target_s = np.maximum(e2e_s - itl_s * decode_steps, self.ttft_floor_s)
        else:
            prefill_target_s = column_array(X, col.MEAN_TTFT_MS) / 1e3

        if self.loss == "relative":
            prefill_weights = 1.0 / e2e_s**2
            decode_weights = (decode_steps / e2e_s) ** 2
        else:
            prefill_weights = np.ones_like(e2e_s)
            decode_weights = np.ones_like(e2e_s)
        if not np.any(decode_weights > 0):
            raise FitError("LLMVisorAgg: every training row has OL <= 1, so ITL carries no weight")

        prefill_design = prefill_features(workload)
        decode_design = decode_features(workload, self.decode_context)
        batch = workload.batch_size
        self.prefill_fit_ = fit_two_segments(
            prefill_design, prefill_target_s, prefill_weights, batch,
            min_segment_size=self._segment_size(prefill_design),
            n_segments=self.n_segments, nonnegative=self.nonnegative,
        )
        self.decode_fit_ = fit_two_segments(
            decode_design, itl_s, decode_weights, batch,
            min_segment_size=self._segment_size(decode_design),
            n_segments=self.n_segments, nonnegative=self.nonnegative,
        )
        self.prefill_breakpoint_ = self.prefill_fit_.breakpoint
        self.decode_breakpoint_ = self.decode_fit_.breakpoint
        self.prefill_coef_ = np.vstack([self.prefill_fit_.coef_low, self.prefill_fit_.coef_high])
        self.decode_coef_ = np.vstack([self.decode_fit_.coef_low, self.decode_fit_.coef_high])
        self.prefill_target_s_ = prefill_target_s
        self.n_train_ = len(workload.batch_size)
        return self

    def _segment_size(self, design: np.ndarray) -> int:
        return design.shape[1] + 1 if self.min_segment_size is None else int(self.min_segment_size)

    def predict_ttft_s(self, X) -> np.ndarray:
        """Prefill function: predicted (in-batch or measured, as fitted) TTFT in seconds, >= 0."""
        check_fitted(self, "prefill_fit_")
        workload = workload_arrays(X)
        return np.maximum(self.prefill_fit_.predict(prefill_features(workload), workload.batch_size), 0.0)

    def predict_itl_s(self, X) -> np.ndarray:
        """Decode function: predicted mean inter-token latency in seconds, >= 0."""
        check_fitted(self, "decode_fit_")
        workload = workload_arrays(X)
        design = decode_features(workload, self.decode_context)
        return np.maximum(self.decode_fit_.predict(design, workload.batch_size), 0.0)

    def predict(self, X) -> np.ndarray:
        """E2E latency (s): ``TTFT + ITL (OL - 1)``."""
        check_fitted(self, "decode_fit_")
        workload = workload_arrays(X)
        return self.predict_ttft_s(X) + self.predict_itl_s(X) * (workload.output_len - 1.0)

    def prediction_determined(self, X) -> np.ndarray:
        """Per row: True where the training data determine both functions' predictions.

        False where a row reaches a direction its segment's training design leaves free
        (e.g. one input length in training makes ``B IL``, ``B IL^2`` and ``B``
        proportional, so a new input length is extrapolated by the minimal-norm split).
        """
        check_fitted(self, "decode_fit_")
        workload = workload_arrays(X)
        batch = workload.batch_size
        return (self.prefill_fit_.determined(prefill_features(workload), batch)
                & self.decode_fit_.determined(decode_features(workload, self.decode_context), batch))

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "decode_fit_")
