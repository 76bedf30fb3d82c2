"""The headless check of the Snakemake HTML report: every artefact the workflow declares with
`report(...)` is embedded, byte for byte, and the page really renders in headless Chromium."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from report_data import ReportCheckError, check_report_contents, embedded_tables
from report_declared import expected_report_artefacts
from report_render import BrowserUnavailableError, check_playwright, find_chromium, render_report, render_tables

USAGE = """Run from the repository root. The expected artefacts come from the workflow, not from the disk:
every file of the target's DAG flagged with `report(...)`, as Snakemake resolves it, so a figure never
built, or built but left out of the report, is named as missing. Headless Chromium (Debian's
`chromium`, driven by the Python package playwright) then shows what a reader sees: clicking each
category lists all its artefacts, every table lays out as a `<table>` with no LaTeX in sight, and the
front page's screenshot is not blank. Exit status 0 when everything is there, 1 on a failed check,
2 when Chromium or playwright is missing."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python workflow/tools/report_check.py", description=__doc__,
                                     epilog=USAGE)
    parser.add_argument("--report", type=Path, default=Path("figures/report.html"))
    parser.add_argument("--screenshot", type=Path, default=Path("figures/report_screenshot.png"),
                        help="PNG of the front page")
    parser.add_argument("--target", default="all", help="the rule whose DAG defines the expected artefacts")
    parser.add_argument("--chromium", default=None,
                        help="Chromium binary (a name on PATH or a path; default: chromium or chromium-browser)")
    parser.add_argument("--build", action="store_true", help="run `snakemake --report REPORT` first")
    args = parser.parse_args(argv)
    try:
        chromium = find_chromium(args.chromium)
        check_playwright()
    except BrowserUnavailableError as error:
        print(f"error: {error}", file=sys.stderr)
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
        rendered = render_report(args.report, args.screenshot, chromium=chromium)
        tables = render_tables(embedded_tables(html_text), chromium=chromium)
    except ReportCheckError as error:
        print(f"report check FAILED for {args.report}:\n  {error}", file=sys.stderr)
        return 1
    print(f"{args.report}: all {len(contents.expected)} artefacts expected from `{args.target}` embedded, none empty "
          f"or stale, in {len(contents.categories)} categories: "
          + ", ".join(f"{name} {sum(map(len, subs.values()))}" for name, subs in sorted(contents.categories.items())))
    if contents.unexpected:
        print("embedded but not expected (informational): " + ", ".join(contents.unexpected))
    print(f"rendered in {chromium}: menu {', '.join(rendered.menu_labels)}; every category lists its artefacts")
    print(f"tables: all {len(tables)} render as <table> elements, no LaTeX source: "
          + ", ".join(f"{path} ({table.rows} rows)" for path, table in sorted(tables.items())))
    print(f"screenshot: {args.screenshot} ({rendered.screenshot_size_px[0]}x{rendered.screenshot_size_px[1]} px, "
          f"{rendered.screenshot_distinct_colours} colours)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
