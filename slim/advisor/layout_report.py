"""What `slim advise --tensor-parallel-sizes` prints for a `slim.advisor.layouts.LayoutAdvice`: the
report (`layout_lines`) and its ``--json`` document's body (`layout_fields`). Each layout's cap and
tokens/s per GPU (measured or predicted), its status in the decision across layouts and why, the
run that would settle it, whether the decision is settled, and the deployment."""

from __future__ import annotations

import math
from typing import Any

from slim.advisor.layouts import CHOSEN, OPEN, LayoutAdvice, LayoutOutcome
from slim.decision.candidates import cap_number
from slim.decision.layouts import Layout, gpu_count
from slim.specs.data_parallel import cap_words


def _serve_line(advice: LayoutAdvice, served_model: str) -> str:
    chosen = advice.chosen
    memory = chosen.advice.memory
    layout = Layout.of_sizes(chosen.tensor_parallel, chosen.data_parallel, chosen.advice.expert_parallel)
    # The runs' cap is the server's requests in flight; vLLM's --max-num-seqs holds per data-parallel rank.
    cap = layout.per_rank_cap(chosen.advice.recommendation.batch_cap)
    return " ".join(["vllm", "serve", served_model, *layout.parallel_flags(), "--max-num-seqs", str(cap),
                     "--max-model-len", str(chosen.advice.max_model_len),
                     "--gpu-memory-utilization", f"{memory.gpu_memory_utilization_needed:.3f}",
                     "--num-gpu-blocks-override", str(memory.num_gpu_blocks_override),
                     *chosen.advice.serving_flags])


def _next_run(outcome: LayoutOutcome) -> str:
    if outcome.next_cap is None:
        return ""
    if outcome.next_run_repeats:
        return (f"; run --max-num-seqs {outcome.next_cap:g} again next (an SLO metric measured within the "
                "run-to-run scatter of its bound)")
    return f"; run --max-num-seqs {outcome.next_cap:g} next"


def _judgement(outcome: LayoutOutcome) -> str:
    """The decision's words on a layout, after its figures: its status, why, and its next run."""
    if outcome.status is None:
        return ""
    if outcome.verdict is None or outcome.verdict == outcome.status:
        return outcome.status
    return f"{outcome.status}: {outcome.verdict}{_next_run(outcome)}"


def _outcome_line(advice: LayoutAdvice, outcome: LayoutOutcome) -> str:
    if outcome.advice is None:
        shown = outcome.verdict is not None or outcome.status == OPEN
        return f"  {outcome.name}: no cap ({outcome.reason})" + (f": {_judgement(outcome)}" if shown else "")
    r = outcome.advice.recommendation
    basis = "measured" if r.measured else "predicted"
    slos = ", ".join(f"{name} {value:,.1f} ms" for name, value in r.values_ms.items())
    if outcome is advice.chosen:
        verdict = _judgement(outcome) or CHOSEN
    else:
        share = 1 - outcome.throughput_per_gpu / advice.chosen.throughput_per_gpu if advice.chosen else math.nan
        gap = (f"{100 * abs(share):.0f}% {'fewer' if share >= 0 else 'more'} tokens/s per GPU"
               if math.isfinite(share) else "")
        verdict = "; ".join(part for part in (gap, _judgement(outcome)) if part)
    return (f"  {outcome.name}: {cap_words(r.batch_cap, outcome.data_parallel)}, {outcome.throughput_per_gpu:,.0f} "
            "tokens/s per GPU "
            f"({basis}){', ' + slos if slos else ''}: {verdict}")


def decision_line(advice: LayoutAdvice) -> str:
    """Whether the decision across layouts is settled, and else the runs that would settle it."""
    if advice.settled:
        if advice.decision is None or advice.decision.chosen is None:
            return "Layout decision: settled: no layout can meet the SLOs (each one's reason above)"
        chosen = advice.decision.chosen
        cap = cap_words(chosen.batch_cap, advice.chosen.data_parallel)
        return (f"Layout decision: settled: {advice.chosen.name} at {cap} was measured within every SLO, and no "
                f"other layout or cap can beat it by more than {100 * advice.tolerance:g}% per GPU (an unmeasured "
                "cap on its predicted throughput)")
    runs = []
    for outcome in advice.outcomes:
        if outcome.status not in (CHOSEN, OPEN):
            continue
        why = ("could still win" if outcome.status == OPEN else "the choice rests on predictions"
               if advice.decision is None or advice.decision.chosen is None else "its own cap is open")
        if outcome.next_cap is not None:
            again = " again" if outcome.next_run_repeats else ""
            runs.append(f"{outcome.name} --max-num-seqs {outcome.next_cap:g}{again} ({why})")
        elif outcome.status == OPEN:
            runs.append(f"{outcome.name} (no run of it judges it yet)")
    return "Layout decision: open" + ("; the runs that would settle it: " + ", ".join(runs) if runs else "")


