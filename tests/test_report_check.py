"""Tests of the report check (workflow/tools/report_check.py and its modules) on a real (tiny) Snakemake
report built in a temporary folder; the browser tests skip when Chromium or playwright is missing."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

TOOLS = Path(__file__).resolve().parents[1] / "workflow" / "tools"
if str(TOOLS) not in sys.path:
    sys.path.insert(0, str(TOOLS))

from report_check import main  # noqa: E402
from report_data import (  # noqa: E402
    ReportCheckError,
    check_report_contents,
    decode_data_uri,
    embedded_tables,
    html_table_problems,
    report_artefacts,
    report_categories,
)
from report_declared import ReportFlag, expected_report_artefacts, flagged_report_files, report_paths  # noqa: E402
from report_render import distinct_colours, render_report, render_tables  # noqa: E402

# The snakemake beside this interpreter (a virtual environment's), else the one on PATH.
_BESIDE = Path(sys.executable).with_name("snakemake")
SNAKEMAKE = str(_BESIDE) if _BESIDE.exists() else "snakemake"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PLAYWRIGHT = importlib.util.find_spec("playwright") is not None


def needs_browser(test):
    """A test that drives headless Chromium (a subprocess) through Playwright."""
    test = pytest.mark.skipif(not PLAYWRIGHT, reason="the Python package playwright is not installed "
                              "(pip install -e '.[test]')")(test)
    test = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not on PATH (apt-get install chromium)")(test)
    return pytest.mark.integration(test)


# A variable as a report path, a directory whose files the report takes by pattern (one subcategory
# each): Snakemake evaluates the rules, nothing reads their text.
TOY_RULES = '''
FIGURE = "out/figure.svg"


rule table:
    output:
        report("out/table_{name}.html", caption="../report/table.rst", category="Tables"),
    log:
        "logs/{name}.log",
    shell:
        "echo '<table><tr><th>name</th></tr><tr><td>{wildcards.name}</td></tr></table>' > {output} 2> {log}"


rule figure:
    output:
        svg=report(FIGURE, caption="../report/figure.rst", category="Figures"),
        unreported="out/figure.txt",
    log:
        "logs/figure.log",
    shell:
        "printf '<svg xmlns=\\"http://www.w3.org/2000/svg\\" width=\\"8\\" height=\\"8\\"/>' > {output.svg}; "
        "echo x > {output.unreported} 2> {log}"


rule curves:
    output:
        report(
            directory("out/curves"),
            patterns=["{curve}.txt"],
            caption="../report/figure.rst",
            category="Curves",
            subcategory="{curve}",
        ),
    log:
        "logs/curves.log",
    shell:
        "mkdir -p {output} && echo one > {output}/c1.txt && echo two > {output}/c2.txt 2> {log}"
'''

TOY_SNAKEFILE = '''
include: "workflow/rules/toy.smk"


rule all:
    input:
        "out/table_a.html",
        "out/table_b.html",
        "out/figure.svg",
        "out/curves",
    default_target: True
'''

EXPECTED = ["out/curves/c1.txt", "out/curves/c2.txt", "out/figure.svg", "out/table_a.html", "out/table_b.html"]


def _run(arguments: list[str], cwd: Path) -> None:
    completed = subprocess.run([SNAKEMAKE, *arguments], cwd=cwd, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]


def _write_toy_workflow(root: Path) -> Path:
    (root / "workflow" / "rules").mkdir(parents=True)
    (root / "workflow" / "report").mkdir(parents=True)
    (root / "workflow" / "rules" / "toy.smk").write_text(TOY_RULES)
    (root / "workflow" / "report" / "table.rst").write_text("Toy table ``{{ snakemake.wildcards.name }}``.\n")
    (root / "workflow" / "report" / "figure.rst").write_text("Toy figure.\n")
    (root / "Snakefile").write_text(TOY_SNAKEFILE)
    return root


@pytest.fixture(scope="module")
def toy_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-stage workflow with five reported outputs in three categories, built and reported."""
    root = _write_toy_workflow(tmp_path_factory.mktemp("toy_workflow"))
    _run(["--cores", "1", "--quiet", "all"], root)
    _run(["--report", "report.html"], root)
    return root


