"""What a reader of the report sees, in headless Chromium driven by Playwright: the menu, what each
category lists when clicked, the front page's screenshot, and every table laid out as a `<table>`."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from report_data import ReportCheckError, latex_in, report_categories, report_results, result_label

CHROMIUM_NAMES = ("chromium", "chromium-browser")
"""The Debian (and Ubuntu) names of the Chromium binary, looked up on PATH in this order."""

CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",  # root inside containers and CI has no user namespace for the sandbox
    "--disable-gpu",
    "--disable-dev-shm-usage",  # a container's small /dev/shm crashes the renderer on large pages
    # A closed network refuses Chromium's own connections (updates, sync, QUIC probes) many at a time.
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

REPORT_VIEWPORT = {"width": 1400, "height": 1000}
"""The window the report is shown in, and so the size of its screenshot."""
TABLE_VIEWPORT = {"width": 1200, "height": 400}

# The Snakemake report's React app: the menu's entries are `<a>` elements with a `<span>` label in its
# `<nav>`; a category lists its results as a table there; the breadcrumbs' first link goes home.
_MENU_LABELS = "#app nav a span"
_LISTED_CELLS = "#app nav table tbody td"
_HOME = "#app nav ol li a"

# A table page's layout once loaded: its <table> count, the first table's height, rows and cells, and
# the page's visible text.
_MEASURE_TABLE = """() => {
  const tables = Array.from(document.querySelectorAll("table"));
  const first = tables[0];
  return {
    tables: tables.length,
    height: first ? first.getBoundingClientRect().height : 0,
    rows: first ? first.querySelectorAll("tr").length : 0,
    cells: first ? first.querySelectorAll("td").length : 0,
    text: document.body ? document.body.innerText : "",
  };
}"""


class BrowserUnavailableError(ReportCheckError):
    """Chromium is not installed, or the Python package playwright that drives it is not."""


def find_chromium(chromium: str | None = None) -> str:
    """The path of the Chromium binary: `chromium` (a name on PATH or a path), else the first of
    `CHROMIUM_NAMES` on PATH. Raises BrowserUnavailableError saying how to install it."""
    names = (chromium,) if chromium else CHROMIUM_NAMES
    for name in names:
        if found := shutil.which(name):
            return found
    raise BrowserUnavailableError(f"{' or '.join(map(repr, names))} is not on PATH: install Chromium (Debian/Ubuntu: "
                                  "`apt-get install chromium`) or pass the browser's path")


def check_playwright() -> None:
    """Raises BrowserUnavailableError when the Python package playwright is not installed. Its own
    browser downloads are never used (`playwright install` is not needed): it drives Debian's Chromium."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as error:
        raise BrowserUnavailableError("the Python package playwright is not installed: `pip install playwright` "
                                      "(or the test extra, `pip install -e '.[test]'`)") from error


@contextmanager
def chromium_page(chromium: str | None, viewport: Mapping[str, int], timeout_s: float) -> Iterator:
    """A fresh page of headless Chromium (`find_chromium(chromium)`) with `viewport`, whose waits give up
    after `timeout_s`; the browser is closed on exit."""
    executable = find_chromium(chromium)
    check_playwright()
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=executable, args=list(CHROMIUM_ARGS), headless=True)
        except PlaywrightError as error:
            raise ReportCheckError(f"Playwright could not start {executable}: {error}") from error
        try:
            page = browser.new_page(viewport=dict(viewport))
            page.set_default_timeout(timeout_s * 1000)
            yield page
        except PlaywrightError as error:  # a wait this check does not expect to fail, or a crash
            raise ReportCheckError(f"headless Chromium ({executable}) failed: {error}") from error
        finally:
            browser.close()


def distinct_colours(png_path: Path) -> tuple[tuple[int, int], int]:
    """(width, height) of a PNG and its number of distinct RGB colours."""
    import numpy as np
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


def _click_menu_entry(page, label: str) -> None:
    """Click the menu entry labelled exactly `label` (waiting until it is shown and clickable)."""
    page.locator(_MENU_LABELS).filter(has_text=re.compile(rf"^\s*{re.escape(label)}\s*$")).first.click()


