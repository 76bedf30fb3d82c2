"""Snakemake adapter: the simulator-vs-real validation table and figure."""
from pathlib import Path

import pandas as pd

from slim.pipeline_io import open_log
from slim.plots import save_figure
from slim.sim.validation_report import plot_validation, validation_latex

log = open_log(snakemake.log[0])
curves = pd.read_csv(snakemake.input.validation)
Path(snakemake.output.table).write_text(validation_latex(curves))
save_figure(plot_validation(curves), snakemake.output.pdf, snakemake.output.png)
log.info("median curve throughput MAPE %.2f%%", curves["throughput_mape"].median())
