"""Fit the simulator's few cost constants on real traces, and validate it per curve.

Because every request arrives at once, the simulated schedule (which sequences run in
which step) does not depend on the cost constants; only step durations do. Each real
configuration is therefore simulated once, at its real ``num_prompts``, to collect its
jitter-weighted step statistics (`ScheduleStats`), and the benchmark duration for any
constants is then an exact weighted sum (no re-simulation, no reduced prompt count).
`calibrate` minimises the relative total-token-throughput error
``T_sim / T_meas - 1`` over all runs with `scipy.optimize.least_squares` (bounded,
``SimConstants`` fields in `FITTED_CONSTANTS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy.optimize import least_squares

from slim import columns as col
from slim.errors import FitError
from slim.sim.constants import BOUNDS, FITTED_CONSTANTS, SimConstants
from slim.sim.cost import StepCostModel
from slim.sim.engine import simulate_run
from slim.sim.metrics import ScheduleStats
from slim.specs.architecture import Architecture, ArchitectureCatalog
from slim.specs.hardware import Hardware

# Fit in natural units so that every parameter is O(1) for the optimiser.
_SCALE = {"gemm_compute_efficiency": 1.0, "gemm_memory_efficiency": 1.0, "attention_memory_efficiency": 1.0,
          "kernel_latency_s": 1e-6, "step_overhead_base_s": 1e-3, "step_overhead_per_seq_s": 1e-6}


@dataclass(frozen=True)
class _RunCase:
    arch: Architecture
    il: int
    ol: int
    max_num_seqs: int
    num_prompts: int
    measured_throughput: float
    stats: ScheduleStats
    completed: int


def _case_from_row(row: pd.Series, architectures: ArchitectureCatalog, hw: Hardware, consts: SimConstants,
                   seed: int, num_prompts: int | None) -> _RunCase:
    arch = architectures[row[col.MODEL]]
    il, ol = int(round(row[col.INPUT_LEN_MEAN])), int(round(row[col.OUTPUT_LEN_MEAN]))
    prompts = int(num_prompts or row.get(col.NUM_PROMPTS) or 2000)
    result = simulate_run(arch, hw, consts, il, ol, int(row[col.MAX_NUM_SEQS]), prompts, seed, record_stats=True)
    if result.status != "ok" or result.stats is None:
        raise FitError(f"calibration run {row[col.MODEL]} B={row[col.MAX_NUM_SEQS]} cannot start in the "
                       f"simulator ({result.status}); drop it from the calibration frame")
    return _RunCase(arch, il, ol, int(row[col.MAX_NUM_SEQS]), prompts, float(row[col.TOTAL_TOKEN_THROUGHPUT]),
                    result.stats, result.completed)


def _simulated_throughput(case: _RunCase, hw: Hardware, consts: SimConstants) -> float:
    duration = case.stats.duration_s(StepCostModel(case.arch, hw, consts))
    return case.completed * (case.il + case.ol) / duration


def calibrate(clean_frame: pd.DataFrame, architectures: ArchitectureCatalog, hw: Hardware,
              initial: SimConstants = SimConstants(), seed: int = 0,
              num_prompts: int | None = None) -> tuple[SimConstants, pd.DataFrame]:
    """Fit `FITTED_CONSTANTS` to the measured throughput of every row of ``clean_frame``.

    ``clean_frame`` uses `slim.columns` names (model, max_num_seqs, input/output_len_mean,
    total_token_throughput_per_s, num_prompts). Returns the fitted constants and a
    residuals frame (one row per run: measured and simulated throughput, relative error).
    """
    if clean_frame.empty:
        raise FitError("calibrate: the clean frame has no rows")
    cases = [_case_from_row(row, architectures, hw, initial, seed, num_prompts) for _, row in clean_frame.iterrows()]
    measured = np.array([case.measured_throughput for case in cases])

    def constants_of(x: np.ndarray) -> SimConstants:
        return initial.with_fitted({name: value * _SCALE[name] for name, value in zip(FITTED_CONSTANTS, x)})

    def residuals(x: np.ndarray) -> np.ndarray:
        consts = constants_of(x)
        return np.array([_simulated_throughput(case, hw, consts) for case in cases]) / measured - 1.0

    x0 = np.array([getattr(initial, name) / _SCALE[name] for name in FITTED_CONSTANTS])
    lower = np.array([BOUNDS[name][0] / _SCALE[name] for name in FITTED_CONSTANTS])
    upper = np.array([BOUNDS[name][1] / _SCALE[name] for name in FITTED_CONSTANTS])
    fit = least_squares(residuals, np.clip(x0, lower, upper), bounds=(lower, upper), x_scale="jac")
    if not fit.success or not np.all(np.isfinite(fit.x)):
        raise FitError(f"calibrate: least_squares did not converge ({fit.message})")
    consts = constants_of(fit.x)
    simulated = np.array([_simulated_throughput(case, hw, consts) for case in cases])
    frame = pd.DataFrame({
        col.MODEL: [case.arch.name for case in cases],
        col.INPUT_LEN_MEAN: [case.il for case in cases], col.OUTPUT_LEN_MEAN: [case.ol for case in cases],
        col.MAX_NUM_SEQS: [case.max_num_seqs for case in cases],
        "measured_throughput_per_s": measured, "simulated_throughput_per_s": simulated,
        "relative_error": simulated / measured - 1.0,
    })
    return consts, frame


def validate(frame: pd.DataFrame, architectures: ArchitectureCatalog, hw: Hardware, consts: SimConstants,
             seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Full simulation of every run of ``frame`` (ok and preempted rows alike).

    Returns (per-run frame, per-curve frame). Per curve (model, IL, OL): MAPE % of
    throughput and of mean batch size (both as the real pipeline measures them), and
    ``kv_saturation_agreement``: share of runs where the simulator preempts iff the real
    run did.
    """
    rows = []
    for _, row in frame.iterrows():
        il, ol = int(round(row[col.INPUT_LEN_MEAN])), int(round(row[col.OUTPUT_LEN_MEAN]))
        result = simulate_run(architectures[row[col.MODEL]], hw, consts, il, ol, int(row[col.MAX_NUM_SEQS]),
                              int(row.get(col.NUM_PROMPTS) or 2000), seed)
        measured_preemptions = float(row.get(col.NUM_PREEMPTIONS, 0.0) or 0.0)
        rows.append({
            col.MODEL: row[col.MODEL], col.INPUT_LEN_MEAN: il, col.OUTPUT_LEN_MEAN: ol,
            col.MAX_NUM_SEQS: int(row[col.MAX_NUM_SEQS]),
            "measured_throughput_per_s": float(row[col.TOTAL_TOKEN_THROUGHPUT]),
            "simulated_throughput_per_s": result.total_token_throughput_per_s,
            "measured_mean_batch_size": float(row[col.MEAN_BATCH_SIZE]),
            "simulated_mean_batch_size": result.mean_batch_size,
            "measured_preemptions": measured_preemptions, "simulated_preemptions": result.num_preemptions,
            "measured_kv_capacity_tokens": float(row.get(col.KV_CAPACITY_TOKENS, math.nan)),
            "simulated_kv_capacity_tokens": result.plan.kv_capacity_tokens,
        })
    runs = pd.DataFrame(rows)
    runs["throughput_ape"] = 100 * (runs["simulated_throughput_per_s"] / runs["measured_throughput_per_s"] - 1).abs()
    runs["batch_ape"] = 100 * (runs["simulated_mean_batch_size"] / runs["measured_mean_batch_size"] - 1).abs()
    runs["kv_saturation_agrees"] = (runs["measured_preemptions"] > 0) == (runs["simulated_preemptions"] > 0)
    curves = runs.groupby([col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN], as_index=False).agg(
        runs=(col.MAX_NUM_SEQS, "size"), throughput_mape=("throughput_ape", "mean"),
        batch_mape=("batch_ape", "mean"), kv_saturation_agreement=("kv_saturation_agrees", "mean"),
        measured_preempted_runs=("measured_preemptions", lambda v: int((v > 0).sum())),
        simulated_preempted_runs=("simulated_preemptions", lambda v: int((v > 0).sum())))
    return runs, curves


