"""Config errors caught when the workflow is parsed, naming the key (slim/pipeline/config.py):
a real dataset's trace folder that is empty or a file, held-out selectors that name no column of
the runs table or select no rows, and YAML syntax errors with their file and line."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow

from slim.errors import ConfigError
from slim.pipeline.config import check_config
from slim.specs.architecture import MODELS_FILE
from slim.specs.hardware import HARDWARE_FILE
from slim.yaml_files import parse_yaml

REPO = Path(__file__).resolve().parents[1]
FORMATS = REPO / "tests" / "data" / "formats"


@pytest.fixture()
def config(tmp_path) -> dict:
    """The shipped config with one small real dataset (a layout fixture) and its settings file."""
    settings = tmp_path / "settings.yaml"
    settings.write_text(yaml.safe_dump({"settings": [
        {"name": "same_curve", "label": "Same curve", "train": {"max_num_seqs": [1, 4, 8]},
         "validate": {"max_num_seqs": [16, 32]}}]}))
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    raw["run_datasets"], raw["default_dataset"] = ["mine"], "mine"
    raw["datasets"]["mine"] = {"kind": "real", "trace_dir": str(FORMATS / "bench_serve_metadata"),
                               "hardware": "h100-64gb", "models": ["opt-1.3b"], "settings": str(settings)}
    raw["models_file"], raw["hardware_file"] = str(MODELS_FILE), str(HARDWARE_FILE)
    raw.pop("characterisation")
    return raw


def _with(config: dict, **entry) -> dict:
    changed = copy.deepcopy(config)
    changed["datasets"]["mine"].update(entry)
    return changed


def _settings(tmp_path: Path, train: dict, validate: dict) -> str:
    path = tmp_path / "bad_settings.yaml"
    path.write_text(yaml.safe_dump({"settings": [{"name": "s", "label": "S", "train": train, "validate": validate}]}))
    return str(path)


def test_the_example_config_passes(config):
    assert list(check_config(config, REPO)) == ["mine"]


def test_an_empty_trace_folder_names_the_key(config, tmp_path):
    (tmp_path / "empty" / "nothing_here").mkdir(parents=True)
    (tmp_path / "empty" / "notes.md").write_text("benchmarks to come\n")
    with pytest.raises(ConfigError, match=r"datasets\.mine\.trace_dir = .* holds no vLLM benchmark run"):
        check_config(_with(config, trace_dir=str(tmp_path / "empty")), REPO)


def test_a_trace_dir_that_is_a_file_is_not_reported_missing(config, tmp_path):
    (tmp_path / "results.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"datasets\.mine\.trace_dir = .* is a file, not a folder"):
        check_config(_with(config, trace_dir=str(tmp_path / "results.json")), REPO)


@pytest.mark.parametrize("train, validate, message", [
    ({"max_num_seq": [1, 4]}, {"max_num_seqs": [8]}, r"setting 's' train\.max_num_seq: 'max_num_seq' is not a column"),
    ({"max_num_seqs": [1]}, {"model": ["llama-2-7b"]}, r"validate\.model\[0\] = 'llama-2-7b' selects no rows"),
    ({"max_num_seqs": ["one"]}, {"max_num_seqs": [8]}, r"train\.max_num_seqs\[0\] = 'one' selects no rows"),
])
def test_held_out_selectors_are_checked_against_the_runs_table(config, tmp_path, train, validate, message):
    with pytest.raises(ConfigError, match=message):
        check_config(_with(config, settings=_settings(tmp_path, train, validate)), REPO)


def test_yaml_syntax_errors_name_the_file_and_line(tmp_path):
    broken = tmp_path / "models.yaml"
    broken.write_text("opt-1.3b:\n  layers: 24\n  hidden: [2048\n")
    with pytest.raises(ConfigError, match=r"models\.yaml: YAML syntax error at line 4, column 1"):
        parse_yaml(broken)


def _snakemake_in_copy(tmp_path: Path, override: dict, edit=None) -> subprocess.CompletedProcess:
    workdir = copy_workflow(tmp_path / "repo")
    (tmp_path / "shared").symlink_to(REPO.parent / "shared")
    if edit:
        edit(workdir)
    # (A file named by --configfile is read by Snakemake before the workflow: without an override,
    # config/config.yaml is read by the Snakefile, which checks its syntax first.)
    extra = []
    if override:
        (workdir / "override.yaml").write_text(yaml.safe_dump(override))
        extra = ["--configfile", "config/config.yaml", "override.yaml"]
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "all", *extra], cwd=workdir,
                          capture_output=True, text=True)


@pytest.mark.integration
@pytest.mark.parametrize("case", ["empty_trace_dir", "selector_typo", "yaml_syntax_error"])
def test_config_errors_stop_the_workflow_before_any_job(tmp_path, case, shared_traces_dir):
    override: dict = {}
    edit = None
    if case == "empty_trace_dir":
        (tmp_path / "empty").mkdir()
        override = {"datasets": {"h100-public": {"trace_dir": str(tmp_path / "empty")}}}
        expected = "datasets.h100-public.trace_dir"
    elif case == "selector_typo":
        override = {"datasets": {"h100-public": {"settings": _settings(
            tmp_path, {"max_num_seq": [1, 4, 8]}, {"max_num_seqs": [16]})}}}
        expected = "'max_num_seq' is not a column of the runs table"
    else:
        def edit(workdir):
            path = workdir / "config" / "config.yaml"
            path.write_text(path.read_text().replace("run_datasets: [", "run_datasets: [[", 1))
        expected = "config/config.yaml: YAML syntax error at line"
    result = _snakemake_in_copy(tmp_path, override, edit)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert expected in output
    assert "Job stats" not in output


def test_the_advisor_study_is_optional_and_its_file_must_exist(config, tmp_path):
    assert check_config(config, REPO)["mine"].bca_file is None          # no `bca`: no advisor artefacts
    bca = str(REPO / "config" / "bca" / "h100-public.yaml")
    assert check_config(_with(config, bca=bca), REPO)["mine"].bca_file == Path(bca)
    with pytest.raises(ConfigError, match=r"datasets\.mine\.bca = '.*nope.yaml' does not exist"):
        check_config(_with(config, bca=str(tmp_path / "nope.yaml")), REPO)
    without_settings = _with(config, bca=bca)
    without_settings["datasets"]["mine"].pop("settings")
    with pytest.raises(ConfigError, match=r"datasets\.mine\.bca needs datasets\.mine\.settings"):
        check_config(without_settings, REPO)


def test_simulator_artefacts_need_the_simulator_section(config):
    no_simulator = copy.deepcopy(config)
    no_simulator.pop("simulator")
    assert list(check_config(no_simulator, REPO)) == ["mine"]          # real data alone needs none
    no_simulator["characterisation"] = yaml.safe_load((REPO / "config" / "config.yaml").read_text())[
        "characterisation"]
    with pytest.raises(ConfigError, match="characterisation .* add the `simulator` section"):
        check_config(no_simulator, REPO)
    simulated = copy.deepcopy(config)
    simulated.pop("simulator")
    simulated["run_datasets"] = ["mine", "simulated"]
    with pytest.raises(ConfigError, match=r"datasets\.simulated is simulated, but the config has no `simulator`"):
        check_config(simulated, REPO)
