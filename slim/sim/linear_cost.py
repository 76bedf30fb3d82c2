"""The simulator's cost of a whole schedule as a function of its fitted constants.

In the coordinates ``u = (1/eta_c, 1/eta_m, 1/eta_attn, t_kernel, t_base, t_seq, t_xformers, t_tp)``
(the inverse efficiencies and the five overheads of `FITTED_CONSTANTS`, SI units), every term
of a step's cost (`slim.sim.cost`) is linear or the roofline ``max`` of two linear terms:

    GEMM g over T rows:  max(FLOPs_g(T) / F_max u_c, bytes_g(T) / BW_max u_m)
    elementwise:         bytes(T) / BW_max u_m;   launches: n_kernels(T) t_kernel
    XFormers backend:    L_xformers t_xformers per step (L on that backend, else 0)
    decode attention:    c max(4 D L / F_max u_c, KV bytes / BW_max u_attn)
    prefill attention:   p 4 D L / F_max u_c;     CPU side: t_base + k_t t_tp + seqs t_seq
    (k_t: the accelerator's collective steps at t ranks, `Hardware.tensor_parallel_collective_steps`)

so a schedule's jitter-weighted duration (`ScheduleStats`) is positively homogeneous and
piecewise linear: ``D(u) = G(u) . u + C`` with a coefficient vector ``G`` that is constant
wherever no GEMM changes sides of its roofline, and ``C`` the tensor-parallel all-reduce
(fixed constants, not fitted). `LinearCost.linear_form` returns ``G`` and ``C`` for many
schedules at once; ``G`` is also ``dD/du``, the exact Jacobian the calibration uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from slim.sim.constants import FITTED_CONSTANTS, SimConstants
from slim.sim.cost import ELEMENTWISE_KERNELS_PER_LAYER, KERNELS_PER_LAYER, StepCostModel
from slim.sim.metrics import ScheduleStats
from slim.specs.architecture import Architecture
from slim.specs.hardware import Hardware

EFFICIENCIES = FITTED_CONSTANTS[:3]
"""The fitted constants whose inverses are coordinates of ``u``; the others are ``u`` as they are."""
(COMPUTE, MEMORY, ATTENTION, KERNEL, BASE, PER_SEQ, XFORMERS, TP_STEP) = range(len(FITTED_CONSTANTS))


def coordinates_of(consts: SimConstants) -> np.ndarray:
    """``u`` of `consts` (see the module docstring)."""
    values = np.array([getattr(consts, name) for name in FITTED_CONSTANTS], dtype=float)
    values[:len(EFFICIENCIES)] = 1.0 / values[:len(EFFICIENCIES)]
    return values


def constants_at(consts: SimConstants, u: np.ndarray) -> SimConstants:
    """`consts` with its fitted fields set from coordinates ``u``."""
    values = np.asarray(u, dtype=float).copy()
    values[:len(EFFICIENCIES)] = 1.0 / values[:len(EFFICIENCIES)]
    return consts.with_fitted(dict(zip(FITTED_CONSTANTS, values.tolist())))


@dataclass(frozen=True)
class StatsMatrix:
    """Several `ScheduleStats` of one architecture, stacked row-wise (weights zero-padded)."""

    w_tokens: np.ndarray      # (runs, tokens + 1)
    w_sampled: np.ndarray     # (runs, sampled + 1)
    s_context: np.ndarray
    s_pairs: np.ndarray
    s_seqs: np.ndarray
    w_steps: np.ndarray

    @classmethod
    def stack(cls, stats: Sequence[ScheduleStats]) -> "StatsMatrix":
        def padded(vectors: list[np.ndarray]) -> np.ndarray:
            matrix = np.zeros((len(vectors), max(len(v) for v in vectors)))
            for row, vector in enumerate(vectors):
                matrix[row, :len(vector)] = vector
            return matrix

        def scalars(name: str) -> np.ndarray:
            return np.array([float(getattr(s, name)) for s in stats])

        return cls(padded([s.w_tokens for s in stats]), padded([s.w_sampled for s in stats]),
                   scalars("s_context"), scalars("s_pairs"), scalars("s_seqs"), scalars("w_steps"))


class LinearCost:
    """The step cost of one architecture (and tensor-parallel degree) taken apart along ``u``.

    Only the fixed fields of `consts` matter (all-reduce); the fitted ones are ``u``.
    """

    def __init__(self, arch: Architecture, hw: Hardware, consts: SimConstants, tensor_parallel: int = 1,
                 max_tokens: int | None = None, max_sampled: int | None = None, input_len: float | None = None,
                 output_len: float | None = None):
        model = StepCostModel(arch, hw, consts, tensor_parallel, input_len=input_len, output_len=output_len)
        self.max_tokens = max_tokens or consts.max_num_batched_tokens
        self.max_sampled = max_sampled or consts.max_num_batched_tokens
        tokens = np.arange(self.max_tokens + 1, dtype=float)
        sampled = np.arange(self.max_sampled + 1, dtype=float)
        flops, bandwidth, layers = hw.peak_flops_per_s, hw.hbm_bandwidth_bytes_per_s, arch.n_layers
        *layer_gemms, _ = model.gemm_work(tokens)
        # Seconds at unit coordinates (efficiency one), per GEMM: (compute side, memory side).
        self.gemm_s = [(count * f / flops, count * b / bandwidth) for count, (f, b) in zip(model.gemm_layers,
                                                                                           layer_gemms)]
        lm_flops, lm_bytes = model.gemm_work(sampled)[-1]
        self.lm_head_s = (lm_flops / flops, lm_bytes / bandwidth)
        self.token_active = (tokens > 0).astype(float)
        self.sampled_active = (sampled > 0).astype(float)
        self.elementwise_s = model.elementwise_bytes_per_token * tokens / bandwidth
        # Launches of a step with tokens: every layer kernel (the attention one included).
        self.kernels_per_step = float(layers * (KERNELS_PER_LAYER - 1 + ELEMENTWISE_KERNELS_PER_LAYER + 1))
        self.xformers_layers = float(model.xformers_layers)
        self.collective_steps = float(hw.tensor_parallel_collective_steps(tensor_parallel))
        self.attention_s = (model.attention_flops_per_token / flops, model.attention_bytes_per_token / bandwidth)
        self.prefill_pair_s = model.prefill_flops_per_pair / flops
        self.allreduce_s = model.allreduce_s(tokens)

    def form(self, stats: StatsMatrix) -> "ScheduleForm":
        """`stats` prepared for fast evaluation at any ``u`` (see `ScheduleForm`)."""
        return ScheduleForm(self, stats)


def _sides(compute_s: np.ndarray, memory_s: np.ndarray, active: np.ndarray,
           weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One roofline ``max`` summed over a weight matrix, for every possible side boundary.

    The compute/memory ratio of a GEMM grows with its rows, so at any ``u`` the rows run
    memory-bound below some ``k`` and compute-bound from ``k`` on. Returns the ratio by rows
    (NaN where inactive), the memory side summed over rows ``< k`` (column ``k``) and the
    compute side summed over rows ``>= k`` (column ``k``), both of shape (runs, rows + 1).
    """
    compute = weights * (compute_s * active)
    memory = weights * (memory_s * active)
    runs, rows = weights.shape
    below = np.zeros((runs, rows + 1))
    np.cumsum(memory, axis=1, out=below[:, 1:])
    from_k = np.zeros((runs, rows + 1))
    from_k[:, :rows] = np.cumsum(compute[:, ::-1], axis=1)[:, ::-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(active > 0, compute_s / memory_s, np.nan)
    return ratio, below, from_k


def _boundary(ratio: np.ndarray, threshold: float) -> int:
    """First active row whose compute side is at least its memory side (``ratio >= threshold``)."""
    compute_bound = np.flatnonzero(ratio >= threshold)
    return int(compute_bound[0]) if compute_bound.size else len(ratio)


class ScheduleForm:
    """``D(u) = G(u) . u + C`` for every row of a `StatsMatrix`, evaluated in O(runs) per ``u``.

    Each GEMM's roofline side is decided per row count by the single threshold
    ``u_m / u_c`` (the ratio of its sides grows with the rows), so ``G`` is built from
    prefix and suffix sums prepared once (`_sides`). Sums are numpy reductions, never BLAS,
    so the result does not depend on the BLAS kernel.
    """

    def __init__(self, cost: LinearCost, stats: StatsMatrix):
        width_tokens, width_sampled = stats.w_tokens.shape[1], stats.w_sampled.shape[1]
        if width_tokens > cost.max_tokens + 1 or width_sampled > cost.max_sampled + 1:
            raise ValueError(f"schedule statistics of {width_tokens} token / {width_sampled} sampled bins exceed the "
                             f"tables ({cost.max_tokens + 1} / {cost.max_sampled + 1}); pass larger maxima")
        tokens_active = cost.token_active[:width_tokens]
        self.gemms = [_sides(c[:width_tokens], m[:width_tokens], tokens_active, stats.w_tokens)
                      for c, m in cost.gemm_s]
        compute_s, memory_s = cost.lm_head_s
        self.lm_head = _sides(compute_s[:width_sampled], memory_s[:width_sampled],
                              cost.sampled_active[:width_sampled], stats.w_sampled)
        self.fixed = np.zeros((len(stats.s_context), len(FITTED_CONSTANTS)))
        self.fixed[:, MEMORY] = (stats.w_tokens * (cost.elementwise_s[:width_tokens] * tokens_active)).sum(axis=1)
        active_steps = (stats.w_tokens * tokens_active).sum(axis=1)
        self.fixed[:, KERNEL] = (active_steps * cost.kernels_per_step
                                 + (stats.w_sampled * cost.sampled_active[:width_sampled]).sum(axis=1))
        self.fixed[:, XFORMERS] = active_steps * cost.xformers_layers
        self.fixed[:, COMPUTE] = stats.s_pairs * cost.prefill_pair_s
        self.fixed[:, BASE] = stats.w_steps
        self.fixed[:, TP_STEP] = stats.w_steps * cost.collective_steps
        self.fixed[:, PER_SEQ] = stats.s_seqs
        self.attention_s = cost.attention_s
        self.s_context = stats.s_context
        self.constant_s = (stats.w_tokens * cost.allreduce_s[:width_tokens]).sum(axis=1)

    def linear_form(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(G, C)``: the duration at ``u`` is ``G @ u + C``, and ``G`` its gradient in ``u``."""
        coefficients = self.fixed.copy()
        threshold = u[MEMORY] / u[COMPUTE]
        for ratio, below, from_k in (*self.gemms, self.lm_head):
            k = _boundary(ratio, threshold)
            coefficients[:, MEMORY] += below[:, k]
            coefficients[:, COMPUTE] += from_k[:, k]
        compute_s, memory_s = self.attention_s
        if compute_s * u[COMPUTE] >= memory_s * u[ATTENTION]:
            coefficients[:, COMPUTE] += self.s_context * compute_s
        else:
            coefficients[:, ATTENTION] += self.s_context * memory_s
        return coefficients, self.constant_s

    def duration_s(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(durations, gradients) at ``u``."""
        coefficients, constant = self.linear_form(u)
        return (coefficients * u).sum(axis=1) + constant, coefficients
