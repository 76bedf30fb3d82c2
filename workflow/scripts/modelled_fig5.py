"""Snakemake adapter: Fig. 5, modelled shares of decode GPU time by kernel group against active context."""
import pandas as pd

from slim.paper.figures.common import save_figure
from slim.paper.figures.modelled import plot_decode_kernel_shares
from slim.pipeline.io import open_log

log = open_log(snakemake.log[0])
table = pd.read_csv(snakemake.input.table)
save_figure(plot_decode_kernel_shares(table), snakemake.output.pdf, snakemake.output.png)
largest = table.loc[table["active_context_tokens"].idxmax()]
log.info("Fig. 5 (%s): at the largest active context %d tokens attention %.3f, FFN %.3f, other %.3f",
         snakemake.params.characterisation["model"], largest["active_context_tokens"], largest["attention_share"],
         largest["ffn_share"], largest["other_share"])
