"""The layout as the decision: which tensor-parallel size (and data-parallel size, where the runs
hold several), with which cap, gives the most tokens per second per GPU under the SLOs, whether that
choice is settled, and the deployment it makes of the GPUs available or of a target load.

A layout is a server's tensor-parallel size ``t`` and data-parallel size ``d``: each ``t`` of
`--tensor-parallel-sizes` at every ``d`` the workload's runs at ``t`` hold (``d = 1`` where none
does), advised on its own runs (`slim.advisor.advise.advise` with ``tensor_parallel = t`` and
``data_parallel = d``: Eq. 13 over its caps, its memory plan per rank, its certificate; the
predictor's fit uses every run at ``t``). Per GPU means over the GPUs one server occupies (its runs'
``gpus_per_server``, ``t x pipeline x d``; ``t x d`` where none measured it).

**The choice** is the decision across layouts (`slim.decision.layouts.decide_layouts`, at the
request's tolerance) on each layout's candidates and certificate: the layout whose cap measured
within every SLO gives the most tokens/s per GPU; a tie goes to fewer GPUs. Only where no layout has
such a cap does the choice rest on predictions: the layout whose advised cap (Eq. 13 on measurements
and predictions) gives the most tokens/s per GPU. The chosen layout is deployed at its advised cap.

**Settled** means the decision across layouts is: the chosen cap was measured within every SLO and
its own certificate is settled, and every other layout is *excluded*: its measured choice, or the most
any of its caps not ruled out could reach (an unmeasured cap at its predicted throughput), is within
``(1 + tolerance)`` of the choice per GPU; or no cap of it meets the SLOs and the efficiency floor.
A layout not excluded is *open*, with the run that would settle it (`next_cap`). A layout above
`gpus` (``t x d``, or its runs' ``gpus_per_server`` where larger), or where one sequence does not fit
its KV cache, is excluded with its reason; one the runs
cannot judge (no usable run at its size) is open.

The deployment is ``gpus // (t x d)`` independent replicas of ``vllm serve MODEL --tensor-parallel-size t
[--data-parallel-size d] --max-num-seqs B``, where with ``d > 1`` the cap is each rank's, ``B / d``
of the ``B`` requests in flight the server's runs measured; with a `request_rate`, the replicas
needed assume a load balancer spreading requests evenly over independent replicas, each carrying the
requests per second its chosen cap serves (throughput over ``IL + OL`` tokens per request), and the
headroom is what they carry beyond the rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Sequence

import numpy as np

from slim.advisor.advise import Advice, MeasuredLayout, advise, workload_layouts
from slim.advisor.candidates import CandidateRow, advice_certificate, advice_limits, advice_view
from slim.advisor.request import AdviceRequest
from slim.advisor.warnings import AdviceWarning
from slim.decision.candidates import DEFAULT_TOLERANCE
from slim.decision.layouts import (
    Layout,
    LayoutCandidate,
    LayoutDecision,
    RateDeployment,
    decide_layouts,
    rate_deployment,
    requests_per_second,
)
from slim.errors import AdvisorError, NoFeasibleCapError, UnjudgedSloError

CHOSEN, EXCLUDED, OPEN = "chosen", "excluded", "open"
"""A layout's status in the decision across layouts."""
PREDICTED_CHOICE = "on predictions: no layout has a cap measured within every SLO yet"
"""Why the chosen layout is chosen where no layout has a certified cap to choose by."""


LAYOUT_COMPARISON_WARNINGS = frozenset({"other_tensor_parallel_left_out", "other_data_parallel_left_out"})
"""Advice warnings that comparing layouts raises by construction: each layout is advised on its own runs."""


