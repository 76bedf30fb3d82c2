"""The layout decision replayed on measured curves: each workload (accelerator, model, IL, OL, on one
engine: the vLLM version its runs record, `layout_workloads`) measured at several parallel layouts
(tensor-parallel size x data-parallel size, a curve over the caps at each), and the (layout, cap) of
most total tokens/s **per GPU** within the SLOs chosen by each way of searching, against what the
recorded curves say is best.

**The truth** (`best`): Eq. 13 on every recorded run of each layout (`full_profile_choice`, noise-free),
then the layout whose choice has the most tokens/s per GPU (a tie: fewer GPUs). A workload no layout
of which meets the SLOs has no best; a policy that chooses nothing there has no regret.

**The policies** (`LAYOUT_POLICIES`), each choosing the layout of most *measured* tokens/s per GPU
among the caps it chose per layout (through the replay's run-to-run noise, `RunNoise`):

- ``exhaustive``: every (layout, cap) measured, Eq. 13 per layout;
- ``bisection_per_layout``: the bisection over caps at each layout (the bound's yardstick,
  `slim.paper.replay.searches.bisect_caps`);
- ``tune_per_layout``: `slim tune` at each layout on its own, from an out-of-sample prior
  (`TabledPrior`; `slim.paper.replay.tune_policy.replay_tune`);
- ``tune_layouts``: `slim tune --tensor-parallel-sizes --data-parallel-sizes`, one session deciding
  across the layouts (`slim.tune.layouts`: layouts that cannot beat the chosen one per GPU take no
  more runs, the bound pooled over a bisection per layout), from the same prior; on workloads whose
  layouts are tensor x data parallel (no pipeline parallelism), one curve each;
- ``hindsight_layout``: the bisection at the layout that turned out best only (a user who knew the
  layout);
- ``floor``: the best (layout, cap) measured alone (nothing that must measure its choice spends less).

**Scores** (`LAYOUT_COLUMNS`): ``regret_pct`` is ``100 (1 - T_rec(chosen) / gpus(chosen) / best per
GPU)`` on the recorded curves (100 where a best exists and the policy chose nothing), ``slo_violated``
whether the chosen run's recorded metrics break an SLO; GPU time is each run's duration times the GPUs
its server uses (`ReplayCurve.run_gpu_seconds`).

The same replay scores each layout's cap decision on its own (`cap_rows`: `slim.paper.replay.scoring`'s
rows with the layout named), the tuning replay of the models beyond the paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.decision.candidates import THROUGHPUT
from slim.decision.layouts import Layout
from slim.model.equations import ArchitectureLookup
from slim.paper.replay.curves import ReplayCurve, RunNoise, SloKind, repeat_scatter, replay_curves
from slim.paper.replay.priors import ReplayPrior, tabled_replay_prior
from slim.paper.replay.scoring import OUT_OF_SAMPLE, REPLAY_COLUMNS, ReplayRun, replay_row
from slim.paper.replay.searches import MODEL_FREE_SEARCHES, full_profile_choice, model_free_caps, slo_binds
from slim.paper.replay.tune_policy import WORKLOAD, candidates_of, curve_workload, oracle, replay_tune
from slim.specs.hardware import Hardware
from slim.traces.verdict import recorded_vllm_version
from slim.tune.belief import LayoutUncertainty, roofline_gpu_seconds
from slim.tune.layout_uncertainty import (
    CONFIGURATION,
    LOG_RESIDUAL,
    fit_layout_uncertainty,
    interval_coverage,
    layout_residual_sets,
)
from slim.tune.layouts import layout_decisions
from slim.tune.loop import run_loop
from slim.tune.server_sizes import data_parallel_sizes, expert_parallel_enabled, layout_sizes, tensor_parallel_sizes
from slim.tune.session import TuneSession, TuneSettings

LAYOUT_POLICIES = ("exhaustive", "bisection_per_layout", "tune_per_layout", "tune_layouts", "tune_layouts_fitted",
                   "hindsight_layout", "floor")
LAYOUT_COLUMNS = ("slo_kind", "workload", "layouts", "policy", "seed", "noise", "runs", "gpu_seconds",
                  "exhaustive_gpu_seconds", "bisection_gpu_seconds", "floor_gpu_seconds", "chosen_layout",
                  "chosen_cap", "best_layout", "best_cap", "regret_pct", "slo_violated")
CAP_COLUMNS = ("layout", *REPLAY_COLUMNS)
SINGLE_LAYOUT = "single layout: "
"""How `layout_workloads` marks a workload with a curve at fewer than two layouts (counted, not listed)."""
TUNE_POLICY = "tune_sim"
"""The per-layout tuning policy's name in `cap_rows` (its prior is SIM's zero-shot prediction)."""


@dataclass(frozen=True)
class LayoutCurve:
    """One layout of a workload: its name, the GPUs one server of it uses and its measured curve."""

    layout: str
    gpus: int
    curve: ReplayCurve

    def per_gpu(self, values: dict[str, float]) -> float:
        return values[THROUGHPUT] / self.gpus


@dataclass(frozen=True)
class LayoutWorkload:
    """A workload's layouts (ascending GPUs) under one SLO kind."""

    label: str
    layouts: tuple[LayoutCurve, ...]


