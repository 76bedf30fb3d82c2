"""Headless checks of the Snakemake HTML report: every declared artefact is embedded and the
report's JavaScript app actually renders (menu, category tables, a non-blank screenshot).

Snakemake 9 writes `snakemake --report x.html` as one self-contained page: a React app plus
two JSON objects in `<script id="results">var results = {...};</script>` (path -> name,
caption, `data_uri` with the file's bytes in base64) and `<script id="categories">` (category
-> subcategory -> paths). These script blocks are the report's data interface; this module
reads them with the standard HTML parser and never evaluates the app's code itself.

Rendering in headless Chromium is checked by `report_render` (beside this file). Both are
workflow tooling, not part of the `slim` package: `check_report.py` drives them.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote_to_bytes

from slim.errors import SlimError

#: The first positional argument of a `report(...)` flag in a rule file: a string literal, or an
#: f-string whose fields (a loop variable of a rule defined per dataset) stand for one path component.
_REPORT_CALL = re.compile(r"\breport\(")
_REPORT_LITERAL = re.compile(r"""\breport\(\s*f?(['"])(?P<pattern>.+?)\1""", re.DOTALL)
#: `rule NAME:`, or `rule:` of a rule defined in a loop (its name is computed: `name:`).
_RULE_HEADER = re.compile(r"^[ \t]*(?:rule|checkpoint)(?:[ \t]+(\w+))?[ \t]*:", re.MULTILINE)
_WILDCARD = re.compile(r"\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:,(?P<regex>[^{}]+))?\}")
class ReportCheckError(SlimError):
    """The report misses an artefact, embeds an empty or stale one, or does not render."""


@dataclass(frozen=True)
class ReportContents:
    """What the report's embedded data holds compared with what the workflow declares.

    `stale` lists artefacts whose embedded bytes differ from the file on disk (the report was
    built before the file was last rewritten); `unexpected` those embedded but not expected
    (informational only).
    """

    embedded: tuple[str, ...]
    expected: tuple[str, ...]
    missing: tuple[str, ...]
    unexpected: tuple[str, ...]
    empty: tuple[str, ...]
    stale: tuple[str, ...]
    categories: Mapping[str, Mapping[str, tuple[str, ...]]]


# ---------------------------------------------------------------------------- expectations


@dataclass(frozen=True, order=True)
class ReportDeclaration:
    """One `report(...)`-flagged output: the rule that writes it ("" for a rule defined in a loop,
    whose name is computed: any rule) and its output pattern."""

    rule: str
    pattern: str


def report_patterns(rule_files: Iterable[Path]) -> list[ReportDeclaration]:
    """Output patterns flagged with `report(...)` in the given Snakemake rule files, with the
    rule (the nearest `rule NAME:` above the flag) that declares each.

    Raises ReportCheckError when a `report(` call does not start with a string literal or sits
    outside a rule, so that an artefact this parser cannot read is never silently skipped.
    """
    declarations: set[ReportDeclaration] = set()
    for rule_file in rule_files:
        text = Path(rule_file).read_text()
        rule_starts = [(m.start(), m.group(1)) for m in _RULE_HEADER.finditer(text)]
        for call in _REPORT_CALL.finditer(text):
            line = text.count("\n", 0, call.start()) + 1
            match = _REPORT_LITERAL.match(text, call.start())
            rules_above = [name for start, name in rule_starts if start < call.start()]
            if match is None or not rules_above:
                raise ReportCheckError(
                    f"{rule_file}:{line}: report(...) is not a string literal inside a rule's output; "
                    "write the output path as a literal so the report check can expect it"
                )
            declarations.add(ReportDeclaration(rule=rules_above[-1] or "", pattern=match.group("pattern")))
    return sorted(declarations)


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """A regex matching the paths a Snakemake output pattern can produce: `{name}` becomes one
    path component (`[^/]+`), `{name,regex}` its own regex; the rest is literal."""
    parts: list[str] = []
    position = 0
    for wildcard in _WILDCARD.finditer(pattern):
        parts.append(re.escape(pattern[position : wildcard.start()]))
        parts.append(f"(?:{wildcard.group('regex')})" if wildcard.group("regex") else "[^/]+")
        position = wildcard.end()
    parts.append(re.escape(pattern[position:]))
    return re.compile("".join(parts) + r"\Z")


def parse_summary(summary_text: str) -> list[tuple[str, str]]:
    """(output file, rule) pairs listed by `snakemake --summary` (tab-separated, header
    `output_file  date  rule ...`)."""
    lines = [line for line in summary_text.splitlines() if line.strip()]
    header_index = next((i for i, line in enumerate(lines) if line.startswith("output_file\t")), None)
    if header_index is None:
        raise ReportCheckError("`snakemake --summary` printed no 'output_file' header; cannot list the DAG's outputs")
    rule_column = lines[header_index].split("\t").index("rule")
    rows = [line.split("\t") for line in lines[header_index + 1 :]]
    return [(row[0], row[rule_column]) for row in rows]


def dag_output_files(workdir: Path, target: str = "all", snakemake: str = "snakemake") -> list[tuple[str, str]]:
    """(output file, rule) for every output of every job in the DAG of `target`, built or not
    (`snakemake --summary`)."""
    completed = subprocess.run(
        [snakemake, "--summary", target], cwd=workdir, capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise ReportCheckError(
            f"`snakemake --summary {target}` failed in {workdir} (exit {completed.returncode}):\n"
            f"{completed.stderr[-2000:]}"
        )
    return parse_summary(completed.stdout)


def select_report_artefacts(
    outputs: Iterable[tuple[str, str]], declarations: Iterable[ReportDeclaration]
) -> list[str]:
    """The output files whose rule flags a matching pattern with `report(...)`, sorted."""
    regexes = [(declaration.rule, pattern_regex(declaration.pattern)) for declaration in declarations]
    return sorted({path for path, rule in outputs if any(r in ("", rule) and rx.match(path) for r, rx in regexes)})


def expected_report_artefacts(
    workdir: Path,
    target: str = "all",
    rule_files: Sequence[Path] | None = None,
    snakemake: str = "snakemake",
) -> list[str]:
    """Files the report must contain: the outputs of `target`'s DAG (`snakemake --summary`)
    that match a `report(...)` declaration of the rule that writes them, read from the rule
    files (default: workflow/rules/*.smk).

    Derived from the workflow, not from what is on disk, so a figure that was never built, or
    built but left out of the report, shows up as missing.
    """
    workdir = Path(workdir)
    files = rule_files if rule_files is not None else sorted((workdir / "workflow" / "rules").glob("*.smk"))
    declarations = report_patterns(files)
    if not declarations:
        raise ReportCheckError(f"no report(...) declarations found in {[str(f) for f in files]}")
    return select_report_artefacts(dag_output_files(workdir, target, snakemake), declarations)


# ----------------------------------------------------------------------- embedded report data


class _ScriptCollector(HTMLParser):
    """Collects the text of `<script id=...>` elements."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.scripts: dict[str, str] = {}
        self._current: str | None = None
        self._chunks: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self._current = dict(attrs).get("id")
            self._chunks = []

    def handle_data(self, data: str) -> None:
        if self._current is not None:
            self._chunks.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._current is not None:
            self.scripts[self._current] = "".join(self._chunks)
            self._current = None


def embedded_json(html_text: str, script_id: str) -> object:
    """The JSON value assigned in `<script id="script_id">var name = <json>;</script>`."""
    collector = _ScriptCollector()
    collector.feed(html_text)
    collector.close()
    if script_id not in collector.scripts:
        raise ReportCheckError(
            f'the report has no <script id="{script_id}"> block: not a Snakemake (>= 8) HTML report, '
            "or it was built as a .zip"
        )
    body = collector.scripts[script_id].strip()
    match = re.fullmatch(r"(?:var|let|const)\s+\w+\s*=\s*(?P<json>.*?);?", body, re.DOTALL)
    if match is None:
        raise ReportCheckError(f'<script id="{script_id}"> does not hold a `var name = {{...}};` assignment')
    try:
        return json.loads(match.group("json"))
    except json.JSONDecodeError as error:
        raise ReportCheckError(f'<script id="{script_id}"> holds invalid JSON: {error}') from error


def report_results(html_text: str) -> dict[str, dict[str, object]]:
    """The report's `results` object: artefact path -> name, caption, mime type, data URI..."""
    results = embedded_json(html_text, "results")
    if not isinstance(results, dict):
        raise ReportCheckError('<script id="results"> is not a JSON object')
    return results


def report_artefacts(html_text: str) -> list[str]:
    """The paths of the artefacts embedded in the report, sorted."""
    return sorted(report_results(html_text))


def report_categories(html_text: str) -> dict[str, dict[str, list[str]]]:
    """The report's menu: category -> subcategory ('Other' when none) -> artefact paths."""
    categories = embedded_json(html_text, "categories")
    if not isinstance(categories, dict):
        raise ReportCheckError('<script id="categories"> is not a JSON object')
    return categories


def decode_data_uri(uri: str) -> bytes:
    """The bytes of a `data:<mime>[;param...];base64,<payload>` URI (RFC 2397)."""
    header, separator, payload = uri.partition(",")
    if not header.startswith("data:") or not separator:
        raise ReportCheckError(f"not a data URI: {uri[:60]!r}")
    if header.endswith(";base64"):
        return base64.b64decode(payload, validate=True)
    return unquote_to_bytes(payload)


def check_report_contents(html_text: str, expected: Iterable[str], workdir: Path | None = None) -> ReportContents:
    """Compare the report's embedded artefacts with the expected paths.

    Raises ReportCheckError naming every expected artefact that is not embedded, every
    embedded one whose payload is empty, and (when `workdir` is given) every one whose
    embedded bytes differ from the file under `workdir` (a stale report: rebuild it).
    """
    results = report_results(html_text)
    categories = report_categories(html_text)
    expected_paths = tuple(sorted(set(expected)))
    embedded = tuple(sorted(results))
    empty: list[str] = []
    stale: list[str] = []
    for path, entry in results.items():
        payload = decode_data_uri(str(entry.get("data_uri", "")))
        if not payload:
            empty.append(path)
        elif workdir is not None:
            on_disk = Path(workdir) / path
            if on_disk.is_file() and on_disk.read_bytes() != payload:
                stale.append(path)
    contents = ReportContents(
        embedded=embedded,
        expected=expected_paths,
        missing=tuple(path for path in expected_paths if path not in results),
        unexpected=tuple(path for path in embedded if path not in set(expected_paths)),
        empty=tuple(sorted(empty)),
        stale=tuple(sorted(stale)),
        categories={
            category: {sub: tuple(paths) for sub, paths in subcategories.items()}
            for category, subcategories in categories.items()
        },
    )
    problems = []
    if contents.missing:
        problems.append("missing from the report: " + ", ".join(contents.missing))
    if contents.empty:
        problems.append("embedded but empty: " + ", ".join(contents.empty))
    if contents.stale:
        problems.append("older than the file on disk (rebuild the report): " + ", ".join(contents.stale))
    if problems:
        raise ReportCheckError(f"{len(embedded)} artefacts embedded; " + "; ".join(problems))
    return contents


# ------------------------------------------------------------------------- tables as HTML

#: LaTeX a table rendered for readers must not show (booktabs rules, environments, escapes).
LATEX_MARKERS = ("\\begin{", "\\end{", "\\toprule", "\\midrule", "\\bottomrule", "\\\\", "\\%", "\\emph")


def is_table_artefact(path: str) -> bool:
    """Tables are the artefacts whose file name starts with ``table`` (table3.html, table_fig11.html, ...)."""
    return Path(path).name.startswith("table")


class _TableCollector(HTMLParser):
    """Counts `<table>` elements and their body cells, and collects the page's visible text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables = 0
        self.cells = 0
        self.text: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables += 1
        elif tag == "td":
            self.cells += 1
        elif tag in ("style", "script", "title"):
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script", "title"):
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.text.append(data)


def html_table_problems(path: str, mime: str, payload: bytes) -> list[str]:
    """Why an embedded table is not a readable HTML table: not text/html (e.g. raw ``.tex``),
    no `<table>` with cells, or LaTeX markup in its visible text. Empty when it is one."""
    if mime != "text/html":
        return [f"{path} is embedded as {mime or 'an unknown type'}, not as an HTML table"]
    collector = _TableCollector()
    collector.feed(payload.decode("utf-8", errors="replace"))
    collector.close()
    problems = []
    if collector.tables == 0 or collector.cells == 0:
        problems.append(f"{path} holds no <table> with cells")
    text = "".join(collector.text)
    leaked = [marker for marker in LATEX_MARKERS if marker in text]
    if leaked:
        problems.append(f"{path} shows raw LaTeX ({', '.join(leaked)})")
    return problems


def embedded_tables(html_text: str) -> dict[str, str]:
    """Every table artefact of the report (`is_table_artefact`): path -> its HTML text.

    Raises ReportCheckError naming every table that is not an HTML table (`html_table_problems`),
    e.g. a `.tex` file registered with `report(...)`: the report would offer it as a download of
    LaTeX source instead of showing it.
    """
    results = report_results(html_text)
    tables, problems = {}, []
    for path, entry in sorted(results.items()):
        if not is_table_artefact(path):
            continue
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
