"""`slim tune`'s output: what the traces held (and the runs left out, with why), how the online
benchmarks measure a cap, per workload the recommendation, its certificate, what the runs say of the
prior, the bound's account, the command to serve a settled cap, the caps a failed run excludes,
every candidate's measurements beside its predictions, and the next benchmarks as exact command
lines; as text or one JSON object, whose names and units are vLLM's (``total_token_throughput`` in
tokens/s, latency statistics in ms: ``p99_tpot_ms``; fields documented in docs/tuning.md)."""

from __future__ import annotations

import math
import shlex
from collections import Counter
from typing import Any, Sequence

import numpy as np

from slim import columns as col
from slim.decision.candidates import GOODPUT, THROUGHPUT, cap_number
from slim.specs.data_parallel import cap_words
from slim.tune.commands import concurrency_sweep_note, memory_plan, proposal_commands, serve_command
from slim.tune.layout_report import layout_lines, layouts_json
from slim.tune.layouts import all_settled
from slim.tune.plan import TunePlan
from slim.tune.proposals import Proposal
from slim.tune.request import ONLINE
from slim.tune.workload import Workload

THROUGHPUT_KEY = "total_token_throughput"
"""vLLM's name of total-token throughput (tokens/s), the JSON's key for `THROUGHPUT`."""
GOODPUT_KEY = "request_goodput"
"""vLLM's name of goodput (good requests/s), the JSON's key for `GOODPUT`."""


def _key(quantity: str) -> str:
    return THROUGHPUT_KEY if quantity == THROUGHPUT else GOODPUT_KEY if quantity == GOODPUT else quantity


def _json(value: float) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def _quantities(workload: Workload) -> list[str]:
    return ([THROUGHPUT] + [m.name for m in workload.slos.metrics]
            + ([GOODPUT] if workload.slos.goodput is not None else []))


def candidate_rows(plan: TunePlan, workload: Workload) -> list[dict[str, Any]]:
    """Each candidate of a workload: per quantity its measurement (None where no run judged it), the
    prediction with its interval at the session's confidence (None where nothing predicts it), and
    the prior's."""
    session = plan.session
    rows = session.rows(workload)
    b = session.belief
    out = []
    for i in rows:
        measured, predicted, prior = {}, {}, {}
        for quantity in _quantities(workload):
            q = b[quantity]
            key = _key(quantity)
            measured[key] = _json(q.mean[i]) if q.measured[i] else None
            predicted[key] = ([_json(q.mean[i]), _json(q.low[i]), _json(q.high[i])]
                              if not q.measured[i] and np.isfinite(q.mean[i]) else None)
            prior[key] = _json(session.prior.values[quantity][i])
        out.append({"max_num_seqs": int(session.candidates.at[i, col.MAX_NUM_SEQS]), "measured": measured,
                    "predicted": predicted, "prior": prior, "runs": session.runs_of(int(i)),
                    "failed": bool(int(i) in session.failed and int(i) not in session.measurements)})
    return out


def failed_caps(plan: TunePlan, label: str) -> list[dict[str, Any]]:
    """The caps of a workload a failed run excludes (tried, nothing usable, not measured since),
    each with why its run failed."""
    session = plan.session
    rows = session.candidates.index[session.candidates["workload"] == label]
    failed = [int(i) for i in rows if int(i) in session.failed and int(i) not in session.measurements]
    return [{"max_num_seqs": int(session.candidates.at[i, col.MAX_NUM_SEQS]),
             "reason": plan.failure_reasons.get(i, "no usable run")}
            for i in sorted(failed, key=lambda i: session.candidates.at[i, col.MAX_NUM_SEQS])]


def _recommendation(plan: TunePlan, workload: Workload) -> dict[str, Any] | None:
    r = plan.session.recommendation(workload)
    if r is None:
        return None
    return {"max_num_seqs": cap_number(r.batch_cap), "measured": r.measured, THROUGHPUT_KEY: _json(r.throughput_per_s),
            **({GOODPUT_KEY: _json(r.objective)} if workload.slos.goodput is not None else {}),
            **{name: _json(value) for name, value in r.values_ms.items()},
            "batching_efficiency": _json(r.efficiency), "limited_by": list(r.binding),
            "reason": r.reason or None, "unjudged_caps": [cap_number(c) for c in r.unjudged]}


