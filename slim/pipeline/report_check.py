"""The headless check of the Snakemake HTML report: every artefact the workflow declares with
`report(...)` is embedded, byte for byte, and the page really renders in headless Chromium.

    python -m slim.pipeline.report_check [--build] [--report figures/report.html]
                                         [--screenshot figures/report_screenshot.png] [--target all]

Snakemake 9 writes `snakemake --report x.html` as one self-contained page: a React app plus two
JSON objects, `<script id="results">var results = {...};</script>` (path -> name, caption,
`data_uri` with the file's bytes in base64) and `<script id="categories">` (category ->
subcategory -> paths). Those blocks are the report's data interface, read here with the standard
HTML parser. The expected artefacts come from the workflow, not from the disk: the outputs of the
target's DAG (`snakemake --summary`) that match a `report(...)` declaration of the rule writing
them, so a figure never built, or built but left out of the report, is named as missing. Every
table artefact (file name ``table*``) must be embedded as HTML, not as LaTeX source.

Headless Chromium (`apt-get install chromium`) then shows what a reader sees. Headless Chromium
clicks nothing by itself, so a driver script appended to a copy of the page does: it clicks every
category (and subcategory) of the menu and records the files the app lists. A screenshot of the
front page must not be blank, and every embedded table must lay out as a `<table>` with rows and
cells and no LaTeX in its visible text. Exit status 0 when everything is there, 1 on a failed
check, 2 when Chromium is missing.
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote_to_bytes

import numpy as np

from slim.errors import SlimError

_REPORT_CALL = re.compile(r"\breport\(")
#: The output pattern of a `report(...)` flag: a string literal, or an f-string whose fields (a loop
#: variable of a rule defined per dataset) stand for one path component.
_REPORT_LITERAL = re.compile(r"""\breport\(\s*f?(['"])(?P<pattern>.+?)\1""", re.DOTALL)
#: `rule NAME:`, or `rule:` of a rule defined in a loop (its name is computed: `name:`).
_RULE_HEADER = re.compile(r"^[ \t]*(?:rule|checkpoint)(?:[ \t]+(\w+))?[ \t]*:", re.MULTILINE)
_WILDCARD = re.compile(r"\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:,(?P<regex>[^{}]+))?\}")

LATEX_MARKERS = ("\\begin{", "\\end{", "\\toprule", "\\midrule", "\\bottomrule", "\\\\", "\\%", "\\emph")
"""LaTeX that a table rendered for readers must not show (booktabs rules, environments, escapes)."""


class ReportCheckError(SlimError):
    """The report misses an artefact, embeds an empty or stale one, or does not render."""


# --- what the workflow declares --------------------------------------------------------------

@dataclass(frozen=True, order=True)
class ReportDeclaration:
    """One `report(...)`-flagged output: the rule that writes it ("" for a rule defined in a loop,
    whose name is computed: any rule) and its output pattern."""

    rule: str
    pattern: str


def report_patterns(rule_files: Iterable[Path]) -> list[ReportDeclaration]:
    """Output patterns flagged with `report(...)` in Snakemake rule files, each with its rule (the
    nearest `rule NAME:` above it). A `report(` call whose first argument is not a string literal,
    or that sits outside a rule, is an error: an artefact this parser cannot read is never skipped."""
    declarations: set[ReportDeclaration] = set()
    for rule_file in rule_files:
        text = Path(rule_file).read_text()
        rule_starts = [(m.start(), m.group(1)) for m in _RULE_HEADER.finditer(text)]
        for call in _REPORT_CALL.finditer(text):
            match = _REPORT_LITERAL.match(text, call.start())
            rules_above = [name for start, name in rule_starts if start < call.start()]
            if match is None or not rules_above:
                line = text.count("\n", 0, call.start()) + 1
                raise ReportCheckError(f"{rule_file}:{line}: report(...) is not a string literal inside a rule's "
                                       "output; write the output path as a literal so the report check can expect it")
            declarations.add(ReportDeclaration(rule=rules_above[-1] or "", pattern=match.group("pattern")))
    return sorted(declarations)


def pattern_regex(pattern: str) -> re.Pattern[str]:
    """A regex matching the paths a Snakemake output pattern can produce: `{name}` is one path
    component (`[^/]+`), `{name,regex}` its own regex; the rest is literal."""
    parts, position = [], 0
    for wildcard in _WILDCARD.finditer(pattern):
        parts.append(re.escape(pattern[position:wildcard.start()]))
        parts.append(f"(?:{wildcard.group('regex')})" if wildcard.group("regex") else "[^/]+")
        position = wildcard.end()
    parts.append(re.escape(pattern[position:]))
    return re.compile("".join(parts) + r"\Z")


def parse_summary(summary_text: str) -> list[tuple[str, str]]:
    """(output file, rule) pairs listed by `snakemake --summary` (tab-separated, header
    `output_file  date  rule ...`)."""
    lines = [line for line in summary_text.splitlines() if line.strip()]
    header = next((i for i, line in enumerate(lines) if line.startswith("output_file\t")), None)
    if header is None:
        raise ReportCheckError("`snakemake --summary` printed no 'output_file' header; cannot list the DAG's outputs")
    rule_column = lines[header].split("\t").index("rule")
    return [(row[0], row[rule_column]) for row in (line.split("\t") for line in lines[header + 1:])]


def select_report_artefacts(outputs: Iterable[tuple[str, str]],
                            declarations: Iterable[ReportDeclaration]) -> list[str]:
    """The output files whose own rule flags a pattern they match with `report(...)`, sorted."""
    regexes = [(declaration.rule, pattern_regex(declaration.pattern)) for declaration in declarations]
    return sorted({path for path, rule in outputs if any(r in ("", rule) and rx.match(path) for r, rx in regexes)})


def expected_report_artefacts(workdir: Path, target: str = "all", rule_files: Sequence[Path] | None = None,
                              snakemake: str = "snakemake") -> list[str]:
    """The files the report must embed: every output of `target`'s DAG, built or not (`snakemake
    --summary`), that matches a `report(...)` declaration of its rule in `rule_files` (default
    workflow/rules/*.smk)."""
    workdir = Path(workdir)
    files = rule_files if rule_files is not None else sorted((workdir / "workflow" / "rules").glob("*.smk"))
    declarations = report_patterns(files)
    if not declarations:
        raise ReportCheckError(f"no report(...) declarations found in {[str(f) for f in files]}")
    completed = subprocess.run([snakemake, "--summary", target], cwd=workdir, capture_output=True, text=True)
    if completed.returncode != 0:
        raise ReportCheckError(f"`snakemake --summary {target}` failed in {workdir} (exit {completed.returncode}):\n"
                               f"{completed.stderr[-2000:]}")
    return select_report_artefacts(parse_summary(completed.stdout), declarations)


# --- what the report embeds ------------------------------------------------------------------

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


def is_table_artefact(path: str) -> bool:
    """Tables are the artefacts whose file name starts with ``table`` (table3.html, table_fig11.html, ...)."""
    return Path(path).name.startswith("table")


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


def _latex_in(text: str) -> list[str]:
    return [marker for marker in LATEX_MARKERS if marker in text]


def html_table_problems(path: str, mime: str, payload: bytes) -> list[str]:
    """Why an embedded table is not a readable HTML table: not text/html (e.g. raw ``.tex``), no
    `<table>` with cells, or LaTeX in its visible text. Empty when it is one."""
    if mime != "text/html":
        return [f"{path} is embedded as {mime or 'an unknown type'}, not as an HTML table"]
    collector = _TableCollector()
    collector.feed(payload.decode("utf-8", errors="replace"))
    collector.close()
    problems = [f"{path} holds no <table> with cells"] if collector.tables == 0 or collector.cells == 0 else []
    leaked = _latex_in("".join(collector.text))
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


# --- what a reader sees: headless Chromium ---------------------------------------------------

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # root inside containers/CI has no user namespace for the sandbox
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--no-first-run",
    "--hide-scrollbars",
)
_DRIVER_OUTPUT_ID = "slim-report-check"


def _driver(body: str, seen: str) -> str:
    """A script that runs `body` (async, with `sleep`), filling `seen`, then writes `seen` as JSON into a
    `<pre>` that Chromium's `--dump-dom` returns."""
    return f"""
<script>
(async function () {{
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const seen = {seen};
{body}
  const out = document.createElement("pre");
  out.id = "{_DRIVER_OUTPUT_ID}";
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
}})();
</script>
"""


# After the app has rendered, record the menu, then click every category (and subcategory) as a
# reader would and record the listed paths.
_MENU_DRIVER = _driver("""
  const nav = () => document.querySelector("#app nav");
  function clickLabel(label) {
    const span = Array.from(nav().querySelectorAll("a span")).find((s) => s.textContent.trim() === label);
    if (!span) { seen.errors.push("no menu entry " + JSON.stringify(label)); return false; }
    span.closest("a").click();
    return true;
  }
  function home() { const link = nav().querySelector("ol li a"); if (link) link.click(); }
  try {
    for (let i = 0; i < 100 && !(nav() && nav().querySelector("a span")); i++) await sleep(50);
    await sleep(200);
    seen.menu = Array.from(nav().querySelectorAll("a span")).map((s) => s.textContent.trim());
    const names = Object.keys(categories);
    for (const category of names) {
      const cells = [];
      const subcategories = Object.keys(categories[category]);
      for (const subcategory of subcategories) {
        home(); await sleep(100);
        if (!clickLabel(names.length === 1 ? "Results" : category)) continue;
        await sleep(100);
        if (subcategories.length > 1) {
          if (!clickLabel(subcategory)) continue;
          await sleep(100);
        }
        cells.push(...Array.from(nav().querySelectorAll("table tbody td")).map((td) => td.textContent.trim()));
      }
      seen.categories[category] = cells;
    }
  } catch (error) {
    seen.errors.push(String(error));
  }""", "{ menu: [], categories: {}, errors: [] }")

# Every table in a same-origin `srcdoc` iframe (a data: URI iframe, as the report itself uses, is
# cross-origin and cannot be inspected): after layout, its <table> count, first table's height,
# rows and cells, and its visible text.
_TABLES_DRIVER = _driver("""
  await sleep(300);
  for (const frame of document.querySelectorAll("iframe[data-path]")) {
    for (let i = 0; i < 50 && !(frame.contentDocument && frame.contentDocument.readyState === "complete"); i++) {
      await sleep(50);
    }
    const doc = frame.contentDocument;
    const tables = doc ? Array.from(doc.querySelectorAll("table")) : [];
    seen[frame.dataset.path] = {
      tables: tables.length,
      height: tables.length ? tables[0].getBoundingClientRect().height : 0,
      rows: tables.length ? tables[0].querySelectorAll("tr").length : 0,
      cells: tables.length ? tables[0].querySelectorAll("td").length : 0,
      text: doc && doc.body ? doc.body.innerText : "",
    };
  }""", "{}")


def _chromium(chromium: str, arguments: Sequence[str], page: Path, timeout_s: float = 120.0) -> str:
    """Chromium's stdout for `page` with `arguments` (and a throwaway profile)."""
    if shutil.which(chromium) is None:
        raise ReportCheckError(f"{chromium!r} is not on PATH: install it (Debian/Ubuntu: `apt-get install chromium`) "
                               "or pass the browser's path")
    with tempfile.TemporaryDirectory(prefix="slim-chromium-") as profile:
        command = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=10000",
                   *arguments, page.resolve().as_uri()]
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s).stdout
        except subprocess.TimeoutExpired as error:
            raise ReportCheckError(f"Chromium did not finish within {timeout_s:.0f} s on {page}") from error


