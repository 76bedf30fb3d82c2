"""The layout as the decision: which tensor-parallel size (and data-parallel size, where the runs
hold several), with which cap, gives the most tokens per second per GPU under the SLOs, and the
deployment it makes of the GPUs available or of a target load.

A layout is a server's tensor-parallel size ``t`` and data-parallel size ``d``: each ``t`` of
`--tensor-parallel-sizes` at every ``d`` the workload's runs at ``t`` hold (``d = 1`` where none
does), advised on its own runs (`slim.advisor.advise.advise` with ``tensor_parallel = t`` and
``data_parallel = d``: Eq. 13 over its caps, its memory plan per rank; the predictor's fit uses every
run at ``t``). The layouts are then compared on the objective per GPU, the chosen cap's throughput
(measured where measured, else predicted) over the GPUs one server occupies (its runs'
``gpus_per_server``, ``t x pipeline x d``; ``t x d`` where none measured it); a layout none of whose
caps meets the SLOs, or that needs more GPUs than `gpus`, loses with its reason. The deployment is
``gpus // (t x d)`` independent replicas of ``vllm serve MODEL --tensor-parallel-size t
[--data-parallel-size d] --max-num-seqs B``, where with ``d > 1`` the cap is each rank's, ``B / d``
of the ``B`` requests in flight the server's runs measured; with a `request_rate`, the replicas
needed assume a load balancer spreading requests evenly over independent replicas, each carrying the
requests per second its chosen cap serves (throughput over ``IL + OL`` tokens per request), and the
headroom is what they carry beyond the rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from slim.advisor.advise import Advice, advise, workload_layouts
from slim.advisor.request import AdviceRequest
from slim.errors import AdvisorError, NoFeasibleCapError


@dataclass(frozen=True)
class LayoutOutcome:
    """One layout, tensor-parallel x data-parallel size: its advice, or why it has none."""

    tensor_parallel: int
    advice: Advice | None
    reason: str | None = None
    data_parallel: int = 1

    @property
    def name(self) -> str:
        """``TP t``, or ``TP t x DP d`` with data parallelism."""
        return f"TP {self.tensor_parallel}" + (f" x DP {self.data_parallel}" if self.data_parallel > 1 else "")

    @property
    def gpus_per_replica(self) -> int:
        """The GPUs one server of the layout occupies: its runs' ``gpus_per_server``, else ``t x d``."""
        if self.advice is None:
            return self.tensor_parallel * self.data_parallel
        return int(self.advice.gpus_per_server)

    @property
    def throughput_per_gpu(self) -> float:
        """The chosen cap's tokens/s per GPU (NaN without advice)."""
        if self.advice is None:
            return math.nan
        return float(self.advice.recommendation.throughput_per_s) / self.gpus_per_replica


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
        return self.gpus // self.chosen.gpus_per_replica if self.gpus is not None else None

    @property
    def requests_per_replica(self) -> float:
        """Requests per second one replica of the chosen layout serves at its cap."""
        return float(self.chosen.advice.recommendation.throughput_per_s) / self.tokens_per_request

    @property
    def gpus_needed(self) -> int | None:
        return None if self.replicas is None else self.replicas * self.chosen.gpus_per_replica

    @property
    def headroom(self) -> float | None:
        """With a request rate: the share of it the replicas carry beyond it."""
        if self.request_rate is None or self.chosen is None:
            return None
        return self.replicas * self.requests_per_replica / self.request_rate - 1.0


def advise_layouts(request: AdviceRequest, tensor_parallel_sizes: tuple[int, ...], gpus: int | None = None,
                   request_rate: float | None = None) -> LayoutAdvice:
    """Advise each layout on its own runs and choose by throughput per GPU (module docstring). Raises
    `AdvisorError` on no sizes, or a non-positive `gpus` or `request_rate`, and what reading the
    traces raises (`workload_layouts`)."""
    if not tensor_parallel_sizes:
        raise AdvisorError("give the tensor-parallel sizes to compare (--tensor-parallel-sizes 1,2,4,8)")
    if gpus is not None and gpus < 1:
        raise AdvisorError(f"--gpus must be a positive count, got {gpus}")
    if request_rate is not None and not request_rate > 0:
        raise AdvisorError(f"--request-rate must be positive requests per second, got {request_rate}")
    measured_layouts = workload_layouts(request)
    outcomes = []
    for size in sorted(set(tensor_parallel_sizes)):
        for data_parallel in sorted({d for t, d in measured_layouts if t == size}) or [1]:
            if gpus is not None and size * data_parallel > gpus:
                outcomes.append(LayoutOutcome(size, None, f"needs {size * data_parallel} GPUs, {gpus} available",
                                              data_parallel))
                continue
            try:
                advice = advise(replace(request, tensor_parallel=size, data_parallel=data_parallel, plan=False))
                outcomes.append(LayoutOutcome(size, advice, None, data_parallel))
            except (NoFeasibleCapError, AdvisorError) as error:
                outcomes.append(LayoutOutcome(size, None, " ".join(str(error).split()), data_parallel))
    advised = [outcome for outcome in outcomes if outcome.advice is not None]
    # The most tokens per GPU; on a tie the smaller layout (fewer GPUs per replica).
    chosen = max(advised, key=lambda o: (o.throughput_per_gpu, -o.gpus_per_replica, -o.tensor_parallel),
                 default=None)
    return LayoutAdvice(tuple(outcomes), chosen, gpus, request_rate,
                        float(request.input_len) + float(request.output_len))


