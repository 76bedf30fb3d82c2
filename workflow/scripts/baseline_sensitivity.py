"""Snakemake adapter: every reading of the two baselines on every held-out setting, with intervals, beside the
paper's Table III, and the headline under each; CSV, the report's HTML and the results page's section."""
import pandas as pd

from slim.paper.baseline_sensitivity import baseline_sensitivity, sensitivity_html, why_the_headline_differs
from slim.paper.splits import load_settings
from slim.paper.tables import load_paper_reference
from slim.pipeline.io import open_log, write_csv, write_text
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware

log = open_log(snakemake.log[0])
result = baseline_sensitivity(
    pd.read_parquet(snakemake.input.clean),
    pd.concat([pd.read_parquet(path) for path in snakemake.input.predictions], ignore_index=True),
    load_settings(snakemake.input.settings), load_architectures(snakemake.input.models),
    load_hardware(snakemake.input.hardware)[snakemake.params.hardware], load_paper_reference(snakemake.input.reference))
write_csv(result.table, snakemake.output.table)
write_text(sensitivity_html(result.table, snakemake.params.dataset_label), snakemake.output.html)
write_text(why_the_headline_differs(result.table, snakemake.params.dataset_label), snakemake.output.summary)
for variant in result.variants:
    headline = result.headline(variant.name)
    log.info("%s: headline %.1f%% (CI %.1f%% to %.1f%%)", variant.name, headline["value_pct"],
             headline["value_pct_ci_low"], headline["value_pct_ci_high"])