def _driven(chromium: str, page_text: str, driver: str) -> dict:
    """What `driver`, appended to `page_text` before ``</body>``, recorded in headless Chromium."""
    body_end = page_text.rfind("</body>")
    if body_end < 0:
        raise ReportCheckError("the page has no </body>: not an HTML report")
    with tempfile.TemporaryDirectory(prefix="slim-report-") as scratch:
        page = Path(scratch) / "page.html"
        page.write_text(page_text[:body_end] + driver + page_text[body_end:], encoding="utf-8")
        dom = _chromium(chromium, ["--window-size=1400,1000", "--dump-dom"], page)
    match = re.search(rf'<pre id="{_DRIVER_OUTPUT_ID}">(?P<json>.*?)</pre>', dom, re.DOTALL)
    if match is None:
        raise ReportCheckError("the page did not finish rendering in headless Chromium (the check's driver wrote "
                               "nothing); raise the virtual time budget or open the report by hand")
    return json.loads(html.unescape(match.group("json")))


def distinct_colours(png_path: Path) -> tuple[tuple[int, int], int]:
    """(width, height) of a PNG and its number of distinct RGB colours."""
    from matplotlib import image

    pixels = image.imread(str(png_path))
    if pixels.dtype != np.uint8:  # matplotlib reads PNGs as floats in [0, 1]
        pixels = np.round(pixels * 255).astype(np.uint32)
    rgb = pixels[..., :3].astype(np.uint32)
    return (int(pixels.shape[1]), int(pixels.shape[0])), int(np.unique((rgb[..., 0] << 16) | (rgb[..., 1] << 8)
                                                                       | rgb[..., 2]).size)


