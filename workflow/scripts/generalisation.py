"""Snakemake adapter: Fig. 11's fit (SLIM on the training models only), its predictions and table, and Fig. 11
(measured vs SLIM for the unseen models)."""
import json

import pandas as pd

from slim.paper.figures.common import save_figure
from slim.paper.figures.generalisation import plot_generalisation
from slim.paper.generalisation import (
    GeneralisationConfig,
    evaluate_generalisation,
    generalisation_mapes,
    table_fig11_html,
    table_fig11_latex,
    table_fig11_markdown,
)
from slim.pipeline.io import job_specs, open_log, write_csv, write_text

log = open_log(snakemake.log[0])
config = GeneralisationConfig(snakemake.params.dataset, tuple(snakemake.params.train_models),
                              tuple(snakemake.params.target_models))
clean = pd.read_parquet(snakemake.input.clean)
specs = job_specs(snakemake)
result = evaluate_generalisation(clean, config, specs.catalog, specs.hardware)
write_csv(result.predictions, snakemake.output.predictions)
write_text(json.dumps(result.fit.to_dict(), indent=2, sort_keys=True) + "\n", snakemake.output.fit)
mapes = generalisation_mapes(result.predictions)
table_arguments = (mapes, snakemake.params.dataset_label, config.train_models, result.train_input_len,
                   result.n_train_runs)
write_text(table_fig11_latex(*table_arguments), snakemake.output.table)
write_text(table_fig11_html(*table_arguments), snakemake.output.table_html)
write_text(table_fig11_markdown(*table_arguments), snakemake.output.summary)
log.info("SLIM fitted on %d runs (train MAPE %.1f%%): %s", result.n_train_runs,
         result.fit.train_mape_throughput_pct, result.fit.params)
for record in mapes.itertuples(index=False):
    log.info("%s (TP %s, %d runs): throughput MAPE %.1f%%, E2E MAPE %.1f%%", *record)

# The figure draws the predictions as written (the CSV keeps six significant digits).
predictions = pd.read_csv(snakemake.output.predictions)
save_figure(plot_generalisation(predictions, snakemake.params.dataset_label, ", ".join(config.train_models)),
            snakemake.output.fig11_pdf, snakemake.output.fig11_png)
log.info("Fig. 11 of %s: %d target run(s) of %d model(s)", snakemake.params.dataset_label, len(predictions),
         predictions["model"].nunique())
