"""Service-level objectives as vLLM users state them: bounds on the latency statistics vLLM's
benchmarks print, under their names (``p99_tpot_ms``, ``mean_ttft_ms``, ``median_e2el_ms``,
``p90_itl_ms``; `slim.columns.latency_column`), on the paper's in-batch E2E (``mean_in_batch_e2e_ms``:
the mean time a request spends in the running batch, Little's law, Eqs. 5 and 13), and a goodput
objective in the syntax of ``vllm bench serve --goodput`` (``ttft:2000 tpot:50``: a request is good
when it meets every bound; goodput is good requests per second).

A bound is absolute (``p99_tpot_ms=50``: at most 50 ms) or relative (``p99_tpot_ms=2x``: at most
twice its value at a reference cap, measured). Several bounds all hold (`Slos`).

**What a run can judge** (`judging_runs`). TTFT and E2EL count the time a request waits for a slot:
a run that sends every request at once (``--request-rate inf`` without ``--max-concurrency``) to a
server that holds fewer measures mostly queueing (on the public H100 traces, p99 TTFT is 0.89-0.99 of
the run's duration), so only runs whose client limits its requests in flight (``--max-concurrency``,
or a finite ``--request-rate``) judge them. TPOT and ITL exclude the wait and are judged by any
online run that recorded them. An offline static batch (``vllm bench latency``) records the batch's
latency only: it judges the in-batch E2E and nothing per token. Goodput needs each request's
latencies (``--save-detailed``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import AdvisorError

IN_BATCH_E2E = "mean_in_batch_e2e_ms"
"""The paper's E2E (Eq. 5, BCA's SLO in Eq. 13): mean running batch over request throughput,
the mean time a request spends in the running batch (queueing excluded)."""
QUEUEING_QUANTITIES = ("ttft", "e2el")
PER_TOKEN_QUANTITIES = ("tpot", "itl")
GOODPUT_KEYS = ("ttft", "tpot", "e2el")
"""What vLLM's ``--goodput`` bounds: per request, its TTFT, TPOT and E2EL (ms)."""
SERVE_FOR_CAP = "vllm bench serve --max-concurrency <cap>"
_BOUND = re.compile(r"^\s*([A-Za-z0-9_.]+)\s*=\s*([0-9.eE+-]+)\s*(x?)\s*$")


@dataclass(frozen=True)
class SloMetric:
    """One latency statistic an SLO can bound: its name (a runs-table column, or `IN_BATCH_E2E`), the
    quantity (``ttft``, ``tpot``, ``itl``, ``e2el`` or ``in_batch_e2e``) and the statistic (``mean``,
    ``median``, ``p<N>``), with the percentile of a ``p<N>`` statistic."""

    name: str
    quantity: str
    statistic: str
    percentile: float | None = None

    @classmethod
    def parse(cls, name: str) -> SloMetric:
        """The metric vLLM names `name`; `AdvisorError` listing the forms otherwise."""
        name = name.strip()
        if name == IN_BATCH_E2E:
            return cls(name, "in_batch_e2e", "mean")
        parsed = col.parse_latency_column(name)
        if parsed is None:
            raise AdvisorError(f"unknown SLO metric '{name}'; name a latency statistic as vLLM prints it: "
                               "mean_, median_ or p<N>_ with ttft, tpot, itl or e2el and _ms (e.g. p99_tpot_ms, "
                               f"mean_ttft_ms, p90_e2el_ms), or {IN_BATCH_E2E} (the paper's in-batch E2E)")
        statistic, quantity, percentile = parsed
        if statistic == "std":
            raise AdvisorError(f"'{name}' is a spread, not a latency a request sees; bound its mean, median or a "
                               "percentile instead")
        if statistic == "p50":
            statistic, name = "median", col.latency_column("median", quantity)
        return cls(name, quantity, statistic, percentile)

    @property
    def in_batch(self) -> bool:
        return self.quantity == "in_batch_e2e"

    @property
    def per_token(self) -> bool:
        return self.quantity in PER_TOKEN_QUANTITIES

    @property
    def includes_queueing(self) -> bool:
        return self.quantity in QUEUEING_QUANTITIES

    def values_ms(self, runs: pd.DataFrame) -> np.ndarray:
        """The metric of every run of a runs table, ms (NaN where the run did not record it)."""
        if self.in_batch:
            return 1e3 * runs[col.E2E_LATENCY_S].to_numpy(dtype=float)
        if self.name not in runs:
            return np.full(len(runs), np.nan)
        return pd.to_numeric(runs[self.name], errors="coerce").to_numpy(dtype=float)


