"""Replay of the tuning loop on a dataset's measured curves: how much GPU time each way of choosing
``--max-num-seqs`` spends, and how much throughput its choice gives up against full profiling.

**The oracle.** An oracle stands in for the GPU: when a policy asks for a (curve, cap) that was
measured, it reveals that run, and the run's recorded duration (an offline row's batch latency)
times its GPUs is the GPU time charged. Each curve's SLO is the dataset's BCA config's
(``strict_multiplier x`` E2E at the reference cap). **The reference run that sets the SLO is free
for every policy, full profiling included, and its measurement is known to every policy from the
start** (the user ran it to set the SLO); every other run is charged, ``T(1)`` included where the
reference is not cap 1.

**Noise.** A replay is noise-free (``noise`` 0, ``seed`` 0: the recorded values, exactly) or noisy:
each revealed run is the recorded one times ``exp(sd z)`` in throughput and divided by it in E2E
(one draw per run: a slower run is slower in both), ``z`` standard normal from a generator seeded
by ``(seed, curve, cap)``, so every policy of one seed sees the same runs (`RunNoise`). ``sd`` is
the dataset's own repeat scatter (`repeat_scatter`), or 2 % where it has no repeated runs. Regret
and SLO violations are always scored on the recorded (noise-free) curve.

**The policies** (`POLICIES`):

* ``full_profile``: every cap of the curve, Eq. 13 on the (possibly noisy) measurements;
* ``paper_plan``: the paper's fixed plan, SLIM-BCA (SLIM fitted on the union of the training
  runs of the dataset's applicable held-out settings, as Table VI counts them) on every curve,
  charged for the training runs of each curve; noise-free only;
* the model-free searches (`MODEL_FREE_POLICIES`), each choosing by Eq. 13 among what it measured:
  ``descend`` (from the largest cap down until a cap meets the SLO and the efficiency floor),
  ``bisect`` (binary search for the largest cap within the SLO, E2E assumed to grow with the cap)
  and ``doubling`` (from the reference cap, the next candidate at or above twice the last, until
  the measured throughput gains less than epsilon or the SLO breaks);
* ``tune_slim`` / ``tune_sim``: `slim.advisor.tune` with the SLIM or the SIM prior until every
  decision is settled, in one of two `SESSIONS`: ``per_workload`` (one session per curve, as a
  user tuning one model, IL and OL from scratch: the headline) or ``per_dataset`` (one session over
  every curve of the dataset, each measurement informing the others).

**Out-of-sample priors and kernels.** A curve is never replayed with a prior fitted on its model's
runs of the dataset (`slim.paper.tuning_priors`), nor with a residual kernel fitted on the dataset
(`ReplayOptions.kernels`, chosen on the other datasets' `replay_residuals`). The summary, the goals
and their Markdown are `slim.paper.tuning_summary`.

``regret_pct`` is ``100 (1 - T_rec(chosen) / T_rec(full_profile_cap))``; ``slo_violated`` whether
the chosen cap's recorded E2E exceeds the SLO; ``floor_gpu_seconds`` the GPU time of measuring
only full profiling's chosen cap (no policy that must measure its choice can spend less).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pandas as pd
from scipy import integrate
from scipy.stats import norm

from slim import columns as col
from slim.advisor.bca import select_batch_cap
from slim.advisor.measured import MeasuredCurve, curve_from_rows, full_profile_bca
from slim.advisor.predictor_bca import Target, predicted_bca
from slim.advisor.tune import (
    WORKLOAD,
    Measurement,
    Proposal,
    TuneSession,
    TuneSettings,
    Workload,
    curve_label,
    run_loop,
)
from slim.advisor.tune_kernel import RESIDUAL_COLUMNS, FittedKernels, residual_table
from slim.advisor.tune_model import CONFIG_COLUMNS
from slim.errors import FitError, SplitError
from slim.model.equations import ArchitectureLookup
from slim.paper.splits import HeldOutSetting, select_rows
from slim.paper.tuning_priors import TUNE_POLICIES, ReplayPrior, predictor_of
from slim.predictors import SLIM, TrainingRuns, registered
from slim.specs.hardware import Hardware

MODEL_FREE_POLICIES = ("descend", "bisect", "doubling")
POLICIES = ("full_profile", "paper_plan", *MODEL_FREE_POLICIES, *TUNE_POLICIES)
PER_WORKLOAD, PER_DATASET = "per_workload", "per_dataset"
SESSIONS = (PER_WORKLOAD, PER_DATASET)
REPLAY_COLUMNS = ("curve", "policy", "session", "seed", "noise", "runs", "gpu_seconds", "full_profile_gpu_seconds",
                  "floor_gpu_seconds", "chosen_cap", "full_profile_cap", "regret_pct", "slo_violated")
CALIBRATION_COLUMNS = ("policy", "session", "noisy", "intervals", "quantity", "n_predicted", "coverage_pct",
                       "mean_width_pct", "confidence_pct")
NEXT_RUN, RELIED_ON = "next_run", "relied_on"
"""Which intervals a coverage row scores: those the loop held for each run just before measuring
it, or the final ones at the unmeasured caps the certificate relies on."""
DEFAULT_NOISE_SD = 0.02
DEFAULT_SEEDS = 5


# --- the curves and their noise --------------------------------------------------------------

@dataclass(frozen=True)
class ReplayCurve:
    """A measured curve with its runs (one per cap, ascending), its SLO and the reference cap that
    set it (free and known to every policy)."""

    curve: MeasuredCurve
    rows: pd.DataFrame
    slo_s: float
    reference_cap: float
    index: int          # position among the dataset's curves: seeds the curve's noise

    @property
    def label(self) -> str:
        return self.curve.label

    @property
    def caps(self) -> np.ndarray:
        return self.curve.max_num_seqs

    def charged(self, caps) -> list[float]:
        """The runs of `caps` (repeats included) that are charged: all but the reference's first."""
        charged = list(caps)
        if self.reference_cap in charged:
            charged.remove(self.reference_cap)
        return charged

    def run_gpu_seconds(self, cap: float) -> float:
        """One run's recorded GPU time at `cap`: its duration times its GPUs."""
        return self.recorded(cap, col.DURATION_S) * float(np.nan_to_num(self.recorded(cap, col.TENSOR_PARALLEL),
                                                                        nan=1.0))

    def gpu_seconds(self, caps) -> float:
        """The GPU time charged for measuring `caps`, repeats included (the reference run is free)."""
        return float(sum(self.run_gpu_seconds(cap) for cap in self.charged(caps)))

    def recorded(self, cap: float, column: str) -> float:
        match = self.rows.loc[self.rows[col.MAX_NUM_SEQS] == cap, column]
        return float(match.iloc[0]) if len(match) else float("nan")


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

    def observe(self, curve: ReplayCurve, cap: float, repeat: int = 0) -> tuple[float, float]:
        """The (throughput, E2E) a policy measures at `cap` of `curve` (its `repeat`-th further run)."""
        factor = self.factor(curve, cap, repeat)
        return (curve.recorded(cap, col.TOTAL_TOKEN_THROUGHPUT) * factor,
                curve.recorded(cap, col.E2E_LATENCY_S) / factor)


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


