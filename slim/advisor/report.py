"""What `slim advise` prints for an `Advice`: the report (`render_text`) and the body of its
``--json`` document (`advice_fields`). Names and units are vLLM's: ``total_token_throughput`` in
tokens/s, latency statistics in ms under their benchmark names (``p99_tpot_ms``), the paper's
in-batch E2E as ``mean_in_batch_e2e_ms``; null where a number is undefined (SIM's E2E training
error: SIM is calibrated on throughput alone; a metric the predictor cannot predict). The
document's envelope (version, status, exit code) is the command line's (`slim.cli`)."""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np

from slim.advisor.advise import Advice
from slim.advisor.candidates import CandidateRow
from slim.decision.candidates import GOODPUT, THROUGHPUT, cap_number
from slim.sim.schedule_fit import SimCalibration
from slim.specs.hardware import GIB

THROUGHPUT_KEY = "total_token_throughput"
"""vLLM's name of total-token throughput (tokens/s): the JSON's key for throughput."""
GOODPUT_KEY = "request_goodput"


def _key(quantity: str) -> str:
    return THROUGHPUT_KEY if quantity == THROUGHPUT else GOODPUT_KEY if quantity == GOODPUT else quantity


def _number(value: float | None) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def _fmt(value: float | None) -> str:
    if value is None or not np.isfinite(value):
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def skipped_line(advice: Advice) -> str | None:
    """One line on the runs found but not used (counts by cleaning status), or None."""
    if not advice.skipped:
        return None
    statuses = Counter(r.status for r in advice.skipped)
    counts = ", ".join(f"{status}: {count}" for status, count in statuses.most_common())
    return f"traces: skipped {len(advice.skipped)} of {advice.runs_found} run(s) ({counts}); --json lists each with why"


def _at(advice: Advice, cap: float) -> CandidateRow:
    return next(row for row in advice.candidates if row.max_num_seqs == cap)


def _value_line(advice: Advice, row: CandidateRow, quantity: str, label: str, unit: str) -> str:
    predictor = advice.predictor.upper()
    predicted = row.predicted.get(quantity, float("nan"))
    prediction = (f"{predictor} predicts {_fmt(predicted)}" if np.isfinite(predicted)
                  else f"{predictor} cannot predict it")
    if quantity in row.measured:
        return f"  {label:<22} {_fmt(row.measured[quantity])} {unit} (measured; {prediction})"
    return f"  {label:<22} {_fmt(predicted)} {unit} (predicted; not measured)"


def _relative(advice: Advice, name: str) -> str:
    bound = next(b for b in advice.slos.bounds if b.metric.name == name)
    return f"{bound.multiplier:g}x cap {advice.slos.reference_cap:g}'s"


def _basis_line(advice: Advice, left_out: str) -> str:
    """What the predictions rest on: the fit and its training error, or the uncalibrated prior and why."""
    if advice.fit is None:
        prior = ("SLIM's prior (the ideal roofline machine of the accelerator's datasheet)"
                 if advice.predictor == "slim"
                 else "SIM's prior (the simulator at its shipped constants), every candidate cap simulated,")
        return (f"{prior} on no run: the {advice.n_runs} usable run(s) cannot fit it ({advice.prior_reason}); "
                "measured caps are decided on their measurements")
    fitted = ("SLIM fitted" if advice.predictor == "slim"
              else "SIM (the simulator) calibrated, every candidate cap simulated,")
    return (f"{fitted} on {advice.fit.n_train_points} runs ({advice.n_runs} usable{left_out}): "
            f"train MAPE {advice.fit.train_mape_throughput_pct:.1f}% (throughput)")


def _cap_flag(advice: Advice) -> str:
    """The recommended cap as vLLM takes it: the cap, or with data parallelism each rank's share of the
    server's requests in flight; the tensor-parallel size beyond one GPU, and with expert parallelism
    the flag its runs were served with."""
    cap = advice.recommendation.batch_cap
    experts = " --enable-expert-parallel" if advice.expert_parallel else ""
    size = f" --tensor-parallel-size {advice.tensor_parallel}" if advice.tensor_parallel > 1 else ""
    if advice.data_parallel <= 1:
        return f"{cap:g}" + (f" with{size}{experts}" if size or experts else "")
    return (f"{advice.max_num_seqs_per_rank} per rank with{size} --data-parallel-size {advice.data_parallel}{experts} "
            f"({cap:g} requests in flight over the server)")


