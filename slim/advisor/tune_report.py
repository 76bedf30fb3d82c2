"""`slim tune`'s output: what the traces held (and the runs left out, with why), per workload the
decision, its certificate and the caps a failed run excludes, every candidate's measurement beside
its prediction, and the next benchmarks as exact command lines; as text or one JSON object
(its fields are documented in docs/tuning.md)."""

from __future__ import annotations

import shlex
from collections import Counter
from typing import Any, Sequence

import numpy as np

from slim import columns as col
from slim.advisor.tune import Proposal
from slim.advisor.tune_plan import TunePlan, proposal_commands


def candidate_rows(plan: TunePlan, label: str) -> list[dict[str, Any]]:
    """Each candidate of a workload: the measurement (None if not measured) and the prediction with
    its interval at the session's confidence."""
    session = plan.session
    view = session.view(next(w for w in plan.workloads if w.label == label))
    rows = []
    for i, cap in enumerate(view.caps):
        measured = bool(view.measured[i])
        rows.append({
            "max_num_seqs": int(cap),
            "measured_throughput_per_s": float(view.throughput_measured[i]) if measured else None,
            "measured_e2e_latency_s": float(view.e2e_measured[i]) if measured else None,
            "throughput_per_s": [float(view.throughput_mean[i]), float(view.throughput_low[i]),
                                 float(view.throughput_high[i])],
            "e2e_latency_s": [float(view.e2e_mean[i]), float(view.e2e_low[i]), float(view.e2e_high[i])],
            "failed": bool(view.failed[i]),
        })
    return rows


def _prior_rows(plan: TunePlan, label: str) -> dict[int, tuple[float, float]]:
    session = plan.session
    rows = session.candidates.index[session.candidates["workload"] == label]
    return {int(session.candidates.at[i, col.MAX_NUM_SEQS]): (float(session.prior.throughput_per_s[i]),
                                                               float(session.prior.e2e_latency_s[i])) for i in rows}


def failed_caps(plan: TunePlan, label: str) -> list[dict[str, Any]]:
    """The caps of a workload a failed run excludes (tried, nothing usable, not measured since),
    each with why its run failed."""
    session = plan.session
    rows = session.candidates.index[session.candidates["workload"] == label]
    failed = [int(i) for i in rows if int(i) in session.failed and int(i) not in session.measurements]
    return [{"max_num_seqs": int(session.candidates.at[i, col.MAX_NUM_SEQS]),
             "reason": plan.failure_reasons.get(i, "no usable run")}
            for i in sorted(failed, key=lambda i: session.candidates.at[i, col.MAX_NUM_SEQS])]


def tune_json(plan: TunePlan, proposals: Sequence[Proposal], stopped: str | None = None,
              runs_done: int = 0) -> dict[str, Any]:
    session = plan.session
    workloads = []
    for workload in plan.workloads:
        certificate = session.certificate(workload)
        prior = _prior_rows(plan, workload.label)
        candidates = candidate_rows(plan, workload.label)
        for row in candidates:
            row["prior_throughput_per_s"], row["prior_e2e_latency_s"] = prior[row["max_num_seqs"]]
        workloads.append({"workload": workload.label, "model": plan.specs[workload.label].model,
                          "input_len": workload.input_len, "output_len": workload.output_len,
                          "certificate": certificate.to_dict(), "failed_caps": failed_caps(plan, workload.label),
                          "candidates": candidates})
    next_runs = [{**p.to_dict(), "commands": {k: shlex.join(v) for k, v in proposal_commands(plan, p).items()}}
                 for p in proposals]
    readout = plan.readout
    return {"status": "settled" if all(w["certificate"]["settled"] for w in workloads) else "open",
            "predictor": plan.request.predictor, "hardware": plan.hardware.name, "mode": plan.request.mode,
            "confidence": plan.request.confidence, "tolerance": plan.request.tolerance,
            "traces": str(plan.request.traces), "traces_exist": readout.traces_exist,
            "results": str(plan.request.results_folder), "runs_found": readout.runs_found,
            "skipped_runs": [run.to_dict() for run in readout.skipped],
            "measured_runs": len(session.measurements), "interval_multipliers": list(session.belief.multipliers),
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


def tune_text(plan: TunePlan, proposals: Sequence[Proposal], stopped: str | None = None, runs_done: int = 0) -> str:
    body = tune_json(plan, proposals, stopped, runs_done)
    lines = [f"slim tune: {len(body['workloads'])} workload(s) on {body['hardware']} ({body['mode']}), prior "
             f"{body['predictor'].upper()}, {body['measured_runs']} measured run(s); intervals at "
             f"{100 * body['confidence']:.0f}%, tolerance {100 * body['tolerance']:g}% of throughput"]
    readout = readout_line(body)
    if readout is not None:
        lines.append(readout)
    if stopped is not None:
        lines.append(f"loop: {runs_done} benchmark(s) run, stopped: {stopped}")
    for workload in body["workloads"]:
        cert = workload["certificate"]
        slo = f"{1e3 * cert['slo_s']:.0f} ms" if cert["slo_s"] is not None and np.isfinite(cert["slo_s"]) else "pending"
        lines += ["", f"{workload['workload']}  (SLO {slo}, epsilon {cert['epsilon']:g})"]
        if cert["settled"] and cert["batch_cap"] is not None:
            decision = (f"  SETTLED: --max-num-seqs {cert['batch_cap']:g}: measured "
                        f"{_number(cert['throughput_per_s'])} tokens/s, E2E {_number(cert['e2e_latency_s'], ' s')}")
        elif cert["settled"]:
            decision = "  SETTLED: no cap meets the SLO and the efficiency floor"
        elif cert["batch_cap"] is not None:
            decision = (f"  open: best measured so far --max-num-seqs {cert['batch_cap']:g} "
                        f"({_number(cert['throughput_per_s'])} tokens/s); could still be beaten by caps "
                        f"{', '.join(f'{c:g}' for c in cert['challengers']) or '-'}"
                        + ("; T(1) decides the efficiency floor" if cert["needs_throughput_at_one"] else ""))
        else:
            decision = "  open: no measured cap within the SLO yet" + "".join(f"; {n}" for n in cert["notes"])
        lines.append(decision + failure_note(workload))
        for exclusion in cert["exclusions"]:
            lines.append(f"    cap {exclusion['cap']:g}: {exclusion['reason']}")
        lines.append("    cap   measured T   predicted T [interval]            measured E2E  predicted E2E [interval]")
        for row in workload["candidates"]:
            t, e = row["throughput_per_s"], row["e2e_latency_s"]
            lines.append(f"    {row['max_num_seqs']:>4}  {_number(row['measured_throughput_per_s']):>10}   "
                         f"{_number(t[0]):>8} [{_number(t[1])}, {_number(t[2])}]".ljust(62)
                         + f"{_number(row['measured_e2e_latency_s'], ' s'):>10}  "
                         f"{_number(e[0], ' s')} [{_number(e[1], ' s')}, {_number(e[2], ' s')}]"
                         + ("  (failed)" if row["failed"] else ""))
    if body["next"]:
        lines += ["", "Next benchmark(s), most useful per GPU-second first:"]
        for run in body["next"]:
            lines.append(f"  {run['workload']} cap {run['max_num_seqs']:g}: {run['reason']}; predicted "
                         f"{_number(run['predicted_gpu_seconds'], ' GPU-s')}")
            for name, command in run["commands"].items():
                lines.append(f"    {name}: {command}")
    return "\n".join(lines) + "\n"