def _int(value: Any, default: int = 1) -> int:
    return int(value) if value is not None and np.isfinite(float(value)) else default


def engine_versions(frame: pd.DataFrame) -> pd.Series:
    """Each run's vLLM version as its curve is keyed by: the recorded one
    (`slim.traces.verdict.recorded_vllm_version`), or ``""`` where none is recorded (a run that records
    no version is not known to share an engine with one that does)."""
    if col.VLLM_VERSION not in frame:
        return pd.Series("", index=frame.index, dtype=object)
    return frame[col.VLLM_VERSION].map(lambda value: recorded_vllm_version(value) or "").astype(object)


def _engine_label(version: str) -> str:
    return f"vLLM {version}" if version else "vLLM version not recorded"


def layout_workloads(frame: pd.DataFrame, kind: SloKind) -> tuple[list[LayoutWorkload], list[str]]:
    """The usable runs' workloads with two layouts or more under `kind`, and one line for each
    workload or layout that cannot be replayed (fewer than two caps, a metric not judged).

    A workload is one engine's: runs of one (accelerator, model, lengths) that record different vLLM
    versions, or one a version and another none (`engine_versions`), were measured on different
    servers, so they are different workloads, each named with its version where the runs hold more
    than one."""
    frame = frame.copy()
    frame["_tp"], frame["_dp"] = tensor_parallel_sizes(frame), data_parallel_sizes(frame)
    frame["_ep"], frame["_engine"] = expert_parallel_enabled(frame), engine_versions(frame)
    workloads, skipped, index = [], [], 0
    keys = [col.HARDWARE, *col.WORKLOAD_KEYS]
    engines = frame.groupby(keys)["_engine"].transform("nunique")
    for (hardware, model, il, ol, engine), rows in frame.groupby([*keys, "_engine"], sort=True):
        label = f"{model} IL {il:g} OL {ol:g} on {hardware}"
        if engines[rows.index[0]] > 1:
            label += f" ({_engine_label(engine)})"
        layouts = []
        for (tp, dp, ep), runs in rows.groupby(["_tp", "_dp", "_ep"], sort=True):
            curves, lines = replay_curves(runs.drop(columns=["_tp", "_dp", "_ep", "_engine"]), kind)
            gpus = _int(runs[col.GPUS_PER_SERVER].iloc[0], tp * dp) if col.GPUS_PER_SERVER in runs else tp * dp
            name = Layout(tp, gpus, dp, bool(ep)).label      # TP 4; TP 4 x DP 4; " (EP 16)" with experts spread
            skipped += [f"{label} {name}: {line}" for line in lines]
            for curve in curves:
                layouts.append(LayoutCurve(name, gpus, replace(curve, index=index)))
                index += 1
        if len(layouts) < 2:
            skipped.append(f"{SINGLE_LAYOUT}{label}")
            continue
        workloads.append(LayoutWorkload(label, tuple(sorted(layouts, key=lambda lc: (lc.gpus, lc.layout)))))
    return workloads, skipped


