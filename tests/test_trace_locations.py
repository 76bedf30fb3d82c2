"""Where a real dataset's traces are looked for (SLIM_TRACES_ROOT, traces_root, then the fetched
cache), what is skipped when they are absent, and a clone with no real traces beside it: `all`
plans and builds the simulated part, says once per skipped dataset what it skipped, and fails
with that line when a skipped dataset's artefact is asked for."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow

from slim.errors import ConfigError
from slim.pipeline.config import resolve_datasets
from slim.pipeline.trace_locations import FETCH_COMMAND, TRACES_ROOT_VARIABLE

REPO = Path(__file__).resolve().parents[1]
RUN_FIXTURE = REPO / "tests" / "data" / "formats" / "bench_serve_metadata"
SHIPPED = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
SKIP_LINE = "dataset '{name}' skipped: its real traces are not in"


@pytest.fixture()
def config(tmp_path) -> dict:
    """The shipped config, run on the simulated default and one real dataset `mine` that lives in
    a trace source `mine-source`, with traces_root and the cache in `tmp_path`."""
    raw = copy.deepcopy(SHIPPED)
    raw["traces_root"] = str(tmp_path / "root")
    raw["fetch"] = {"cache": str(tmp_path / "cache")}
    raw["trace_sources"]["mine-source"] = {**raw["trace_sources"]["vllm-h100-public"]}
    raw["datasets"]["mine"] = {"kind": "real", "trace_dir": "mine-source/runs", "hardware": "h100-64gb",
                               "models": ["opt-1.3b"], "source": "mine-source", "required": False}
    raw["run_datasets"] = ["simulated", "mine"]
    raw.pop("characterisation")
    return raw


def _place(folder: Path) -> Path:
    shutil.copytree(RUN_FIXTURE, folder)
    return folder


def test_traces_root_comes_before_the_cache_and_the_variable_before_both(config, tmp_path):
    in_cache = _place(tmp_path / "cache" / "mine-source" / "runs")
    assert resolve_datasets(config, REPO, environ={}).available["mine"].trace_dir == in_cache
    in_root = _place(tmp_path / "root" / "mine-source" / "runs")
    assert resolve_datasets(config, REPO, environ={}).available["mine"].trace_dir == in_root
    in_variable = _place(tmp_path / "elsewhere" / "mine-source" / "runs")
    found = resolve_datasets(config, REPO, environ={TRACES_ROOT_VARIABLE: str(tmp_path / "elsewhere")})
    assert found.available["mine"].trace_dir == in_variable


def test_a_relative_traces_root_is_relative_to_the_repository(config, tmp_path):
    _place(tmp_path / "repo" / "traces" / "mine-source" / "runs")
    config["traces_root"] = "traces"
    config["run_datasets"], config["default_dataset"] = ["mine"], "mine"   # the settings files are REPO's
    found = resolve_datasets(config, tmp_path / "repo", environ={})
    assert found.available["mine"].trace_dir == tmp_path / "repo" / "traces" / "mine-source" / "runs"


def test_an_absent_optional_dataset_is_skipped_with_where_it_looked_and_the_fetch_command(config, tmp_path):
    resolved = resolve_datasets(config, REPO, environ={})
    assert list(resolved.available) == ["simulated"]
    message = resolved.absent["mine"].message
    assert message.startswith(SKIP_LINE.format(name="mine"))
    assert f"{tmp_path}/root/mine-source/runs (traces_root)" in message
    assert f"{tmp_path}/cache/mine-source/runs (fetch.cache)" in message
    assert FETCH_COMMAND in message and "\n" not in message


def test_an_absent_required_dataset_is_an_error_naming_the_key(config):
    config["datasets"]["mine"]["required"] = True
    with pytest.raises(ConfigError, match=r"datasets\.mine\.trace_dir = 'mine-source/runs' does not exist"):
        resolve_datasets(config, REPO, environ={})


def test_a_skipped_default_dataset_or_nothing_left_to_build_is_an_error(config):
    config["default_dataset"] = "mine"
    with pytest.raises(ConfigError, match="default_dataset = 'mine': dataset 'mine' skipped"):
        resolve_datasets(config, REPO, environ={})
    config["run_datasets"], config["default_dataset"] = ["mine"], "mine"
    with pytest.raises(ConfigError, match="dataset 'mine' skipped"):
        resolve_datasets(config, REPO, environ={})


@pytest.mark.parametrize("entry, message", [
    ({"source": "nope"}, r"datasets\.mine\.source = 'nope' is not a key of trace_sources"),
    ({"trace_dir": "elsewhere/runs"}, r"datasets\.mine\.trace_dir = 'elsewhere/runs' must begin with its "
                                      r"source's name \('mine-source/...'\)"),
])
def test_a_wrong_source_names_the_key(config, entry, message):
    config["datasets"]["mine"].update(entry)
    with pytest.raises(ConfigError, match=message):
        resolve_datasets(config, REPO, environ={})


def _snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    environ = {key: value for key, value in os.environ.items() if key != TRACES_ROOT_VARIABLE}
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir, capture_output=True,
                          text=True, env=environ)


@pytest.fixture(scope="module")
def lone_clone(tmp_path_factory) -> Path:
    """The workflow in a folder with no ../shared beside it and no fetched traces."""
    workdir = copy_workflow(tmp_path_factory.mktemp("lone") / "repo")
    assert not (workdir.parent / "shared").exists()
    return workdir


def _skip_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if " skipped: its real traces are not in " in line]


@pytest.mark.integration
def test_all_plans_without_real_traces_and_says_what_it_skips(lone_clone):
    result = _snakemake(lone_clone, "-n", "all")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = _skip_lines(result.stderr)
    assert [line.split("'")[1] for line in lines] == ["h100-public", "h100-public-sharegpt", "aiconfigurator-h100"]
    assert all(FETCH_COMMAND in line and "../shared/traces/vllm-h100-public/" in line for line in lines[:2])
    # NVIDIA's sweep has no download configured: the line says where to point instead
    assert "no download is configured" in lines[2] and "SLIM_TRACES_ROOT" in lines[2]
    assert "dataset=simulated" in result.stdout and "dataset=h100-public" not in result.stdout


@pytest.mark.integration
def test_a_skipped_datasets_artefact_fails_with_its_line(lone_clone):
    result = _snakemake(lone_clone, "-n", "figures/h100-public/table3.tex")
    assert result.returncode != 0
    skip_line = _skip_lines(result.stderr)[0]
    output = result.stdout + result.stderr
    assert output.count(skip_line) >= 2     # said while planning, then as the error


@pytest.mark.integration
def test_all_builds_the_simulated_part_without_real_traces(lone_clone):
    result = _snakemake(lone_clone, "--cores", "2", "all")
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(_skip_lines(result.stderr)) == 3
    readme = (lone_clone / "results" / "readme_results.md").read_text()
    assert readme.startswith("**Datasets skipped in this build**")
    assert SKIP_LINE.format(name="h100-public") in readme and "on **simulated** data" in readme
    assert (lone_clone / "figures" / "table3.tex").is_file()
    assert not (lone_clone / "results" / "h100-public").exists()
    report = _snakemake(lone_clone, "--report", "figures/report.html")
    assert report.returncode == 0, report.stderr[-3000:]
    front_page = (lone_clone / "figures" / "report.html").read_text(errors="replace")
    assert "Skipped in this build" in front_page and "h100-public-sharegpt" in front_page


def test_an_absolute_trace_dir_is_read_as_it_is_even_with_a_source(config, tmp_path):
    placed = _place(tmp_path / "anywhere" / "runs")
    config["datasets"]["mine"]["trace_dir"] = str(placed)
    assert resolve_datasets(config, REPO, environ={}).available["mine"].trace_dir == placed