def render_text(advice: Advice) -> str:
    """The human-readable report `slim advise` prints: the fit, the runs left out, the workload and
    its SLOs, the recommended cap with its measured and predicted values and what binds it, whether
    the decision is settled (and the next benchmark where it is not), the vLLM memory flags, the
    knee, the held-out check and the warnings."""
    r, m, k = advice.recommendation, advice.memory, advice.knee
    binding = [name for name in r.binding]
    constraint = ("the throughput peak is admissible" if not binding
                  else "limited by " + " and ".join("the efficiency floor" if b == "efficiency" else f"the SLO {b}"
                                                    for b in binding))
    left_out = (f"; {advice.n_left_out} left out, trained on {', '.join(advice.train_models)}"
                if advice.n_left_out else "")
    slos = "; ".join(f"{name} <= {_fmt(limit)} ms" + (f" (= {_relative(advice, name)}, on its prediction there: no "
                                                       "run measured it)" if name in advice.predicted_bounds else "")
                     for name, limit in advice.limits_ms.items())
    if advice.slos.goodput is not None:
        slos += f"{'; ' if slos else ''}max goodput ({advice.slos.goodput.spec})"
    lines = [_basis_line(advice, left_out)]
    skipped = skipped_line(advice)
    if skipped:
        lines.append(skipped)
    lines += [f"Workload: {advice.model}, IL {advice.input_len:g}, OL {advice.output_len:g}; SLO {slos}; "
              f"epsilon {advice.epsilon:g}" + ("" if advice.confidence is None else
                                              f"; in-batch E2E held on its upper bound at confidence "
                                              f"{advice.confidence:g}"),
              "",
              f"Recommended --max-num-seqs {_cap_flag(advice)} ({'measured' if r.measured else 'predicted'}; "
              f"{constraint})"]
    row = _at(advice, r.batch_cap)
    lines.append(_value_line(advice, row, THROUGHPUT, "throughput", "tokens/s"))
    for name in advice.limits_ms:
        lines.append(_value_line(advice, row, name, name, "ms"))
    if advice.slos.goodput is not None:
        lines.append(_value_line(advice, row, GOODPUT, "goodput", "requests/s"))
    if np.isfinite(row.bound_ms) and advice.confidence is not None:
        lines.append(f"  {'in-batch E2E bound':<22} {_fmt(row.bound_ms)} ms (one-sided {advice.confidence:g}: "
                     "parameter uncertainty, training-equivalent fits and run-to-run scatter)")
    lines += [f"  {'batching efficiency':<22} {r.efficiency:.2f} (T(B) / (B T(1)))",
              f"  {'KV capacity':<22} {advice.kv_capacity_sequences:,.0f} sequences ({advice.kv_capacity_source})"]
    if advice.refused_caps:
        lines.append("  SIM refused --max-num-seqs " + ", ".join(f"{cap:g}" for cap in advice.refused_caps)
                     + " (simulated preemption: KV demand overflows, or above the token budget)")
    lines += _unjudged_lines(advice)
    lines += _tune_lines(advice)
    lines += [
        "",
        f"KV memory for {m.batch_cap} sequences: {m.kv_bytes_needed / GIB:.2f} GiB "
        f"of vLLM's default {m.kv_reservation_bytes / GIB:.2f} GiB reservation "
        + (f"({m.memory_saved_bytes / GIB:.2f} GiB freed)" if m.memory_saved_bytes >= 0
           else f"({-m.memory_saved_bytes / GIB:.2f} GiB more than it holds)"),
        f"  --gpu-memory-utilization {m.gpu_memory_utilization_needed:.3f}"
        f"   (weights {m.weight_bytes / GIB:.2f} GiB + KV + {m.activation_overhead_bytes / GIB:.2f} GiB overhead)",
        f"  --num-gpu-blocks-override {m.num_gpu_blocks_override}   (with --max-model-len {advice.max_model_len})",
        *([f"  {' '.join(advice.serving_flags)}   (the weights and KV cache the plan is for)"] if advice.serving_flags
          else []),
        "",
        f"Knee advisor (roofline, ctx {k.ctx_len:g}): B_knee {k.b_knee:.1f}, "
        f"--max-num-seqs in [{k.low:.0f}, {k.high:.0f}], suggests {k.suggested_max_num_seqs}",
    ]
    if advice.held_out is not None:
        h = advice.held_out
        lines.append(f"Held-out check: SLIM, not trained on them, predicts the {h.n_runs} usable runs of {h.model} "
                     f"to {h.throughput_mape_pct:.1f}% throughput MAPE ({h.e2e_mape_pct:.1f}% E2E)")
    lines += [f"Warning: {warning.message}" for warning in advice.warnings]
    return "\n".join(lines)


