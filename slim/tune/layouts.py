"""`slim tune` across parallel layouts: the workloads of one curve at several layouts (tensor-parallel
sizes, each at one or more data-parallel sizes: `Workload.layout`) decided as one
(`slim.decision.layouts.decide_layouts`), and the bound pooled over them.

**The decision.** Each layout is a workload of the session with its own candidates, certificate and
bisection; the decision across them chooses the layout of most objective per GPU and says which
others are excluded (`layout_decisions`). A layout it excludes takes no more runs; the curve is done
once the decision across its layouts is settled (`all_settled`).

**The bound** (`pooled_account`). A plain search over layouts bisects the caps at every layout; its
GPU time is the sum of each layout's bisection's (`slim.tune.guard.ShadowBisection`, one per
layout, every run charged its duration times its server's GPUs, ``t x d``). The session's runs of a
curve's layouts are each layout's bisection's own probes (those surely on its path, as the guard
counts them) or extra; an extra run at any layout may start only within ``margin`` times the *sum*
of the layouts' lower bounds of their bisections, less what the extra runs of all the curve's
layouts spent, and is cut at what is left. So the GPU time spent on a curve's layouts is at most
``(1 + margin)`` times the plain search's over the same layouts (those asked for that fit in memory
per rank and in ``--gpus``), whatever the prior: the probes are the search's own, and the extra runs
never pass the margin of a lower bound of its cost. A layout the decision excludes early leaves its
bisection's lower bound in the sum: the plain search would still have bisected it.

**The order.** Among the open layouts, each proposal's usefulness per GPU-second (its own layout's,
`slim.tune.proposals`) is weighed by how close its layout's predicted best objective per GPU (Eq. 13
on the belief) comes to the best open layout's (`layout_weights`), so the layout likeliest to win is
measured first; a layout nothing predicts weighs in full.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from slim.decision.layouts import Layout, LayoutCandidate, LayoutDecision, decide_layouts
from slim.tune.guard import CostAccount
from slim.tune.session import TuneSession
from slim.tune.workload import Workload


def layout_of(workload: Workload) -> Layout:
    """The layout a workload decides at (`Workload.layout`: ``t x d`` GPUs per server; a workload
    decided alone, one replica of its tensor-parallel size)."""
    return workload.layout if workload.layout is not None else Layout.of_tensor_parallel(1)


def layout_order(layout: Layout) -> tuple[int, int, int]:
    """The order layouts are listed in: fewer GPUs first, then the smaller tensor-parallel size."""
    return layout.gpus, layout.tensor_parallel, layout.ranks


def layout_groups(session: TuneSession) -> dict[str, list[Workload]]:
    """The workloads decided across layouts, by curve (`Workload.curve`), in `layout_order`."""
    groups: dict[str, list[Workload]] = {}
    for workload in session.workloads:
        if workload.layout is not None:
            groups.setdefault(workload.curve, []).append(workload)
    return {curve: sorted(members, key=lambda w: layout_order(layout_of(w))) for curve, members in groups.items()}


def layout_decision(session: TuneSession, members: list[Workload]) -> LayoutDecision:
    """The decision across one curve's layouts, on each layout's view and certificate."""
    return decide_layouts([LayoutCandidate(layout_of(w), session.view(w), session.certificate(w)) for w in members],
                          session.settings.tolerance)


def layout_decisions(session: TuneSession) -> dict[str, LayoutDecision]:
    """The decision across layouts of every curve the session decides so."""
    return {curve: layout_decision(session, members) for curve, members in layout_groups(session).items()}


def open_workloads(session: TuneSession, decisions: dict[str, LayoutDecision] | None = None) -> list[Workload]:
    """The workloads that may take runs: those decided alone whose certificate is open, and the open
    layouts (`LayoutDecision.open_layouts`) of every curve whose decision across layouts is open."""
    decisions = layout_decisions(session) if decisions is None else decisions
    out = []
    for workload in session.workloads:
        if workload.tensor_parallel is None:
            out.append(workload)
            continue
        decision = decisions[workload.curve]
        if not decision.settled and layout_of(workload) in decision.open_layouts:
            out.append(workload)
    return out


def all_settled(session: TuneSession) -> bool:
    """Whether every decision is settled: each workload decided alone, each curve across its layouts."""
    decisions = layout_decisions(session)
    alone = all(session.certificate(w).settled for w in session.workloads if w.tensor_parallel is None)
    return alone and all(decision.settled for decision in decisions.values())


def pooled_account(session: TuneSession, workload: Workload) -> CostAccount | None:
    """The workload's account against the bound (`slim.tune.session.TuneSession.account`), where it
    is one of a curve's layouts with the spending and lower bounds of all of them summed (module
    docstring); its own bisection's next probe and path. None without a margin or while its SLO
    waits for its reference run."""
    own = session.account(workload)
    if own is None or workload.tensor_parallel is None:
        return own
    accounts = [session.account(w) for w in layout_groups(session)[workload.curve]]
    accounts = [a for a in accounts if a is not None]
    return replace(own, on_path_gpu_seconds=sum(a.on_path_gpu_seconds for a in accounts),
                   extra_gpu_seconds=sum(a.extra_gpu_seconds for a in accounts),
                   lower_bound_gpu_seconds=sum(a.lower_bound_gpu_seconds for a in accounts),
                   contradicted=any(a.contradicted for a in accounts))


def layout_weights(session: TuneSession, workloads: list[Workload]) -> dict[str, float]:
    """Per workload label: 1 for a workload decided alone; for a layout, its predicted best
    objective per GPU (Eq. 13 on the belief's means) over the best among the curve's `workloads`
    (1 where nothing predicts it)."""
    predicted = {}
    for workload in workloads:
        if workload.tensor_parallel is None:
            continue
        recommendation = session.recommendation(workload)
        value = (recommendation.objective / layout_of(workload).gpus
                 if recommendation is not None and recommendation.feasible else math.nan)
        predicted[workload.label] = (workload.curve, value)
    best: dict[str, float] = {}
    for curve, value in predicted.values():
        if np.isfinite(value):
            best[curve] = max(best.get(curve, 0.0), value)
    weights = {w.label: 1.0 for w in workloads}
    for label, (curve, value) in predicted.items():
        if np.isfinite(value) and best.get(curve, 0.0) > 0:
            weights[label] = max(value / best[curve], 1e-6)
    return weights