def flooded(runs: pd.DataFrame) -> np.ndarray:
    """Per run: every request sent at once (request rate inf or unrecorded, no client concurrency
    cap) to a server holding fewer than were sent, so that TTFT and E2EL are mostly queueing."""
    rate = runs[col.REQUEST_RATE].to_numpy(dtype=float) if col.REQUEST_RATE in runs else np.full(len(runs), np.inf)
    concurrency = (runs[col.MAX_CONCURRENCY].to_numpy(dtype=float) if col.MAX_CONCURRENCY in runs
                   else np.full(len(runs), np.nan))
    prompts = runs[col.NUM_PROMPTS].to_numpy(dtype=float)
    caps = runs[col.MAX_NUM_SEQS].to_numpy(dtype=float)
    unthrottled = ~np.isfinite(rate) & ~np.isfinite(concurrency)
    with np.errstate(invalid="ignore"):
        return unthrottled & ~(prompts <= caps)


def _static_batch(runs: pd.DataFrame) -> np.ndarray:
    if col.BENCHMARK_MODE not in runs:
        return np.zeros(len(runs), dtype=bool)
    return (runs[col.BENCHMARK_MODE] != col.BenchmarkMode.ONLINE).to_numpy()


def judging_runs(metric: SloMetric, runs: pd.DataFrame) -> np.ndarray:
    """Per run: whether it judges `metric` (module docstring)."""
    recorded = np.isfinite(metric.values_ms(runs))
    if metric.in_batch:
        return recorded
    judged = recorded & ~_static_batch(runs)
    return judged & ~flooded(runs) if metric.includes_queueing else judged


def why_not_judged(metric: SloMetric, runs: pd.DataFrame) -> str:
    """One line: why none of `runs` judges `metric`, and which benchmark would."""
    static = _static_batch(runs)
    if len(runs) and static.all():
        return (f"{metric.name} cannot be judged from offline static batches (vllm bench latency records only the "
                f"batch's latency); measure it online: {SERVE_FOR_CAP}")
    if metric.includes_queueing and len(runs) and flooded(runs[~static]).any():
        return (f"{metric.name} cannot be judged from these runs: they send every request at once (request rate inf, "
                f"no --max-concurrency) to a server holding fewer, so {metric.quantity.upper()} is mostly time "
                f"queued; measure it with the client's concurrency at the cap: {SERVE_FOR_CAP}")
    return (f"{metric.name} cannot be judged: no usable run records it; measure it with {SERVE_FOR_CAP}"
            + (" --percentile-metrics ttft,tpot,itl,e2el" + (f" --metric-percentiles {metric.percentile:g}"
                                                             if metric.percentile is not None else "")))


def _positive_bound(where: str, value: str) -> float:
    """A bound's number, finite and > 0; `AdvisorError` naming `where` otherwise."""
    try:
        number = float(value)
    except ValueError:
        raise AdvisorError(f"{where}: '{value}' is not a number") from None
    if not (math.isfinite(number) and number > 0):
        raise AdvisorError(f"{where}: the bound must be > 0")
    return number


@dataclass(frozen=True)
class SloBound:
    """``metric <= limit_ms``, or ``metric <= multiplier x`` its measured value at the reference cap."""

    metric: SloMetric
    limit_ms: float | None = None
    multiplier: float | None = None

    @classmethod
    def parse(cls, text: str) -> SloBound:
        """``NAME=VALUE`` (ms) or ``NAME=Kx`` (K times the reference cap's); `AdvisorError` otherwise."""
        match = _BOUND.match(text)
        if match is None:
            raise AdvisorError(f"--slo '{text}': expected NAME=MILLISECONDS or NAME=Kx, e.g. p99_tpot_ms=50 or "
                               "p99_tpot_ms=2x (twice its value at --slo-reference-cap)")
        name, value, relative = match.groups()
        number = _positive_bound(f"--slo '{text}'", value)
        metric = SloMetric.parse(name)
        return cls(metric, None, number) if relative else cls(metric, number, None)

    @property
    def relative(self) -> bool:
        return self.multiplier is not None

    def limit(self, reference_ms: float | None = None) -> float:
        """The bound in ms; a relative one at the reference cap's measured value (NaN without it)."""
        if self.limit_ms is not None:
            return float(self.limit_ms)
        return float(self.multiplier * reference_ms) if reference_ms is not None else math.nan

    def describe(self, reference_cap: float | None = None) -> str:
        if self.limit_ms is not None:
            return f"{self.metric.name} <= {self.limit_ms:g} ms"
        return f"{self.metric.name} <= {self.multiplier:g}x cap {reference_cap:g}'s"