def _unjudged_lines(advice: Advice) -> list[str]:
    """Caps above the recommendation left out because no run measured an SLO metric there and the
    predictor cannot predict it: they are unjudged, not over the SLO."""
    above = [cap for cap in advice.recommendation.unjudged if cap > advice.recommendation.batch_cap]
    if not above:
        return []
    metrics = sorted({name for cap in above for name in advice.limits_ms
                      if name not in _at(advice, cap).measured and not np.isfinite(_at(advice, cap).predicted.get(
                          name, float("nan")))})
    caps = ", ".join(f"{cap:g}" for cap in above)
    return [f"  unjudged: --max-num-seqs {caps}: {', '.join(metrics) or 'an SLO metric'} cannot be predicted and no "
            f"run of the workload measured it there (measure it: slim tune proposes it)"]


def _tune_lines(advice: Advice) -> list[str]:
    t = advice.tune
    if t is None:
        return []
    if t.settled:
        lines = ["Decision: settled (slim tune: measured within the SLOs beyond its run-to-run scatter; no other cap "
                 "can beat it by more than 1% at 90% confidence)"]
    else:
        lines = ["Decision: open" + (f": run cap {t.next_cap:g} next ({t.next_reason})" if t.next_cap is not None
                                      else "; " + "; ".join(t.notes) if t.notes else "")]
        lines += [f"  {name}: {command}" for name, command in t.next_commands.items()]
    if t.disagreement:
        lines.append(f"  {t.disagreement}")
    return lines


def candidates_fields(rows: Sequence[CandidateRow], limits_ms: dict[str, float], epsilon: float,
                      confidence: float | None = None) -> list[dict[str, Any]]:
    """Per candidate: what its runs measured and what the predictor predicts, by vLLM's names, and
    whether it meets each SLO and the efficiency floor on its measured values (else the prediction)."""
    if not rows:
        return []
    t_one = _value_of(rows[0], THROUGHPUT) / rows[0].max_num_seqs
    out = []
    for row in rows:
        throughput = _value_of(row, THROUGHPUT)
        efficiency = throughput / (row.max_num_seqs * t_one) if t_one > 0 else float("nan")
        entry = {"max_num_seqs": int(row.max_num_seqs), "runs": row.runs,
                 "measured": {_key(name): _number(value) for name, value in row.measured.items()},
                 "predicted": {_key(name): _number(value) for name, value in row.predicted.items()},
                 "batching_efficiency": _number(efficiency),
                 "meets_slo": {name: bool(_value_of(row, name, confidence is not None) <= limit)
                               for name, limit in limits_ms.items()},
                 "meets_efficiency_floor": bool(efficiency > epsilon), "refused": row.refused}
        if np.isfinite(row.bound_ms) and confidence is not None:
            entry["mean_in_batch_e2e_ms_upper_bound"] = row.bound_ms
        out.append(entry)
    return out


def _value_of(row: CandidateRow, name: str, upper: bool = False) -> float:
    if name in row.measured:
        return row.measured[name]
    if upper and np.isfinite(row.bound_ms) and name == "mean_in_batch_e2e_ms":
        return row.bound_ms
    return row.predicted.get(name, float("nan"))