def choose_layout(layouts: Sequence[LayoutCurve], caps: Sequence[float],
                  values: Sequence[dict[str, float] | None]) -> int:
    """The layout of most tokens/s per GPU among each layout's chosen cap (NaN: none) at `values`
    (what the policy measured there); a tie goes to fewer GPUs. -1: no layout has a choice."""
    best, best_key = -1, None
    for i, (layout, cap, measured) in enumerate(zip(layouts, caps, values)):
        if not np.isfinite(cap) or measured is None:
            continue
        key = (layout.per_gpu(measured), -layout.gpus)
        if best_key is None or key > best_key:
            best, best_key = i, key
    return best


@dataclass(frozen=True)
class LayoutTruth:
    """The recorded curves' best (layout index, cap; -1 / NaN: none meets the SLOs) and its tokens/s per GPU."""

    layout: int
    cap: float
    per_gpu: float


def layout_truth(workload: LayoutWorkload, epsilon: float) -> LayoutTruth:
    caps = [full_profile_choice(lc.curve, epsilon) for lc in workload.layouts]
    values = [lc.curve.recorded_values(c) if np.isfinite(c) else None for lc, c in zip(workload.layouts, caps)]
    best = choose_layout(workload.layouts, caps, values)
    if best < 0:
        return LayoutTruth(-1, math.nan, math.nan)
    return LayoutTruth(best, caps[best], workload.layouts[best].per_gpu(values[best]))


def _score(workload: LayoutWorkload, truth: LayoutTruth, kind: str, policy: str, noise: RunNoise,
           chosen: int, chosen_cap: float, runs: int, spent: float, costs: dict[str, float]) -> dict[str, Any]:
    """One policy's row (`LAYOUT_COLUMNS`): its charged `runs` and their GPU time `spent`."""
    if chosen >= 0:
        lc = workload.layouts[chosen]
        recorded = lc.curve.recorded_values(chosen_cap)
        regret = 100.0 * (1.0 - lc.per_gpu(recorded) / truth.per_gpu) if truth.layout >= 0 else math.nan
        violated = not lc.curve.meets(recorded)
    else:
        regret, violated = (100.0 if truth.layout >= 0 else 0.0), False
    return {"slo_kind": kind, "workload": workload.label,
            "layouts": ", ".join(lc.layout for lc in workload.layouts), "policy": policy, "seed": noise.seed,
            "noise": noise.sd, "runs": runs, "gpu_seconds": spent, "exhaustive_gpu_seconds": costs["exhaustive"],
            "bisection_gpu_seconds": costs["bisection"], "floor_gpu_seconds": costs["floor"],
            "chosen_layout": workload.layouts[chosen].layout if chosen >= 0 else None,
            "chosen_cap": chosen_cap if chosen >= 0 else math.nan,
            "best_layout": workload.layouts[truth.layout].layout if truth.layout >= 0 else None,
            "best_cap": truth.cap, "regret_pct": regret, "slo_violated": violated}


def _decide(workload: LayoutWorkload, caps_per_layout: Sequence[float], noise: RunNoise) -> tuple[int, float]:
    """Choose the layout from each layout's chosen cap as measured through `noise`."""
    values = [noise.observe(lc.curve, c) if np.isfinite(c) else None
              for lc, c in zip(workload.layouts, caps_per_layout)]
    chosen = choose_layout(workload.layouts, caps_per_layout, values)
    return chosen, (caps_per_layout[chosen] if chosen >= 0 else math.nan)


