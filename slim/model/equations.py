"""SLIM's semi-analytical model of vLLM serving latency and throughput (paper Eq. 5-12).

Every function is a pure, vectorised numpy function: ``il``, ``ol`` and ``batch``
broadcast against each other, and the architecture may be a single
`Architecture` or an `ArchitectureArrays` (one row of constants per
configuration), so predictions for many models at once stay vectorised.
Symbols follow the paper (Section VI-A, Eq. 4): ``L`` layers, hidden size ``D``, KV width
``D_kv`` (GQA), FFN ratio ``r_ff``, ``F_max`` peak FLOP/s, ``BW_max`` HBM bandwidth.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping, NamedTuple, Protocol

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import ConfigError
from slim.model.modern import allreduce_s_per_step, compute_scale, uses_modern_terms, weight_factor
from slim.model.modern import kv_bytes_read_per_request as modern_kv_bytes
from slim.model.modern import prefill_flops as modern_prefill_flops
from slim.specs.architecture import BYTES_PER_FP16, Architecture, ArchitectureArrays, ArchitectureCatalog
from slim.specs.hardware import Hardware

GAMMA_REFERENCE_HIDDEN_DIM = 1024
"""The ``1024`` in Eq. 10's ``(D / 1024)^2``."""


@dataclass(frozen=True)
class SlimParams:
    """SLIM's calibrated constants (paper Eqs. 5, 7, 9 and 10), in SI units.

    ============================  ==========  =============================================
    field                         paper       meaning
    ============================  ==========  =============================================
    ``eta_compute``               ``eta_c``   prefill compute efficiency, in (0, 1] (Eq. 7)
    ``eta_memory``                ``eta_m``   KV-scan bandwidth efficiency, in (0, 1] (Eq. 9)
    ``batch_offset``              ``B0``      small-batch offset of the KV scan, >= 0 (Eq. 9)
    ``alpha_s_per_token``         ``alpha``   dense-decode seconds per output token (Eq. 10)
    ``gamma_s_per_token``         ``gamma``   dense-decode seconds per output token per layer
                                              per ``(D / 1024)^2`` (Eq. 10)
    ``t_fixed_s``                 ``t_fixed`` fixed per-request overhead in seconds (Eq. 5)
    ============================  ==========  =============================================
    """

    eta_compute: float
    eta_memory: float
    batch_offset: float
    alpha_s_per_token: float
    gamma_s_per_token: float
    t_fixed_s: float

    def to_dict(self) -> dict[str, float]:
        return {name: float(value) for name, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, values: Mapping[str, float]) -> "SlimParams":
        missing = [name for name in PARAM_NAMES if name not in values]
        if missing:
            raise ConfigError(f"SLIM parameters lack key(s) {', '.join(missing)}")
        return cls(**{name: float(values[name]) for name in PARAM_NAMES})


PARAM_NAMES: tuple[str, ...] = (
    "eta_compute", "eta_memory", "batch_offset", "alpha_s_per_token", "gamma_s_per_token", "t_fixed_s",
)


@dataclass(frozen=True)
class Ablation:
    """Which decode terms of Eq. 9 are kept (paper Table IV).

    ``use_kv_scan=False`` drops ``(B + B0) M_dec / (eta_m BW_max)`` ("w/o KV scan");
    ``use_dense_decode=False`` drops ``T_d`` ("w/o dense decode").
    """

    use_kv_scan: bool = True
    use_dense_decode: bool = True

    @property
    def name(self) -> str:
        if self.use_kv_scan and self.use_dense_decode:
            return "full"
        dropped = [label for label, kept in (("kv_scan", self.use_kv_scan), ("dense_decode", self.use_dense_decode))
                   if not kept]
        return "no_" + "_no_".join(dropped)

    def to_dict(self) -> dict[str, bool]:
        return {"use_kv_scan": self.use_kv_scan, "use_dense_decode": self.use_dense_decode}

    @classmethod
    def from_dict(cls, values: Mapping[str, bool]) -> "Ablation":
        return cls(use_kv_scan=bool(values["use_kv_scan"]), use_dense_decode=bool(values["use_dense_decode"]))


