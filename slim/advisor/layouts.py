"""The layout as the decision: which tensor-parallel size, with which cap, gives the most tokens per
second per GPU under the SLOs, and the deployment it makes of the GPUs available or of a target load.

Each tensor-parallel size ``t`` the traces hold runs (`--tensor-parallel-sizes`) is advised on its own
runs (`slim.advisor.advise.advise` with ``tensor_parallel = t``: Eq. 13 over its caps, its memory plan
per rank). The layouts are then compared on the objective per GPU, the chosen cap's throughput
(measured where measured, else predicted) over ``t``; a layout none of whose caps meets the SLOs, or
that needs more GPUs than `gpus`, loses with its reason. The deployment is ``gpus // t`` independent
replicas of ``vllm serve MODEL --tensor-parallel-size t --max-num-seqs B``; with a `request_rate`, the
replicas needed assume a load balancer spreading requests evenly over independent replicas, each
carrying the requests per second its chosen cap serves (throughput over ``IL + OL`` tokens per
request), and the headroom is what they carry beyond the rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from slim.advisor.advise import Advice, advise
from slim.advisor.request import AdviceRequest
from slim.errors import AdvisorError, NoFeasibleCapError


@dataclass(frozen=True)
class LayoutOutcome:
    """One tensor-parallel size: its advice, or why it has none."""

    tensor_parallel: int
    advice: Advice | None
    reason: str | None = None

    @property
    def throughput_per_gpu(self) -> float:
        """The chosen cap's tokens/s per GPU (NaN without advice)."""
        if self.advice is None:
            return math.nan
        return float(self.advice.recommendation.throughput_per_s) / self.tensor_parallel


@dataclass(frozen=True)
class LayoutAdvice:
    """Every layout's outcome, the chosen one (None: no layout meets the SLOs) and the deployment."""

    outcomes: tuple[LayoutOutcome, ...]
    chosen: LayoutOutcome | None
    gpus: int | None
    request_rate: float | None
    tokens_per_request: float

    @property
    def replicas(self) -> int | None:
        """Replicas of the chosen layout: on `gpus`, else for `request_rate` (None without either)."""
        if self.chosen is None:
            return None
        if self.request_rate is not None:
            return max(math.ceil(self.request_rate / self.requests_per_replica - 1e-12), 1)
        return self.gpus // self.chosen.tensor_parallel if self.gpus is not None else None

    @property
    def requests_per_replica(self) -> float:
        """Requests per second one replica of the chosen layout serves at its cap."""
        return float(self.chosen.advice.recommendation.throughput_per_s) / self.tokens_per_request

    @property
    def gpus_needed(self) -> int | None:
        return None if self.replicas is None else self.replicas * self.chosen.tensor_parallel

    @property
    def headroom(self) -> float | None:
        """With a request rate: the share of it the replicas carry beyond it."""
        if self.request_rate is None or self.chosen is None:
            return None
        return self.replicas * self.requests_per_replica / self.request_rate - 1.0


def advise_layouts(request: AdviceRequest, tensor_parallel_sizes: tuple[int, ...], gpus: int | None = None,
                   request_rate: float | None = None) -> LayoutAdvice:
    """Advise each tensor-parallel size on its own runs and choose by throughput per GPU (module
    docstring). Raises `AdvisorError` on no sizes, or a non-positive `gpus` or `request_rate`."""
    if not tensor_parallel_sizes:
        raise AdvisorError("give the tensor-parallel sizes to compare (--tensor-parallel-sizes 1,2,4,8)")
    if gpus is not None and gpus < 1:
        raise AdvisorError(f"--gpus must be a positive count, got {gpus}")
    if request_rate is not None and not request_rate > 0:
        raise AdvisorError(f"--request-rate must be positive requests per second, got {request_rate}")
    outcomes = []
    for size in sorted(set(tensor_parallel_sizes)):
        if gpus is not None and size > gpus:
            outcomes.append(LayoutOutcome(size, None, f"needs {size} GPUs, {gpus} available"))
            continue
        try:
            outcomes.append(LayoutOutcome(size, advise(replace(request, tensor_parallel=size, plan=False))))
        except (NoFeasibleCapError, AdvisorError) as error:
            outcomes.append(LayoutOutcome(size, None, " ".join(str(error).split())))
    advised = [outcome for outcome in outcomes if outcome.advice is not None]
    # The most tokens per GPU; on a tie the smaller layout (fewer GPUs per replica).
    chosen = max(advised, key=lambda o: (o.throughput_per_gpu, -o.tensor_parallel), default=None)
    return LayoutAdvice(tuple(outcomes), chosen, gpus, request_rate,
                        float(request.input_len) + float(request.output_len))


