"""The Snakemake workflow: lint, formatting, dry runs (default and Slurm profiles), provenance of the
config files, config errors that stop before any job runs, and the config documentation."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow

from slim.specs.architecture import MODELS_FILE
from slim.specs.hardware import HARDWARE_FILE

REPO = Path(__file__).resolve().parents[1]


def _snakemake(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.integration
def test_lint_is_clean(shared_traces_dir):
    result = _snakemake("--lint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Congratulations" in result.stdout + result.stderr


@pytest.mark.integration
def test_dry_run_of_all_plans_every_stage(shared_traces_dir):
    result = _snakemake("-n", "all", "--forceall")
    assert result.returncode == 0, result.stdout + result.stderr
    stages = {"simulate", "ingest", "evaluate_simulated", "evaluate_h100_public", "bca_study_simulated",
              "dataset_figures_simulated", "readme_results", "readme_headline"}
    assert stages <= _planned_rules(result.stdout)
    planned = {path.strip() for line in result.stdout.splitlines() if line.strip().startswith("output:")
               for path in line.split(":", 1)[1].split(",")}
    paper_artefacts = [f"figures/fig{number}.{ext}" for number in (1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13)
                       for ext in ("pdf", "png")]
    paper_artefacts += [f"figures/table{number}.tex" for number in (1, 3, 4, 5, 6)] + ["figures/table_fig11.tex"]
    paper_artefacts += [f"results/{dataset}/baseline_sensitivity.{ext}" for dataset in ("simulated", "h100-public")
                        for ext in ("csv", "html", "md")]
    paper_artefacts += ["results/readme_results.md", "results/readme_headline.md"]
    assert not [path for path in paper_artefacts if path not in planned]


@pytest.mark.parametrize(
    "override, expected_message",
    [
        ({"datasets": {"h100-public": {"trace_dir": "no/such/folder"}}}, "datasets.h100-public.trace_dir"),
        ({"datasets": {"h100-public": {"models": ["opt-1.3b", "gpt-9"]}}}, "datasets.h100-public.models[1]"),
        ({"datasets": {"h100-public": {"kind": "imaginary"}}}, "imaginary"),
        ({"clean": {"keep_preempted": "sometimes"}}, "keep_preempted"),
        ({"run_datasets": ["nonexistent"]}, "run_datasets[0]"),
        ({"batch_scaling": {"datasets": ["h100-public-sharegpt", "nope"]}}, "batch_scaling.datasets[1]"),
        ({"batch_scaling": {"output_len": {"h100-public": 130}}}, "batch_scaling.output_len.h100-public"),
        ({"characterisation": {"model": "gpt-9"}}, "characterisation.model"),
        ({"length_sweeps": {"models": {"h100-public": ["opt-6.7b"]}}}, "length_sweeps.models.h100-public[0]"),
        ({"characterisation": {"sweeps": {"batch_size": [4]}}}, "batch_size"),
        ({"generalisation": {"target_models": ["llama-2-7b"]}}, "generalisation.target_models[0]"),
        ({"beyond_paper": {"datasets": {"nvidia": []}}}, "beyond_paper.datasets.nvidia"),
        ({"beyond_paper": {"datasets": {"llm-inference-bench": ["mixtral-8x8b"]}}},
         "beyond_paper.datasets.llm-inference-bench[0]"),
        ({"beyond_paper": {"layout_replay": {"seeds": 1, "slo_kinds": {"nvidia": {"tpot": []}}}}},
         "beyond_paper.layout_replay.slo_kinds.nvidia"),
        ({"beyond_paper": {"layout_replay": {"seeds": 1, "slo_kinds": {"aiconfigurator-h100": {
            "fast": ["mean_tpot_ms=quick"]}}}}}, "beyond_paper.layout_replay.slo_kinds.aiconfigurator-h100.fast"),
        ({"beyond_paper": {"frontiers": ["aiconfigurator-h100", "h100-public"]}}, "beyond_paper.frontiers[1]"),
    ],
)
@pytest.mark.integration
def test_a_wrong_config_fails_before_any_job_naming_the_key(tmp_path, override, expected_message, shared_traces_dir):
    override_file = tmp_path / "override.yaml"
    override_file.write_text(yaml.safe_dump(override))
    result = _snakemake("-n", "all", "--configfile", "config/config.yaml", str(override_file))
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert expected_message in output
    assert "Job stats" not in output  # nothing was scheduled


@pytest.mark.integration
def test_snakefmt_finds_nothing_to_change():
    result = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "Snakefile", "workflow/rules"], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.integration
def test_the_default_workflow_profile_is_used(shared_traces_dir):
    # Snakemake reads profiles/default on every run: rerun-incomplete recovers a killed run.
    assert yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())["rerun-incomplete"] is True
    result = _snakemake("-n", "all")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "workflow specific profile profiles/default" in result.stderr


@pytest.mark.integration
def test_the_slurm_profile_dry_runs_all(shared_traces_dir):
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert profile["executor"] == "slurm"   # needs snakemake-executor-plugin-slurm (the test extra)
    result = _snakemake("--profile", "profiles/slurm", "-n", "all", "--forceall")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Using profiles profiles/slurm" in result.stderr
    # Every cluster job carries the memory and run time its rule declares.
    jobs = result.stdout.split("\nrule ")[1:]
    assert jobs and all("mem_mb=" in job and "runtime=" in job for job in jobs)


def _planned_rules(output: str) -> set[str]:
    return set(re.findall(r"^(?:local)?rule (\w+):", output, re.M))


@pytest.mark.integration
def test_editing_the_models_file_plans_the_jobs_that_read_it(tmp_path, shared_traces_dir):
    # A copy of the workflow whose every output exists and is up to date (created empty,
    # then marked with --touch); a change to the models file must plan every rule that
    # reads it, because the models file is a rule input, not a param.
    workdir = copy_workflow(tmp_path / "repo")
    (tmp_path / "shared").symlink_to(shared_traces_dir.parents[1])
    (workdir / "catalogs").mkdir()
    for catalog in (MODELS_FILE, HARDWARE_FILE):
        shutil.copy(catalog, workdir / "catalogs" / catalog.name)
    with (workdir / "config" / "config.yaml").open("a") as config:
        config.write("models_file: catalogs/models.yaml\nhardware_file: catalogs/hardware.yaml\n")
    planned = _snakemake("-n", "all", "--forceall", cwd=workdir)
    assert planned.returncode == 0, planned.stderr[-3000:]
    outputs = {path.strip() for line in planned.stdout.splitlines() if line.strip().startswith("output:")
               for path in line.split(":", 1)[1].split(",")}
    for output in outputs:
        path = workdir / output
        if output == "raw_traces/simulated" or output.endswith("frontiers"):   # the directory() outputs
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    touched = _snakemake("--touch", "--cores", "1", "all", cwd=workdir)
    assert touched.returncode == 0, touched.stderr[-3000:]
    assert _planned_rules(_snakemake("-n", "all", cwd=workdir).stdout) == set()
    models = workdir / "catalogs" / "models.yaml"
    models.write_text(models.read_text() + "# edited\n")
    replanned = _snakemake("-n", "all", cwd=workdir)
    assert replanned.returncode == 0, replanned.stderr[-3000:]
    readers = {"simulate", "calibrate_simulator", "ingest", "evaluate_simulated", "evaluate_h100_public",
               "bca_study_simulated", "bca_study_h100_public", "generalisation", "modelled_characterisation", "table1"}
    assert readers <= _planned_rules(replanned.stdout)


def _schema_key_paths(node: dict, prefix: str = "") -> list[str]:
    """Dotted paths of every key a config schema defines; a mapping of names is ``<name>``."""
    paths = []
    for key, child in node.get("properties", {}).items():
        paths.append(prefix + key)
        paths += _schema_key_paths(child, f"{prefix}{key}.")
    names = node.get("additionalProperties")
    if isinstance(names, dict) and "properties" in names:
        paths += _schema_key_paths(names, f"{prefix}<name>.")
    return paths


def test_config_readme_documents_every_key_of_the_schema():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    readme = (REPO / "config" / "README.md").read_text()
    section = readme.split("## `config/config.yaml`", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `([^`]+)` \|", section, re.M)
    assert len(documented) == len(set(documented))
    assert set(documented) == set(_schema_key_paths(schema))


@pytest.mark.integration
def test_the_accuracy_beyond_the_paper_is_planned_with_its_overlay_and_explained_without(shared_traces_dir):
    for name in ("aiconfigurator-silicon", "llm-inference-bench"):
        if not (shared_traces_dir.parent / name).is_dir():
            pytest.skip(f"{shared_traces_dir.parent / name} not present")
    result = _snakemake("-n", "beyond_paper", "--configfile", "config/config.yaml", "config/beyond_paper.yaml",
                        "--forceall")
    assert result.returncode == 0, result.stdout + result.stderr
    planned = _planned_rules(result.stdout)
    assert {"ingest", "beyond_paper_accuracy", "layout_replay", "beyond_paper_frontiers"} <= planned
    assert "output: results/beyond_paper/frontiers\n" in result.stdout
    without = _snakemake("-n", "beyond_paper")
    assert without.returncode != 0
    assert "config/beyond_paper.yaml" in without.stdout + without.stderr
