"""Evaluating the batching configuration advisor on measured curves: the paper's
Table V (SLIM-BCA vs full-profile BCA), Table VI (profiling cost), the Fig. 12
sensitivity grid, the Fig. 13 memory breakdown, and a side-by-side of the knee
advisor, full-profile BCA and SLIM-BCA on every measured curve.

The advisor itself lives in `slim.advisor`: Eq. 13 (`slim.advisor.bca`), the measured
curves and full-profile BCA on them (`slim.advisor.measured`), and the decision on a predictor's
prediction (`slim.advisor.predictor_bca`), for every predictor the registry offers `slim advise`.
This module only decides what each flavour sees:

* full-profile BCA: the target's measured curve at its profiled ``--max-num-seqs``;
* SLIM-BCA: SLIM fitted on some *other* curves, predicting the target at the same
  candidate ``--max-num-seqs`` values;
* SIM-BCA (given the dataset's cached simulator schedules, real data only): the simulator
  calibrated on the same other curves, simulating the target at the same candidates and
  refusing those it predicts to preempt (`slim.advisor.sim_bca`).

Both are judged on the measured target curve (throughput and E2E interpolated in
``log B`` at the chosen cap), against one SLO computed once from the measured target
curve: ``SLO = multiplier x E2E_meas(reference)`` (reference default: the smallest
profiled point).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pandas as pd

from slim import columns as col
from slim.advisor.bca import (
    BcaResult,
    interpolate_log_batch,
    slo_violation_pct,
    throughput_retained_pct,
    throughput_variation_pct,
)
from slim.advisor.measured import MeasuredCurve, curve_from_rows, full_profile_bca, measured_curves
from slim.advisor.predictor_bca import Target, decider, predicted_bca
from slim.decision.candidates import THROUGHPUT, Estimates, candidate_view
from slim.decision.rule import recommend
from slim.errors import SplitError
from slim.gpu.kv_memory import default_kv_reservation_bytes, kv_bytes_needed, kv_reservation_from_blocks, weight_bytes
from slim.gpu.roofline import recommend_knee
from slim.model.equations import ArchitectureLookup
from slim.paper.advisor_study_config import CurveSelection, Table5Experiment
from slim.paper.splits import HeldOutSetting, select_rows
from slim.predictors import RegisteredPredictor, TrainingRuns, advise_predictors
from slim.sim.schedules import ScheduleTable
from slim.specs.architecture import Architecture
from slim.specs.hardware import GIB, Hardware
from slim.specs.slo import IN_BATCH_E2E

CONFIDENT_PREFIX = "Conf. "
"""Prefix of Table V's columns for SLIM-BCA at the study's confidence (``B SLIM conf.``,
``Conf. Thr. var (%)``, ``Conf. SLO viol. (%)``)."""
CONFIDENT_CAP = "B SLIM conf."

FULL_PROFILE_BCA = "Full-profile BCA"

# --- measured curves -------------------------------------------------------------------

def single_curve_rows(frame: pd.DataFrame, selection: CurveSelection) -> pd.DataFrame:
    """The runs of the one measured curve a selection picks; `SplitError` if it picks none or several."""
    rows = select_rows(frame, selection.select)
    curves = rows.groupby(list(col.WORKLOAD_KEYS)).ngroups if not rows.empty else 0
    if curves != 1:
        raise SplitError(f"selection '{selection.label}' ({selection.select}) matches {curves} measured "
                         "curves; it must pick exactly one (model, input length, output length)")
    return rows


def picks_one_curve(frame: pd.DataFrame, selection: CurveSelection) -> bool:
    """Whether a selection picks exactly one measured curve of `frame`."""
    rows = select_rows(frame, selection.select)
    return not rows.empty and rows.groupby(list(col.WORKLOAD_KEYS)).ngroups == 1


def available_curves(frame: pd.DataFrame, selections: tuple[CurveSelection, ...],
                     artefact: str) -> tuple[tuple[CurveSelection, ...], list[str]]:
    """The selections that pick one measured curve of this dataset, and one line for each that
    does not (a curve the accelerator was not measured on is absent from `artefact`, not an error)."""
    kept = tuple(s for s in selections if picks_one_curve(frame, s))
    return kept, [f"{artefact}: '{s.label}' is absent: the dataset has no single measured curve {s.select}"
                  for s in selections if s not in kept]


def available_experiments(frame: pd.DataFrame, experiments: tuple[Table5Experiment, ...]
                          ) -> tuple[tuple[Table5Experiment, ...], list[str]]:
    """Table V's experiments whose target is one measured curve and whose every training set
    selects runs of this dataset, and one line for each that is left out."""
    kept, lines = [], []
    for experiment in experiments:
        empty = [t.label for t in experiment.training if select_rows(frame, t.select).empty]
        if not picks_one_curve(frame, experiment.target):
            lines.append(f"Table V: '{experiment.target.label}' is absent: the dataset has no single measured curve "
                         f"{experiment.target.select}")
        elif empty:
            lines.append(f"Table V: '{experiment.target.label}' is absent: its training set(s) {empty} select no run")
        else:
            kept.append(experiment)
    return tuple(kept), lines


def single_curve(frame: pd.DataFrame, selection: CurveSelection) -> MeasuredCurve:
    """The one measured curve a selection picks; `SplitError` if it picks none or several."""
    return curve_from_rows(single_curve_rows(frame, selection))


def study_advisors(sim_schedules: ScheduleTable | None) -> list[RegisteredPredictor]:
    """The registered predictors the study compares with full-profile BCA (`slim advise`'s), in
    registry order: those that need the simulator's schedules only where there are some."""
    return [entry for entry in advise_predictors().values() if not entry.needs_schedules or sim_schedules is not None]


def advisor_column_prefix(position: int, entry: RegisteredPredictor) -> str:
    """Table V's prefix for an advisor's ``Thr. var (%)`` and ``SLO viol. (%)``: none for the paper's own
    (the first), the predictor's name for every further one (``SIM Thr. var (%)``)."""
    return "" if position == 0 else f"{entry.name} "


def _measured(curve: MeasuredCurve, values: np.ndarray, batch_cap: float) -> float:
    if np.isnan(batch_cap) or not curve.max_num_seqs[0] <= batch_cap <= curve.max_num_seqs[-1]:
        return float("nan")
    return float(interpolate_log_batch(curve.max_num_seqs, values, batch_cap)[0])


def kv_gib(arch: Architecture, batch_cap: float, curve: MeasuredCurve) -> float:
    """KV memory (GiB) of `batch_cap` sequences at the curve's mean lengths, block-rounded."""
    if np.isnan(batch_cap):
        return float("nan")
    return float(kv_bytes_needed(arch, batch_cap, curve.input_len_mean, curve.output_len_mean,
                                 curve.block_size)) / GIB


# --- Table V: decision variation as profiling curves are added --------------------------

def table5(frame: pd.DataFrame, experiments: tuple[Table5Experiment, ...], architectures: ArchitectureLookup,
           hw: Hardware, epsilon: float, slo_multiplier: float,
           slo_reference_max_num_seqs: float | None = None,
           sim_schedules: ScheduleTable | None = None, confidence: float | None = None) -> pd.DataFrame:
    """One row per (target, training set): each study advisor's choice (`study_advisors`: SLIM-BCA,
    and with `sim_schedules` SIM-BCA, each fitted on the training set; `slim.advisor.predictor_bca`)
    vs the full-profile choice (columns ``B SLIM``, ``Thr. var (%)``, ``SLO viol. (%)``; ``B SIM``,
    ``SIM Thr. var (%)``, ``SIM SLO viol. (%)``: `advisor_column_prefix`), and with `confidence` the
    choice of each curve advisor holding the SLO on the one-sided upper bound of E2E at that
    confidence (columns `CONFIDENT_CAP`, ``Conf. Thr. var (%)``, ``Conf. SLO viol. (%)``, same fit).

    ``Thr. var`` = signed ``100 (T_meas(B_slim) - T_meas(B_full)) / T_meas(B_full)``;
    ``SLO viol.`` = ``100 max(0, E2E_meas(B_slim) - SLO) / SLO``. The SLO is computed
    once from the measured target curve and shared by every flavour.
    """
    rows = []
    advisors = study_advisors(sim_schedules)
    for experiment in experiments:
        target_rows = single_curve_rows(frame, experiment.target)
        curve = curve_from_rows(target_rows)
        target = Target.of_curve(curve, target_rows)
        slo_s = curve.slo_s(slo_multiplier, slo_reference_max_num_seqs)
        full = full_profile_bca(curve, slo_s, epsilon)
        for training in experiment.training:
            train = select_rows(frame, training.select)
            row = {
                "target": experiment.target.label,
                "training set": training.label,
                "N points": len(train),
                "SLO (s)": slo_s,
                "B full": full.batch_cap,
            }
            for position, entry in enumerate(advisors):
                # The band needs the training-equivalent fits; the chosen fit is the same either way.
                banded = confidence is not None and not entry.simulated
                fitted = entry.predictor.fit(TrainingRuns(train, architectures, hw, sim_schedules,
                                                          f"table5: {training.label}", sample_valley=banded))
                cap = predicted_bca(entry, fitted, target, curve.max_num_seqs, slo_s, epsilon).decision.batch_cap
                prefix = advisor_column_prefix(position, entry)
                row.update({f"B {entry.name}": cap, **_decision_quality(curve, cap, full.batch_cap, slo_s, prefix)})
                if banded:
                    confident = predicted_bca(entry, fitted, target, curve.max_num_seqs, slo_s, epsilon,
                                              confidence).decision.batch_cap
                    row.update({f"B {entry.name} conf.": confident,
                                **_decision_quality(curve, confident, full.batch_cap, slo_s,
                                                    prefix + CONFIDENT_PREFIX)})
            rows.append(row)
    return pd.DataFrame(rows)


def confidence_summary(decisions: pd.DataFrame) -> pd.DataFrame:
    """Per Table V target (`table5` with a confidence): how often the confident SLIM-BCA removes
    plain SLIM-BCA's SLO violation, and the measured throughput each gives against full-profile BCA.

    Columns: ``target``, ``training sets``, ``plain violations`` (rows whose SLIM-BCA cap
    violates the SLO on measured data), ``removed`` (of those, rows whose confident cap does
    not), ``confident violations``, ``confident infeasible`` (no cap's bound meets the SLO),
    ``changed caps``, and the mean over training sets of ``Thr. var (%)`` and of ``Conf. Thr.
    var (%)`` (signed measured throughput against full-profile BCA's cap; infeasible rows left out).
    """
    rows = []
    for target, group in decisions.groupby("target", sort=False):
        plain_violates = group["SLO viol. (%)"] > 0
        confident_violates = group[f"{CONFIDENT_PREFIX}SLO viol. (%)"] > 0
        rows.append({
            "target": target,
            "training sets": len(group),
            "plain violations": int(plain_violates.sum()),
            "removed": int((plain_violates & ~confident_violates & group[CONFIDENT_CAP].notna()).sum()),
            "confident violations": int(confident_violates.sum()),
            "confident infeasible": int(group[CONFIDENT_CAP].isna().sum()),
            "changed caps": int((~((group[CONFIDENT_CAP] == group["B SLIM"])
                                   | (group[CONFIDENT_CAP].isna() & group["B SLIM"].isna()))).sum()),
            "mean Thr. var (%)": float(group["Thr. var (%)"].mean()),
            f"mean {CONFIDENT_PREFIX}Thr. var (%)": float(group[f"{CONFIDENT_PREFIX}Thr. var (%)"].mean()),
        })
    return pd.DataFrame(rows)


def _decision_quality(curve: MeasuredCurve, cap: float, full_cap: float, slo_s: float,
                      prefix: str) -> dict[str, float]:
    """Table V's ``Thr. var (%)`` and ``SLO viol. (%)`` of a cap against full-profile BCA's."""
    return {f"{prefix}Thr. var (%)": throughput_variation_pct(cap, full_cap, curve.max_num_seqs,
                                                              curve.throughput_per_s),
            f"{prefix}SLO viol. (%)": (float("nan") if np.isnan(cap) else
                                       slo_violation_pct(cap, curve.max_num_seqs, curve.e2e_latency_s, slo_s))}


# --- Table VI: profiling cost --------------------------------------------------------

def table6(frame: pd.DataFrame, settings: list[HeldOutSetting]) -> pd.DataFrame:
    """Per applicable held-out setting: Prof. (training runs), Pred. (validation runs),
    point saving ``Pred / (Prof + Pred)`` and time saving
    ``sum duration(Pred) / (sum duration(Prof) + sum duration(Pred))``, in %; a last
    row holds the mean of both savings. A setting of which the dataset has no training or no
    validation runs is left out."""
    rows = []
    for setting in settings:
        if not setting.applicable:
            continue
        train, predicted = select_rows(frame, setting.train), select_rows(frame, setting.validate)
        if train.empty or predicted.empty:
            continue          # the dataset has no such runs (Table III says n/a): nothing profiled or saved
        profiled_s, predicted_s = train[col.DURATION_S].sum(), predicted[col.DURATION_S].sum()
        rows.append({
            "setting": setting.label,
            "Prof.": len(train),
            "Pred.": len(predicted),
            "Pt. save (%)": 100.0 * len(predicted) / (len(train) + len(predicted)),
            "Time save (%)": 100.0 * predicted_s / (profiled_s + predicted_s),
        })
    if not rows:
        raise SplitError("no applicable held-out setting for Table VI")
    table = pd.DataFrame(rows)
    mean = {"setting": "Mean", "Prof.": np.nan, "Pred.": np.nan,
            "Pt. save (%)": table["Pt. save (%)"].mean(), "Time save (%)": table["Time save (%)"].mean()}
    return pd.concat([table, pd.DataFrame([mean])], ignore_index=True)


def mean_time_saved_pct(profiling_cost: pd.DataFrame) -> float:
    """Table VI's headline: the mean profiling time saved over the settings (its last row), in %."""
    return float(profiling_cost["Time save (%)"].iloc[-1])


# --- Fig. 12: sensitivity to epsilon and the SLO ---------------------------------------

def kv_saved_gib(arch: Architecture, curve: MeasuredCurve, batch_cap: float) -> float:
    """KV memory (GiB) a cap saves against the largest profiled cap of the curve:
    ``min(KV(B_max), reservation(B_max)) - KV(B_cap)``; the reservation bounds what
    vLLM could have held at ``B_max`` (where the traces record it)."""
    if np.isnan(batch_cap):
        return float("nan")
    largest = float(curve.max_num_seqs[-1])
    held = kv_gib(arch, largest, curve)
    blocks = curve.reservation_blocks_at(largest)
    if np.isfinite(blocks):   # traces without a cache config leave only the need as the bound
        held = min(held, float(kv_reservation_from_blocks(arch, blocks, curve.block_size)) / GIB)
    return held - kv_gib(arch, batch_cap, curve)


def slo_only_cap(result: BcaResult) -> float:
    """The cap Eq. 13 would pick on `result`'s candidates under its SLO alone (no efficiency
    floor): the highest throughput with ``E2E <= SLO``, ties to the smaller cap; NaN if no
    candidate meets the SLO. Comparing it with ``result.batch_cap`` says whether epsilon binds."""
    estimates = {THROUGHPUT: Estimates.predictions(result.candidate_throughput_per_s),
                 IN_BATCH_E2E: Estimates.predictions(result.candidate_e2e_latency_s)}
    view = candidate_view(result.candidate_batch_sizes, estimates.__getitem__, {IN_BATCH_E2E: result.slo_s},
                          throughput_at_one=result.throughput_at_one_per_s)
    return recommend(view, epsilon=0.0).batch_cap


def no_cap_reason(result: BcaResult) -> str:
    """Why Eq. 13 found no cap: ``"slo"`` (no candidate meets the SLO), ``"epsilon"`` (none batches
    above the floor), ``"both"`` (each constraint is met somewhere, never together); ``""`` if it did."""
    if result.feasible:
        return ""
    meets_slo = np.asarray(result.candidate_e2e_latency_s, dtype=float) <= result.slo_s
    efficient = np.asarray(result.candidate_efficiency, dtype=float) > result.epsilon
    if not meets_slo.any():
        return "slo"
    return "epsilon" if not efficient.any() else "both"


def sensitivity_study(frame: pd.DataFrame, setting: HeldOutSetting, architectures: ArchitectureLookup,
                      hw: Hardware, epsilons: tuple[float, ...], slo_multipliers: tuple[float, ...],
                      slo_reference_max_num_seqs: float | None = None,
                      sim_schedules: ScheduleTable | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig. 12's two tables for one transfer: `sensitivity_grid`'s grid, and each advisor's
    batching efficiency ``T(B) / (B T(1))`` (Eq. 13) at every candidate cap of its own curve
    (columns ``transfer, label, advisor, batch_cap, batching_efficiency, e2e_latency_s``; the
    measured curve for full-profile BCA, the predicted one for SLIM-BCA and SIM-BCA), which
    shows where a floor epsilon can bind."""
    target_rows = single_curve_rows(frame, CurveSelection(setting.label, setting.validate))
    curve = curve_from_rows(target_rows)
    arch = architectures[curve.model]
    train = select_rows(frame, setting.train)
    advisors: dict[str, Callable[[float, float], BcaResult]] = {
        FULL_PROFILE_BCA: lambda slo_s, epsilon: full_profile_bca(curve, slo_s, epsilon)}
    target = Target.of_curve(curve, target_rows)
    for entry in study_advisors(sim_schedules):
        fitted = entry.predictor.fit(TrainingRuns(train, architectures, hw, sim_schedules, setting.name,
                                                  sample_valley=False))
        decide = decider(entry, fitted, target)
        advisors[f"{entry.name}-BCA"] = (lambda slo_s, epsilon, decide=decide:
                                         decide(curve.max_num_seqs, slo_s, epsilon).decision)
    rows, efficiency = [], []
    for advisor, choose in advisors.items():
        for multiplier in slo_multipliers:
            slo_s = curve.slo_s(multiplier, slo_reference_max_num_seqs)
            for epsilon in epsilons:
                result = choose(slo_s, epsilon)
                cap, without_floor = result.batch_cap, slo_only_cap(result)
                rows.append({
                    "transfer": setting.name, "label": setting.label, "advisor": advisor, "epsilon": epsilon,
                    "slo_multiplier": multiplier, "slo_s": slo_s, "batch_cap": cap,
                    "batching_efficiency": result.batching_efficiency,
                    "slo_only_cap": without_floor,
                    # The floor binds where it changes the choice: a smaller cap, or none at all.
                    "epsilon_binds": bool(np.isfinite(without_floor) and cap != without_floor),
                    "no_cap_reason": no_cap_reason(result),
                    "throughput_retained_pct": throughput_retained_pct(cap, curve.max_num_seqs,
                                                                       curve.throughput_per_s),
                    "kv_saved_gib": kv_saved_gib(arch, curve, cap),
                })
        # The candidates and their efficiency depend on neither the SLO nor epsilon.
        efficiency.extend({"transfer": setting.name, "label": setting.label, "advisor": advisor,
                           "batch_cap": batch, "batching_efficiency": value, "e2e_latency_s": e2e}
                          for batch, value, e2e in zip(result.candidate_batch_sizes, result.candidate_efficiency,
                                                       result.candidate_e2e_latency_s))
    return pd.DataFrame(rows), pd.DataFrame(efficiency)


def sensitivity_grid(frame: pd.DataFrame, setting: HeldOutSetting, architectures: ArchitectureLookup,
                     hw: Hardware, epsilons: tuple[float, ...], slo_multipliers: tuple[float, ...],
                     slo_reference_max_num_seqs: float | None = None,
                     sim_schedules: ScheduleTable | None = None) -> pd.DataFrame:
    """SLIM-BCA (and with `sim_schedules` SIM-BCA) fitted on a setting's training runs, for
    its (single-curve) validation target, over ``epsilon x SLO multiplier``, beside
    full-profile BCA on the measured target: chosen cap, measured throughput retained (% of
    the profiled peak) and KV memory saved (GiB, `kv_saved_gib`); column ``advisor`` names
    the flavour. Also, per cell, the advisor's batching efficiency at its cap, the cap its SLO
    alone would pick (`slo_only_cap`), whether epsilon changed the choice (``epsilon_binds``)
    and, where there is no cap, why (`no_cap_reason`)."""
    return sensitivity_study(frame, setting, architectures, hw, epsilons, slo_multipliers,
                             slo_reference_max_num_seqs, sim_schedules)[0]


# --- Fig. 13: GPU memory per model ---------------------------------------------------

def memory_breakdown(frame: pd.DataFrame, selections: tuple[CurveSelection, ...],
                     architectures: ArchitectureLookup, hw: Hardware, epsilon: float, slo_multiplier: float,
                     slo_reference_max_num_seqs: float | None = None) -> pd.DataFrame:
    """GPU memory (GiB) per selected curve with full-profile BCA's cap:
    weights, KV allocation the cap needs, KV saved (vLLM's reservation at that cap,
    ``num_gpu_blocks x bs x kv_bytes_per_token``, minus the need) and the rest of
    ``hw.memory_bytes`` (activations, CUDA graphs, the ``1 - gpu_memory_utilization`` slack). Where the
    traces record no cache config, the reservation is vLLM's default as the advisor estimates it."""
    rows = []
    for selection in selections:
        curve = single_curve(frame, selection)
        arch = architectures[curve.model]
        result = full_profile_bca(curve, curve.slo_s(slo_multiplier, slo_reference_max_num_seqs), epsilon)
        if not result.feasible:
            raise SplitError(f"Fig. 13: no feasible cap for '{selection.label}': {result.reason}")
        blocks = curve.reservation_blocks_at(result.batch_cap)
        reservation = (float(kv_reservation_from_blocks(arch, blocks, curve.block_size)) if np.isfinite(blocks)
                       else default_kv_reservation_bytes(arch, hw)) / GIB   # no cache config: vLLM's default
        weights, needed = weight_bytes(arch) / GIB, kv_gib(arch, result.batch_cap, curve)
        rows.append({
            "label": selection.label, "model": curve.model, "batch_cap": result.batch_cap,
            "weights_gib": weights, "kv_allocation_gib": needed, "kv_saved_gib": reservation - needed,
            "other_gib": hw.memory_bytes / GIB - weights - reservation, "total_gib": hw.memory_bytes / GIB,
        })
    return pd.DataFrame(rows)


# --- every curve: knee advisor vs full-profile BCA vs SLIM-BCA -----------------------

def advisor_comparison(frame: pd.DataFrame, architectures: ArchitectureLookup, hw: Hardware,
                       epsilon: float, slo_multiplier: float,
                       slo_reference_max_num_seqs: float | None = None,
                       sim_schedules: ScheduleTable | None = None) -> pd.DataFrame:
    """Each measured curve with the advisors' caps, measured throughput retained
    (% of the curve's peak), measured E2E at the cap and KV memory of the cap (GiB).

    Knee: `recommend_knee` with ``ctx = IL + OL``, its suggested ``max_num_seqs``
    (measured columns NaN when outside the profiled range). SLIM-BCA is
    leave-one-curve-out: SLIM is fitted on every other curve of the table; so is SIM-BCA
    (columns ``sim_*``, with `sim_schedules` only), each refit starting from SIM calibrated
    on every curve.
    """
    rows = []
    advisors = study_advisors(sim_schedules)
    # Each leave-one-curve-out refit starts from the fit on every curve (one refinement, not the
    # start grid): the data differ by one curve out of many. Where that refinement fails, the grid.
    every_curve = {entry.name: entry.predictor.fit(TrainingRuns(frame, architectures, hw, sim_schedules, "all curves",
                                                                sample_valley=False))
                   for entry in advisors}
    for curve, curve_rows in zip(measured_curves(frame), _curve_row_groups(frame)):
        arch = architectures[curve.model]
        slo_s = curve.slo_s(slo_multiplier, slo_reference_max_num_seqs)
        knee = recommend_knee(arch, hw, curve.input_len_mean + curve.output_len_mean)
        full = full_profile_bca(curve, slo_s, epsilon)
        others = frame[~((frame[col.MODEL] == curve.model)
                         & (frame[col.INPUT_LEN_NOMINAL] == curve.input_len_nominal)
                         & (frame[col.OUTPUT_LEN_NOMINAL] == curve.output_len_nominal))]
        row: dict[str, Any] = {"model": curve.model, "input_len": curve.input_len_nominal,
                               "output_len": curve.output_len_nominal, "slo_s": slo_s,
                               "knee_b_knee": knee.b_knee}
        caps = [("knee", float(knee.suggested_max_num_seqs)), ("full", full.batch_cap)]
        for entry in advisors:
            training = TrainingRuns(others, architectures, hw, sim_schedules, f"all curves but {curve.label}",
                                    sample_valley=False)
            fitted = every_curve[entry.name].refit(training) or entry.predictor.fit(training)
            decided = predicted_bca(entry, fitted, Target.of_curve(curve, curve_rows), curve.max_num_seqs, slo_s,
                                    epsilon)
            caps.append((entry.option, decided.decision.batch_cap))
        for name, cap in caps:
            row[f"{name}_cap"] = cap
            peak = curve.throughput_per_s.max()
            row[f"{name}_retained_pct"] = 100.0 * _measured(curve, curve.throughput_per_s, cap) / peak
            row[f"{name}_e2e_s"] = _measured(curve, curve.e2e_latency_s, cap)
            row[f"{name}_kv_gib"] = kv_gib(arch, cap, curve)
        rows.append(row)
    return pd.DataFrame(rows)


def _curve_row_groups(frame: pd.DataFrame) -> list[pd.DataFrame]:
    """The runs of each measured curve, in `measured_curves` order."""
    return [rows for _, rows in frame.groupby(list(col.WORKLOAD_KEYS), sort=True)]


def sensitivity_agreement(grid: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Per predicted flavour of a `sensitivity_grid`: (cells where it picks full-profile BCA's
    cap, cells), over every transfer, epsilon and SLO multiplier (both infeasible counts as
    agreeing)."""
    keys = ["transfer", "epsilon", "slo_multiplier"]
    full = grid[grid["advisor"] == FULL_PROFILE_BCA].set_index(keys)["batch_cap"]
    agreement = {}
    for advisor in (f"{entry.name}-BCA" for entry in advise_predictors().values()):
        caps = grid[grid["advisor"] == advisor].set_index(keys)["batch_cap"]
        if caps.empty:
            continue
        reference = full.loc[caps.index]
        same = (caps == reference) | (caps.isna() & reference.isna())
        agreement[advisor] = (int(same.sum()), len(caps))
    return agreement