def replay_curves(frame: pd.DataFrame, slo_multiplier: float,
                  slo_reference_max_num_seqs: float | None) -> tuple[list[ReplayCurve], list[str]]:
    """The dataset's curves the replay can use and one line for each it cannot (a single cap)."""
    curves, skipped = [], []
    for _, rows in frame.groupby(list(col.WORKLOAD_KEYS), sort=True):
        rows = rows.sort_values(col.MAX_NUM_SEQS, kind="stable").reset_index(drop=True)
        curve = curve_from_rows(rows)
        if len(rows) < 2:
            skipped.append(f"{curve.label}: one measured cap, nothing to choose; not replayed")
            continue
        reference = (float(curve.max_num_seqs[0]) if slo_reference_max_num_seqs is None
                     else float(slo_reference_max_num_seqs))
        curves.append(ReplayCurve(curve, rows, curve.slo_s(slo_multiplier, slo_reference_max_num_seqs), reference,
                                  len(curves)))
    return curves, skipped


# --- scoring -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReplayRun:
    """Who replayed a curve how: the policy, its session and its noise."""

    policy: str
    session: str = PER_WORKLOAD
    noise: RunNoise = RunNoise()


def _row(curve: ReplayCurve, run: ReplayRun, caps, chosen: float, full_cap: float) -> dict[str, Any]:
    t_full = curve.recorded(full_cap, col.TOTAL_TOKEN_THROUGHPUT) if np.isfinite(full_cap) else np.nan
    if np.isfinite(chosen):
        t_chosen = curve.recorded(chosen, col.TOTAL_TOKEN_THROUGHPUT)
        regret = 100.0 * (1.0 - t_chosen / t_full) if np.isfinite(t_full) else np.nan
        violated = bool(curve.recorded(chosen, col.E2E_LATENCY_S) > curve.slo_s)
    else:
        regret, violated = (100.0 if np.isfinite(t_full) else 0.0), False
    return {"curve": curve.label, "policy": run.policy, "session": run.session, "seed": run.noise.seed,
            "noise": run.noise.sd, "runs": len(curve.charged(caps)), "gpu_seconds": curve.gpu_seconds(caps),
            "full_profile_gpu_seconds": curve.gpu_seconds(curve.caps),
            "floor_gpu_seconds": curve.gpu_seconds([full_cap]) if np.isfinite(full_cap) else 0.0,
            "chosen_cap": chosen, "full_profile_cap": full_cap, "regret_pct": regret, "slo_violated": violated}