@dataclass(frozen=True)
class RenderResult:
    """What headless Chromium showed: the menu's labels, the files listed in each category after
    clicking it, and the front page's screenshot size and number of distinct colours."""

    menu_labels: tuple[str, ...]
    rendered_paths_by_category: Mapping[str, tuple[str, ...]]
    screenshot_size_px: tuple[int, int]
    screenshot_distinct_colours: int


def _result_label(path: str, entry: Mapping[str, object]) -> str:
    """What a category's table shows for a result: its first label if labelled, else its path."""
    labels = entry.get("labels")
    return str(next(iter(labels.values()))) if isinstance(labels, dict) and labels else path


def render_report(html_path: Path, screenshot_path: Path, chromium: str = "chromium") -> RenderResult:
    """Render the report in headless Chromium and check that the app, not a blank page, shows: the
    menu lists every category; clicking each lists every artefact of it; the front page's screenshot
    has more than one colour. Raises ReportCheckError listing everything that is missing."""
    html_path, screenshot_path = Path(html_path), Path(screenshot_path)
    screenshot_path.parent.mkdir(parents=True, exist_ok=True)
    screenshot_path.unlink(missing_ok=True)
    _chromium(chromium, ["--window-size=1400,1000", f"--screenshot={screenshot_path.resolve()}"], html_path)
    if not screenshot_path.is_file():
        raise ReportCheckError(f"Chromium wrote no screenshot of {html_path}")
    html_text = html_path.read_text(encoding="utf-8")
    results, categories = report_results(html_text), report_categories(html_text)
    seen = _driven(chromium, html_text, _MENU_DRIVER)
    menu = tuple(str(label) for label in seen.get("menu", []))
    rendered = {category: tuple(cells) for category, cells in dict(seen.get("categories", {})).items()}
    problems = [f"driver: {error}" for error in seen.get("errors", [])]
    menu_expected = ["Results"] if len(categories) == 1 else sorted(categories)
    problems += [f"menu entry {label!r} not rendered" for label in menu_expected if label not in menu]
    problems += [f"{path} not listed after clicking category {category!r}"
                 for category, subcategories in categories.items() for paths in subcategories.values()
                 for path in paths if _result_label(path, results.get(path, {})) not in rendered.get(category, ())]
    size, colours = distinct_colours(screenshot_path)
    if colours < 2:
        problems.append(f"screenshot {screenshot_path} is blank (one colour)")
    if problems:
        raise ReportCheckError(f"the report does not render completely in {chromium}: " + "; ".join(problems))
    return RenderResult(menu, rendered, size, colours)