def write_calibration_yaml(consts: SimConstants, residuals: pd.DataFrame, path: str | Path,
                           curves: pd.DataFrame | None = None, source: str = "") -> Path:
    """Write the constants (key ``constants``, loadable by `load_sim_constants`) with the
    fit residuals and, if given, the per-curve validation."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    errors = residuals["relative_error"].abs() * 100
    document = {
        "description": "slim.sim calibrated constants (vLLM V0 simulator, H100 64 GB); written by "
                       "slim.sim.calibrate.write_calibration_yaml" + (f" from {source}" if source else ""),
        "fitted": list(FITTED_CONSTANTS),
        "constants": {key: (float(value) if isinstance(value, float) else value)
                      for key, value in consts.to_dict().items()},
        "fit_summary": {"runs": int(len(residuals)), "throughput_mape_percent": round(float(errors.mean()), 3),
                        "median_ape_percent": round(float(errors.median()), 3),
                        "max_ape_percent": round(float(errors.max()), 3)},
        "residuals": [
            {"model": str(r[col.MODEL]), "input_len": int(r[col.INPUT_LEN_MEAN]),
             "output_len": int(r[col.OUTPUT_LEN_MEAN]),
             "max_num_seqs": int(r[col.MAX_NUM_SEQS]),
             "measured_throughput_per_s": round(float(r["measured_throughput_per_s"]), 3),
             "simulated_throughput_per_s": round(float(r["simulated_throughput_per_s"]), 3),
             "relative_error": round(float(r["relative_error"]), 5)}
            for _, r in residuals.iterrows()],
    }
    if curves is not None:
        document["validation_per_curve"] = [
            {"model": str(r[col.MODEL]), "input_len": int(r[col.INPUT_LEN_MEAN]),
             "output_len": int(r[col.OUTPUT_LEN_MEAN]),
             "runs": int(r["runs"]), "throughput_mape_percent": round(float(r["throughput_mape"]), 3),
             "batch_mape_percent": round(float(r["batch_mape"]), 3),
             "kv_saturation_agreement": round(float(r["kv_saturation_agreement"]), 3),
             "measured_preempted_runs": int(r["measured_preempted_runs"]),
             "simulated_preempted_runs": int(r["simulated_preempted_runs"])}
            for _, r in curves.iterrows()]
    path.write_text(yaml.safe_dump(document, sort_keys=False, width=120))
    return path
