"""Snakemake adapter: Fig. 4, modelled decode-phase DRAM-bandwidth and compute utilisation."""
import pandas as pd

from slim.paper.figures.common import save_figure
from slim.paper.figures.modelled import plot_decode_utilisation
from slim.paper.modelled_characterisation import decode_bandwidth_cap
from slim.pipeline.io import open_log
from slim.sim.constants import load_sim_constants

log = open_log(snakemake.log[0])
table = pd.read_csv(snakemake.input.table)
cap = decode_bandwidth_cap(load_sim_constants(snakemake.input.constants))
save_figure(plot_decode_utilisation(table, cap), snakemake.output.pdf, snakemake.output.png)
log.info("Fig. 4 (%s): DRAM util mean %.3f..%.3f (cap %.3f), compute util mean %.4f..%.4f",
         snakemake.params.characterisation["model"], table["dram_util_mean"].min(), table["dram_util_mean"].max(),
         cap, table["compute_util_mean"].min(), table["compute_util_mean"].max())
