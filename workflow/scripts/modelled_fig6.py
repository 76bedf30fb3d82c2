"""Snakemake adapter: Fig. 6, modelled final-step decode attention on the roofline, with the paper's Table I."""
import pandas as pd

from slim.paper.decode_attention_table import load_paper_table1
from slim.paper.figures.common import save_figure
from slim.paper.figures.modelled import paper_matches, plot_attention_roofline
from slim.pipeline.io import open_log
from slim.specs.hardware import load_hardware

log = open_log(snakemake.log[0])
table = pd.read_csv(snakemake.input.table)
hardware = load_hardware(snakemake.input.hardware)[snakemake.params.characterisation["hardware"]]
paper = load_paper_table1(snakemake.input.paper)
if not paper_matches(paper, table, hardware):
    log.warning("paper Table I (%s on %s) is not this model/GPU: its points are not overlaid", paper.model,
                paper.hardware)
save_figure(plot_attention_roofline(table, hardware, paper), snakemake.output.pdf, snakemake.output.png)
log.info("Fig. 6 (%s on %s): final-step attention %.2f..%.2f FLOP/B, %.2f..%.2f TFLOP/s",
         snakemake.params.characterisation["model"], hardware.name,
         table["final_attention_intensity_flop_per_byte"].min(), table["final_attention_intensity_flop_per_byte"].max(),
         table["final_attention_tflop_per_s"].min(), table["final_attention_tflop_per_s"].max())