# --- what the workflow declares ------------------------------------------------------------

@pytest.mark.integration
def test_expected_artefacts_come_from_the_dag(toy_report: Path) -> None:
    # out/figure.txt is built by rule all's DAG but is not flagged for the report; the directory
    # stands for the files its pattern matches.
    assert expected_report_artefacts(toy_report) == EXPECTED
    flags = {flag.path: flag for flag in flagged_report_files(toy_report)}
    assert sorted(flags) == ["out/curves", "out/figure.svg", "out/table_a.html", "out/table_b.html"]
    assert flags["out/curves"] == ReportFlag("out/curves", "curves", is_directory=True, patterns=("{curve}.txt",))
    assert flags["out/table_a.html"].rule == "table"
    # Only the target's DAG counts.
    assert expected_report_artefacts(toy_report, target="out/figure.svg") == ["out/figure.svg"]


@pytest.mark.integration
def test_expected_artefacts_of_a_workflow_never_run(tmp_path: Path) -> None:
    # Nothing is built: every flagged file is expected, the directory as its pattern (named missing).
    root = _write_toy_workflow(tmp_path / "fresh")
    assert expected_report_artefacts(root) == [
        "out/curves/{curve}.txt", "out/figure.svg", "out/table_a.html", "out/table_b.html"]
    (root / "Snakefile").write_text("rule all:\n    input:\n        undefined_name,\n")
    with pytest.raises(ReportCheckError, match="Snakemake cannot resolve the DAG of 'all'"):
        expected_report_artefacts(root)


def test_report_paths_of_files_and_directories(tmp_path: Path) -> None:
    assert report_paths(ReportFlag("out/a.txt", "r"), tmp_path) == ["out/a.txt"]
    assert report_paths(ReportFlag("out/site", "r", is_directory=True, htmlindex="index.html"),
                        tmp_path) == ["out/site/index.html"]
    curves = ReportFlag("out/d1", "r", is_directory=True, patterns=("{curve}.png",), wildcards={"dataset": "d1"})
    assert report_paths(curves, tmp_path) == ["out/d1/{curve}.png"]
    (tmp_path / "out" / "d1").mkdir(parents=True)
    for name in ("p99.png", "mean.png", "notes.txt"):
        (tmp_path / "out" / "d1" / name).write_text("x")
    assert report_paths(curves, tmp_path) == ["out/d1/mean.png", "out/d1/p99.png"]
    with pytest.raises(ReportCheckError, match="without patterns"):
        report_paths(ReportFlag("out/d1", "r", is_directory=True), tmp_path)
    with pytest.raises(ReportCheckError, match="no file of the DAG"):
        expected_report_artefacts(tmp_path, flags=[])


# --- what the report embeds ----------------------------------------------------------------

@pytest.mark.integration
def test_report_embeds_every_artefact_byte_for_byte(toy_report: Path) -> None:
    html_text = (toy_report / "report.html").read_text()
    assert report_artefacts(html_text) == EXPECTED
    assert report_categories(html_text) == {
        "Tables": {"Other": ["out/table_a.html", "out/table_b.html"]},
        "Figures": {"Other": ["out/figure.svg"]},
        "Curves": {"c1": ["out/curves/c1.txt"], "c2": ["out/curves/c2.txt"]},
    }
    contents = check_report_contents(html_text, EXPECTED, workdir=toy_report)
    assert contents.expected == tuple(EXPECTED) and contents.unexpected == ()
    assert list(embedded_tables(html_text)) == ["out/table_a.html", "out/table_b.html"]


