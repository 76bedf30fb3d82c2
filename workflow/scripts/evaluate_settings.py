"""Snakemake adapter: the held-out evaluation of one dataset. Fits SLIM (+ ablations) and the baselines on every
held-out setting; writes Tables III and IV (ours and the paper's; LaTeX, and HTML for the report) with bootstrap
intervals of every MAPE, the paired comparisons and the average-reduction headline, and SIM's constants per setting
(empty where SIM is not evaluated); checks those MAPEs against config/headlines.yaml (never fails on drift; a
must-beat counts only where the paired bootstrap interval of the difference supports it); and, where the dataset has
them, writes every reading of the two baselines on every held-out setting, with intervals, beside the paper's Table
III, and the headline under each (CSV, the report's HTML and the results page's section)."""
import json
from pathlib import Path

import pandas as pd
import yaml

from slim.paper.baseline_sensitivity import baseline_sensitivity, sensitivity_html, why_the_headline_differs
from slim.paper.headlines import DEFAULT_TOLERANCE_PCT_POINTS, headline_verdict, load_record, measured_headlines
from slim.paper.heldout import applicable_setting_names, evaluate_settings, mape_table
from slim.paper.mape_intervals import average_mape_reduction_interval, curve_labels, mape_intervals, with_intervals
from slim.paper.splits import load_settings
from slim.paper.tables import heldout_tables, load_paper_reference, sim_constants_markdown, sim_constants_table
from slim.pipeline.io import job_specs, open_log, write_csv, write_parquet, write_text

log = open_log(snakemake.log[0])
every_setting = load_settings(snakemake.input.settings)
settings = {setting.name: setting for setting in every_setting}
specs = job_specs(snakemake)
catalog, hardware = specs.catalog, specs.hardware
clean = pd.read_parquet(snakemake.input.clean)
schedules = specs.schedules
evaluations = evaluate_settings(clean, [settings[name] for name in snakemake.params.settings], catalog, hardware,
                                schedules)
for name, evaluation, predictions, identifiability, fits in zip(
        snakemake.params.settings, evaluations, snakemake.output.predictions, snakemake.output.identifiability,
        snakemake.output.fits, strict=True):
    for key, calibration in evaluation.calibrations.items():
        log.info("%s %s", key, calibration.report())
    write_parquet(evaluation.predictions, predictions)
    write_parquet(evaluation.identifiability, identifiability)
    write_text(json.dumps(evaluation.fits_as_dict(), indent=2, sort_keys=True) + "\n", fits)

# Tables III and IV, and the baselines' readings, start from the predictions as written.
output, label = snakemake.output, snakemake.params.dataset_label
predictions = pd.concat([pd.read_parquet(path) for path in output.predictions], ignore_index=True)
reference = load_paper_reference(snakemake.input.reference)
curves = curve_labels(clean)
intervals, comparisons = mape_intervals(predictions, curves)
mapes = with_intervals(mape_table(predictions, pd.concat([pd.read_parquet(path) for path in output.identifiability],
                                                         ignore_index=True)), intervals)
write_csv(mapes, output.mapes)
write_csv(comparisons, output.comparisons)
reduction = average_mape_reduction_interval(predictions, curves, applicable_setting_names(every_setting))
write_csv(reduction.to_frame(), output.reduction)
log.info("average MAPE reduction of SLIM vs the baselines: %.1f%% (CI %.1f%% to %.1f%%)", reduction.estimate_pct,
         reduction.ci_low_pct, reduction.ci_high_pct)
tables = heldout_tables(mapes, every_setting, reference, label, tuple(snakemake.params.ablation_transfers), reduction,
                        comparisons)
write_text(tables.table3_latex, output.table3)
write_text(tables.table3_html, output.table3_html)
write_text(tables.table3_paper_latex, output.table3_paper)
write_text(tables.table4_latex, output.table4)
write_text(tables.table4_html, output.table4_html)
write_text(tables.summary_markdown, output.summary)
fitted = {Path(path).stem: json.loads(Path(path).read_text()) for path in output.fits}
constants = sim_constants_table(fitted, every_setting)
write_csv(constants, output.sim_constants_table)
write_text(sim_constants_markdown(constants, every_setting, label), output.sim_constants_md)

# The headline check reads the tables as written (as a job of its own did).
dataset = snakemake.params.dataset
written, written_comparisons = pd.read_csv(output.mapes), pd.read_csv(output.comparisons)
record = load_record(snakemake.input.expected)
verdict = headline_verdict(written, record, dataset, written_comparisons)
tolerance = record.get(dataset, {}).get("tolerance_pct_points", DEFAULT_TOLERANCE_PCT_POINTS)
write_text(yaml.safe_dump({dataset: measured_headlines(written, tolerance)}, sort_keys=True), output.measured)
write_text(verdict.to_text(), output.check)
for problem in verdict.problems:
    log.warning(problem)
log.info(verdict.to_text().splitlines()[0])

if "sensitivity" in output.keys():
    result = baseline_sensitivity(clean, predictions, every_setting, catalog, hardware, reference)
    write_csv(result.table, snakemake.output.sensitivity)
    write_text(sensitivity_html(result.table, label), snakemake.output.sensitivity_html)
    write_text(why_the_headline_differs(result.table, label), snakemake.output.sensitivity_md)
    for variant in result.variants:
        headline = result.headline(variant.name)
        log.info("%s: headline %.1f%% (CI %.1f%% to %.1f%%)", variant.name, headline["value_pct"],
                 headline["value_pct_ci_low"], headline["value_pct_ci_high"])
