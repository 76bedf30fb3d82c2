"""Snakemake adapter: fit SLIM (+ ablations) and the baselines on one held-out setting."""
import json

import pandas as pd

from slim.paper.heldout import evaluate_setting
from slim.paper.splits import load_settings
from slim.pipeline.io import open_log, read_sim_schedules, write_parquet, write_text
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware

log = open_log(snakemake.log[0])
settings = {setting.name: setting for setting in load_settings(snakemake.input.settings)}
setting = settings[snakemake.params.setting]
hardware = load_hardware(snakemake.input.hardware)[snakemake.params.hardware]
schedules = read_sim_schedules(snakemake.input.sim_schedules, snakemake.input.sim_constants)
evaluation = evaluate_setting(pd.read_parquet(snakemake.input.clean), setting,
                              load_architectures(snakemake.input.models), hardware, schedules)
for name, fit in evaluation.slim_fits.items():
    log.info("SLIM %s fit on %d points: train MAPE %.2f%%, %s; %s", name, fit.n_train_points,
             fit.train_mape_throughput_pct, fit.params, fit.identifiability.describe())
if evaluation.sim_calibration is not None:
    calibration = evaluation.sim_calibration
    log.info("SIM calibrated on %d runs: train MAPE %.2f%%, %s; %s", calibration.n_train_points,
             calibration.train_mape_throughput_pct, calibration.to_dict()["constants"],
             calibration.identifiability.describe())
write_parquet(evaluation.predictions, snakemake.output.predictions)
write_parquet(evaluation.identifiability, snakemake.output.identifiability)
write_text(json.dumps(evaluation.fits_as_dict(), indent=2, sort_keys=True) + "\n", snakemake.output.fits)
