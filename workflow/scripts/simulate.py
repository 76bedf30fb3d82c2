"""Snakemake adapter: simulate the configured grid into raw_traces/simulated (public-trace layout)."""
import shutil
from pathlib import Path

import yaml

from slim.pipeline.io import open_log, worker_count
from slim.sim.constants import load_sim_constants
from slim.sim.grid import simulate_grid_to_dir
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware

log = open_log(snakemake.log[0])
out_dir = Path(snakemake.output.traces)
shutil.rmtree(out_dir, ignore_errors=True)
run_dirs = simulate_grid_to_dir(
    yaml.safe_load(Path(snakemake.input.grid).read_text()), load_architectures(snakemake.input.models),
    load_hardware(snakemake.input.hardware), load_sim_constants(snakemake.input.constants), out_dir,
    workers=worker_count(snakemake.threads))
log.info("simulated %d run directories into %s", len(run_dirs), out_dir)
