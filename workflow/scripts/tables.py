"""Snakemake adapter: Tables III and IV (ours and the paper's; LaTeX, and HTML for the report) from the per-setting
predictions, with bootstrap intervals of every MAPE, the paired comparisons and the average-reduction headline;
and SIM's constants per setting from the fits (empty where SIM is not evaluated)."""
import json
from pathlib import Path

import pandas as pd

from slim.paper.heldout import applicable_setting_names, mape_table
from slim.paper.mape_intervals import average_mape_reduction_interval, curve_labels, mape_intervals, with_intervals
from slim.paper.splits import load_settings
from slim.paper.tables import heldout_tables, load_paper_reference, sim_constants_markdown, sim_constants_table
from slim.pipeline.io import open_log, write_csv, write_text

log = open_log(snakemake.log[0])
settings = load_settings(snakemake.input.settings)
predictions = pd.concat([pd.read_parquet(path) for path in snakemake.input.predictions], ignore_index=True)
curves = curve_labels(pd.read_parquet(snakemake.input.clean))
intervals, comparisons = mape_intervals(predictions, curves)
mapes = with_intervals(mape_table(predictions, pd.concat([pd.read_parquet(path)
                                                          for path in snakemake.input.identifiability],
                                                         ignore_index=True)), intervals)
write_csv(mapes, snakemake.output.mapes)
write_csv(comparisons, snakemake.output.comparisons)
reduction = average_mape_reduction_interval(predictions, curves, applicable_setting_names(settings))
write_csv(reduction.to_frame(), snakemake.output.reduction)
log.info("average MAPE reduction of SLIM vs the baselines: %.1f%% (CI %.1f%% to %.1f%%)", reduction.estimate_pct,
         reduction.ci_low_pct, reduction.ci_high_pct)
tables = heldout_tables(mapes, settings, load_paper_reference(snakemake.input.reference),
                        snakemake.params.dataset_label, tuple(snakemake.params.ablation_transfers), reduction,
                        comparisons)
write_text(tables.table3_latex, snakemake.output.table3)
write_text(tables.table3_html, snakemake.output.table3_html)
write_text(tables.table3_paper_latex, snakemake.output.table3_paper)
write_text(tables.table4_latex, snakemake.output.table4)
write_text(tables.table4_html, snakemake.output.table4_html)
write_text(tables.summary_markdown, snakemake.output.summary)

fits = {Path(path).stem: json.loads(Path(path).read_text()) for path in snakemake.input.fits}
constants = sim_constants_table(fits, settings)
write_csv(constants, snakemake.output.sim_constants)
write_text(sim_constants_markdown(constants, settings, snakemake.params.dataset_label),
           snakemake.output.sim_constants_md)
