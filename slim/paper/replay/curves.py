"""The curves a tuning replay runs on: a dataset's measured curves with the SLOs of a kind resolved on
their recorded runs (`ReplayCurve`, `replay_curves`), and the run-to-run noise a replayed run is
revealed through (`RunNoise`, at the dataset's own repeat scatter, `repeat_scatter`).

**The SLOs** (`SloKind`). The in-batch E2E of the dataset's BCA config (``strict_multiplier x`` its
value at the reference cap: `e2e_kind`), and the kinds of ``tuning.slo_kinds`` (vLLM's metrics:
``p99_tpot_ms=2x``, ``p99_tpot_ms=25``, ``p99_itl_ms=2x``, alone or with the E2E), replayed on a
dataset whose runs judge every metric they name (`slim.specs.slo.judging_runs`; else one line says
why not). A relative bound is resolved on the recorded reference run (`slim.decision.slo_limits`).

**Noise.** A replay is noise-free (``noise`` 0, ``seed`` 0: the recorded values, exactly) or noisy:
each revealed run is the recorded one times ``exp(sd z)`` in throughput and divided by it in every
latency statistic (one draw per run: a slower run is slower in all of them), ``z`` standard normal
from a generator seeded by ``(seed, curve, cap)``, so every policy of one seed sees the same runs.
``sd`` is the dataset's own repeat scatter, or 2 % where it has no repeated runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.measured import MeasuredCurve, curve_from_rows
from slim.decision.candidates import THROUGHPUT
from slim.decision.slo_limits import resolve_limits
from slim.specs.slo import IN_BATCH_E2E, SloBound, SloMetric, Slos, judging_runs

E2E_KIND = "in_batch_e2e"
DEFAULT_NOISE_SD = 0.02


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

    def slos(self, reference_cap: float) -> Slos:
        """The kind's bounds as `Slos`, relative ones against `reference_cap`."""
        return Slos(self.parsed, reference_cap=float(reference_cap))


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
        """One run's recorded GPU time at `cap`: its duration times the GPUs its server uses
        (``gpus_per_server``, else its tensor-parallel size, else one)."""
        gpus = self.recorded(cap, col.GPUS_PER_SERVER)
        if not np.isfinite(gpus):
            gpus = float(np.nan_to_num(self.recorded(cap, col.TENSOR_PARALLEL), nan=1.0))
        return self.recorded(cap, col.DURATION_S) * gpus

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
    from scipy import integrate
    from scipy.stats import norm

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
        recorded = {b.metric.name: float(b.metric.values_ms(at_reference)[0]) for b in kind.parsed if b.relative}
        limits = resolve_limits(kind.slos(reference), recorded).limits_ms
        curves.append(ReplayCurve(curve, rows, limits, reference if kind.relative else None, len(curves),
                                  kind.metrics))
    return curves, skipped
