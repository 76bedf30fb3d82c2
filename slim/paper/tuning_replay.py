"""Replay of the tuning loop on a dataset's measured curves: how much GPU time each way of choosing
``--max-num-seqs`` spends, and how much throughput its choice gives up against full profiling, for
each kind of SLO a user states (`SloKind`) and each prior (the honest one, and deliberately wrong
ones).

**The oracle.** An oracle stands in for the GPU: when a policy asks for a (curve, cap) that was
measured, it reveals that run, and the run's recorded duration (an offline row's batch latency)
times its GPUs is the GPU time charged. A run the bound gave a time limit (`slim.tune.guard`) is
stopped there when it would take longer: charged the limit, nothing measured.

**The SLOs** (`SloKind`). The in-batch E2E of the dataset's BCA config (``strict_multiplier x`` its
value at the reference cap: `e2e_kind`), and the kinds of ``tuning.slo_kinds`` (vLLM's metrics:
``p99_tpot_ms=2x``, ``p99_tpot_ms=25``, ``p99_itl_ms=2x``, alone or with the E2E), replayed on a
dataset whose runs judge every metric they name (`slim.specs.slo.judging_runs`; else one line
says why not). A relative bound is resolved on the recorded reference run; **the reference run
that sets a relative SLO is free for every policy, full profiling included, and its measurement
is known to every policy from the start** (the user ran it to set the SLO); every other run is
charged, ``T(1)`` included where the reference is not cap 1. Absolute bounds have no reference run:
nothing is free.

**Noise.** A replay is noise-free (``noise`` 0, ``seed`` 0: the recorded values, exactly) or noisy:
each revealed run is the recorded one times ``exp(sd z)`` in throughput and divided by it in every
latency statistic (one draw per run: a slower run is slower in all of them), ``z`` standard normal
from a generator seeded by ``(seed, curve, cap)``, so every policy of one seed sees the same runs
(`RunNoise`). ``sd`` is the dataset's own repeat scatter (`repeat_scatter`), or 2 % where it has no
repeated runs. Regret and SLO violations are always scored on the recorded (noise-free) curve.

**The policies** (`POLICIES`), each choosing by Eq. 13 (`slim.advisor.decision.recommend`) among what
it measured:

* ``full_profile``: every cap of the curve;
* ``paper_plan``: the paper's fixed plan, SLIM-BCA (SLIM fitted on the union of the training
  runs of the dataset's applicable held-out settings, as Table VI counts them) on every curve,
  charged for the training runs of each curve; noise-free, in-batch E2E only;
* the model-free searches (`MODEL_FREE_POLICIES`), a cap within the SLOs meaning within every one:
  ``descend`` (from the largest cap down until a cap meets the SLOs and the efficiency floor),
  ``bisect`` (binary search for the largest cap within the SLOs, latency assumed to grow with the
  cap; the bound's yardstick) and ``doubling`` (from the reference cap, the next candidate at or above
  twice the last, until the measured throughput gains less than epsilon or an SLO breaks);
* ``tune_slim`` / ``tune_sim``: `slim.tune` with the SLIM or the SIM prior until every decision is
  settled or stopped at the bound, in one of two `SESSIONS`: ``per_workload`` (one session per
  curve, as a user tuning one model, IL and OL from scratch: the headline) or ``per_dataset`` (one
  session over every curve of the dataset, each measurement informing the others; in-batch E2E,
  honest prior only).

**Priors.** A curve is never replayed with a prior fitted on its model's runs of the dataset
(`slim.paper.tuning_priors`), nor with a residual kernel fitted on the dataset
(`ReplayOptions.kernels`, chosen on the other datasets' `replay_residuals`): the ``prior`` column
reads `OUT_OF_SAMPLE`. The adversarial priors (`slim.paper.tuning_priors.adversarial_priors`:
SIM's bandwidth and compute scaled by 0.5 and 2, SIM biased across caps) replay ``tune_sim`` one
session per workload: the bound must hold under each. The summary, the goals and their Markdown
are `slim.paper.tuning_summary`.

``regret_pct`` is ``100 (1 - T_rec(chosen) / T_rec(full_profile_cap))``; ``slo_violated`` whether
the chosen cap's recorded metrics break an SLO; ``floor_gpu_seconds`` the GPU time of measuring
only full profiling's chosen cap (no policy that must measure its choice can spend less).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from scipy import integrate
from scipy.stats import norm

from slim import columns as col
from slim.advisor.decision import CandidateView, Constraint, Estimates, recommend
from slim.advisor.measured import MeasuredCurve, curve_from_rows
from slim.advisor.predictor_bca import Target, predicted_bca
from slim.errors import FitError, SplitError
from slim.model.equations import ArchitectureLookup
from slim.paper.splits import HeldOutSetting, select_rows
from slim.paper.tuning_priors import TUNE_POLICIES, ReplayPrior, predictor_of
from slim.predictors import SLIM, TrainingRuns, registered
from slim.specs.hardware import Hardware
from slim.specs.slo import IN_BATCH_E2E, SloBound, SloMetric, Slos, judging_runs
from slim.tune.belief import CONFIG_COLUMNS, THROUGHPUT, roofline_gpu_seconds
from slim.tune.kernel import RESIDUAL_COLUMNS, FittedKernels, residual_table
from slim.tune.session import (
    WORKLOAD,
    Measurement,
    Proposal,
    TuneSession,
    TuneSettings,
    Unusable,
    Workload,
    curve_label,
    run_loop,
)

MODEL_FREE_POLICIES = ("descend", "bisect", "doubling")
POLICIES = ("full_profile", "paper_plan", *MODEL_FREE_POLICIES, *TUNE_POLICIES)
PER_WORKLOAD, PER_DATASET = "per_workload", "per_dataset"
SESSIONS = (PER_WORKLOAD, PER_DATASET)
E2E_KIND = "in_batch_e2e"
OUT_OF_SAMPLE = "out_of_sample"
"""The ``prior`` of a replay with the honest prior (out of sample); adversarial ones carry their name."""
REPLAY_COLUMNS = ("slo_kind", "prior", "curve", "policy", "session", "seed", "noise", "runs", "gpu_seconds",
                  "full_profile_gpu_seconds", "floor_gpu_seconds", "chosen_cap", "full_profile_cap", "regret_pct",
                  "slo_violated", "slo_binds")
CALIBRATION_COLUMNS = ("slo_kind", "prior", "policy", "session", "noisy", "intervals", "quantity", "n_predicted",
                       "coverage_pct", "mean_width_pct", "confidence_pct")
NEXT_RUN, RELIED_ON = "next_run", "relied_on"
"""Which intervals a coverage row scores: those the loop held for each run just before measuring
it, or the final ones at the unmeasured caps the certificate relies on."""
DEFAULT_NOISE_SD = 0.02
DEFAULT_SEEDS = 5


# --- the SLOs -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SloKind:
    """A kind of SLO the replay states on every curve: its name and its bounds as ``--slo`` texts
    (`slim.specs.slo.SloBound.parse`), relative ones against the curve's reference cap."""

    name: str
    bounds: tuple[str, ...]

    @property
    def parsed(self) -> tuple[SloBound, ...]:
        return tuple(SloBound.parse(text) for text in self.bounds)

    @property
    def metrics(self) -> tuple[SloMetric, ...]:
        return tuple(bound.metric for bound in self.parsed)

    @property
    def relative(self) -> bool:
        return any(bound.relative for bound in self.parsed)

    def describe(self) -> str:
        return ", ".join(self.bounds)