FULL = Ablation()
NO_KV_SCAN = Ablation(use_kv_scan=False)
NO_DENSE_DECODE = Ablation(use_dense_decode=False)
ABLATIONS: dict[str, Ablation] = {ablation.name: ablation for ablation in (FULL, NO_KV_SCAN, NO_DENSE_DECODE)}
"""Ablations by name: ``full``, ``no_kv_scan``, ``no_dense_decode``."""


ArchitectureLookup = ArchitectureCatalog | Mapping[str, Architecture]
"""A catalog (names and aliases) or a plain ``{model name: Architecture}`` mapping."""


class ArchitectureLike(Protocol):
    """What the model reads from an architecture: scalars or per-configuration arrays."""

    @property
    def n_layers(self): ...
    @property
    def hidden_dim(self): ...
    @property
    def kv_dim(self): ...
    @property
    def ffn_ratio(self): ...


def _as_float(values) -> np.ndarray:
    return np.asarray(values, dtype=float)


def prefill_flops(arch: ArchitectureLike, il, batch) -> np.ndarray:
    """Prefill FLOPs of a batch (Eq. 8).

    ``F_pre = L [ B IL (4 D^2 + 4 D D_kv + 4 r_ff D^2) + 4 B IL^2 D ]``
    (QKV/output projections, FFN, and attention scores/values).
    """
    n_layers, d, d_kv, r_ff = (_as_float(v) for v in (arch.n_layers, arch.hidden_dim, arch.kv_dim, arch.ffn_ratio))
    il, batch = _as_float(il), _as_float(batch)
    dense_per_token = 4.0 * d**2 + 4.0 * d * d_kv + 4.0 * r_ff * d**2
    return n_layers * (batch * il * dense_per_token + 4.0 * batch * il**2 * d)


def kv_context_tokens(il, ol) -> np.ndarray:
    """Context tokens attended over a request's decode (Eq. 12).

    ``C(IL, OL) = sum_{j=1..OL} (IL + j) = OL (IL + 1) + OL (OL - 1) / 2``
    """
    il, ol = _as_float(il), _as_float(ol)
    return ol * (il + 1.0) + ol * (ol - 1.0) / 2.0


def kv_bytes_read_per_request(arch: ArchitectureLike, il, ol) -> np.ndarray:
    """KV-cache bytes one request reads over its decode (Eq. 11).

    ``M_dec = 2 L D_kv b_kv C(IL, OL)`` (K and V, ``b_kv = 2`` bytes).
    """
    n_layers, d_kv = _as_float(arch.n_layers), _as_float(arch.kv_dim)
    return 2.0 * n_layers * d_kv * BYTES_PER_FP16 * kv_context_tokens(il, ol)


class E2EComponents(NamedTuple):
    """The additive terms of Eq. 5, in seconds (dropped terms are zero)."""

    prefill_s: np.ndarray       # T_pre (Eq. 7)
    dense_decode_s: np.ndarray  # T_d (Eq. 10)
    kv_scan_s: np.ndarray       # (B + B0) M_dec / (eta_m BW_max) (Eq. 9)
    fixed_s: np.ndarray         # t_fixed

    @property
    def total_s(self) -> np.ndarray:
        return self.prefill_s + self.dense_decode_s + self.kv_scan_s + self.fixed_s


def prefill_time_s(arch: ArchitectureLike, hw: Hardware, params: SlimParams, il, batch) -> np.ndarray:
    """``T_pre = F_pre / (eta_c F_max)`` (Eq. 7)."""
    return _prefill_s(prefill_flops(arch, il, batch), hw, params)


def dense_decode_time_s(arch: ArchitectureLike, params: SlimParams, ol) -> np.ndarray:
    """``T_d = alpha OL + gamma L (D / 1024)^2 OL`` (Eq. 10)."""
    return _dense_decode_s(_width_factor(arch), _as_float(ol), params)


def kv_scan_time_s(arch: ArchitectureLike, hw: Hardware, params: SlimParams, il, ol, batch) -> np.ndarray:
    """``(B + B0) M_dec / (eta_m BW_max)``, the KV-scan part of Eq. 9."""
    return _kv_scan_s(kv_bytes_read_per_request(arch, il, ol), _as_float(batch), hw, params)


def _prefill_s(flops: np.ndarray, hw: Hardware, params: SlimParams) -> np.ndarray:
    return flops / (params.eta_compute * hw.peak_flops_per_s)


