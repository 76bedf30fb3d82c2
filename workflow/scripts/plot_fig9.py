"""Snakemake adapter: Fig. 9, measured vs SLIM on every held-out setting of one dataset."""
import pandas as pd

from slim.paper.figures.common import save_figure
from slim.paper.figures.heldout import plot_heldout_settings
from slim.paper.heldout import mape_table, with_no_runs_noted
from slim.paper.splits import load_settings
from slim.pipeline.io import open_log

log = open_log(snakemake.log[0])
predictions = pd.concat([pd.read_parquet(path) for path in snakemake.input.predictions], ignore_index=True)
# A setting of which the dataset has no runs has an empty evaluation: listed as n/a under the panels.
settings = with_no_runs_noted(load_settings(snakemake.input.settings), predictions)
figure = plot_heldout_settings(predictions, mape_table(predictions), settings, snakemake.params.dataset_label,
                               observed=snakemake.params.observed)
save_figure(figure, snakemake.output.pdf, snakemake.output.png)
log.info("Fig. 9 of %s: %d applicable setting(s) from %d prediction file(s)",
         snakemake.params.dataset_label, sum(setting.applicable for setting in settings),
         len(snakemake.input.predictions))
