"""The decision across parallel layouts: which (tensor-parallel size, cap) gives the most objective per
GPU, and whether that is settled, from each layout's own candidates and certificate.

A layout runs one server of ``tensor_parallel`` GPUs per replica, ``gpus`` per server in all
(tensor x pipeline x data parallel). Each layout is decided on its own candidates (Eq. 13 and its
certificate, `slim.decision.certificate.certify`); across layouts the **chosen** one is the layout
whose certified incumbent (a measured cap within every SLO) has the most objective per GPU
(total-token throughput, Eq. 6, or goodput, over ``gpus``); a tie goes to fewer GPUs. Another layout is
**excluded** when its *ceiling* per GPU, the most it could still reach (its incumbent's measured
objective, or the upper bound of any candidate its certificate does not exclude or asks to measure
again: the measured value where measured, ``Estimates.high`` elsewhere, infinite where nothing
predicts it), is at most
``(1 + tolerance)`` times the chosen one's per GPU; or when its certificate is settled with no
feasible cap. The decision is **settled** when the chosen layout's certificate is settled and every
other layout is excluded; with no layout chosen, when every layout is settled with no feasible cap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from slim.decision.candidates import DEFAULT_TOLERANCE, UNITS, CandidateView, cap_number
from slim.decision.certificate import Certificate
from slim.errors import AdvisorError
from slim.specs.data_parallel import per_rank_cap


@dataclass(frozen=True)
class Layout:
    """A parallel layout: GPUs per model replica (vLLM's ``--tensor-parallel-size``), GPUs the server
    uses in all (``tensor x pipeline x data parallel``), by which the objective is divided, its
    data-parallel size (None: ``gpus / tensor_parallel``, a server without pipeline parallelism) and
    whether a mixture-of-experts model's experts are spread whole over the server's ``t x d`` GPUs
    (vLLM's ``--enable-expert-parallel``, expert-parallel size ``t x d``) rather than each expert's
    weights split over them (vLLM's `FusedMoEParallelConfig.make` in
    ``vllm/model_executor/layers/fused_moe/config.py``)."""

    tensor_parallel: int
    gpus: int
    data_parallel: int | None = None
    expert_parallel: bool = False

    def __post_init__(self) -> None:
        # One layout, one value: a data-parallel size left out is the one it stands for.
        if self.data_parallel is None:
            object.__setattr__(self, "data_parallel", self.gpus // self.tensor_parallel)

    @classmethod
    def of_tensor_parallel(cls, tensor_parallel: int) -> Layout:
        """One replica per server: ``gpus = tensor_parallel``."""
        return cls(int(tensor_parallel), int(tensor_parallel))

    @classmethod
    def of_sizes(cls, tensor_parallel: int, data_parallel: int = 1, expert_parallel: bool = False) -> Layout:
        """A server of `data_parallel` ranks of `tensor_parallel` GPUs each: ``gpus = t x d``."""
        return cls(int(tensor_parallel), int(tensor_parallel) * int(data_parallel), int(data_parallel),
                   bool(expert_parallel))

    @property
    def ranks(self) -> int:
        """The data-parallel ranks of the server (vLLM's ``--data-parallel-size``)."""
        return int(self.data_parallel)

    @property
    def label(self) -> str:
        """``TP t``, or ``TP t x DP d`` with data parallelism; `` (EP e)`` where the experts are spread
        over the ``e = t x d`` GPUs of a replica."""
        label = f"TP {self.tensor_parallel}" + (f" x DP {self.ranks}" if self.ranks > 1 else "")
        return label + (f" (EP {self.tensor_parallel * self.ranks})" if self.expert_parallel else "")

    def per_rank_cap(self, cap: float) -> int:
        """vLLM's ``--max-num-seqs`` of a server whose runs measured `cap` requests in flight: vLLM's
        cap holds per data-parallel rank, so each rank takes ``ceil(cap / d)``
        (`slim.specs.data_parallel.per_rank_cap`)."""
        return per_rank_cap(cap, self.ranks)

    def parallel_flags(self) -> list[str]:
        """vLLM's flags of the layout: ``--tensor-parallel-size t``, with data parallelism
        ``--data-parallel-size d``, with expert parallelism ``--enable-expert-parallel``."""
        flags = ["--tensor-parallel-size", str(self.tensor_parallel)]
        flags += ["--data-parallel-size", str(self.ranks)] if self.ranks > 1 else []
        return flags + (["--enable-expert-parallel"] if self.expert_parallel else [])


@dataclass(frozen=True)
class LayoutCandidate:
    """One layout's evidence: its candidates as the decision judges them and its certificate."""

    layout: Layout
    view: CandidateView
    certificate: Certificate

    @property
    def incumbent_per_gpu(self) -> float:
        """The certified incumbent's measured objective per GPU (NaN without one)."""
        return self.certificate.objective / self.layout.gpus if self.certificate.feasible else math.nan

    @property
    def ceiling_per_gpu(self) -> float:
        """The most objective per GPU this layout could still reach (module docstring): a cap measured
        over an SLO but within the run-to-run noise of it, to be measured again
        (`slim.decision.certificate.Certificate.repeat`), counts at its measured value."""
        goal = self.view.goal
        excluded = {float(e.cap) for e in self.certificate.exclusions} - {float(c) for c in self.certificate.repeat}
        best = self.certificate.objective if self.certificate.feasible else -math.inf
        for position, cap in enumerate(self.view.caps):
            if float(cap) in excluded or (self.certificate.feasible and float(cap) == self.certificate.batch_cap):
                continue
            value = goal.value[position] if goal.measured[position] else goal.high[position]
            best = max(best, float(value) if np.isfinite(value) else math.inf)
        return best / self.layout.gpus


@dataclass(frozen=True)
class LayoutVerdict:
    """One layout in the decision across layouts: whether it is the chosen one, excluded (with why,
    in words) or still open (it could beat the chosen one, or nothing is chosen yet)."""

    layout: Layout
    batch_cap: float
    objective_per_gpu: float
    ceiling_per_gpu: float
    chosen: bool
    excluded: bool
    reason: str
    certificate_settled: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"tensor_parallel_size": self.layout.tensor_parallel, "data_parallel_size": self.layout.ranks,
                "enable_expert_parallel": self.layout.expert_parallel, "gpus": self.layout.gpus,
                "max_num_seqs": cap_number(self.batch_cap), "objective_per_gpu": _finite(self.objective_per_gpu),
                "ceiling_per_gpu": _finite(self.ceiling_per_gpu), "chosen": self.chosen, "excluded": self.excluded,
                "reason": self.reason or None}


@dataclass(frozen=True)
class LayoutDecision:
    """The decision across layouts: the chosen layout's verdict (None: none has a certified
    incumbent), whether it is settled, and every layout's verdict, ascending by GPUs."""

    chosen: LayoutVerdict | None
    settled: bool
    verdicts: tuple[LayoutVerdict, ...]
    tolerance: float

    @property
    def open_layouts(self) -> tuple[Layout, ...]:
        """The layouts that may still take runs: the chosen one while its own certificate is open,
        and every other layout not excluded."""
        return tuple(v.layout for v in self.verdicts if not v.excluded and not (v.chosen and v.certificate_settled))

    def verdict(self, layout: Layout) -> LayoutVerdict:
        return next(v for v in self.verdicts if v.layout == layout)


def _finite(value: float) -> float | None:
    return float(value) if value is not None and np.isfinite(value) else None


def _fmt(value: float) -> str:
    return "-" if not np.isfinite(value) else f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def decide_layouts(candidates: Sequence[LayoutCandidate], tolerance: float = DEFAULT_TOLERANCE) -> LayoutDecision:
    """The decision across `candidates` (module docstring). Raises `ValueError` on no layout or two
    alike."""
    if not candidates:
        raise ValueError("decide_layouts needs at least one layout")
    if len({c.layout for c in candidates}) != len(candidates):
        raise ValueError("each layout may be given once")
    ordered = sorted(candidates, key=lambda c: (c.layout.gpus, c.layout.tensor_parallel, c.layout.label))
    feasible = [c for c in ordered if c.certificate.feasible]
    # The most objective per GPU; on a tie, fewer GPUs (the order of `ordered` and `max` keeps the first).
    chosen = max(feasible, key=lambda c: c.incumbent_per_gpu, default=None)
    reference = chosen.incumbent_per_gpu * (1.0 + tolerance) if chosen is not None else math.nan
    verdicts = []
    for c in ordered:
        unit = f"{UNITS[c.view.goal_name]} per GPU"
        ceiling = c.ceiling_per_gpu
        if c is chosen:
            reason = ("chosen" if c.certificate.settled else
                      "best certified so far; its own cap decision is still open" if c.certificate.certified else
                      "best measured so far, not certified (its search stopped before its cap decision did)")
            verdicts.append(LayoutVerdict(c.layout, c.certificate.batch_cap, c.incumbent_per_gpu, ceiling, True,
                                          False, reason, c.certificate.settled))
            continue
        if c.certificate.settled and not c.certificate.feasible:
            excluded, reason = True, "no cap meets the SLOs and the efficiency floor"
        elif chosen is not None and ceiling <= reference:
            excluded = True
            basis = ("its measured choice" if c.certificate.feasible and ceiling == c.incumbent_per_gpu
                     else "at most")
            reason = (f"{basis} {_fmt(ceiling)} {unit} <= {1 + tolerance:g} x the chosen "
                      f"{chosen.layout.label}'s {_fmt(chosen.incumbent_per_gpu)}")
        else:
            excluded = False
            reason = (f"could reach {_fmt(ceiling)} {unit}" if np.isfinite(ceiling)
                      else "nothing bounds it yet") + (
                f" > {1 + tolerance:g} x the chosen {chosen.layout.label}'s measured {_fmt(chosen.incumbent_per_gpu)}"
                if chosen is not None else "")
        verdicts.append(LayoutVerdict(c.layout, c.certificate.batch_cap, c.incumbent_per_gpu, ceiling, False,
                                      excluded, reason, c.certificate.settled))
    others_excluded = all(v.excluded for v in verdicts if not v.chosen)
    if chosen is not None:
        settled = chosen.certificate.settled and others_excluded
    else:
        settled = all(c.certificate.settled and not c.certificate.feasible for c in ordered)
    chosen_verdict = next((v for v in verdicts if v.chosen), None)
    return LayoutDecision(chosen_verdict, settled, tuple(verdicts), tolerance)


@dataclass(frozen=True)
class RateDeployment:
    """The replicas a request rate needs of one layout at its chosen cap, under the stated assumption:
    independent replicas behind a load balancer, each carrying the requests per second its server
    completed in its run (its throughput at the cap over the tokens of one request)."""

    request_rate: float
    requests_per_replica: float
    replicas: int
    gpus_needed: int
    headroom: float
    """The share of `request_rate` the replicas carry beyond it."""


def requests_per_second(throughput_per_s: float, tokens_per_request: float) -> float:
    """The requests per second a server completes at `throughput_per_s` tokens/s, each request
    `tokens_per_request` tokens (prompt and output, as vLLM's ``total_token_throughput`` counts them)."""
    return float(throughput_per_s) / float(tokens_per_request)


def rate_deployment(request_rate: float, throughput_per_s: float, tokens_per_request: float,
                    gpus_per_replica: int) -> RateDeployment:
    """`RateDeployment` of a layout whose server runs `throughput_per_s` tokens/s at its cap:
    ``ceil(rate / requests per replica)`` replicas (`requests_per_second`), at least one. Raises
    `AdvisorError` where that throughput is not a positive number (no replica count follows)."""
    if not (math.isfinite(throughput_per_s) and throughput_per_s > 0):
        raise AdvisorError(f"the chosen cap's throughput ({throughput_per_s:g} tokens/s) sizes no deployment for "
                           f"--request-rate {request_rate:g}")
    per_replica = requests_per_second(throughput_per_s, tokens_per_request)
    replicas = max(math.ceil(request_rate / per_replica - 1e-12), 1)
    return RateDeployment(request_rate, per_replica, replicas, replicas * gpus_per_replica,
                          replicas * per_replica / request_rate - 1.0)


def gpu_count(gpus: int) -> str:
    """``1 GPU``, ``8 GPUs``."""
    return f"{gpus} GPU" + ("" if gpus == 1 else "s")
