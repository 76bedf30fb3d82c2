"""Rendering a table for the paper, the report and the results page: booktabs LaTeX and a self-contained
HTML page (pandas Styler), GitHub markdown, and the cell and label conversions between them.

No table's content lives here (`slim.paper.tables` builds Tables III-VI): these helpers take any
DataFrame, so every table of the paper shares one look, and the jobs that only format a table
(Table I, the simulator's validation, Fig. 11's table) import pandas and nothing more.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

import pandas as pd

from slim.markdown import markdown_table


def latex_text(text: str) -> str:
    """Plain note text for a LaTeX caption: ``%`` and ``_`` escaped (they start a comment and a
    subscript there); already escaped ones are left alone."""
    return re.sub(r"(?<!\\)([%_])", r"\\\1", text)


def number_cell(value: object, precision: int) -> str:
    """A number as the LaTeX and HTML tables print it: '--' for a missing one, an integer (a count,
    a length) as an integer, anything else at fixed `precision`."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    if pd.api.types.is_integer(value):
        return str(value)
    return f"{value:.{precision}f}"


def to_booktabs(frame: pd.DataFrame, caption: str, label: str, precision: int = 1) -> str:
    """Booktabs LaTeX (\\toprule/\\midrule/\\bottomrule), numbers as `number_cell` prints them."""
    def fmt(value: object) -> str:
        return value if isinstance(value, str) else number_cell(value, precision)

    styler = frame.style.format(fmt)
    return styler.to_latex(hrules=True, caption=caption, label=label, position="t",
                           column_format="l" + "r" * frame.shape[1], multicol_align="c")


HTML_TABLE_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #111; }
table { border-collapse: collapse; border-top: 2px solid #111; border-bottom: 2px solid #111; font-size: 0.9em; }
thead tr:last-child th { border-bottom: 1px solid #111; }
th, td { padding: 0.25em 0.7em; }
th.col_heading { text-align: center; }
td { text-align: right; }
td .ci { font-size: 0.8em; color: #555; white-space: nowrap; }
td .range { white-space: nowrap; }
th.row_heading { text-align: left; font-weight: normal; white-space: nowrap; }
caption { caption-side: bottom; text-align: left; max-width: 70em; padding-top: 0.8em; font-size: 0.85em; }
"""
"""A booktabs look for the HTML renderings (rules above, below and under the header only)."""


def latex_to_html_text(text: str) -> str:
    """The LaTeX this module's tables put in captions, labels and cells (``\\%``, ``\\_``,
    ``{,}`` thousands separators, ``\\emph{...}`` and simple inline math such as
    ``$H_{kv}$``, ``$\\times$``, ``$\\mathrm{AI}$``) as HTML text, everything else escaped."""
    out = html.escape(text, quote=False)

    def math(match: re.Match[str]) -> str:
        body = re.sub(r"\\mathrm\{([^{}]*)\}", r"\1", match.group(1))
        for command, shown in ((r"\times", "&times;"), (r"\min", "min"), (r"\max", "max")):
            body = body.replace(command, shown)
        body = re.sub(r"_\{([^{}]*)\}", r"<sub>\1</sub>", body)
        return re.sub(r"_(\w)", r"<sub>\1</sub>", body)

    out = re.sub(r"\$([^$]*)\$", math, out)
    out = re.sub(r"\\emph\{([^{}]*)\}", r"<em>\1</em>", out)
    return (out.replace("{,}", ",").replace(r"\%", "%").replace(r"\_", "_").replace(r"\&amp;", "&amp;")
            .replace("--", "&ndash;"))


def to_html_page(frame: pd.DataFrame, caption: str, title: str, precision: int = 1) -> str:
    """A self-contained HTML page holding `frame` as a ``<table>`` (pandas Styler), with the
    same numbers as `to_booktabs` (fixed precision, NaN as '--') and its LaTeX `caption`
    turned into HTML (`latex_to_html_text`): the rendering the Snakemake report shows, where
    the ``.tex`` file stays the paper's artefact. Deterministic: a fixed table id, no cell ids."""
    from pandas.io.formats.style import Styler

    def fmt(value: object) -> str:
        if isinstance(value, str):
            # A MAPE's confidence interval on a second, smaller line (`mape_cell`).
            text = re.sub(r"(\[[^\]]*\])", r'<span class="range">\1</span>', latex_to_html_text(value))
            return re.sub(r" (\(CI [^)]*\)|\(no CI\))$", r'<br><span class="ci">\1</span>', text)
        return number_cell(value, precision)

    def label(value: object) -> str:
        return latex_to_html_text(str(value))

    table_id = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "table"
    styler = Styler(frame, uuid=table_id, cell_ids=False)
    styler = styler.format(fmt).format_index(label, axis=0).format_index(label, axis=1)
    styler = styler.set_caption(latex_to_html_text(caption))
    body = styler.to_html(doctype_html=False)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{HTML_TABLE_CSS}</style>\n</head>\n<body>\n"
            f"{body}</body>\n</html>\n")


def to_markdown(frame: pd.DataFrame, precision: int = 1, index_label: str = "setting") -> str:
    """A GitHub-markdown rendering (for the results page), same numbers as the LaTeX."""
    flat = frame.copy()
    flat.columns = [" ".join(c) if isinstance(c, tuple) else c for c in flat.columns]
    flat = flat.map(lambda v: v if isinstance(v, str) else ("--" if pd.isna(v) else f"{v:.{precision}f}"))
    rows = ([index, *row] for index, row in zip(flat.index, flat.values))
    return "\n".join(markdown_table([index_label, *flat.columns], rows)) + "\n"


def as_display(frame: pd.DataFrame, integer_columns: tuple[str, ...]) -> pd.DataFrame:
    """Counts and caps as integer text (NaN as '--'), for tables printed at fixed precision."""
    shown = frame.copy()
    for name in integer_columns:
        shown[name] = [("--" if pd.isna(value) else f"{int(round(value))}") for value in shown[name]]
    return shown


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