def _listed_after_clicking(page, category: str, subcategories: list[str], single_category: bool,
                           problems: list[str]) -> tuple[str, ...]:
    """The cells of the results table(s) the app lists for `category`, clicked from the front page as a
    reader would (through each subcategory when there are several); what fails goes to `problems`."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    cells: list[str] = []
    for subcategory in subcategories:
        labels = ["Results" if single_category else category, *([subcategory] if len(subcategories) > 1 else [])]
        try:
            if page.locator(_HOME).count():
                page.locator(_HOME).first.click()
            for label in labels:
                _click_menu_entry(page, label)
            page.locator(_LISTED_CELLS).first.wait_for(state="visible")
        except PlaywrightTimeoutError:
            problems.append(f"no menu entry or results table after clicking {' > '.join(map(repr, labels))}")
            continue
        cells += [text.strip() for text in page.locator(_LISTED_CELLS).all_inner_texts()]
    return tuple(cells)


def render_report(html_path: Path, screenshot_path: Path, chromium: str | None = None,
                  timeout_s: float = 30.0) -> RenderResult:
    """Render the report in headless Chromium and check that the app, not a blank page, shows: the
    menu lists every category; clicking each lists every artefact of it; the front page's screenshot
    has more than one colour. Each step waits for the page (network idle, the menu, the results table)
    at most `timeout_s`. Raises ReportCheckError listing everything that is missing."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

    html_path, screenshot_path = Path(html_path), Path(screenshot_path)
    screenshot_path.parent.mkdir(parents=True, exist_ok=True)
    screenshot_path.unlink(missing_ok=True)
    html_text = html_path.read_text(encoding="utf-8")
    results, categories = report_results(html_text), report_categories(html_text)
    problems: list[str] = []
    with chromium_page(chromium, REPORT_VIEWPORT, timeout_s) as page:
        page.goto(html_path.resolve().as_uri(), wait_until="networkidle")
        try:
            page.locator(_MENU_LABELS).first.wait_for(state="visible")
        except PlaywrightTimeoutError:
            problems.append(f"the app showed no menu within {timeout_s:g} s")
        page.screenshot(path=str(screenshot_path))
        menu = tuple(text.strip() for text in page.locator(_MENU_LABELS).all_inner_texts())
        rendered = {category: _listed_after_clicking(page, category, sorted(subcategories),
                                                     len(categories) == 1, problems)
                    for category, subcategories in categories.items()} if menu else {}
    menu_expected = ["Results"] if len(categories) == 1 else sorted(categories)
    problems += [f"menu entry {label!r} not rendered" for label in menu_expected if label not in menu]
    problems += [f"{path} not listed after clicking category {category!r}"
                 for category, subcategories in categories.items() for paths in subcategories.values()
                 for path in paths if result_label(path, results.get(path, {})) not in rendered.get(category, ())]
    size, colours = distinct_colours(screenshot_path)
    if colours < 2:
        problems.append(f"screenshot {screenshot_path} is blank (one colour)")
    if problems:
        raise ReportCheckError("the report does not render completely in headless Chromium: " + "; ".join(problems))
    return RenderResult(menu, rendered, size, colours)


@dataclass(frozen=True)
class RenderedTable:
    """What headless Chromium laid out for one table page: its height in px, rows and body cells."""

    path: str
    height_px: float
    rows: int
    cells: int


def render_tables(tables: Mapping[str, str], chromium: str | None = None,
                  timeout_s: float = 30.0) -> dict[str, RenderedTable]:
    """Lay out every table page (path -> HTML, `embedded_tables`) in one headless Chromium, each once
    loaded, and check each shows as a table: a `<table>` with a non-zero height, rows and cells, and no
    LaTeX in the visible text. Raises ReportCheckError naming every table that fails."""
    rendered, problems = {}, []
    with chromium_page(chromium, TABLE_VIEWPORT, timeout_s) as page:
        for path, table_page in sorted(tables.items()):
            page.set_content(table_page, wait_until="load")
            entry = page.evaluate(_MEASURE_TABLE)
            if entry["tables"] == 0 or entry["height"] <= 0 or entry["cells"] == 0:
                problems.append(f"{path} renders no table ({entry['tables']} tables, {entry['cells']} cells, "
                                f"{entry['height']:.0f} px high)")
            elif leaked := latex_in(str(entry["text"])):
                problems.append(f"{path} renders raw LaTeX ({', '.join(leaked)})")
            else:
                rendered[path] = RenderedTable(path, float(entry["height"]), int(entry["rows"]), int(entry["cells"]))
    if problems:
        raise ReportCheckError("tables do not render as HTML tables in Chromium: " + "; ".join(problems))
    return rendered
