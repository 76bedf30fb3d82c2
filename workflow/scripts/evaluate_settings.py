"""Snakemake adapter: fit SLIM (+ ablations) and the baselines on every held-out setting of a dataset."""
import json

import pandas as pd

from slim.paper.heldout import evaluate_settings
from slim.paper.splits import load_settings
from slim.pipeline.io import open_log, read_sim_schedules, write_parquet, write_text
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware

log = open_log(snakemake.log[0])
settings = {setting.name: setting for setting in load_settings(snakemake.input.settings)}
hardware = load_hardware(snakemake.input.hardware)[snakemake.params.hardware]
schedules = read_sim_schedules(snakemake.input.sim_schedules, snakemake.input.sim_constants)
evaluations = evaluate_settings(pd.read_parquet(snakemake.input.clean),
                                [settings[name] for name in snakemake.params.settings],
                                load_architectures(snakemake.input.models), hardware, schedules)
for name, evaluation, predictions, identifiability, fits in zip(
        snakemake.params.settings, evaluations, snakemake.output.predictions, snakemake.output.identifiability,
        snakemake.output.fits, strict=True):
    for ablation, fit in evaluation.slim_fits.items():
        log.info("%s: SLIM %s fit on %d points: train MAPE %.2f%%, %s; %s", name, ablation, fit.n_train_points,
                 fit.train_mape_throughput_pct, fit.params, fit.identifiability.describe())
    if evaluation.sim_calibration is not None:
        calibration = evaluation.sim_calibration
        log.info("%s: SIM calibrated on %d runs: train MAPE %.2f%%, %s; %s", name, calibration.n_train_points,
                 calibration.train_mape_throughput_pct, calibration.to_dict()["constants"],
                 calibration.identifiability.describe())
    write_parquet(evaluation.predictions, predictions)
    write_parquet(evaluation.identifiability, identifiability)
    write_text(json.dumps(evaluation.fits_as_dict(), indent=2, sort_keys=True) + "\n", fits)
