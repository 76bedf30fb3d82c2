"""Snakemake adapter: ingest a trace folder into results/<dataset>/runs.parquet."""
from slim.pipeline.io import open_log, write_parquet
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware
from slim.traces.ingest import ingest_traces
from slim.traces.offline_ingest import IngestOptions
from slim.traces.summary_table import TableLayout

log = open_log(snakemake.log[0])
options = IngestOptions.on(load_hardware(snakemake.input.hardware), snakemake.params.hardware,
                           TableLayout.from_config(snakemake.params.table))
runs = ingest_traces(snakemake.params.trace_dir, snakemake.params.dataset,
                     load_architectures(snakemake.input.models), options)
log.info("ingested %d runs from %s: %s", len(runs), snakemake.params.trace_dir,
         runs["status"].value_counts().to_dict())
write_parquet(runs, snakemake.output.runs)