def e2e_kind(strict_multiplier: float) -> SloKind:
    """The in-batch E2E SLO of a BCA config: ``strict_multiplier x`` its value at the reference cap."""
    return SloKind(E2E_KIND, (f"{IN_BATCH_E2E}={strict_multiplier:g}x",))


def why_kind_not_replayed(kind: SloKind, frame: pd.DataFrame) -> str | None:
    """One line where the dataset's runs do not judge a metric the kind names (None: they do)."""
    for metric in kind.metrics:
        if not judging_runs(metric, frame).any():
            return (f"SLO kind {kind.name} ({kind.describe()}): not replayed: no run of this dataset judges "
                    f"{metric.name}")
    return None


# --- the curves and their noise --------------------------------------------------------------

@dataclass(frozen=True)
class ReplayCurve:
    """A measured curve with its runs (one per cap, ascending), its SLOs resolved on its recorded runs
    (`limits_ms`, by metric), and the reference cap that set its relative SLOs (free and known to every
    policy; None where every bound is absolute: nothing is free)."""

    curve: MeasuredCurve
    rows: pd.DataFrame
    limits_ms: dict[str, float]
    reference_cap: float | None
    index: int          # position among the dataset's curves: seeds the curve's noise
    metrics: tuple[SloMetric, ...] = ()

    @property
    def label(self) -> str:
        return self.curve.label

    @property
    def caps(self) -> np.ndarray:
        return self.curve.max_num_seqs

    @property
    def slo_s(self) -> float:
        """The in-batch E2E bound in seconds (NaN where the kind has none)."""
        return self.limits_ms.get(IN_BATCH_E2E, float("nan")) / 1e3

    def charged(self, caps) -> list[float]:
        """The runs of `caps` (repeats included) that are charged: all but the reference's first."""
        charged = list(caps)
        if self.reference_cap is not None and self.reference_cap in charged:
            charged.remove(self.reference_cap)
        return charged

    @cached_property
    def _by_cap(self) -> dict[float, dict[str, float]]:
        """Each recorded run's numbers by cap (read once: the replay asks for them thousands of times)."""
        columns = [name for name in self.rows.columns if pd.api.types.is_numeric_dtype(self.rows[name])]
        by_cap = {}
        for _, row in self.rows.iterrows():
            values = {name: float(row[name]) for name in columns}
            frame = row.to_frame().T
            values.update({f"slo:{metric.name}": float(metric.values_ms(frame)[0]) for metric in self.metrics})
            by_cap[float(row[col.MAX_NUM_SEQS])] = values
        return by_cap

    def run_gpu_seconds(self, cap: float) -> float:
        """One run's recorded GPU time at `cap`: its duration times its GPUs."""
        return self.recorded(cap, col.DURATION_S) * float(np.nan_to_num(self.recorded(cap, col.TENSOR_PARALLEL),
                                                                        nan=1.0))

    def gpu_seconds(self, caps) -> float:
        """The GPU time charged for measuring `caps`, repeats included (the reference run is free)."""
        return float(sum(self.run_gpu_seconds(cap) for cap in self.charged(caps)))

    def recorded(self, cap: float, column: str) -> float:
        return self._by_cap.get(float(cap), {}).get(column, float("nan"))

    def recorded_values(self, cap: float) -> dict[str, float]:
        """The recorded run at `cap`: throughput and every SLO metric of the kind (ms)."""
        row = self._by_cap[float(cap)]
        return {THROUGHPUT: row[col.TOTAL_TOKEN_THROUGHPUT], **{m.name: row[f"slo:{m.name}"] for m in self.metrics}}

    def meets(self, values: dict[str, float]) -> bool:
        """Whether `values` meet every SLO of the curve."""
        return all(values[name] <= limit for name, limit in self.limits_ms.items())


