"""Snakemake adapter: replay every tuning policy on one dataset's measured curves."""
import pandas as pd

from slim.advisor.tune import TuneSettings
from slim.advisor.tune_model import tune_prior
from slim.paper.advisor_study_config import load_bca_config
from slim.paper.splits import load_settings
from slim.paper.tuning_replay import replay_dataset, tune_policy
from slim.pipeline.io import job_specs, open_log, write_csv, write_text
from slim.predictors import tune_predictors

log = open_log(snakemake.log[0])
study = load_bca_config(snakemake.input.bca_config)
frame = study.study_rows(pd.read_parquet(snakemake.input.clean))
specs = job_specs(snakemake)
architectures, hardware = specs.catalog, specs.hardware
schedules = specs.schedules
priors = {tune_policy(name): tune_prior(entry, architectures, hardware, schedules)
          for name, entry in tune_predictors().items() if schedules is not None or not entry.needs_schedules}
settings = load_settings(snakemake.input.settings[0]) if snakemake.input.settings else None
tuning = TuneSettings(confidence=snakemake.params.confidence, tolerance=snakemake.params.tolerance)
replay, calibration, notes = replay_dataset(frame, architectures, hardware, study.epsilon,
                                            study.strict_slo_multiplier, study.slo_reference_max_num_seqs,
                                            settings, priors, tuning)
write_csv(replay, snakemake.output.replay)
write_csv(calibration.assign(dataset=snakemake.params.dataset_label), snakemake.output.calibration)
write_text("".join(f"{line}\n" for line in notes), snakemake.output.notes)
log.info("replay:\n%s\ncalibration:\n%s\nnotes:\n%s", replay.to_string(), calibration.to_string(), "\n".join(notes))
