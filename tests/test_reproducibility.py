"""Two runs of the pipeline from clean results give byte-identical tables and figures."""

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import copy_workflow

pytestmark = pytest.mark.integration   # the pipeline twice, by Snakemake

REPO = Path(__file__).resolve().parents[1]
TARGETS = ("figures/h100-public/table3.tex", "figures/h100-public/table4.tex", "results/h100-public/table3.csv",
           "figures/h100-public/table3.html", "results/h100-public/mape_comparisons.csv",
           "results/h100-public/mape_reduction.csv",
           "results/h100-public/cleaning_report.csv", "figures/h100-public/fig9.png", "figures/h100-public/fig9.pdf",
           "results/h100-public/baseline_sensitivity.csv", "results/h100-public/baseline_sensitivity.html")


def _run_pipeline(workdir: Path, traces: Path) -> dict[str, str]:
    copy_workflow(workdir)
    override = {"run_datasets": ["h100-public"], "default_dataset": "h100-public",
                "datasets": {"h100-public": {"trace_dir": str(traces / "output_length")}}}
    (workdir / "override.yaml").write_text(yaml.safe_dump(override))
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", *TARGETS, "--cores", "2",
         "--configfile", "config/config.yaml", "override.yaml"], cwd=workdir, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return {target: hashlib.sha256((workdir / target).read_bytes()).hexdigest() for target in TARGETS}


def test_tables_and_figures_are_byte_identical_across_runs(tmp_path, shared_traces_dir):
    first = _run_pipeline(tmp_path / "first", shared_traces_dir)
    second = _run_pipeline(tmp_path / "second", shared_traces_dir)
    assert first == second
