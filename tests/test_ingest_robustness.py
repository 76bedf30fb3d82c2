"""Ingest survives every broken or unusual run directory (tests/data/make_robust_corpus.py): each
gets its expected status and file at fault, none crashes ingest and none is left out; an
unforeseen failure in one directory costs that directory only, with its traceback in the log."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import load_data_generator

from slim import columns as col
from slim.specs.architecture import MODELS_FILE, load_architectures
from slim.traces import ingest
from slim.traces.ingest import REASON_CODES, ingest_traces

REPO = Path(__file__).resolve().parents[1]
MODELS = MODELS_FILE


GENERATOR = load_data_generator("make_robust_corpus")
IS_ROOT = os.geteuid() == 0


def _make_removable(function, path, _excinfo) -> None:
    os.chmod(path, stat.S_IRWXU)
    function(path)


@pytest.fixture(scope="module")
def corpus():
    """The corpus, in a folder an unprivileged reader can reach (pytest's own tmp folders are 0700)."""
    base = Path(tempfile.mkdtemp(prefix="slim-robust-corpus-"))
    os.chmod(base, 0o755)
    cases = GENERATOR.build_corpus(base / "corpus")
    yield base / "corpus", cases
    for path in base.rglob("*"):
        if not path.is_symlink():
            os.chmod(path, stat.S_IRWXU)
    shutil.rmtree(base, onerror=_make_removable)


@pytest.fixture(scope="module")
def ingested(corpus):
    root, _ = corpus
    return ingest_traces(root, "robust", load_architectures(MODELS)).set_index(col.RUN_ID)


def test_the_corpus_has_sixty_cases_of_every_class(corpus):
    _, cases = corpus
    assert len(cases) >= 60
    statuses = {case.status for case in cases.values()}
    assert statuses <= set(REASON_CODES)
    assert {"unreadable", "corrupt", "invalid_values", "implausible", "hardware_error", "preempted",
            "out_of_memory", "failed_unknown", "missing_metrics", "ok"} <= statuses
    assert sum(case.unprivileged for case in cases.values()) >= 4


def test_no_directory_is_dropped_and_none_crashes_ingest(corpus, ingested):
    _, cases = corpus
    assert set(ingested.index) == set(cases)            # one row per case directory, nothing else
    assert not ingested[col.STATUS].eq("ingest_error").any()


@pytest.mark.parametrize("name", sorted(case.name for case in GENERATOR.CASES))
def test_each_case_gets_its_status_and_file_at_fault(name, corpus, ingested):
    case = corpus[1][name]
    if case.unprivileged and IS_ROOT:
        pytest.skip("root reads every file; checked as nobody in test_unreadable_files_for_an_unprivileged_reader")
    row = ingested.loc[name]
    assert row[col.STATUS] == case.status, row[col.REASON_DETAIL]
    if case.fault_file is not None:
        assert row[col.FAULT_FILE] == case.fault_file, row[col.REASON_DETAIL]
    if case.status != "ok":
        assert row[col.REASON_DETAIL]


_UNPRIVILEGED_INGEST = """
import json, sys
from slim.specs.architecture import load_architectures
from slim.traces.ingest import ingest_traces
runs = ingest_traces(sys.argv[1], "robust", load_architectures(sys.argv[2]))
print(json.dumps({r: [s, f] for r, s, f in zip(runs.run_id, runs.status, runs.fault_file)}))
"""


def _require_interpreter_readable_by_nobody(drop_privileges: list[str]) -> None:
    """Skip, naming the folder, when `nobody` cannot import this interpreter's packages.

    A virtualenv under a private folder (root's home, a 0700 mktemp directory) is unreadable to
    `nobody`; that is the environment's limit, not ingest's. `.ci/run` opens its folder to others.
    """
    probe = subprocess.run([*drop_privileges, sys.executable, "-c", "import numpy, pandas"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"`nobody` cannot import numpy/pandas from {sys.prefix} (a private folder?): "
                    f"{probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else probe.returncode}")


@pytest.mark.integration
def test_unreadable_files_for_an_unprivileged_reader(corpus):
    """Every case, permission ones included, as a reader without root's override: `nobody`."""
    root, cases = corpus
    command = [sys.executable, "-c", _UNPRIVILEGED_INGEST, str(root), str(MODELS)]
    if IS_ROOT:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot drop privileges to read as nobody")
        command = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *command]
        _require_interpreter_readable_by_nobody(command[:4])
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(result.stdout)
    assert set(rows) == set(cases)
    wrong = {name: rows[name] for name, case in cases.items()
             if rows[name][0] != case.status or (case.fault_file is not None and rows[name][1] != case.fault_file)}
    assert wrong == {}


def test_one_crashing_directory_costs_only_that_directory(corpus, ingested, monkeypatch, caplog):
    root, cases = corpus
    real_verdict = ingest.ResultRow.verdict

    def verdict(self):
        if self.evidence.files.directory.name == "good_public_layout":
            raise KeyError("a parser bug nobody foresaw")
        return real_verdict(self)

    monkeypatch.setattr(ingest.ResultRow, "verdict", verdict)
    with caplog.at_level(logging.ERROR, logger="slim.traces.ingest"):
        runs = ingest_traces(root, "robust", load_architectures(MODELS)).set_index(col.RUN_ID)
    assert runs.loc["good_public_layout", col.STATUS] == "ingest_error"
    assert "KeyError" in runs.loc["good_public_layout", col.REASON_DETAIL]
    others = [name for name in cases if name != "good_public_layout"]
    assert runs.loc[others, col.STATUS].to_dict() == ingested.loc[others, col.STATUS].to_dict()
    assert runs.loc["good_public_layout_larger_cap", col.STATUS] == "ok"
    record = next(r for r in caplog.records if "good_public_layout" in r.getMessage())
    assert record.exc_info is not None   # the traceback goes to the rule's log


def test_one_reading_of_a_number_for_every_trace_format():
    import math

    from slim.traces.values import number

    assert number(3) == 3.0 and number("2.5") == 2.5
    assert math.isnan(number(True)) and math.isnan(number("x")) and math.isnan(number([1]))
    assert math.isnan(number(10 ** 400)) and math.isnan(number(None)) and number(None, default=0.0) == 0.0
