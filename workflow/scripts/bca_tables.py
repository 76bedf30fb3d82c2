"""Snakemake adapter: Table V (SLIM-BCA and, on real data, SIM-BCA vs full-profile BCA), Table VI (cost)."""
import pandas as pd

from slim.paper.advisor_study import CONFIDENT_CAP, available_experiments, confidence_summary, table5, table6
from slim.paper.advisor_study_config import load_bca_config
from slim.paper.splits import load_settings
from slim.paper.tables import (
    as_display,
    confidence_note,
    latex_escaped_columns,
    to_booktabs,
    to_html_page,
    to_markdown,
)
from slim.pipeline.io import open_log, read_sim_schedules, write_csv, write_text
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware

log = open_log(snakemake.log[0])
label = snakemake.params.dataset_label
study = load_bca_config(snakemake.input.bca_config)
every_run = pd.read_parquet(snakemake.input.clean)
clean = study.study_rows(every_run)   # Table V's curves; Table VI's settings select their own runs
hardware = load_hardware(snakemake.input.hardware)[snakemake.params.hardware]

schedules = read_sim_schedules(snakemake.input.sim_schedules, snakemake.input.sim_constants)
experiments, absent = available_experiments(clean, study.table5)
for line in absent:
    log.info("%s", line)
decisions = table5(clean, experiments, load_architectures(snakemake.input.models), hardware,
                   study.epsilon, study.strict_slo_multiplier, study.slo_reference_max_num_seqs, schedules,
                   study.confidence)
write_csv(decisions, snakemake.output.table5_csv)
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
write_text(to_booktabs(latex_escaped_columns(shown), table5_caption, "tab:table5", precision=1),
           snakemake.output.table5)
write_text(to_html_page(latex_escaped_columns(shown), table5_caption, "Table V"), snakemake.output.table5_html)

cost = table6(every_run, load_settings(snakemake.input.settings))
write_csv(cost, snakemake.output.table6_csv)
log.info("Table VI:\n%s", cost.to_string())
cost_shown = as_display(cost, ("Prof.", "Pred.")).set_index("setting")
table6_caption = f"Profiling cost: runs profiled to fit SLIM (Prof.) and predicted instead (Pred.), {label}."
write_text(to_booktabs(latex_escaped_columns(cost_shown), table6_caption, "tab:table6"), snakemake.output.table6)
write_text(to_html_page(latex_escaped_columns(cost_shown), table6_caption, "Table VI"), snakemake.output.table6_html)
write_text(f"Table VI on **{label}** data (profiling cost):\n\n{to_markdown(cost_shown)}\n"
           f"Mean profiling time saved: **{cost['Time save (%)'].iloc[-1]:.1f}%** (paper: 43.85%).\n",
           snakemake.output.table6_md)
