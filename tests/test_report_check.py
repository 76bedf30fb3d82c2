"""Tests of the report check (slim.pipeline.report_check) on a real (tiny) Snakemake report built
in a temporary folder."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from slim.pipeline.report_check import (
    ReportCheckError,
    ReportDeclaration,
    check_report_contents,
    decode_data_uri,
    distinct_colours,
    embedded_tables,
    expected_report_artefacts,
    html_table_problems,
    parse_summary,
    pattern_regex,
    render_report,
    render_tables,
    report_artefacts,
    report_categories,
    report_patterns,
    select_report_artefacts,
)

# The snakemake beside this interpreter (a virtual environment's), else the one on PATH.
_BESIDE = Path(sys.executable).with_name("snakemake")
SNAKEMAKE = str(_BESIDE) if _BESIDE.exists() else "snakemake"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

TOY_RULES = '''
rule table:
    output:
        report("out/{name}.txt", caption="../report/table.rst", category="Tables"),
    log:
        "logs/{name}.log",
    shell:
        "echo table {wildcards.name} > {output} 2> {log}"


rule figure:
    output:
        svg=report(
            "out/figure.svg",
            caption="../report/figure.rst",
            category="Figures",
        ),
        unreported="out/figure.txt",
    log:
        "logs/figure.log",
    shell:
        "printf '<svg xmlns=\\"http://www.w3.org/2000/svg\\" width=\\"8\\" height=\\"8\\"/>' > {output.svg}; "
        "echo x > {output.unreported} 2> {log}"
'''

TOY_SNAKEFILE = '''
include: "workflow/rules/toy.smk"


rule all:
    input:
        "out/a.txt",
        "out/b.txt",
        "out/figure.svg",
    default_target: True
'''

EXPECTED = ["out/a.txt", "out/b.txt", "out/figure.svg"]


def _run(arguments: list[str], cwd: Path) -> None:
    completed = subprocess.run([SNAKEMAKE, *arguments], cwd=cwd, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr[-3000:]


@pytest.fixture(scope="module")
def toy_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-stage workflow with three reported outputs in two categories, built and reported."""
    root = tmp_path_factory.mktemp("toy_workflow")
    (root / "workflow" / "rules").mkdir(parents=True)
    (root / "workflow" / "report").mkdir(parents=True)
    (root / "workflow" / "rules" / "toy.smk").write_text(TOY_RULES)
    (root / "workflow" / "report" / "table.rst").write_text("Toy table ``{{ snakemake.wildcards.name }}``.\n")
    (root / "workflow" / "report" / "figure.rst").write_text("Toy figure.\n")
    (root / "Snakefile").write_text(TOY_SNAKEFILE)
    _run(["--cores", "1", "--quiet", "all"], root)
    _run(["--report", "report.html"], root)
    return root


@pytest.mark.integration
def test_report_patterns_read_literal_first_arguments(toy_report: Path) -> None:
    patterns = report_patterns([toy_report / "workflow" / "rules" / "toy.smk"])
    assert patterns == [
        ReportDeclaration(rule="figure", pattern="out/figure.svg"),
        ReportDeclaration(rule="table", pattern="out/{name}.txt"),
    ]


def test_report_patterns_refuse_a_non_literal_path(tmp_path: Path) -> None:
    rules = tmp_path / "bad.smk"
    rules.write_text('rule x:\n    output:\n        report(PATH, caption="c.rst")\n')
    with pytest.raises(ReportCheckError, match=r"bad.smk:3: report"):
        report_patterns([rules])


def test_report_patterns_read_rules_defined_per_dataset(tmp_path: Path) -> None:
    # A rule defined in a loop has a computed name and f-string paths: its fields stand for one
    # path component, and the declaration matches whichever rule writes such a path.
    rules = tmp_path / "loop.smk"
    rules.write_text('for dataset in DATASETS:\n\n    rule:\n        name:\n            f"fig_{dataset}"\n'
                     '        output:\n            pdf=report(f"figures/{dataset}/fig9.pdf", caption="c.rst"),\n')
    assert report_patterns([rules]) == [ReportDeclaration(rule="", pattern="figures/{dataset}/fig9.pdf")]
    selected = select_report_artefacts([("figures/a/fig9.pdf", "fig_a"), ("figures/a/fig9.png", "fig_a")],
                                       report_patterns([rules]))
    assert selected == ["figures/a/fig9.pdf"]


def test_pattern_regex_matches_one_path_component_per_wildcard() -> None:
    regex = pattern_regex("figures/{dataset}/fig9.pdf")
    assert regex.match("figures/simulated/fig9.pdf")
    assert not regex.match("figures/fig9.pdf")
    assert not regex.match("figures/a/b/fig9.pdf")
    assert not regex.match("figures/simulated/fig9.pdf.bak")
    assert pattern_regex("out/{n,[0-9]+}.txt").match("out/12.txt")
    assert not pattern_regex("out/{n,[0-9]+}.txt").match("out/ab.txt")


