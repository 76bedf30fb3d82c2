"""`slim tune`'s account of the decision across layouts, as `slim advise` names its layouts: per
curve, each tensor-parallel size with its cap and tokens/s per GPU (measured or predicted) or why it
lost, and the deployment: ``gpus // TP`` replicas of ``vllm serve MODEL --tensor-parallel-size TP
--max-num-seqs B`` on ``--gpus``. Names and units are vLLM's (``total_token_throughput``, tokens/s)."""

from __future__ import annotations

import shlex
from typing import Any

import numpy as np

from slim.decision.candidates import cap_number
from slim.tune.commands import serve_command
from slim.tune.layouts import layout_decisions, layout_groups, layout_of
from slim.tune.plan import TunePlan


def _per_gpu(value: float, gpus: int) -> float | None:
    return float(value) / gpus if value is not None and np.isfinite(value) else None


def layouts_json(plan: TunePlan) -> list[dict[str, Any]] | None:
    """`slim tune --json`'s ``layouts``: one entry per curve decided across layouts (None where the
    request names one layout)."""
    if not plan.request.across_layouts:
        return None
    session = plan.session
    decisions = layout_decisions(session)
    groups = layout_groups(session)
    out = []
    for curve in dict.fromkeys([w.curve for w in plan.workloads] + list(plan.layout_exclusions)):
        members = groups.get(curve, [])
        decision = decisions.get(curve)
        entries = []
        for workload in members:
            verdict = decision.verdict(layout_of(workload))
            certificate = session.certificate(workload)
            recommendation = session.recommendation(workload)
            if certificate.feasible:
                cap, throughput, basis = certificate.batch_cap, certificate.throughput_per_s, "measured"
            elif recommendation is not None and recommendation.feasible:
                cap, throughput = recommendation.batch_cap, recommendation.throughput_per_s
                basis = "measured" if recommendation.measured else "predicted"
            else:
                cap, throughput, basis = float("nan"), float("nan"), None
            status = "chosen" if verdict.chosen else "excluded" if verdict.excluded else "open"
            entries.append({"tensor_parallel_size": workload.tensor_parallel, "gpus": verdict.layout.gpus,
                            "workload": workload.label, "max_num_seqs": cap_number(cap),
                            "total_token_throughput_per_gpu": _per_gpu(throughput, verdict.layout.gpus),
                            "basis": basis, "status": status, "reason": verdict.reason})
        for size, reason in sorted(plan.layout_exclusions.get(curve, {}).items()):
            entries.append({"tensor_parallel_size": size, "gpus": size, "workload": None, "max_num_seqs": None,
                            "total_token_throughput_per_gpu": None, "basis": None, "status": "excluded",
                            "reason": reason})
        entries.sort(key=lambda entry: entry["tensor_parallel_size"])
        chosen = next((w for w in members if decision.verdict(layout_of(w)).chosen), None)
        settled = decision is not None and decision.settled
        deployment = None
        if settled and chosen is not None:
            size, cap = chosen.tensor_parallel, decision.chosen.batch_cap
            gpus = plan.request.gpus
            deployment = {"tensor_parallel_size": size, "max_num_seqs": cap_number(cap), "gpus": gpus,
                          "replicas": gpus // size if gpus is not None else None,
                          "command": shlex.join(serve_command(plan, chosen.label, cap))}
        objective = "request_goodput" if plan.request.slos.goodput is not None else "total_token_throughput"
        out.append({"workload": curve, "settled": settled, "objective": objective,
                    "objective_per_gpu": (decision.chosen.objective_per_gpu
                                          if decision is not None and decision.chosen is not None else None),
                    "layouts": entries, "deployment": deployment})
    return out


def layout_lines(entry: dict[str, Any]) -> list[str]:
    """The text report of one curve's decision across layouts."""
    state = "SETTLED" if entry["settled"] else "open"
    per = "requests/s per GPU (goodput)" if entry["objective"] == "request_goodput" else "tokens/s per GPU"
    lines = [f"Layouts of {entry['workload']} compared on {per} ({state}):"]
    for layout in entry["layouts"]:
        head = f"  TP {layout['tensor_parallel_size']}: "
        if layout["max_num_seqs"] is None:
            lines.append(head + f"no cap ({layout['reason']})")
            continue
        throughput = layout["total_token_throughput_per_gpu"]
        value = f"{throughput:,.0f} tokens/s per GPU ({layout['basis']})" if throughput is not None else "-"
        verdict = "chosen" if layout["status"] == "chosen" else f"{layout['status']}: {layout['reason']}"
        lines.append(head + f"--max-num-seqs {layout['max_num_seqs']}, {value}: {verdict}")
    deployment = entry["deployment"]
    if deployment is not None:
        if deployment["replicas"] is not None:
            used = deployment["replicas"] * deployment["tensor_parallel_size"]
            lines.append(f"  On {deployment['gpus']} GPUs: {deployment['replicas']} replica(s) x TP "
                         f"{deployment['tensor_parallel_size']} ({used} GPUs used), each:")
        lines.append(f"  serve: {deployment['command']}")
    return lines

