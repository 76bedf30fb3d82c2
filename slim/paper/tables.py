"""Paper tables as DataFrames and booktabs LaTeX (pandas Styler), ours beside the paper's."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from slim.paper.heldout import ABLATION_LABELS, MAIN_PREDICTORS, SLIM
from slim.paper.splits import HeldOutSetting

METRICS = (("mape_throughput_pct", "Thr."), ("mape_e2e_pct", "E2E"))


def load_paper_reference(path: str | Path = "config/paper_reference.yaml") -> dict:
    """The paper's reported numbers (Tables III, IV and VI, the Section VI-F and VII-B headlines),
    for side-by-side columns only."""
    return yaml.safe_load(Path(path).read_text())


def mape_matrix(mapes: pd.DataFrame, settings: list[HeldOutSetting], predictors: tuple[str, ...]) -> pd.DataFrame:
    """Rows = settings (labels), columns = (predictor, metric); n/a settings carry their note."""
    columns = pd.MultiIndex.from_tuples([(p, label) for p in predictors for _, label in METRICS])
    rows = {}
    for setting in settings:
        values: list[object] = []
        for predictor in predictors:
            match = mapes[(mapes["setting"] == setting.name) & (mapes["predictor"] == predictor)]
            for metric, _ in METRICS:
                if not setting.applicable:
                    values.append(setting.not_applicable if not values else "")
                elif match.empty:
                    values.append(math.nan)
                else:
                    values.append(float(match[metric].iloc[0]))
        rows[setting.label] = values
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns)


def paper_matrix(reference: dict, table: str, settings: list[HeldOutSetting],
                 predictors: tuple[str, ...]) -> pd.DataFrame:
    """The paper's values for the same rows and columns (NaN where it reports none)."""
    columns = pd.MultiIndex.from_tuples([(p, label) for p in predictors for _, label in METRICS])
    rows = {}
    for setting in settings:
        reported = reference[table].get(setting.name, {})
        rows[setting.label.split(" (")[0]] = [value for p in predictors
                                              for value in reported.get(p, [math.nan, math.nan])]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns)


def table3(mapes: pd.DataFrame, settings: list[HeldOutSetting]) -> pd.DataFrame:
    """Table III: MAPE (%) of throughput and E2E latency per setting for the three predictors."""
    return mape_matrix(mapes, settings, MAIN_PREDICTORS)


def table4(mapes: pd.DataFrame, settings: list[HeldOutSetting], transfers: tuple[str, ...]) -> pd.DataFrame:
    """Table IV: the ablation on the named transfers (full SLIM vs each term removed)."""
    chosen = [s for s in settings if s.name in transfers]
    return mape_matrix(mapes, chosen, (SLIM, *ABLATION_LABELS.values()))


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


ADVISOR_LABELS = (("knee", "Knee"), ("full", "Full-profile BCA"), ("slim", "SLIM-BCA"))
ADVISOR_METRICS = (("cap", "cap"), ("retained_pct", "T ret. %"), ("e2e_s", "E2E s"), ("kv_gib", "KV GiB"))


def advisors_display(comparison: pd.DataFrame) -> pd.DataFrame:
    """`advisor_comparison` as a presentation table: one row per curve, columns
    (advisor, metric), caps as integer text."""
    index = [f"{model} IL {il:g} OL {ol:g}" for model, il, ol in
             zip(comparison["model"], comparison["input_len"], comparison["output_len"])]
    data = {}
    for key, advisor in ADVISOR_LABELS:
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
