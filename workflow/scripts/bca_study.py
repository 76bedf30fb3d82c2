"""Snakemake adapter: Table V (SLIM-BCA and, on real data, SIM-BCA vs full-profile BCA), Table VI (cost), the knee
advisor vs full-profile BCA vs SLIM-BCA (and SIM-BCA) on every curve, Fig. 13 (GPU memory per model) and, where the
advisor config names its transfers, Fig. 12 (SLIM-BCA's and SIM-BCA's sensitivity to epsilon and the SLO)."""
import pandas as pd

from slim.paper.advisor_study import (
    advisor_comparison,
    available_curves,
    available_experiments,
    confidence_summary,
    memory_breakdown,
    sensitivity_agreement,
    sensitivity_study,
    table5,
    table6,
)
from slim.paper.advisor_study_config import load_bca_config
from slim.paper.advisor_tables import advisor_study_tables
from slim.paper.figures.advisor import plot_memory_breakdown, plot_sensitivity
from slim.paper.figures.common import save_figure
from slim.paper.splits import load_settings
from slim.paper.tables import load_paper_reference
from slim.pipeline.io import job_specs, open_log, write_csv, write_text

log = open_log(snakemake.log[0])
output = snakemake.output
label = snakemake.params.dataset_label
study = load_bca_config(snakemake.input.bca_config)
every_run = pd.read_parquet(snakemake.input.clean)
clean = study.study_rows(every_run)   # the study's curves; Table VI's settings select their own runs
specs = job_specs(snakemake)
catalog, hardware, schedules = specs.catalog, specs.hardware, specs.schedules

# Table V: only the targets this dataset measured (the others are named in the caption)
experiments, absent = available_experiments(clean, study.table5)
for line in absent:
    log.info("%s", line)
decisions = table5(clean, experiments, catalog, hardware, study.epsilon, study.strict_slo_multiplier,
                   study.slo_reference_max_num_seqs, schedules, study.confidence)
write_csv(decisions, output.table5_csv)
log.info("Table V:\n%s", decisions.to_string())
if study.confidence is not None and not decisions.empty:
    log.info("Table V at confidence %g:\n%s", study.confidence, confidence_summary(decisions).to_string())

# Table VI
settings = load_settings(snakemake.input.settings)
cost = table6(every_run, settings)
write_csv(cost, output.table6_csv)
log.info("Table VI:\n%s", cost.to_string())

# The advisors on every curve
comparison = advisor_comparison(clean, catalog, hardware, study.epsilon, study.strict_slo_multiplier,
                                study.slo_reference_max_num_seqs, schedules)
write_csv(comparison, output.advisors_csv)
log.info("advisors:\n%s", comparison.to_string())

tables = advisor_study_tables(decisions, absent, cost, comparison, study, label, schedules is not None,
                              load_paper_reference(snakemake.input.reference))
write_text(tables.table5_latex, output.table5)
write_text(tables.table5_html, output.table5_html)
write_text(tables.table6_latex, output.table6)
write_text(tables.table6_html, output.table6_html)
write_text(tables.table6_markdown, output.table6_md)
write_text(tables.advisors_latex, output.advisors)
write_text(tables.advisors_html, output.advisors_html)
write_text(tables.advisors_markdown, output.advisors_md)

# Fig. 13: only the curves this dataset measured (the others are named on the figure)
curves, absent_curves = available_curves(clean, study.fig13_curves, "Fig. 13")
for line in absent_curves:
    log.info("%s", line)
memory = memory_breakdown(clean, curves, catalog, hardware, study.epsilon, study.strict_slo_multiplier,
                          study.slo_reference_max_num_seqs)
write_csv(memory, output.memory)
log.info("memory breakdown:\n%s", memory.to_string())
save_figure(plot_memory_breakdown(memory, label, study.epsilon, study.strict_slo_multiplier, tuple(absent_curves)),
            output.fig13_pdf, output.fig13_png)

# Fig. 12
if "fig12_pdf" in output.keys():
    by_name = {setting.name: setting for setting in settings}
    studies = [sensitivity_study(clean, by_name[name], catalog, hardware, study.sensitivity_epsilons,
                                 study.sensitivity_slo_multipliers, study.slo_reference_max_num_seqs, schedules)
               for name in study.fig12_transfers]
    grid = pd.concat([grid for grid, _ in studies], ignore_index=True)
    efficiency = pd.concat([efficiency for _, efficiency in studies], ignore_index=True)
    write_csv(grid, output.fig12_grid)
    write_csv(efficiency, output.fig12_efficiency)
    log.info("sensitivity grid:\n%s", grid.to_string())
    log.info("batching efficiency of each advisor's curve:\n%s", efficiency.to_string())
    for advisor, (same, cells) in sensitivity_agreement(grid).items():
        log.info("%s picks full-profile BCA's cap in %d of %d cells", advisor, same, cells)
    save_figure(plot_sensitivity(grid, label, efficiency), output.fig12_pdf, output.fig12_png)
