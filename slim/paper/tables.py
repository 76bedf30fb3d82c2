"""Paper tables as DataFrames and booktabs LaTeX (pandas Styler), ours beside the paper's."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from slim import columns as col
from slim.paper.heldout import ABLATION_LABELS, MAIN_PREDICTORS, SIM, SIM_PREDICTORS, SLIM
from slim.paper.splits import HeldOutSetting

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
    return yaml.safe_load(Path(path).read_text())


def mape_cell(row: pd.Series, metric: col.PredictionMetric, precision: int = 1) -> object:
    """One MAPE as shown in Tables III and IV.

    A plain number where the training data determine the validation predictions (or where
    `row` has no identifiability columns); ``value [low-high]`` for a SLIM fit whose
    training-equivalent solutions disagree on them; ``value*`` for a baseline whose
    prediction is its minimal-norm choice (`UNDETERMINED_MARK`).
    """
    value = float(row[metric.mape])
    if col.VALIDATION_DETERMINED not in row.index or bool(row[col.VALIDATION_DETERMINED]):
        return value
    low, high = float(row[metric.mape_low]), float(row[metric.mape_high])
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{value:.{precision}f}{UNDETERMINED_MARK}"
    return f"{value:.{precision}f} [{low:.{precision}f}-{high:.{precision}f}]"


def mape_matrix(mapes: pd.DataFrame, settings: list[HeldOutSetting], predictors: tuple[str, ...]) -> pd.DataFrame:
    """Rows = settings (labels), columns = (predictor, metric); n/a settings carry their note.

    Cells are `mape_cell`s: numbers, or text where the training data leave the MAPE open.
    """
    columns = pd.MultiIndex.from_tuples([(p, label) for p in predictors for _, label in predictor_metrics(p)])
    rows = {}
    for setting in settings:
        values: list[object] = []
        for predictor in predictors:
            match = mapes[(mapes[col.SETTING] == setting.name) & (mapes[col.PREDICTOR] == predictor)]
            for metric, _ in predictor_metrics(predictor):
                if not setting.applicable:
                    values.append(setting.not_applicable if not values else "")
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
    if any(cell.endswith(UNDETERMINED_MARK) for cell in cells):
        notes.append(UNDETERMINED_NOTE)
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
    """The paper's three predictors, then SIM's two where they were evaluated (real data)."""
    present = set(mapes[col.PREDICTOR])
    return MAIN_PREDICTORS + tuple(p for p in SIM_PREDICTORS if p in present)


def table3(mapes: pd.DataFrame, settings: list[HeldOutSetting]) -> pd.DataFrame:
    """Table III: MAPE (%) of throughput and E2E latency per setting for the three predictors,
    and for SIM and SLIM (predicted batch) where they were evaluated."""
    return mape_matrix(mapes, settings, table3_predictors(mapes))


def table4(mapes: pd.DataFrame, settings: list[HeldOutSetting], transfers: tuple[str, ...]) -> pd.DataFrame:
    """Table IV: the ablation on the named transfers (full SLIM vs each term removed)."""
    chosen = [s for s in settings if s.name in transfers]
    return mape_matrix(mapes, chosen, (SLIM, *ABLATION_LABELS.values()))


@dataclass(frozen=True)
class HeldOutTables:
    """Tables III and IV of one dataset: LaTeX files and the README's Markdown summary."""

    table3_latex: str
    table3_paper_latex: str
    table4_latex: str
    summary_markdown: str


def heldout_tables(mapes: pd.DataFrame, settings: list[HeldOutSetting], reference: dict, dataset_label: str,
                   ablation_transfers: tuple[str, ...], reduction_pct: float) -> HeldOutTables:
    """Tables III (ours and the paper's) and IV from `table3.csv`'s rows, with the notes
    that explain ranges and marked cells, and the average-MAPE-reduction headline."""
    ours = table3(mapes, settings)
    ours_notes = identifiability_notes(ours) + ([SIM_NOTE] if SIM in table3_predictors(mapes) else [])
    paper = paper_matrix(reference, "table3", settings, MAIN_PREDICTORS)
    ablation = table4(mapes, settings, ablation_transfers)
    ablation_notes = identifiability_notes(ablation)

    def notes_markdown(notes: list[str]) -> str:
        return "".join(f"{note}\n\n" for note in notes)

    summary = (
        f"Table III on **{dataset_label}** data (MAPE %, throughput / E2E latency):\n\n{to_markdown(ours)}\n"
        f"{notes_markdown(ours_notes)}"
        f"The paper's Table III (its own traces):\n\n{to_markdown(paper)}\n"
        f"Ablation (Table IV):\n\n{to_markdown(ablation)}\n{notes_markdown(ablation_notes)}"
        f"Average MAPE reduction of SLIM vs the two baselines (mean over both baselines and both metrics "
        f"of 1 - mean_SLIM / mean_baseline across the applicable settings): **{reduction_pct:.1f}%** "
        f"(paper: {reference['headline_mape_reduction_pct']}%).\n")
    return HeldOutTables(
        table3_latex=to_booktabs(ours, " ".join([
            f"MAPE (\\%) of throughput and E2E latency on the held-out settings, {dataset_label} data.",
            *ours_notes]), "tab:table3"),
        table3_paper_latex=to_booktabs(
            paper, "MAPE (\\%) reported by the SLIM paper (its own traces; targets OPT-6.7B / OL 512).",
            "tab:table3-paper"),
        table4_latex=to_booktabs(ablation, " ".join([
            f"Ablation: MAPE (\\%) with one SLIM term removed, {dataset_label} data.", *ablation_notes]),
            "tab:table4"),
        summary_markdown=summary,
    )


