"""The documentation says what is true: every repository path, Python module and Snakemake target that
README.md and docs/*.md name exists, and every `slim` example prints what the page shows."""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from slim.cli import main

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])

REPOSITORY_ROOTS = ("slim/", "baselines/", "workflow/", "config/", "tests/", "docs/", "profiles/", ".ci/")
GENERATED_ROOTS = ("results/", "figures/", "logs/", "raw_traces/")
TOP_LEVEL_FILES = ("Snakefile", "pyproject.toml", "environment.yml", "README.md")
MADE_BY_COMMANDS = {"figures/report.html": "snakemake --report figures/report.html",
                    "figures/report_screenshot.png": "python workflow/tools/report_check.py",
                    "results/beyond_paper/aiconfigurator_predictions.csv":
                        "python workflow/bench/aiconfigurator_anchor.py",
                    "results/beyond_paper/aiconfigurator_anchor.md": "python workflow/bench/aiconfigurator_anchor.py"}
"""Generated files no rule builds: the commands that write them (pages name both)."""
_FENCE = re.compile(r"^```(?P<kind>\w*)\n(?P<code>.*?)^```$", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")
_MODULE = re.compile(r"(?:slim|baselines)(?:\.[A-Za-z_]\w*)+")
_RULE = re.compile(r"^(?:rule|checkpoint)\s+(\w+)\s*:", re.M)
_SETTING_FILES = re.compile(r'dataset_setting_files\(\w+, "(?P<folder>[^"]+)", "(?P<extension>[^"]+)"\)')
"""An output list of the plan's `dataset_setting_files` (slim/pipeline/planning.py):
results/<dataset>/<folder>/<setting>.<extension>."""
_PATH_DIRECTIVE = re.compile(r"^(?P<indent>\s+)(?:output|log|benchmark):\s*$")
_PLACEHOLDER = re.compile(r"<[^<>/]+>|\{[^{}/]+\}")
_OPTION_VALUE = {"--cores", "-c", "--jobs", "-j", "--profile", "--report", "--executor", "--forcerun", "-R",
                 "--until", "--rerun-triggers", "--directory", "-d", "--snakefile", "-s"}


def code_of(markdown: str) -> list[tuple[str, str]]:
    """(kind, text) of every fenced block (its language) and inline code span ("span") of a page."""
    blocks = [(match["kind"], match["code"]) for match in _FENCE.finditer(markdown)]
    return blocks + [("span", span) for span in _SPAN.findall(_FENCE.sub("", markdown))]


@dataclass(frozen=True)
class Workflow:
    """What a Snakemake target may be: a rule name, or a path an output, log or benchmark pattern matches."""

    rules: frozenset[str]
    patterns: tuple[str, ...]

    @classmethod
    def read(cls, repo: Path) -> "Workflow":
        files = [repo / "Snakefile", *sorted((repo / "workflow" / "rules").glob("*.smk"))]
        rules, patterns = set(), []
        for text in (path.read_text() for path in files):
            rules |= set(_RULE.findall(text))
            patterns += [f"results/{{dataset}}/{m['folder']}/{{setting}}.{m['extension']}"
                         for m in _SETTING_FILES.finditer(text)]
            lines = text.splitlines()
            for number, line in enumerate(lines):
                directive = _PATH_DIRECTIVE.match(line)
                if directive is None:
                    continue
                for body in lines[number + 1:]:
                    if body.strip() and len(body) - len(body.lstrip()) <= len(directive["indent"]):
                        break
                    patterns += re.findall(r'"([^"]+)"', body)
        return cls(frozenset(rules), tuple(patterns))

    def builds(self, path: str) -> bool:
        """Whether some output pattern produces `path` (a folder, ending in /, if some output lies in it);
        `<name>` in `path` stands for any one path component, as `{name}` does in a pattern."""
        wanted = _segments(path)
        for pattern in self.patterns:
            have = _segments(pattern)
            if (len(have) == len(wanted) or (path.endswith("/") and len(have) > len(wanted))) and all(
                    a == b or fnmatch.fnmatchcase(a, b) or fnmatch.fnmatchcase(b, a) for a, b in zip(wanted, have)):
                if have[-1] != "*" or path.endswith("/"):
                    return True
                # A copy rule (`figures/{artefact}` from `figures/{dataset}/<artefact>`): the file must
                # be one some dataset's rule builds.
                if len(wanted) == len(have) and self.builds("/".join([*wanted[:-1], "*", wanted[-1]])):
                    return True
        return False


def _segments(path: str) -> list[str]:
    return _PLACEHOLDER.sub("*", path).strip("/").split("/")


def _words(code: str) -> list[str]:
    return [word.strip(".,;:()[]'\"") for word in re.split(r"[\s=(),;]+", code) if word]


def snakemake_targets(code: str) -> list[str]:
    """The targets of every `snakemake` command in `code` (backslash continuations joined)."""
    targets = []
    for line in code.replace("\\\n", " ").splitlines():
        for command in re.findall(r"\bsnakemake(?=\s|$)([^|&;`]*)", line):
            try:
                words = shlex.split(command, comments=True)
            except ValueError:   # an unbalanced quote in prose
                words = command.split()
            index = 0
            while index < len(words):
                word = words[index]
                if word in _OPTION_VALUE:
                    index += 1
                elif word in ("--configfile", "--configfiles"):
                    while index + 1 < len(words) and words[index + 1].endswith((".yaml", ".yml", ".json")):
                        index += 1
                elif word == "--config":
                    while index + 1 < len(words) and "=" in words[index + 1]:
                        index += 1
                elif not word.startswith("-"):
                    targets.append(word)
                index += 1
    return targets


def _module_exists(repo: Path, dotted: str) -> bool:
    """`dotted` names a module of the repository, or a name defined at the top of one."""
    parts = dotted.split(".")
    for length in range(len(parts), 0, -1):
        base = repo.joinpath(*parts[:length])
        source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if source.is_file():
            rest = parts[length:]
            if not rest:
                return True
            return len(rest) == 1 and re.search(rf"^(?:def |class |){re.escape(rest[0])}\b", source.read_text(),
                                                re.M) is not None
    return False


def broken_references(markdown: str, repo: Path = REPO, workflow: Workflow | None = None) -> list[str]:
    """Every path, module and Snakemake target `markdown` names in code that does not exist."""
    workflow = workflow or Workflow.read(repo)
    problems = []
    for kind, code in code_of(markdown):
        if kind == "text":   # printed output, checked against the command that prints it
            continue
        targets = snakemake_targets(code)
        for word in _words(code):
            if word in targets:
                continue
            if word.startswith(GENERATED_ROOTS):
                # Judged on the rules alone: whether the file happens to exist depends on the working tree.
                tracked = word.endswith("README.md") and (repo / word).is_file()
                if not tracked and word not in MADE_BY_COMMANDS and not workflow.builds(word):
                    problems.append(f"no rule builds {word}")
            elif word.startswith(REPOSITORY_ROOTS) or word in TOP_LEVEL_FILES:
                if not list(repo.glob(_PLACEHOLDER.sub("*", word).rstrip("/"))):
                    problems.append(f"no such path: {word}")
            elif _MODULE.fullmatch(word) and not _module_exists(repo, word):
                problems.append(f"no such module or name: {word}")
        for target in targets:
            if target not in workflow.rules and not workflow.builds(target):
                problems.append(f"no rule or output pattern for snakemake target {target}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPO).as_posix())
def test_every_path_module_and_target_a_page_names_exists(page):
    assert broken_references(page.read_text()) == []


def test_the_checker_names_what_does_not_exist():
    page = """
Read `slim/traces/files.py` and `slim.paper.nothing_here`, then `snakemake --cores 2 no_such_rule`, and
look at `results/h100-public/table99.csv`, `figures/<dataset>/fig99.png` and `figures/fig99.png`.

```bash
snakemake --cores 2 all --configfile config/config.yaml config/accelerators.yaml figures/h100-public/tablex.tex
```
"""
    assert broken_references(page) == [
        "no rule or output pattern for snakemake target figures/h100-public/tablex.tex",
        "no such path: slim/traces/files.py",
        "no such module or name: slim.paper.nothing_here",
        "no rule or output pattern for snakemake target no_such_rule",
        "no rule builds results/h100-public/table99.csv",
        "no rule builds figures/<dataset>/fig99.png",
        "no rule builds figures/fig99.png",
    ]
    good = ("`slim/traces/ingest.py`, `slim.gpu.kv_memory.static_batch_fit`, `config/bca/*.yaml`, "
            "`snakemake --cores 2 accelerators --configfile config/config.yaml config/accelerators.yaml`, "
            "`results/<dataset>/fits/<setting>.json`, `raw_traces/simulated/`, `figures/h100-public/table3.tex`, "
            "`figures/table3.tex`")
    assert broken_references(good) == []


# --- the examples: each `slim` command block followed by a text block of what it prints -------

_EXAMPLE = re.compile(r"^```bash\n(?P<command>slim [^`]*?)\n```\s*\n```text\n(?P<printed>.*?)\n```$", re.M | re.S)
EXAMPLES = [(page, match["command"], match["printed"])
            for page in PAGES for match in _EXAMPLE.finditer(page.read_text())]


@pytest.mark.parametrize("page, command, printed", [
    pytest.param(page, command, printed, id=f"{page.name}:{command.split()[1]}:{number}",
                 # an example on the real traces runs a stage on all of them (slim tune simulates every
                 # candidate's schedule): the slow tier
                 marks=[pytest.mark.traces, pytest.mark.integration] if "../shared" in command else [])
    for number, (page, command, printed) in enumerate(EXAMPLES)])
def test_every_example_prints_what_its_page_shows(page, command, printed, capsys, monkeypatch, request):
    if "../shared" in command:
        request.getfixturevalue("shared_traces_dir")   # skips (fails in CI) without the real traces
    monkeypatch.chdir(REPO)
    command, _, pipe = command.partition(" | ")   # a shown `| head -N` keeps the first N lines
    assert main(shlex.split(command.replace("\\\n", " "))[1:]) == 0
    lines = capsys.readouterr().out.rstrip("\n").split("\n")
    if pipe:
        lines = lines[:int(re.fullmatch(r"head -(\d+)", pipe.strip())[1])]
    assert "\n".join(lines) == printed


def test_the_readme_shows_examples_that_run_without_the_real_traces():
    readme_examples = [command for page, command, _ in EXAMPLES if page.name == "README.md"]
    assert {command.split()[1] for command in readme_examples} == {"check", "advise", "tune"}
    assert not any("../shared" in command for command in readme_examples)


def test_the_readme_stays_within_200_lines():
    assert len((REPO / "README.md").read_text().splitlines()) <= 200
