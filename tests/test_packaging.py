"""The install paths agree: pyproject.toml (pip, tested), its lock and environment.yml (conda)."""

import re
import subprocess
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ]", requirement.strip(), maxsplit=1)[0].lower()


def _spec(requirement: str) -> str:
    return requirement.strip().lower().replace(" ", "")


def test_environment_yml_lists_the_pyproject_dependencies_with_the_same_pins():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    pip_requirements = pyproject["project"]["dependencies"] + pyproject["project"]["optional-dependencies"]["test"]
    environment = yaml.safe_load((REPO / "environment.yml").read_text())
    conda_requirements = [d for d in environment["dependencies"] if isinstance(d, str)]
    conda_by_name = {_name(d): _spec(d) for d in conda_requirements if _name(d) not in ("python", "pip")}
    pip_by_name = {_name(d): _spec(d) for d in pip_requirements}
    assert conda_by_name == pip_by_name


def test_snakemake_is_pinned_to_major_version_9():
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "snakemake>=9.19,<10" in pyproject["project"]["dependencies"]


LOCK = REPO / "workflow" / "envs" / "pip-lock.txt"


def readme_command_lines() -> list[str]:
    readme_block = re.search(r"```bash\n(.*?)\n```", (REPO / "README.md").read_text(), re.S).group(1)
    return readme_block.splitlines()


def test_ci_runs_the_readme_test_command_in_a_fresh_virtualenv():
    lines = readme_command_lines()
    assert len(lines) == 2, "the README opens with exactly two command lines"
    assert "snakemake --cores 8 all" in lines[0]
    assert "pytest" in lines[1]
    ci_script = (REPO / ".ci" / "run").read_text()
    assert "sed -n 2p" in ci_script  # .ci/run executes that second line, not a copy of it
    # ... inside a virtualenv it creates, so nothing installed on the host makes CI green.
    assert "python3 -m venv" in ci_script and "venv/bin/activate" in ci_script


def test_both_readme_install_lines_use_the_lock():
    for line in readme_command_lines():
        assert f"pip install -c {LOCK.relative_to(REPO).as_posix()} " in line, line


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


def test_no_public_trace_file_is_tracked():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.splitlines()
    copies = [p for p in tracked
              if re.search(r"(openai-infqps-|metrics_engine)", p) and not p.startswith("tests/data/")]
    assert copies == []