@dataclass(frozen=True)
class LayoutReplayInputs:
    """What the tuning policy needs: its out-of-sample prior (None: ``tune_per_layout`` is not
    replayed), the settings, the architectures and the accelerator of the bound's roofline; and the
    scales across sizes fitted out of sample (`fitted_layouts`: ``tune_layouts_fitted`` runs tune across
    layouts with them beside ``tune_layouts``'s shipped `LayoutUncertainty`; None: not replayed)."""

    prior: ReplayPrior | None
    settings: TuneSettings
    architectures: ArchitectureLookup
    hardware: dict[str, Hardware]
    scatter: float
    fitted_layouts: LayoutUncertainty | None = None


def replay_workload(workload: LayoutWorkload, kind: SloKind, noise: RunNoise, epsilon: float,
                    tuning: LayoutReplayInputs) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every policy on one workload through `noise`: its layout rows and each layout's cap rows."""
    truth = layout_truth(workload, epsilon)
    layouts = workload.layouts
    full = [full_profile_choice(lc.curve, epsilon, noise) for lc in layouts]
    truth_caps = [full_profile_choice(lc.curve, epsilon) for lc in layouts]
    binds = [slo_binds(lc.curve, epsilon) for lc in layouts]
    cap_rows: list[dict[str, Any]] = []
    searched: dict[str, list[tuple[list[float], float]]] = {}
    for policy in MODEL_FREE_SEARCHES:
        searched[policy] = [model_free_caps(lc.curve, epsilon, policy, noise) for lc in layouts]
    for i, lc in enumerate(layouts):
        run = ReplayRun("full_profile", noise=noise, slo_kind=kind.name)
        cap_rows.append({"layout": lc.layout, **replay_row(lc.curve, run, lc.curve.caps, full[i], truth_caps[i],
                                                           binds[i])})
        for policy, outcomes in searched.items():
            caps, chosen = outcomes[i]
            cap_rows.append({"layout": lc.layout, **replay_row(lc.curve, replace(run, policy=policy), caps, chosen,
                                                               truth_caps[i], binds[i])})
    costs = {"exhaustive": sum(lc.curve.gpu_seconds(lc.curve.caps) for lc in layouts),
             "bisection": sum(lc.curve.gpu_seconds(caps) for lc, (caps, _) in zip(layouts, searched["bisect"])),
             "floor": (layouts[truth.layout].curve.gpu_seconds([truth.cap]) if truth.layout >= 0 else 0.0)}
    rows = []

    def add(policy: str, chosen: int, cap: float, runs: int, spent: float) -> None:
        rows.append(_score(workload, truth, kind.name, policy, noise, chosen, cap, runs, spent, costs))

    def count(caps_per_layout: dict[int, list[float]]) -> int:
        return sum(len(layouts[i].curve.charged(caps)) for i, caps in caps_per_layout.items())

    add("exhaustive", *_decide(workload, full, noise), count({i: list(lc.curve.caps) for i, lc in enumerate(layouts)}),
        costs["exhaustive"])
    bisected = searched["bisect"]
    add("bisection_per_layout", *_decide(workload, [c for _, c in bisected], noise),
        count({i: caps for i, (caps, _) in enumerate(bisected)}), costs["bisection"])
    tuned = _tune_per_layout(workload, kind, noise, epsilon, tuning, truth_caps, binds)
    if tuned is not None:
        cap_rows += tuned
        add("tune_per_layout", *_decide(workload, [float(r["chosen_cap"]) for r in tuned], noise),
            sum(int(r["runs"]) for r in tuned), sum(float(r["gpu_seconds"]) for r in tuned))
    across = _tune_across_layouts(workload, kind, noise, epsilon, tuning, LayoutUncertainty())
    if across is not None:
        add("tune_layouts", *across)
    fitted = (_tune_across_layouts(workload, kind, noise, epsilon, tuning, tuning.fitted_layouts)
              if tuning.fitted_layouts is not None else None)
    if fitted is not None:
        add("tune_layouts_fitted", *fitted)
    if truth.layout >= 0:
        caps, cap = bisected[truth.layout]
        hindsight = [cap if i == truth.layout else math.nan for i in range(len(layouts))]
        add("hindsight_layout", *_decide(workload, hindsight, noise), count({truth.layout: caps}),
            layouts[truth.layout].curve.gpu_seconds(caps))
        add("floor", truth.layout, truth.cap, count({truth.layout: [truth.cap]}), costs["floor"])
    return rows, cap_rows