def _serve_line(advice: LayoutAdvice, served_model: str) -> str:
    chosen = advice.chosen
    memory = chosen.advice.memory
    cap, ranks = int(chosen.advice.recommendation.batch_cap), chosen.data_parallel
    # vLLM's --max-num-seqs holds per data-parallel rank: the runs' cap is the server's requests in flight.
    data_parallel = f" --data-parallel-size {ranks}" if ranks > 1 else ""
    return (f"vllm serve {served_model} --tensor-parallel-size {chosen.tensor_parallel}{data_parallel} "
            f"--max-num-seqs {math.ceil(cap / ranks)} --max-model-len {chosen.advice.max_model_len} "
            f"--gpu-memory-utilization {memory.gpu_memory_utilization_needed:.3f}")


def layout_lines(advice: LayoutAdvice) -> list[str]:
    """The report: per layout its cap, tokens/s per GPU (measured or predicted) and the SLO metrics
    there, or why it lost; the deployment."""
    lines = ["Layouts compared on tokens/s per GPU (each advised on its own runs):"]
    best = advice.chosen.throughput_per_gpu if advice.chosen is not None else math.nan
    for outcome in advice.outcomes:
        if outcome.advice is None:
            lines.append(f"  {outcome.name}: no cap ({outcome.reason})")
            continue
        r = outcome.advice.recommendation
        basis = "measured" if r.measured else "predicted"
        slos = ", ".join(f"{name} {value:,.1f} ms" for name, value in r.values_ms.items())
        verdict = ("chosen" if outcome is advice.chosen
                   else f"{100 * (1 - outcome.throughput_per_gpu / best):.0f}% fewer tokens/s per GPU")
        lines.append(f"  {outcome.name}: --max-num-seqs {int(r.batch_cap)}, "
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
        lines.append(f"For {advice.request_rate:g} requests/s: {replicas} replica(s) x {chosen.name} = "
                     f"{advice.gpus_needed} GPUs, each replica serving {advice.requests_per_replica:.2f} requests/s "
                     f"(headroom {100 * advice.headroom:.0f}%; independent replicas behind a load balancer{short})")
    elif replicas is not None:
        lines.append(f"On {advice.gpus} GPUs: {replicas} replica(s) x {chosen.name} "
                     f"({replicas * chosen.gpus_per_replica} GPUs used)")
    lines.append("  " + _serve_line(advice, chosen.advice.served_model))
    return lines


def layout_fields(advice: LayoutAdvice) -> dict:
    """`slim advise --json`'s ``layouts`` document."""
    def outcome(o: LayoutOutcome) -> dict:
        layout = {"tensor_parallel_size": o.tensor_parallel, "data_parallel_size": o.data_parallel,
                  "gpus_per_replica": o.gpus_per_replica}
        if o.advice is None:
            return {**layout, "max_num_seqs": None, "reason": o.reason}
        r = o.advice.recommendation
        return {**layout, "max_num_seqs": int(r.batch_cap),
                "measured": bool(r.measured), "total_token_throughput": float(r.throughput_per_s),
                "total_token_throughput_per_gpu": o.throughput_per_gpu,
                **{name: float(value) for name, value in r.values_ms.items()}, "reason": None}

    chosen = advice.chosen
    return {"layouts": [outcome(o) for o in advice.outcomes],
            "chosen_tensor_parallel_size": chosen.tensor_parallel if chosen is not None else None,
            "chosen_data_parallel_size": chosen.data_parallel if chosen is not None else None,
            "gpus": advice.gpus, "request_rate": advice.request_rate, "replicas": advice.replicas,
            "gpus_needed": advice.gpus_needed, "headroom": advice.headroom,
            "serve": _serve_line(advice, chosen.advice.served_model) if chosen is not None else None}
