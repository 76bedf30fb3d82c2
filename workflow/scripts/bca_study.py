"""Snakemake adapter: Table V (SLIM-BCA and, on real data, SIM-BCA vs full-profile BCA), Table VI (cost), the knee
advisor vs full-profile BCA vs SLIM-BCA (and SIM-BCA) on every curve, Fig. 13 (GPU memory per model) and, where the
advisor config names its transfers, Fig. 12 (SLIM-BCA's and SIM-BCA's sensitivity to epsilon and the SLO)."""
import pandas as pd

from slim.paper.advisor_study import (
    CONFIDENT_CAP,
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
from slim.paper.figures.advisor import plot_memory_breakdown, plot_sensitivity
from slim.paper.figures.common import save_figure
from slim.paper.splits import load_settings
from slim.paper.tables import (
    advisors_display,
    as_display,
    confidence_note,
    full_profile_agreement,
    latex_escaped_columns,
    load_paper_reference,
    to_booktabs,
    to_html_page,
    to_markdown,
)
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
note = ""
if study.confidence is not None and not decisions.empty:
    note = " " + confidence_note(confidence_summary(decisions), study.confidence).replace("%", "\\%")
    log.info("Table V at confidence %g:\n%s", study.confidence, confidence_summary(decisions).to_string())
if decisions.empty:   # no configured target was measured on this dataset: the table says so
    shown = pd.DataFrame({"note": ["every configured target is absent"]}, index=pd.Index(["n/a"], name="target"))
else:
    shown = as_display(decisions, tuple(name for name in ("N points", "B full", "B SLIM", CONFIDENT_CAP, "B SIM")
                                       if name in decisions.columns)).set_index("target")
note += "".join(f" {line.replace('%', chr(92) + '%')}." for line in absent)
flavours = "SLIM-BCA and SIM-BCA" if schedules is not None else "SLIM-BCA"
table5_caption = (f"{flavours} vs full-profile BCA (epsilon {study.epsilon:g}, SLO {study.strict_slo_multiplier:g}x "
                  f"the target's E2E at its smallest profiled cap) as profiling curves are added, judged on measured "
                  f"data, {label}.{note}")
write_text(to_booktabs(latex_escaped_columns(shown), table5_caption, "tab:table5", precision=1), output.table5)
write_text(to_html_page(latex_escaped_columns(shown), table5_caption, "Table V"), output.table5_html)

# Table VI
settings = load_settings(snakemake.input.settings)
cost = table6(every_run, settings)
write_csv(cost, output.table6_csv)
log.info("Table VI:\n%s", cost.to_string())
cost_shown = as_display(cost, ("Prof.", "Pred.")).set_index("setting")
table6_caption = f"Profiling cost: runs profiled to fit SLIM (Prof.) and predicted instead (Pred.), {label}."
write_text(to_booktabs(latex_escaped_columns(cost_shown), table6_caption, "tab:table6"), output.table6)
write_text(to_html_page(latex_escaped_columns(cost_shown), table6_caption, "Table VI"), output.table6_html)
write_text(f"Table VI on **{label}** data (profiling cost):\n\n{to_markdown(cost_shown)}\n"
           f"Mean profiling time saved: **{cost['Time save (%)'].iloc[-1]:.1f}%** "
           f"(paper: {load_paper_reference(snakemake.input.reference)['headline_time_saving_pct']:g}%).\n",
           output.table6_md)

# The advisors on every curve
comparison = advisor_comparison(clean, catalog, hardware, study.epsilon, study.strict_slo_multiplier,
                                study.slo_reference_max_num_seqs, schedules)
write_csv(comparison, output.advisors_csv)
log.info("advisors:\n%s", comparison.to_string())
advisors_shown = advisors_display(comparison)
advisors_caption = (f"Knee advisor, full-profile BCA and SLIM-BCA{' and SIM-BCA' if schedules is not None else ''} "
                    f"(leave-one-curve-out) on every measured curve, "
                    f"{label}: cap, measured throughput retained (\\% of the curve's peak), measured E2E (s) at the "
                    f"cap and KV memory of the cap (GiB); epsilon {study.epsilon:g}, "
                    f"SLO {study.strict_slo_multiplier:g}x.")
write_text(to_booktabs(latex_escaped_columns(advisors_shown), advisors_caption, "tab:advisors"), output.advisors)
write_text(to_html_page(latex_escaped_columns(advisors_shown), advisors_caption, "Advisor comparison"),
           output.advisors_html)
write_text(f"Advisors on every measured curve of **{label}** data:\n\n"
           + to_markdown(advisors_shown, index_label="curve") + "\n" + full_profile_agreement(comparison),
           output.advisors_md)

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
