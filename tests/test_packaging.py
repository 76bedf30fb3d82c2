"""The install paths agree: pyproject.toml (pip, tested), its lock and environment.yml (conda)."""

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ]", requirement.strip(), maxsplit=1)[0].lower()


def _spec(requirement: str) -> str:
    return requirement.strip().lower().replace(" ", "")


PYPI_NAME_OF_CONDA_PACKAGE = {"playwright-python": "playwright"}
"""conda-forge packages named otherwise than on PyPI."""


def _as_pypi(requirement: str) -> str:
    """A conda requirement spelled with the PyPI name of its package."""
    name = _name(requirement)
    return PYPI_NAME_OF_CONDA_PACKAGE.get(name, name) + _spec(requirement)[len(name):]


def test_environment_yml_lists_the_pyproject_dependencies_with_the_same_pins():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    pip_requirements = pyproject["project"]["dependencies"] + pyproject["project"]["optional-dependencies"]["test"]
    environment = yaml.safe_load((REPO / "environment.yml").read_text())
    conda_requirements = [_as_pypi(d) for d in environment["dependencies"] if isinstance(d, str)]
    conda_by_name = {_name(d): _spec(d) for d in conda_requirements if _name(d) not in ("python", "pip")}
    pip_by_name = {_name(d): _spec(d) for d in pip_requirements}
    assert conda_by_name == pip_by_name


LOCK = REPO / "workflow" / "envs" / "pip-lock.txt"


def readme_command_lines() -> list[str]:
    """The lines of the README's first ```bash block."""
    return re.search(r"^```bash\n(.*?)\n```$", (REPO / "README.md").read_text(), re.S | re.M).group(1).splitlines()


def test_the_readme_opens_with_the_main_job_and_the_tests():
    lines = readme_command_lines()
    assert len(lines) == 2, "the README's first bash block holds exactly two command lines"
    assert "snakemake" in lines[0] and "pytest" in lines[1]


@pytest.mark.integration
def test_ci_runs_exactly_the_readmes_two_command_lines():
    # The two assignments of .ci/run that read the README, run as CI runs them.
    ci_script = (REPO / ".ci" / "run").read_text()
    extraction = [line for line in ci_script.splitlines() if line.startswith(("main_command=", "test_command="))]
    assert len(extraction) == 2
    script = "\n".join([*extraction, 'printf "%s\\n%s\\n" "$main_command" "$test_command"'])
    printed = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert printed.splitlines() == readme_command_lines()


def test_both_readme_install_lines_install_with_the_lock():
    for line in readme_command_lines():
        constraint = re.search(r"pip install -c (\S+) ", line)
        assert constraint and (REPO / constraint.group(1)).resolve() == LOCK, line


def lock_pins() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_the_lock_pins_every_dependency_within_its_declared_range():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    declared = pyproject["project"]["dependencies"] + pyproject["project"]["optional-dependencies"]["test"]
    pins = lock_pins()
    for requirement in map(Requirement, declared):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is declared in pyproject.toml but not pinned in {LOCK.name}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (name, pins[name], requirement)
    assert canonicalize_name(pyproject["project"]["name"]) not in pins   # the project itself is installed -e


@pytest.mark.integration
def test_no_public_trace_file_is_tracked():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.splitlines()
    copies = [p for p in tracked
              if re.search(r"(openai-infqps-|metrics_engine)", p) and not p.startswith("tests/data/")]
    assert copies == []