@dataclass(frozen=True)
class RunNoise:
    """Run-to-run noise of a replay (module docstring): relative standard deviation `sd` (0: the
    recorded values) and the `seed` of its draws."""

    sd: float = 0.0
    seed: int = 0

    def factor(self, curve: ReplayCurve, cap: float, repeat: int = 0) -> float:
        """The multiplier of the run of `curve` at `cap` (1 without noise); `repeat` > 0 draws the
        repeat-th further run of that cap."""
        if self.sd == 0.0:
            return 1.0
        key = [self.seed, curve.index, int(round(cap))] + ([repeat] if repeat else [])
        return float(np.exp(self.sd * np.random.default_rng(key).standard_normal()))

    def observe(self, curve: ReplayCurve, cap: float, repeat: int = 0) -> dict[str, float]:
        """What a policy measures at `cap` of `curve` (its `repeat`-th further run): throughput times
        the factor, every latency statistic divided by it."""
        factor = self.factor(curve, cap, repeat)
        return {name: value * factor if name == THROUGHPUT else value / factor
                for name, value in curve.recorded_values(cap).items()}


def expected_range_of_normals(n: int) -> float:
    """``d2(n)``: the expected range of `n` standard normal draws (1.128 for two)."""
    def integrand(x: float) -> float:
        cdf = norm.cdf(x)
        return 1.0 - (1.0 - cdf) ** n - cdf ** n
    return float(integrate.quad(integrand, -np.inf, np.inf)[0])


def repeat_scatter(frame: pd.DataFrame, default: float = DEFAULT_NOISE_SD) -> tuple[float, str]:
    """The dataset's run-to-run scatter (relative standard deviation of one run) and where it comes
    from: the median over its repeated configurations of ``spread / d2(n)`` (the spread is
    ``(max - min) / mean`` of the `n` repeats, `slim.traces.clean`), or `default` without repeats."""
    if col.MEASUREMENT_SPREAD_PCT not in frame or col.N_MEASUREMENTS not in frame:
        return default, f"{100 * default:g}% (no repeated runs)"
    repeated = frame[(frame[col.N_MEASUREMENTS].fillna(1) > 1) & frame[col.MEASUREMENT_SPREAD_PCT].notna()]
    if repeated.empty:
        return default, f"{100 * default:g}% (no repeated runs)"
    ranges = {int(n): expected_range_of_normals(int(n)) for n in repeated[col.N_MEASUREMENTS].unique()}
    scatter = (repeated[col.MEASUREMENT_SPREAD_PCT].to_numpy(dtype=float) / 100.0
               / repeated[col.N_MEASUREMENTS].map(ranges).to_numpy(dtype=float))
    value = float(np.median(scatter))
    return value, f"{100 * value:.2g}% (median of {len(repeated)} repeated configurations)"


