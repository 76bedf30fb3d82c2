"""Snakemake adapter: the simulator-vs-real validation table and figure."""
import pandas as pd

from slim.paper.figures.common import save_figure
from slim.paper.figures.sim_validation import plot_validation
from slim.paper.sim_validation import validation_html, validation_latex
from slim.pipeline.io import open_log, write_text

log = open_log(snakemake.log[0])
curves = pd.read_csv(snakemake.input.validation)
write_text(validation_latex(curves), snakemake.output.table)
write_text(validation_html(curves), snakemake.output.table_html)
save_figure(plot_validation(curves), snakemake.output.pdf, snakemake.output.png)
log.info("median curve throughput MAPE %.2f%%", curves["throughput_mape"].median())
