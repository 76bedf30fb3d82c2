"""`slim tune`'s account of the decision across layouts, as `slim advise` names its layouts
(`Layout.label`: ``TP t`` or ``TP t x DP d``): per curve, each layout with its cap and tokens/s per
GPU (measured or predicted) or why it lost, and the deployment: ``gpus // (t x d)`` replicas (with a
request rate, those it needs: `slim.decision.layouts.rate_deployment`) of
``vllm serve MODEL --tensor-parallel-size t [--data-parallel-size d] --max-num-seqs B/d`` on
``--gpus`` (a layout's cap ``B`` is its server's requests in flight, over all its data-parallel
ranks). Names and units are vLLM's (``total_token_throughput``, tokens/s)."""

from __future__ import annotations

import shlex
from typing import Any

import numpy as np

from slim.decision.candidates import cap_number
from slim.decision.layouts import Layout, gpu_count, rate_deployment
from slim.specs.data_parallel import cap_words
from slim.tune.commands import serve_command
from slim.tune.layouts import layout_decisions, layout_groups, layout_of
from slim.tune.plan import TunePlan


def _per_gpu(value: float, gpus: int) -> float | None:
    return float(value) / gpus if value is not None and np.isfinite(value) else None


def _layout_fields(layout: Layout) -> dict[str, Any]:
    """A layout as the report names it: its label, sizes and the GPUs one server of it occupies."""
    return {"layout": layout.label, "tensor_parallel_size": layout.tensor_parallel,
            "data_parallel_size": layout.ranks, "enable_expert_parallel": layout.expert_parallel, "gpus": layout.gpus}


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
            entries.append({**_layout_fields(verdict.layout), "workload": workload.label,
                            "max_num_seqs": cap_number(cap),
                            "total_token_throughput_per_gpu": _per_gpu(throughput, verdict.layout.gpus),
                            "basis": basis, "status": status, "reason": verdict.reason})
        for layout, reason in plan.layout_exclusions.get(curve, {}).items():
            entries.append({**_layout_fields(layout), "workload": None, "max_num_seqs": None,
                            "total_token_throughput_per_gpu": None, "basis": None, "status": "excluded",
                            "reason": reason})
        entries.sort(key=lambda entry: (entry["gpus"], entry["tensor_parallel_size"], entry["data_parallel_size"]))
        chosen = next((w for w in members if decision.verdict(layout_of(w)).chosen), None)
        settled = decision is not None and decision.settled
        deployment = None
        if settled and chosen is not None:
            layout, cap = layout_of(chosen), decision.chosen.batch_cap
            gpus, rate = plan.request.gpus, plan.request.request_rate
            for_rate = (rate_deployment(rate, session.certificate(chosen).throughput_per_s,
                                        chosen.input_len + chosen.output_len, layout.gpus)
                        if rate is not None else None)
            replicas = (for_rate.replicas if for_rate is not None
                        else gpus // layout.gpus if gpus is not None else None)
            deployment = {**_layout_fields(layout), "gpus_per_replica": layout.gpus, "max_num_seqs": cap_number(cap),
                          "max_num_seqs_per_rank": layout.per_rank_cap(cap), "gpus": gpus, "replicas": replicas,
                          "gpus_needed": replicas * layout.gpus if replicas is not None else None,
                          "request_rate": rate,
                          "requests_per_replica": for_rate.requests_per_replica if for_rate is not None else None,
                          "headroom": for_rate.headroom if for_rate is not None else None,
                          "command": shlex.join(serve_command(plan, chosen.label, cap))}
        objective = "request_goodput" if plan.request.slos.goodput is not None else "total_token_throughput"
        out.append({"workload": curve, "settled": settled, "objective": objective,
                    "objective_per_gpu": (decision.chosen.objective_per_gpu
                                          if decision is not None and decision.chosen is not None else None),
                    "layouts": entries, "deployment": deployment})
    return out


def _cap_words(layout: dict[str, Any]) -> str:
    """A layout's cap as vLLM takes it: ``--max-num-seqs B``, per rank with data parallelism."""
    return cap_words(layout["max_num_seqs"], layout["data_parallel_size"])


def layout_lines(entry: dict[str, Any]) -> list[str]:
    """The text report of one curve's decision across layouts."""
    state = "SETTLED" if entry["settled"] else "open"
    per = "requests/s per GPU (goodput)" if entry["objective"] == "request_goodput" else "tokens/s per GPU"
    lines = [f"Layouts of {entry['workload']} compared on {per} ({state}):"]
    for layout in entry["layouts"]:
        head = f"  {layout['layout']} ({layout['gpus']} GPUs): " if layout["data_parallel_size"] > 1 \
            else f"  {layout['layout']}: "
        if layout["max_num_seqs"] is None:
            lines.append(head + f"no cap ({layout['reason']})")
            continue
        throughput = layout["total_token_throughput_per_gpu"]
        value = f"{throughput:,.0f} tokens/s per GPU ({layout['basis']})" if throughput is not None else "-"
        verdict = "chosen" if layout["status"] == "chosen" else f"{layout['status']}: {layout['reason']}"
        lines.append(head + f"{_cap_words(layout)}, {value}: {verdict}")
    deployment = entry["deployment"]
    if deployment is not None:
        if deployment["request_rate"] is not None:
            short = (f"; more than the {deployment['gpus']} GPUs available"
                     if deployment["gpus"] is not None and deployment["gpus_needed"] > deployment["gpus"] else "")
            lines.append(f"  For {deployment['request_rate']:g} requests/s: {deployment['replicas']} replica(s) x "
                         f"{deployment['layout']} = {deployment['gpus_needed']} GPUs, each replica serving "
                         f"{deployment['requests_per_replica']:.2f} requests/s (headroom "
                         f"{100 * deployment['headroom']:.0f}%; independent replicas behind a load balancer{short}), "
                         "each:")
        elif deployment["replicas"] is not None:
            used = deployment["replicas"] * deployment["gpus_per_replica"]
            lines.append(f"  On {gpu_count(deployment['gpus'])}: {deployment['replicas']} replica(s) x "
                         f"{deployment['layout']} ({gpu_count(used)} used), each:")
        lines.append(f"  serve: {deployment['command']}")
    return lines

