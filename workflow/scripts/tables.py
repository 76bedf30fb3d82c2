"""Snakemake adapter: Tables III and IV (ours and the paper's) from the per-setting predictions."""
from pathlib import Path

import pandas as pd

from slim.paper.heldout import MAIN_PREDICTORS, applicable_setting_names, average_mape_reduction_pct, mape_table
from slim.paper.splits import load_settings
from slim.paper.tables import load_paper_reference, paper_matrix, table3, table4, to_booktabs, to_markdown
from slim.pipeline.io import open_log, write_csv

log = open_log(snakemake.log[0])
label = snakemake.params.dataset_label
settings = load_settings(snakemake.input.settings)
mapes = mape_table(pd.concat([pd.read_parquet(path) for path in snakemake.input.predictions], ignore_index=True))
write_csv(mapes, snakemake.output.mapes)
reference = load_paper_reference(snakemake.input.reference)

ours = table3(mapes, settings)
Path(snakemake.output.table3).write_text(to_booktabs(
    ours, f"MAPE (\\%) of throughput and E2E latency on the held-out settings, {label} data.", "tab:table3"))
paper = paper_matrix(reference, "table3", settings, MAIN_PREDICTORS)
Path(snakemake.output.table3_paper).write_text(to_booktabs(
    paper, "MAPE (\\%) reported by the SLIM paper (its own traces; targets OPT-6.7B / OL 512).", "tab:table3-paper"))
ablation = table4(mapes, settings, tuple(snakemake.params.ablation_transfers))
Path(snakemake.output.table4).write_text(to_booktabs(
    ablation, f"Ablation: MAPE (\\%) with one SLIM term removed, {label} data.", "tab:table4"))

reduction = average_mape_reduction_pct(mapes, applicable_setting_names(settings))
log.info("average MAPE reduction of SLIM vs the baselines: %.1f%%", reduction)
Path(snakemake.output.summary).write_text(
    f"Table III on **{label}** data (MAPE %, throughput / E2E latency):\n\n{to_markdown(ours)}\n"
    f"The paper's Table III (its own traces):\n\n{to_markdown(paper)}\n"
    f"Ablation (Table IV):\n\n{to_markdown(ablation)}\n"
    f"Average MAPE reduction of SLIM vs the two baselines (mean over both baselines and both metrics "
    f"of 1 - mean_SLIM / mean_baseline across the applicable settings): **{reduction:.1f}%** "
    f"(paper: {reference['headline_mape_reduction_pct']}%).\n")
