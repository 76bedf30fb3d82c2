"""Fit the simulator's few cost constants on real traces, and validate it per curve.

Because every request arrives at once, the simulated schedule (which sequences run in
which step) does not depend on the cost constants; only step durations do. Each real
configuration is therefore simulated once, at its real ``num_prompts``, to collect its
jitter-weighted step statistics (`slim.sim.schedules`; reused from a cached
`ScheduleTable` when one is passed), and the benchmark duration, mean batch and
preemptions for any constants are then exact functions of them (no re-simulation, no
reduced prompt count). `calibrate` minimises the relative total-token-throughput error
``T_sim / T_meas - 1`` over all runs with the identifiability rule of
`slim.sim.schedule_fit.calibrate_schedules` (bounded, ``SimConstants`` fields in
`FITTED_CONSTANTS`, a weak roofline prior, a fixed start grid).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from slim import columns as col
from slim.errors import FitError
from slim.gpu.kv_memory import kv_capacity_tokens_or_default
from slim.sim.constants import FITTED_CONSTANTS, SimConstants
from slim.sim.schedule_costs import prediction_costs
from slim.sim.schedule_fit import calibrate_on_rows
from slim.sim.schedules import ScheduleTable, keys_of_frame, simulate_schedules
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware


def _schedules_for(frame: pd.DataFrame, architectures: ArchitectureCatalog, hw: Hardware, initial: SimConstants,
                   seed: int, schedules: ScheduleTable | None) -> ScheduleTable:
    """The cached schedules, or those of `frame`'s rows simulated now."""
    if schedules is not None:
        return schedules
    return simulate_schedules(keys_of_frame(frame), architectures, hw, initial, seed)


def calibrate(clean_frame: pd.DataFrame, architectures: ArchitectureCatalog, hw: Hardware,
              initial: SimConstants = SimConstants(), seed: int = 0, num_prompts: int | None = None,
              schedules: ScheduleTable | None = None) -> tuple[SimConstants, pd.DataFrame]:
    """Fit `FITTED_CONSTANTS` to the measured throughput of every row of ``clean_frame``.

    ``clean_frame`` uses `slim.columns` names (model, max_num_seqs, input/output_len_mean,
    total_token_throughput_per_s, num_prompts; `num_prompts` overrides the last). The fixed
    fields of `initial` are kept (those of `schedules` when given). Returns the fitted
    constants and a residuals frame (one row per run: measured and simulated throughput,
    relative error).
    """
    if clean_frame.empty:
        raise FitError("calibrate: the clean frame has no rows")
    frame = clean_frame.assign(**{col.NUM_PROMPTS: num_prompts}) if num_prompts else clean_frame
    table = _schedules_for(frame, architectures, hw, initial, seed, schedules)
    failed = [s.key for s in table.for_frame(frame) if not s.ok]
    if failed:
        raise FitError(f"calibration run {failed[0]} cannot start in the simulator; drop it from the calibration frame")
    calibration = calibrate_on_rows(frame, table, architectures, hw, split_name="calibrate", sample_valley=False)
    measured = frame[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float)
    simulated = measured * (1.0 + calibration.residuals)
    keys = keys_of_frame(frame)
    residuals = pd.DataFrame({
        col.MODEL: [key.model for key in keys], col.INPUT_LEN_MEAN: [key.input_len for key in keys],
        col.OUTPUT_LEN_MEAN: [key.output_len for key in keys], col.MAX_NUM_SEQS: [key.max_num_seqs for key in keys],
        "measured_throughput_per_s": measured, "simulated_throughput_per_s": simulated,
        "relative_error": simulated / measured - 1.0,
    })
    return calibration.constants, residuals