@dataclass(frozen=True)
class RenderedTable:
    """What headless Chromium laid out for one table page: its height in px, rows and body cells."""

    path: str
    height_px: float
    rows: int
    cells: int


def render_tables(tables: Mapping[str, str], chromium: str = "chromium") -> dict[str, RenderedTable]:
    """Lay out every table page (path -> HTML, `embedded_tables`) in one headless Chromium run and
    check each shows as a table: a `<table>` with a non-zero height, rows and cells, and no LaTeX in
    the visible text. Raises ReportCheckError naming every table that fails."""
    frames = "\n".join(f'<iframe data-path="{html.escape(path)}" srcdoc="{html.escape(page)}" width="1200" '
                       'height="400"></iframe>' for path, page in sorted(tables.items()))
    seen = _driven(chromium, f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>{frames}</body></html>',
                   _TABLES_DRIVER)
    rendered, problems = {}, []
    for path in sorted(tables):
        entry = seen.get(path)
        if not isinstance(entry, dict):
            problems.append(f"{path} was not rendered")
        elif int(entry["tables"]) == 0 or float(entry["height"]) <= 0 or int(entry["cells"]) == 0:
            problems.append(f"{path} renders no table ({entry['tables']} tables, {entry['cells']} cells, "
                            f"{entry['height']:.0f} px high)")
        elif leaked := _latex_in(str(entry.get("text", ""))):
            problems.append(f"{path} renders raw LaTeX ({', '.join(leaked)})")
        else:
            rendered[path] = RenderedTable(path, float(entry["height"]), int(entry["rows"]), int(entry["cells"]))
    if problems:
        raise ReportCheckError("tables do not render as HTML tables in Chromium: " + "; ".join(problems))
    return rendered


