"""What a Snakemake HTML report embeds (its artefacts, their bytes, its menu), and the checks of it
that need no browser: nothing expected is missing, empty or stale, and every table is HTML."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote_to_bytes

LATEX_MARKERS = ("\\begin{", "\\end{", "\\toprule", "\\midrule", "\\bottomrule", "\\\\", "\\%", "\\emph")
"""LaTeX that a table rendered for readers must not show (booktabs rules, environments, escapes)."""


class ReportCheckError(Exception):
    """The report misses an artefact, embeds an empty or stale one, or does not render."""


# Snakemake 9 writes `snakemake --report x.html` as one self-contained page: a React app plus two
# JSON objects, `<script id="results">var results = {...};</script>` (path -> name, caption,
# `data_uri` with the file's bytes in base64) and `<script id="categories">` (category ->
# subcategory -> paths). Those blocks are the report's data interface, read here.

def _embedded_object(html_text: str, script_id: str) -> dict:
    """The JSON object assigned in `<script id="script_id">var name = {...};</script>` (a script's text
    ends at the first ``</script>``, for the browser as here)."""
    script = re.search(rf'<script\b[^>]*\bid="{re.escape(script_id)}"[^>]*>(?P<text>.*?)</script>', html_text,
                       re.DOTALL)
    if script is None:
        raise ReportCheckError(f'the report has no <script id="{script_id}"> block: not a Snakemake (>= 8) HTML '
                               "report, or it was built as a .zip")
    match = re.fullmatch(r"(?:var|let|const)\s+\w+\s*=\s*(?P<json>.*?);?", script.group("text").strip(), re.DOTALL)
    if match is None:
        raise ReportCheckError(f'<script id="{script_id}"> does not hold a `var name = {{...}};` assignment')
    try:
        value = json.loads(match.group("json"))
    except json.JSONDecodeError as error:
        raise ReportCheckError(f'<script id="{script_id}"> holds invalid JSON: {error}') from error
    if not isinstance(value, dict):
        raise ReportCheckError(f'<script id="{script_id}"> is not a JSON object')
    return value


def report_results(html_text: str) -> dict[str, dict[str, object]]:
    """The report's `results` object: artefact path -> name, caption, mime type, data URI..."""
    return _embedded_object(html_text, "results")


def report_artefacts(html_text: str) -> list[str]:
    """The paths of the artefacts embedded in the report, sorted."""
    return sorted(report_results(html_text))


def report_categories(html_text: str) -> dict[str, dict[str, list[str]]]:
    """The report's menu: category -> subcategory ('Other' when none) -> artefact paths."""
    return _embedded_object(html_text, "categories")


def decode_data_uri(uri: str) -> bytes:
    """The bytes of a `data:<mime>[;param...];base64,<payload>` URI (RFC 2397)."""
    header, separator, payload = uri.partition(",")
    if not header.startswith("data:") or not separator:
        raise ReportCheckError(f"not a data URI: {uri[:60]!r}")
    return base64.b64decode(payload, validate=True) if header.endswith(";base64") else unquote_to_bytes(payload)


def result_label(path: str, entry: Mapping[str, object]) -> str:
    """What a category's table in the report shows for a result: its first label if labelled, else its path."""
    labels = entry.get("labels")
    return str(next(iter(labels.values()))) if isinstance(labels, dict) and labels else path


@dataclass(frozen=True)
class ReportContents:
    """The report's embedded artefacts against the expected ones: `unexpected` are embedded but not
    expected (informational); `categories` is the report's menu."""

    embedded: tuple[str, ...]
    expected: tuple[str, ...]
    unexpected: tuple[str, ...]
    categories: Mapping[str, Mapping[str, tuple[str, ...]]]


def check_report_contents(html_text: str, expected: Iterable[str], workdir: Path | None = None) -> ReportContents:
    """Raises ReportCheckError naming every expected artefact that is not embedded, every embedded
    one whose payload is empty and (with `workdir`) every one whose bytes differ from the file under
    `workdir` (the report is older than the file: rebuild it)."""
    results = report_results(html_text)
    expected_paths = tuple(sorted(set(expected)))
    empty, stale = [], []
    for path, entry in sorted(results.items()):
        payload = decode_data_uri(str(entry.get("data_uri", "")))
        on_disk = Path(workdir) / path if workdir is not None else None
        if not payload:
            empty.append(path)
        elif on_disk is not None and on_disk.is_file() and on_disk.read_bytes() != payload:
            stale.append(path)
    missing = [path for path in expected_paths if path not in results]
    problems = [f"{label}: {', '.join(paths)}" for label, paths in (
        ("missing from the report", missing), ("embedded but empty", empty),
        ("older than the file on disk (rebuild the report)", stale)) if paths]
    if problems:
        raise ReportCheckError(f"{len(results)} artefacts embedded; " + "; ".join(problems))
    return ReportContents(
        embedded=tuple(sorted(results)), expected=expected_paths,
        unexpected=tuple(path for path in sorted(results) if path not in expected_paths),
        categories={category: {sub: tuple(paths) for sub, paths in subs.items()}
                    for category, subs in report_categories(html_text).items()})


# --- tables: HTML, not LaTeX source ----------------------------------------------------------

def is_table_artefact(path: str) -> bool:
    """Tables are the artefacts whose file name starts with ``table`` (table3.html, table_fig11.html, ...)."""
    return Path(path).name.startswith("table")


def latex_in(text: str) -> list[str]:
    """The LaTeX markers (`LATEX_MARKERS`) that `text` shows."""
    return [marker for marker in LATEX_MARKERS if marker in text]


class _TableCollector(HTMLParser):
    """Counts `<table>` elements and their body cells, and collects the page's visible text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables = self.cells = self._hidden = 0
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tables += tag == "table"
        self.cells += tag == "td"
        self._hidden += tag in ("style", "script", "title")

    def handle_endtag(self, tag: str) -> None:
        self._hidden -= tag in ("style", "script", "title")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.text.append(data)


def html_table_problems(path: str, mime: str, payload: bytes) -> list[str]:
    """Why an embedded table is not a readable HTML table: not text/html (e.g. raw ``.tex``), no
    `<table>` with cells, or LaTeX in its visible text. Empty when it is one."""
    if mime != "text/html":
        return [f"{path} is embedded as {mime or 'an unknown type'}, not as an HTML table"]
    collector = _TableCollector()
    collector.feed(payload.decode("utf-8", errors="replace"))
    collector.close()
    problems = [f"{path} holds no <table> with cells"] if collector.tables == 0 or collector.cells == 0 else []
    leaked = latex_in("".join(collector.text))
    return problems + ([f"{path} shows raw LaTeX ({', '.join(leaked)})"] if leaked else [])


def embedded_tables(html_text: str) -> dict[str, str]:
    """Every table artefact of the report: path -> its HTML. Raises ReportCheckError naming every
    table that is not an HTML table (a `.tex` registered with `report(...)` would be offered as a
    download of LaTeX source instead of being shown), or when there is none."""
    tables, problems = {}, []
    for path, entry in sorted(report_results(html_text).items()):
        if is_table_artefact(path):
            payload = decode_data_uri(str(entry.get("data_uri", "")))
            found = html_table_problems(path, str(entry.get("mime_type", "")), payload)
            problems += found
            if not found:
                tables[path] = payload.decode("utf-8")
    if problems:
        raise ReportCheckError("tables not embedded as HTML tables: " + "; ".join(problems))
    if not tables:
        raise ReportCheckError("the report embeds no table artefact (no file named table*)")
    return tables
