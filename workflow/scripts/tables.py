"""Snakemake adapter: Tables III and IV (ours and the paper's) from the per-setting predictions, and SIM's
constants per setting from the fits (empty where SIM is not evaluated)."""
import json
from pathlib import Path

import pandas as pd

from slim.paper.heldout import applicable_setting_names, average_mape_reduction_pct, mape_table
from slim.paper.splits import load_settings
from slim.paper.tables import heldout_tables, load_paper_reference, sim_constants_markdown, sim_constants_table
from slim.pipeline.io import open_log, write_csv, write_text

log = open_log(snakemake.log[0])
settings = load_settings(snakemake.input.settings)
mapes = mape_table(pd.concat([pd.read_parquet(path) for path in snakemake.input.predictions], ignore_index=True),
                   pd.concat([pd.read_parquet(path) for path in snakemake.input.identifiability], ignore_index=True))
write_csv(mapes, snakemake.output.mapes)
reduction = average_mape_reduction_pct(mapes, applicable_setting_names(settings))
log.info("average MAPE reduction of SLIM vs the baselines: %.1f%%", reduction)
tables = heldout_tables(mapes, settings, load_paper_reference(snakemake.input.reference),
                        snakemake.params.dataset_label, tuple(snakemake.params.ablation_transfers), reduction)
write_text(tables.table3_latex, snakemake.output.table3)
write_text(tables.table3_paper_latex, snakemake.output.table3_paper)
write_text(tables.table4_latex, snakemake.output.table4)
write_text(tables.summary_markdown, snakemake.output.summary)

fits = {Path(path).stem: json.loads(Path(path).read_text()) for path in snakemake.input.fits}
constants = sim_constants_table(fits, settings)
write_csv(constants, snakemake.output.sim_constants)
write_text(sim_constants_markdown(constants, settings, snakemake.params.dataset_label),
           snakemake.output.sim_constants_md)