@dataclass(frozen=True)
class LayoutOutcome:
    """One layout, tensor-parallel x data-parallel size: its advice, or why it has none (`reason`);
    its evidence in the decision across layouts (`candidate`: None where the decision cannot judge
    it), its `status` there (`CHOSEN`, `EXCLUDED`, `OPEN`; None where nothing decided), the
    decision's words on it (`verdict`) and the cap whose run would settle it (`next_cap`)."""

    tensor_parallel: int
    advice: Advice | None
    reason: str | None = None
    data_parallel: int = 1
    candidate: LayoutCandidate | None = None
    status: str | None = None
    verdict: str | None = None
    next_cap: float | None = None
    server_gpus: int | None = None
    expert_parallel: bool = False
    """Whether its runs spread the experts (``--enable-expert-parallel``)."""

    @property
    def name(self) -> str:
        """``TP t``, or ``TP t x DP d`` with data parallelism, `` (EP e)`` with expert parallelism
        (`Layout.label`)."""
        return Layout.of_sizes(self.tensor_parallel, self.data_parallel, self.expert_parallel).label

    @property
    def next_run_repeats(self) -> bool:
        """Whether `next_cap` was measured already: its run-to-run noise leaves its side of an SLO open
        (`slim.decision.certificate.Certificate.repeat`), so it is to be run again."""
        return (self.next_cap is not None and self.candidate is not None
                and self.next_cap in self.candidate.certificate.repeat)

    @property
    def gpus_per_replica(self) -> int:
        """The GPUs one server of the layout occupies: its runs' ``gpus_per_server``, else ``t x d``."""
        if self.advice is not None:
            return int(self.advice.gpus_per_server)
        return self.server_gpus or self.tensor_parallel * self.data_parallel

    @property
    def warnings(self) -> tuple[AdviceWarning, ...]:
        """Its advice's warnings but those the comparison makes by construction (runs at the other
        layouts left out of each layout's advice)."""
        if self.advice is None:
            return ()
        return tuple(w for w in self.advice.warnings if w.code not in LAYOUT_COMPARISON_WARNINGS)

    @property
    def throughput_per_gpu(self) -> float:
        """The chosen cap's tokens/s per GPU (NaN without advice)."""
        if self.advice is None:
            return math.nan
        return float(self.advice.recommendation.throughput_per_s) / self.gpus_per_replica


@dataclass(frozen=True)
class LayoutAdvice:
    """Every layout's outcome, the chosen one (None: no layout meets the SLOs), the deployment, and
    whether the decision across layouts is `settled` (`decision`: None where no layout was judged)."""

    outcomes: tuple[LayoutOutcome, ...]
    chosen: LayoutOutcome | None
    gpus: int | None
    request_rate: float | None
    tokens_per_request: float
    settled: bool = False
    tolerance: float = DEFAULT_TOLERANCE
    decision: LayoutDecision | None = None

    @cached_property
    def for_rate(self) -> RateDeployment | None:
        """With a request rate and a chosen layout: the replicas it needs (`rate_deployment`)."""
        if self.request_rate is None or self.chosen is None:
            return None
        return rate_deployment(self.request_rate, float(self.chosen.advice.recommendation.throughput_per_s),
                               self.tokens_per_request, self.chosen.gpus_per_replica)

    @property
    def replicas(self) -> int | None:
        """Replicas of the chosen layout: on `gpus`, else for `request_rate` (None without either)."""
        if self.chosen is None:
            return None
        if self.for_rate is not None:
            return self.for_rate.replicas
        return self.gpus // self.chosen.gpus_per_replica if self.gpus is not None else None

    @property
    def requests_per_replica(self) -> float:
        """Requests per second one replica of the chosen layout serves at its cap."""
        return requests_per_second(self.chosen.advice.recommendation.throughput_per_s, self.tokens_per_request)

    @property
    def gpus_needed(self) -> int | None:
        return None if self.replicas is None else self.replicas * self.chosen.gpus_per_replica

    @property
    def headroom(self) -> float | None:
        """With a request rate: the share of it the replicas carry beyond it."""
        return self.for_rate.headroom if self.for_rate is not None else None


