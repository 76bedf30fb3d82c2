"""Prediction-error metrics shared by SLIM and the baselines (the paper reports MAPE)."""

from __future__ import annotations

import numpy as np


def mape_pct(predicted, measured) -> float:
    """Mean absolute percentage error, in percent: ``100 mean |pred - meas| / |meas|``.

    Raises `ValueError` on empty or mismatched inputs, non-finite values or a
    zero measurement, rather than returning NaN or infinity silently.
    """
    predicted = np.asarray(predicted, dtype=float)
    measured = np.asarray(measured, dtype=float)
    if predicted.shape != measured.shape:
        raise ValueError(f"mape_pct: predicted shape {predicted.shape} differs from measured {measured.shape}")
    if measured.size == 0:
        raise ValueError("mape_pct: no values to compare")
    if not (np.isfinite(predicted).all() and np.isfinite(measured).all()):
        raise ValueError("mape_pct: predicted or measured values contain NaN or infinity")
    if (measured == 0).any():
        raise ValueError("mape_pct: a measured value is zero; the percentage error is undefined")
    return float(100.0 * np.mean(np.abs(predicted - measured) / np.abs(measured)))
