"""What a benchmark measured, as `slim tune` holds it: throughput, the in-batch E2E, the SLO metrics
a run judges and its GPU time, with repeated runs of one configuration combined into one."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping

import numpy as np
import pandas as pd

from slim import columns as col
from slim.decision.candidates import GOODPUT, THROUGHPUT
from slim.specs.slo import IN_BATCH_E2E, Slos, judging_runs
from slim.tune.server_sizes import server_gpus

DEFAULT_SCATTER = 0.02
"""Run-to-run scatter (relative, one standard deviation) of a run measured once."""


@dataclass(frozen=True)
class Measurement:
    """Usable runs of one configuration: total-token throughput and in-batch E2E latency (their
    geometric mean over `runs` runs), the latency statistics they judge (`latencies_ms`, vLLM's names:
    the SLO metrics of `slim.specs.slo` the runs can judge), the goodput where measured, the
    GPU-seconds they took (`charged`: counted against the session; False for a run it was given,
    such as the reference run that sets an SLO), and one run's run-to-run scatter."""

    throughput_per_s: float
    e2e_latency_s: float
    gpu_seconds: float
    scatter: float = DEFAULT_SCATTER
    runs: int = 1
    latencies_ms: Mapping[str, float] = field(default_factory=dict)
    goodput_per_s: float = math.nan
    charged: bool = True

    @property
    def log_sd(self) -> float:
        """Standard deviation of the mean's log: one run's scatter over the root of the runs."""
        return self.scatter / float(np.sqrt(self.runs))

    @property
    def usable(self) -> bool:
        return bool(np.isfinite(self.throughput_per_s) and self.throughput_per_s > 0
                    and np.isfinite(self.e2e_latency_s) and self.e2e_latency_s > 0)

    @property
    def charged_gpu_seconds(self) -> float:
        return self.gpu_seconds if self.charged else 0.0

    def values(self) -> dict[str, float]:
        """Every quantity this measurement judges, by name (`THROUGHPUT`, the SLO metrics,
        `GOODPUT`)."""
        out = {THROUGHPUT: self.throughput_per_s, IN_BATCH_E2E: 1e3 * self.e2e_latency_s}
        out.update({name: float(value) for name, value in self.latencies_ms.items()
                    if np.isfinite(value) and value > 0})
        if np.isfinite(self.goodput_per_s) and self.goodput_per_s > 0:
            out[GOODPUT] = self.goodput_per_s
        return out

    def combined(self, other: Measurement) -> Measurement:
        """This measurement and `other` (more runs of the same configuration) as one: geometric means
        weighted by runs, of each quantity over the measurements that judge it."""
        runs = self.runs + other.runs

        def mean(a: float, b: float, wa: int, wb: int) -> float:
            if not (np.isfinite(a) and a > 0):
                return b
            if not (np.isfinite(b) and b > 0):
                return a
            return float(np.exp((wa * np.log(a) + wb * np.log(b)) / (wa + wb)))

        latencies = {name: mean(self.latencies_ms.get(name, math.nan), other.latencies_ms.get(name, math.nan),
                                self.runs, other.runs) for name in {*self.latencies_ms, *other.latencies_ms}}
        return Measurement(mean(self.throughput_per_s, other.throughput_per_s, self.runs, other.runs),
                           mean(self.e2e_latency_s, other.e2e_latency_s, self.runs, other.runs),
                           self.charged_gpu_seconds + other.charged_gpu_seconds, max(self.scatter, other.scatter), runs,
                           dict(sorted(latencies.items())),
                           mean(self.goodput_per_s, other.goodput_per_s, self.runs, other.runs),
                           charged=True)


@dataclass(frozen=True)
class Unusable:
    """A run that gave no usable result: the GPU-seconds it took all the same, and where to look."""

    gpu_seconds: float = 0.0
    hint: str = ""



def measurement_of_run(run: pd.Series, slos: Slos, charged: bool = True) -> Measurement:
    """One usable run as a measurement: its throughput and in-batch E2E, each SLO metric it judges
    (`slim.specs.slo.judging_runs`), its goodput where it kept each request's latencies, its GPU time
    (duration times its server's GPUs, ``t x d``) and its scatter (`DEFAULT_SCATTER`; a cleaned row
    that already averages repeats counts its `col.N_MEASUREMENTS`)."""
    frame = run.to_frame().T
    latencies = {metric.name: float(metric.values_ms(frame)[0]) for metric in slos.metrics
                 if not metric.in_batch and judging_runs(metric, frame)[0]}
    goodput = float(slos.goodput.of_runs(frame)[0]) if slos.goodput is not None else math.nan
    gpus = float(server_gpus(frame)[0])
    counts = run.get(col.N_MEASUREMENTS)
    return Measurement(float(run[col.TOTAL_TOKEN_THROUGHPUT]), float(run[col.E2E_LATENCY_S]),
                       float(run[col.DURATION_S]) * gpus, DEFAULT_SCATTER,
                       int(counts) if pd.notna(counts) and counts >= 1 else 1, latencies, goodput, charged)


def measurement_of_runs(runs: pd.DataFrame, slos: Slos, charged: bool = True) -> Measurement:
    """Repeated runs of one configuration as one measurement (`measurement_of_run` of each, combined),
    their scatter at least the spread of their throughputs."""
    ordered = runs.sort_values(col.RUN_ID) if col.RUN_ID in runs else runs
    measurements = [measurement_of_run(run, slos, charged) for _, run in ordered.iterrows()]
    combined = measurements[0]
    for other in measurements[1:]:
        combined = combined.combined(other)
    if len(runs) > 1:
        throughput = runs[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float)
        combined = replace(combined, scatter=max(float(np.std(throughput) / np.mean(throughput)), DEFAULT_SCATTER))
    return combined