# --- the model-free searches -----------------------------------------------------------------

class CurveProbe:
    """What a model-free search has measured of one curve: the reference run from the start, and
    each cap it asks for (through the noise)."""

    def __init__(self, curve: ReplayCurve, noise: RunNoise):
        self.curve, self.noise = curve, noise
        self.measured: dict[float, tuple[float, float]] = {}
        self.measure(curve.reference_cap)

    def measure(self, cap: float) -> tuple[float, float]:
        if cap not in self.measured:
            self.measured[cap] = self.noise.observe(self.curve, cap)
        return self.measured[cap]

    def _t_one(self) -> float:
        smallest = min(self.measured)
        return self.measured[smallest][0] / smallest

    def admissible(self, cap: float, epsilon: float) -> bool:
        """Measured within the SLO and above the efficiency floor (Eq. 13's constraints)."""
        throughput, e2e = self.measure(cap)
        return bool(e2e <= self.curve.slo_s and throughput / (cap * self._t_one()) > epsilon)

    def choice(self, epsilon: float) -> float:
        """Eq. 13 among the measured caps."""
        caps = sorted(self.measured)
        values = np.array([self.measured[c] for c in caps])
        return select_batch_cap(caps, values[:, 0], values[:, 1], slo_s=self.curve.slo_s, epsilon=epsilon,
                                throughput_at_one_per_s=self._t_one()).batch_cap


def descend_caps(probe: CurveProbe, epsilon: float) -> None:
    """From the largest cap down until one meets the SLO and the efficiency floor."""
    for cap in sorted(probe.curve.caps, reverse=True):
        if cap <= probe.curve.reference_cap or probe.admissible(float(cap), epsilon):
            return


def bisect_caps(probe: CurveProbe, epsilon: float) -> None:
    """Binary search over the caps above the reference for the largest within the SLO."""
    caps = [float(c) for c in probe.curve.caps if c >= probe.curve.reference_cap]
    low, high = 0, len(caps) - 1        # caps[low] is known to meet the SLO (the reference sets it)
    while low < high:
        middle = (low + high + 1) // 2
        if probe.measure(caps[middle])[1] <= probe.curve.slo_s:
            low = middle
        else:
            high = middle - 1


def doubling_caps(probe: CurveProbe, epsilon: float) -> None:
    """From the reference cap, double (the next cap at or above twice the last) until the measured
    throughput gains less than epsilon or the SLO breaks."""
    caps, last = probe.curve.caps, probe.curve.reference_cap
    while probe.measure(last)[1] <= probe.curve.slo_s:
        higher = caps[caps >= 2 * last]
        if not higher.size:
            return
        following = float(higher[0])
        gain = probe.measure(following)[0] / probe.measure(last)[0] - 1.0
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


def noisy_full_profile(curve: ReplayCurve, epsilon: float, noise: RunNoise) -> float:
    """Full profiling's choice when every cap is measured through the noise."""
    probe = CurveProbe(curve, noise)
    for cap in curve.caps:
        probe.measure(float(cap))
    return probe.choice(epsilon)