@pytest.mark.integration
def test_missing_artefact_is_named(toy_report: Path) -> None:
    html_text = (toy_report / "report.html").read_text()
    with pytest.raises(ReportCheckError, match=r"missing from the report: out/c\.txt"):
        check_report_contents(html_text, [*EXPECTED, "out/c.txt"])
    pruned = _pruned(html_text, "out/table_b.html")
    with pytest.raises(ReportCheckError, match=r"missing from the report: out/table_b\.html$"):
        check_report_contents(pruned, EXPECTED)


def _pruned(html_text: str, path: str) -> str:
    """The report with one entry dropped from its embedded results."""
    results_block = re.search(r'(<script id="results">\s*var results = )(.*?);\s*</script>', html_text, re.DOTALL)
    assert results_block is not None
    results = json.loads(results_block.group(2))
    del results[path]
    return html_text.replace(results_block.group(2), json.dumps(results))


@pytest.mark.integration
def test_stale_artefact_is_named(toy_report: Path, tmp_path: Path) -> None:
    html_text = (toy_report / "report.html").read_text()
    for path in EXPECTED:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_bytes((toy_report / path).read_bytes())
    (tmp_path / "out" / "table_a.html").write_text("rewritten after the report\n")
    with pytest.raises(ReportCheckError, match=r"rebuild the report\): out/table_a\.html$"):
        check_report_contents(html_text, EXPECTED, workdir=tmp_path)


def test_decode_data_uri() -> None:
    assert decode_data_uri("data:text/plain;charset=utf8;filename=a.txt;base64,aGk=") == b"hi"
    with pytest.raises(ReportCheckError):
        decode_data_uri("file:///etc/passwd")


def test_blank_screenshot_has_one_colour(tmp_path: Path) -> None:
    from matplotlib import image

    blank = tmp_path / "blank.png"
    image.imsave(blank, np.ones((10, 20, 3)))
    assert distinct_colours(blank) == ((20, 10), 1)


# --- what a reader sees: headless Chromium -------------------------------------------------

@needs_browser
def test_report_renders_in_headless_chromium(toy_report: Path, tmp_path: Path) -> None:
    result = render_report(toy_report / "report.html", tmp_path / "shot.png", chromium=CHROMIUM)
    assert {"Tables", "Figures", "Curves"} <= set(result.menu_labels)
    assert set(result.rendered_paths_by_category["Tables"]) >= {"out/table_a.html", "out/table_b.html"}
    assert "out/figure.svg" in result.rendered_paths_by_category["Figures"]
    # Each of the two subcategories was clicked through.
    assert set(result.rendered_paths_by_category["Curves"]) >= {"out/curves/c1.txt", "out/curves/c2.txt"}
    assert result.screenshot_distinct_colours > 1
    assert result.screenshot_size_px == (1400, 1000)


@needs_browser
def test_report_whose_app_never_renders_fails(toy_report: Path, tmp_path: Path) -> None:
    html_text = (toy_report / "report.html").read_text()
    assert "root.render(e(App));" in html_text
    broken = tmp_path / "broken.html"
    broken.write_text(html_text.replace("root.render(e(App));", ""))
    with pytest.raises(ReportCheckError, match="menu entry 'Figures' not rendered"):
        render_report(broken, tmp_path / "shot.png", chromium=CHROMIUM, timeout_s=3)


@needs_browser
def test_the_command_checks_a_report_end_to_end(toy_report: Path, tmp_path: Path) -> None:
    command = [sys.executable, str(TOOLS / "report_check.py"), "--screenshot", str(tmp_path / "shot.png")]
    passed = subprocess.run([*command, "--report", "report.html"], cwd=toy_report, capture_output=True, text=True)
    assert passed.returncode == 0, passed.stderr
    assert "all 5 artefacts expected from `all` embedded" in passed.stdout
    assert "tables: all 2 render as <table> elements" in passed.stdout
    pruned = tmp_path / "pruned.html"
    pruned.write_text(_pruned((toy_report / "report.html").read_text(), "out/curves/c2.txt"))
    failed = subprocess.run([*command, "--report", str(pruned)], cwd=toy_report, capture_output=True, text=True)
    assert failed.returncode == 1
    assert "missing from the report: out/curves/c2.txt" in failed.stderr


