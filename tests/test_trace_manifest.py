"""Results notice changed traces: the manifest ingest depends on (slim/pipeline/manifest.py) changes
with any trace file and only then, so `snakemake -n` plans ingest after an edit deep in a run
directory or a new run directory, and nothing after a plain rerun."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slim.pipeline.manifest import HEADER, trace_manifest, update_trace_manifest

REPO = Path(__file__).resolve().parents[1]
LAYOUT = REPO / "tests" / "data" / "formats" / "bench_serve_metadata"


def test_the_manifest_lists_every_trace_file_and_is_rewritten_only_when_it_changes(tmp_path):
    traces = tmp_path / "traces"
    shutil.copytree(LAYOUT, traces)
    (traces / "max_num_seqs_8" / "._resource_fork").write_text("skipped, as ingest skips it")
    manifest = tmp_path / "results" / "manifest.tsv"
    update_trace_manifest(traces, manifest)
    lines = manifest.read_text().splitlines()
    assert lines[0] == HEADER
    listed = {line.split("\t")[0] for line in lines[1:]}
    assert listed == {p.relative_to(traces).as_posix() for p in traces.rglob("*")
                      if p.is_file() and not p.name.startswith(".")}
    before = manifest.stat().st_mtime_ns
    os.utime(manifest, ns=(before - 10**9, before - 10**9))
    update_trace_manifest(traces, manifest)                       # nothing changed: not rewritten
    assert manifest.stat().st_mtime_ns == before - 10**9
    result = next(traces.glob("max_num_seqs_8/*.json"))
    result.write_text(result.read_text() + " ")
    assert trace_manifest(traces) != manifest.read_text()
    update_trace_manifest(traces, manifest)
    assert manifest.stat().st_mtime_ns > before - 10**9


def _snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "snakemake", *args, "results/mine/runs.parquet",
                             "--configfile", "config/config.yaml", "override.yaml"],
                            cwd=workdir, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _plans_ingest(workdir: Path) -> bool:
    output = _snakemake(workdir, "-n").stdout
    return "rule ingest:" in output or "localrule ingest:" in output


@pytest.mark.integration
def test_snakemake_plans_ingest_when_a_trace_file_changes_or_a_run_is_added(tmp_path, shared_traces_dir):
    workdir, traces = tmp_path / "repo", tmp_path / "traces"
    workdir.mkdir()
    for item in ("Snakefile", "workflow", "config", "profiles", "environment.yml"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, workdir / item)
    (tmp_path / "shared").symlink_to(shared_traces_dir.parents[1])
    shutil.copytree(LAYOUT, traces / "sweep")                          # run directories two levels down
    override = {"run_datasets": ["mine"], "default_dataset": "mine",
                "datasets": {"mine": {"kind": "real", "trace_dir": str(traces), "hardware": "h100-64gb",
                                      "models": ["opt-1.3b"]}}}
    (workdir / "override.yaml").write_text(yaml.safe_dump(override))

    _snakemake(workdir, "--cores", "1")
    assert not _plans_ingest(workdir)                                   # up to date

    deep = next(traces.glob("sweep/max_num_seqs_8/*.json"))             # editing a file changes no
    deep.write_text(deep.read_text().replace('"failed": 0', '"failed": 0 '))   # folder's mtime
    assert _plans_ingest(workdir)
    _snakemake(workdir, "--cores", "1")
    assert not _plans_ingest(workdir)

    root_mtime = traces.stat().st_mtime_ns
    shutil.copytree(traces / "sweep" / "max_num_seqs_8", traces / "sweep" / "max_num_seqs_8_again")   # a new run
    assert traces.stat().st_mtime_ns == root_mtime                        # the trace root's time did not change
    assert _plans_ingest(workdir)
