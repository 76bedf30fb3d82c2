"""`slim tune` replayed on measured curves: one tuning session over some curves, an oracle revealing
each recorded run it asks for through the replay's noise, and what it chose, spent and believed.

**The oracle.** When the loop asks for a (curve, cap) that was measured, it reveals that run, and the
run's recorded duration (an offline row's batch latency) times its GPUs is the GPU time charged. A
run the bound gave a time limit (`slim.tune.guard`) is stopped there when it would take longer:
charged the limit, nothing measured. The reference run that sets a relative SLO is recorded free
before the loop starts, as a user who set the SLO from it has it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd

from slim import columns as col
from slim.decision.candidates import THROUGHPUT
from slim.model.equations import ArchitectureLookup
from slim.paper.replay.curves import DEFAULT_NOISE_SD, ReplayCurve, RunNoise
from slim.paper.replay.priors import ReplayPrior
from slim.paper.replay.scoring import ReplayRun, replay_row
from slim.specs.hardware import Hardware
from slim.specs.slo import IN_BATCH_E2E, SloBound, SloMetric, Slos
from slim.tune.belief import CONFIG_COLUMNS, roofline_gpu_seconds
from slim.tune.loop import run_loop
from slim.tune.measurement import Measurement, Unusable
from slim.tune.proposals import Proposal
from slim.tune.session import TuneSession, TuneSettings
from slim.tune.workload import WORKLOAD, Workload

NEXT_RUN, RELIED_ON = "next_run", "relied_on"
"""Which intervals a coverage row scores: those the loop held for each run just before measuring
it, or the final ones at the unmeasured caps the certificate relies on."""


def candidates_of(curves: list[ReplayCurve]) -> pd.DataFrame:
    """Every (curve, cap) as a tuning candidate: the runs' configuration columns (and the client's
    concurrency cap, which SIM's latencies read, and the data-parallel size where recorded)."""
    frames = []
    for curve in curves:
        rows = curve.rows[list(CONFIG_COLUMNS)].copy()
        rows[col.MAX_CONCURRENCY] = (curve.rows[col.MAX_CONCURRENCY].to_numpy(dtype=float)
                                     if col.MAX_CONCURRENCY in curve.rows else np.nan)
        if col.DATA_PARALLEL in curve.rows:      # a layout's data-parallel size, where the runs record one
            rows[col.DATA_PARALLEL] = curve.rows[col.DATA_PARALLEL].to_numpy(dtype=float)
        rows[WORKLOAD] = curve.label
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def _measurement(values: dict[str, float], gpu_seconds: float, scatter: float, charged: bool = True) -> Measurement:
    """A revealed run (`observed`) as the session's measurement."""
    latencies = {name: value for name, value in values.items() if name not in (THROUGHPUT, IN_BATCH_E2E)}
    return Measurement(values[THROUGHPUT], values[IN_BATCH_E2E] / 1e3, gpu_seconds, scatter, latencies_ms=latencies,
                       charged=charged)


def oracle(curves: list[ReplayCurve], noise: RunNoise = RunNoise(), scatter: float = DEFAULT_NOISE_SD,
           labels: list[str] | None = None) -> Callable[[Proposal], Measurement | Unusable | None]:
    """Reveals a recorded run (through the noise; a repeated cap's further runs are new draws) when
    the loop asks for it; the charge is its recorded GPU time, or the proposal's limit where the run
    would take longer (stopped there, nothing measured). Each measurement carries `scatter`, the
    run-to-run scatter a user states. `labels`: the workload each curve is asked for by (default
    its own label; a layout's where the session decides across layouts)."""
    by_label = dict(zip(labels if labels is not None else [curve.label for curve in curves], curves))
    asked: dict[tuple[str, float], int] = {}

    def measure(proposal: Proposal) -> Measurement | Unusable | None:
        curve = by_label[proposal.workload]
        if not (curve.caps == proposal.max_num_seqs).any():
            return None
        seconds = curve.run_gpu_seconds(proposal.max_num_seqs)
        if proposal.limit_gpu_seconds is not None and seconds > proposal.limit_gpu_seconds:
            return Unusable(proposal.limit_gpu_seconds, "stopped at the bound's limit")
        key = (proposal.workload, proposal.max_num_seqs)
        repeat = asked.get(key, 1 if proposal.max_num_seqs == curve.reference_cap else 0)
        asked[key] = repeat + 1
        return _measurement(observed(curve, proposal.max_num_seqs, noise, repeat), seconds, scatter)

    return measure


def observed(curve: ReplayCurve, cap: float, noise: RunNoise, repeat: int = 0) -> dict[str, float]:
    """What a run reveals: the kind's metrics and the in-batch E2E (the belief always learns it), through
    the noise."""
    values = noise.observe(curve, cap, repeat)
    if IN_BATCH_E2E not in values:
        values[IN_BATCH_E2E] = 1e3 * curve.recorded(cap, col.E2E_LATENCY_S) / noise.factor(curve, cap, repeat)
    return values


