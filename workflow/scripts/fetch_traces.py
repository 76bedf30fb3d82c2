"""Snakemake adapter: download one public trace source and verify every file (slim.traces.fetch)."""
from pathlib import Path

from slim.pipeline.io import open_log
from slim.traces.fetch import fetch_source, trace_source

log = open_log(snakemake.log[0])
source = trace_source(snakemake.wildcards.source, snakemake.params.source)
log.info("fetching %s from %s (%s)", source.name, source.url, source.license or "license not stated")
fetch_source(source, Path(snakemake.output.traces), timeout_s=snakemake.params.timeout_s,
             attempts=snakemake.params.attempts)