def test_the_command_exits_2_without_a_browser(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    assert main(["--chromium", "no-such-chromium-binary"]) == 2
    assert "apt-get install chromium" in capsys.readouterr().err
    # A Chromium (any executable stands in: it is not started) but no playwright.
    monkeypatch.setitem(sys.modules, "playwright.sync_api", None)
    assert main(["--chromium", sys.executable]) == 2
    assert "pip install playwright" in capsys.readouterr().err


# --- tables: HTML, not LaTeX source -------------------------------------------------------

TABLE_PAGE = ("<!DOCTYPE html><html><head><title>T</title><style>td {}</style></head><body>"
              "<table><caption>MAPE (%)</caption><thead><tr><th>SLIM</th></tr></thead>"
              "<tbody><tr><td>11.4<br>(CI 8.7-15.3)</td></tr></tbody></table></body></html>")
TEX_SOURCE = "\\begin{table}[t]\n\\toprule\nSLIM \\\\\n\\midrule\n11.4 \\\\\n\\bottomrule\n\\end{table}\n"


def _report_with(entries: dict[str, tuple[str, str]]) -> str:
    """A page with the report's data interface: path -> (mime type, content)."""
    import base64

    results = {path: {"mime_type": mime, "data_uri": f"data:{mime};base64," + base64.b64encode(text.encode()).decode()}
               for path, (mime, text) in entries.items()}
    return f'<html><body><script id="results">var results = {json.dumps(results)};</script></body></html>'


def test_tables_embedded_as_html_pass_and_tex_source_is_named() -> None:
    good = _report_with({"figures/table3.html": ("text/html", TABLE_PAGE), "figures/fig9.png": ("image/png", "x")})
    assert list(embedded_tables(good)) == ["figures/table3.html"]
    bad = _report_with({"figures/table3.html": ("text/html", TABLE_PAGE),
                        "figures/table4.tex": ("text/x-tex", TEX_SOURCE)})
    with pytest.raises(ReportCheckError, match=r"figures/table4\.tex is embedded as text/x-tex, not as an HTML table"):
        embedded_tables(bad)
    with pytest.raises(ReportCheckError, match="embeds no table artefact"):
        embedded_tables(_report_with({"figures/fig9.png": ("image/png", "x")}))
    # An HTML file that only wraps the LaTeX source is not a table either.
    wrapped = f"<html><body><pre>{TEX_SOURCE}</pre></body></html>"
    problems = html_table_problems("figures/table5.html", "text/html", wrapped.encode())
    assert problems == [
        "figures/table5.html holds no <table> with cells",
        "figures/table5.html shows raw LaTeX (\\begin{, \\end{, \\toprule, \\midrule, \\bottomrule, \\\\)",
    ]


@needs_browser
def test_tables_render_as_html_tables_in_headless_chromium() -> None:
    rendered = render_tables({"figures/table3.html": TABLE_PAGE}, chromium=CHROMIUM)
    table = rendered["figures/table3.html"]
    assert table.rows == 2 and table.cells == 1 and table.height_px > 0
    wrapped = f"<html><body><table><tr><td>x</td></tr></table><pre>{TEX_SOURCE}</pre></body></html>"
    with pytest.raises(ReportCheckError, match=r"figures/table4\.html renders raw LaTeX"):
        render_tables({"figures/table3.html": TABLE_PAGE, "figures/table4.html": wrapped}, chromium=CHROMIUM)
    with pytest.raises(ReportCheckError, match=r"figures/table6\.html renders no table"):
        render_tables({"figures/table6.html": f"<html><body><pre>{TEX_SOURCE}</pre></body></html>"}, chromium=CHROMIUM)
