"""Snakemake adapter: measured vs predicted throughput, one panel per accelerator."""
import pandas as pd

from slim.paper.figures.common import save_figure
from slim.paper.figures.cross_accelerator import measured_vs_predicted_figure
from slim.pipeline.io import open_log

log = open_log(snakemake.log[0])
files = list(snakemake.input.predictions)
panels, start = [], 0
for accelerator, count in zip(snakemake.params.accelerators, snakemake.params.files_per_accelerator):
    panels.append((accelerator, pd.concat([pd.read_parquet(path) for path in files[start:start + count]],
                                          ignore_index=True)))
    start += count
save_figure(measured_vs_predicted_figure(panels), snakemake.output.pdf, snakemake.output.png)
log.info("measured vs predicted throughput: %d panels", len(panels))
