"""Snakemake adapter: write the verdict of the MAPEs against config/headlines.yaml (never fails on drift); a
must-beat counts only where the paired bootstrap interval of the difference (mape_comparisons.csv) supports it."""
import pandas as pd
import yaml

from slim.paper.headlines import DEFAULT_TOLERANCE_PCT_POINTS, headline_verdict, load_record, measured_headlines
from slim.pipeline.io import open_log, write_text

log = open_log(snakemake.log[0])
dataset = snakemake.params.dataset
mapes = pd.read_csv(snakemake.input.mapes)
record = load_record(snakemake.input.expected)
verdict = headline_verdict(mapes, record, dataset, pd.read_csv(snakemake.input.comparisons))
tolerance = record.get(dataset, {}).get("tolerance_pct_points", DEFAULT_TOLERANCE_PCT_POINTS)
write_text(yaml.safe_dump({dataset: measured_headlines(mapes, tolerance)}, sort_keys=True), snakemake.output.measured)
write_text(verdict.to_text(), snakemake.output.check)
for problem in verdict.problems:
    log.warning(problem)
log.info(verdict.to_text().splitlines()[0])
