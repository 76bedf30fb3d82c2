"""How close the simulator is to the real traces: the per-curve validation table
(`slim.sim.calibrate.validate`) as printed; `slim.paper.figures.sim_validation` draws it."""

from __future__ import annotations

import pandas as pd

from slim import columns as col
from slim.paper.table_format import latex_escaped_columns, latex_text, to_booktabs, to_html_page

THROUGHPUT_BAR_MEDIAN_PCT = 8.0
THROUGHPUT_BAR_WORST_PCT = 15.0


def validation_frame(curves: pd.DataFrame) -> pd.DataFrame:
    """Per real curve: throughput and mean-batch MAPE (%), the KV-saturation agreement, and the KV
    capacity's MAPE (%) as the simulator and the advisor size it ("--" where no run recorded one)."""
    frame = pd.DataFrame({
        "model": curves[col.MODEL],
        "IL": curves[col.INPUT_LEN_MEAN].astype(int),
        "OL": curves[col.OUTPUT_LEN_MEAN].astype(int),
        "runs": curves["runs"].astype(int),
        "Thr. MAPE %": curves["throughput_mape"],
        "Batch MAPE %": curves["batch_mape"],
        "preempted runs (real/sim)": [f"{int(m)}/{int(s)}" for m, s in
                                      zip(curves["measured_preempted_runs"], curves["simulated_preempted_runs"])],
        "KV saturation reproduced": ["yes" if a == 1.0 else f"{100 * a:.0f}% of runs" for a in
                                     curves["kv_saturation_agreement"]],
        "KV capacity MAPE % (SIM / advisor)": [f"{sim:.1f} / {advisor:.1f}" if pd.notna(sim) else "--" for sim, advisor
                                               in zip(curves["kv_capacity_mape"], curves["advisor_kv_capacity_mape"])],
    })
    return frame.sort_values(["model", "OL"]).reset_index(drop=True)


def validation_caption(curves: pd.DataFrame) -> str:
    """The table's LaTeX caption: median and worst curve against the bars, and that it is in-sample."""
    median, worst = curves["throughput_mape"].median(), curves["throughput_mape"].max()
    caption = (f"SIMULATED vs real: per public H100 curve, MAPE of the simulator's throughput and mean batch size. "
               f"Median curve throughput MAPE {median:.1f}\\% (bar {THROUGHPUT_BAR_MEDIAN_PCT:.0f}\\%), worst "
               f"{worst:.1f}\\% (bar {THROUGHPUT_BAR_WORST_PCT:.0f}\\%). In-sample: the constants were fitted on "
               f"these runs. KV capacity: MAPE against the capacity vLLM reported (its GPU blocks x block size), "
               f"of the simulator's memory plan and of the advisor's estimate for runs that record none "
               f"(default reservation less weights and a fixed overhead). Both take their memory-profile figures from "
               f"these runs' server logs: this checks the arithmetic, not its transfer to other models.")
    return caption


def validation_latex(curves: pd.DataFrame) -> str:
    """The table as booktabs LaTeX, its headers' and cells' ``%`` escaped (a comment there)."""
    frame = latex_escaped_columns(validation_frame(curves).set_index("model"))
    frame = frame.apply(lambda column: column.map(lambda cell: latex_text(cell) if isinstance(cell, str) else cell))
    return to_booktabs(frame, validation_caption(curves), "tab:sim-validation")


def validation_html(curves: pd.DataFrame) -> str:
    """The same table as an HTML page (`tables.to_html_page`), for the Snakemake report."""
    return to_html_page(validation_frame(curves).set_index("model"), validation_caption(curves),
                        "Simulator validation")
