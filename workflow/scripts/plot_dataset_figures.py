"""Snakemake adapter: one dataset's Fig. 9 (measured vs SLIM on every held-out setting), Fig. 10 (the unseen-model
setting, measured vs SLIM and both baselines; where the dataset has one) and Fig. 2 (throughput vs max_num_seqs and
vs mean batch size under the length sweeps)."""
import pandas as pd

from slim import columns as col
from slim.paper.figures.characterisation import plot_length_sweeps
from slim.paper.figures.common import save_figure
from slim.paper.figures.heldout import plot_heldout_settings, plot_unseen_model
from slim.paper.heldout import mape_table, with_no_runs_noted
from slim.paper.measured_characterisation import sweep_panels
from slim.paper.splits import load_settings
from slim.pipeline.io import open_log

log = open_log(snakemake.log[0])
output, params = snakemake.output, snakemake.params
label = params.dataset_label
predictions = pd.concat([pd.read_parquet(path) for path in snakemake.input.predictions], ignore_index=True)
mapes = mape_table(predictions)
# A setting of which the dataset has no runs has an empty evaluation: listed as n/a under Fig. 9's panels.
settings = with_no_runs_noted(load_settings(snakemake.input.settings), predictions)

save_figure(plot_heldout_settings(predictions, mapes, settings, label, observed=params.observed), output.fig9_pdf,
            output.fig9_png)
log.info("Fig. 9 of %s: %d applicable setting(s) from %d prediction file(s)", label,
         sum(setting.applicable for setting in settings), len(snakemake.input.predictions))

if params.fig10_setting is not None:
    labels = {setting.name: setting.label for setting in settings}
    figure = plot_unseen_model(predictions, mapes, params.fig10_setting, label,
                               setting_label=labels.get(params.fig10_setting), observed=params.observed)
    save_figure(figure, output.fig10_pdf, output.fig10_png)
    log.info("Fig. 10 of %s: setting '%s'", label, params.fig10_setting)

clean = pd.read_parquet(snakemake.input.clean)
if params.length_sweep_models:
    clean = clean[clean[col.MODEL].isin(params.length_sweep_models)]
save_figure(plot_length_sweeps(clean, label), output.fig2_pdf, output.fig2_png)
log.info("Fig. 2 of %s: %d run(s); panels: %s", label, len(clean),
         "; ".join(panel.title for panel in sweep_panels(clean)))
