"""Snakemake adapter: write the README's generated headline table (the README itself is left alone)."""
import pandas as pd

from slim.paper.headline_table import DatasetHeadline, headline_table
from slim.paper.splits import load_settings
from slim.paper.tables import load_paper_reference
from slim.pipeline.io import open_log, write_text

log = open_log(snakemake.log[0])
profiling_costs = iter(snakemake.input.profiling_costs)
datasets = [DatasetHeadline(label, pd.read_csv(mapes), pd.read_csv(reduction),
                            pd.read_csv(next(profiling_costs)) if profiled else None)
            for label, mapes, reduction, profiled in zip(snakemake.params.labels, snakemake.input.mapes,
                                                         snakemake.input.reductions, snakemake.params.profiled)]
write_text(headline_table(datasets, load_settings(snakemake.input.paper_settings),
                          load_paper_reference(snakemake.input.reference)), snakemake.output[0])
log.info("README headline table written to %s; copy it into README.md with `python -m slim.pipeline.readme`",
         snakemake.output[0])
