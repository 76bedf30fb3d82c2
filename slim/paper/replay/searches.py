"""How a user without a model chooses a cap, replayed on a measured curve: full profiling (every cap)
and the model-free searches (`MODEL_FREE_SEARCHES`), each choosing by Eq. 13 among what it measured.

``descend`` goes from the largest cap down until a cap meets the SLOs and the efficiency floor;
``bisect`` searches for the largest cap within the SLOs, latency assumed to grow with the cap (the
bound's yardstick, `slim.tune.guard.ShadowBisection`); ``doubling`` goes from the reference cap to
the next candidate at or above twice the last, until the measured throughput gains less than
epsilon or an SLO breaks. The reference run that sets a relative SLO is known to each from the start.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from slim.decision.candidates import THROUGHPUT, Estimates, candidate_view
from slim.decision.rule import recommend
from slim.paper.replay.curves import ReplayCurve, RunNoise
from slim.tune.guard import ShadowBisection


def measured_choice(curve: ReplayCurve, measured: dict[float, dict[str, float]], epsilon: float) -> float:
    """Eq. 13 (`slim.decision.rule.recommend`) among the measured caps of a curve: ``T(1)`` from
    its smallest measured cap."""
    caps = sorted(measured)
    view = candidate_view(caps, lambda name: Estimates.facts([measured[c][name] for c in caps]), curve.limits_ms)
    return recommend(view, epsilon).batch_cap


def full_profile_choice(curve: ReplayCurve, epsilon: float, noise: RunNoise = RunNoise()) -> float:
    """Full profiling's choice: every cap measured (through the noise)."""
    return measured_choice(curve, {float(c): noise.observe(curve, float(c)) for c in curve.caps}, epsilon)


def slo_binds(curve: ReplayCurve, epsilon: float) -> bool:
    """Whether the SLOs move full profiling's choice off the curve's throughput peak within the
    efficiency floor (a bound that binds)."""
    recorded = {float(c): curve.recorded_values(float(c)) for c in curve.caps}
    unbounded = replace(curve, limits_ms={})
    return measured_choice(curve, recorded, epsilon) != measured_choice(unbounded, recorded, epsilon)


class CurveProbe:
    """What a model-free search has measured of one curve: the reference run from the start, and
    each cap it asks for (through the noise)."""

    def __init__(self, curve: ReplayCurve, noise: RunNoise):
        self.curve, self.noise = curve, noise
        self.measured: dict[float, dict[str, float]] = {}
        if curve.reference_cap is not None:
            self.measure(curve.reference_cap)

    def measure(self, cap: float) -> dict[str, float]:
        if cap not in self.measured:
            self.measured[cap] = self.noise.observe(self.curve, cap)
        return self.measured[cap]

    def within(self, cap: float) -> bool:
        """Measured within every SLO."""
        return self.curve.meets(self.measure(cap))

    def admissible(self, cap: float, epsilon: float) -> bool:
        """Measured within every SLO and above the efficiency floor (Eq. 13's constraints)."""
        values = self.measure(cap)
        smallest = min(self.measured)
        t_one = self.measured[smallest][THROUGHPUT] / smallest
        return bool(self.curve.meets(values) and values[THROUGHPUT] / (cap * t_one) > epsilon)

    def choice(self, epsilon: float) -> float:
        """Eq. 13 among the measured caps."""
        return measured_choice(self.curve, self.measured, epsilon)


def descend_caps(probe: CurveProbe, epsilon: float) -> None:
    """From the largest cap down until one meets the SLOs and the efficiency floor."""
    reference = probe.curve.reference_cap
    for cap in sorted(probe.curve.caps, reverse=True):
        if (reference is not None and cap <= reference) or probe.admissible(float(cap), epsilon):
            return


def bisect_caps(probe: CurveProbe, epsilon: float) -> None:
    """Binary search over the caps above the reference (all caps where there is none) for the
    largest within the SLOs: the bisection the bound follows (`slim.tune.guard.ShadowBisection`)."""
    caps = [float(c) for c in probe.curve.caps]
    reference = probe.curve.reference_cap
    start = caps.index(float(reference)) if reference is not None else None
    ShadowBisection(len(caps), start).search(lambda position: probe.within(caps[position]))


def doubling_caps(probe: CurveProbe, epsilon: float) -> None:
    """From the reference cap (the smallest without one), double (the next cap at or above twice the
    last) until the measured throughput gains less than epsilon or an SLO breaks."""
    caps = probe.curve.caps
    last = probe.curve.reference_cap if probe.curve.reference_cap is not None else float(caps[0])
    while probe.within(last):
        higher = caps[caps >= 2 * last]
        if not higher.size:
            return
        following = float(higher[0])
        gain = probe.measure(following)[THROUGHPUT] / probe.measure(last)[THROUGHPUT] - 1.0
        last = following
        if gain < epsilon:
            return


MODEL_FREE_SEARCHES: dict[str, Callable[[CurveProbe, float], None]] = {
    "descend": descend_caps, "bisect": bisect_caps, "doubling": doubling_caps}


def model_free_caps(curve: ReplayCurve, epsilon: float, policy: str = "doubling",
                    noise: RunNoise = RunNoise()) -> tuple[list[float], float]:
    """A model-free search's measured caps (the reference first) and its Eq. 13 choice among them."""
    probe = CurveProbe(curve, noise)
    MODEL_FREE_SEARCHES[policy](probe, epsilon)
    return list(probe.measured), probe.choice(epsilon)