def replay_curves(frame: pd.DataFrame, kind: SloKind,
                  slo_reference_max_num_seqs: float | None = None) -> tuple[list[ReplayCurve], list[str]]:
    """The dataset's curves the replay can use under `kind` and one line for each it cannot (a single
    cap, no recorded reference run, a metric its runs do not judge)."""
    curves, skipped = [], []
    for _, rows in frame.groupby(list(col.WORKLOAD_KEYS), sort=True):
        rows = rows.sort_values(col.MAX_NUM_SEQS, kind="stable").reset_index(drop=True)
        curve = curve_from_rows(rows)
        if len(rows) < 2:
            skipped.append(f"{curve.label}: one measured cap, nothing to choose; not replayed")
            continue
        unjudged = [m.name for m in kind.metrics if not judging_runs(m, rows).all()]
        if unjudged:
            skipped.append(f"{curve.label}: {', '.join(unjudged)} not judged by every run; not replayed under "
                           f"{kind.name}")
            continue
        reference = (float(curve.max_num_seqs[0]) if slo_reference_max_num_seqs is None
                     else float(slo_reference_max_num_seqs))
        if kind.relative and not (rows[col.MAX_NUM_SEQS] == reference).any():
            skipped.append(f"{curve.label}: no run at the reference cap {reference:g}; not replayed")
            continue
        at_reference = rows[rows[col.MAX_NUM_SEQS] == reference]
        limits = {b.metric.name: b.limit(float(b.metric.values_ms(at_reference)[0]) if b.relative else None)
                  for b in kind.parsed}
        curves.append(ReplayCurve(curve, rows, limits, reference if kind.relative else None, len(curves),
                                  kind.metrics))
    return curves, skipped


# --- Eq. 13 on what was measured -----------------------------------------------------------------

def measured_choice(curve: ReplayCurve, measured: dict[float, dict[str, float]], epsilon: float) -> float:
    """Eq. 13 (`slim.advisor.decision.recommend`) among the measured caps of a curve: ``T(1)`` from
    its smallest measured cap."""
    caps = np.array(sorted(measured), dtype=float)
    n = len(caps)

    def facts(name: str) -> Estimates:
        values = np.array([measured[c][name] for c in caps], dtype=float)
        return Estimates(np.ones(n, dtype=bool), values, values, values, values, np.zeros(n))

    view = CandidateView(caps, np.zeros(n, dtype=bool), facts(THROUGHPUT),
                         tuple(Constraint(name, limit, facts(name)) for name, limit in curve.limits_ms.items()))
    return recommend(view, epsilon).batch_cap


def full_profile_choice(curve: ReplayCurve, epsilon: float, noise: RunNoise = RunNoise()) -> float:
    """Full profiling's choice: every cap measured (through the noise)."""
    return measured_choice(curve, {float(c): noise.observe(curve, float(c)) for c in curve.caps}, epsilon)


def slo_binds(curve: ReplayCurve, epsilon: float) -> bool:
    """Whether the SLOs move full profiling's choice off the curve's throughput peak within the
    efficiency floor (a bound that binds)."""
    recorded = {float(c): curve.recorded_values(float(c)) for c in curve.caps}
    unbounded = replace(curve, limits_ms={})
    return measured_choice(curve, recorded, epsilon) != measured_choice(unbounded, recorded, epsilon)


# --- scoring -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReplayRun:
    """Who replayed a curve how: the policy, its session, its noise, the SLO kind and the prior."""

    policy: str
    session: str = PER_WORKLOAD
    noise: RunNoise = RunNoise()
    slo_kind: str = E2E_KIND
    prior: str = OUT_OF_SAMPLE


def _row(curve: ReplayCurve, run: ReplayRun, caps, chosen: float, full_cap: float, binds: bool,
         gpu_seconds: float | None = None) -> dict[str, Any]:
    t_full = curve.recorded(full_cap, col.TOTAL_TOKEN_THROUGHPUT) if np.isfinite(full_cap) else np.nan
    if np.isfinite(chosen):
        t_chosen = curve.recorded(chosen, col.TOTAL_TOKEN_THROUGHPUT)
        regret = 100.0 * (1.0 - t_chosen / t_full) if np.isfinite(t_full) else np.nan
        violated = not curve.meets(curve.recorded_values(chosen))
    else:
        regret, violated = (100.0 if np.isfinite(t_full) else 0.0), False
    return {"slo_kind": run.slo_kind, "prior": run.prior, "curve": curve.label, "policy": run.policy,
            "session": run.session, "seed": run.noise.seed, "noise": run.noise.sd, "runs": len(curve.charged(caps)),
            "gpu_seconds": curve.gpu_seconds(caps) if gpu_seconds is None else gpu_seconds,
            "full_profile_gpu_seconds": curve.gpu_seconds(curve.caps),
            "floor_gpu_seconds": curve.gpu_seconds([full_cap]) if np.isfinite(full_cap) else 0.0,
            "chosen_cap": chosen, "full_profile_cap": full_cap, "regret_pct": regret, "slo_violated": violated,
            "slo_binds": binds}


# --- the model-free searches -----------------------------------------------------------------