def paper_plan_training(frame: pd.DataFrame, settings: list[HeldOutSetting]) -> pd.DataFrame:
    """The union of the applicable settings' training runs (each run once)."""
    parts = [select_rows(frame, s.train) for s in settings if s.applicable]
    if not parts:
        raise SplitError("no applicable held-out setting, so no paper plan")
    union = pd.concat(parts)
    return union[~union.index.duplicated(keep="first")]


# --- slim tune, replayed -------------------------------------------------------------------------

def candidates_of(curves: list[ReplayCurve]) -> pd.DataFrame:
    """Every (curve, cap) as a tuning candidate: the runs' configuration columns only."""
    frames = []
    for curve in curves:
        rows = curve.rows[list(CONFIG_COLUMNS)].copy()
        rows[WORKLOAD] = curve.label
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def oracle(curves: list[ReplayCurve], noise: RunNoise = RunNoise(),
           scatter: float = DEFAULT_NOISE_SD) -> Callable[[Proposal], Measurement | None]:
    """Reveals a recorded run (through the noise; a repeated cap's further runs are new draws) when
    the loop asks for it; the charge is its recorded GPU time. Each measurement carries `scatter`,
    the run-to-run scatter a user states."""
    by_label = {curve.label: curve for curve in curves}
    asked: dict[tuple[str, float], int] = {}

    def measure(proposal: Proposal) -> Measurement | None:
        curve = by_label[proposal.workload]
        if not (curve.caps == proposal.max_num_seqs).any():
            return None
        key = (curve.label, proposal.max_num_seqs)
        repeat = asked.get(key, 1 if proposal.max_num_seqs == curve.reference_cap else 0)
        asked[key] = repeat + 1
        throughput, e2e = noise.observe(curve, proposal.max_num_seqs, repeat)
        return Measurement(throughput, e2e, curve.run_gpu_seconds(proposal.max_num_seqs), scatter)

    return measure


@dataclass(frozen=True)
class TuneReplay:
    rows: list[dict[str, Any]]
    coverage: list[dict[str, Any]]      # one record per interval scored: intervals, quantity, inside, width_pct
    stopped: str
    open_curves: list[str]      # decisions the loop left unsettled (their cap: the best measured one)


def _relied_on_coverage(session: TuneSession, curves: list[ReplayCurve]) -> list[dict[str, Any]]:
    """The final intervals at the unmeasured caps each certificate excludes by a bound, scored
    against the recorded run."""
    records, b = [], session.belief
    for workload, curve in zip(session.workloads, curves):
        certificate = session.certificate(workload)
        for exclusion in certificate.exclusions:
            if not exclusion.by_bound:
                continue
            rows = session.candidates.index[(session.candidates[WORKLOAD] == workload.label)
                                            & (session.candidates[col.MAX_NUM_SEQS] == exclusion.cap)]
            i = int(rows[0])
            for quantity, truth, low, high in (
                    ("throughput", curve.recorded(exclusion.cap, col.TOTAL_TOKEN_THROUGHPUT), b.throughput_low[i],
                     b.throughput_high[i]),
                    ("e2e", curve.recorded(exclusion.cap, col.E2E_LATENCY_S), b.e2e_low[i], b.e2e_high[i])):
                records.append({"intervals": RELIED_ON, "quantity": quantity, "inside": bool(low <= truth <= high),
                                "width_pct": 100.0 * (high / low - 1.0)})
    return records


