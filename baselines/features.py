"""Per-configuration inputs shared by the regression baselines.

The baselines read one row per benchmark configuration (columns of
`slim.columns`) plus four architecture columns added here from the model
catalog. Everything is converted to float arrays once, with checks that name
the missing or non-finite column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import ConfigError, NotFittedError
from slim.model.equations import throughput_from_e2e
from slim.specs.architecture import ArchitectureArrays, ArchitectureCatalog
from slim.specs.workload import Workload

# Architecture columns (the paper's Section VI-A symbols: L, D, H_q, H_kv).
N_LAYERS = "n_layers"
HIDDEN_DIM = "hidden_dim"
N_Q_HEADS = "n_q_heads"
N_KV_HEADS = "n_kv_heads"
ARCHITECTURE_COLUMNS = (N_LAYERS, HIDDEN_DIM, N_Q_HEADS, N_KV_HEADS)
# What a roofline estimate needs besides them (IMAI OOD-LR's ``features="roofline_overhead"``):
# the FFN ratio ``r_ff`` of Eq. 8 and the parameter count (weight bytes read per decode step).
FFN_RATIO = "ffn_ratio"
N_PARAMS = "n_params"
ROOFLINE_COLUMNS = (FFN_RATIO, N_PARAMS)

WORKLOAD_COLUMNS = (col.MEAN_BATCH_SIZE, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN)


def add_architecture_columns(frame: pd.DataFrame, catalog: ArchitectureCatalog) -> pd.DataFrame:
    """Return a copy of `frame` with ``n_layers, hidden_dim, n_q_heads, n_kv_heads`` and the
    roofline columns ``ffn_ratio, n_params`` (`ROOFLINE_COLUMNS`).

    Values come from `catalog[model]` for the model named in the ``model`` column
    (`slim.columns.MODEL`); an unknown model raises `UnknownModelError`.
    """
    _require_frame(frame, (col.MODEL,), "add_architecture_columns")
    out = frame.copy()
    architectures = {name: catalog[name] for name in pd.unique(out[col.MODEL])}
    for column in (*ARCHITECTURE_COLUMNS, N_PARAMS):
        out[column] = [int(getattr(architectures[name], column)) for name in out[col.MODEL]]
    out[FFN_RATIO] = [float(architectures[name].ffn_ratio) for name in out[col.MODEL]]
    return out


def column_array(frame: pd.DataFrame, column: str, *, positive: bool = False) -> np.ndarray:
    """One column of `frame` as a finite float array (optionally strictly positive)."""
    _require_frame(frame, (column,), "baseline input")
    values = frame[column].to_numpy(dtype=float)
    if not np.all(np.isfinite(values)):
        raise ConfigError(f"column '{column}' holds NaN or infinite values; drop or fix those rows first")
    if positive and np.any(values <= 0):
        raise ConfigError(f"column '{column}' must be strictly positive")
    return values


def workload_arrays(frame: pd.DataFrame) -> Workload:
    """``B, IL, OL`` of each row (all must be positive and finite); B is the measured mean running batch."""
    return Workload(
        batch_size=column_array(frame, col.MEAN_BATCH_SIZE, positive=True),
        input_len=column_array(frame, col.INPUT_LEN_MEAN, positive=True),
        output_len=column_array(frame, col.OUTPUT_LEN_MEAN, positive=True),
    )


def architecture_arrays(frame: pd.DataFrame) -> ArchitectureArrays:
    """``L, D, H_q, H_kv`` of each row; see `add_architecture_columns`."""
    col.require_columns(frame, ARCHITECTURE_COLUMNS, "X", ConfigError,
                        fix="call baselines.features.add_architecture_columns(X, load_architectures()) first")
    return ArchitectureArrays(*(column_array(frame, c, positive=True) for c in ARCHITECTURE_COLUMNS))


def roofline_arrays(frame: pd.DataFrame) -> tuple[ArchitectureArrays, np.ndarray]:
    """The architecture with its FFN ratio, and the parameter count, of each row (what a
    roofline estimate reads; `add_architecture_columns` adds both)."""
    col.require_columns(frame, (*ARCHITECTURE_COLUMNS, *ROOFLINE_COLUMNS), "X", ConfigError,
                        fix="call baselines.features.add_architecture_columns(X, load_architectures()) first")
    arch = architecture_arrays(frame)
    arch = ArchitectureArrays(arch.n_layers, arch.hidden_dim, arch.n_q_heads, arch.n_kv_heads,
                              column_array(frame, FFN_RATIO, positive=True))
    return arch, column_array(frame, N_PARAMS, positive=True)


def target_array(y: object, n_rows: int, name: str = "y (measured E2E latency, s)") -> np.ndarray:
    """The regression target as a finite, strictly positive 1-D float array of length `n_rows`."""
    values = np.asarray(y, dtype=float)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1 or values.shape[0] != n_rows:
        raise ConfigError(f"{name} must be 1-D with one value per row of X ({n_rows}); got shape {values.shape}")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ConfigError(f"{name} must be finite and strictly positive")
    return values


NULL_SINGULAR_VALUE_RATIO = 1e-10
"""A direction of a (column-scaled) training design whose singular value is below this
fraction of the largest is one the training rows leave undetermined."""

DETERMINED_PROJECTION_TOLERANCE = 1e-8
"""A new design row whose component along the undetermined directions is below this
fraction of its own norm is predicted the same by every equally good fit."""


@dataclass(frozen=True)
class DesignNullSpace:
    """The coefficient directions a linear fit's training design cannot determine.

    A linear model ``y = design @ coef`` fitted on rank-deficient rows has a whole
    affine set of equally good coefficient vectors (all differ by a vector of this
    null space); a regression library returns one of them (the minimal-norm one).
    A new row's prediction is the same for all of them exactly when the row is
    orthogonal to the null space, i.e. lies in the span of the training rows.
    """

    column_scale: np.ndarray
    basis: np.ndarray          # (k, p): orthonormal rows, in unit-norm column units

    @classmethod
    def of(cls, design: np.ndarray) -> "DesignNullSpace":
        design = np.asarray(design, dtype=float)
        scale = np.linalg.norm(design, axis=0)
        scale[scale == 0] = 1.0
        scaled = design / scale
        _, singular_values, vt = np.linalg.svd(scaled, full_matrices=True)
        padded = np.zeros(scaled.shape[1])
        padded[:singular_values.size] = singular_values
        null = padded <= NULL_SINGULAR_VALUE_RATIO * (padded[0] if padded.size else 0.0)
        return cls(scale, vt[null])

    @property
    def dimensions(self) -> int:
        return int(self.basis.shape[0])

    def determines(self, design: np.ndarray) -> np.ndarray:
        """Per row of `design`: True where every equally good fit predicts the same value."""
        scaled = np.asarray(design, dtype=float) / self.column_scale
        if self.dimensions == 0:
            return np.ones(scaled.shape[0], dtype=bool)
        along_null = np.linalg.norm(scaled @ self.basis.T, axis=1)
        return along_null <= DETERMINED_PROJECTION_TOLERANCE * np.maximum(np.linalg.norm(scaled, axis=1), 1e-300)


class ThroughputFromE2EMixin:
    """`predict_throughput` for an estimator whose `predict` returns E2E latency (s)."""

    def predict_throughput(self, X) -> np.ndarray:
        """Total-token throughput (tokens/s), Eq. 6: ``T = B (IL + OL) / E2E``."""
        workload = workload_arrays(X)
        return throughput_from_e2e(workload.input_len, workload.output_len, workload.batch_size, self.predict(X))


def check_fitted(estimator: object, attribute: str) -> None:
    """Raise `slim.errors.NotFittedError` unless `estimator` has `attribute` (set by `fit`)."""
    if not hasattr(estimator, attribute):
        raise NotFittedError(
            f"this {type(estimator).__name__} is not fitted yet; call fit(X, y) before predicting"
        )


def _require_frame(frame: object, required: tuple[str, ...], where: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise ConfigError(f"{where}: X must be a pandas DataFrame with columns {', '.join(required)}")
    col.require_columns(frame, required, f"{where}: X", ConfigError)
