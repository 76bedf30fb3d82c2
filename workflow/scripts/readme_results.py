"""Snakemake adapter: write the generated section of docs/results.md (the page itself is left alone)."""
from pathlib import Path

from slim.pipeline.io import open_log, write_text
from slim.pipeline.readme import results_section

log = open_log(snakemake.log[0])
summaries = [Path(path).read_text() for path in snakemake.input.summaries]
write_text(results_section(summaries, snakemake.params.skipped), snakemake.output[0])
log.info("results section written to %s; copy it into docs/results.md with "
         "`python -m slim.pipeline.readme`", snakemake.output[0])
