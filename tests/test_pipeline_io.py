"""The workflow scripts' writers (slim/pipeline/io.py): an interrupted write never leaves a
half-written output, and equal frames give equal bytes."""

from __future__ import annotations

import logging

import pandas as pd
import pytest

from slim.pipeline.io import logged_errors, open_log, write_atomic, write_csv, write_parquet, write_text


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
    assert not list(tmp_path.rglob("*.tmp"))


def test_logged_errors_puts_the_traceback_in_the_rule_log(tmp_path):
    log_path = tmp_path / "logs" / "job.log"
    logger = open_log(log_path)
    with pytest.raises(ValueError, match="bad trace"):
        with logged_errors(logger):
            raise ValueError("bad trace")
    for handler in logging.getLogger().handlers:
        handler.flush()
    text = log_path.read_text()
    logging.basicConfig(handlers=[logging.NullHandler()], force=True)   # leave logging as other tests expect
    logging.captureWarnings(False)
    assert "Traceback (most recent call last)" in text and "ValueError: bad trace" in text
