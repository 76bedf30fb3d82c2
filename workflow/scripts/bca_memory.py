"""Snakemake adapter: Fig. 13, GPU memory per model with full-profile BCA's cap."""
import pandas as pd

from slim.paper.advisor_study import available_curves, memory_breakdown
from slim.paper.advisor_study_config import load_bca_config
from slim.paper.figures.advisor import plot_memory_breakdown
from slim.paper.figures.common import save_figure
from slim.pipeline.io import open_log, write_csv
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware

log = open_log(snakemake.log[0])
study = load_bca_config(snakemake.input.bca_config)
clean = study.study_rows(pd.read_parquet(snakemake.input.clean))
hardware = load_hardware(snakemake.input.hardware)[snakemake.params.hardware]
curves, absent = available_curves(clean, study.fig13_curves, "Fig. 13")
for line in absent:
    log.info("%s", line)
memory = memory_breakdown(clean, curves, load_architectures(snakemake.input.models), hardware,
                          study.epsilon, study.strict_slo_multiplier, study.slo_reference_max_num_seqs)
write_csv(memory, snakemake.output.memory)
log.info("memory breakdown:\n%s", memory.to_string())
save_figure(plot_memory_breakdown(memory, snakemake.params.dataset_label, study.epsilon, study.strict_slo_multiplier,
                                  tuple(absent)),
            snakemake.output.pdf, snakemake.output.png)
