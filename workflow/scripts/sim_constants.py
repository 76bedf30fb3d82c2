"""Snakemake adapter: SIM's calibrated constants per held-out setting, from the fits JSON files."""
import json
from pathlib import Path

from slim.paper.splits import load_settings
from slim.paper.tables import sim_constants_markdown, sim_constants_table
from slim.pipeline.io import open_log, write_csv

log = open_log(snakemake.log[0])
settings = load_settings(snakemake.input.settings)
fits = {Path(path).stem: json.loads(Path(path).read_text()) for path in snakemake.input.fits}
table = sim_constants_table(fits, settings)
write_csv(table, snakemake.output.csv)
Path(snakemake.output.md).write_text(sim_constants_markdown(table, settings, snakemake.params.dataset_label))
log.info("SIM constants of %d setting(s)", len(table))
