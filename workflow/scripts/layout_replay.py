"""Snakemake adapter: the layout decision replayed on the datasets' curves at several layouts
(slim.paper.replay.layouts), with the per-layout cap decisions and the goals."""
import pandas as pd

from slim import columns as col
from slim.paper.replay.curves import RunNoise, SloKind, repeat_scatter
from slim.paper.replay.layout_summary import cap_summary, layout_goals, layout_markdown, layout_summary
from slim.paper.replay.layouts import LayoutReplayInputs, replay_layouts
from slim.paper.replay.priors import tabled_replay_prior
from slim.pipeline.io import open_log, write_csv, write_text
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware
from slim.tune.session import TuneSettings

log = open_log(snakemake.log[0])
architectures, hardware = load_architectures(snakemake.input.models), load_hardware(snakemake.input.hardware)
predictions = pd.read_csv(snakemake.input.predictions)
options = snakemake.params.options
settings = TuneSettings(confidence=options["confidence"], tolerance=options["tolerance"], margin=options["margin"])
layout_parts, cap_parts, notes = [], [], []
for dataset, path in zip(snakemake.params.datasets, snakemake.input.clean):
    runs = pd.read_parquet(path)
    runs = runs[runs[col.STATUS] == "ok"]
    kinds = [SloKind(name, tuple(bounds)) for name, bounds in options["slo_kinds"][dataset].items()]
    scatter = repeat_scatter(runs)[0]
    noises = [RunNoise()] + [RunNoise(scatter, seed) for seed in range(1, options["seeds"] + 1)]
    layouts, caps, lines = [], [], []
    for name, on_hardware in runs.groupby(col.HARDWARE, sort=True):   # a prior per accelerator
        prior = tabled_replay_prior(predictions[predictions["dataset"] == dataset], on_hardware, "zero_shot_", name,
                                    "SIM zero-shot (constants calibrated on the other models)")
        inputs = LayoutReplayInputs(prior, settings, architectures, hardware, scatter)
        part, cap_part, part_lines = replay_layouts(on_hardware, kinds, options["epsilon"], noises, inputs)
        layouts.append(part)
        caps.append(cap_part)
        lines += part_lines
    layouts, caps = pd.concat(layouts, ignore_index=True), pd.concat(caps, ignore_index=True)
    log.info("%s: %d layout decisions, %d cap decisions", dataset, len(layouts), len(caps))
    layout_parts.append(layouts.assign(dataset=dataset))
    cap_parts.append(caps.assign(dataset=dataset))
    notes += [f"{dataset}: {line}" for line in lines]
layouts, caps = pd.concat(layout_parts, ignore_index=True), pd.concat(cap_parts, ignore_index=True)
summary, per_cap = layout_summary(layouts), cap_summary(caps)
goals = layout_goals(summary, per_cap, caps)
write_csv(layouts, snakemake.output.layouts)
write_csv(caps, snakemake.output.caps)
write_csv(goals, snakemake.output.goals)
write_text(layout_markdown(summary, per_cap, goals, notes, dict(zip(snakemake.params.datasets,
                                                                    snakemake.params.labels))),
           snakemake.output.summary)
