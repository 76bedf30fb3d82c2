"""Render the Snakemake HTML report in headless Chromium and check the app really shows it.

One Chromium run (`apt-get install chromium`) takes the screenshot of the front page; a second
run loads an instrumented copy of the report whose appended driver script clicks, as a reader
would, each category (and subcategory) in the menu and records the file names listed in the
table that appears. Headless Chromium runs no clicks of its own, so the driver is what lets
the check see inside every category. The embedded data itself is read by `report_check` (beside this file).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from report_check import LATEX_MARKERS, ReportCheckError, report_categories, report_results

#: Where the driver script writes what it saw; read back from Chromium's `--dump-dom`.
_DRIVER_OUTPUT_ID = "slim-report-check"

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # root inside containers/CI has no user namespace for the sandbox
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--no-first-run",
    "--hide-scrollbars",
)


@dataclass(frozen=True)
class RenderResult:
    """What headless Chromium saw: the menu's labels, the paths listed in each category's
    table after clicking it, and the screenshot's size and number of distinct colours."""

    screenshot_path: Path
    chromium_version: str
    menu_labels: tuple[str, ...]
    front_page_text: str
    rendered_paths_by_category: Mapping[str, tuple[str, ...]]
    screenshot_size_px: tuple[int, int]
    screenshot_distinct_colours: int
    elapsed_s: float


# Appended to a copy of the report: after the app has rendered, record the menu and front page,
# then click every category (and subcategory) as a reader would and record the listed paths.
_DRIVER_JS = """
<script>
(async function () {
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const seen = { menu: [], front_page: "", categories: {}, errors: [] };
  const nav = () => document.querySelector("#app nav");
  function clickLabel(label) {
    const spans = Array.from(nav().querySelectorAll("a span"));
    const span = spans.find((s) => s.textContent.trim() === label);
    if (!span) { seen.errors.push("no menu entry " + JSON.stringify(label)); return false; }
    span.closest("a").click();
    return true;
  }
  function home() { const link = nav().querySelector("ol li a"); if (link) link.click(); }
  function tableCells() {
    return Array.from(nav().querySelectorAll("table tbody td")).map((td) => td.textContent.trim());
  }
  try {
    for (let i = 0; i < 100 && !(nav() && nav().querySelector("a span")); i++) await sleep(50);
    await sleep(200);
    seen.menu = Array.from(nav().querySelectorAll("a span")).map((s) => s.textContent.trim());
    const prose = document.querySelector("#app .prose");
    seen.front_page = prose ? prose.textContent.trim() : "";
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
        cells.push(...tableCells());
      }
      seen.categories[category] = cells;
    }
  } catch (error) {
    seen.errors.push(String(error));
  }
  const out = document.createElement("pre");
  out.id = "%s";
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
})();
</script>
""" % _DRIVER_OUTPUT_ID


def chromium_version(chromium: str = "chromium") -> str:
    """`chromium --version`, e.g. 'Chromium 156.0.8078.108 built on Debian GNU/Linux 12'."""
    completed = subprocess.run([chromium, "--version"], capture_output=True, text=True, check=False)
    return completed.stdout.strip()


def _run_chromium(chromium: str, arguments: list[str], url: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory(prefix="slim-chromium-") as profile:
        command = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *arguments, url]
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as error:
            raise ReportCheckError(f"Chromium did not finish within {timeout_s:.0f} s on {url}") from error


def distinct_colours(png_path: Path) -> tuple[tuple[int, int], int]:
    """(width, height) of a PNG and its number of distinct RGB colours."""
    from matplotlib import image

    pixels = image.imread(str(png_path))
    if pixels.dtype != np.uint8:  # matplotlib returns floats in [0, 1] for PNGs
        pixels = np.round(pixels * 255).astype(np.uint32)
    rgb = pixels[..., :3].astype(np.uint32)
    packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
    return (int(pixels.shape[1]), int(pixels.shape[0])), int(np.unique(packed).size)


