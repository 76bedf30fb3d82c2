"""Each SLO's bound in milliseconds, resolved once for every decision: an absolute bound is its
number, a relative one (``p99_tpot_ms=2x``) that multiple of its value at the reference cap.

The reference value is the reference cap's measurement. Where no run measured it, a caller may give
a prediction to fall back on: `slim advise` always does (it decides on predictions anyway, and says
so), `slim tune` only where the reference run was tried and failed (it otherwise measures the
reference first). Each bound resolved on a prediction is named in `ResolvedLimits.predicted`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from slim.specs.slo import Slos


@dataclass(frozen=True)
class ResolvedLimits:
    """Every SLO's bound in ms (in the order stated), or None while a relative one waits for its
    reference value (`waiting`: the metrics still unresolved); `predicted` names the relative bounds
    resolved on a predicted reference value."""

    limits_ms: dict[str, float] | None
    predicted: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()

    @property
    def resolved(self) -> bool:
        return self.limits_ms is not None


def _finite(values: Mapping[str, float] | None, name: str) -> float | None:
    if values is None:
        return None
    value = values.get(name)
    return float(value) if value is not None and math.isfinite(value) and value > 0 else None


def resolve_limits(slos: Slos, measured_reference: Mapping[str, float] | None,
                   predicted_reference: Mapping[str, float] | None = None) -> ResolvedLimits:
    """The bounds of `slos`: a relative one at `measured_reference` (the reference cap's measured
    values by metric name; None: not measured), else at `predicted_reference` where the caller
    allows that fallback (module docstring); unresolved while neither has the metric."""
    limits, predicted, waiting = {}, [], []
    for bound in slos.bounds:
        name = bound.metric.name
        if not bound.relative:
            limits[name] = bound.limit()
            continue
        value = _finite(measured_reference, name)
        if value is None:
            value = _finite(predicted_reference, name)
            if value is not None:
                predicted.append(name)
        if value is None:
            waiting.append(name)
            continue
        limits[name] = bound.limit(value)
    if waiting:
        return ResolvedLimits(None, tuple(predicted), tuple(waiting))
    return ResolvedLimits(limits, tuple(predicted))
