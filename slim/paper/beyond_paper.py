"""Accuracy beyond the paper: the simulator on the models served today (mixture of experts, fp8 and
4-bit weights, sliding windows), per measured curve, zero-shot and calibrated on three runs of the
curve.

A curve is the runs of one (dataset, accelerator, model as served, parallel layout, lengths) on one
engine (the vLLM release its runs record, or none recorded: runs of another release were measured on
another server) at several concurrencies (online closed-loop sweeps) or batches (offline static
batches). Each run is
simulated from its configuration alone (`slim.sim.engine.simulate_run`: the step cost of
`slim.sim.modern_cost`, the scheduler of the run's vLLM release):

- **shipped constants**: the simulator's constants as shipped (`slim/sim/h100-64gb-sim.yaml`, calibrated
  on the public H100 64 GB traces of dense 16-bit OPT and Llama-2 models at one GPU), so no run of the
  curve's model, of its accelerator or of any model beyond the paper is used;
- **zero-shot** (`other_models`): the constants calibrated (`slim.sim.calibrate.calibrate`) on the
  usable runs of every other model on the curve's accelerator, each model left out in turn, so no
  run of the curve's model on that accelerator is used;
- **calibrated on 3 runs**: per curve and metric, the zero-shot prediction corrected by what `slim tune`
  learns from three of the curve's runs (its lowest, middle and highest concurrency): the posterior
  mean of the log residual ``log(measured / predicted)`` under tune's shipped SIM kernel
  (`slim.tune.kernel`, `slim.tune.belief.ResidualProcess`: an offset, a trend per doubling of the
  concurrency and a smooth term), at every other run of the curve; the MAPE counts those other runs
  only. Beside it, **one factor**: the geometric mean of measured over predicted on the same three
  runs, times the prediction of every other run.

An online run's TTFT and TPOT are the means of the simulated client's (a closed loop of N requests
in flight: `SimResult.client_latencies_ms`), its throughput by the same closed-loop relation the
dataset derives its own from (``N (IL + OL) / (TTFT + (OL - 1) TPOT)``); an offline run's is its
batch's tokens over the simulated batch time. A run with data-parallel attention (``DP`` ranks and
the routed experts spread over all their GPUs) is simulated as one server of its tensor-parallel
size carrying all ``N`` requests: the ranks step together through the expert-parallel MoE layers,
whose cost follows the whole batch (the NVIDIA sweep's MiniMax-M2.5 rows at DP 4 and DP 1 with the
same ``N`` measure the same TPOT within 1%); the attention split over the ranks is not modelled.
A run whose release is not recorded runs the scheduler of `UNKNOWN_VERSION`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from slim import columns as col
from slim.defaults import SIM_OPTION
from slim.errors import FitError
from slim.markdown import markdown_table
from slim.sim.calibrate import calibrate
from slim.sim.constants import SimConstants
from slim.sim.engine import simulate_run
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware
from slim.traces.verdict import recorded_vllm_version
from slim.tune.belief import ResidualKernel, ResidualProcess
from slim.tune.kernel import load_kernels

UNKNOWN_VERSION = "0.12.0"
"""The vLLM release a run that records none is simulated at (the release most rows of the NVIDIA
sweep record)."""

CURVE_KEY = (col.HARDWARE, col.MODEL, col.TENSOR_PARALLEL, col.DATA_PARALLEL, col.INPUT_LEN_NOMINAL,
             col.OUTPUT_LEN_NOMINAL, col.BENCHMARK_MODE, col.VLLM_VERSION)
"""What a curve's runs share (module docstring); `VLLM_VERSION` is the release the runs record (None: not
recorded), not the one simulated."""
METRICS = ("mean_tpot_ms", "mean_ttft_ms", "total_token_throughput")
"""The metrics compared, in vLLM's names (throughput in tokens/s, total)."""
CALIBRATION_RUNS = 3
SEED = 0


@dataclass(frozen=True)
class CurveRun:
    """One measured run as the simulator is asked about it."""

    model: str
    hardware: str
    input_len: int
    output_len: int
    in_flight: int          # requests in flight (the batch offline)
    tensor_parallel: int
    vllm_version: str
    offline: bool


def _int(value: object, default: int = 1) -> int:
    return int(value) if value is not None and not (isinstance(value, float) and math.isnan(value)) else default


def curve_run(row: pd.Series) -> CurveRun:
    """The question a usable run asks the simulator (module docstring)."""
    version = row.get(col.VLLM_VERSION)
    offline = row[col.BENCHMARK_MODE] == col.BenchmarkMode.OFFLINE_STATIC_BATCH
    return CurveRun(str(row[col.MODEL]), str(row[col.HARDWARE]), int(round(float(row[col.INPUT_LEN_MEAN]))),
                    int(round(float(row[col.OUTPUT_LEN_MEAN]))),
                    max(int(round(float(row[col.MAX_NUM_SEQS]))), 1),
                    _int(row.get(col.TENSOR_PARALLEL)),
                    recorded_vllm_version(version) or UNKNOWN_VERSION, offline)