def _serve(plan: TunePlan, workload: Workload, cap: float) -> dict[str, Any]:
    """The serve command of a settled cap and its memory plan (None throughout where the model's KV
    size is not known: the flags are left to vLLM's defaults)."""
    memory = memory_plan(plan, workload.label, cap)
    command = {"command": shlex.join(serve_command(plan, workload.label, cap))}
    if memory is None:
        return {**command, **dict.fromkeys(("kv_bytes_needed", "kv_reservation_bytes", "memory_saved_bytes",
                                            "gpu_memory_utilization", "num_gpu_blocks_override"))}
    return {**command, "kv_bytes_needed": memory.kv_bytes_needed, "kv_reservation_bytes": memory.kv_reservation_bytes,
            "memory_saved_bytes": memory.memory_saved_bytes,
            "gpu_memory_utilization": memory.gpu_memory_utilization_needed,
            "num_gpu_blocks_override": memory.num_gpu_blocks_override}


def _certificate(certificate) -> dict[str, Any]:
    body = certificate.to_dict()
    body["measured"] = {_key(THROUGHPUT): body.pop("total_token_throughput"), **body["measured"]}
    if certificate.objective_name == GOODPUT:
        body["measured"][GOODPUT_KEY] = body["objective_value"]
    body["objective"] = _key(certificate.objective_name)
    body.pop("objective_value")
    return body


def tune_json(plan: TunePlan, proposals: Sequence[Proposal], stopped: str | None = None,
              runs_done: int = 0, exit_code: int = 0) -> dict[str, Any]:
    session = plan.session
    request = plan.request
    workloads = []
    for workload in plan.workloads:
        certificate = session.certificate(workload)
        learned = session.learned(workload)
        account = session.account(workload)
        settled_cap = certificate.batch_cap if certificate.settled and certificate.feasible else None
        workloads.append({
            "workload": workload.label, "model": plan.specs[workload.label].model,
            "data_parallel_size": workload.data_parallel,
            "no_prior": plan.no_prior.get(workload.model),
            "input_len": workload.input_len, "output_len": workload.output_len,
            "slo_ms": {name: _json(value) for name, value in (session.limits_ms(workload) or {}).items()},
            "recommendation": _recommendation(plan, workload), "certificate": _certificate(certificate),
            "serve": _serve(plan, workload, settled_cap) if settled_cap is not None else None,
            "learned": {"throughput_ratio_to_prior": _json(learned.throughput_ratio),
                        "throughput_trend_per_doubling_pct": _json(100 * (math.exp(learned.trend_per_doubling) - 1)
                                                                   if np.isfinite(learned.trend_per_doubling)
                                                                   else math.nan),
                        "outside_prior_interval": learned.outside, "measured_caps": learned.measured,
                        "leaning_on_measurement": learned.contradicted},
            "bound": None if account is None else {
                "margin": account.margin, "bisection_probes_gpu_seconds": account.on_path_gpu_seconds,
                "extra_gpu_seconds": account.extra_gpu_seconds,
                "bisection_lower_bound_gpu_seconds": account.lower_bound_gpu_seconds,
                "allowance_gpu_seconds": account.allowance_gpu_seconds,
                "stopped": session.stopped_by_bound.get(workload.label)},
            "failed_caps": failed_caps(plan, workload.label), "candidates": candidate_rows(plan, workload)})
    next_runs = [{**p.to_dict(), "commands": {k: shlex.join(v) for k, v in proposal_commands(plan, p).items()}}
                 for p in proposals]
    readout = plan.readout
    slos = request.slos
    return {"status": "settled" if all_settled(session) else "open",
            "exit_code": exit_code, "predictor": request.predictor, "hardware": plan.hardware.name,
            "mode": request.mode,
            "confidence": request.confidence, "tolerance": request.tolerance, "margin": request.margin,
            "slo": [{"metric": b.metric.name, "bound_ms": b.limit_ms, "relative": b.multiplier,
                     "reference_max_num_seqs": slos.reference_cap if b.relative else None} for b in slos.bounds],
            "goodput": slos.goodput.spec if slos.goodput is not None else None,
            "traces": str(request.traces), "traces_exist": readout.traces_exist,
            "results": str(request.results_folder), "runs_found": readout.runs_found,
            "skipped_runs": [run.to_dict() for run in readout.skipped],
            "measured_runs": len(session.measurements),
            "interval_multipliers": {_key(name): value for name, value in session.belief.multipliers.items()},
            "benchmark_setup": concurrency_sweep_note(request) if request.mode == ONLINE else None,
            "tensor_parallel_sizes": list(request.layout_sizes) if request.across_layouts else None,
            "data_parallel_sizes": sorted(set(request.data_parallel_sizes)) or None,
            "gpus": request.gpus, "request_rate": request.request_rate, "layouts": layouts_json(plan),
            "workloads": workloads, "next": next_runs, "loop": {"stopped": stopped, "runs": runs_done}}


