"""Snakemake adapter: Fig. 3, simulated prefill vs decode share of execution time under the sweeps."""
import pandas as pd

from slim.paper.figures.common import save_figure
from slim.paper.figures.modelled import plot_phase_breakdown
from slim.pipeline.io import open_log

log = open_log(snakemake.log[0])
table = pd.read_csv(snakemake.input.table)
save_figure(plot_phase_breakdown(table), snakemake.output.pdf, snakemake.output.png)
log.info("Fig. 3 (%s): %d configuration(s); prefill share %.3f..%.3f", snakemake.params.characterisation["model"],
         len(table), table["prefill_share"].min(), table["prefill_share"].max())
