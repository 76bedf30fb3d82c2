"""The Snakemake workflow: lint, dry run, and config errors that stop before any job runs."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def _snakemake(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True)


def test_lint_is_clean(shared_traces_dir):
    result = _snakemake("--lint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Congratulations" in result.stdout + result.stderr


def test_dry_run_of_all_plans_every_stage(shared_traces_dir):
    result = _snakemake("-n", "all", "--forceall")
    assert result.returncode == 0, result.stdout + result.stderr
    for rule in ("ingest", "clean"):
        assert rule in result.stdout
    planned = {path.strip() for line in result.stdout.splitlines() if line.strip().startswith("output:")
               for path in line.split(":", 1)[1].split(",")}
    paper_artefacts = [f"figures/fig{number}.{ext}" for number in (1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13)
                       for ext in ("pdf", "png")]
    paper_artefacts += [f"figures/table{number}.tex" for number in (1, 3, 4, 5, 6)] + ["figures/table_fig11.tex"]
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
    ],
)
def test_a_wrong_config_fails_before_any_job_naming_the_key(tmp_path, override, expected_message, shared_traces_dir):
    override_file = tmp_path / "override.yaml"
    override_file.write_text(yaml.safe_dump(override))
    result = _snakemake("-n", "all", "--configfile", "config/config.yaml", str(override_file))
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert expected_message in output
    assert "Job stats" not in output  # nothing was scheduled