def replay_tune(curves: list[ReplayCurve], prior: ReplayPrior, run: ReplayRun, epsilon: float,
                settings: TuneSettings, full_caps: dict[str, float], scatter: float = DEFAULT_NOISE_SD) -> TuneReplay:
    """One tuning session over `curves` (each reference run recorded free first), the oracle
    measuring through `run.noise`; its per-curve rows and the intervals it held, scored."""
    candidates = candidates_of(curves)
    workloads = [Workload(c.curve.model, c.curve.input_len_nominal, c.curve.output_len_nominal, c.slo_s, epsilon)
                 for c in curves]
    session = TuneSession(workloads, candidates, prior.predict(candidates), settings)
    measure = oracle(curves, run.noise, scatter)
    for curve in curves:
        reference = int(candidates.index[(candidates[WORKLOAD] == curve.label)
                                         & (candidates[col.MAX_NUM_SEQS] == curve.reference_cap)][0])
        throughput, e2e = run.noise.observe(curve, curve.reference_cap)
        session.record(reference, Measurement(throughput, e2e, 0.0, scatter))
    outcome = run_loop(session, measure)
    measured_caps: dict[str, list[float]] = {c.label: [c.reference_cap] for c in curves}
    for step in outcome.steps:
        measured_caps[step.workload].append(step.max_num_seqs)
    rows = [_row(c, run, measured_caps[c.label], outcome.certificates[c.label].batch_cap, full_caps[c.label])
            for c in curves]
    coverage = []
    for step in outcome.steps:
        curve = next(c for c in curves if c.label == step.workload)
        for quantity, inside, column in (("throughput", step.throughput_inside_interval, col.TOTAL_TOKEN_THROUGHPUT),
                                         ("e2e", step.e2e_inside_interval, col.E2E_LATENCY_S)):
            if inside is not None:
                coverage.append({"intervals": NEXT_RUN, "quantity": quantity, "inside": inside,
                                 "width_pct": float("nan")})
    coverage += _relied_on_coverage(session, curves)
    open_curves = [label for label, certificate in outcome.certificates.items() if not certificate.settled]
    return TuneReplay(rows, coverage, outcome.stopped, open_curves)


# --- the whole dataset ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ReplayOptions:
    """How a dataset is replayed: the tuning settings, the residual kernels per prior (fitted on
    other datasets only: `slim.advisor.tune_kernel.fit_kernels`; none: the hand-set kernel), the
    noise (`noise_sd`; None: the dataset's own repeat scatter) and how many noisy seeds beside the
    noise-free replay."""

    settings: TuneSettings = TuneSettings()
    kernels: FittedKernels = FittedKernels({}, ())
    noise_sd: float | None = None
    seeds: int = DEFAULT_SEEDS


def replay_residuals(frame: pd.DataFrame, priors: dict[str, ReplayPrior], dataset: str, slo_multiplier: float,
                     slo_reference_max_num_seqs: float | None, noise_sd: float | None = None) -> pd.DataFrame:
    """Each out-of-sample prior's log residuals on the dataset's replayed runs
    (`slim.advisor.tune_kernel.RESIDUAL_COLUMNS`): what other datasets' kernels are fitted on."""
    curves, _ = replay_curves(frame, slo_multiplier, slo_reference_max_num_seqs)
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


def _coverage_table(records: list[dict[str, Any]], policy: str, session: str, noisy: bool,
                    confidence: float) -> list[dict[str, Any]]:
    frame = pd.DataFrame(records, columns=["intervals", "quantity", "inside", "width_pct"])
    out = []
    for intervals in (NEXT_RUN, RELIED_ON):
        for quantity in ("throughput", "e2e"):
            part = frame[(frame["intervals"] == intervals) & (frame["quantity"] == quantity)]
            out.append({"policy": policy, "session": session, "noisy": noisy, "intervals": intervals,
                        "quantity": quantity, "n_predicted": len(part),
                        "coverage_pct": 100.0 * float(part["inside"].mean()) if len(part) else float("nan"),
                        "mean_width_pct": float(part["width_pct"].mean()) if len(part) else float("nan"),
                        "confidence_pct": 100.0 * confidence})
    return out