class CurveProbe:
    """What a model-free search has measured of one curve: the reference run from the start, and
    each cap it asks for (through the noise)."""

    def __init__(self, curve: ReplayCurve, noise: RunNoise):
        self.curve, self.noise = curve, noise
        self.measured: dict[float, dict[str, float]] = {}
        if curve.reference_cap is not None:
            self.measure(curve.reference_cap)

    def measure(self, cap: float) -> dict[str, float]:
        if cap not in self.measured:
            self.measured[cap] = self.noise.observe(self.curve, cap)
        return self.measured[cap]

    def within(self, cap: float) -> bool:
        """Measured within every SLO."""
        return self.curve.meets(self.measure(cap))

    def admissible(self, cap: float, epsilon: float) -> bool:
        """Measured within every SLO and above the efficiency floor (Eq. 13's constraints)."""
        values = self.measure(cap)
        smallest = min(self.measured)
        t_one = self.measured[smallest][THROUGHPUT] / smallest
        return bool(self.curve.meets(values) and values[THROUGHPUT] / (cap * t_one) > epsilon)

    def choice(self, epsilon: float) -> float:
        """Eq. 13 among the measured caps."""
        return measured_choice(self.curve, self.measured, epsilon)


def _searched_caps(curve: ReplayCurve) -> list[float]:
    reference = curve.reference_cap
    return [float(c) for c in curve.caps if reference is None or c >= reference]


def descend_caps(probe: CurveProbe, epsilon: float) -> None:
    """From the largest cap down until one meets the SLOs and the efficiency floor."""
    reference = probe.curve.reference_cap
    for cap in sorted(probe.curve.caps, reverse=True):
        if (reference is not None and cap <= reference) or probe.admissible(float(cap), epsilon):
            return


def bisect_caps(probe: CurveProbe, epsilon: float) -> None:
    """Binary search over the caps above the reference (all caps where there is none) for the
    largest within the SLOs, as `slim.tune.guard.ShadowBisection` follows it."""
    caps = _searched_caps(probe.curve)
    low = 0 if probe.curve.reference_cap is not None else -1   # caps[low] is known to meet the SLOs
    high = len(caps) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if probe.within(caps[middle]):
            low = middle
        else:
            high = middle - 1


def doubling_caps(probe: CurveProbe, epsilon: float) -> None:
    """From the reference cap (the smallest without one), double (the next cap at or above twice the
    last) until the measured throughput gains less than epsilon or an SLO breaks."""
    caps = probe.curve.caps
    last = probe.curve.reference_cap if probe.curve.reference_cap is not None else float(caps[0])
    while probe.within(last):
        higher = caps[caps >= 2 * last]
        if not higher.size:
            return
        following = float(higher[0])
        gain = probe.measure(following)[THROUGHPUT] / probe.measure(last)[THROUGHPUT] - 1.0
        last = following
        if gain < epsilon:
            return


MODEL_FREE_SEARCHES: dict[str, Callable[[CurveProbe, float], None]] = {
    "descend": descend_caps, "bisect": bisect_caps, "doubling": doubling_caps}


def model_free_caps(curve: ReplayCurve, epsilon: float, policy: str = "doubling",
                    noise: RunNoise = RunNoise()) -> tuple[list[float], float]:
    """A model-free search's measured caps (the reference first) and its Eq. 13 choice among them."""
    probe = CurveProbe(curve, noise)
    MODEL_FREE_SEARCHES[policy](probe, epsilon)
    return list(probe.measured), probe.choice(epsilon)


def paper_plan_training(frame: pd.DataFrame, settings: list[HeldOutSetting]) -> pd.DataFrame:
    """The union of the applicable settings' training runs (each run once)."""
    parts = [select_rows(frame, s.train) for s in settings if s.applicable]
    if not parts:
        raise SplitError("no applicable held-out setting, so no paper plan")
    union = pd.concat(parts)
    return union[~union.index.duplicated(keep="first")]


# --- slim tune, replayed -------------------------------------------------------------------------

def candidates_of(curves: list[ReplayCurve]) -> pd.DataFrame:
    """Every (curve, cap) as a tuning candidate: the runs' configuration columns (and the client's
    concurrency cap, which SIM's latencies read)."""
    frames = []
    for curve in curves:
        rows = curve.rows[list(CONFIG_COLUMNS)].copy()
        rows[col.MAX_CONCURRENCY] = (curve.rows[col.MAX_CONCURRENCY].to_numpy(dtype=float)
                                     if col.MAX_CONCURRENCY in curve.rows else np.nan)
        rows[WORKLOAD] = curve.label
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def _measurement(values: dict[str, float], gpu_seconds: float, scatter: float, charged: bool = True) -> Measurement:
    """A revealed run (`observed`) as the session's measurement."""
    latencies = {name: value for name, value in values.items() if name not in (THROUGHPUT, IN_BATCH_E2E)}
    return Measurement(values[THROUGHPUT], values[IN_BATCH_E2E] / 1e3, gpu_seconds, scatter, latencies_ms=latencies,
                       charged=charged)