def _tune_per_layout(workload: LayoutWorkload, kind: SloKind, noise: RunNoise, epsilon: float,
                     tuning: LayoutReplayInputs, truth_caps: list[float],
                     binds: list[bool]) -> list[dict[str, Any]] | None:
    """`slim tune` at each layout on its own (one session per layout): each layout's cap row (its
    choice, runs and GPU time charged); None without a prior for every layout."""
    prior = tuning.prior
    if prior is None or any(lc.curve.curve.model not in prior.by_model for lc in workload.layouts):
        return None
    cap_rows = []
    run = ReplayRun(TUNE_POLICY, noise=noise, slo_kind=kind.name, prior=OUT_OF_SAMPLE)
    for i, lc in enumerate(workload.layouts):
        hw = tuning.hardware[str(lc.curve.rows[col.HARDWARE].iloc[0])]
        replay = replay_tune([lc.curve], prior, run, epsilon, tuning.settings, {lc.curve.label: truth_caps[i]},
                             {lc.curve.label: binds[i]}, tuning.architectures, hw, tuning.scatter)
        cap_rows.append({"layout": lc.layout, **replay.rows[0]})
    return cap_rows


def _tune_across_layouts(workload: LayoutWorkload, kind: SloKind, noise: RunNoise, epsilon: float,
                         tuning: LayoutReplayInputs, across: LayoutUncertainty) -> tuple[int, float, int, float] | None:
    """`slim tune --tensor-parallel-sizes --data-parallel-sizes` on the workload (one session, a
    workload per layout, the decision across layouts and its pooled bound: `slim.tune.layouts`; the
    belief's terms across layouts `across`): the chosen layout's index (-1: none), its cap, the
    charged runs and their GPU time; None without a prior for the model, or where a layout is not
    one of tune's (a server of other GPUs than tensor x data parallel, pipeline parallelism) or two
    curves share one layout."""
    prior, layouts = tuning.prior, workload.layouts
    sizes = [layout_sizes(lc.curve.rows.iloc[:1])[0] for lc in layouts]
    if (prior is None or layouts[0].curve.curve.model not in prior.by_model or len(set(sizes)) < len(sizes)
            or any(lc.gpus != t * d for lc, (t, d) in zip(layouts, sizes))):
        return None
    curves = [lc.curve for lc in layouts]
    workloads = [curve_workload(curve, epsilon, t, d) for curve, (t, d) in zip(curves, sizes)]
    candidates = candidates_of(curves)
    candidates[WORKLOAD] = np.concatenate([[w.label] * len(c.rows) for w, c in zip(workloads, curves)])
    metrics = tuple({m.name: m for c in curves for m in c.metrics}.values())
    hw = tuning.hardware[str(curves[0].rows[col.HARDWARE].iloc[0])]
    session = TuneSession(workloads, candidates, prior.predict(candidates, metrics),
                          replace(tuning.settings, layouts=across),
                          run_floor_gpu_seconds=roofline_gpu_seconds(candidates, tuning.architectures, hw))
    outcome = run_loop(session, oracle(curves, noise, tuning.scatter, [w.label for w in workloads]))
    decision = layout_decisions(session)[workloads[0].curve]
    runs = sum(1 for step in outcome.steps if step.gpu_seconds > 0)
    spent = float(sum(step.gpu_seconds for step in outcome.steps))
    if decision.chosen is None or not np.isfinite(decision.chosen.batch_cap):
        return -1, math.nan, runs, spent
    return [w.layout for w in workloads].index(decision.chosen.layout), float(decision.chosen.batch_cap), runs, spent


