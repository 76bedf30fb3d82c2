"""SLIM-BCA: Eq. 13 on SLIM's predicted curve instead of a profiled one (paper Section VII).

SLIM is a function of the *running* batch; the advisor chooses a *cap*. We predict at
``B = min(cap, KV capacity in sequences)`` with the capacity
``kv_capacity_tokens / (IL + OL)`` reported by the server: vLLM cannot run more
sequences than its KV cache holds. On the public traces the measured mean batch also
falls below large caps for a second reason (the client's finite request stream), which
this approximation does not model; SLIM's predictions at the largest caps are the least
reliable, and Table V's throughput variation shows the net effect.

At a confidence ``c`` (`slim_bounded_curve_predictor`), SLIM-BCA holds the SLO on the one-sided
upper bound of E2E at ``c`` instead of the prediction: ``E2E_upper(IL, OL, B) <= SLO`` in
Eq. 13, with ``E2E_upper`` from `slim.model.uncertainty` (``kind="run"``: the delta method on
the parameter covariance plus the fit's residual variance, times the envelope of the
training-equivalent fits, ``q = t(c)`` on ``n - p`` degrees of freedom), as the SLO is judged on
a run's measured E2E. Throughput and the efficiency floor stay on the prediction.
"""

from __future__ import annotations

import numpy as np

from slim.advisor.bca import BcaResult, CurvePredictor, bca_from_predictor
from slim.advisor.measured import MeasuredCurve
from slim.errors import AdvisorError
from slim.gpu.kv_memory import default_kv_reservation_bytes
from slim.model.equations import SlimParams, predict_e2e_s, throughput_from_e2e
from slim.model.fit import SlimFit
from slim.model.uncertainty import BandKind, check_confidence, prediction_band
from slim.specs.architecture import Architecture
from slim.specs.hardware import Hardware


def kv_capacity_sequences(kv_capacity_tokens: float, input_len: float, output_len: float) -> float:
    """Sequences the KV cache holds at their full length: ``kv_capacity_tokens / (IL + OL)``."""
    return float(kv_capacity_tokens) / (float(input_len) + float(output_len))


def kv_capacity_tokens_or_default(recorded_tokens: float, arch: Architecture, hw: Hardware) -> tuple[float, str]:
    """``(KV capacity in tokens, where it came from)``: what the server recorded (a cache config or
    its log), else, for traces that record none, vLLM's default reservation as
    `slim.gpu.kv_memory.default_kv_reservation_bytes` estimates it for `arch` on `hw`."""
    if np.isfinite(recorded_tokens) and recorded_tokens > 0:
        return float(recorded_tokens), "traces"
    return default_kv_reservation_bytes(arch, hw) / arch.kv_bytes_per_token(), "default reservation"


def slim_curve_predictor(arch: Architecture, hw: Hardware, params: SlimParams, input_len: float,
                         output_len: float, max_concurrent_sequences: float | None = None) -> CurvePredictor:
    """``cap -> (T, E2E)`` from SLIM (Eq. 5, 6) at the running batch ``B = min(cap, B_kv)``.

    ``B_kv`` (`max_concurrent_sequences`) is the KV capacity in sequences; None: no cap.
    """
    limit = np.inf if max_concurrent_sequences is None else float(max_concurrent_sequences)

    def predict(caps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        batch = np.minimum(np.asarray(caps, dtype=float), limit)
        e2e = predict_e2e_s(arch, hw, params, input_len, output_len, batch)
        return throughput_from_e2e(input_len, output_len, batch, e2e), e2e

    return predict


ADVISOR_BAND_KIND: BandKind = "run"
"""The band SLIM-BCA's confidence bounds: a run's measured E2E, not only the predicted curve."""


def slim_bounded_curve_predictor(fit: SlimFit, arch: Architecture, hw: Hardware, input_len: float,
                                 output_len: float, max_concurrent_sequences: float | None,
                                 confidence: float) -> CurvePredictor:
    """``cap -> (T, E2E, E2E_upper)``: SLIM at ``B = min(cap, B_kv)`` (as `slim_curve_predictor`)
    with the one-sided upper bound of E2E at `confidence` (`ADVISOR_BAND_KIND`). `fit` must hold
    its training-equivalent solutions where it has unidentified directions (``sample_valley=True``)."""
    confidence = check_confidence(confidence)
    limit = np.inf if max_concurrent_sequences is None else float(max_concurrent_sequences)

    def predict(caps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        batch = np.minimum(np.asarray(caps, dtype=float), limit)
        band = prediction_band(fit, arch, hw, input_len, output_len, batch, confidence, ADVISOR_BAND_KIND,
                               one_sided=True)
        return band.throughput_per_s, band.e2e_s, band.e2e_high_s

    return predict


def slim_bca(curve: MeasuredCurve, params: SlimParams, arch: Architecture, hw: Hardware,
             slo_s: float, epsilon: float, confidence: float | None = None, fit: SlimFit | None = None) -> BcaResult:
    """Eq. 13 on SLIM's prediction of the target, at the target's profiled caps (so the
    choice can be judged on measured data) with the server's KV capacity as running-batch cap
    (`kv_capacity_tokens_or_default`: the default reservation where the traces record none).
    With `confidence`, the SLO is held on the upper bound of E2E at that confidence
    (`slim_bounded_curve_predictor`, which needs the `fit` whose `params` these are)."""
    capacity_tokens, _ = kv_capacity_tokens_or_default(curve.kv_capacity_tokens, arch, hw)
    capacity = kv_capacity_sequences(capacity_tokens, curve.input_len_mean, curve.output_len_mean)
    if confidence is None:
        predict = slim_curve_predictor(arch, hw, params, curve.input_len_mean, curve.output_len_mean, capacity)
    else:
        if fit is None or fit.params != params:
            raise AdvisorError("slim_bca at a confidence needs the SlimFit whose parameters it is given")
        predict = slim_bounded_curve_predictor(fit, arch, hw, curve.input_len_mean, curve.output_len_mean,
                                               capacity, confidence)
    return bca_from_predictor(predict, candidate_batch_sizes=curve.max_num_seqs, epsilon=epsilon, slo_s=slo_s)
