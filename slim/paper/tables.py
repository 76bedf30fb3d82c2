"""Paper tables as DataFrames and booktabs LaTeX (pandas Styler), ours beside the paper's."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from slim import columns as col
from slim.paper.heldout import (
    BAND_CONFIDENCE,
    IMAI,
    LLMVISOR,
    MAIN_PREDICTORS,
    NO_RUNS_NOTE,
    SIM,
    SLIM,
)
from slim.paper.mape_intervals import BETTER, UNDECIDED, WORSE, ReductionInterval, interval_note
from slim.paper.mape_intervals import CONFIDENCE_LEVEL as CONFIDENCE_LEVEL_SHOWN
from slim.paper.predictor_tables import ablation_labels, table3_labels, table4_labels
from slim.paper.splits import HeldOutSetting
from slim.paper.table_format import (  # noqa: F401 (re-exported: the formatters' long-standing home)
    HTML_TABLE_CSS,
    as_display,
    latex_escaped_columns,
    latex_text,
    latex_to_html_text,
    to_booktabs,
    to_html_page,
    to_markdown,
)
from slim.yaml_files import parse_yaml

METRICS = ((col.THROUGHPUT_METRIC, "Thr."), (col.E2E_METRIC, "E2E"))
SIM_METRICS = (*METRICS, (col.MEAN_BATCH_METRIC, "Batch"))
"""SIM predicts the mean batch too (every other predictor is given the measured one)."""

UNDETERMINED_MARK = "*"
RANGE_NOTE = ("[a-b]: the range of this MAPE over all fits (SLIM's, SIM's calibrations) that match the training "
              "data equally well; the number before it is the fit the identifiability rule picks "
              "(slim.model.fit, slim.sim.schedule_fit).")
SIM_NOTE = ("SIM: the calibrated simulator (slim.sim), its constants fitted on the training runs only, predicting "
            "each validation run from its configuration (model, IL, OL, batch cap, number of prompts) without its "
            "measured mean batch; Batch: MAPE of its predicted mean batch. SLIM (predicted batch): SLIM fed with "
            "SIM's predicted mean batch instead of the measured one.")


def predictor_metrics(predictor: str) -> tuple[tuple[col.PredictionMetric, str], ...]:
    """The metrics Table III shows for a predictor: the mean batch only where SIM predicts it."""
    return SIM_METRICS if predictor == SIM else METRICS
UNDETERMINED_NOTE = (f"{UNDETERMINED_MARK}: the training data do not determine this baseline's validation "
                     "predictions; the value is its minimal-norm fit, one of infinitely many equally good ones.")


def load_paper_reference(path: str | Path = "config/paper_reference.yaml") -> dict:
    """The paper's reported numbers (Tables III, IV and VI, the Section VI-F and VII-B headlines),
    for side-by-side columns only."""
    return parse_yaml(path)


def mape_cell(row: pd.Series, metric: col.PredictionMetric, precision: int = 1) -> object:
    """One MAPE as shown in Tables III and IV.

    A plain number where the training data determine the validation predictions (or where
    `row` has no identifiability columns); ``value [low-high]`` for a SLIM fit whose
    training-equivalent solutions disagree on them; ``value*`` for a baseline whose
    prediction is its minimal-norm choice (`UNDETERMINED_MARK`). Where `row` has the
    bootstrap interval's columns (`slim.paper.mape_intervals`), `` (CI low-high)`` follows
    (`` (no CI)`` where there is none, e.g. one validation run); where it has the coverage of the
    predictor's conformal intervals (SLIM and SIM), `` cov. N%`` (`COVERAGE_NOTE`).
    """
    coverage = ""
    if metric.coverage and metric.coverage in row.index and math.isfinite(float(row[metric.coverage])):
        coverage = f" {COVERAGE_MARK} {float(row[metric.coverage]):.0f}%"
    value = float(row[metric.mape])
    if not math.isfinite(value):
        return NOT_FITTED_MARK        # the predictor predicted nothing here (LLMVisor-Agg without ITL)
    if col.VALIDATION_DETERMINED not in row.index or bool(row[col.VALIDATION_DETERMINED]):
        shown: object = value
    else:
        low, high = float(row[metric.mape_low]), float(row[metric.mape_high])
        if not (math.isfinite(low) and math.isfinite(high)):
            shown = f"{value:.{precision}f}{UNDETERMINED_MARK}"
        else:
            shown = f"{value:.{precision}f} [{low:.{precision}f}-{high:.{precision}f}]"
    if metric.mape_ci_low not in row.index:
        return f"{shown}{coverage}" if coverage else shown
    text = shown if isinstance(shown, str) else f"{value:.{precision}f}"
    ci_low, ci_high = float(row[metric.mape_ci_low]), float(row[metric.mape_ci_high])
    if not (math.isfinite(ci_low) and math.isfinite(ci_high)):
        return f"{text} {NO_INTERVAL_MARK}{coverage}"
    return f"{text} (CI {ci_low:.{precision}f}-{ci_high:.{precision}f}){coverage}"


NOT_FITTED_MARK = "n/a"
COVERAGE_MARK = "cov."
COVERAGE_NOTE = (f"{COVERAGE_MARK} N%: the share of the validation runs inside their {100 * BAND_CONFIDENCE:.0f}% "
                 "conformal prediction interval (slim.model.conformal: the predictor's errors on training runs it "
                 "was refitted without, each curve left out and each step of the setting's own extrapolation); none "
                 "where the training runs give too few errors.")
NOT_FITTED_NOTE = (f"{NOT_FITTED_MARK}: the predictor is not fitted on this dataset (LLMVisor-Agg on offline static "
                   "batches, which record no inter-token latency; the reason is in table3.csv, column unidentified).")
NO_INTERVAL_MARK = "(no CI)"
NO_INTERVAL_NOTE = (f"{NO_INTERVAL_MARK}: no bootstrap interval (a single validation run, or a degenerate "
                    "bootstrap; the reason is in table3.csv, column ci_note).")


def mape_matrix(mapes: pd.DataFrame, settings: list[HeldOutSetting], predictors: tuple[str, ...]) -> pd.DataFrame:
    """Rows = settings (labels), columns = (predictor, metric); n/a settings carry their note.

    Cells are `mape_cell`s: numbers, or text where the training data leave the MAPE open.
    """
    columns = pd.MultiIndex.from_tuples([(p, label) for p in predictors for _, label in predictor_metrics(p)])
    rows = {}
    for setting in settings:
        values: list[object] = []
        # An applicable setting of which the dataset has no runs (nothing evaluated) reads n/a too.
        note = setting.not_applicable if not setting.applicable else (
            None if (mapes[col.SETTING] == setting.name).any() else NO_RUNS_NOTE)
        for predictor in predictors:
            match = mapes[(mapes[col.SETTING] == setting.name) & (mapes[col.PREDICTOR] == predictor)]
            for metric, _ in predictor_metrics(predictor):
                if note is not None:
                    values.append(note if not values else "")
                elif match.empty:
                    values.append(math.nan)
                else:
                    values.append(mape_cell(match.iloc[0], metric))
        rows[setting.label] = values
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns)


def identifiability_notes(matrix: pd.DataFrame) -> list[str]:
    """The notes a table needs: `RANGE_NOTE` if a cell shows a range, `UNDETERMINED_NOTE` if one is marked."""
    cells = [value for value in matrix.to_numpy().ravel() if isinstance(value, str)]
    notes = []
    if any("[" in cell for cell in cells):
        notes.append(RANGE_NOTE)
    if any(cell.endswith(UNDETERMINED_MARK) or f"{UNDETERMINED_MARK} (" in cell for cell in cells):
        notes.append(UNDETERMINED_NOTE)
    if any("(CI " in cell for cell in cells):
        notes.append(interval_note())
    if any(NO_INTERVAL_MARK in cell for cell in cells):
        notes.append(NO_INTERVAL_NOTE)
    if any(cell == NOT_FITTED_MARK for cell in cells):
        notes.append(NOT_FITTED_NOTE)
    if any(f" {COVERAGE_MARK} " in cell for cell in cells):
        notes.append(COVERAGE_NOTE)
    return notes


def paper_row_labels(settings: list[HeldOutSetting]) -> list[str]:
    """Row labels of the paper's table: each setting's label without our target in parentheses (the
    paper's targets differ), or the whole label where two settings would share the short one."""
    short = [setting.label.split(" (")[0] for setting in settings]
    return [label if short.count(label) == 1 else setting.label for label, setting in zip(short, settings)]


def paper_matrix(reference: dict, table: str, settings: list[HeldOutSetting],
                 predictors: tuple[str, ...]) -> pd.DataFrame:
    """The paper's values for the same rows and columns, one row per setting (NaN where it reports
    none: a setting whose name is not one of the paper's)."""
    columns = pd.MultiIndex.from_tuples([(p, label) for p in predictors for _, label in METRICS])
    values = []
    for setting in settings:
        reported = reference[table].get(setting.name, {})
        values.append([value for p in predictors for value in reported.get(p, [math.nan, math.nan])])
    return pd.DataFrame(values, index=paper_row_labels(settings), columns=columns)


def table3_predictors(mapes: pd.DataFrame) -> tuple[str, ...]:
    """The registry's Table III predictors (`slim.paper.predictor_tables.table3_labels`): the paper's
    three, then SIM's two where they were evaluated (real data)."""
    return table3_labels(set(mapes[col.PREDICTOR]))


def table3(mapes: pd.DataFrame, settings: list[HeldOutSetting]) -> pd.DataFrame:
    """Table III: MAPE (%) of throughput and E2E latency per setting for the three predictors,
    and for SIM and SLIM (predicted batch) where they were evaluated."""
    return mape_matrix(mapes, settings, table3_predictors(mapes))


def table4(mapes: pd.DataFrame, settings: list[HeldOutSetting], transfers: tuple[str, ...]) -> pd.DataFrame:
    """Table IV: the ablation on the named transfers (the registry's `table4_labels`: full SLIM vs
    each term removed)."""
    chosen = [s for s in settings if s.name in transfers]
    return mape_matrix(mapes, chosen, table4_labels())


@dataclass(frozen=True)
class HeldOutTables:
    """Tables III and IV of one dataset: LaTeX files, their HTML renderings (for the Snakemake
    report) and the results page's Markdown summary."""

    table3_latex: str
    table3_paper_latex: str
    table4_latex: str
    summary_markdown: str
    table3_html: str = ""
    table4_html: str = ""


CLAIM_PAIRS = ((SLIM, LLMVISOR), (SLIM, IMAI), (SIM, SLIM), (SIM, LLMVISOR), (SIM, IMAI))
"""The comparisons the summary states a verdict on (the paper's claim, then SIM's), where both ran."""
METRIC_SHORT = {col.THROUGHPUT_METRIC.name: "Thr.", col.E2E_METRIC.name: "E2E"}
CLAIMS_NOTE = (
    "A verdict is stated only where the paired bootstrap interval of the MAPE difference (same resampled runs "
    "or curves for both predictors; results/<dataset>/mape_comparisons.csv) excludes zero on that metric; "
    "'undecided' where it contains zero. ': chosen fit' marks a verdict about a predictor whose validation "
    "predictions the training data do not determine (a range or a * in Table III): it holds for the fit "
    "shown, not necessarily for every equally good one.")


def pair_verdicts(comparisons: pd.DataFrame, setting: str, predictor: str, other: str) -> dict[str, str]:
    """Per metric (throughput, E2E), whether `predictor`'s MAPE is `better` (lower), `worse`
    or `undecided` against `other`'s on `setting`, from the paired intervals (either order)."""
    verdicts = {}
    flip = {BETTER: WORSE, WORSE: BETTER, UNDECIDED: UNDECIDED}
    for metric in col.PREDICTION_METRICS:
        rows = comparisons[(comparisons[col.SETTING] == setting) & (comparisons[col.METRIC] == metric.name)]
        direct = rows[(rows[col.PREDICTOR] == predictor) & (rows[col.OTHER_PREDICTOR] == other)]
        reverse = rows[(rows[col.PREDICTOR] == other) & (rows[col.OTHER_PREDICTOR] == predictor)]
        if not direct.empty:
            verdicts[metric.name] = str(direct[col.VERDICT].iloc[0])
        elif not reverse.empty:
            verdicts[metric.name] = flip[str(reverse[col.VERDICT].iloc[0])]
    return verdicts


def claim_text(verdicts: dict[str, str], predictor: str, other: str) -> str:
    """``"SLIM better"``, ``"IMAI OOD-LR better"``, ``"undecided"``, or per metric where they differ."""
    def winner(verdict: str) -> str:
        return {BETTER: f"{predictor} better", WORSE: f"{other} better", UNDECIDED: "undecided"}[verdict]

    if len(set(verdicts.values())) == 1:
        return winner(next(iter(verdicts.values())))
    return "; ".join(f"{METRIC_SHORT[name]}: {winner(verdict)}" for name, verdict in verdicts.items())


def claims_matrix(mapes: pd.DataFrame, comparisons: pd.DataFrame, settings: list[HeldOutSetting],
                  candidate_pairs: tuple[tuple[str, str], ...] = CLAIM_PAIRS) -> pd.DataFrame:
    """Rows = applicable settings, columns = the `candidate_pairs` that ran: the verdict each
    paired interval supports (`claim_text`), ``: chosen fit`` where a side is not determined by
    the training data."""
    present = set(mapes[col.PREDICTOR])
    pairs = [(a, b) for a, b in candidate_pairs if a in present and b in present]
    determined = ({(r[col.SETTING], r[col.PREDICTOR]): bool(r[col.VALIDATION_DETERMINED]) for _, r in mapes.iterrows()}
                  if col.VALIDATION_DETERMINED in mapes.columns else {})
    rows = {}
    for setting in settings:
        if not setting.applicable:
            continue
        cells = []
        for a, b in pairs:
            verdicts = pair_verdicts(comparisons, setting.name, a, b)
            if not verdicts:
                cells.append("--")
                continue
            text = claim_text(verdicts, a, b)
            open_sides = [p for p in (a, b) if not determined.get((setting.name, p), True)]
            cells.append(f"{text}: chosen fit" if open_sides and text != "undecided" else text)
        rows[setting.label] = cells
    return pd.DataFrame.from_dict(rows, orient="index", columns=[f"{a} vs {b}" for a, b in pairs])


def reduction_sentence(reduction: ReductionInterval, paper_pct: object) -> str:
    """The headline with its interval, and what the interval allows one to say."""
    if math.isfinite(reduction.ci_low_pct) and math.isfinite(reduction.ci_high_pct):
        shown = (f"**{reduction.estimate_pct:.1f}%** (CI {reduction.ci_low_pct:.1f}% to "
                 f"{reduction.ci_high_pct:.1f}%: {reduction.note})")
    else:
        shown = f"**{reduction.estimate_pct:.1f}%** (no interval: {reduction.note})"
    verdict = reduction.describes_a_reduction()
    meaning = {True: "The interval lies above zero: on these settings SLIM's MAPE is lower than the baselines' "
                     "on average.",
               False: "The interval lies below zero: on these settings SLIM's MAPE is higher than the baselines' "
                      "on average, not lower.",
               None: "The interval contains zero: these settings do not show SLIM's average MAPE to be lower or "
                     "higher than the baselines'."}[verdict]
    return (f"Average MAPE reduction of SLIM vs the two baselines (mean over both baselines and both metrics "
            f"of 1 - mean_SLIM / mean_baseline across the applicable settings): {shown} "
            f"(paper: {paper_pct}%). {meaning}\n")


def heldout_tables(mapes: pd.DataFrame, settings: list[HeldOutSetting], reference: dict, dataset_label: str,
                   ablation_transfers: tuple[str, ...], reduction: ReductionInterval,
                   comparisons: pd.DataFrame | None = None) -> HeldOutTables:
    """Tables III (ours and the paper's) and IV from `table3.csv`'s rows, with the notes
    that explain ranges, intervals and marked cells, the verdicts the paired intervals in
    `comparisons` support (`claims_matrix`), and the average-MAPE-reduction headline with its
    interval."""
    ours = table3(mapes, settings)
    ours_notes = identifiability_notes(ours) + ([SIM_NOTE] if SIM in table3_predictors(mapes) else [])
    paper = paper_matrix(reference, "table3", settings, MAIN_PREDICTORS)
    ablation = table4(mapes, settings, ablation_transfers)
    ablation_notes = identifiability_notes(ablation)

    def notes_markdown(notes: list[str]) -> str:
        return "".join(f"{note}\n\n" for note in notes)

    claims = ablation_claims = ""
    if comparisons is not None and not comparisons.empty:
        matrix = claims_matrix(mapes, comparisons, settings)
        claims = (f"Which predictor is more accurate, where the {100 * CONFIDENCE_LEVEL_SHOWN:.0f}% intervals "
                  f"decide (**{dataset_label}** data):\n\n{to_markdown(matrix)}\n{CLAIMS_NOTE}\n\n")
        chosen = [s for s in settings if s.name in ablation_transfers]
        ablation_matrix = claims_matrix(mapes, comparisons, chosen,
                                        tuple((SLIM, label) for label in ablation_labels()))
        ablation_claims = (f"Does each term help? Full SLIM against each ablation, where the intervals decide:\n\n"
                           f"{to_markdown(ablation_matrix)}\n")
    summary = (
        f"Table III on **{dataset_label}** data (MAPE %, throughput / E2E latency):\n\n{to_markdown(ours)}\n"
        f"{notes_markdown(ours_notes)}{claims}"
        f"The paper's Table III (its own traces):\n\n{to_markdown(paper)}\n"
        f"Ablation (Table IV):\n\n{to_markdown(ablation)}\n{notes_markdown(ablation_notes)}{ablation_claims}"
        + reduction_sentence(reduction, reference["headline_mape_reduction_pct"]))
    table3_caption = " ".join([f"MAPE (\\%) of throughput and E2E latency on the held-out settings, {dataset_label} "
                               "data.", *map(latex_text, ours_notes)])
    table4_caption = " ".join([f"Ablation: MAPE (\\%) with one SLIM term removed, {dataset_label} data.",
                               *map(latex_text, ablation_notes)])
    return HeldOutTables(
        table3_latex=to_booktabs(ours, table3_caption, "tab:table3"),
        table3_paper_latex=to_booktabs(
            paper, "MAPE (\\%) reported by the SLIM paper (its own traces; targets OPT-6.7B / OL 512).",
            "tab:table3-paper"),
        table4_latex=to_booktabs(ablation, table4_caption, "tab:table4"),
        summary_markdown=summary,
        table3_html=to_html_page(ours, table3_caption, "Table III"),
        table4_html=to_html_page(ablation, table4_caption, "Table IV"),
    )


# --- the advisor study's tables (Tables V, VI and the advisor comparison) -------------

def confidence_note(summary: pd.DataFrame, confidence: float) -> str:
    """One sentence per Table V target from `slim.paper.advisor_study.confidence_summary`: the
    violations of plain SLIM-BCA the confident one removes, and the measured throughput of both."""
    clauses = []
    for row in summary.itertuples(index=False, name=None):
        values = dict(zip(summary.columns, row))
        removed = (f"it removes {values['removed']} of SLIM-BCA's {values['plain violations']} SLO violations and"
                   if values["plain violations"]
                   else "SLIM-BCA violates no SLO, so there is none to remove; the confident choice")
        clauses.append(
            f"{values['target']}: {removed} changes the cap in {values['changed caps']} of "
            f"{values['training sets']} training sets ({values['confident infeasible']} left without a feasible cap, "
            f"{values['confident violations']} violating), at a measured throughput of "
            f"{values['mean Conf. Thr. var (%)']:+.1f}% against full-profile BCA "
            f"(SLIM-BCA: {values['mean Thr. var (%)']:+.1f}%; means over the feasible rows)")
    return (f"Conf.: SLIM-BCA holding the SLO on the one-sided {100 * confidence:g}% upper bound of SLIM's E2E. "
            + "; ".join(clauses) + ".")


ADVISOR_LABELS = (("knee", "Knee"), ("full", "Full-profile BCA"), ("slim", "SLIM-BCA"), ("sim", "SIM-BCA"))
"""Advisors of the comparison table, by column prefix; SIM-BCA only where it ran (real data)."""
ADVISOR_METRICS = (("cap", "cap"), ("retained_pct", "T ret. %"), ("e2e_s", "E2E s"), ("kv_gib", "KV GiB"))


def advisors_display(comparison: pd.DataFrame) -> pd.DataFrame:
    """`advisor_comparison` as a presentation table: one row per curve, columns
    (advisor, metric), caps as integer text."""
    index = [f"{model} IL {il:g} OL {ol:g}" for model, il, ol in
             zip(comparison["model"], comparison["input_len"], comparison["output_len"])]
    data = {}
    for key, advisor in ADVISOR_LABELS:
        if f"{key}_cap" not in comparison.columns:
            continue
        for metric, shown in ADVISOR_METRICS:
            values = comparison[f"{key}_{metric}"]
            data[(advisor, shown)] = (["--" if pd.isna(v) else f"{int(v)}" for v in values]
                                      if metric == "cap" else values.to_numpy(dtype=float))
    return pd.DataFrame(data, index=pd.Index(index, name="curve"))


# --- SIM's calibrated constants per held-out setting ---------------------------------

SIM_CONSTANT_DISPLAY = (("gemm_compute_efficiency", "eta GEMM compute", 1.0, 3),
                        ("gemm_memory_efficiency", "eta GEMM memory", 1.0, 3),
                        ("attention_memory_efficiency", "eta attention", 1.0, 3),
                        ("kernel_latency_s", "kernel launch (us)", 1e6, 2),
                        ("step_overhead_base_s", "step base (ms)", 1e3, 3),
                        ("step_overhead_per_seq_s", "per sequence (us)", 1e6, 2),
                        ("xformers_attention_latency_s", "XFormers attention (us)", 1e6, 2),
                        ("tensor_parallel_step_overhead_s", "TP collective step (ms)", 1e3, 3))
"""How each fitted simulator constant is shown: column label, scale to its unit, decimals."""


def sim_constants_table(fits: dict[str, dict], settings: list[HeldOutSetting]) -> pd.DataFrame:
    """One row per applicable setting (`columns.SIM_CONSTANTS_COLUMNS`): SIM's constants
    calibrated on its training runs (the ``sim`` entry of the setting's fits JSON)."""
    records = []
    for setting in settings:
        if not setting.applicable or "sim" not in fits.get(setting.name, {}):
            continue
        calibration = fits[setting.name]["sim"]
        records.append({col.SETTING: setting.name, col.N_RUNS: calibration["n_train_points"],
                        **{name: calibration["constants"][name] for name in col.SIM_FITTED_CONSTANTS},
                        col.TRAIN_MAPE_THROUGHPUT_PCT: calibration["train_mape_throughput_pct"],
                        col.UNIDENTIFIED: calibration["unidentified"]})
    return pd.DataFrame.from_records(records, columns=list(col.SIM_CONSTANTS_COLUMNS))


def sim_constants_markdown(table: pd.DataFrame, settings: list[HeldOutSetting], dataset_label: str) -> str:
    """The results page's view of `sim_constants_table`, constants in display units (a sentence
    saying why, where SIM was not evaluated)."""
    if table.empty:
        return (f"SIM is not evaluated on **{dataset_label}** data: where the data are simulated, the "
                "simulator would predict its own output.\n")
    labels = {setting.name: setting.label for setting in settings}
    shown = pd.DataFrame({"Runs": [f"{int(n)}" for n in table[col.N_RUNS]]},
                         index=pd.Index([labels[name] for name in table[col.SETTING]]))
    for name, label, scale, decimals in SIM_CONSTANT_DISPLAY:
        shown[label] = [f"{value * scale:.{decimals}f}" for value in table[name]]
    shown["train MAPE %"] = [f"{value:.1f}" for value in table[col.TRAIN_MAPE_THROUGHPUT_PCT]]
    shown["what the data leave open"] = table[col.UNIDENTIFIED].to_list()
    return (f"SIM's constants, calibrated on each setting's training runs only, **{dataset_label}** data "
            f"(`results/<dataset>/sim_constants.csv`; the TP step overhead is fitted only where a setting trains on "
            f"runs at tensor_parallel > 1, and stays at zero elsewhere; NVLink bandwidth and all-reduce latency are "
            f"fixed assumptions):\n\n{to_markdown(shown)}")


def full_profile_agreement(comparison: pd.DataFrame) -> str:
    """How often each BCA flavour in `advisor_comparison` picks full-profile BCA's cap, as a sentence."""
    parts = []
    for key, advisor in ADVISOR_LABELS:
        if key in ("knee", "full") or f"{key}_cap" not in comparison.columns:
            continue
        same = int((comparison[f"{key}_cap"] == comparison["full_cap"]).sum())
        parts.append(f"{advisor} on {same} of {len(comparison)}")
    return f"Curves on which an advisor picks full-profile BCA's cap: {', '.join(parts)}.\n"
