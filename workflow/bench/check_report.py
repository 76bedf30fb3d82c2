"""Check the Snakemake HTML report headlessly: every artefact present, and it renders.

    python workflow/bench/check_report.py [--build] [--report figures/report.html]
                                          [--screenshot figures/report_screenshot.png]
                                          [--target all] [--chromium chromium]

--build first runs `snakemake --report <report>` (the workflow's outputs must exist:
`snakemake --cores 2 all`). The check then (1) derives the expected artefacts from the DAG of
`--target` and the report(...) declarations in workflow/rules/*.smk, (2) compares them with
the files embedded in the report (and their bytes with the files on disk), and (3) renders the
report in headless Chromium: the menu, every category's table after a click, and a screenshot
of the front page; and (4) checks that every table artefact (file name table*) is embedded as HTML
and renders in Chromium as a <table> with rows and cells, not as raw LaTeX source. Exit status 0
when everything is there, 1 on a failed check, 2 when Chromium is missing (Debian/Ubuntu: `apt-get install chromium`).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# report_check and report_render sit beside this file (workflow tooling, not the slim package).
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_check import (  # noqa: E402
    ReportCheckError,
    check_report_contents,
    embedded_tables,
    expected_report_artefacts,
)
from report_render import render_report, render_tables  # noqa: E402


def _shown(path: Path) -> str:
    """The path relative to the repository when it lies inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", default="figures/report.html", help="report path, relative to the repository")
    parser.add_argument("--screenshot", default="figures/report_screenshot.png", help="PNG of the front page")
    parser.add_argument("--target", default="all", help="the rule whose DAG defines the expected artefacts")
    parser.add_argument("--chromium", default="chromium", help="Chromium binary (name on PATH or path)")
    parser.add_argument("--build", action="store_true", help="run `snakemake --report REPORT` first")
    arguments = parser.parse_args(argv)

    chromium = shutil.which(arguments.chromium)
    if chromium is None:
        print(
            f"error: {arguments.chromium!r} is not installed or not on PATH. Install Chromium "
            "(Debian/Ubuntu: `apt-get install chromium`) or pass --chromium /path/to/chromium.",
            file=sys.stderr,
        )
        return 2
    report = REPO / arguments.report
    screenshot = REPO / arguments.screenshot
    start = time.perf_counter()
    if arguments.build:
        completed = subprocess.run(["snakemake", "--report", str(report)], cwd=REPO, check=False)
        if completed.returncode != 0:
            print(f"error: `snakemake --report {report}` failed (exit {completed.returncode})", file=sys.stderr)
            return 1
    if not report.is_file():
        print(f"error: {report} does not exist; build it with --build", file=sys.stderr)
        return 1
    checked = time.perf_counter()
    try:
        expected = expected_report_artefacts(REPO, target=arguments.target)
        contents = check_report_contents(report.read_text(encoding="utf-8"), expected, workdir=REPO)
        rendered = render_report(report, screenshot, chromium=chromium)
        tables = render_tables(embedded_tables(report.read_text(encoding="utf-8")), chromium=chromium)
    except ReportCheckError as error:
        print(f"report check FAILED for {report}:\n  {error}", file=sys.stderr)
        return 1
    finished = time.perf_counter()

    print(f"report: {_shown(report)} ({report.stat().st_size / 1e6:.1f} MB)")
    print(
        f"embedded: {len(contents.embedded)} artefacts in {len(contents.categories)} categories; "
        f"all {len(contents.expected)} expected from `{arguments.target}` present, none empty or stale"
    )
    for category in sorted(contents.categories):
        paths = [path for sub in contents.categories[category].values() for path in sub]
        print(f"  {category}: {len(paths)}")
    if contents.unexpected:
        print("embedded but not expected (informational): " + ", ".join(contents.unexpected))
    print(f"rendered: {rendered.chromium_version}; menu {', '.join(rendered.menu_labels)}")
    print(f"tables: all {len(tables)} embedded as HTML and rendered as <table> elements, no LaTeX source: "
          + ", ".join(f"{path} ({table.rows} rows)" for path, table in sorted(tables.items())))
    print(
        f"screenshot: {_shown(screenshot)} ({rendered.screenshot_size_px[0]}x"
        f"{rendered.screenshot_size_px[1]} px, {rendered.screenshot_distinct_colours} colours)"
    )
    build_note = f", build {checked - start:.1f} s" if arguments.build else ""
    print(f"time: check {finished - checked:.1f} s (render {rendered.elapsed_s:.1f} s){build_note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
