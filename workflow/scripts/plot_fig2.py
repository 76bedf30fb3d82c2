"""Snakemake adapter: Fig. 2, throughput vs max_num_seqs and vs mean batch size under the length sweeps."""
import pandas as pd

from slim import columns as col
from slim.paper.figures.characterisation import plot_length_sweeps
from slim.paper.figures.common import save_figure
from slim.paper.measured_characterisation import sweep_panels
from slim.pipeline.io import open_log

log = open_log(snakemake.log[0])
clean = pd.read_parquet(snakemake.input.clean)
if snakemake.params.models:
    clean = clean[clean[col.MODEL].isin(snakemake.params.models)]
figure = plot_length_sweeps(clean, snakemake.params.dataset_label)
save_figure(figure, snakemake.output.pdf, snakemake.output.png)
log.info("Fig. 2 of %s: %d run(s); panels: %s", snakemake.params.dataset_label, len(clean),
         "; ".join(panel.title for panel in sweep_panels(clean)))