def readout_line(body: dict[str, Any]) -> str | None:
    """One line on what the traces held when it is less than every run found being used: missing,
    empty, or runs left out (counts by cleaning status); None otherwise."""
    traces, found, skipped = body["traces"], body["runs_found"], body["skipped_runs"]
    counts = ", ".join(f"{status}: {count}" for status, count in Counter(r["status"] for r in skipped).most_common())
    if not body["traces_exist"] and found == 0:
        return f"traces: '{traces}' did not exist: started from no runs; results go to {body['results']}"
    if found == 0:
        return f"traces: no benchmark runs under '{traces}': starting from no runs"
    if len(skipped) == found:
        return (f"traces: none of the {found} run(s) under '{traces}' is usable ({counts}): starting from no runs; "
                "--json lists each with why")
    if skipped:
        return f"traces: skipped {len(skipped)} of {found} run(s) ({counts}); --json lists each with why"
    return None


def failure_note(workload: dict[str, Any]) -> str:
    """What the decision line says about caps a failed run excludes: ``(cap 64 excluded: its run
    failed (exit code 1); --retry-failed to try again)``; empty when none is."""
    failed = workload["failed_caps"]
    if not failed:
        return ""
    caps = ", ".join(f"{row['max_num_seqs']:g}" for row in failed)
    reasons = "; ".join(row["reason"] for row in failed)
    subject = f"cap {caps} excluded: its run" if len(failed) == 1 else f"caps {caps} excluded: their runs"
    return f" ({subject} failed ({reasons}); --retry-failed to try again)"


def _number(value: float | None, unit: str = "") -> str:
    if value is None or not np.isfinite(value):
        return "-"
    return f"{value:,.4g}{unit}" if abs(value) < 1000 else f"{value:,.0f}{unit}"


def _values(values: dict[str, Any], limits: dict[str, Any]) -> str:
    """``6,011 tokens/s, p99_tpot_ms 24.9`` of a measured or recommended cap."""
    parts = [f"{_number(values.get(THROUGHPUT_KEY))} tokens/s"]
    if values.get(GOODPUT_KEY) is not None:
        parts.append(f"goodput {_number(values[GOODPUT_KEY])} requests/s")
    parts += [f"{name} {_number(values.get(name))}" for name in limits]
    return ", ".join(parts)


def _slo_text(body: dict[str, Any], workload: dict[str, Any]) -> str:
    limits = workload["slo_ms"]
    parts = []
    for slo in body["slo"]:
        limit = limits.get(slo["metric"], slo["bound_ms"])
        relative = f" = {slo['relative']:g}x cap {slo['reference_max_num_seqs']:g}'s" if slo["relative"] else ""
        parts.append(f"{slo['metric']} <= {_number(limit)} ms{relative}" if limit is not None
                     else f"{slo['metric']} <= {slo['relative']:g}x cap {slo['reference_max_num_seqs']:g}'s (pending)")
    if body["goodput"]:
        parts.append(f"max goodput ({body['goodput']})")
    return "; ".join(parts)


def _decision_lines(workload: dict[str, Any]) -> list[str]:
    cert, recommendation = workload["certificate"], workload["recommendation"]
    limits = workload["slo_ms"]
    if cert["settled"] and cert["max_num_seqs"] is not None:
        lines = [f"  SETTLED: {cap_words(cert['max_num_seqs'], workload['data_parallel_size'])}: measured "
                 f"{_values(cert['measured'], limits)}"
                 + failure_note(workload)]
        if workload["serve"] is not None:
            lines.append(f"  serve: {workload['serve']['command']}")
        return lines
    if cert["settled"]:
        return ["  SETTLED: no cap meets the SLOs and the efficiency floor" + failure_note(workload)]
    if recommendation is None:
        return ["  open: " + "; ".join(cert["notes"])]
    if recommendation["max_num_seqs"] is None:
        head = f"  open: no cap recommended yet ({recommendation['reason']})"
    else:
        source = "measured" if recommendation["measured"] else "predicted"
        cap = cap_words(recommendation["max_num_seqs"], workload["data_parallel_size"])
        head = f"  open: recommended {cap} ({source} {_values(recommendation, limits)})"
    if cert["max_num_seqs"] is not None and cert["max_num_seqs"] != recommendation["max_num_seqs"]:
        head += f"; best measured so far {cert['max_num_seqs']:g}"
    reasons = []
    # The recommended cap itself is no challenger of the recommendation: measuring it is what settles it.
    challengers = [c for c in cert["challengers"] if c != recommendation["max_num_seqs"]]
    if challengers:
        reasons.append("could still be beaten by caps " + ", ".join(f"{c:g}" for c in challengers))
    if cert["repeat"]:
        reasons.append("to run again (an SLO metric within the run-to-run scatter of its bound): caps "
                       + ", ".join(f"{c:g}" for c in cert["repeat"]))
    if cert["needs_throughput_at_one"]:
        reasons.append("T(1) decides the efficiency floor")
    if workload["bound"] is not None and workload["bound"]["stopped"]:
        reasons.append(f"stopped at the bound: {workload['bound']['stopped']} (a larger --margin allows more)")
    return [head + ("; " + "; ".join(reasons) if reasons else "") + failure_note(workload)]


