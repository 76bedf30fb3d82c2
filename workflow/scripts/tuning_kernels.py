"""Snakemake adapter: slim tune's residual kernels, fitted on every real dataset's residuals."""
import pandas as pd

from slim.advisor.tune_kernel import fit_kernels
from slim.paper.tuning_replay import TUNE_POLICIES, predictor_of
from slim.pipeline.io import open_log, write_text

log = open_log(snakemake.log[0])
table = pd.concat([pd.read_parquet(path) for path in snakemake.input.residuals], ignore_index=True)
kernels = fit_kernels(table, {policy: predictor_of(policy) for policy in TUNE_POLICIES})
write_text(kernels.to_yaml(), snakemake.output.kernels)
log.info("kernels fitted on %s:\n%s", kernels.fitted_on, kernels.to_yaml())