def advice_fields(advice: Advice) -> dict[str, Any]:
    """The body of `slim advise --json`'s document: the workload and its SLOs, the fit, the runs left
    out, the recommendation (Eq. 13's choice on measurements and predictions, what binds it), the
    decision's state (`slim tune`'s), the KV capacity and memory plan, the knee, the held-out check,
    every candidate and the warnings."""
    r, m, k, fit = advice.recommendation, advice.memory, advice.knee, advice.fit
    sim = isinstance(fit, SimCalibration)   # calibrated on throughput alone; its parameters are constants
    t = advice.tune
    row = _at(advice, r.batch_cap)
    return {
        "workload": {"model": advice.model, "hardware": advice.hardware, "input_len": advice.input_len,
                     "output_len": advice.output_len, "slo_ms": advice.limits_ms,
                     "slo_resolved_on_prediction": list(advice.predicted_bounds), "served_model": advice.served_model,
                     "goodput": advice.slos.goodput.spec if advice.slos.goodput is not None else None,
                     "epsilon": advice.epsilon, "confidence": advice.confidence},
        "fit": {"n_usable_runs": advice.n_runs, "n_train_runs": fit.n_train_points if fit is not None else 0,
                "n_left_out_runs": advice.n_left_out, "train_models": list(advice.train_models),
                "train_mape_throughput_pct": fit.train_mape_throughput_pct if fit is not None else None,
                "train_mape_e2e_pct": None if sim or fit is None else fit.train_mape_e2e_pct,
                "params": (None if fit is None else fit.to_dict()["constants"] if sim else fit.params.to_dict()),
                "prior": advice.prior_reason is not None, "prior_reason": advice.prior_reason},
        "runs_found": advice.runs_found, "skipped_runs": [run.to_dict() for run in advice.skipped],
        "recommendation": {"max_num_seqs": cap_number(r.batch_cap), "tensor_parallel_size": advice.tensor_parallel,
                           "data_parallel_size": advice.data_parallel,
                           "enable_expert_parallel": advice.expert_parallel,
                           "max_num_seqs_per_rank": advice.max_num_seqs_per_rank, "measured": r.measured,
                           THROUGHPUT_KEY: _number(r.throughput_per_s),
                           **{name: _number(value) for name, value in r.values_ms.items()},
                           "measured_values": {_key(name): _number(v) for name, v in row.measured.items()},
                           "predicted_values": {_key(name): _number(v) for name, v in row.predicted.items()},
                           "batching_efficiency": r.efficiency, "limited_by": list(r.binding)},
        "decision": None if t is None else {
            "settled": t.settled, "tune_max_num_seqs": cap_number(t.batch_cap),
            "next_max_num_seqs": cap_number(t.next_cap) if t.next_cap is not None else None,
            "next_reason": t.next_reason or None, "next_commands": t.next_commands, "disagreement": t.disagreement},
        "kv_capacity": {"sequences": advice.kv_capacity_sequences, "source": advice.kv_capacity_source},
        "memory": {"kv_bytes_needed": m.kv_bytes_needed, "kv_reservation_bytes": m.kv_reservation_bytes,
                   "memory_saved_bytes": m.memory_saved_bytes, "weight_bytes": m.weight_bytes,
                   "activation_overhead_bytes": m.activation_overhead_bytes,
                   "gpu_memory_utilization": m.gpu_memory_utilization_needed,
                   "num_gpu_blocks_override": m.num_gpu_blocks_override, "max_model_len": advice.max_model_len,
                   "serving_flags": list(advice.serving_flags)},
        "knee": {"ctx_len": k.ctx_len, "b_knee": k.b_knee, "low": k.low, "high": k.high,
                 "suggested_max_num_seqs": k.suggested_max_num_seqs},
        "held_out_check": None if advice.held_out is None else {
            "model": advice.held_out.model, "n_runs": advice.held_out.n_runs,
            "throughput_mape_pct": advice.held_out.throughput_mape_pct,
            "e2e_mape_pct": advice.held_out.e2e_mape_pct},
        "candidates": candidates_fields(advice.candidates, advice.limits_ms, advice.epsilon, advice.confidence),
        "warnings": [{"code": warning.code, "message": warning.message} for warning in advice.warnings],
    }
