"""What `slim advise` prints for an `Advice`: the report (`render_text`) and the body of its
``--json`` document (`advice_fields`: units in the key names, null where a number is undefined,
such as SIM's E2E training error: SIM is calibrated on throughput alone).
The document's envelope (version, status, exit code) is the command line's (`slim.cli`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from slim.advisor.advise import Advice
from slim.advisor.bca import BcaResult
from slim.sim.schedule_fit import SimCalibration
from slim.specs.hardware import GIB


def render_text(advice: Advice) -> str:
    """The human-readable report `slim advise` prints: the fit, the workload, the recommended cap and
    the constraints of Eq. 13 that bind it, the vLLM memory flags, the knee, the held-out check and
    the warnings."""
    d, m, k = advice.decision, advice.memory, advice.knee
    constraint = ("the throughput peak is admissible" if not d.binding
                  else "limited by " + " and ".join({"slo": "the SLO", "efficiency": "the efficiency floor"}[b]
                                                    for b in d.binding))
    left_out = (f"; {advice.n_left_out} left out, trained on {', '.join(advice.train_models)}"
                if advice.n_left_out else "")
    fitted = ("SLIM fitted" if advice.predictor == "slim"
              else "SIM (the simulator) calibrated, every candidate cap simulated,")
    lines = [
        f"{fitted} on {advice.fit.n_train_points} runs ({advice.n_runs} usable{left_out}): "
        f"train MAPE {advice.fit.train_mape_throughput_pct:.1f}% (throughput)",
        f"Workload: {advice.model}, IL {advice.input_len:g}, OL {advice.output_len:g}; "
        f"SLO {d.slo_s * 1e3:.0f} ms E2E, epsilon {d.epsilon:g}"
        + ("" if advice.confidence is None else
           f"; SLO held on E2E's upper bound at confidence {advice.confidence:g}"),
        "",
        f"Recommended --max-num-seqs {int(d.batch_cap)} ({constraint})",
        f"  predicted throughput   {d.throughput_per_s:,.0f} tokens/s",
        f"  predicted E2E latency  {d.e2e_latency_s * 1e3:,.0f} ms",
        *([] if d.e2e_bound_s is None else
          [f"  E2E upper bound        {d.e2e_bound_s * 1e3:,.0f} ms (one-sided {advice.confidence:g}: parameter "
           "uncertainty, training-equivalent fits and run-to-run scatter)"]),
        f"  batching efficiency    {d.batching_efficiency:.2f} (T(B) / (B T(1)))",
        f"  KV capacity            {advice.kv_capacity_sequences:,.0f} sequences ({advice.kv_capacity_source})",
        "",
        f"KV memory for {m.batch_cap} sequences: {m.kv_bytes_needed / GIB:.2f} GiB "
        f"of vLLM's default {m.kv_reservation_bytes / GIB:.2f} GiB reservation "
        f"({m.memory_saved_bytes / GIB:.2f} GiB freed)",
        f"  --gpu-memory-utilization {m.gpu_memory_utilization_needed:.3f}"
        f"   (weights {m.weight_bytes / GIB:.2f} GiB + KV + {m.activation_overhead_bytes / GIB:.2f} GiB overhead)",
        f"  --num-gpu-blocks-override {m.num_gpu_blocks_override}   (with --max-model-len {advice.max_model_len})",
        "",
        f"Knee advisor (roofline, ctx {k.ctx_len:g}): B_knee {k.b_knee:.1f}, "
        f"--max-num-seqs in [{k.low:.0f}, {k.high:.0f}], suggests {k.suggested_max_num_seqs}",
    ]
    if advice.refused_caps:
        lines.insert(8, "  SIM refused --max-num-seqs " + ", ".join(f"{cap:g}" for cap in advice.refused_caps)
                     + " (simulated preemption: KV demand overflows, or above the token budget)")
    if advice.held_out is not None:
        h = advice.held_out
        lines.append(f"Held-out check: SLIM, not trained on them, predicts the {h.n_runs} usable runs of {h.model} "
                     f"to {h.throughput_mape_pct:.1f}% throughput MAPE ({h.e2e_mape_pct:.1f}% E2E)")
    lines += [f"Warning: {warning.message}" for warning in advice.warnings]
    return "\n".join(lines)



def _number(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def candidates_fields(decision: BcaResult) -> list[dict[str, Any]]:
    """Per candidate: the prediction, and with a confidence the E2E upper bound the SLO is held on."""
    bounds = decision.candidate_e2e_bound_s or decision.candidate_e2e_latency_s
    rows = zip(decision.candidate_batch_sizes, decision.candidate_throughput_per_s, decision.candidate_e2e_latency_s,
               bounds, decision.candidate_efficiency)
    candidates = []
    for cap, throughput, e2e_s, bound_s, efficiency in rows:
        candidate = {"max_num_seqs": int(cap), "predicted_throughput_tokens_per_s": _number(throughput),
                     "predicted_e2e_latency_ms": _number(1e3 * e2e_s)}
        if decision.candidate_e2e_bound_s:
            candidate["e2e_upper_bound_ms"] = _number(1e3 * bound_s)
        candidates.append({**candidate, "batching_efficiency": _number(efficiency),
                           "meets_slo": bool(bound_s <= decision.slo_s),
                           "meets_efficiency_floor": bool(efficiency > decision.epsilon)})
    return candidates


def advice_fields(advice: Advice) -> dict[str, Any]:
    """The body of `slim advise --json`'s document: the workload, the fit, the recommendation (Eq. 13's
    choice and the constraints that bind it), the KV capacity and memory plan, the knee, the held-out
    check, every candidate and the warnings."""
    d, m, k, fit = advice.decision, advice.memory, advice.knee, advice.fit
    sim = isinstance(fit, SimCalibration)   # calibrated on throughput alone; its parameters are constants
    return {
        "workload": {"model": advice.model, "hardware": advice.hardware, "input_len": advice.input_len,
                     "output_len": advice.output_len, "slo_ms": 1e3 * d.slo_s, "epsilon": d.epsilon,
                     "confidence": advice.confidence},
        "fit": {"n_usable_runs": advice.n_runs, "n_train_runs": fit.n_train_points,
                "n_left_out_runs": advice.n_left_out, "train_models": list(advice.train_models),
                "train_mape_throughput_pct": fit.train_mape_throughput_pct,
                "train_mape_e2e_pct": None if sim else fit.train_mape_e2e_pct,
                "params": fit.to_dict()["constants"] if sim else fit.params.to_dict()},
        "recommendation": {"max_num_seqs": int(d.batch_cap), "predicted_throughput_tokens_per_s": d.throughput_per_s,
                           "predicted_e2e_latency_ms": 1e3 * d.e2e_latency_s,
                           "e2e_upper_bound_ms": None if d.e2e_bound_s is None else 1e3 * d.e2e_bound_s,
                           "batching_efficiency": d.batching_efficiency, "limited_by": list(d.binding)},
        "kv_capacity": {"sequences": advice.kv_capacity_sequences, "source": advice.kv_capacity_source},
        "memory": {"kv_bytes_needed": m.kv_bytes_needed, "kv_reservation_bytes": m.kv_reservation_bytes,
                   "memory_saved_bytes": m.memory_saved_bytes, "weight_bytes": m.weight_bytes,
                   "activation_overhead_bytes": m.activation_overhead_bytes,
                   "gpu_memory_utilization": m.gpu_memory_utilization_needed,
                   "num_gpu_blocks_override": m.num_gpu_blocks_override, "max_model_len": advice.max_model_len},
        "knee": {"ctx_len": k.ctx_len, "b_knee": k.b_knee, "low": k.low, "high": k.high,
                 "suggested_max_num_seqs": k.suggested_max_num_seqs},
        "held_out_check": None if advice.held_out is None else {
            "model": advice.held_out.model, "n_runs": advice.held_out.n_runs,
            "throughput_mape_pct": advice.held_out.throughput_mape_pct,
            "e2e_mape_pct": advice.held_out.e2e_mape_pct},
        "candidates": candidates_fields(d),
        "warnings": [{"code": warning.code, "message": warning.message} for warning in advice.warnings],
    }