def validate(frame: pd.DataFrame, architectures: ArchitectureCatalog, hw: Hardware, consts: SimConstants,
             seed: int = 0, schedules: ScheduleTable | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The simulator at `consts` on every run of ``frame`` (ok and preempted rows alike).

    Returns (per-run frame, per-curve frame). Per curve (model, IL, OL): MAPE % of
    throughput and of mean batch size (the simulated one is the time-averaged running
    batch over the active window, the limit of the pipeline's once-a-second scrapes), and
    ``kv_saturation_agreement``: share of runs where the simulator preempts iff the real
    run did; ``kv_capacity_mape`` and ``advisor_kv_capacity_mape``: MAPE % of the KV capacity (tokens
    per rank) against the one vLLM reported (NaN where no run of the curve recorded it), as the
    simulator's memory plan sizes it (`slim.sim.memory`, the profile run at the run's cap) and as
    `slim advise` and `slim tune` estimate it where the runs record none
    (`slim.gpu.kv_memory.kv_capacity_tokens_or_default`: vLLM's default reservation less the weights
    and a fixed activation overhead).
    """
    table = _schedules_for(frame, architectures, hw, consts, seed, schedules)
    predicted = prediction_costs(frame, table, architectures, hw).predict(consts)
    keys = keys_of_frame(frame)
    runs = pd.DataFrame({
        col.MODEL: frame[col.MODEL].to_numpy(), col.INPUT_LEN_MEAN: [key.input_len for key in keys],
        col.OUTPUT_LEN_MEAN: [key.output_len for key in keys], col.MAX_NUM_SEQS: [key.max_num_seqs for key in keys],
        "measured_throughput_per_s": frame[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float),
        "simulated_throughput_per_s": predicted.throughput_per_s,
        "measured_mean_batch_size": frame[col.MEAN_BATCH_SIZE].to_numpy(dtype=float),
        "simulated_mean_batch_size": predicted.mean_batch_size,
        "measured_preemptions": [float(v or 0.0) if not (isinstance(v, float) and math.isnan(v)) else 0.0
                                 for v in frame.get(col.NUM_PREEMPTIONS, pd.Series(0.0, index=frame.index))],
        "simulated_preemptions": predicted.num_preemptions,
        "measured_kv_capacity_tokens": frame.get(col.KV_CAPACITY_TOKENS,
                                                 pd.Series(np.nan, index=frame.index)).to_numpy(dtype=float),
        "simulated_kv_capacity_tokens": [s.kv_capacity_tokens for s in table.for_frame(frame)],
        "advisor_kv_capacity_tokens": [
            kv_capacity_tokens_or_default(math.nan, architectures[key.model], hw, key.tensor_parallel)[0]
            for key in keys],
    })
    runs["throughput_ape"] = 100 * (runs["simulated_throughput_per_s"] / runs["measured_throughput_per_s"] - 1).abs()
    runs["batch_ape"] = 100 * (runs["simulated_mean_batch_size"] / runs["measured_mean_batch_size"] - 1).abs()
    runs["kv_saturation_agrees"] = (runs["measured_preemptions"] > 0) == (runs["simulated_preemptions"] > 0)
    for estimate, error in (("simulated_kv_capacity_tokens", "kv_capacity_ape"),
                            ("advisor_kv_capacity_tokens", "advisor_kv_capacity_ape")):
        runs[error] = 100 * (runs[estimate] / runs["measured_kv_capacity_tokens"] - 1).abs()
    curves = runs.groupby([col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN], as_index=False).agg(
        runs=(col.MAX_NUM_SEQS, "size"), throughput_mape=("throughput_ape", "mean"),
        batch_mape=("batch_ape", "mean"), kv_saturation_agreement=("kv_saturation_agrees", "mean"),
        kv_capacity_mape=("kv_capacity_ape", "mean"), advisor_kv_capacity_mape=("advisor_kv_capacity_ape", "mean"),
        measured_preempted_runs=("measured_preemptions", lambda v: int((v > 0).sum())),
        simulated_preempted_runs=("simulated_preemptions", lambda v: int((v > 0).sum())))
    return runs, curves


def write_calibration_yaml(consts: SimConstants, residuals: pd.DataFrame, path: str | Path,
                           curves: pd.DataFrame | None = None, source: str = "", hardware: str | None = None) -> Path:
    """Write the constants (key ``constants``, loadable by `load_sim_constants`) with the
    hardware key they were fitted on, the fit residuals (one per fitted run:
    `slim.sim.constants.load_calibration_runs` reads them back) and, if given, the per-curve
    validation."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    errors = residuals["relative_error"].abs() * 100
    document = {
        "description": "slim.sim calibrated constants (vLLM V0 simulator, H100 64 GB); written by "
                       "slim.sim.calibrate.write_calibration_yaml" + (f" from {source}" if source else ""),
        **({"hardware": hardware} if hardware is not None else {}),
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