def test_parse_summary_and_selection() -> None:
    summary = (
        "output_file\tdate\trule\tlog-file(s)\tstatus\tplan\n"
        "out/a.txt\t-\ttable\t\tok\tno update\n"
        "out/figure.txt\t-\tfigure\t\tmissing\tupdate pending\n"
    )
    outputs = parse_summary(summary)
    assert outputs == [("out/a.txt", "table"), ("out/figure.txt", "figure")]
    declarations = [ReportDeclaration("table", "out/{name}.txt"), ReportDeclaration("figure", "out/figure.svg")]
    # out/figure.txt matches the table rule's pattern but is written by another rule.
    assert select_report_artefacts(outputs, declarations) == ["out/a.txt"]
    with pytest.raises(ReportCheckError, match="output_file"):
        parse_summary("nothing to see\n")


@pytest.mark.integration
def test_expected_artefacts_come_from_the_dag(toy_report: Path) -> None:
    # out/figure.txt is built by rule all's DAG but is not flagged for the report.
    assert expected_report_artefacts(toy_report, snakemake=SNAKEMAKE) == EXPECTED


@pytest.mark.integration
def test_report_embeds_every_artefact_byte_for_byte(toy_report: Path) -> None:
    html_text = (toy_report / "report.html").read_text()
    assert report_artefacts(html_text) == EXPECTED
    assert report_categories(html_text) == {
        "Tables": {"Other": ["out/a.txt", "out/b.txt"]},
        "Figures": {"Other": ["out/figure.svg"]},
    }
    contents = check_report_contents(html_text, EXPECTED, workdir=toy_report)
    assert contents.expected == tuple(EXPECTED) and contents.unexpected == ()


@pytest.mark.integration
def test_missing_artefact_is_named(toy_report: Path) -> None:
    html_text = (toy_report / "report.html").read_text()
    with pytest.raises(ReportCheckError, match=r"missing from the report: out/c\.txt"):
        check_report_contents(html_text, [*EXPECTED, "out/c.txt"])
    # Drop one entry from the embedded results: the check names exactly that file.
    results_block = re.search(r'(<script id="results">\s*var results = )(.*?);\s*</script>', html_text, re.DOTALL)
    assert results_block is not None
    results = json.loads(results_block.group(2))
    del results["out/b.txt"]
    pruned = html_text.replace(results_block.group(2), json.dumps(results))
    with pytest.raises(ReportCheckError, match=r"missing from the report: out/b\.txt$"):
        check_report_contents(pruned, EXPECTED)


@pytest.mark.integration
def test_stale_artefact_is_named(toy_report: Path, tmp_path: Path) -> None:
    html_text = (toy_report / "report.html").read_text()
    (tmp_path / "out").mkdir()
    for path in EXPECTED:
        (tmp_path / path).write_bytes((toy_report / path).read_bytes())
    (tmp_path / "out" / "a.txt").write_text("rewritten after the report\n")
    with pytest.raises(ReportCheckError, match=r"rebuild the report\): out/a\.txt$"):
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


@pytest.mark.integration
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not on PATH (apt-get install chromium)")
def test_report_renders_in_headless_chromium(toy_report: Path, tmp_path: Path) -> None:
    result = render_report(toy_report / "report.html", tmp_path / "shot.png", chromium=CHROMIUM)
    assert {"Tables", "Figures"} <= set(result.menu_labels)
    assert set(result.rendered_paths_by_category["Tables"]) >= {"out/a.txt", "out/b.txt"}
    assert "out/figure.svg" in result.rendered_paths_by_category["Figures"]
    assert result.screenshot_distinct_colours > 1
    assert result.screenshot_size_px == (1400, 1000)


@pytest.mark.integration
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not on PATH (apt-get install chromium)")
def test_report_whose_app_never_renders_fails(toy_report: Path, tmp_path: Path) -> None:
    html_text = (toy_report / "report.html").read_text()
    assert "root.render(e(App));" in html_text
    broken = tmp_path / "broken.html"
    broken.write_text(html_text.replace("root.render(e(App));", ""))
    with pytest.raises(ReportCheckError, match="menu entry 'Figures' not rendered"):
        render_report(broken, tmp_path / "shot.png", chromium=CHROMIUM)


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
    # An HTML file that only wraps the LaTeX source is not a table either.
    wrapped = f"<html><body><pre>{TEX_SOURCE}</pre></body></html>"
    problems = html_table_problems("figures/table5.html", "text/html", wrapped.encode())
    assert problems == [
        "figures/table5.html holds no <table> with cells",
        "figures/table5.html shows raw LaTeX (\\begin{, \\end{, \\toprule, \\midrule, \\bottomrule, \\\\)",
    ]


@pytest.mark.integration
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not on PATH (apt-get install chromium)")
def test_tables_render_as_html_tables_in_headless_chromium() -> None:
    rendered = render_tables({"figures/table3.html": TABLE_PAGE}, chromium=CHROMIUM)
    table = rendered["figures/table3.html"]
    assert table.rows == 2 and table.cells == 1 and table.height_px > 0
    wrapped = f"<html><body><table><tr><td>x</td></tr></table><pre>{TEX_SOURCE}</pre></body></html>"
    with pytest.raises(ReportCheckError, match=r"figures/table4\.html renders raw LaTeX"):
        render_tables({"figures/table3.html": TABLE_PAGE, "figures/table4.html": wrapped}, chromium=CHROMIUM)
    with pytest.raises(ReportCheckError, match=r"figures/table6\.html renders no table"):
        render_tables({"figures/table6.html": f"<html><body><pre>{TEX_SOURCE}</pre></body></html>"}, chromium=CHROMIUM)
