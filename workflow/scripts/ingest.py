"""Snakemake adapter: ingest a trace folder into results/<dataset>/runs.parquet."""
from slim.pipeline.config import ingest_options
from slim.pipeline.io import open_log, write_parquet
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware
from slim.traces.ingest import ingest_traces

log = open_log(snakemake.log[0])
options = ingest_options(snakemake.params.hardware, snakemake.params.table, load_hardware(snakemake.input.hardware))
runs = ingest_traces(snakemake.params.trace_dir, snakemake.params.dataset,
                     load_architectures(snakemake.input.models), options)
log.info("ingested %d runs from %s: %s", len(runs), snakemake.params.trace_dir,
         runs["status"].value_counts().to_dict())
write_parquet(runs, snakemake.output.runs)