def _driver_output(dom: str) -> dict[str, object]:
    match = re.search(rf'<pre id="{_DRIVER_OUTPUT_ID}">(?P<json>.*?)</pre>', dom, re.DOTALL)
    if match is None:
        raise ReportCheckError(
            "the report's app did not finish rendering in headless Chromium (the check's driver "
            "wrote nothing); raise the virtual time budget or open the report by hand"
        )
    return json.loads(html.unescape(match.group("json")))


def _result_label(path: str, entry: Mapping[str, object]) -> str:
    """What the category table shows for a result: its first label if labelled, else its path."""
    labels = entry.get("labels")
    if isinstance(labels, dict) and labels:
        return str(next(iter(labels.values())))
    return path


def render_report(
    html_path: Path,
    screenshot_path: Path,
    chromium: str = "chromium",
    virtual_time_budget_ms: int = 10_000,
    window_size: tuple[int, int] = (1400, 1000),
    timeout_s: float = 120.0,
) -> RenderResult:
    """Render the report in headless Chromium and check that the app, not a blank page, shows.

    Checks: the menu lists every category of the embedded data; clicking each category lists
    every artefact of that category; the screenshot of the front page has more than one colour.
    Raises ReportCheckError listing everything that is missing.
    """
    if shutil.which(chromium) is None:
        raise ReportCheckError(
            f"{chromium!r} is not on PATH: install it (Debian/Ubuntu: `apt-get install chromium`) "
            "or pass the browser's path"
        )
    start = time.perf_counter()
    html_path = Path(html_path).resolve()
    screenshot_path = Path(screenshot_path)
    screenshot_path.parent.mkdir(parents=True, exist_ok=True)
    html_text = html_path.read_text(encoding="utf-8")
    results = report_results(html_text)
    categories = report_categories(html_text)
    budget = f"--virtual-time-budget={virtual_time_budget_ms}"
    size = f"--window-size={window_size[0]},{window_size[1]}"

    if screenshot_path.exists():
        screenshot_path.unlink()
    shot = _run_chromium(
        chromium, [budget, size, f"--screenshot={screenshot_path.resolve()}"], html_path.as_uri(), timeout_s
    )
    if not screenshot_path.is_file():
        raise ReportCheckError(f"Chromium wrote no screenshot (exit {shot.returncode}):\n{shot.stderr[-2000:]}")

    with tempfile.TemporaryDirectory(prefix="slim-report-") as scratch:
        instrumented = Path(scratch) / html_path.name
        body_end = html_text.rfind("</body>")
        if body_end < 0:
            raise ReportCheckError(f"{html_path} has no </body>: not an HTML report")
        instrumented.write_text(html_text[:body_end] + _DRIVER_JS + html_text[body_end:], encoding="utf-8")
        dumped = _run_chromium(chromium, [budget, size, "--dump-dom"], instrumented.as_uri(), timeout_s)
    seen = _driver_output(dumped.stdout)

    menu = tuple(str(label) for label in seen.get("menu", []))
    rendered = {category: tuple(cells) for category, cells in dict(seen.get("categories", {})).items()}
    problems: list[str] = [f"driver: {error}" for error in seen.get("errors", [])]
    menu_expected = ["Results"] if len(categories) == 1 else sorted(categories)
    problems += [f"menu entry {label!r} not rendered" for label in menu_expected if label not in menu]
    for category, subcategories in categories.items():
        cells = set(rendered.get(category, ()))
        for paths in subcategories.values():
            for path in paths:
                if _result_label(path, results.get(path, {})) not in cells:
                    problems.append(f"{path} not listed after clicking category {category!r}")
    (width, height), colours = distinct_colours(screenshot_path)
    if colours < 2:
        problems.append(f"screenshot {screenshot_path} is blank (one colour)")
    if problems:
        raise ReportCheckError(f"the report does not render completely in {chromium}: " + "; ".join(problems))
    return RenderResult(
        screenshot_path=screenshot_path,
        chromium_version=chromium_version(chromium),
        menu_labels=menu,
        front_page_text=str(seen.get("front_page", "")),
        rendered_paths_by_category=rendered,
        screenshot_size_px=(width, height),
        screenshot_distinct_colours=colours,
        elapsed_s=time.perf_counter() - start,
    )


