"""Snakemake adapter: fit SLIM (+ ablations) and the baselines on every held-out setting of a dataset; where the
dataset has them, every reading of the two baselines on every held-out setting, with intervals, beside the paper's
Table III, and the headline under each (issue 19; CSV, the report's HTML and the README's section)."""
import json

import pandas as pd

from slim.paper.baseline_sensitivity import baseline_sensitivity, sensitivity_html, why_the_headline_differs
from slim.paper.heldout import evaluate_settings
from slim.paper.splits import load_settings
from slim.paper.tables import load_paper_reference
from slim.pipeline.io import open_log, read_sim_schedules, write_csv, write_parquet, write_text
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware

log = open_log(snakemake.log[0])
every_setting = load_settings(snakemake.input.settings)
settings = {setting.name: setting for setting in every_setting}
catalog = load_architectures(snakemake.input.models)
hardware = load_hardware(snakemake.input.hardware)[snakemake.params.hardware]
clean = pd.read_parquet(snakemake.input.clean)
schedules = read_sim_schedules(snakemake.input.sim_schedules, snakemake.input.sim_constants)
evaluations = evaluate_settings(clean, [settings[name] for name in snakemake.params.settings], catalog, hardware,
                                schedules)
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

if "sensitivity" in snakemake.output.keys():
    # The readings start from the predictions as written (and as the tables read them).
    result = baseline_sensitivity(
        clean, pd.concat([pd.read_parquet(path) for path in snakemake.output.predictions], ignore_index=True),
        every_setting, catalog, hardware, load_paper_reference(snakemake.input.reference))
    label = snakemake.params.dataset_label
    write_csv(result.table, snakemake.output.sensitivity)
    write_text(sensitivity_html(result.table, label), snakemake.output.sensitivity_html)
    write_text(why_the_headline_differs(result.table, label), snakemake.output.sensitivity_md)
    for variant in result.variants:
        headline = result.headline(variant.name)
        log.info("%s: headline %.1f%% (CI %.1f%% to %.1f%%)", variant.name, headline["value_pct"],
                 headline["value_pct_ci_low"], headline["value_pct_ci_high"])
