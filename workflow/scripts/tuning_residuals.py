"""Snakemake adapter: each tuning prior's log residuals on one dataset's runs, for the kernels of the others."""
import pandas as pd

from slim.paper.advisor_study_config import load_bca_config
from slim.paper.replay.dataset import replay_residuals
from slim.paper.replay.priors import replay_priors
from slim.pipeline.io import job_specs, open_log, write_parquet

log = open_log(snakemake.log[0])
study = load_bca_config(snakemake.input.bca_config)
frame = study.study_rows(pd.read_parquet(snakemake.input.clean))
specs = job_specs(snakemake)
priors = replay_priors(frame, specs.catalog, specs.hardware, specs.schedules,
                       snakemake.input.sim_constants[0] if snakemake.input.sim_constants else None)
residuals = replay_residuals(frame, priors, snakemake.params.dataset_label, study.strict_slo_multiplier,
                             study.slo_reference_max_num_seqs, snakemake.params.noise_sd)
write_parquet(residuals, snakemake.output.residuals)
log.info("residuals of %d runs:\n%s", len(residuals), residuals.groupby("policy")[
    ["log_residual_throughput", "log_residual_e2e"]].describe().to_string())
