"""Snakemake adapter: the SLO metrics of one dataset predicted with each model left out, their accuracy,
and the frontier of every curve."""
import pandas as pd

from slim.paper.figures.frontier import dataset_frontiers, frontier_figure, save_curve_frontiers, save_frontier
from slim.paper.slo_predictions import slo_accuracy, slo_accuracy_markdown, slo_predictions
from slim.pipeline.io import job_specs, open_log, write_csv, write_text
from slim.specs.slo import Slos

log = open_log(snakemake.log[0])
specs = job_specs(snakemake)
params = snakemake.params
table = slo_predictions(pd.read_parquet(snakemake.input.clean), specs.catalog, specs.hardware, specs.schedules,
                        params.confidence)
accuracy = slo_accuracy(table, params.confidence)
write_csv(table, snakemake.output.predictions)
write_csv(accuracy, snakemake.output.accuracy)
write_text(slo_accuracy_markdown(accuracy, params.dataset_label), snakemake.output.accuracy_md)
frontiers = dataset_frontiers(table, Slos.of(params.frontier_slos, reference_cap=params.frontier_reference_cap),
                              params.frontier_predictor)
save_frontier(frontier_figure(frontiers), snakemake.output.pdf)
paths = save_curve_frontiers(frontiers, snakemake.output.pngs)
log.info("accuracy:\n%s\n%d frontiers: %s", accuracy.to_string(), len(paths), ", ".join(p.name for p in paths))