def replay_layouts(frame: pd.DataFrame, kinds: Sequence[SloKind], epsilon: float, noises: Sequence[RunNoise],
                   tuning: LayoutReplayInputs) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Every policy on every workload of `frame` with several layouts, under every kind and noise:
    the layout table (`LAYOUT_COLUMNS`), the per-layout cap table (`CAP_COLUMNS`) and one line per
    workload or layout not replayed."""
    rows, cap_rows, notes = [], [], []
    if tuning.prior is None:
        notes.append("tune_per_layout: no out-of-sample prior; not replayed")
    else:
        missing = sorted(tuning.prior.missing.items())
        if missing:
            notes.append(f"tune_per_layout: not replayed on {', '.join(model for model, _ in missing)} (no prior: "
                         f"{missing[0][1]}" + (", and the like" if len(missing) > 1 else "") + ")")
    skipped_by_line: dict[str, list[str]] = {}
    for kind in kinds:
        workloads, skipped = layout_workloads(frame, kind)
        for line in skipped:
            skipped_by_line.setdefault(line, []).append(kind.name)
        for noise in noises:
            for workload in workloads:
                layout_part, cap_part = replay_workload(workload, kind, noise, epsilon, tuning)
                rows += layout_part
                cap_rows += cap_part
    single = [line.removeprefix(SINGLE_LAYOUT) for line in skipped_by_line if line.startswith(SINGLE_LAYOUT)]
    notes += [f"{line} (SLO kinds: {', '.join(names)})" if len(names) < len(kinds) else line
              for line, names in skipped_by_line.items() if not line.startswith(SINGLE_LAYOUT)]
    if single:
        notes.append(f"{len(single)} workload(s) with a curve at fewer than two layouts: no layout decision "
                     f"(e.g. {single[0]})")
    return (pd.DataFrame(rows, columns=list(LAYOUT_COLUMNS)), pd.DataFrame(cap_rows, columns=list(CAP_COLUMNS)),
            notes)


LAYOUT_RESIDUAL_QUANTITIES = ("total_token_throughput", "mean_tpot_ms")
"""The predictions' quantities whose residuals across sizes fit `fitted_layout_uncertainty`."""


def layout_residuals(predictions: pd.DataFrame, prefix: str = "zero_shot_") -> pd.DataFrame:
    """The log residuals ``log(measured / predicted)`` of the predictions table (`prefix`'s prediction,
    data-parallel 1, simulated) per run and quantity of `LAYOUT_RESIDUAL_QUANTITIES`, each named by its
    configuration across sizes: dataset, accelerator, model, benchmark mode, lengths, requests in flight,
    quantity (a tensor-parallel size not recorded is 1)."""
    usable = predictions[(predictions["sim_status"] == "ok")
                         & (predictions[col.DATA_PARALLEL].fillna(1).astype(int) == 1)]
    if usable.empty:
        return pd.DataFrame(columns=[CONFIGURATION, col.TENSOR_PARALLEL, LOG_RESIDUAL])
    key = usable[["dataset", col.HARDWARE, col.MODEL, col.BENCHMARK_MODE, "input_len_nominal", "output_len_nominal",
                  "in_flight"]]
    configuration = key.astype(str).agg("|".join, axis=1).to_numpy(dtype=str)
    parts = [pd.DataFrame({CONFIGURATION: np.char.add(configuration, f"|{quantity}"),
                           col.TENSOR_PARALLEL: tensor_parallel_sizes(usable).astype(float),
                           LOG_RESIDUAL: np.log(usable[f"measured_{quantity}"].to_numpy(dtype=float)
                                                / usable[f"{prefix}{quantity}"].to_numpy(dtype=float))})
             for quantity in LAYOUT_RESIDUAL_QUANTITIES]
    return pd.concat(parts, ignore_index=True)


