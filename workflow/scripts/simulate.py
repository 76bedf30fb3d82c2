"""Snakemake adapter: simulate the configured grid into raw_traces/simulated (public-trace layout)."""
import shutil
from pathlib import Path

import yaml

from slim.pipeline.io import job_specs, open_log, worker_count
from slim.sim.constants import load_sim_constants
from slim.sim.grid import simulate_grid_to_dir

log = open_log(snakemake.log[0])
specs = job_specs(snakemake)
out_dir = Path(snakemake.output.traces)
shutil.rmtree(out_dir, ignore_errors=True)
run_dirs = simulate_grid_to_dir(
    yaml.safe_load(Path(snakemake.input.grid).read_text()), specs.catalog,
    specs.hardware_table, load_sim_constants(snakemake.input.constants), out_dir,
    workers=worker_count(snakemake.threads))
log.info("simulated %d run directories into %s", len(run_dirs), out_dir)