def next_cap(candidate: LayoutCandidate) -> float | None:
    """The cap whose run would settle an open layout: of its certificate's challengers, the one whose
    throughput could reach furthest (its measurement, else its predicted upper bound; one nothing
    bounds first, then the smaller cap); else a measured cap to repeat; else the smallest cap, where
    the efficiency floor waits for ``T(1)``. None where nothing is left to run."""
    certificate, goal, caps = candidate.certificate, candidate.view.goal, [float(c) for c in candidate.view.caps]

    def reach(cap: float) -> float:
        position = caps.index(cap)
        value = goal.value[position] if goal.measured[position] else goal.high[position]
        return float(value) if np.isfinite(value) else math.inf

    if certificate.challengers:
        return max(certificate.challengers, key=lambda cap: (reach(cap), -cap))
    if certificate.repeat:
        return float(certificate.repeat[0])
    return caps[0] if certificate.needs_throughput_at_one else None


def _infeasible_candidate(request: AdviceRequest, rows: Sequence[CandidateRow], layout: Layout) -> LayoutCandidate:
    """The evidence of a layout none of whose caps meets the SLOs on its measurements and predictions:
    the same view and certificate `advise` builds, which say whether that is settled."""
    view = advice_view(rows, request.slos, advice_limits(request.slos, rows).limits_ms)
    return LayoutCandidate(layout, view, advice_certificate(view, request.epsilon, request.tolerance))


def _advise_layout(request: AdviceRequest, size: int, data_parallel: int, gpus: int | None,
                   measured: MeasuredLayout | None = None) -> LayoutOutcome:
    """One layout advised on its own runs, with its evidence for the decision across layouts; `measured`
    is what its runs say of its server (None: no run measured it, a server of ``t x d`` GPUs)."""
    server_gpus = measured.server_gpus if measured is not None else None
    expert_parallel = measured is not None and measured.expert_parallel
    needed = server_gpus or size * data_parallel
    if gpus is not None and needed > gpus:
        reason = (f"its runs' server uses {needed} GPUs" if needed > size * data_parallel else f"needs {needed} GPUs")
        return LayoutOutcome(size, None, f"{reason}, {gpus} available", data_parallel, status=EXCLUDED,
                             server_gpus=server_gpus, expert_parallel=expert_parallel)
    at_layout = replace(request, tensor_parallel=size, data_parallel=data_parallel, plan=False)
    try:
        advice = advise(at_layout)
    except NoFeasibleCapError as error:
        reason = " ".join(str(error).split())
        if not error.decision:      # one sequence does not fit the KV cache: no cap can run
            return LayoutOutcome(size, None, reason, data_parallel, status=EXCLUDED, expert_parallel=expert_parallel)
        layout = Layout(size, server_gpus or size * data_parallel, data_parallel, expert_parallel)
        candidate = _infeasible_candidate(at_layout, error.decision, layout)
        return LayoutOutcome(size, None, reason, data_parallel, candidate, server_gpus=server_gpus,
                             expert_parallel=expert_parallel)
    except UnjudgedSloError:
        raise
    except AdvisorError as error:   # the runs cannot judge it: it could still win
        return LayoutOutcome(size, None, " ".join(str(error).split()), data_parallel, status=OPEN,
                             expert_parallel=expert_parallel)
    if gpus is not None and advice.gpus_per_server > gpus:    # pipeline parallel: more than t x d per server
        return LayoutOutcome(size, None, f"its runs' server uses {advice.gpus_per_server} GPUs, {gpus} available",
                             data_parallel, status=EXCLUDED, expert_parallel=advice.expert_parallel)
    layout = Layout(size, int(advice.gpus_per_server), data_parallel, advice.expert_parallel)
    candidate = LayoutCandidate(layout, advice.view, advice.certificate)
    return LayoutOutcome(size, advice, None, data_parallel, candidate, expert_parallel=advice.expert_parallel)


