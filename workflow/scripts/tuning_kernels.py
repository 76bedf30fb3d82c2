"""Snakemake adapter: slim tune's residual kernels, fitted on every real dataset's residuals (none where the
run has no real dataset: the file then holds no kernel and says so)."""
import pandas as pd

from slim.paper.replay.priors import TUNE_POLICIES, predictor_of
from slim.pipeline.io import open_log, write_text
from slim.tune.kernel import RESIDUAL_COLUMNS, fit_kernels

log = open_log(snakemake.log[0])
tables = [pd.read_parquet(path) for path in snakemake.input.residuals]
table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=list(RESIDUAL_COLUMNS))
kernels = fit_kernels(table, {policy: predictor_of(policy) for policy in TUNE_POLICIES})
write_text(kernels.to_yaml(), snakemake.output.kernels)
log.info("kernels fitted on %s:\n%s", kernels.fitted_on or "no real dataset", kernels.to_yaml())