@dataclass(frozen=True)
class TuneReplay:
    rows: list[dict[str, Any]]
    coverage: list[dict[str, Any]]      # one record per interval scored: intervals, quantity, inside, width_pct
    stopped: str
    open_curves: list[str]      # decisions the loop left unsettled (their cap: the best measured one)


def _relied_on_coverage(session: TuneSession, curves: list[ReplayCurve]) -> list[dict[str, Any]]:
    """The final intervals at the unmeasured caps each certificate excludes by a bound, scored
    against the recorded run: throughput and every SLO metric with a prediction."""
    records, b = [], session.belief
    for workload, curve in zip(session.workloads, curves):
        certificate = session.certificate(workload)
        for exclusion in certificate.exclusions:
            if not exclusion.by_bound:
                continue
            rows = session.candidates.index[(session.candidates[WORKLOAD] == workload.label)
                                            & (session.candidates[col.MAX_NUM_SEQS] == exclusion.cap)]
            i = int(rows[0])
            truth = curve.recorded_values(exclusion.cap)
            for quantity in (THROUGHPUT, *curve.limits_ms):
                q = b[quantity]
                if not np.isfinite(q.mean[i]):
                    continue
                records.append({"intervals": RELIED_ON, "quantity": quantity,
                                "inside": bool(q.low[i] <= truth[quantity] <= q.high[i]),
                                "width_pct": 100.0 * (q.high[i] / q.low[i] - 1.0)})
    return records


def curve_workload(curve: ReplayCurve, epsilon: float, tensor_parallel: int | None = None,
                   data_parallel: int = 1) -> Workload:
    """The decision `slim tune` makes on a replayed curve: its SLOs as resolved bounds, its reference
    cap known to meet them, and (across layouts) its tensor- and data-parallel sizes."""
    slos = Slos(tuple(SloBound(SloMetric.parse(name), limit_ms=limit) for name, limit in curve.limits_ms.items()))
    return Workload(curve.curve.model, curve.curve.input_len_nominal, curve.curve.output_len_nominal, slos, epsilon,
                    curve.reference_cap, tensor_parallel=tensor_parallel, data_parallel=data_parallel)


def replay_tune(curves: list[ReplayCurve], prior: ReplayPrior, run: ReplayRun, epsilon: float,
                settings: TuneSettings, full_caps: dict[str, float], binds: dict[str, bool],
                architectures: ArchitectureLookup, hw: Hardware, scatter: float = DEFAULT_NOISE_SD) -> TuneReplay:
    """One tuning session over `curves` (each reference run recorded free first), the oracle
    measuring through `run.noise`, the bound's roofline on the accelerator's catalog entry `hw`; its
    per-curve rows and the intervals it held, scored."""
    candidates = candidates_of(curves)
    workloads = [curve_workload(c, epsilon) for c in curves]
    metrics = tuple({m.name: m for c in curves for m in c.metrics}.values())
    session = TuneSession(workloads, candidates, prior.predict(candidates, metrics), settings,
                          run_floor_gpu_seconds=roofline_gpu_seconds(candidates, architectures, hw))
    measure = oracle(curves, run.noise, scatter)
    for curve in curves:
        if curve.reference_cap is None:
            continue
        reference = int(candidates.index[(candidates[WORKLOAD] == curve.label)
                                         & (candidates[col.MAX_NUM_SEQS] == curve.reference_cap)][0])
        session.record(reference, _measurement(observed(curve, curve.reference_cap, run.noise),
                                               curve.run_gpu_seconds(curve.reference_cap), scatter, charged=False))
    outcome = run_loop(session, measure)
    measured_caps: dict[str, list[float]] = {c.label: ([c.reference_cap] if c.reference_cap is not None else [])
                                             for c in curves}
    charged: dict[str, float] = {c.label: 0.0 for c in curves}
    for step in outcome.steps:
        measured_caps[step.workload].append(step.max_num_seqs)
        charged[step.workload] += step.gpu_seconds
    rows = [replay_row(c, run, measured_caps[c.label], outcome.certificates[c.label].batch_cap, full_caps[c.label],
                       binds[c.label], charged[c.label]) for c in curves]
    coverage = []
    for step in outcome.steps:
        for quantity, inside in ((THROUGHPUT, step.throughput_inside_interval),
                                 (IN_BATCH_E2E, step.e2e_inside_interval)):
            if inside is not None:
                coverage.append({"intervals": NEXT_RUN, "quantity": quantity, "inside": inside,
                                 "width_pct": float("nan")})
    coverage += _relied_on_coverage(session, curves)
    open_curves = [label for label, certificate in outcome.certificates.items() if not certificate.settled]
    return TuneReplay(rows, coverage, outcome.stopped, open_curves)