def _width_factor(arch: ArchitectureLike) -> np.ndarray:
    """``L (D / 1024)^2`` of Eq. 10."""
    n_layers, d = _as_float(arch.n_layers), _as_float(arch.hidden_dim)
    return n_layers * (d / GAMMA_REFERENCE_HIDDEN_DIM) ** 2


def _dense_decode_s(width_factor: np.ndarray, ol: np.ndarray, params: SlimParams) -> np.ndarray:
    return params.alpha_s_per_token * ol + params.gamma_s_per_token * width_factor * ol


def _kv_scan_s(kv_bytes: np.ndarray, batch: np.ndarray, hw: Hardware, params: SlimParams) -> np.ndarray:
    return (batch + params.batch_offset) * kv_bytes / (params.eta_memory * hw.hbm_bandwidth_bytes_per_s)


def decode_time_s(arch: ArchitectureLike, hw: Hardware, params: SlimParams, il, ol, batch,
                  ablation: Ablation = FULL) -> np.ndarray:
    """``T_dec = T_d + (B + B0) M_dec / (eta_m BW_max)`` (Eq. 9), less the ablated term."""
    components = e2e_components_s(arch, hw, params, il, ol, batch, ablation)
    return components.dense_decode_s + components.kv_scan_s


class WorkloadTerms(NamedTuple):
    """What Eqs. 7-12 compute from the configurations alone (broadcast to one shape), before
    SLIM's constants enter: a fit evaluates the model at thousands of trial constants on the
    same rows, so it computes these once (`workload_terms`, then `components_at`)."""

    il: np.ndarray
    ol: np.ndarray
    batch: np.ndarray
    prefill_flops: np.ndarray   # F_pre (Eq. 8)
    kv_bytes: np.ndarray        # M_dec (Eq. 11)
    width_factor: np.ndarray    # L (D / 1024)^2 (Eq. 10)
    zeros: np.ndarray
    collective_s: np.ndarray | float = 0.0
    """Seconds no constant scales (the tensor-parallel all-reduces of `slim.model.modern`; 0 in the paper)."""


def workload_terms(arch: ArchitectureLike, il, ol, batch) -> WorkloadTerms:
    il, ol, batch = np.broadcast_arrays(_as_float(il), _as_float(ol), _as_float(batch))
    flops = prefill_flops(arch, il, batch)
    return WorkloadTerms(il, ol, batch, flops, kv_bytes_read_per_request(arch, il, ol), _width_factor(arch),
                         np.zeros(np.broadcast(flops, il).shape))


def components_at(terms: WorkloadTerms, hw: Hardware, params: SlimParams, ablation: Ablation = FULL) -> E2EComponents:
    """The terms of Eq. 5 at `params` for the configurations of `terms`; an ablated term is zero."""
    zeros = terms.zeros
    prefill = _prefill_s(terms.prefill_flops, hw, params)
    dense = _dense_decode_s(terms.width_factor, terms.ol, params) if ablation.use_dense_decode else zeros
    kv_scan = _kv_scan_s(terms.kv_bytes, terms.batch, hw, params) if ablation.use_kv_scan else zeros
    return E2EComponents(prefill + zeros, dense + zeros, kv_scan + zeros, zeros + params.t_fixed_s + terms.collective_s)


def e2e_components_s(arch: ArchitectureLike, hw: Hardware, params: SlimParams, il, ol, batch,
                     ablation: Ablation = FULL) -> E2EComponents:
    """The terms of Eq. 5, broadcast to a common shape; an ablated term is zero."""
    return components_at(workload_terms(arch, il, ol, batch), hw, params, ablation)


