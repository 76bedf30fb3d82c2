"""Snakemake adapter: fit the simulator's constants on the real traces and validate it per curve; the validation
table and figure."""
import pandas as pd

from slim import columns as col
from slim.paper.figures.common import save_figure
from slim.paper.figures.sim_validation import plot_validation
from slim.paper.sim_validation import validation_html, validation_latex
from slim.pipeline.io import job_specs, open_log, write_csv, write_text
from slim.sim.calibrate import calibrate, validate, write_calibration_yaml
from slim.sim.constants import load_sim_constants
from slim.sim.schedules import read_schedules

log = open_log(snakemake.log[0])
runs = pd.read_parquet(snakemake.input.runs)
specs = job_specs(snakemake)
architectures, hardware = specs.catalog, specs.hardware
fit_rows = runs[runs[col.STATUS] == "ok"]
validation_rows = runs[runs[col.STATUS].isin(["ok", "preempted"])]
schedules = read_schedules(snakemake.input.schedules, load_sim_constants(snakemake.input.constants))
constants, residuals = calibrate(fit_rows, architectures, hardware, initial=schedules.constants, schedules=schedules)
_, curves = validate(validation_rows, architectures, hardware, constants, schedules=schedules)
write_calibration_yaml(constants, residuals, snakemake.output.constants, curves,
                       source=f"{snakemake.input.runs} (ok runs; validation includes preempted runs)",
                       hardware=snakemake.params.hardware)
write_csv(curves, snakemake.output.validation)
log.info("calibrated on %d runs; median curve throughput MAPE %.2f%%, worst %.2f%%", len(fit_rows),
         curves["throughput_mape"].median(), curves["throughput_mape"].max())

# The table and figure show the validation as written (the CSV keeps six significant digits).
written = pd.read_csv(snakemake.output.validation)
write_text(validation_latex(written), snakemake.output.table)
write_text(validation_html(written), snakemake.output.table_html)
save_figure(plot_validation(written), snakemake.output.pdf, snakemake.output.png)
