"""After a normal (non-editable) `pip install .`, `slim advise --json` works from outside the repository:
the model and GPU catalogs come with the package (package data), not from config/ of a checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration   # a scratch virtualenv, pip and the installed `slim`

REPO = Path(__file__).resolve().parents[1]
LAYOUT = REPO / "tests" / "data" / "formats" / "bench_serve_metadata"
SOURCE_ITEMS = ("pyproject.toml", "README.md", "slim", "baselines")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A scratch virtualenv into which `pip install .` put this project, as a user runs it (pip builds the
    wheel in an isolated environment with the build backend pyproject.toml asks for, from the package
    index). The dependencies are not reinstalled: they are those of the running interpreter, visible
    through a path file, whose own .pth files (the editable install's among them) are not run, so the
    checkout is not importable."""
    root = tmp_path_factory.mktemp("install")
    source = root / "source"
    source.mkdir()
    for item in SOURCE_ITEMS:
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, source / item)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    scratch_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip()
    (Path(scratch_site) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    result = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                             str(source)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    shutil.rmtree(source)           # nothing of the checkout is left to import from
    return venv


def _run(venv: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run([str(venv / "bin" / argv[0]), *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_installed_package_is_not_the_checkout(installed, tmp_path):
    result = _run(installed, "python", "-c", "import slim.specs.architecture as a; print(a.MODELS_FILE)", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    catalog = Path(result.stdout.strip())
    assert catalog.is_file() and installed in catalog.parents and REPO not in catalog.parents


def test_slim_advise_json_works_outside_the_repository(installed, tmp_path):
    assert _run(installed, "slim", "--version", cwd=tmp_path).stdout.startswith("slim ")
    result = _run(installed, "slim", "advise", "--traces", str(LAYOUT), "--model", "opt-1.3b", "--input-len", "256",
                  "--output-len", "128", "--slo-ms", "5000", "--hardware", "h100-sxm-80gb", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["status"] == "ok" and document["workload"]["hardware"] == "h100-sxm-80gb"
    assert document["recommendation"]["max_num_seqs"] >= 1