def e2e_derivatives_s(arch: ArchitectureLike, hw: Hardware, params: SlimParams, il, ol, batch,
                      ablation: Ablation = FULL) -> dict[str, np.ndarray]:
    """``dE2E / d theta_j`` of Eq. 5 for every SLIM constant, in seconds per SI unit of it.

    Term by term (Eqs. 7, 9, 10): ``-T_pre / eta_c``; ``-T_kv / eta_m`` with
    ``T_kv = (B + B0) M_dec / (eta_m BW_max)``; ``M_dec / (eta_m BW_max)`` for ``B0``;
    ``OL`` for ``alpha``; ``L (D / 1024)^2 OL`` for ``gamma``; ``1`` for ``t_fixed``.
    A constant whose term `ablation` drops has derivative zero.
    """
    components = e2e_components_s(arch, hw, params, il, ol, batch, ablation)
    ones = np.ones_like(components.total_s)
    n_layers, d = _as_float(arch.n_layers), _as_float(arch.hidden_dim)
    kv_per_sequence_s = kv_bytes_read_per_request(arch, il, ol) / (params.eta_memory * hw.hbm_bandwidth_bytes_per_s)
    width_factor_ol = n_layers * (d / GAMMA_REFERENCE_HIDDEN_DIM) ** 2 * _as_float(ol)
    kv, dense = float(ablation.use_kv_scan), float(ablation.use_dense_decode)
    return {
        "eta_compute": -components.prefill_s / params.eta_compute,
        "eta_memory": -components.kv_scan_s / params.eta_memory,
        "batch_offset": kv * kv_per_sequence_s * ones,
        "alpha_s_per_token": dense * _as_float(ol) * ones,
        "gamma_s_per_token": dense * width_factor_ol * ones,
        "t_fixed_s": ones,
    }


def predict_e2e_s(arch: ArchitectureLike, hw: Hardware, params: SlimParams, il, ol, batch,
                  ablation: Ablation = FULL) -> np.ndarray:
    """End-to-end latency of a request in the running batch (Eq. 5).

    ``E2E(IL, OL, B) = T_pre + T_dec + t_fixed``
    """
    return e2e_components_s(arch, hw, params, il, ol, batch, ablation).total_s


def throughput_from_e2e(il, ol, batch, e2e_s) -> np.ndarray:
    """``T = B (IL + OL) / E2E`` (Eq. 6), total tokens per second."""
    return _as_float(batch) * (_as_float(il) + _as_float(ol)) / _as_float(e2e_s)


def predict_throughput_tokens_per_s(arch: ArchitectureLike, hw: Hardware, params: SlimParams, il, ol, batch,
                                    ablation: Ablation = FULL) -> np.ndarray:
    """Total-token throughput ``T(IL, OL, B) = B (IL + OL) / E2E(IL, OL, B)`` (Eq. 6)."""
    return throughput_from_e2e(il, ol, batch, predict_e2e_s(arch, hw, params, il, ol, batch, ablation))


def architectures_for_frame(architectures: ArchitectureLookup, frame: pd.DataFrame) -> ArchitectureArrays:
    """Per-row architecture constants for a table with a `columns.MODEL` column.

    `architectures` is an `ArchitectureCatalog` (names and aliases) or a plain
    ``{name: Architecture}`` mapping; an unknown model raises its lookup error
    (`UnknownModelError` for a catalog, `ConfigError` for a mapping).
    """
    col.require_columns(frame, (col.MODEL,), "configuration table")
    codes, models = pd.factorize(frame[col.MODEL], sort=False)
    if (codes < 0).any():
        raise ConfigError(f"configuration table has missing values in '{col.MODEL}'")
    try:
        per_model = ArchitectureArrays.stack([architectures[str(model)] for model in models])
    except KeyError as error:
        raise ConfigError(f"unknown model {error}; add it to the models file") from error
    return per_model.take(codes)


FRAME_INPUT_COLUMNS = (col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.MEAN_BATCH_SIZE)


