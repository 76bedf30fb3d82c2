"""Snakemake adapter: Fig. 1, throughput and E2E latency vs mean batch size, one row per runs table
(preempted runs crossed)."""
import pandas as pd

from slim import columns as col
from slim.paper.figures.characterisation import plot_batch_scaling_rows
from slim.paper.figures.common import save_figure
from slim.paper.measured_characterisation import PREEMPTED, batch_scaling_runs
from slim.pipeline.io import open_log

log = open_log(snakemake.log[0])
rows = [(label, pd.read_parquet(path), output_len)
        for path, label, output_len in zip(snakemake.input.runs, snakemake.params.dataset_labels,
                                           snakemake.params.output_lens, strict=True)]
save_figure(plot_batch_scaling_rows(rows), snakemake.output.pdf, snakemake.output.png)
for label, runs, output_len in rows:
    shown = batch_scaling_runs(runs, output_len)
    log.info("Fig. 1 row %s%s: %d run(s) of %d model(s), %d preempted (KV cache capacity exceeded)", label,
             "" if output_len is None else f" at OL {output_len}", len(shown), shown[col.MODEL].nunique(),
             int((shown[col.STATUS] == PREEMPTED).sum()))
