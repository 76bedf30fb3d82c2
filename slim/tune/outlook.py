"""What `slim tune` makes of a folder `slim advise` decides on: whether the decision is settled, the
cap tune's belief recommends, its next benchmark, and one line where the two recommend differently.

`slim advise` shows this beside its own recommendation (`tune_outlook`), so the two commands never
leave a user guessing which one to believe: both apply the one decision of `slim.decision`, advise
on its fitted predictor, tune on its prior corrected by the measured runs.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field

import numpy as np

from slim.tune.commands import proposal_commands
from slim.tune.plan import build_plan
from slim.tune.proposals import propose, select_proposals
from slim.tune.request import TuneRequest


@dataclass(frozen=True)
class TuneOutlook:
    """`slim tune`'s view of the same runs and SLOs: whether the decision is settled, the cap its
    belief recommends (NaN: none yet), its next benchmark (its command lines), one line where it
    recommends another cap than `slim advise`, and the certificate's notes."""

    settled: bool
    batch_cap: float
    next_cap: float | None = None
    next_reason: str = ""
    next_commands: dict[str, str] = field(default_factory=dict)
    disagreement: str | None = None
    notes: tuple[str, ...] = ()


def tune_outlook(request: TuneRequest, advised_cap: float, reference_measured: bool) -> TuneOutlook:
    """`slim tune`'s plan for `request` (one workload) beside `slim advise`'s choice `advised_cap`:
    settled or not, its recommendation and next benchmark, and why it differs where it does
    (`reference_measured`: whether a run of the workload measured a relative SLO's reference cap)."""
    plan = build_plan(request)
    workload = plan.workloads[0]
    certificate = plan.session.certificate(workload)
    tuned = plan.session.recommendation(workload)
    tuned_cap = tuned.batch_cap if tuned is not None else math.nan
    settled = certificate.settled and certificate.batch_cap == advised_cap
    proposals = select_proposals(propose(plan.session), 1)
    proposal = proposals[0] if proposals else None
    commands = ({name: shlex.join(argv) for name, argv in proposal_commands(plan, proposal).items()}
                if proposal is not None else {})
    disagreement = None
    if not np.isfinite(tuned_cap):
        disagreement = ("slim tune recommends no cap yet: "
                        + (f"a relative SLO's bound rests on a measured cap {request.slos.reference_cap:g}, which "
                           "no run of this workload measured (advise predicted it); it measures that first"
                           if request.slos.relative and not reference_measured
                           else f"it measures cap {proposal.max_num_seqs:g} first ({proposal.reason})"
                           if proposal is not None else "no candidate is known to meet the SLOs"))
    elif tuned_cap != advised_cap:
        disagreement = (f"slim tune's belief (its prior corrected by {len(plan.session.measurements)} measured "
                        f"run(s)) recommends --max-num-seqs {tuned_cap:g}, not {advised_cap:g}: the two "
                        "predict the caps no run of this workload measured differently"
                        + (f"; measuring cap {proposal.max_num_seqs:g} (below) decides between them"
                           if proposal is not None else ""))
    return TuneOutlook(settled, tuned_cap, proposal.max_num_seqs if proposal is not None else None,
                       proposal.reason if proposal is not None else "", commands, disagreement,
                       tuple(certificate.notes))
