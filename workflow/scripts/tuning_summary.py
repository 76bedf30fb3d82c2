"""Snakemake adapter: the tuning replay of every dataset, summarised against its goals, drawn and written
for the README."""
from pathlib import Path

import pandas as pd

from slim.paper.figures.common import save_figure
from slim.paper.figures.tuning import gpu_time_vs_regret_figure
from slim.paper.replay.summary import headline_markdown, summarise, summary_markdown, tuning_goals
from slim.pipeline.io import open_log, write_csv, write_text

log = open_log(snakemake.log[0])
labels = list(snakemake.params.dataset_labels)
real = list(snakemake.params.real_dataset_labels)
replays = {label: pd.read_csv(path) for label, path in zip(labels, snakemake.input.replays)}
calibration = pd.concat([pd.read_csv(path) for path in snakemake.input.calibrations], ignore_index=True)
notes = {label: Path(path).read_text().splitlines() for label, path in zip(labels, snakemake.input.notes)}
summary = summarise(replays)
write_csv(summary, snakemake.output.csv)
write_text(summary_markdown(summary, calibration, notes, real), snakemake.output.md)
write_text(headline_markdown(summary), snakemake.output.headline)
save_figure(gpu_time_vs_regret_figure(summary), snakemake.output.pdf, snakemake.output.png)
log.info("tuning summary:\n%s\ngoals:\n%s", summary.to_string(), tuning_goals(summary, calibration, real).to_string())
