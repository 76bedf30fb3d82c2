"""The workflow scripts' writers (slim/pipeline/io.py): an interrupted write never leaves a
half-written output, equal frames give equal bytes, a failing script's traceback lands in its rule
log, and every workflow script opens its log and writes only through these helpers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from slim.pipeline.io import write_atomic, write_csv, write_parquet, write_text

SCRIPTS = Path(__file__).resolve().parents[1] / "workflow" / "scripts"


class Interrupted(Exception):
    pass


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "runs.parquet"
    write_parquet(pd.DataFrame({"a": [1, 2]}), target)
    before = target.read_bytes()

    def half_then_fail(temporary):
        temporary.write_bytes(before[: len(before) // 2])   # a job killed mid-write
        raise Interrupted

    with pytest.raises(Interrupted):
        write_atomic(target, half_then_fail)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.parquet"]


def test_writers_create_folders_and_equal_frames_give_equal_bytes(tmp_path):
    frame = pd.DataFrame({"x": [0.1, 2.0], "y": ["a", "b"]})
    write_parquet(frame, tmp_path / "a" / "one.parquet")
    write_parquet(frame.copy(), tmp_path / "b" / "two.parquet")
    assert (tmp_path / "a" / "one.parquet").read_bytes() == (tmp_path / "b" / "two.parquet").read_bytes()
    write_csv(frame, tmp_path / "c" / "t.csv")
    assert (tmp_path / "c" / "t.csv").read_text() == "x,y\n0.1,a\n2,b\n"
    write_text("# report\n", tmp_path / "d" / "r.md")
    assert (tmp_path / "d" / "r.md").read_text() == "# report\n"
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".")]   # no temporary left


@pytest.mark.integration
def test_a_failing_script_puts_its_traceback_in_the_rule_log(tmp_path):
    # As Snakemake runs a `script:`: its own Python process; the exception ends it.
    log_path = tmp_path / "logs" / "job.log"
    script = ("from slim.pipeline.io import open_log\n"
              f"log = open_log({str(log_path)!r})\n"
              "log.info('reading the traces')\n"
              "raise ValueError('bad trace')\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 1
    assert "ValueError: bad trace" in result.stderr            # Snakemake still shows it
    text = log_path.read_text()
    assert "reading the traces" in text
    assert "CRITICAL slim: the job failed" in text and "Traceback (most recent call last)" in text
    assert "ValueError: bad trace" in text


@pytest.mark.parametrize("script", sorted(SCRIPTS.glob("*.py")), ids=lambda path: path.name)
def test_every_workflow_script_opens_its_log_and_writes_crash_safely(script):
    text = script.read_text()
    assert "open_log(snakemake.log[0])" in text
    # Outputs are written by slim.pipeline.io's writers or save_figure, never in place.
    in_place = re.findall(r"\.write_text\(|open\([^)]*[\"']w[\"']|\.savefig\(|\.to_csv\(|\.to_parquet\(", text)
    assert not in_place, f"{script.name} writes in place: {in_place}"


def test_job_specs_load_the_catalog_the_accelerator_and_no_schedules_where_sim_is_not_evaluated():
    from types import SimpleNamespace

    from slim.pipeline.io import job_specs
    from slim.specs.architecture import MODELS_FILE
    from slim.specs.hardware import HARDWARE_FILE

    job = SimpleNamespace(input=SimpleNamespace(models=str(MODELS_FILE), hardware=str(HARDWARE_FILE),
                                                sim_schedules=[], sim_constants=[]),
                          params=SimpleNamespace(hardware="h100-64gb"))
    specs = job_specs(job)
    assert specs.hardware.name == specs.hardware_table["h100-64gb"].name
    assert "opt-1.3b" in specs.catalog
    assert specs.schedules is None
    job.params.hardware = "no-such-gpu"
    with pytest.raises(Exception, match="no-such-gpu"):
        job_specs(job).hardware