def _table(workload: dict[str, Any]) -> list[str]:
    keys = [THROUGHPUT_KEY] + list(workload["slo_ms"]) + ([GOODPUT_KEY] if any(
        GOODPUT_KEY in row["measured"] for row in workload["candidates"]) else [])
    header = "    cap " + "".join(f" | {key:>32}" for key in keys)
    lines = [header, "        " + "".join(f" | {'measured   predicted [interval]':>32}" for _ in keys)]
    for row in workload["candidates"]:
        cells = []
        for key in keys:
            measured, predicted = row["measured"].get(key), row["predicted"].get(key)
            if measured is not None:
                text = f"{_number(measured)} (x{row['runs']})" if row["runs"] > 1 else _number(measured)
            elif predicted is not None:
                text = f"{_number(predicted[0])} [{_number(predicted[1])}, {_number(predicted[2])}]"
            else:
                text = "-" if not row["failed"] else "failed"
            cells.append(f" | {text:>32}")
        lines.append(f"    {row['max_num_seqs']:>4}" + "".join(cells))
    return lines


def tune_text(plan: TunePlan, proposals: Sequence[Proposal], stopped: str | None = None, runs_done: int = 0) -> str:
    body = tune_json(plan, proposals, stopped, runs_done)
    bound = f"; bound {1 + body['margin']:g} x a bisection's GPU time" if body["margin"] is not None else ""
    prior = "none" if all(w["no_prior"] is not None for w in body["workloads"]) else body["predictor"].upper()
    curves = {(w["model"], w["input_len"], w["output_len"]) for w in body["workloads"]}
    counted = f"{len(curves)} workload(s)"
    if len(body["workloads"]) > len(curves):     # across layouts: each workload once per layout
        counted += (f" at {len(body['workloads'])} layout(s)" if len(curves) == 1
                    else f", {len(body['workloads'])} (workload, layout) pairs")
    lines = [f"slim tune: {counted} on {body['hardware']} ({body['mode']}), prior "
             f"{prior}, {body['measured_runs']} measured run(s); intervals at "
             f"{100 * body['confidence']:.0f}%, tolerance {100 * body['tolerance']:g}% of the objective{bound}"]
    readout = readout_line(body)
    if readout is not None:
        lines.append(readout)
    if stopped is not None:
        lines.append(f"loop: {runs_done} benchmark(s) run, stopped: {stopped}")
    for entry in body["layouts"] or []:
        lines += [""] + layout_lines(entry)
    for workload in body["workloads"]:
        cert = workload["certificate"]
        lines += ["", f"{workload['workload']}  (SLO {_slo_text(body, workload)}; epsilon {cert['epsilon']:g})"]
        lines += _decision_lines(workload)
        learned = plan.session.learned(next(w for w in plan.workloads if w.label == workload["workload"]))
        if workload["no_prior"] is not None:
            lines.append(f"  no prior: {workload['no_prior']}; measuring only, in a plain bisection's order (an "
                         "unmeasured cap's throughput lies between its measured neighbours': it does not fall as the "
                         "cap grows); a settled cap's memory flags are left to vLLM's defaults")
        elif learned.measured:
            lines.append(f"  prior: {learned.describe()}")
        for exclusion in cert["exclusions"]:
            lines.append(f"    cap {exclusion['cap']:g}: {exclusion['reason']}")
        lines += _table(workload)
    if body["next"]:
        lines += ["", "Next benchmark(s), most useful per GPU-second first:"]
        for run in body["next"]:
            limit = (f"; at most {_number(run['limit_gpu_seconds'], ' GPU-s')} (the bound)"
                     if run["limit_gpu_seconds"] is not None else "")
            lines.append(f"  {run['workload']} cap {run['max_num_seqs']:g}: {run['reason']}; predicted "
                         f"{_number(run['predicted_gpu_seconds'], ' GPU-s')}{limit}")
            for name, command in run["commands"].items():
                lines.append(f"    {name}: {command}")
        if body["benchmark_setup"]:
            lines.append(f"  ({body['benchmark_setup']})")
    return "\n".join(lines) + "\n"
