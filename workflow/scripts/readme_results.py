"""Snakemake adapter: print the generated result tables into the README's results section."""
from pathlib import Path

from slim.pipeline.io import open_log
from slim.pipeline.readme import replace_section

log = open_log(snakemake.log[0])
summary = "\n".join(Path(path).read_text() for path in snakemake.input.summaries)
readme = Path(snakemake.params.readme)
readme.write_text(replace_section(readme.read_text(), "results", summary))
Path(snakemake.output[0]).write_text(summary)
log.info("README results section updated")
