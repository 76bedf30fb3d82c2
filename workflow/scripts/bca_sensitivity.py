"""Snakemake adapter: Fig. 12, SLIM-BCA's (and on real data SIM-BCA's) sensitivity to epsilon and the SLO."""
import pandas as pd

from slim.errors import ConfigError
from slim.paper.advisor_study import sensitivity_agreement, sensitivity_study
from slim.paper.advisor_study_config import load_bca_config
from slim.paper.figures.advisor import plot_sensitivity
from slim.paper.figures.common import save_figure
from slim.paper.splits import load_settings
from slim.pipeline.io import open_log, read_sim_schedules, write_csv
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware

log = open_log(snakemake.log[0])
study = load_bca_config(snakemake.input.bca_config)
if not study.fig12_transfers:
    raise ConfigError(f"{snakemake.input.bca_config}: fig12_transfers is empty, so there is no Fig. 12 to draw; "
                      "name a held-out setting whose validation target is one curve")
clean = study.study_rows(pd.read_parquet(snakemake.input.clean))
settings = {setting.name: setting for setting in load_settings(snakemake.input.settings)}
catalog = load_architectures(snakemake.input.models)
hardware = load_hardware(snakemake.input.hardware)[snakemake.params.hardware]
schedules = read_sim_schedules(snakemake.input.sim_schedules, snakemake.input.sim_constants)
studies = [sensitivity_study(clean, settings[name], catalog, hardware, study.sensitivity_epsilons,
                             study.sensitivity_slo_multipliers, study.slo_reference_max_num_seqs, schedules)
           for name in study.fig12_transfers]
grid = pd.concat([grid for grid, _ in studies], ignore_index=True)
efficiency = pd.concat([efficiency for _, efficiency in studies], ignore_index=True)
write_csv(grid, snakemake.output.grid)
write_csv(efficiency, snakemake.output.efficiency)
log.info("sensitivity grid:\n%s", grid.to_string())
log.info("batching efficiency of each advisor's curve:\n%s", efficiency.to_string())
for advisor, (same, cells) in sensitivity_agreement(grid).items():
    log.info("%s picks full-profile BCA's cap in %d of %d cells", advisor, same, cells)
save_figure(plot_sensitivity(grid, snakemake.params.dataset_label, efficiency), snakemake.output.pdf,
            snakemake.output.png)
