"""Snakemake adapter: the layout decision measured on a dataset (slim.paper.layout_choices) and the per-GPU
frontier of each workload with several layouts, measured runs only (slim.paper.figures.layout_frontier)."""
import pandas as pd

from slim.defaults import DEFAULT_EPSILON
from slim.paper.figures.layout_frontier import dataset_layout_frontiers, save_layout_frontiers
from slim.paper.layout_choices import layout_choices, layout_choices_markdown
from slim.paper.replay.curves import SloKind
from slim.pipeline.io import open_log, write_csv, write_text

log = open_log(snakemake.log[0])
runs = pd.read_parquet(snakemake.input.clean)
kinds = [SloKind(name, tuple(bounds)) for name, bounds in snakemake.params.slo_kinds.items()]
table, notes = layout_choices(runs, kinds, DEFAULT_EPSILON)
write_csv(table, snakemake.output.choices)
write_text(layout_choices_markdown(table, snakemake.params.dataset_label, notes), snakemake.output.summary)
paths = save_layout_frontiers(dataset_layout_frontiers(runs, snakemake.wildcards.dataset), snakemake.output.frontiers)
log.info("%d workload decisions, %d frontiers", len(table), len(paths))
