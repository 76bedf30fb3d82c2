"""Snakemake adapter: Fig. 10, the unseen-model setting, measured vs SLIM and both baselines."""
import pandas as pd

from slim.paper.figures.common import save_figure
from slim.paper.figures.heldout import plot_unseen_model
from slim.paper.heldout import mape_table
from slim.paper.splits import load_settings
from slim.pipeline.io import open_log

log = open_log(snakemake.log[0])
predictions = pd.concat([pd.read_parquet(path) for path in snakemake.input.predictions], ignore_index=True)
labels = {setting.name: setting.label for setting in load_settings(snakemake.input.settings)}
setting_name = snakemake.params.setting
figure = plot_unseen_model(predictions, mape_table(predictions), setting_name, snakemake.params.dataset_label,
                           setting_label=labels.get(setting_name), observed=snakemake.params.observed)
save_figure(figure, snakemake.output.pdf, snakemake.output.png)
log.info("Fig. 10 of %s: setting '%s'", snakemake.params.dataset_label, setting_name)
