"""Snakemake adapter: knee advisor vs full-profile BCA vs SLIM-BCA (and SIM-BCA on real data) on every curve."""
import pandas as pd

from slim.paper.advisor_study import advisor_comparison
from slim.paper.advisor_study_config import load_bca_config
from slim.paper.tables import (
    advisors_display,
    full_profile_agreement,
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
clean = study.study_rows(pd.read_parquet(snakemake.input.clean))
hardware = load_hardware(snakemake.input.hardware)[snakemake.params.hardware]
schedules = read_sim_schedules(snakemake.input.sim_schedules, snakemake.input.sim_constants)
comparison = advisor_comparison(clean, load_architectures(snakemake.input.models), hardware,
                                study.epsilon, study.strict_slo_multiplier, study.slo_reference_max_num_seqs,
                                schedules)
write_csv(comparison, snakemake.output.csv)
log.info("advisors:\n%s", comparison.to_string())
shown = advisors_display(comparison)
caption = (f"Knee advisor, full-profile BCA and SLIM-BCA{' and SIM-BCA' if schedules is not None else ''} "
           f"(leave-one-curve-out) on every measured curve, "
           f"{label}: cap, measured throughput retained (\\% of the curve's peak), measured E2E (s) at the cap and "
           f"KV memory of the cap (GiB); epsilon {study.epsilon:g}, SLO {study.strict_slo_multiplier:g}x.")
write_text(to_booktabs(latex_escaped_columns(shown), caption, "tab:advisors"), snakemake.output.table)
write_text(to_html_page(latex_escaped_columns(shown), caption, "Advisor comparison"), snakemake.output.table_html)
write_text(f"Advisors on every measured curve of **{label}** data:\n\n" + to_markdown(shown, index_label="curve")
           + "\n" + full_profile_agreement(comparison), snakemake.output.md)