def replay_dataset(frame: pd.DataFrame, architectures: ArchitectureLookup, hw: Hardware, epsilon: float,
                   slo_multiplier: float, slo_reference_max_num_seqs: float | None,
                   held_out_settings: list[HeldOutSetting] | None, priors: dict[str, ReplayPrior],
                   options: ReplayOptions = ReplayOptions(), dataset: str = "dataset",
                   ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Every policy on every curve, noise-free and under `options.seeds` noisy seeds: the replay
    table (`REPLAY_COLUMNS`), the tuning intervals' coverage (`CALIBRATION_COLUMNS`) and one line
    per policy or curve that could not be replayed, and on the noise.

    `priors` maps ``tune_slim`` / ``tune_sim`` to their out-of-sample priors (absent: not replayed);
    each is checked with `ReplayPrior.check_out_of_sample` first, and `options.kernels` must not have
    been fitted on `dataset` (its label)."""
    curves, notes = replay_curves(frame, slo_multiplier, slo_reference_max_num_seqs)
    if not curves:
        raise SplitError("no measured curve of two caps or more to replay")
    scatter, scatter_source = ((options.noise_sd, f"{100 * options.noise_sd:g}% (configured)")
                               if options.noise_sd is not None else repeat_scatter(frame))
    notes.append(f"noise: run-to-run scatter {scatter_source}, {options.seeds} seeds; the reference run that sets "
                 "each SLO is free for every policy")
    noises = [RunNoise()] + [RunNoise(scatter, seed) for seed in range(1, options.seeds + 1)]
    rows, coverage = [], []
    full_caps = {curve.label: full_profile_bca(curve.curve, curve.slo_s, epsilon).batch_cap for curve in curves}
    for noise in noises:
        for curve in curves:
            chosen = full_caps[curve.label] if noise.sd == 0 else noisy_full_profile(curve, epsilon, noise)
            rows.append(_row(curve, ReplayRun("full_profile", PER_WORKLOAD, noise), curve.caps, chosen,
                             full_caps[curve.label]))
            for policy in MODEL_FREE_POLICIES:
                caps, chosen = model_free_caps(curve, epsilon, policy, noise)
                rows.append(_row(curve, ReplayRun(policy, PER_WORKLOAD, noise), caps, chosen, full_caps[curve.label]))
    rows += _paper_plan_rows(frame, curves, architectures, hw, epsilon, held_out_settings, full_caps, notes)
    for policy in TUNE_POLICIES:
        prior = priors.get(policy)
        if prior is None:
            notes.append(f"{policy}: its prior predictor is not available for this dataset; not replayed")
            continue
        prior.check_out_of_sample(frame)
        if dataset in options.kernels.fitted_on:
            raise SplitError(f"{policy}: the residual kernel was fitted on this dataset ({dataset}); a replay must "
                             "choose it on other datasets only")
        settings = options.kernels.settings(predictor_of(policy), options.settings)
        notes.append(f"{policy}: residual kernel " + (
            f"fitted on {', '.join(options.kernels.fitted_on)}" if predictor_of(policy) in options.kernels.kernels
            else "hand-set (no other real dataset in this run to fit it on)"))
        usable = [c for c in curves if c.curve.model in prior.by_model]
        for model, why in prior.missing.items():
            notes.append(f"{policy}: {model} not replayed: {why}")
        models_by_source: dict[str, list[str]] = {}
        for model, source in sorted(prior.by_model.items()):
            models_by_source.setdefault(source.description, []).append(model)
        notes.append(f"{policy}: prior " + "; ".join(f"{description} for {', '.join(models)}"
                                                      for description, models in models_by_source.items()))
        if not usable:
            continue
        for session in SESSIONS:
            groups = [[c] for c in usable] if session == PER_WORKLOAD else [usable]
            for noisy in (False, True):
                records = []
                for noise in (n for n in noises if (n.sd > 0) == noisy):
                    for group in groups:
                        replay = replay_tune(group, prior, ReplayRun(policy, session, noise), epsilon, settings,
                                             full_caps, scatter)
                        rows += replay.rows
                        records += replay.coverage
                        if replay.open_curves:
                            notes.append(f"{policy} ({session}, seed {noise.seed}): the loop stopped "
                                         f"({replay.stopped}) with {len(replay.open_curves)} decision(s) open: "
                                         f"{', '.join(replay.open_curves)}")
                coverage += _coverage_table(records, policy, session, noisy, options.settings.confidence)
    table = pd.DataFrame(rows, columns=list(REPLAY_COLUMNS))
    order = {name: i for i, name in enumerate(POLICIES)}
    session_order = {name: i for i, name in enumerate(SESSIONS)}
    table = table.sort_values(
        ["curve", "policy", "session", "seed"],
        key=lambda s: s.map(order) if s.name == "policy" else (s.map(session_order) if s.name == "session" else s),
        kind="stable").reset_index(drop=True)
    return table, pd.DataFrame(coverage, columns=list(CALIBRATION_COLUMNS)), notes


def _paper_plan_rows(frame: pd.DataFrame, curves: list[ReplayCurve], architectures: ArchitectureLookup,
                     hw: Hardware, epsilon: float, held_out_settings: list[HeldOutSetting] | None,
                     full_caps: dict[str, float], notes: list[str]) -> list[dict[str, Any]]:
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
        rows.append(_row(curve, ReplayRun("paper_plan", PER_DATASET), caps, chosen, full_caps[curve.label]))
    return rows