def frame_workload(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(IL, OL, B)`` arrays of a configuration table; B is the measured mean batch size."""
    col.require_columns(frame, FRAME_INPUT_COLUMNS, "configuration table")
    return (frame[col.INPUT_LEN_MEAN].to_numpy(dtype=float),
            frame[col.OUTPUT_LEN_MEAN].to_numpy(dtype=float),
            frame[col.MEAN_BATCH_SIZE].to_numpy(dtype=float))


def frame_terms(architectures: ArchitectureLookup, hw: Hardware, frame: pd.DataFrame,
                batch: np.ndarray | None = None) -> WorkloadTerms:
    """The terms of Eqs. 7-12 for every row of a configuration table at its mean running batch (or at
    `batch`): the paper's (`workload_terms`) for the dense 16-bit models it describes, and the
    decode step's bytes and FLOPs (`slim.model.modern`, beyond the paper) for every other model, per
    GPU of the row's tensor-parallel degree."""
    il, ol, measured_batch = frame_workload(frame) if batch is None else (
        frame[col.INPUT_LEN_MEAN].to_numpy(dtype=float), frame[col.OUTPUT_LEN_MEAN].to_numpy(dtype=float), None)
    batch = measured_batch if batch is None else np.asarray(batch, dtype=float)
    arch = architectures_for_frame(architectures, frame)
    terms = workload_terms(arch, il, ol, batch)
    models = frame[col.MODEL].astype(str).to_numpy()
    tensor_parallel = (frame[col.TENSOR_PARALLEL].fillna(1).to_numpy(dtype=float).astype(int)
                       if col.TENSOR_PARALLEL in frame else np.ones(len(frame), dtype=int))
    modern = {name: architectures[name] for name in dict.fromkeys(models)}
    modern = {name: spec for name, spec in modern.items() if uses_modern_terms(spec)}
    if not modern:
        return terms
    flops, kv_bytes = terms.prefill_flops.copy(), terms.kv_bytes.copy()
    width, collective = terms.width_factor.copy(), np.zeros_like(terms.zeros)
    for name, spec in modern.items():
        for degree in sorted(set(tensor_parallel[models == name].tolist())):
            rows = (models == name) & (tensor_parallel == degree)
            flops[rows] = modern_prefill_flops(spec, il[rows], batch[rows]) / compute_scale(spec, hw, degree)
            kv_bytes[rows] = modern_kv_bytes(spec, il[rows], ol[rows], degree)
            width[rows] = weight_factor(spec, batch[rows], degree)
            collective[rows] = ol[rows] * allreduce_s_per_step(spec, hw, batch[rows], degree)
    return terms._replace(prefill_flops=flops, kv_bytes=kv_bytes, width_factor=width, collective_s=collective)


def e2e_derivatives_from_terms(terms: WorkloadTerms, hw: Hardware, params: SlimParams,
                               ablation: Ablation = FULL) -> dict[str, np.ndarray]:
    """`e2e_derivatives_s` from precomputed terms (`frame_terms`): the same derivatives of Eq. 5, term by
    term, for the paper's rows and the modern ones alike."""
    components = components_at(terms, hw, params, ablation)
    ones = np.ones_like(components.total_s)
    kv_per_sequence_s = terms.kv_bytes / (params.eta_memory * hw.hbm_bandwidth_bytes_per_s)
    kv, dense = float(ablation.use_kv_scan), float(ablation.use_dense_decode)
    return {
        "eta_compute": -components.prefill_s / params.eta_compute,
        "eta_memory": -components.kv_scan_s / params.eta_memory,
        "batch_offset": kv * kv_per_sequence_s * ones,
        "alpha_s_per_token": dense * terms.ol * ones,
        "gamma_s_per_token": dense * terms.width_factor * terms.ol * ones,
        "t_fixed_s": ones,
    }


def predict_frame(architectures: ArchitectureLookup, hw: Hardware, params: SlimParams,
                  frame: pd.DataFrame, ablation: Ablation = FULL) -> tuple[np.ndarray, np.ndarray]:
    """``(E2E seconds, total-token throughput)`` for every row of a configuration table.

    Reads `columns.MODEL`, `INPUT_LEN_MEAN`, `OUTPUT_LEN_MEAN` and `MEAN_BATCH_SIZE`
    (the measured mean running batch, the paper's x-axis, not ``max_num_seqs``); the terms are
    `frame_terms`' (the paper's for its dense models).
    """
    return predict_terms(frame_terms(architectures, hw, frame), hw, params, ablation)


def predict_terms(terms: WorkloadTerms, hw: Hardware, params: SlimParams,
                  ablation: Ablation = FULL) -> tuple[np.ndarray, np.ndarray]:
    """`predict_frame` at the configurations of precomputed `terms` (`frame_terms`): predicting one
    table at several constants (a fit's training-equivalent solutions) computes its terms once."""
    e2e_s = components_at(terms, hw, params, ablation).total_s
    return e2e_s, throughput_from_e2e(terms.il, terms.ol, terms.batch, e2e_s)