def simulate_curve_run(run: CurveRun, catalog: ArchitectureCatalog, hw: Hardware,
                       consts: SimConstants) -> dict[str, float]:
    """The zero-shot prediction of one run's metrics (NaN where the simulator cannot start it)."""
    arch = catalog[run.model]
    prompts = run.in_flight if run.offline else 10 * run.in_flight
    result = simulate_run(arch, hw, consts, run.input_len, run.output_len, run.in_flight, prompts, SEED,
                          run.tensor_parallel, include_test_prompt=False,
                          vllm_version=None if run.offline else run.vllm_version)
    if result.status != "ok":
        return {metric: math.nan for metric in METRICS} | {"sim_status": result.status}
    tokens = run.input_len + run.output_len
    if run.offline:
        return {"mean_tpot_ms": math.nan, "mean_ttft_ms": math.nan,
                "total_token_throughput": run.in_flight * tokens / result.duration_s, "sim_status": "ok"}
    latencies = result.client_latencies_ms(run.in_flight)
    ttft, tpot = float(np.mean(latencies["ttft"])), float(np.mean(latencies["tpot"]))
    e2e_s = (ttft + (run.output_len - 1) * tpot) / 1e3
    return {"mean_tpot_ms": tpot, "mean_ttft_ms": ttft, "total_token_throughput": run.in_flight * tokens / e2e_s,
            "sim_status": "ok"}


def curve_predictions(usable: pd.DataFrame, catalog: ArchitectureCatalog, hardware: dict[str, Hardware],
                      consts: SimConstants,
                      other_models: dict[tuple[str, str], SimConstants] | None = None) -> pd.DataFrame:
    """One row per usable run: its curve, measured metrics (``measured_*``), the predictions at the
    shipped constants (``shipped_*``) and, where `other_models` holds constants for its (accelerator,
    model), the zero-shot ones (``zero_shot_*``, NaN elsewhere), and the simulator's status."""
    rows = []
    order = [key for key in CURVE_KEY if key in usable] + [col.MAX_NUM_SEQS, col.RUN_ID]
    for _, row in usable.sort_values(order).iterrows():
        run = curve_run(row)
        shipped = simulate_curve_run(run, catalog, hardware[run.hardware], consts)
        fitted = (other_models or {}).get((run.hardware, run.model))
        predicted = (simulate_curve_run(run, catalog, hardware[run.hardware], fitted) if fitted is not None
                     else {metric: math.nan for metric in METRICS})
        data_parallel = _int(row.get(col.DATA_PARALLEL))
        measured = {"mean_tpot_ms": row.get(col.MEAN_TPOT_MS), "mean_ttft_ms": row.get(col.MEAN_TTFT_MS),
                    "total_token_throughput": float(row[col.TOTAL_TOKEN_THROUGHPUT])}
        rows.append({col.RUN_ID: row[col.RUN_ID], col.HARDWARE: run.hardware, col.MODEL: run.model,
                     col.TENSOR_PARALLEL: run.tensor_parallel, col.DATA_PARALLEL: data_parallel,
                     col.INPUT_LEN_NOMINAL: int(row[col.INPUT_LEN_NOMINAL]),
                     col.OUTPUT_LEN_NOMINAL: int(row[col.OUTPUT_LEN_NOMINAL]),
                     col.BENCHMARK_MODE: row[col.BENCHMARK_MODE],
                     col.VLLM_VERSION: recorded_vllm_version(row.get(col.VLLM_VERSION)), "in_flight": run.in_flight,
                     "simulated_vllm_version": None if run.offline else run.vllm_version,
                     **{f"measured_{m}": float(v) if v is not None else math.nan for m, v in measured.items()},
                     **{f"shipped_{m}": shipped[m] for m in METRICS},
                     **{f"zero_shot_{m}": predicted[m] for m in METRICS}, "sim_status": shipped["sim_status"]})
    return pd.DataFrame(rows)


