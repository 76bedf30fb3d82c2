"""A user's own dataset, end to end (the snakemake-workflows `.test/` convention, under tests/data/):
tests/data/user_dataset/config.yaml gives only kind, trace_dir, hardware, models and settings, and
`snakemake all` builds every artefact such a dataset supports, with no other file, from a copy of
the workflow; a job that fails leaves its traceback in its rule log."""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import copy_workflow, load_data_generator

REPO = Path(__file__).resolve().parents[1]
USER_DATASET = REPO / "tests" / "data" / "user_dataset"
CONFIGFILE = "tests/data/user_dataset/config.yaml"

load_data_generator("make_layouts")          # the generator below reuses its made-up server
GENERATOR = load_data_generator("make_user_dataset")


def _snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", *args, "--configfile", CONFIGFILE,
                           "--replace-workflow-config"], cwd=workdir, capture_output=True, text=True, timeout=300)


def test_committed_runs_equal_their_generator(tmp_path):
    GENERATOR.build(tmp_path)
    generated = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(p.relative_to(GENERATOR.TRACES) for p in GENERATOR.TRACES.rglob("*") if p.is_file())
    assert generated == committed and len(generated) == 24, "rerun tests/data/make_user_dataset.py"
    assert all(filecmp.cmp(tmp_path / path, GENERATOR.TRACES / path, shallow=False) for path in generated)


def test_the_config_gives_only_what_a_user_must():
    config = yaml.safe_load((USER_DATASET / "config.yaml").read_text())
    assert set(config) == {"default_dataset", "run_datasets", "datasets"}
    assert set(config["datasets"]["mine"]) == {"kind", "trace_dir", "hardware", "models", "settings"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    workdir = copy_workflow(tmp_path_factory.mktemp("user") / "repo")
    shutil.copytree(USER_DATASET, workdir / "tests" / "data" / "user_dataset")
    result = _snakemake(workdir, "--cores", "2", "all")
    assert result.returncode == 0, result.stderr[-4000:]
    return workdir


@pytest.mark.integration
def test_all_builds_every_artefact_the_dataset_supports(built):
    figures = built / "figures" / "mine"
    expected = {"table3.tex", "table3_paper.tex", "table4.tex", "fig2.pdf", "fig2.png", "fig9.pdf", "fig9.png",
                "fig10.pdf", "fig10.png"}
    rendered = {"table3.html", "table4.html"}   # for the report; not copied to the top of figures/
    assert {path.name for path in figures.iterdir()} == expected | rendered   # no advisor study: no `bca` key
    assert expected <= {path.name for path in (built / "figures").iterdir()}   # the default dataset's copies
    assert (built / "results" / "readme_results.md").read_text().startswith("Table III on **mine (real)** data")
    assert (built / "results" / "mine" / "headline_check.txt").read_text().startswith("UNRECORDED mine")
    assert not (built / "raw_traces" / "simulated").exists()            # no simulator section, no simulation


@pytest.mark.integration
def test_tables_are_built_from_the_users_settings(built):
    mapes = pd.read_csv(built / "results" / "mine" / "table3.csv")
    assert set(mapes["setting"]) == {"same_curve_all", "model_short", "model_long"}
    same_curve = mapes[(mapes["setting"] == "same_curve_all") & (mapes["predictor"] == "SLIM")].iloc[0]
    assert same_curve["mape_throughput_pct"] < 5.0
    summary = (built / "results" / "mine" / "table3.md").read_text()
    ours = summary.split("Table III on")[1].split("\n\n")[1]
    paper = summary.split("The paper's Table III")[1].split("\n\n")[1]
    ablation = summary.split("Ablation (Table IV)")[1].split("\n\n")[1]
    for table in (ours, ablation):   # Table IV: every setting (none is marked)
        assert "| Model (OPT-2.7B, OL 128) |" in table and "| Model (OPT-2.7B, OL 256) |" in table
    # The paper's table keeps both model rows (their labels share the prefix "Model").
    assert "| Model (OPT-2.7B, OL 128) |" in paper and "| Model (OPT-2.7B, OL 256) |" in paper
    assert "setting 'model_short'" in (built / "logs" / "mine" / "figures.log").read_text()


@pytest.mark.integration
def test_a_rerun_does_nothing_and_a_failing_job_logs_its_traceback(built):
    assert "Nothing to be done" in _snakemake(built, "-n", "all").stdout
    (built / "results" / "mine" / "evaluation" / "model_short.parquet").write_text("not a parquet file\n")
    failed = _snakemake(built, "--cores", "1", "figures/mine/fig10.pdf", "--forcerun", "dataset_figures_mine")
    assert failed.returncode != 0
    log = (built / "logs" / "mine" / "figures.log").read_text()
    assert "CRITICAL slim: the job failed" in log and "Traceback (most recent call last)" in log