def _serve_line(advice: LayoutAdvice, served_model: str) -> str:
    chosen = advice.chosen
    memory = chosen.advice.memory
    return (f"vllm serve {served_model} --tensor-parallel-size {chosen.tensor_parallel} --max-num-seqs "
            f"{int(chosen.advice.recommendation.batch_cap)} --max-model-len {chosen.advice.max_model_len} "
            f"--gpu-memory-utilization {memory.gpu_memory_utilization_needed:.3f}")


def layout_lines(advice: LayoutAdvice) -> list[str]:
    """The report: per layout its cap, tokens/s per GPU (measured or predicted) and the SLO metrics
    there, or why it lost; the deployment."""
    lines = ["Layouts compared on tokens/s per GPU (each advised on its own runs):"]
    best = advice.chosen.throughput_per_gpu if advice.chosen is not None else math.nan
    for outcome in advice.outcomes:
        if outcome.advice is None:
            lines.append(f"  TP {outcome.tensor_parallel}: no cap ({outcome.reason})")
            continue
        r = outcome.advice.recommendation
        basis = "measured" if r.measured else "predicted"
        slos = ", ".join(f"{name} {value:,.1f} ms" for name, value in r.values_ms.items())
        verdict = ("chosen" if outcome is advice.chosen
                   else f"{100 * (1 - outcome.throughput_per_gpu / best):.0f}% fewer tokens/s per GPU")
        lines.append(f"  TP {outcome.tensor_parallel}: --max-num-seqs {int(r.batch_cap)}, "
                     f"{outcome.throughput_per_gpu:,.0f} tokens/s per GPU ({basis}){', ' + slos if slos else ''}"
                     f": {verdict}")
    if advice.chosen is None:
        lines.append("No layout meets the SLOs.")
        return lines
    replicas, chosen = advice.replicas, advice.chosen
    lines.append("")
    if advice.request_rate is not None:
        short = (f"; more than the {advice.gpus} GPUs available" if advice.gpus is not None
                 and advice.gpus_needed > advice.gpus else "")
        lines.append(f"For {advice.request_rate:g} requests/s: {replicas} replica(s) x TP {chosen.tensor_parallel} = "
                     f"{advice.gpus_needed} GPUs, each replica serving {advice.requests_per_replica:.2f} requests/s "
                     f"(headroom {100 * advice.headroom:.0f}%; independent replicas behind a load balancer{short})")
    elif replicas is not None:
        lines.append(f"On {advice.gpus} GPUs: {replicas} replica(s) x TP {chosen.tensor_parallel} "
                     f"({replicas * chosen.tensor_parallel} GPUs used)")
    lines.append("  " + _serve_line(advice, chosen.advice.served_model))
    return lines


def layout_fields(advice: LayoutAdvice) -> dict:
    """`slim advise --json`'s ``layouts`` document."""
    def outcome(o: LayoutOutcome) -> dict:
        if o.advice is None:
            return {"tensor_parallel_size": o.tensor_parallel, "max_num_seqs": None, "reason": o.reason}
        r = o.advice.recommendation
        return {"tensor_parallel_size": o.tensor_parallel, "max_num_seqs": int(r.batch_cap),
                "measured": bool(r.measured), "total_token_throughput": float(r.throughput_per_s),
                "total_token_throughput_per_gpu": o.throughput_per_gpu,
                **{name: float(value) for name, value in r.values_ms.items()}, "reason": None}

    chosen = advice.chosen
    return {"layouts": [outcome(o) for o in advice.outcomes],
            "chosen_tensor_parallel_size": chosen.tensor_parallel if chosen is not None else None,
            "gpus": advice.gpus, "request_rate": advice.request_rate, "replicas": advice.replicas,
            "gpus_needed": advice.gpus_needed, "headroom": advice.headroom,
            "serve": _serve_line(advice, chosen.advice.served_model) if chosen is not None else None}
