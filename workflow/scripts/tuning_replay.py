"""Snakemake adapter: replay every tuning policy on one dataset's measured curves, under every SLO kind
of the config, with the honest priors and the adversarial ones."""
import pandas as pd

from slim.paper.advisor_study_config import load_bca_config
from slim.paper.replay.curves import SloKind
from slim.paper.replay.dataset import ReplayOptions, replay_dataset
from slim.paper.replay.priors import TUNE_POLICIES, adversarial_priors, predictor_of, replay_priors
from slim.paper.splits import load_settings
from slim.pipeline.io import job_specs, open_log, write_csv, write_text
from slim.tune.kernel import fit_kernels
from slim.tune.session import TuneSettings

log = open_log(snakemake.log[0])
study = load_bca_config(snakemake.input.bca_config)
frame = study.study_rows(pd.read_parquet(snakemake.input.clean))
specs = job_specs(snakemake)
label = snakemake.params.dataset_label
priors = replay_priors(frame, specs.catalog, specs.hardware, specs.schedules,
                       snakemake.input.sim_constants[0] if snakemake.input.sim_constants else None)
# The kernels are chosen on the other real datasets' residuals only (this dataset's file is not an input).
others = [pd.read_parquet(path) for path in snakemake.input.other_residuals]
kernels = fit_kernels(pd.concat(others, ignore_index=True) if others else pd.DataFrame(columns=["dataset", "policy"]),
                      {policy: predictor_of(policy) for policy in TUNE_POLICIES}, exclude=[label])
settings = load_settings(snakemake.input.settings[0]) if snakemake.input.settings else None
kinds = tuple(SloKind(name, tuple(bounds)) for name, bounds in snakemake.params.slo_kinds.items())
adversarial = (adversarial_priors(priors["tune_sim"], specs.hardware)
               if snakemake.params.adversarial and "tune_sim" in priors else {})
options = ReplayOptions(TuneSettings(confidence=snakemake.params.confidence, tolerance=snakemake.params.tolerance,
                                     margin=snakemake.params.margin),
                        kernels, noise_sd=snakemake.params.noise_sd, seeds=snakemake.params.seeds, slo_kinds=kinds,
                        adversarial=adversarial)
replay, calibration, notes = replay_dataset(frame, specs.catalog, specs.hardware, study.epsilon,
                                            study.strict_slo_multiplier, study.slo_reference_max_num_seqs,
                                            settings, priors, options, label)
write_csv(replay, snakemake.output.replay)
write_csv(calibration.assign(dataset=label, dataset_kind=snakemake.params.dataset_kind),
          snakemake.output.calibration)
write_text("".join(f"{line}\n" for line in notes), snakemake.output.notes)
log.info("kernels:\n%s\nreplay:\n%s\ncalibration:\n%s\nnotes:\n%s", kernels.to_yaml(), replay.to_string(),
         calibration.to_string(), "\n".join(notes))
