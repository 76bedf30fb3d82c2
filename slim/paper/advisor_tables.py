"""The advisor study's tables as the pipeline writes them: Table V (SLIM-BCA and SIM-BCA vs
full-profile BCA), Table VI (profiling cost, beside the paper's headline saving from the paper
reference) and the advisor comparison on every curve, each with its caption, as LaTeX, the report's
HTML page and, for Table VI and the comparison, the results page's Markdown."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from slim.paper.advisor_study import CONFIDENT_CAP, confidence_summary
from slim.paper.advisor_study_config import BcaStudyConfig
from slim.paper.tables import (
    advisors_display,
    as_display,
    confidence_note,
    full_profile_agreement,
    latex_escaped_columns,
    to_booktabs,
    to_html_page,
    to_markdown,
)

TABLE5_COUNTS = ("N points", "B full", "B SLIM", CONFIDENT_CAP, "B SIM")
"""Table V's columns shown as integers, where the decisions have them."""


@dataclass(frozen=True)
class AdvisorStudyTables:
    """Tables V and VI and the advisor comparison of one dataset: LaTeX files, their HTML renderings
    (for the Snakemake report) and the results page's Markdown summaries."""

    table5_latex: str
    table5_html: str
    table6_latex: str
    table6_html: str
    table6_markdown: str
    advisors_latex: str
    advisors_html: str
    advisors_markdown: str


def _latex_percent(text: str) -> str:
    return text.replace("%", "\\%")


def table5_caption(decisions: pd.DataFrame, absent_targets: list[str], study: BcaStudyConfig, dataset_label: str,
                   with_sim: bool) -> str:
    """Table V's caption: the advisors compared, epsilon and the SLO, the confident SLIM-BCA's
    effect per target (where the study sets a confidence) and the configured targets not measured."""
    note = ""
    if study.confidence is not None and not decisions.empty:
        note = " " + _latex_percent(confidence_note(confidence_summary(decisions), study.confidence))
    note += "".join(f" {_latex_percent(line)}." for line in absent_targets)
    flavours = "SLIM-BCA and SIM-BCA" if with_sim else "SLIM-BCA"
    return (f"{flavours} vs full-profile BCA (epsilon {study.epsilon:g}, SLO {study.strict_slo_multiplier:g}x "
            f"the target's E2E at its smallest profiled cap) as profiling curves are added, judged on measured "
            f"data, {dataset_label}.{note}")


def advisor_study_tables(decisions: pd.DataFrame, absent_targets: list[str], cost: pd.DataFrame,
                         comparison: pd.DataFrame, study: BcaStudyConfig, dataset_label: str, with_sim: bool,
                         reference: dict) -> AdvisorStudyTables:
    """Render `slim.paper.advisor_study`'s results: `decisions` (Table V, only the targets this
    dataset measured; `absent_targets` names the others), `cost` (Table VI, its last row the mean)
    and `comparison` (`advisor_comparison`). `with_sim`: SIM-BCA ran (real data with the simulator's
    schedules). `reference` is config/paper_reference.yaml, the paper's numbers shown beside ours."""
    if decisions.empty:   # no configured target was measured on this dataset: the table says so
        table5_shown = pd.DataFrame({"note": ["every configured target is absent"]},
                                    index=pd.Index(["n/a"], name="target"))
    else:
        counts = tuple(name for name in TABLE5_COUNTS if name in decisions.columns)
        table5_shown = as_display(decisions, counts).set_index("target")
    caption5 = table5_caption(decisions, absent_targets, study, dataset_label, with_sim)

    cost_shown = as_display(cost, ("Prof.", "Pred.")).set_index("setting")
    caption6 = (f"Profiling cost: runs profiled to fit SLIM (Prof.) and predicted instead (Pred.), "
                f"{dataset_label}.")
    table6_markdown = (f"Table VI on **{dataset_label}** data (profiling cost):\n\n{to_markdown(cost_shown)}\n"
                       f"Mean profiling time saved: **{cost['Time save (%)'].iloc[-1]:.1f}%** "
                       f"(paper: {reference['headline_time_saving_pct']:g}%).\n")

    advisors_shown = advisors_display(comparison)
    advisors_caption = (f"Knee advisor, full-profile BCA and SLIM-BCA{' and SIM-BCA' if with_sim else ''} "
                        f"(leave-one-curve-out) on every measured curve, "
                        f"{dataset_label}: cap, measured throughput retained (\\% of the curve's peak), measured "
                        f"E2E (s) at the cap and KV memory of the cap (GiB); epsilon {study.epsilon:g}, "
                        f"SLO {study.strict_slo_multiplier:g}x.")
    advisors_markdown = (f"Advisors on every measured curve of **{dataset_label}** data:\n\n"
                         + to_markdown(advisors_shown, index_label="curve") + "\n"
                         + full_profile_agreement(comparison))
    return AdvisorStudyTables(
        table5_latex=to_booktabs(latex_escaped_columns(table5_shown), caption5, "tab:table5", precision=1),
        table5_html=to_html_page(latex_escaped_columns(table5_shown), caption5, "Table V"),
        table6_latex=to_booktabs(latex_escaped_columns(cost_shown), caption6, "tab:table6"),
        table6_html=to_html_page(latex_escaped_columns(cost_shown), caption6, "Table VI"),
        table6_markdown=table6_markdown,
        advisors_latex=to_booktabs(latex_escaped_columns(advisors_shown), advisors_caption, "tab:advisors"),
        advisors_html=to_html_page(latex_escaped_columns(advisors_shown), advisors_caption, "Advisor comparison"),
        advisors_markdown=advisors_markdown,
    )
