"""Snakemake adapter: knee advisor vs full-profile BCA vs SLIM-BCA on every measured curve."""
import pandas as pd

from slim.paper.advisor_study import advisor_comparison
from slim.paper.advisor_study_config import load_bca_config
from slim.paper.tables import advisors_display, latex_escaped_columns, to_booktabs, to_markdown
from slim.pipeline.io import open_log, write_csv, write_text
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware

log = open_log(snakemake.log[0])
label = snakemake.params.dataset_label
clean = pd.read_parquet(snakemake.input.clean)
study = load_bca_config(snakemake.input.bca_config)
hardware = load_hardware(snakemake.input.hardware)[snakemake.params.hardware]
comparison = advisor_comparison(clean, load_architectures(snakemake.input.models), hardware,
                                study.epsilon, study.strict_slo_multiplier, study.slo_reference_max_num_seqs)
write_csv(comparison, snakemake.output.csv)
log.info("advisors:\n%s", comparison.to_string())
shown = advisors_display(comparison)
write_text(to_booktabs(
    latex_escaped_columns(shown),
    f"Knee advisor, full-profile BCA and SLIM-BCA (leave-one-curve-out) on every measured curve, "
    f"{label}: cap, measured throughput retained (\\% of the curve's peak), measured E2E (s) at the cap and "
    f"KV memory of the cap (GiB); epsilon {study.epsilon:g}, SLO {study.strict_slo_multiplier:g}x.",
    "tab:advisors"), snakemake.output.table)
write_text(f"Advisors on every measured curve of **{label}** data:\n\n" + to_markdown(shown, index_label="curve"),
           snakemake.output.md)