def fitted_layout_uncertainty(predictions: pd.DataFrame, held_out: str, noise_sd: float) -> LayoutUncertainty | None:
    """`slim.tune.layout_uncertainty.fit_layout_uncertainty` on the zero-shot residuals of every dataset
    of `predictions` but `held_out` (out of sample); None where they hold no configuration at two sizes."""
    sets = layout_residual_sets(layout_residuals(predictions[predictions["dataset"] != held_out]))
    return fit_layout_uncertainty(sets, noise_sd) if sets else None


def layout_coverage_line(predictions: pd.DataFrame, dataset: str, noise_sd: float,
                         fitted: LayoutUncertainty | None) -> str | None:
    """How often the prior's 90% interval across sizes holds the dataset's own zero-shot residual at a size
    before it is measured (`slim.tune.layout_uncertainty.interval_coverage`), with the shipped scales and,
    where there are some, those fitted on the other datasets; None where no configuration has two sizes."""
    sets = layout_residual_sets(layout_residuals(predictions[predictions["dataset"] == dataset]))
    if not sets:
        return None
    parts, pairs = [], 0
    for name, scales in (("the shipped scales", LayoutUncertainty()),
                         ("the scales fitted on the other datasets", fitted)):
        if scales is None:
            continue
        found = interval_coverage(sets, scales, noise_sd)
        pairs = found.pairs
        parts.append(f"{100 * found.covered:.0f}% with {name} (reach x{math.exp(found.mean_half_width):.2f} either way "
                     "on average)")
    return (f"{dataset}: the prior's 90% interval at a size not yet measured, given the smallest size's run, holds "
            f"the residual found there in {'; '.join(parts)}, of {pairs} (configuration, size) pairs")


def replay_dataset_layouts(runs: pd.DataFrame, predictions: pd.DataFrame, dataset: str,
                           kinds: Sequence[SloKind], epsilon: float, seeds: int, settings: TuneSettings,
                           architectures: ArchitectureLookup, hardware: dict[str, Hardware]
                           ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """`replay_layouts` on a dataset's usable runs, accelerator by accelerator (tune's prior: each
    model's zero-shot prediction in `predictions`, `slim.paper.replay.priors.tabled_replay_prior`),
    noise-free and under `seeds` noisy seeds at the dataset's repeat scatter; the tables carry the
    dataset's name."""
    runs = runs[runs[col.STATUS] == "ok"]
    scatter = repeat_scatter(runs)[0]
    noises = [RunNoise()] + [RunNoise(scatter, seed) for seed in range(1, seeds + 1)]
    layouts, caps, notes = [], [], []
    fitted = fitted_layout_uncertainty(predictions, dataset, settings.kernel.noise_sd)
    if fitted is None:
        notes.append(f"{dataset}: tune_layouts_fitted: no other dataset measures a configuration at two sizes")
    else:
        notes.append(f"{dataset}: tune_layouts_fitted: the scales across sizes fitted on the other datasets' "
                     f"zero-shot residuals: slope {fitted.slope_sd_per_doubling:g} per doubling, offset "
                     f"{fitted.offset_sd:g} (tune_layouts: the shipped {LayoutUncertainty().slope_sd_per_doubling:g} "
                     f"and {LayoutUncertainty().offset_sd:g})")
    coverage = layout_coverage_line(predictions, dataset, settings.kernel.noise_sd, fitted)
    notes += [coverage] if coverage is not None else []
    for name, on_hardware in runs.groupby(col.HARDWARE, sort=True):
        prior = tabled_replay_prior(predictions[predictions["dataset"] == dataset], on_hardware, "zero_shot_",
                                    str(name), "SIM zero-shot (constants calibrated on the other models)")
        inputs = LayoutReplayInputs(prior, settings, architectures, hardware, scatter, fitted)
        part, cap_part, lines = replay_layouts(on_hardware, kinds, epsilon, noises, inputs)
        layouts.append(part.assign(dataset=dataset))
        caps.append(cap_part.assign(dataset=dataset))
        notes += [f"{dataset}: {line}" for line in lines]
    return pd.concat(layouts, ignore_index=True), pd.concat(caps, ignore_index=True), notes
