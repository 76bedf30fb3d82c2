"""Snakemake adapter: Fig. 1, throughput and E2E latency vs mean batch size (runs table, preempted runs crossed)."""
import pandas as pd

from slim import columns as col
from slim.characterise import FIG1_STATUSES, PREEMPTED, plot_batch_scaling
from slim.pipeline_io import open_log
from slim.plots import save_figure

log = open_log(snakemake.log[0])
runs = pd.read_parquet(snakemake.input.runs)
figure = plot_batch_scaling(runs, snakemake.params.dataset_label)
save_figure(figure, snakemake.output.pdf, snakemake.output.png)
shown = runs[runs[col.STATUS].isin(FIG1_STATUSES)]
log.info("Fig. 1 of %s: %d run(s) of %d model(s), %d preempted (KV cache capacity exceeded)",
         snakemake.params.dataset_label, len(shown), shown[col.MODEL].nunique(),
         int((shown[col.STATUS] == PREEMPTED).sum()))
