"""Snakemake adapter: ingest a trace folder into results/<dataset>/runs.parquet, then apply the cleaning policy and
write the cleaning report."""
import pandas as pd

from slim.pipeline.io import job_specs, open_log, write_csv, write_parquet, write_text
from slim.traces.clean import CleaningPolicy, clean_runs, summarise_report
from slim.traces.ingest import ingest_traces
from slim.traces.offline_ingest import IngestOptions
from slim.traces.summary_table import TableLayout

log = open_log(snakemake.log[0])
specs = job_specs(snakemake)
options = IngestOptions.on(specs.hardware_table, snakemake.params.hardware,
                           TableLayout.from_config(snakemake.params.table))
runs = ingest_traces(snakemake.params.trace_dir, snakemake.params.dataset,
                     specs.catalog, options)
log.info("ingested %d runs from %s: %s", len(runs), snakemake.params.trace_dir,
         runs["status"].value_counts().to_dict())
write_parquet(runs, snakemake.output.runs)

# Cleaning reads the runs as written (as a job of its own did).
runs = pd.read_parquet(snakemake.output.runs)
rows = {column: tuple(values) for column, values in dict(snakemake.params.rows).items()}
usable, report = clean_runs(runs, CleaningPolicy(keep_preempted=snakemake.params.keep_preempted, rows=rows))
log.info("%d of %d runs kept", len(usable), len(report))
write_parquet(usable, snakemake.output.clean)
write_csv(report, snakemake.output.report_csv)
write_text(summarise_report(report, snakemake.params.dataset), snakemake.output.report_md)
