"""Snakemake adapter: simulate the schedule of every ok or preempted run of a real dataset once."""
import pandas as pd

from slim.pipeline.io import job_specs, open_log, worker_count, write_parquet
from slim.sim.constants import load_sim_constants
from slim.sim.schedules import schedules_of_runs
from slim.traces.clean import select_dataset_rows

log = open_log(snakemake.log[0])
# Only the dataset's own rows (datasets.<name>.rows: one accelerator of a shared table).
rows = {column: tuple(values) for column, values in dict(snakemake.params.rows).items()}
runs = pd.read_parquet(snakemake.input.runs)
runs = select_dataset_rows(runs, rows) if rows else runs
specs = job_specs(snakemake)
schedules = schedules_of_runs(runs, specs.catalog, specs.hardware,
                              load_sim_constants(snakemake.input.constants), workers=worker_count(snakemake.threads))
write_parquet(schedules.to_frame(), snakemake.output.schedules)
log.info("simulated %d run configurations once each (%d preempt in the simulator)", len(schedules),
         sum(schedule.num_preemptions > 0 for schedule in schedules))
