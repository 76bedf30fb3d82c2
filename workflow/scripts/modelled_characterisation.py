"""Snakemake adapter: the modelled characterisation table (simulated phase times, modelled decode
metrics) and Figs. 3-6 drawn from it (the table as written to the CSV)."""
import io

import pandas as pd

from slim.paper.decode_attention_table import load_paper_table1
from slim.paper.figures.common import save_figure
from slim.paper.figures.modelled import (
    paper_matches,
    plot_attention_roofline,
    plot_decode_kernel_shares,
    plot_decode_utilisation,
    plot_phase_breakdown,
)
from slim.paper.modelled_characterisation import (
    characterisation_csv,
    characterisation_table,
    decode_bandwidth_cap,
    load_characterisation,
)
from slim.pipeline.io import open_log, write_text

log = open_log(snakemake.log[0])
out = snakemake.output
config, arch, hardware, constants = load_characterisation(snakemake.params.characterisation, snakemake.input.models,
                                                          snakemake.input.hardware, snakemake.input.constants)
csv_text = characterisation_csv(characterisation_table(config, arch, hardware, constants))
write_text(csv_text, out.csv)
table = pd.read_csv(io.StringIO(csv_text))
for _, row in table.iterrows():
    log.info("%s = %d: decode share %.3f, DRAM util mean %.3f peak %.3f, attention share %.3f, "
             "final attention %.2f FLOP/B at %.2f TFLOP/s", row["sweep"], row["value"], row["decode_share"],
             row["dram_util_mean"], row["dram_util_peak"], row["attention_share"],
             row["final_attention_intensity_flop_per_byte"], row["final_attention_tflop_per_s"])

save_figure(plot_phase_breakdown(table), out.fig3_pdf, out.fig3_png)
cap = decode_bandwidth_cap(constants)
save_figure(plot_decode_utilisation(table, cap), out.fig4_pdf, out.fig4_png)
log.info("Fig. 4: DRAM util mean %.3f..%.3f (cap %.3f), compute util mean %.4f..%.4f",
         table["dram_util_mean"].min(), table["dram_util_mean"].max(), cap,
         table["compute_util_mean"].min(), table["compute_util_mean"].max())
save_figure(plot_decode_kernel_shares(table), out.fig5_pdf, out.fig5_png)
paper = load_paper_table1(snakemake.input.paper)
if not paper_matches(paper, table, hardware):
    log.warning("paper Table I (%s on %s) is not this model/GPU: its points are not overlaid", paper.model,
                paper.hardware)
save_figure(plot_attention_roofline(table, hardware, paper), out.fig6_pdf, out.fig6_png)
