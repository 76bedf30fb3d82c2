"""The install paths agree: pyproject.toml (pip, tested) and environment.yml (conda)."""

import re
import subprocess
import tomllib
from pathlib import Path

import yaml

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


def test_ci_runs_the_readme_test_command():
    readme_block = re.search(r"```bash\n(.*?)\n```", (REPO / "README.md").read_text(), re.S).group(1)
    lines = readme_block.splitlines()
    assert len(lines) == 2, "the README opens with exactly two command lines"
    assert "snakemake --cores 8 all" in lines[0]
    assert "pytest" in lines[1]
    ci_script = (REPO / ".ci" / "run").read_text()
    assert "sed -n 2p" in ci_script  # .ci/run executes that second line, not a copy of it


def test_no_public_trace_file_is_tracked():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True).stdout.splitlines()
    copies = [p for p in tracked
              if re.search(r"(openai-infqps-|metrics_engine)", p) and not p.startswith("tests/data/")]
    assert copies == []