def layout_lines(advice: LayoutAdvice) -> list[str]:
    """The report: per layout its cap, tokens/s per GPU (measured or predicted) and the SLO metrics
    there, or why it has none, and its status in the decision across layouts with why; whether that
    decision is settled; the deployment; last, each layout's warnings."""
    layouts_of: dict[str, list[str]] = {}        # one line per warning, naming every layout it holds for
    for outcome in advice.outcomes:
        for warning in outcome.warnings:
            layouts_of.setdefault(warning.message, []).append(outcome.name)
    return _decision_report(advice) + [f"Warning ({', '.join(names)}): {message}"
                                       for message, names in layouts_of.items()]


def _decision_report(advice: LayoutAdvice) -> list[str]:
    lines = ["Layouts compared on tokens/s per GPU (each advised on its own runs):"]
    lines += [_outcome_line(advice, outcome) for outcome in advice.outcomes]
    if advice.chosen is None:
        return [*lines, "No layout meets the SLOs.", decision_line(advice)]
    lines.append(decision_line(advice))
    replicas, chosen = advice.replicas, advice.chosen
    lines.append("")
    if advice.request_rate is not None:
        short = (f"; more than the {advice.gpus} GPUs available" if advice.gpus is not None
                 and advice.gpus_needed > advice.gpus else "")
        lines.append(f"For {advice.request_rate:g} requests/s: {replicas} replica(s) x {chosen.name} = "
                     f"{advice.gpus_needed} GPUs, each replica serving {advice.requests_per_replica:.2f} requests/s "
                     f"(headroom {100 * advice.headroom:.0f}%; independent replicas behind a load balancer{short})")
    elif replicas is not None:
        lines.append(f"On {gpu_count(advice.gpus)}: {replicas} replica(s) x {chosen.name} "
                     f"({gpu_count(replicas * chosen.gpus_per_replica)} used)")
    lines.append("  " + _serve_line(advice, chosen.advice.served_model))
    return lines


def layout_fields(advice: LayoutAdvice) -> dict[str, Any]:
    """`slim advise --json`'s ``layouts`` document (docs/advisor.md, "The layout")."""
    def outcome(o: LayoutOutcome) -> dict[str, Any]:
        layout = {"tensor_parallel_size": o.tensor_parallel, "data_parallel_size": o.data_parallel,
                  "enable_expert_parallel": o.expert_parallel,
                  "gpus_per_replica": o.gpus_per_replica, "status": o.status,
                  "next_max_num_seqs": cap_number(o.next_cap) if o.next_cap is not None else None,
                  "next_run_repeats": o.next_run_repeats}
        reason = o.verdict if o.verdict is not None else o.reason
        layout["warnings"] = [{"code": w.code, "message": w.message} for w in o.warnings]
        if o.advice is None:
            return {**layout, "max_num_seqs": None, "reason": reason}
        r = o.advice.recommendation
        return {**layout, "max_num_seqs": int(r.batch_cap),
                "measured": bool(r.measured), "total_token_throughput": float(r.throughput_per_s),
                "total_token_throughput_per_gpu": o.throughput_per_gpu,
                **{name: float(value) for name, value in r.values_ms.items()}, "reason": reason}

    chosen = advice.chosen
    return {"layouts": [outcome(o) for o in advice.outcomes],
            "chosen_tensor_parallel_size": chosen.tensor_parallel if chosen is not None else None,
            "chosen_data_parallel_size": chosen.data_parallel if chosen is not None else None,
            "chosen_enable_expert_parallel": chosen.advice.expert_parallel if chosen is not None else None,
            "settled": advice.settled, "tolerance": advice.tolerance,
            "gpus": advice.gpus, "request_rate": advice.request_rate, "replicas": advice.replicas,
            "gpus_needed": advice.gpus_needed, "headroom": advice.headroom,
            "requests_per_replica": (advice.requests_per_replica if chosen is not None
                                     and advice.request_rate is not None else None),
            "serve": _serve_line(advice, chosen.advice.served_model) if chosen is not None else None}
