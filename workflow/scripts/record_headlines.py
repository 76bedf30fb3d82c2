"""Snakemake adapter: re-record config/headlines.yaml from the current table3.csv files (explicit target only)."""
import pandas as pd

from slim.paper.headlines import load_record, record_as_yaml, record_headlines
from slim.pipeline.io import open_log, write_text

log = open_log(snakemake.log[0])
tables = {dataset: pd.read_csv(path) for dataset, path in zip(snakemake.params.datasets, snakemake.input.mapes)}
text = record_as_yaml(record_headlines(load_record(snakemake.params.record), tables))
write_text(text, snakemake.params.record)
write_text(text, snakemake.output.recorded)
log.info("recorded the headlines of %s into %s", ", ".join(sorted(tables)), snakemake.params.record)
