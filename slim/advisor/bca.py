"""BCA, the batching configuration advisor (paper Section VII-A, Eq. 13).

Eq. 13 picks the batch cap with the highest throughput among the candidates that
meet a latency SLO and still batch efficiently:

    B_cap(IL, OL) = argmax_B T(IL, OL, B)
        subject to  E2E(IL, OL, B) <= SLO
                    T(IL, OL, B) / (B T(IL, OL, 1)) > epsilon            (13)

Two flavours share one decision rule (`select_batch_cap`):

* full-profile BCA (`bca_from_measured`): measured points at the profiled
  ``--max-num-seqs`` values, interpolated linearly in ``log B`` onto a candidate grid;
* SLIM-BCA (`bca_from_predictor`): any callable ``B -> (T, E2E)``, e.g. SLIM's
  prediction at fixed (IL, OL), evaluated on the candidate grid; or ``B -> (T, E2E,
  E2E_upper)``, which holds the SLO on an upper bound of E2E (SLIM-BCA at a confidence:
  ``E2E_upper(IL, OL, B) <= SLO`` replaces the first constraint of Eq. 13).

SLO. The paper sets "tight SLO = 2 x E2E(2, 128, 32)" and "loose = 4 x". Under the
paper's own argument order ``E2E(IL, OL, B)`` that is IL = 2, OL = 128, B = 32,
which is not a workload the paper profiles; read as (B, IL, OL) it is B = 2,
IL = 128, OL = 32. The reference point is therefore configurable: by default the
SLO is ``multiplier x E2E`` at the smallest profiled batch of the target curve, or
pass ``slo_s`` directly (e.g. computed once from a measured reference curve and
shared by SLIM-BCA and full-profile BCA, as a like-for-like comparison requires).

Ties in throughput go to the smaller batch (less KV memory). Candidates outside the
measured range are refused rather than extrapolated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np
from numpy.typing import ArrayLike

from slim.defaults import DEFAULT_CANDIDATE_BATCH_SIZES, DEFAULT_EPSILON
from slim.errors import AdvisorError

DEFAULT_SLO_MULTIPLIER = 2.0   # paper's "tight" SLO; "loose" is 4.0

XAxis = Literal["max_num_seqs", "mean_batch_size"]
CurvePredictor = Callable[[np.ndarray], tuple[ArrayLike, ...]]
"""``B -> (T, E2E)``, or ``B -> (T, E2E, E2E upper bound)`` for an advisor that holds the SLO
on the bound (SLIM-BCA at a confidence, `slim.advisor.predictor_bca`)."""


@dataclass(frozen=True)
class BcaResult:
    """One BCA decision. Decision fields are NaN when ``feasible`` is False.

    `binding` names the constraints that decide the choice ("slo", "efficiency"): those
    whose removal alone would admit a candidate with higher throughput than the chosen one,
    or both where every such candidate fails both; empty when the throughput peak itself
    was chosen. (A constraint that only excludes candidates the other one excludes anyway,
    such as the floor at caps far above an SLO-limited choice, does not bind.)
    """

    batch_cap: float
    throughput_per_s: float
    e2e_latency_s: float
    batching_efficiency: float
    slo_s: float
    epsilon: float
    feasible: bool
    reason: str
    binding: tuple[str, ...]
    throughput_at_one_per_s: float
    candidate_batch_sizes: tuple[float, ...]
    candidate_throughput_per_s: tuple[float, ...]
    candidate_e2e_latency_s: tuple[float, ...]
    candidate_efficiency: tuple[float, ...]
    e2e_bound_s: float | None = None
    candidate_e2e_bound_s: tuple[float, ...] = ()
    """With a bound (`select_batch_cap`'s ``e2e_bound_s``): the upper bound of E2E the SLO was
    judged on, at the chosen cap (NaN if infeasible) and at every candidate; None and empty
    without one."""


# --- validation and interpolation ----------------------------------------------------

def _as_vector(name: str, values: ArrayLike, *, positive: bool = True) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or array.size == 0:
        raise AdvisorError(f"{name} must be a non-empty 1-D array, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise AdvisorError(f"{name} contains NaN or infinite values: {array}")
    if positive and np.any(array <= 0):
        raise AdvisorError(f"{name} must be > 0 everywhere: {array}")
    return array


def _same_length(**arrays: np.ndarray) -> None:
    lengths = {name: array.size for name, array in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise AdvisorError(f"arrays differ in length: {lengths}")


def _check_epsilon(epsilon: float) -> float:
    if not (np.isfinite(epsilon) and 0 < epsilon < 1):
        raise AdvisorError(f"epsilon must lie in (0, 1), got {epsilon}")
    return float(epsilon)


def _check_slo(slo_s: float) -> float:
    if not (np.isfinite(slo_s) and slo_s > 0):
        raise AdvisorError(f"SLO must be a finite number of seconds > 0, got {slo_s}")
    return float(slo_s)


def _sorted_curve(batch_sizes: ArrayLike, *values: ArrayLike,
                  positive_values: bool = True) -> tuple[np.ndarray, ...]:
    """Validate a curve and sort it by batch size; duplicate batch sizes are refused."""
    batch = _as_vector("batch_sizes", batch_sizes)
    arrays = [_as_vector(f"curve values #{i + 1}", v, positive=positive_values)
              for i, v in enumerate(values)]
    _same_length(batch_sizes=batch, **{f"values_{i + 1}": a for i, a in enumerate(arrays)})
    order = np.argsort(batch, kind="stable")
    batch = batch[order]
    if np.any(np.diff(batch) == 0):
        raise AdvisorError(f"duplicate batch sizes in the curve: {batch}; aggregate repeats first")
    return (batch, *(a[order] for a in arrays))


def interpolate_log_batch(batch_sizes: ArrayLike, values: ArrayLike,
                          targets: ArrayLike) -> np.ndarray:
    """Piecewise-linear interpolation of `values` in ``log B`` at `targets`.

    Between profiled points B_i < B < B_{i+1}:
    ``v(B) = v_i + (v_{i+1} - v_i) log(B / B_i) / log(B_{i+1} / B_i)``.
    Targets outside ``[min B, max B]`` raise `AdvisorError` (no extrapolation).
    """
    batch, vals = _sorted_curve(batch_sizes, values, positive_values=False)
    where = _as_vector("targets", np.atleast_1d(np.asarray(targets, dtype=float)))
    # A relative tolerance keeps grid points equal to the ends from failing on round-off.
    low, high = batch[0] * (1 - 1e-12), batch[-1] * (1 + 1e-12)
    outside = where[(where < low) | (where > high)]
    if outside.size:
        raise AdvisorError(
            f"batch sizes {outside} lie outside the profiled range [{batch[0]:g}, {batch[-1]:g}]; "
            "choose candidates inside it (no extrapolation)"
        )
    return np.interp(np.log(where), np.log(batch), vals)


def throughput_at_one(batch_sizes: ArrayLike, throughput_per_s: ArrayLike) -> float:
    """``T(1)``, the reference of the batching efficiency.

    Interpolated in ``log B`` when B = 1 lies within the curve; otherwise (curve
    starting above 1) ``T(B_min) / B_min``, i.e. linear scaling assumed below the
    smallest profiled batch.
    """
    batch, tput = _sorted_curve(batch_sizes, throughput_per_s)
    if batch[0] <= 1.0 <= batch[-1]:
        return float(interpolate_log_batch(batch, tput, 1.0)[0])
    return float(tput[0] / batch[0])


def slo_from_curve(batch_sizes: ArrayLike, e2e_latency_s: ArrayLike,
                   multiplier: float = DEFAULT_SLO_MULTIPLIER,
                   reference_batch: float | None = None) -> float:
    """``SLO = multiplier x E2E(reference_batch)``; default reference: the smallest batch."""
    if not (np.isfinite(multiplier) and multiplier > 0):
        raise AdvisorError(f"SLO multiplier must be > 0, got {multiplier}")
    batch, e2e = _sorted_curve(batch_sizes, e2e_latency_s)
    reference = batch[0] if reference_batch is None else reference_batch
    return float(multiplier * interpolate_log_batch(batch, e2e, reference)[0])


# --- the decision rule (Eq. 13) ------------------------------------------------------

def _infeasible_reason(e2e: np.ndarray, efficiency: np.ndarray, meets_slo: np.ndarray,
                       efficient: np.ndarray, slo_s: float, epsilon: float, bounded: bool = False) -> str:
    if not meets_slo.any():
        quantity = "E2E upper bound" if bounded else "E2E"
        return f"no candidate meets the SLO: smallest {quantity} {e2e.min():.4g} s > SLO {slo_s:.4g} s"
    if not efficient.any():
        return (f"no candidate batches efficiently: largest T(B)/(B T(1)) "
                f"{efficiency.max():.4g} <= epsilon {epsilon:g}")
    return (f"no candidate meets both constraints: {int(meets_slo.sum())} meet the SLO "
            f"({slo_s:.4g} s), {int(efficient.sum())} have efficiency > {epsilon:g}, none both")


def select_batch_cap(batch_sizes: ArrayLike, throughput_per_s: ArrayLike,
                     e2e_latency_s: ArrayLike, *, slo_s: float,
                     epsilon: float = DEFAULT_EPSILON,
                     throughput_at_one_per_s: float | None = None,
                     e2e_bound_s: ArrayLike | None = None) -> BcaResult:
    """Eq. 13 on a curve already evaluated at the candidate batch sizes.

    ``T(1)`` is `throughput_at_one_per_s` if given, else `throughput_at_one` of this
    curve. The efficiency constraint is strict (``> epsilon``), the SLO is not
    (``<= SLO``), as in the paper. With `e2e_bound_s` (an upper bound of E2E per candidate,
    e.g. at a confidence) the SLO constraint reads ``E2E_upper(B) <= SLO`` instead.
    """
    if e2e_bound_s is None:
        batch, tput, e2e = _sorted_curve(batch_sizes, throughput_per_s, e2e_latency_s)
        bound = e2e
    else:
        batch, tput, e2e, bound = _sorted_curve(batch_sizes, throughput_per_s, e2e_latency_s, e2e_bound_s)
    slo_s = _check_slo(slo_s)
    epsilon = _check_epsilon(epsilon)
    t_one = throughput_at_one(batch, tput) if throughput_at_one_per_s is None else throughput_at_one_per_s
    if not (np.isfinite(t_one) and t_one > 0):
        raise AdvisorError(f"T(1) must be a finite throughput > 0, got {t_one}")
    efficiency = tput / (batch * t_one)
    meets_slo = bound <= slo_s
    efficient = efficiency > epsilon
    admissible = meets_slo & efficient
    common = dict(
        slo_s=slo_s, epsilon=epsilon, throughput_at_one_per_s=float(t_one),
        candidate_batch_sizes=tuple(batch.tolist()),
        candidate_throughput_per_s=tuple(tput.tolist()),
        candidate_e2e_latency_s=tuple(e2e.tolist()),
        candidate_efficiency=tuple(efficiency.tolist()),
        candidate_e2e_bound_s=() if e2e_bound_s is None else tuple(bound.tolist()),
    )
    if not admissible.any():
        nan = float("nan")
        return BcaResult(
            batch_cap=nan, throughput_per_s=nan, e2e_latency_s=nan, batching_efficiency=nan,
            e2e_bound_s=None if e2e_bound_s is None else nan, feasible=False, binding=(),
            reason=_infeasible_reason(bound, efficiency, meets_slo, efficient, slo_s, epsilon,
                                      bounded=e2e_bound_s is not None),
            **common,
        )
    best_tput = tput[admissible].max()
    # Smallest admissible batch reaching the best throughput (ties -> less memory).
    chosen = int(np.flatnonzero(admissible & (tput == best_tput))[0])
    better = tput > tput[chosen]
    # A constraint binds where the other one alone admits a better candidate.
    binding = tuple(name for name, other_ok in (("slo", efficient), ("efficiency", meets_slo))
                    if np.any(better & other_ok))
    if not binding and np.any(better):   # every better candidate fails both constraints
        binding = ("slo", "efficiency")
    reason = ("throughput peak is admissible" if not binding
              else f"higher-throughput batches excluded by: {', '.join(binding)}")
    return BcaResult(
        batch_cap=float(batch[chosen]), throughput_per_s=float(tput[chosen]),
        e2e_latency_s=float(e2e[chosen]), batching_efficiency=float(efficiency[chosen]),
        e2e_bound_s=float(bound[chosen]) if e2e_bound_s is not None else None,
        feasible=True, binding=binding, reason=reason, **common,
    )


# --- full-profile BCA and SLIM-BCA ---------------------------------------------------

def bca_from_measured(max_num_seqs: ArrayLike, throughput_per_s: ArrayLike,
                      e2e_latency_s: ArrayLike, *, epsilon: float = DEFAULT_EPSILON,
                      slo_s: float | None = None,
                      slo_multiplier: float = DEFAULT_SLO_MULTIPLIER,
                      slo_reference_batch: float | None = None,
                      x_axis: XAxis = "max_num_seqs",
                      mean_batch_size: ArrayLike | None = None,
                      candidate_batch_sizes: ArrayLike | None = None) -> BcaResult:
    """Full-profile BCA on one measured curve (one model, IL, OL).

    `x_axis` chooses the batch coordinate: the profiled ``--max-num-seqs`` values
    (default) or the measured mean running batch (`mean_batch_size` required). The
    candidates default to the profiled points themselves; other candidates are
    interpolated linearly in ``log B`` and must lie inside the profiled range.
    Without `slo_s`, ``SLO = slo_multiplier x E2E(slo_reference_batch)`` on this
    curve (reference default: smallest profiled batch).
    """
    if x_axis == "max_num_seqs":
        batch = max_num_seqs
    elif x_axis == "mean_batch_size":
        if mean_batch_size is None:
            raise AdvisorError("x_axis='mean_batch_size' needs mean_batch_size")
        batch = mean_batch_size
    else:
        raise AdvisorError(f"x_axis must be 'max_num_seqs' or 'mean_batch_size', got {x_axis!r}")
    batch, tput, e2e = _sorted_curve(batch, throughput_per_s, e2e_latency_s)
    _same_length(batch=batch, max_num_seqs=_as_vector("max_num_seqs", max_num_seqs))
    if slo_s is None:
        slo_s = slo_from_curve(batch, e2e, slo_multiplier, slo_reference_batch)
    candidates = batch if candidate_batch_sizes is None else _as_vector(
        "candidate_batch_sizes", candidate_batch_sizes)
    return select_batch_cap(
        candidates,
        interpolate_log_batch(batch, tput, candidates),
        interpolate_log_batch(batch, e2e, candidates),
        slo_s=slo_s, epsilon=epsilon,
        throughput_at_one_per_s=throughput_at_one(batch, tput),
    )


def bca_from_predictor(predict: CurvePredictor, *,
                       candidate_batch_sizes: ArrayLike = DEFAULT_CANDIDATE_BATCH_SIZES,
                       epsilon: float = DEFAULT_EPSILON, slo_s: float | None = None,
                       slo_multiplier: float = DEFAULT_SLO_MULTIPLIER,
                       slo_reference_batch: float | None = None) -> BcaResult:
    """SLIM-BCA: Eq. 13 on a predicted curve.

    `predict` maps an array of batch sizes to ``(throughput_per_s, e2e_latency_s)``
    arrays, e.g. ``lambda b: (slim_T(il, ol, b), slim_E2E(il, ol, b))``, or to
    ``(throughput_per_s, e2e_latency_s, e2e_upper_bound_s)``: the SLO is then held on the
    bound (`select_batch_cap`'s ``e2e_bound_s``). ``T(1)`` is the prediction at B = 1. Without
    `slo_s`, the SLO is ``slo_multiplier`` x the predicted E2E at `slo_reference_batch`
    (default: smallest candidate).
    """
    candidates = _as_vector("candidate_batch_sizes", candidate_batch_sizes)
    names = ("predicted throughput", "predicted E2E", "predicted E2E upper bound")

    def evaluate(batch: np.ndarray) -> tuple[np.ndarray, ...]:
        values = predict(batch)
        if len(values) not in (2, 3):
            raise AdvisorError(f"a curve predictor returns (T, E2E) or (T, E2E, E2E bound), got {len(values)} arrays")
        return tuple(_as_vector(name, np.broadcast_to(np.asarray(value, float), batch.shape))
                     for name, value in zip(names, values))

    tput, e2e, *bound = evaluate(candidates)
    t_one = float(evaluate(np.array([1.0]))[0][0])
    if slo_s is None:
        reference = candidates.min() if slo_reference_batch is None else slo_reference_batch
        slo_s = float(slo_multiplier * evaluate(np.array([float(reference)]))[1][0])
    return select_batch_cap(candidates, tput, e2e, slo_s=slo_s, epsilon=epsilon,
                            throughput_at_one_per_s=t_one, e2e_bound_s=bound[0] if bound else None)


# --- evaluation on measured data (Table V, Fig. 12) ----------------------------------

def _measured_at(batch_cap: float, batch_sizes: ArrayLike, values: ArrayLike) -> float:
    return float(interpolate_log_batch(batch_sizes, values, batch_cap)[0])


def throughput_variation_pct(slim_batch_cap: float, full_batch_cap: float,
                             measured_batch_sizes: ArrayLike,
                             measured_throughput_per_s: ArrayLike) -> float:
    """Signed ``100 (T_meas(B_slim) - T_meas(B_full)) / T_meas(B_full)`` (Table V "Thr. var").

    NaN when either decision is infeasible (NaN cap).
    """
    if np.isnan(slim_batch_cap) or np.isnan(full_batch_cap):
        return float("nan")
    slim = _measured_at(slim_batch_cap, measured_batch_sizes, measured_throughput_per_s)
    full = _measured_at(full_batch_cap, measured_batch_sizes, measured_throughput_per_s)
    return 100.0 * (slim - full) / full


def slo_violation_pct(batch_cap: float, measured_batch_sizes: ArrayLike,
                      measured_e2e_latency_s: ArrayLike, slo_s: float) -> float:
    """``100 max(0, E2E_meas(B_cap) - SLO) / SLO`` (Table V "SLO viol."); NaN if infeasible."""
    slo_s = _check_slo(slo_s)
    if np.isnan(batch_cap):
        return float("nan")
    e2e = _measured_at(batch_cap, measured_batch_sizes, measured_e2e_latency_s)
    return 100.0 * max(0.0, e2e - slo_s) / slo_s


def throughput_retained_pct(batch_cap: float, measured_batch_sizes: ArrayLike,
                            measured_throughput_per_s: ArrayLike) -> float:
    """``100 T_meas(B_cap) / max_B T_meas(B)``, % of the profiled peak (Fig. 12); NaN if infeasible."""
    if np.isnan(batch_cap):
        return float("nan")
    tput = _as_vector("measured_throughput_per_s", measured_throughput_per_s)
    return 100.0 * _measured_at(batch_cap, measured_batch_sizes, tput) / float(tput.max())
