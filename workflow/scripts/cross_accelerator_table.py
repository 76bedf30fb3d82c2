"""Snakemake adapter: the cross-accelerator table from each accelerator's Table III."""
import pandas as pd

from slim.paper.cross_accelerator import (
    AcceleratorAdvice,
    AcceleratorResult,
    advisor_summary,
    advisor_summary_markdown,
    cross_accelerator_display,
    cross_accelerator_html,
    cross_accelerator_markdown,
    cross_accelerator_table,
)
from slim.paper.splits import load_settings
from slim.pipeline.io import open_log, write_csv, write_text

log = open_log(snakemake.log[0])
results = [AcceleratorResult(accelerator, dataset, pd.read_csv(path))
           for accelerator, dataset, path in zip(snakemake.params.accelerators, snakemake.params.datasets,
                                                 snakemake.input.tables)]
long = cross_accelerator_table(results, load_settings(snakemake.input.settings))
display = cross_accelerator_display(long)
write_csv(long, snakemake.output.table)
advice = [AcceleratorAdvice(accelerator, pd.read_csv(advisors), pd.read_csv(cost))
          for accelerator, advisors, cost in zip(snakemake.params.advised_accelerators, snakemake.input.advisors,
                                                 snakemake.input.profiling_cost)]
summary = advisor_summary(advice)   # no rows where no accelerator configures the advisor (datasets.<name>.bca)
write_csv(summary, snakemake.output.advisors)
log.info("advisor per accelerator:\n%s", summary.to_string())
write_text(cross_accelerator_markdown(display)
           + ("\n" + advisor_summary_markdown(summary) if advice else ""), snakemake.output.summary)
write_text(cross_accelerator_html(display), snakemake.output.html)
log.info("cross-accelerator table: %d accelerators x settings rows", len(display))