def other_models_constants(usable: pd.DataFrame, catalog: ArchitectureCatalog, hardware: dict[str, Hardware],
                           consts: SimConstants, models: Sequence[str] = ()
                           ) -> tuple[dict[tuple[str, str], SimConstants], list[str]]:
    """Per (accelerator, model) of `usable` (of `models` only, where given), the simulator's constants
    calibrated on the runs of every other model of `usable` on that accelerator (from `consts`), and a
    line per pair left without (too few runs,
    or a calibration that fails, with why). Runs the simulator cannot start are left out of each
    calibration; an online run that records no vLLM release runs `UNKNOWN_VERSION`'s scheduler, as
    it is predicted."""
    frame = usable.copy()
    online = frame[col.BENCHMARK_MODE] == col.BenchmarkMode.ONLINE
    if col.VLLM_VERSION in frame:
        frame.loc[online & frame[col.VLLM_VERSION].isna(), col.VLLM_VERSION] = UNKNOWN_VERSION
    constants, notes = {}, []
    for (hardware_name, model), _ in frame.groupby([col.HARDWARE, col.MODEL], sort=True):
        if models and model not in models:
            continue
        hw = hardware[hardware_name]
        others = frame[(frame[col.HARDWARE] == hardware_name) & (frame[col.MODEL] != model)]
        startable = others[[simulate_curve_run(curve_run(row), catalog, hw, consts)["sim_status"] == "ok"
                            for _, row in others.iterrows()]]
        try:
            constants[(hardware_name, model)], _ = calibrate(startable, catalog, hw, consts)
        except FitError as error:
            notes.append(f"{model} on {hardware_name}: no zero-shot constants ({' '.join(str(error).split())})")
    return constants, notes