# --- command line ----------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m slim.pipeline.report_check", description=__doc__.split("\n")[0])
    parser.add_argument("--report", type=Path, default=Path("figures/report.html"))
    parser.add_argument("--screenshot", type=Path, default=Path("figures/report_screenshot.png"),
                        help="PNG of the front page")
    parser.add_argument("--target", default="all", help="the rule whose DAG defines the expected artefacts")
    parser.add_argument("--chromium", default="chromium", help="Chromium binary (name on PATH or path)")
    parser.add_argument("--build", action="store_true", help="run `snakemake --report REPORT` first")
    args = parser.parse_args(argv)
    if shutil.which(args.chromium) is None:
        print(f"error: {args.chromium!r} is not on PATH; install Chromium (Debian/Ubuntu: `apt-get install "
              "chromium`) or pass --chromium /path/to/chromium", file=sys.stderr)
        return 2
    if args.build and subprocess.run(["snakemake", "--report", str(args.report)]).returncode != 0:
        print(f"error: `snakemake --report {args.report}` failed", file=sys.stderr)
        return 1
    if not args.report.is_file():
        print(f"error: {args.report} does not exist; build it with --build", file=sys.stderr)
        return 1
    html_text = args.report.read_text(encoding="utf-8")
    try:
        contents = check_report_contents(html_text, expected_report_artefacts(Path.cwd(), args.target), Path.cwd())
        rendered = render_report(args.report, args.screenshot, chromium=args.chromium)
        tables = render_tables(embedded_tables(html_text), chromium=args.chromium)
    except ReportCheckError as error:
        print(f"report check FAILED for {args.report}:\n  {error}", file=sys.stderr)
        return 1
    print(f"{args.report}: all {len(contents.expected)} artefacts expected from `{args.target}` embedded, none empty "
          f"or stale, in {len(contents.categories)} categories: "
          + ", ".join(f"{name} {sum(map(len, subs.values()))}" for name, subs in sorted(contents.categories.items())))
    if contents.unexpected:
        print("embedded but not expected (informational): " + ", ".join(contents.unexpected))
    print(f"rendered in {args.chromium}: menu {', '.join(rendered.menu_labels)}; every category lists its artefacts")
    print(f"tables: all {len(tables)} render as <table> elements, no LaTeX source: "
          + ", ".join(f"{path} ({table.rows} rows)" for path, table in sorted(tables.items())))
    print(f"screenshot: {args.screenshot} ({rendered.screenshot_size_px[0]}x{rendered.screenshot_size_px[1]} px, "
          f"{rendered.screenshot_distinct_colours} colours)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