def oracle(curves: list[ReplayCurve], noise: RunNoise = RunNoise(),
           scatter: float = DEFAULT_NOISE_SD) -> Callable[[Proposal], Measurement | Unusable | None]:
    """Reveals a recorded run (through the noise; a repeated cap's further runs are new draws) when
    the loop asks for it; the charge is its recorded GPU time, or the proposal's limit where the run
    would take longer (stopped there, nothing measured). Each measurement carries `scatter`, the
    run-to-run scatter a user states."""
    by_label = {curve.label: curve for curve in curves}
    asked: dict[tuple[str, float], int] = {}

    def measure(proposal: Proposal) -> Measurement | Unusable | None:
        curve = by_label[proposal.workload]
        if not (curve.caps == proposal.max_num_seqs).any():
            return None
        seconds = curve.run_gpu_seconds(proposal.max_num_seqs)
        if proposal.limit_gpu_seconds is not None and seconds > proposal.limit_gpu_seconds:
            return Unusable(proposal.limit_gpu_seconds, "stopped at the bound's limit")
        key = (curve.label, proposal.max_num_seqs)
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


def replay_tune(curves: list[ReplayCurve], prior: ReplayPrior, run: ReplayRun, epsilon: float,
                settings: TuneSettings, full_caps: dict[str, float], binds: dict[str, bool],
                architectures: ArchitectureLookup, hw: Hardware, scatter: float = DEFAULT_NOISE_SD) -> TuneReplay:
    """One tuning session over `curves` (each reference run recorded free first), the oracle
    measuring through `run.noise`, the bound's roofline on the accelerator's catalog entry `hw`; its
    per-curve rows and the intervals it held, scored."""
    candidates = candidates_of(curves)
    workloads = [Workload(c.curve.model, c.curve.input_len_nominal, c.curve.output_len_nominal,
                          Slos(tuple(SloBound(SloMetric.parse(name), limit_ms=limit)
                                     for name, limit in c.limits_ms.items())), epsilon, c.reference_cap)
                 for c in curves]
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
    rows = [_row(c, run, measured_caps[c.label], outcome.certificates[c.label].batch_cap, full_caps[c.label],
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


# --- the whole dataset ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ReplayOptions:
    """How a dataset is replayed: the tuning settings (its margin the bound's), the residual kernels
    per prior (fitted on other datasets only: `slim.tune.kernel.fit_kernels`; none: the hand-set
    kernel), the noise (`noise_sd`; None: the dataset's own repeat scatter), how many noisy seeds
    beside the noise-free replay, the SLO kinds beside the BCA config's E2E, and the adversarial
    priors of ``tune_sim`` (name -> prior)."""

    settings: TuneSettings = TuneSettings()
    kernels: FittedKernels = FittedKernels({}, ())
    noise_sd: float | None = None
    seeds: int = DEFAULT_SEEDS
    slo_kinds: tuple[SloKind, ...] = ()
    adversarial: dict[str, ReplayPrior] = field(default_factory=dict)


def replay_residuals(frame: pd.DataFrame, priors: dict[str, ReplayPrior], dataset: str, slo_multiplier: float,
                     slo_reference_max_num_seqs: float | None, noise_sd: float | None = None) -> pd.DataFrame:
    """Each out-of-sample prior's log residuals on the dataset's replayed runs
    (`slim.tune.kernel.RESIDUAL_COLUMNS`): what other datasets' kernels are fitted on."""
    curves, _ = replay_curves(frame, e2e_kind(slo_multiplier), slo_reference_max_num_seqs)
    scatter = noise_sd if noise_sd is not None else repeat_scatter(frame)[0]
    parts = []
    for policy, prior in sorted(priors.items()):
        prior.check_out_of_sample(frame)
        usable = [c for c in curves if c.curve.model in prior.by_model]
        if not usable:
            continue
        runs = pd.concat([c.rows for c in usable], ignore_index=True)
        parts.append(residual_table(runs, prior.predict(candidates_of(usable)), dataset, policy, scatter))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(RESIDUAL_COLUMNS))


def _coverage_table(records: list[dict[str, Any]], run: ReplayRun, noisy: bool, confidence: float,
                    quantities: Sequence[str]) -> list[dict[str, Any]]:
    frame = pd.DataFrame(records, columns=["intervals", "quantity", "inside", "width_pct"])
    out = []
    for intervals in (NEXT_RUN, RELIED_ON):
        for quantity in quantities:
            part = frame[(frame["intervals"] == intervals) & (frame["quantity"] == quantity)]
            out.append({"slo_kind": run.slo_kind, "prior": run.prior, "policy": run.policy, "session": run.session,
                        "noisy": noisy, "intervals": intervals, "quantity": quantity, "n_predicted": len(part),
                        "coverage_pct": 100.0 * float(part["inside"].mean()) if len(part) else float("nan"),
                        "mean_width_pct": float(part["width_pct"].mean()) if len(part) else float("nan"),
                        "confidence_pct": 100.0 * confidence})
    return out


def replay_dataset(frame: pd.DataFrame, architectures: ArchitectureLookup, hw: Hardware, epsilon: float,
                   slo_multiplier: float, slo_reference_max_num_seqs: float | None,
                   held_out_settings: list[HeldOutSetting] | None, priors: dict[str, ReplayPrior],
                   options: ReplayOptions = ReplayOptions(), dataset: str = "dataset",
                   ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Every policy on every curve under every SLO kind it can replay, noise-free and under
    `options.seeds` noisy seeds: the replay table (`REPLAY_COLUMNS`), the tuning intervals' coverage
    (`CALIBRATION_COLUMNS`) and one line per kind, policy or curve that could not be replayed, and
    on the noise.

    `priors` maps ``tune_slim`` / ``tune_sim`` to their out-of-sample priors (absent: not replayed);
    each is checked with `ReplayPrior.check_out_of_sample` first, and `options.kernels` must not have
    been fitted on `dataset` (its label)."""
    if dataset in options.kernels.fitted_on:
        raise SplitError(f"the residual kernel was fitted on this dataset ({dataset}); a replay must choose it on "
                         "other datasets only")
    scatter, scatter_source = ((options.noise_sd, f"{100 * options.noise_sd:g}% (configured)")
                               if options.noise_sd is not None else repeat_scatter(frame))
    notes = [f"noise: run-to-run scatter {scatter_source}, {options.seeds} seeds; the reference run that sets "
             "each relative SLO is free for every policy"]
    if options.settings.margin is not None:
        notes.append(f"bound: each tune session spends at most {1 + options.settings.margin:g} x a bisection's GPU "
                     "time on each curve (slim.tune.guard)")
    noises = [RunNoise()] + [RunNoise(scatter, seed) for seed in range(1, options.seeds + 1)]
    for policy, prior in priors.items():
        prior.check_out_of_sample(frame)
    rows, coverage = [], []
    kinds = [e2e_kind(slo_multiplier), *options.slo_kinds]
    for kind in kinds:
        why = why_kind_not_replayed(kind, frame)
        if why is not None:
            notes.append(why)
            continue
        curves, skipped = replay_curves(frame, kind, slo_reference_max_num_seqs)
        notes += [f"{kind.name}: {line}" for line in skipped]
        if not curves:
            if kind.name == E2E_KIND:
                raise SplitError("no measured curve of two caps or more to replay")
            notes.append(f"SLO kind {kind.name}: no curve to replay")
            continue
        binding = {c.label: slo_binds(c, epsilon) for c in curves}
        notes.append(f"SLO kind {kind.name} ({kind.describe()}): binds on {sum(binding.values())} of {len(curves)} "
                     "curves (moves full profiling's choice off the throughput peak)")
        rows += _model_free_rows(curves, kind, noises, epsilon, binding)
        full_caps = {c.label: full_profile_choice(c, epsilon) for c in curves}
        if kind.name == E2E_KIND:
            rows += _paper_plan_rows(frame, curves, architectures, hw, epsilon, held_out_settings, full_caps, binding,
                                     notes)
        tuned = [(policy, priors.get(policy), OUT_OF_SAMPLE) for policy in TUNE_POLICIES]
        tuned += [("tune_sim", prior, name) for name, prior in options.adversarial.items()]
        for policy, prior, prior_name in tuned:
            if prior is None:
                if kind.name == E2E_KIND:
                    notes.append(f"{policy}: its prior predictor is not available for this dataset; not replayed")
                continue
            sessions = SESSIONS if kind.name == E2E_KIND and prior_name == OUT_OF_SAMPLE else (PER_WORKLOAD,)
            settings = options.kernels.settings(predictor_of(policy), options.settings)
            if kind.name == E2E_KIND:
                notes += _prior_notes(policy, prior, prior_name, options.kernels)
            usable = [c for c in curves if c.curve.model in prior.by_model]
            for session in sessions:
                groups = [[c] for c in usable] if session == PER_WORKLOAD else [usable] if usable else []
                stopped_open: dict[str, list[str]] = {}
                decisions = 0
                for noisy in (False, True):
                    records = []
                    for noise in (n for n in noises if (n.sd > 0) == noisy):
                        run = ReplayRun(policy, session, noise, kind.name, prior_name)
                        for group in groups:
                            replay = replay_tune(group, prior, run, epsilon, settings, full_caps, binding,
                                                 architectures, hw, scatter)
                            rows += replay.rows
                            records += replay.coverage
                            decisions += len(replay.rows)
                            for label in replay.open_curves:
                                stopped_open.setdefault(replay.stopped, []).append(label)
                    if groups:
                        coverage += _coverage_table(records, ReplayRun(policy, session, RunNoise(), kind.name,
                                                                       prior_name), noisy,
                                                    options.settings.confidence,
                                                    (THROUGHPUT, *dict.fromkeys(m.name for m in kind.metrics),
                                                     *((IN_BATCH_E2E,) if IN_BATCH_E2E not in
                                                       {m.name for m in kind.metrics} else ())))
                for stopped, labels in stopped_open.items():
                    counts = ", ".join(f"{label} ({count})" for label, count in Counter(labels).items())
                    notes.append(f"{policy} ({kind.name}, {prior_name}, {session}): the loop stopped ({stopped}) with "
                                 f"the decision open on {len(labels)} of {decisions} decisions (curve: times): "
                                 f"{counts}")
    table = pd.DataFrame(rows, columns=list(REPLAY_COLUMNS))
    order = {name: i for i, name in enumerate(POLICIES)}
    session_order = {name: i for i, name in enumerate(SESSIONS)}
    kind_order = {kind.name: i for i, kind in enumerate(kinds)}
    prior_order = {name: i for i, name in enumerate([OUT_OF_SAMPLE, *options.adversarial])}
    keys = {"policy": order, "session": session_order, "slo_kind": kind_order, "prior": prior_order}
    table = table.sort_values(["slo_kind", "prior", "curve", "policy", "session", "seed"],
                              key=lambda s: s.map(keys[s.name]) if s.name in keys else s,
                              kind="stable").reset_index(drop=True)
    return table, pd.DataFrame(coverage, columns=list(CALIBRATION_COLUMNS)), notes


def _model_free_rows(curves: list[ReplayCurve], kind: SloKind, noises: list[RunNoise], epsilon: float,
                     binding: dict[str, bool]) -> list[dict[str, Any]]:
    rows = []
    full_caps = {c.label: full_profile_choice(c, epsilon) for c in curves}
    for noise in noises:
        for curve in curves:
            chosen = full_caps[curve.label] if noise.sd == 0 else full_profile_choice(curve, epsilon, noise)
            rows.append(_row(curve, ReplayRun("full_profile", PER_WORKLOAD, noise, kind.name), curve.caps, chosen,
                             full_caps[curve.label], binding[curve.label]))
            for policy in MODEL_FREE_POLICIES:
                caps, chosen = model_free_caps(curve, epsilon, policy, noise)
                rows.append(_row(curve, ReplayRun(policy, PER_WORKLOAD, noise, kind.name), caps, chosen,
                                 full_caps[curve.label], binding[curve.label]))
    return rows


def _prior_notes(policy: str, prior: ReplayPrior, prior_name: str, kernels: FittedKernels) -> list[str]:
    notes = [f"{policy} ({prior_name}): residual kernel " + (
        f"fitted on {', '.join(kernels.fitted_on)}" if predictor_of(policy) in kernels.kernels
        else "hand-set (no other real dataset in this run to fit it on)")]
    for model, why in prior.missing.items():
        notes.append(f"{policy} ({prior_name}): {model} not replayed: {why}")
    models_by_source: dict[str, list[str]] = {}
    for model, source in sorted(prior.by_model.items()):
        models_by_source.setdefault(source.description, []).append(model)
    notes.append(f"{policy} ({prior_name}): prior " + "; ".join(f"{description} for {', '.join(models)}"
                                                                 for description, models in models_by_source.items()))
    return notes


def _paper_plan_rows(frame: pd.DataFrame, curves: list[ReplayCurve], architectures: ArchitectureLookup,
                     hw: Hardware, epsilon: float, held_out_settings: list[HeldOutSetting] | None,
                     full_caps: dict[str, float], binding: dict[str, bool], notes: list[str]) -> list[dict[str, Any]]:
    """SLIM-BCA fitted on the paper's training union (noise-free only)."""
    if held_out_settings is None:
        notes.append("paper_plan: the dataset names no held-out settings; not replayed")
        return []
    try:
        training = paper_plan_training(frame, held_out_settings)
        slim = registered(SLIM)
        fitted = slim.predictor.fit(TrainingRuns(training, architectures, hw, label="paper plan (union of training "
                                                 "sets)", sample_valley=False))
    except (SplitError, FitError) as error:
        notes.append(f"paper_plan: {error}; not replayed")
        return []
    trained = curve_label(training)
    rows = []
    for curve in curves:
        caps = training.loc[trained == curve.label, col.MAX_NUM_SEQS].tolist()
        chosen = predicted_bca(slim, fitted, Target.of_curve(curve.curve), curve.caps, curve.slo_s,
                               epsilon).decision.batch_cap
        rows.append(_row(curve, ReplayRun("paper_plan", PER_DATASET), caps, chosen, full_caps[curve.label],
                         binding[curve.label]))
    return rows
