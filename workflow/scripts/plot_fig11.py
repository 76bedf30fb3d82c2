"""Snakemake adapter: Fig. 11, measured vs SLIM (fitted on the training models only) for unseen models."""
import pandas as pd

from slim.paper.figures.common import save_figure
from slim.paper.figures.generalisation import plot_generalisation
from slim.pipeline.io import open_log

log = open_log(snakemake.log[0])
predictions = pd.read_csv(snakemake.input.predictions)
figure = plot_generalisation(predictions, snakemake.params.dataset_label, ", ".join(snakemake.params.train_models))
save_figure(figure, snakemake.output.pdf, snakemake.output.png)
log.info("Fig. 11 of %s: %d target run(s) of %d model(s)", snakemake.params.dataset_label, len(predictions),
         predictions["model"].nunique())