def _judged(outcome: LayoutOutcome, decision: LayoutDecision, chosen: LayoutOutcome | None) -> LayoutOutcome:
    """`outcome` with its status, the decision's words on it and its next run."""
    if outcome.candidate is None:
        return outcome
    verdict = decision.verdict(outcome.candidate.layout)
    if outcome is chosen:
        status, words = CHOSEN, verdict.reason if verdict.chosen else PREDICTED_CHOICE
        settled_itself = verdict.chosen and verdict.certificate_settled
    else:
        status, words = (EXCLUDED if verdict.excluded else OPEN), verdict.reason
        settled_itself = verdict.excluded
    return replace(outcome, status=status, verdict=words,
                   next_cap=None if settled_itself else next_cap(outcome.candidate))


def advise_layouts(request: AdviceRequest, tensor_parallel_sizes: tuple[int, ...], gpus: int | None = None,
                   request_rate: float | None = None) -> LayoutAdvice:
    """Advise each layout on its own runs, choose across them and say whether that is settled (module
    docstring). Raises `AdvisorError` on no sizes, or a non-positive `gpus` or `request_rate`, and
    what reading the traces raises (`workload_layouts`); `UnjudgedSloError` where no layout's runs can
    judge an SLO metric and none was advised (as `advise` raises it for one layout)."""
    if not tensor_parallel_sizes:
        raise AdvisorError("give the tensor-parallel sizes to compare (--tensor-parallel-sizes 1,2,4,8)")
    if gpus is not None and gpus < 1:
        raise AdvisorError(f"--gpus must be a positive count, got {gpus}")
    if request_rate is not None and not request_rate > 0:
        raise AdvisorError(f"--request-rate must be positive requests per second, got {request_rate}")
    measured_layouts = workload_layouts(request)
    outcomes, unjudged = [], []
    for size in sorted(set(tensor_parallel_sizes)):
        for data_parallel in sorted({d for t, d in measured_layouts if t == size}) or [1]:
            measured = measured_layouts.get((size, data_parallel))
            try:
                outcomes.append(_advise_layout(request, size, data_parallel, gpus, measured))
            except UnjudgedSloError as error:     # its runs do not record an SLO metric: open
                unjudged.append(error)
                outcomes.append(LayoutOutcome(size, None, " ".join(str(error).split()), data_parallel, status=OPEN,
                                              expert_parallel=measured is not None and measured.expert_parallel))
    if unjudged and all(outcome.advice is None for outcome in outcomes):
        raise unjudged[0]      # no layout's runs can judge the SLOs: bad input, as for one layout
    tokens_per_request = float(request.input_len) + float(request.output_len)
    judged = [outcome.candidate for outcome in outcomes if outcome.candidate is not None]
    if not judged:   # settled only where no layout can run at all
        return LayoutAdvice(tuple(outcomes), None, gpus, request_rate, tokens_per_request,
                            all(outcome.status == EXCLUDED for outcome in outcomes), request.tolerance)
    decision = decide_layouts(judged, request.tolerance)
    certified = decision.chosen.layout if decision.chosen is not None else None
    chosen = next((o for o in outcomes if o.advice is not None and o.candidate.layout == certified), None)
    if chosen is None:
        # No layout measured a cap within every SLO: the most predicted tokens per GPU, fewer GPUs on a tie.
        advised = [outcome for outcome in outcomes if outcome.advice is not None]
        chosen = max(advised, key=lambda o: (o.throughput_per_gpu, -o.gpus_per_replica, -o.tensor_parallel),
                     default=None)
    outcomes = [_judged(outcome, decision, chosen) for outcome in outcomes]
    chosen = next((outcome for outcome in outcomes if outcome.status == CHOSEN), None)
    settled = (decision.settled and all(outcome.status != OPEN for outcome in outcomes)
               and (chosen.candidate.layout if chosen is not None else None) == certified)
    return LayoutAdvice(tuple(outcomes), chosen, gpus, request_rate, tokens_per_request, settled,
                        request.tolerance, decision)
