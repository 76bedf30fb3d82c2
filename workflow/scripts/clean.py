"""Snakemake adapter: apply the cleaning policy and write the cleaning report."""
import pandas as pd

from slim.pipeline.io import open_log, write_csv, write_parquet, write_text
from slim.traces.clean import CleaningPolicy, clean_runs, summarise_report

log = open_log(snakemake.log[0])
runs = pd.read_parquet(snakemake.input.runs)
rows = {column: tuple(values) for column, values in dict(snakemake.params.rows).items()}
usable, report = clean_runs(runs, CleaningPolicy(keep_preempted=snakemake.params.keep_preempted, rows=rows))
log.info("%d of %d runs kept", len(usable), len(report))
write_parquet(usable, snakemake.output.clean)
write_csv(report, snakemake.output.report_csv)
write_text(summarise_report(report, snakemake.params.dataset), snakemake.output.report_md)
