"""Snakemake adapter: compare the MAPEs with config/headlines.yaml; fail on drift."""
from pathlib import Path

import pandas as pd
import yaml

from slim.paper.headlines import check_headlines, load_expected, measured_headlines
from slim.pipeline.io import open_log

log = open_log(snakemake.log[0])
mapes = pd.read_csv(snakemake.input.mapes)
expected = load_expected(snakemake.input.expected, snakemake.params.dataset)
Path(snakemake.output.measured).write_text(
    yaml.safe_dump({snakemake.params.dataset: measured_headlines(mapes, expected["tolerance_pct_points"])},
                   sort_keys=True))
problems = check_headlines(mapes, expected)
if problems:
    for problem in problems:
        log.error(problem)
    raise SystemExit("headline check failed:\n" + "\n".join(problems))
Path(snakemake.output.check).write_text("all headline MAPEs within tolerance\n")
