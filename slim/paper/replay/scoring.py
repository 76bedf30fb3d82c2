"""How a policy's replay of one curve is scored: its runs and GPU time against full profiling's, its
choice's regret and SLO violation on the recorded (noise-free) curve, one row per policy and curve.

``regret_pct`` is ``100 (1 - T_rec(chosen) / T_rec(full_profile_cap))``; ``slo_violated`` whether
the chosen cap's recorded metrics break an SLO; ``floor_gpu_seconds`` the GPU time of measuring
only full profiling's chosen cap (no policy that must measure its choice can spend less).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from slim import columns as col
from slim.paper.replay.curves import E2E_KIND, ReplayCurve, RunNoise

PER_WORKLOAD, PER_DATASET = "per_workload", "per_dataset"
SESSIONS = (PER_WORKLOAD, PER_DATASET)
OUT_OF_SAMPLE = "out_of_sample"
"""The ``prior`` of a replay with the honest prior (out of sample); adversarial ones carry their name."""
REPLAY_COLUMNS = ("slo_kind", "prior", "curve", "policy", "session", "seed", "noise", "runs", "gpu_seconds",
                  "full_profile_gpu_seconds", "floor_gpu_seconds", "chosen_cap", "full_profile_cap", "regret_pct",
                  "slo_violated", "slo_binds")


@dataclass(frozen=True)
class ReplayRun:
    """Who replayed a curve how: the policy, its session, its noise, the SLO kind and the prior."""

    policy: str
    session: str = PER_WORKLOAD
    noise: RunNoise = RunNoise()
    slo_kind: str = E2E_KIND
    prior: str = OUT_OF_SAMPLE


def replay_row(curve: ReplayCurve, run: ReplayRun, caps, chosen: float, full_cap: float, binds: bool,
               gpu_seconds: float | None = None) -> dict[str, Any]:
    """One policy's outcome on one curve (`REPLAY_COLUMNS`): the runs it measured (`caps`, the reference
    run free), their GPU time (`gpu_seconds` where the policy accounts for it itself), its choice and
    its regret and SLO violation on the recorded curve."""
    t_full = curve.recorded(full_cap, col.TOTAL_TOKEN_THROUGHPUT) if np.isfinite(full_cap) else np.nan
    if np.isfinite(chosen):
        t_chosen = curve.recorded(chosen, col.TOTAL_TOKEN_THROUGHPUT)
        regret = 100.0 * (1.0 - t_chosen / t_full) if np.isfinite(t_full) else np.nan
        violated = not curve.meets(curve.recorded_values(chosen))
    else:
        regret, violated = (100.0 if np.isfinite(t_full) else 0.0), False
    return {"slo_kind": run.slo_kind, "prior": run.prior, "curve": curve.label, "policy": run.policy,
            "session": run.session, "seed": run.noise.seed, "noise": run.noise.sd, "runs": len(curve.charged(caps)),
            "gpu_seconds": curve.gpu_seconds(caps) if gpu_seconds is None else gpu_seconds,
            "full_profile_gpu_seconds": curve.gpu_seconds(curve.caps),
            "floor_gpu_seconds": curve.gpu_seconds([full_cap]) if np.isfinite(full_cap) else 0.0,
            "chosen_cap": chosen, "full_profile_cap": full_cap, "regret_pct": regret, "slo_violated": violated,
            "slo_binds": binds}