# One page holding every table in a same-origin `srcdoc` iframe (a data: URI iframe, as the
# report itself uses, is cross-origin and cannot be inspected): after layout, record per table
# how many <table> elements it has, their rendered size, rows and cells, and its visible text.
_TABLES_DRIVER_JS = """
<script>
(async function () {
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const seen = {};
  await sleep(300);
  for (const frame of document.querySelectorAll("iframe[data-path]")) {
    for (let i = 0; i < 50 && !(frame.contentDocument && frame.contentDocument.readyState === "complete"); i++) {
      await sleep(50);
    }
    const doc = frame.contentDocument;
    const tables = doc ? Array.from(doc.querySelectorAll("table")) : [];
    const box = tables.length ? tables[0].getBoundingClientRect() : { width: 0, height: 0 };
    seen[frame.dataset.path] = {
      tables: tables.length,
      width: box.width, height: box.height,
      rows: tables.length ? tables[0].querySelectorAll("tr").length : 0,
      cells: tables.length ? tables[0].querySelectorAll("td").length : 0,
      text: doc && doc.body ? doc.body.innerText : "",
    };
  }
  const out = document.createElement("pre");
  out.id = "%s";
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
})();
</script>
""" % _DRIVER_OUTPUT_ID


@dataclass(frozen=True)
class RenderedTable:
    """What headless Chromium laid out for one table page: its size in px, rows and body cells."""

    path: str
    width_px: float
    height_px: float
    rows: int
    cells: int


def render_tables(
    tables: Mapping[str, str],
    chromium: str = "chromium",
    virtual_time_budget_ms: int = 10_000,
    timeout_s: float = 120.0,
) -> dict[str, RenderedTable]:
    """Lay out every table page (path -> HTML, `report_check.embedded_tables`) in one headless
    Chromium run and check each shows as a table: one or more `<table>` elements with a non-zero
    rendered size, rows and cells, and no LaTeX markup in the visible text. Raises
    ReportCheckError naming every table that fails."""
    frames = "\n".join(
        f'<iframe data-path="{html.escape(path)}" srcdoc="{html.escape(page)}" width="1200" height="400"></iframe>'
        for path, page in sorted(tables.items())
    )
    page = f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body>{frames}{_TABLES_DRIVER_JS}</body></html>"
    with tempfile.TemporaryDirectory(prefix="slim-tables-") as scratch:
        gallery = Path(scratch) / "tables.html"
        gallery.write_text(page, encoding="utf-8")
        dumped = _run_chromium(chromium, [f"--virtual-time-budget={virtual_time_budget_ms}", "--dump-dom"],
                               gallery.as_uri(), timeout_s)
    seen = _driver_output(dumped.stdout)
    rendered, problems = {}, []
    for path in sorted(tables):
        entry = seen.get(path)
        if not isinstance(entry, dict):
            problems.append(f"{path} was not rendered")
            continue
        leaked = [marker for marker in LATEX_MARKERS if marker in str(entry.get("text", ""))]
        if int(entry["tables"]) == 0 or float(entry["height"]) <= 0 or int(entry["cells"]) == 0:
            problems.append(f"{path} renders no table ({entry['tables']} tables, {entry['cells']} cells, "
                            f"{entry['height']:.0f} px high)")
        elif leaked:
            problems.append(f"{path} renders raw LaTeX ({', '.join(leaked)})")
        else:
            rendered[path] = RenderedTable(path, float(entry["width"]), float(entry["height"]), int(entry["rows"]),
                                           int(entry["cells"]))
    if problems:
        raise ReportCheckError("tables do not render as HTML tables in Chromium: " + "; ".join(problems))
    return rendered