def to_booktabs(frame: pd.DataFrame, caption: str, label: str, precision: int = 1) -> str:
    """Booktabs LaTeX (\\toprule/\\midrule/\\bottomrule) with numbers at fixed precision."""
    def fmt(value: object) -> str:
        if isinstance(value, str):
            return value
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "--"
        return f"{value:.{precision}f}"

    styler = frame.style.format(fmt)
    return styler.to_latex(hrules=True, caption=caption, label=label, position="t",
                           column_format="l" + "r" * frame.shape[1], multicol_align="c")


def to_markdown(frame: pd.DataFrame, precision: int = 1, index_label: str = "setting") -> str:
    """A GitHub-markdown rendering (for the README), same numbers as the LaTeX."""
    flat = frame.copy()
    flat.columns = [" ".join(c) if isinstance(c, tuple) else c for c in flat.columns]
    flat = flat.map(lambda v: v if isinstance(v, str) else ("--" if pd.isna(v) else f"{v:.{precision}f}"))
    header = f"| {index_label} | " + " | ".join(flat.columns) + " |"
    lines = [header, "|" + "---|" * (len(flat.columns) + 1)]
    lines += ["| " + str(index) + " | " + " | ".join(row) + " |" for index, row in zip(flat.index, flat.values)]
    return "\n".join(lines) + "\n"


# --- the advisor study's tables (Tables V, VI and the advisor comparison) -------------

def as_display(frame: pd.DataFrame, integer_columns: tuple[str, ...]) -> pd.DataFrame:
    """Counts and caps as integer text (NaN as '--'), for tables printed at fixed precision."""
    shown = frame.copy()
    for name in integer_columns:
        shown[name] = [("--" if pd.isna(value) else f"{int(round(value))}") for value in shown[name]]
    return shown


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


def latex_escaped_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy whose column labels have ``%`` escaped for LaTeX (it starts a comment there)."""
    def escape(label: Any) -> Any:
        if isinstance(label, tuple):
            return tuple(escape(part) for part in label)
        return label.replace("%", "\\%") if isinstance(label, str) else label

    escaped = frame.copy()
    escaped.columns = (pd.MultiIndex.from_tuples([escape(c) for c in frame.columns])
                       if isinstance(frame.columns, pd.MultiIndex) else [escape(c) for c in frame.columns])
    return escaped


# --- SIM's calibrated constants per held-out setting ---------------------------------

SIM_CONSTANT_DISPLAY = (("gemm_compute_efficiency", "eta GEMM compute", 1.0, 3),
                        ("gemm_memory_efficiency", "eta GEMM memory", 1.0, 3),
                        ("attention_memory_efficiency", "eta attention", 1.0, 3),
                        ("kernel_latency_s", "kernel launch (us)", 1e6, 2),
                        ("step_overhead_base_s", "step base (ms)", 1e3, 3),
                        ("step_overhead_per_seq_s", "per sequence (us)", 1e6, 2))
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
    """The README's view of `sim_constants_table`, constants in display units (a sentence
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
            f"(`results/<dataset>/sim_constants.csv`; tensor-parallel constants are fixed assumptions, "
            f"no TP runs exist to fit them):\n\n{to_markdown(shown)}")


def full_profile_agreement(comparison: pd.DataFrame) -> str:
    """How often each BCA flavour in `advisor_comparison` picks full-profile BCA's cap, as a sentence."""
    parts = []
    for key, advisor in ADVISOR_LABELS:
        if key in ("knee", "full") or f"{key}_cap" not in comparison.columns:
            continue
        same = int((comparison[f"{key}_cap"] == comparison["full_cap"]).sum())
        parts.append(f"{advisor} on {same} of {len(comparison)}")
    return f"Curves on which an advisor picks full-profile BCA's cap: {', '.join(parts)}.\n"
