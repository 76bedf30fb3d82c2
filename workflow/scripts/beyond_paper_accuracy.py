"""Snakemake adapter: the simulator's accuracy beyond the paper (slim.paper.beyond_paper)."""
import pandas as pd

from slim import columns as col
from slim.paper.beyond_paper import (
    accuracy_markdown,
    curve_accuracy,
    curve_predictions,
    model_accuracy,
    other_models_constants,
)
from slim.pipeline.io import open_log, write_csv, write_text
from slim.sim.constants import load_sim_constants
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware

log = open_log(snakemake.log[0])
catalog, hardware = load_architectures(snakemake.input.models), load_hardware(snakemake.input.hardware)
frames, notes = [], []
constants = load_sim_constants(snakemake.input.constants)
for dataset, scored, path in zip(snakemake.params.datasets, snakemake.params.models, snakemake.input.clean):
    every_run = pd.read_parquet(path)
    # Zero-shot constants per scored model: calibrated on the dataset's other models on its accelerator.
    other_models, left = other_models_constants(every_run, catalog, hardware, constants, scored)
    notes += [f"{dataset}: {line}" for line in left]
    usable = every_run[every_run[col.MODEL].isin(scored)] if scored else every_run
    log.info("%s: %d usable runs scored", dataset, len(usable))
    frames.append(curve_predictions(usable, catalog, hardware, constants, other_models).assign(dataset=dataset))
predictions = pd.concat(frames, ignore_index=True)
curves = curve_accuracy(predictions)
models = model_accuracy(curves)
write_csv(predictions, snakemake.output.predictions)
write_csv(curves, snakemake.output.curves)
write_csv(models, snakemake.output.accuracy)
write_text(accuracy_markdown(models, snakemake.params.labels, notes),
           snakemake.output.summary)
log.info("accuracy per model:\n%s", models.to_string())