def calibration_runs(in_flight: pd.Series) -> list[int]:
    """Positions (in the curve's order) of the runs a curve is calibrated on: its lowest, middle and
    highest concurrency; none where the curve has no run left to predict."""
    count = len(in_flight)
    if count <= CALIBRATION_RUNS:
        return []
    return sorted({0, count // 2, count - 1})


def _ape(predicted: np.ndarray, measured: np.ndarray) -> np.ndarray:
    return 100.0 * np.abs(predicted - measured) / measured


def tune_correction(in_flight: np.ndarray, input_len: float, output_len: float, residuals: np.ndarray,
                    calibration: Sequence[int], kernel: ResidualKernel) -> np.ndarray:
    """The log residual `slim tune`'s belief expects at every run of one curve (concurrencies
    `in_flight`) once the runs at positions `calibration` measured `residuals[calibration]`: the
    posterior mean under `kernel`, each measurement with the kernel's run-to-run scatter."""
    coordinates = (np.column_stack([np.log2(np.asarray(in_flight, dtype=float)),
                                    np.full(len(in_flight), math.log2(input_len)),
                                    np.full(len(in_flight), math.log2(output_len))])
                   - np.asarray(kernel.centre_log2))
    chosen = np.asarray(calibration, dtype=int)
    models = np.zeros(len(in_flight), dtype=int)
    process = ResidualProcess(kernel, coordinates[chosen], models[chosen], residuals[chosen],
                              np.zeros(len(chosen)), np.full(len(chosen), kernel.noise_sd))
    return process.predict(coordinates, models, kernel.noise_sd)[0]


def curve_accuracy(predictions: pd.DataFrame, kernel: ResidualKernel | None = None) -> pd.DataFrame:
    """Per curve and metric: runs, MAPE zero-shot (every run), and calibrated on three runs (scored on
    the others): by tune's correction under `kernel` (default: the shipped SIM kernel) and by one
    factor."""
    kernel = kernel or load_kernels().kernel(SIM_OPTION)
    rows = []
    missing = [key for key in CURVE_KEY if key not in predictions]
    if missing:
        raise ValueError(f"the predictions table lacks {', '.join(missing)} (written by curve_predictions)")
    for key, curve in predictions.groupby(list(CURVE_KEY), sort=True, dropna=False):
        named = dict(zip(CURVE_KEY, key))
        curve = curve.sort_values("in_flight", kind="stable")
        started = curve[curve["sim_status"] == "ok"]
        chosen = calibration_runs(started["in_flight"])
        for metric in METRICS:
            measured, zero_shot = started[f"measured_{metric}"].to_numpy(), started[f"zero_shot_{metric}"].to_numpy()
            if np.isnan(measured).all():
                continue
            shipped = started[f"shipped_{metric}"].to_numpy()
            scored = chosen if not np.isnan(zero_shot).any() else []
            held = np.setdiff1d(np.arange(len(started)), scored)
            factor = float(np.exp(np.mean(np.log(measured[scored] / zero_shot[scored])))) if scored else math.nan
            corrected = (zero_shot * np.exp(tune_correction(started["in_flight"].to_numpy(),
                                                            float(named[col.INPUT_LEN_NOMINAL]),
                                                            float(named[col.OUTPUT_LEN_NOMINAL]),
                                                            np.log(measured / zero_shot), scored,
                                                            kernel))
                         if scored else zero_shot)
            rows.append({**named, "metric": metric, "runs": len(curve),
                         "simulated": len(started),
                         "shipped_mape": float(np.mean(_ape(shipped, measured))) if len(started) else math.nan,
                         "zero_shot_mape": float(np.mean(_ape(zero_shot, measured))) if len(started) else math.nan,
                         "calibrated_runs": len(held) if scored else 0,
                         "calibrated_mape": float(np.mean(_ape(corrected[held], measured[held])))
                         if scored else math.nan,
                         "factor_mape": float(np.mean(_ape(factor * zero_shot[held], measured[held])))
                         if scored else math.nan})
    return pd.DataFrame(rows)


def model_accuracy(curves: pd.DataFrame) -> pd.DataFrame:
    """Per (accelerator, model) and metric: MAPE over all its curves' runs, weighted by runs."""
    def weighted(group: pd.DataFrame, value: str, weight: str) -> float:
        kept = group[group[weight] > 0]
        return float(np.average(kept[value], weights=kept[weight])) if len(kept) else math.nan

    rows = []
    for (hardware, model, metric), group in curves.groupby([col.HARDWARE, col.MODEL, "metric"], sort=True):
        rows.append({col.HARDWARE: hardware, col.MODEL: model, "metric": metric, "curves": len(group),
                     "runs": int(group["simulated"].sum()),
                     "shipped_mape": weighted(group, "shipped_mape", "simulated"),
                     "zero_shot_mape": weighted(group, "zero_shot_mape", "simulated"),
                     "calibrated_mape": weighted(group, "calibrated_mape", "calibrated_runs"),
                     "factor_mape": weighted(group, "factor_mape", "calibrated_runs")})
    return pd.DataFrame(rows)


GOALS = {"zero_shot_mape": 15.0, "calibrated_mape": 5.0}
"""The TPOT goals per model: zero-shot MAPE <= 15%, calibrated on three runs <= 5%."""


def goal_verdicts(models: pd.DataFrame) -> pd.DataFrame:
    """Per (accelerator, model) with TPOT runs: the two TPOT MAPEs and, per `GOALS` entry, "met",
    "missed" or "n/a" (no run left to score)."""
    tpot = models[models["metric"] == "mean_tpot_ms"].reset_index(drop=True)
    verdicts = {f"{key} <= {goal:g}%": ["n/a" if math.isnan(value) else "met" if value <= goal else "missed"
                                        for value in tpot[key]] for key, goal in GOALS.items()}
    return tpot[[col.HARDWARE, col.MODEL, *GOALS]].assign(**verdicts)


def accuracy_markdown(models: pd.DataFrame, dataset_labels: Sequence[str], notes: Sequence[str] = ()) -> str:
    """The generated section: per model and metric the two MAPEs, and whether TPOT meets its goals
    ("n/a": no curve of the model has a run left once three are used to calibrate)."""
    def cell(value: float) -> str:
        return "n/a" if math.isnan(value) else f"{value:.1f}"

    table = []
    for _, row in models.iterrows():
        verdict = ""
        if row["metric"] == "mean_tpot_ms":
            verdict = " / ".join(goal_verdicts(row.to_frame().T).iloc[0, -len(GOALS):])
        table.append([row[col.HARDWARE], row[col.MODEL], row["metric"], str(row["curves"]), str(row["runs"]),
                      cell(row["shipped_mape"]), cell(row["zero_shot_mape"]), cell(row["calibrated_mape"]),
                      cell(row["factor_mape"]), verdict])
    sources = "; ".join(dataset_labels)
    header = ["accelerator", "model (as served)", "metric", "curves", "runs", "MAPE shipped constants %",
              "MAPE zero-shot %", "MAPE calibrated on 3 %", "MAPE one factor on 3 %", "TPOT goal (15 / 5)"]
    left = "".join(f"\n- {line}" for line in notes)
    return ("### The simulator beyond the paper, per model\n\n"
            f"Real runs ({sources}). Shipped constants: calibrated on the public H100 64 GB traces of dense "
            "16-bit models at one GPU (no run of these models or accelerators). Zero-shot: the constants "
            "calibrated on every other model's runs on the same accelerator, each model left out in turn. "
            "Calibrated on 3: the zero-shot prediction corrected as `slim tune` corrects it once a curve's "
            "lowest, middle and highest concurrency are measured (the posterior mean of the log residual under "
            "its shipped SIM kernel: offset, trend per doubling of the concurrency, smooth term), scored on the "
            "curve's other runs; one factor: the geometric mean of measured over predicted on the same three runs "
            "instead. The TPOT goal is judged on the first. The sweep's TTFT and TPOT are central "
            "values of an unstated statistic, compared with the simulated means; its throughput is derived "
            "from them by the closed-loop relation (docs/traces.md). Method: `slim.paper.beyond_paper`.\n\n"
            + "\n".join(markdown_table(header, table)) + "\n" + (f"\nLeft without zero-shot constants:{left}\n"
                                                                  if notes else ""))
