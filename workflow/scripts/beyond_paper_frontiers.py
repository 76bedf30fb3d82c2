"""Snakemake adapter: the per-GPU frontier of each cell with several layouts, one curve per layout
(slim.paper.figures.layout_frontier), measured and the accuracy beyond the paper's zero-shot prediction."""
import pandas as pd

from slim.paper.figures.layout_frontier import dataset_layout_frontiers, save_layout_frontiers
from slim.pipeline.io import open_log

log = open_log(snakemake.log[0])
predictions = pd.read_csv(snakemake.input.predictions)
frontiers = [frontier for dataset, path in zip(snakemake.params.datasets, snakemake.input.clean)
             for frontier in dataset_layout_frontiers(pd.read_parquet(path), dataset, predictions)]
paths = save_layout_frontiers(frontiers, snakemake.output.frontiers)
log.info("%d frontiers: %s", len(paths), ", ".join(path.name for path in paths))