@dataclass(frozen=True)
class Goodput:
    """vLLM's ``--goodput``: per-request bounds (ms) on TTFT, TPOT and E2EL, by key."""

    bounds_ms: Mapping[str, float]

    @classmethod
    def parse(cls, pairs: Iterable[str]) -> Goodput:
        """``ttft:2000 tpot:50`` (vLLM's syntax: KEY:MILLISECONDS, keys ttft, tpot, e2el)."""
        bounds: dict[str, float] = {}
        for pair in pairs:
            key, sep, value = pair.partition(":")
            if not sep or key not in GOODPUT_KEYS:
                raise AdvisorError(f"--goodput '{pair}': expected KEY:MILLISECONDS with KEY one of "
                                   f"{', '.join(GOODPUT_KEYS)}, e.g. --goodput ttft:2000 tpot:50")
            bounds[key] = _positive_bound(f"--goodput '{pair}'", value)
        if not bounds:
            raise AdvisorError("--goodput needs at least one KEY:MILLISECONDS pair")
        return cls(dict(sorted(bounds.items(), key=lambda item: GOODPUT_KEYS.index(item[0]))))

    @property
    def spec(self) -> str:
        """The bounds in vLLM's own syntax (``ttft:2000 tpot:50``)."""
        return " ".join(f"{key}:{value:g}" for key, value in self.bounds_ms.items())

    def good_fraction(self, per_request: Mapping[str, np.ndarray]) -> float:
        """The share of requests meeting every bound, from per-request latencies (ms) by key."""
        good = None
        for key, bound in self.bounds_ms.items():
            values = np.asarray(per_request[key], dtype=float)
            good = values <= bound if good is None else good & (values <= bound)
        return float(np.mean(good)) if good is not None and len(good) else math.nan

    def of_runs(self, runs: pd.DataFrame) -> np.ndarray:
        """Each run's goodput (good requests per second) from its per-request lists; NaN without them."""
        out = np.full(len(runs), np.nan)
        columns = {"ttft": col.REQUEST_TTFT_MS, "tpot": col.REQUEST_TPOT_MS, "e2el": col.REQUEST_E2EL_MS}
        if not all(columns[key] in runs for key in self.bounds_ms):
            return out
        for position, (_, run) in enumerate(runs.iterrows()):
            lists = {key: run[columns[key]] for key in self.bounds_ms}
            if any(value is None or (isinstance(value, float) and math.isnan(value)) for value in lists.values()):
                continue
            out[position] = self.good_fraction(lists) * float(run[col.COMPLETED]) / float(run[col.DURATION_S])
        return out


def why_no_goodput(runs: pd.DataFrame) -> str:
    return ("goodput cannot be judged: no usable run keeps each request's latencies; measure it with "
            f"{SERVE_FOR_CAP} --save-detailed")


@dataclass(frozen=True)
class Slos:
    """Every objective of one decision: bounds that all hold, an optional goodput objective (the cap
    of highest goodput instead of highest throughput), and the reference cap of relative bounds."""

    bounds: tuple[SloBound, ...] = ()
    goodput: Goodput | None = None
    reference_cap: float = 1.0

    def __post_init__(self) -> None:
        names = [bound.metric.name for bound in self.bounds]
        duplicated = sorted({name for name in names if names.count(name) > 1})
        if duplicated:
            raise AdvisorError(f"--slo names {', '.join(duplicated)} twice; give each metric one bound")

    @classmethod
    def of(cls, texts: Iterable[str] = (), slo_ms: float | None = None, slo_relative: float | None = None,
           goodput: Iterable[str] | None = None, reference_cap: float = 1.0) -> Slos:
        """The objectives of a command line: ``--slo`` texts, the in-batch E2E shorthands ``--slo-ms``
        and ``--slo-relative``, ``--goodput`` pairs."""
        bounds = [SloBound.parse(text) for text in texts]
        metric = SloMetric.parse(IN_BATCH_E2E)
        if slo_ms is not None:
            bounds.append(SloBound(metric, limit_ms=float(slo_ms)))
        if slo_relative is not None:
            bounds.append(SloBound(metric, multiplier=float(slo_relative)))
        objectives = cls(tuple(bounds), Goodput.parse(goodput) if goodput else None, float(reference_cap))
        if not objectives.bounds and objectives.goodput is None:
            raise AdvisorError("state an objective: --slo NAME=VALUE (e.g. p99_tpot_ms=50, repeatable), --slo-ms "
                               "(the in-batch E2E) or --goodput")
        return objectives

    @property
    def metrics(self) -> tuple[SloMetric, ...]:
        return tuple(bound.metric for bound in self.bounds)

    @property
    def relative(self) -> bool:
        return any(bound.relative for bound in self.bounds)

    def describe(self) -> str:
        parts = [bound.describe(self.reference_cap) for bound in self.bounds]
        if self.goodput is not None:
            parts.append(f"max goodput ({self.goodput.spec})")
        return ", ".join(parts)


@dataclass(frozen=True)
class Judgement:
    """Which of some runs judge each objective; `problems` says, one line each, what none judges."""

    by_metric: Mapping[str, np.ndarray]
    goodput: np.ndarray | None
    problems: tuple[str, ...] = field(default=())


def judge(slos: Slos, runs: pd.DataFrame) -> Judgement:
    """Which `runs` judge each of `slos`' metrics and the goodput objective, and one line per
    objective that none of them judges."""
    by_metric, problems = {}, []
    for metric in slos.metrics:
        mask = judging_runs(metric, runs)
        by_metric[metric.name] = mask
        if not mask.any():
            problems.append(why_not_judged(metric, runs))
    goodput = None
    if slos.goodput is not None:
        goodput = np.isfinite(slos.goodput.of_runs(runs)) & ~_static_batch(runs)
        if not goodput.any():
            problems.append(why_no_goodput(runs))
    return Judgement(by_metric, goodput, tuple(problems))
