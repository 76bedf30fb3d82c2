"""Snakemake adapter: the layout decision replayed on the datasets' curves at several layouts
(slim.paper.replay.layouts), with the per-layout cap decisions and the goals."""
import pandas as pd

from slim.paper.replay.curves import SloKind
from slim.paper.replay.layout_summary import cap_summary, layout_goals, layout_markdown, layout_summary
from slim.paper.replay.layouts import replay_dataset_layouts
from slim.pipeline.io import open_log, write_csv, write_text
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware
from slim.tune.session import TuneSettings

log = open_log(snakemake.log[0])
architectures, hardware = load_architectures(snakemake.input.models), load_hardware(snakemake.input.hardware)
predictions = pd.read_csv(snakemake.input.predictions)
options = snakemake.params.options
settings = TuneSettings(confidence=options["confidence"], tolerance=options["tolerance"], margin=options["margin"])
parts = []
for dataset, path in zip(snakemake.params.datasets, snakemake.input.clean):
    kinds = [SloKind(name, tuple(bounds)) for name, bounds in options["slo_kinds"][dataset].items()]
    parts.append(replay_dataset_layouts(pd.read_parquet(path), predictions, dataset, kinds, options["epsilon"],
                                        options["seeds"], settings, architectures, hardware))
    log.info("%s: %d layout decisions, %d cap decisions", dataset, len(parts[-1][0]), len(parts[-1][1]))
layouts = pd.concat([part[0] for part in parts], ignore_index=True)
caps = pd.concat([part[1] for part in parts], ignore_index=True)
summary, per_cap = layout_summary(layouts), cap_summary(caps)
goals = layout_goals(summary, per_cap, caps)
write_csv(layouts, snakemake.output.layouts)
write_csv(caps, snakemake.output.caps)
write_csv(goals, snakemake.output.goals)
notes = [line for part in parts for line in part[2]]
labels = dict(zip(snakemake.params.datasets, snakemake.params.labels))
write_text(layout_markdown(summary, per_cap, goals, notes, labels), snakemake.output.summary)
