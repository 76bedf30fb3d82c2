"""Cleaning: duplicates, the preempted-runs policy and the cleaning report (slim/traces/clean.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from slim import columns as col
from slim.specs.architecture import MODELS_FILE, load_architectures
from slim.traces.clean import DUPLICATE_KEY, CleaningPolicy, clean_runs, mark_duplicates, summarise_report
from slim.traces.ingest import REASON_CODES, ingest_traces

REPO = Path(__file__).resolve().parents[1]
BROKEN = REPO / "tests" / "data" / "broken_runs"


@pytest.fixture(scope="module")
def corpus_runs() -> pd.DataFrame:
    return ingest_traces(BROKEN, "broken", load_architectures(MODELS_FILE))


@pytest.fixture(scope="module")
def expected() -> dict[str, str]:
    with open(BROKEN / "EXPECTED.csv", newline="") as handle:
        return {row["run_id"]: row["status"] for row in csv.DictReader(handle)}


def _run(run_id: str, status: str = "ok", max_num_seqs: float = 8, model: str = "opt-1.3b") -> dict:
    return {col.DATASET: "d", col.RUN_ID: run_id, col.MODEL: model, col.INPUT_LEN_NOMINAL: 242.0,
            col.OUTPUT_LEN_NOMINAL: 130.0, col.MAX_NUM_SEQS: max_num_seqs, col.NUM_PROMPTS: 2000.0,
            col.STATUS: status, col.REASON_DETAIL: "" if status == "ok" else "why", col.FAULT_FILE: ""}


# ---------------------------------------------------------------- on the corpus

def test_report_has_one_row_per_run_with_the_expected_status(corpus_runs, expected):
    _, report = clean_runs(corpus_runs)
    assert len(report) == len(corpus_runs) == len(expected)
    assert report[col.RUN_ID].is_unique
    assert dict(zip(report[col.RUN_ID], report[col.STATUS])) == expected


def test_every_status_has_a_reason_code_entry(corpus_runs):
    for policy in (CleaningPolicy(), CleaningPolicy(keep_preempted=True)):
        _, report = clean_runs(corpus_runs, policy)
        assert set(report[col.STATUS]) <= set(REASON_CODES)
        assert report.loc[report[col.STATUS] != "ok", col.REASON_DETAIL].str.len().gt(0).all()


def test_duplicate_pair_keeps_the_first_by_path(corpus_runs):
    usable, report = clean_runs(corpus_runs)
    second = report.set_index(col.RUN_ID).loc["duplicate_b"]
    assert second[col.STATUS] == "duplicate" and not second["kept"]
    assert second[col.REASON_DETAIL] == "same configuration as duplicate_a"
    assert "duplicate_a" in set(usable[col.RUN_ID]) and "duplicate_b" not in set(usable[col.RUN_ID])


def test_default_policy_keeps_only_ok_runs(corpus_runs, expected):
    usable, report = clean_runs(corpus_runs)
    assert set(usable[col.RUN_ID]) == {run_id for run_id, status in expected.items() if status == "ok"}
    assert usable[col.STATUS].eq("ok").all()
    assert report["kept"].sum() == len(usable)
    assert list(report.columns) == [col.DATASET, col.RUN_ID, col.MODEL, col.MAX_NUM_SEQS,
                                    col.OUTPUT_LEN_NOMINAL, col.STATUS, col.REASON_DETAIL, col.FAULT_FILE,
                                    col.BENCHMARK_MODE, col.HARDWARE, col.TENSOR_PARALLEL, col.INPUT_LEN_NOMINAL,
                                    col.N_MEASUREMENTS, col.MEASUREMENT_SPREAD_PCT, col.INPUT_LEN_MEAN,
                                    col.OUTPUT_LEN_MEAN, "kept"]
    # The usable table keeps every ingested column.
    assert list(usable.columns) == list(corpus_runs.columns)


def test_keep_preempted_policy(corpus_runs):
    usable, report = clean_runs(corpus_runs, CleaningPolicy(keep_preempted=True))
    statuses = report.set_index(col.RUN_ID)[col.STATUS]
    assert {"preempted", "rerun_after_preemption_a"} <= set(usable[col.RUN_ID])
    # The same configuration was rerun without preemption: now the preempted first run is kept
    # and the rerun is its duplicate.
    assert statuses["rerun_after_preemption_b"] == "duplicate"
    default_usable, _ = clean_runs(corpus_runs)
    assert len(usable) == len(default_usable) + 2 - 1


def test_a_dropped_preempted_run_does_not_displace_a_kept_rerun(corpus_runs):
    usable, report = clean_runs(corpus_runs)
    statuses = report.set_index(col.RUN_ID)[col.STATUS]
    assert statuses["rerun_after_preemption_a"] == "preempted"
    assert statuses["rerun_after_preemption_b"] == "ok"
    assert "rerun_after_preemption_b" in set(usable[col.RUN_ID])


def test_cleaning_does_not_modify_its_input(corpus_runs):
    before = corpus_runs.copy()
    clean_runs(corpus_runs)
    pd.testing.assert_frame_equal(corpus_runs, before)


# ---------------------------------------------------------------- on hand-made tables

def test_mark_duplicates_first_by_run_id_regardless_of_row_order():
    runs = pd.DataFrame([_run("c"), _run("a"), _run("b"), _run("d", max_num_seqs=16)])
    marked = mark_duplicates(runs).set_index(col.RUN_ID)[col.STATUS]
    assert marked.to_dict() == {"c": "duplicate", "a": "ok", "b": "duplicate", "d": "ok"}


def test_mark_duplicates_ignores_failed_runs_and_other_models():
    runs = pd.DataFrame([_run("a", status="corrupt"), _run("b"), _run("c", model="opt-2.7b"),
                         _run("d", status="server_start_failed")])
    marked = mark_duplicates(runs).set_index(col.RUN_ID)[col.STATUS]
    assert marked.to_dict() == {"a": "corrupt", "b": "ok", "c": "ok", "d": "server_start_failed"}


def test_every_duplicate_key_column_separates_configurations():
    base = _run("a")
    for column in DUPLICATE_KEY:
        other = dict(base, **{col.RUN_ID: "b", column: "x" if column == col.MODEL else 1.0})
        assert set(mark_duplicates(pd.DataFrame([base, other]))[col.STATUS]) == {"ok"}, column


def test_clean_runs_on_an_empty_table():
    usable, report = clean_runs(pd.DataFrame(columns=list(_run("a"))))
    assert usable.empty and report.empty and "kept" in report.columns


# ---------------------------------------------------------------- summary markdown

def test_summary_markdown(corpus_runs, expected):
    _, report = clean_runs(corpus_runs)
    text = summarise_report(report, "broken")
    lines = text.splitlines()
    assert lines[0] == "# Cleaning report: broken"
    n_ok = sum(status == "ok" for status in expected.values())
    assert f"{len(expected)} run directories found, {n_ok} kept." in lines
    for status in set(expected.values()):
        count = sum(s == status for s in expected.values())
        assert f"| {status} | {count} | {REASON_CODES[status]} |" in lines
    # Kept runs per curve: all kept corpus runs are OPT-1.3B; mixed_formats has output length 50.
    assert "| opt-1.3b | 50 | 1 |" in lines
    assert f"| opt-1.3b | 130 | {n_ok - 1} |" in lines
    assert text.endswith("\n")


def test_summary_markdown_with_nothing_kept():
    report = pd.DataFrame([_run("a", status="corrupt")])[
        [col.DATASET, col.RUN_ID, col.MODEL, col.MAX_NUM_SEQS, col.OUTPUT_LEN_NOMINAL, col.STATUS,
         col.REASON_DETAIL, col.FAULT_FILE]]
    report["kept"] = False
    text = summarise_report(report, "d")
    assert "1 run directories found, 0 kept." in text
    assert "Kept runs per model" not in text
