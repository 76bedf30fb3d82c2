"""How Table III and the 79.3% headline depend on reading the two baselines, whose exact form the paper leaves open.

Every reading of IMAI OOD-LR and LLMVisor-Agg in `baselines.variants` is fitted on each
applicable held-out setting's training runs and scored on its validation runs, the way the main
tables score the main readings (`slim.paper.heldout`); SLIM's predictions are the main
evaluation's, read from disk, not refitted. Each MAPE's interval comes from
`slim.paper.mape_intervals.mape_intervals` and each headline's from
`slim.paper.mape_intervals.average_mape_reduction_interval` (the paired bootstrap of the main
tables: SLIM, one baseline's variant and the other baseline's main reading, scored on the same
resampled runs). The paper's values (`config/paper_reference.yaml`) stand beside ours; nothing is
computed from them except whether they lie in our intervals and how far they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import SlimError
from slim.paper.heldout import (
    IMAI,
    LLMVISOR,
    SLIM,
    applicable_setting_names,
    mape_table,
    prediction_rows,
)
from slim.paper.mape_intervals import average_mape_reduction_interval, curve_labels, mape_intervals
from slim.paper.splits import HeldOutSetting, split_setting
from slim.paper.tables import paper_row_labels, to_html_page, to_markdown
from slim.predictors import Predictor, TrainingRuns
from slim.predictors.imai import ImaiPredictor
from slim.predictors.llmvisor import LLMVisorPredictor
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware

# A headline row's `setting` and `metric` values: the average MAPE reduction over every setting.
HEADLINE_SETTING = "headline"
HEADLINE_METRIC = "average_mape_reduction"
MAIN_REPRODUCTION_TOLERANCE = 1e-9
"""Largest relative difference allowed between a main reading refitted here and the main
evaluation's predictions on disk (the same code on the same rows: any difference means the
evaluation is stale)."""

PREDICTION_SIGNIFICANT_DIGITS = 6
"""Significant digits every prediction is rounded to before it is scored (the precision the CSVs
are written at). The linear solves differ from one BLAS kernel to another, by up to 2.4e-9
(relative) where the training data leave a baseline's prediction open (LLMVisor-Agg's minimal-norm
segments), and the BCa interval counts the bootstrap statistics below the point estimate: a
resample that reproduces the validation runs ties with it, and such noise decides the tie, moving an
interval by up to 1% of its value. Rounded, the scored numbers are the same under every kernel
(a MAPE moves by at most 5e-5 percentage points)."""

PAPER_DECIMALS = 1
"""The paper prints its MAPEs and headline to one decimal; its value counts as inside our interval
when it lies between the interval's bounds rounded to that precision (59.9 is inside an interval
ending at 59.91 or at 59.897 alike, which a 1e-9 perturbation of the measurements can swap)."""

METRIC_SHORT = {col.THROUGHPUT_METRIC.name: "Thr.", col.E2E_METRIC.name: "E2E"}

WHY_MAIN = {
    IMAI: ("the paper says this baseline 'predicts end-to-end latency' and derives throughput from it, which "
           "rules out fitting throughput; it lists 'interaction features' without naming them or a loss, and "
           "the interactions kept are the products a cost scales with (prefill B IL, decode B OL, KV re-reads "
           "B IL OL, weight reads L D^2 OL, per-layer rows L D B OL), the relative loss SLIM's own objective "
           "and the one a MAPE judges. No other reading is closer to the paper's text, so the default stays"),
    LLMVISOR: ("the paper's 'piecewise fitted latency functions' and the original LLMVisor's two pieces per "
               "function; non-negative coefficients because its terms are per-token and per-sequence costs "
               "(unconstrained, a decode function fitted on B <= 8 predicts negative ITL at B = 512); the "
               "relative loss as for SLIM. No other reading is closer to the paper's text, so the default stays"),
}
"""Why the main tables use the main reading of each baseline (the results page's section says it)."""


IMAI_SOURCE_NOTE = ("What Imai et al. state could be read only in their abstract (no full text or code was found): a "
                    "roofline model from the hardware's characteristics, calibrated by regression models that "
                    "capture the runtime overhead. Not recoverable: the roofline's form, how it and the regression "
                    "combine (an additive overhead with the roofline at coefficient 1 is our reading, "
                    "`imai_roofline_overhead`), the regression's features, model family, loss and target, and "
                    "what the SLIM paper's 'OOD-LR' changed from it.")
"""The results page's statement of what the IMAI reconstruction rests on (baselines.variants)."""


class SensitivityError(SlimError):
    """The main evaluation on disk does not match the main readings refitted here."""


@dataclass(frozen=True)
class BaselineSensitivity:
    """The long table (`columns.BASELINE_SENSITIVITY_COLUMNS`) and the variants behind it."""

    table: pd.DataFrame
    variants: tuple

    def headline(self, variant: str) -> pd.Series:
        rows = self.table[(self.table[col.VARIANT] == variant) & (self.table[col.SETTING] == HEADLINE_SETTING)]
        return rows.iloc[0]


def variant_predictor(variant) -> Predictor:
    """A baseline variant (`baselines.variants`) as a predictor of the registry's kind, named after it."""
    from baselines.variants import LLMVISOR_LABEL

    kind = LLMVisorPredictor if variant.baseline == LLMVISOR_LABEL else ImaiPredictor
    return kind(variant.name, variant.estimator)


def variant_predictions(clean: pd.DataFrame, settings: list[HeldOutSetting], catalog: ArchitectureCatalog,
                        hardware: Hardware, variants: tuple) -> tuple[pd.DataFrame, dict[tuple[str, str], bool]]:
    """Validation predictions of every variant on every applicable setting (predictor = the
    variant's name, `columns.PREDICTION_COLUMNS`), and per (setting, variant) whether the training
    data determine all of them."""
    frames, determined = [], {}
    for setting in settings:
        if not setting.applicable:
            continue
        split = split_setting(clean, setting)
        training = TrainingRuns(split.train, catalog, hardware, label=setting.name)
        for variant in variants:
            prediction = variant_predictor(variant).fit(training).predict(split.validate)
            frames.append(prediction_rows(setting.name, variant.name, split.validate, "validate",
                                          prediction.throughput_per_s, prediction.e2e_latency_s))
            determined[(setting.name, variant.name)] = bool(np.all(prediction.determined))
    return pd.concat(frames, ignore_index=True), determined


def round_significant(values: np.ndarray, digits: int = PREDICTION_SIGNIFICANT_DIGITS) -> np.ndarray:
    """`values` rounded to `digits` significant digits (zero, NaN and infinities unchanged)."""
    values = np.asarray(values, dtype=float)
    finite = np.isfinite(values) & (values != 0)
    magnitude = np.zeros_like(values)
    magnitude[finite] = np.floor(np.log10(np.abs(values[finite])))
    scale = 10.0 ** (digits - 1 - magnitude)
    return np.where(finite, np.round(values * scale) / scale, values)


def _rounded(frame: pd.DataFrame) -> pd.DataFrame:
    """The prediction table with its predicted throughput and E2E rounded (`PREDICTION_SIGNIFICANT_DIGITS`)."""
    out = frame.copy()
    for metric in col.PREDICTION_METRICS:
        out[metric.predicted] = round_significant(out[metric.predicted].to_numpy(dtype=float))
    return out


def _check_main_reproduced(evaluation: pd.DataFrame, predictions: pd.DataFrame, variants: tuple) -> None:
    """The main readings refitted here must predict what the main evaluation on disk did."""
    for variant in (v for v in variants if v.main):
        ours = predictions[predictions[col.PREDICTOR] == variant.name].set_index([col.SETTING, col.RUN_ID])
        theirs = evaluation[(evaluation[col.PREDICTOR] == variant.baseline)
                            & (evaluation[col.ROLE] == "validate")].set_index([col.SETTING, col.RUN_ID])
        theirs = theirs.reindex(ours.index)
        for metric in col.PREDICTION_METRICS:
            a, b = ours[metric.predicted].to_numpy(float), theirs[metric.predicted].to_numpy(float)
            if not np.allclose(a, b, rtol=MAIN_REPRODUCTION_TOLERANCE, atol=0.0, equal_nan=False):
                raise SensitivityError(f"{variant.name} refitted does not reproduce the main evaluation's "
                                       f"{variant.baseline} {metric.name} predictions; rebuild "
                                       "results/<dataset>/evaluation/ (snakemake --cores 2 all)")


def _as_predictor(frame: pd.DataFrame, variant: str, predictor: str) -> pd.DataFrame:
    rows = frame[frame[col.PREDICTOR] == variant].copy()
    rows[col.PREDICTOR] = predictor
    return rows


def baseline_sensitivity(clean: pd.DataFrame, evaluation: pd.DataFrame, settings: list[HeldOutSetting],
                         catalog: ArchitectureCatalog, hw: Hardware, reference: dict,
                         variants: tuple | None = None) -> BaselineSensitivity:
    """Every variant's MAPE per setting and metric with its interval, and the headline recomputed
    with each variant in its baseline's place, beside the paper's values.

    `clean`: the cleaned runs; `evaluation`: the main evaluation's predictions of every applicable
    setting (SLIM's validation rows are used, and the main baselines' to check the refit);
    `variants`: default `baselines.variants.baseline_variants(hw)`.
    """
    from baselines.variants import IMAI_LABEL, LLMVISOR_LABEL, baseline_variants

    variants = baseline_variants(hw) if variants is None else tuple(variants)
    applicable = [s for s in settings if s.applicable]
    curves = curve_labels(clean)
    predictions, determined = variant_predictions(clean, applicable, catalog, hw, variants)
    _check_main_reproduced(evaluation, predictions, variants)
    predictions = _rounded(predictions)
    slim_rows = _rounded(evaluation[(evaluation[col.PREDICTOR] == SLIM) & (evaluation[col.ROLE] == "validate")])
    scored = pd.concat([slim_rows, predictions], ignore_index=True)
    mapes = mape_table(scored)
    intervals, _ = mape_intervals(scored, curves)
    mapes = mapes.merge(intervals, on=[col.SETTING, col.PREDICTOR], how="left", validate="one_to_one")

    labels = dict(zip((s.name for s in applicable), paper_row_labels(applicable)))
    main_of = {v.baseline: v.name for v in variants if v.main}
    table3 = reference.get("table3", {})
    records = []
    for variant in variants:
        for setting in applicable:
            row = mapes[(mapes[col.SETTING] == setting.name) & (mapes[col.PREDICTOR] == variant.name)].iloc[0]
            for k, metric in enumerate(col.PREDICTION_METRICS):
                paper = table3.get(setting.name, {}).get(variant.baseline, [math.nan, math.nan])[k]
                records.append(_record(variant, setting.name, labels[setting.name], metric.name, row[metric.mape],
                                       row[metric.mape_ci_low], row[metric.mape_ci_high], paper,
                                       determined[(setting.name, variant.name)]))
        others = {IMAI_LABEL: LLMVISOR_LABEL, LLMVISOR_LABEL: IMAI_LABEL}
        other = others[variant.baseline]
        # The headline's bootstrap names the baselines by their labels (IMAI_LABEL is heldout.IMAI, etc.).
        in_place = pd.concat([slim_rows, _as_predictor(predictions, variant.name, variant.baseline),
                              _as_predictor(predictions, main_of[other], other)], ignore_index=True)
        headline = average_mape_reduction_interval(in_place, curves, applicable_setting_names(applicable))
        records.append(_record(variant, HEADLINE_SETTING, "average MAPE reduction (all settings)",
                               HEADLINE_METRIC, headline.estimate_pct, headline.ci_low_pct, headline.ci_high_pct,
                               reference.get("headline_mape_reduction_pct", math.nan),
                               all(determined[(s.name, name)] for s in applicable
                                   for name in (variant.name, main_of[other]))))
    table = pd.DataFrame.from_records(records, columns=list(col.BASELINE_SENSITIVITY_COLUMNS))
    return BaselineSensitivity(table, variants)


def _record(variant, setting: str, label: str, metric: str, value: float, low: float, high: float, paper: float,
            determined: bool) -> dict:
    paper = float(paper)
    inside = bool(math.isfinite(paper) and math.isfinite(low) and math.isfinite(high)
                  and round(low, PAPER_DECIMALS) <= paper <= round(high, PAPER_DECIMALS))
    return {col.BASELINE: variant.baseline, col.VARIANT: variant.name, col.MAIN_VARIANT: variant.main,
            col.SETTING: setting, col.SETTING_LABEL: label, col.METRIC: metric, col.VALUE_PCT: float(value),
            col.VALUE_CI_LOW_PCT: float(low), col.VALUE_CI_HIGH_PCT: float(high), col.PAPER_VALUE_PCT: paper,
            col.PAPER_INSIDE_CI: inside,
            col.PAPER_DISTANCE_PCT: abs(float(value) - paper) if math.isfinite(paper) else math.nan,
            col.VALIDATION_DETERMINED: determined, col.VARIANT_DESCRIPTION: variant.description}


# --- agreement with the paper, and the renderings --------------------------------------

def agreement(table: pd.DataFrame) -> pd.DataFrame:
    """Per variant, over its Table III cells with a paper value: how many paper values lie in our
    interval, of how many, and the mean distance to them (percentage points)."""
    cells = table[(table[col.SETTING] != HEADLINE_SETTING) & table[col.PAPER_VALUE_PCT].notna()]
    rows = []
    for (baseline, variant), group in cells.groupby([col.BASELINE, col.VARIANT], sort=False):
        rows.append({col.BASELINE: baseline, col.VARIANT: variant, "inside": int(group[col.PAPER_INSIDE_CI].sum()),
                     "cells": len(group), "mean_distance": float(group[col.PAPER_DISTANCE_PCT].mean())})
    return pd.DataFrame(rows, columns=[col.BASELINE, col.VARIANT, "inside", "cells", "mean_distance"])


def _cell(row: pd.Series, separator: str = "-") -> str:
    text = f"{row[col.VALUE_PCT]:.1f}" + ("" if row[col.VALIDATION_DETERMINED] else "*")
    low, high = row[col.VALUE_CI_LOW_PCT], row[col.VALUE_CI_HIGH_PCT]
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{text} (no CI)"
    return f"{text} (CI {low:.1f}{separator}{high:.1f})"


def display_matrix(table: pd.DataFrame) -> pd.DataFrame:
    """Rows: each baseline's variants then its paper row; columns: (setting, metric) and the headline.
    Cells: ``value (CI a-b)``, ``*`` where the training data do not determine the predictions."""
    cells = table[table[col.SETTING] != HEADLINE_SETTING]
    columns = list(dict.fromkeys(zip(cells[col.SETTING_LABEL], cells[col.METRIC])))
    header = [(label, METRIC_SHORT[metric]) for label, metric in columns] + [("Headline", "reduction %")]
    rows = {}
    for baseline, group in table.groupby(col.BASELINE, sort=False):
        paper: list[object] = []
        for variant, rows_of in group.groupby(col.VARIANT, sort=False):
            values: list[object] = []
            for label, metric in columns:
                match = rows_of[(rows_of[col.SETTING_LABEL] == label) & (rows_of[col.METRIC] == metric)].iloc[0]
                values.append(_cell(match))
            head = rows_of[rows_of[col.SETTING] == HEADLINE_SETTING].iloc[0]
            values.append(_cell(head, " to "))
            mark = " (main)" if bool(rows_of[col.MAIN_VARIANT].iloc[0]) else ""
            rows[f"{baseline}: {variant}{mark}"] = values
            if not paper:
                paper = [rows_of[(rows_of[col.SETTING_LABEL] == label) & (rows_of[col.METRIC] == metric)]
                         [col.PAPER_VALUE_PCT].iloc[0] for label, metric in columns]
                paper.append(head[col.PAPER_VALUE_PCT])
        rows[f"{baseline}: paper"] = paper
    return pd.DataFrame.from_dict(rows, orient="index", columns=pd.MultiIndex.from_tuples(header))


TABLE_NOTE = ("Each baseline reading (baselines.variants) fitted on every held-out setting's training runs; MAPE % "
              "with its 95% BCa bootstrap interval (slim.paper.mape_intervals; whole curves on the same-curve "
              "setting, runs within the target curve on a transfer). Headline: SLIM's average MAPE reduction with "
              "this reading in its baseline's place and the other baseline's main reading, paired bootstrap. "
              "*: the training data do not determine the validation predictions (minimal-norm fit). The paper's "
              "rows are its own traces (Table III, Section VI-F).")


def sensitivity_html(table: pd.DataFrame, dataset_label: str) -> str:
    """The report's rendering."""
    caption = f"Baseline readings and the headline, {dataset_label} data. {TABLE_NOTE}"
    return to_html_page(display_matrix(table), caption, "Baseline sensitivity")


def why_the_headline_differs(table: pd.DataFrame, dataset_label: str) -> str:
    """The results page's section for one dataset: the table, which readings agree with the paper's
    Table III (its value in our interval, else the nearest), which reading the main tables use and
    why, and the headline under each."""
    fit = agreement(table)
    lines = [f"### Why the headline differs: {dataset_label}\n",
             f"{to_markdown(display_matrix(table), index_label='reading')}", TABLE_NOTE + "\n",
             IMAI_SOURCE_NOTE + "\n"]
    heads = table[table[col.SETTING] == HEADLINE_SETTING]
    for baseline, group in fit.groupby(col.BASELINE, sort=False):
        best_inside = int(group["inside"].max())
        cells = int(group["cells"].max())
        nearest = group.sort_values(["mean_distance", col.VARIANT]).iloc[0]
        if best_inside > 0:
            agreeing = ", ".join(f"`{v}`" for v in group.loc[group["inside"] == best_inside, col.VARIANT])
            verdict = (f"most consistent with the paper's Table III: {agreeing} (the paper's value inside our "
                       f"interval in {best_inside} of {cells} cells)")
        else:
            verdict = f"no reading has the paper's value inside its interval in any of the {cells} cells"
        main = heads[(heads[col.BASELINE] == baseline) & heads[col.MAIN_VARIANT]].iloc[0]
        lines.append(f"- **{baseline}**: {verdict}; nearest on average: `{nearest[col.VARIANT]}` "
                     f"({nearest['mean_distance']:.1f} points from the paper's values on average). The main tables "
                     f"use `{main[col.VARIANT]}`: {WHY_MAIN[baseline]}.")
    paper_headline = heads[col.PAPER_VALUE_PCT].iloc[0]
    nearest_head = heads.assign(gap=(heads[col.VALUE_PCT] - paper_headline).abs()).sort_values(
        ["gap", col.VARIANT]).iloc[0]
    inside = heads[heads[col.PAPER_INSIDE_CI]]
    lines.append(f"- **The headline nearest the paper's** is `{nearest_head[col.VARIANT]}`'s, "
                 f"{nearest_head[col.VALUE_PCT]:.1f}%; the paper's {paper_headline:.1f}% lies inside the interval of "
                 + (", ".join(f"`{v}`" for v in inside[col.VARIANT]) if len(inside) else "no reading")
                 + f". Under the main readings it is {heads[heads[col.MAIN_VARIANT]][col.VALUE_PCT].iloc[0]:.1f}%.")
    main_value = heads[heads[col.MAIN_VARIANT]][col.VALUE_PCT].iloc[0]
    moved = heads.assign(shift=heads[col.VALUE_PCT] - main_value)
    mover = moved.assign(size=moved["shift"].abs()).sort_values(["size", col.VARIANT], ascending=[False, True]).iloc[0]
    lines.append(f"- **The choice that moves the headline most** is `{mover[col.VARIANT]}` "
                 f"({mover['shift']:+.1f} points from the main readings' {main_value:.1f}%): "
                 f"{mover[col.VARIANT_DESCRIPTION]}.")
    lines.append("- **Headline under each reading** (paper: "
                 f"{heads[col.PAPER_VALUE_PCT].iloc[0]:.1f}%): "
                 + "; ".join(f"`{r[col.VARIANT]}` {r[col.VALUE_PCT]:.1f}% (CI {r[col.VALUE_CI_LOW_PCT]:.1f}% to "
                             f"{r[col.VALUE_CI_HIGH_PCT]:.1f}%)" for _, r in heads.iterrows()) + ".")
    return "\n".join(lines) + "\n"
