"""The headline record: the verdict artefact, re-recording, and the README's generated section."""

from __future__ import annotations

import pandas as pd
import pytest

from slim import columns as col
from slim.errors import ConfigError, SlimError
from slim.paper.headlines import headline_verdict, load_record, record_as_yaml, record_headlines
from slim.pipeline.readme import section, update_readme


def mapes(slim_throughput: float = 10.0) -> pd.DataFrame:
    return pd.DataFrame({
        col.SETTING: ["model", "model"], col.PREDICTOR: ["SLIM", "LLMVisor-Agg"], col.N_VALIDATION: [8, 8],
        col.MAPE_THROUGHPUT_PCT: [slim_throughput, 100.0], col.MAPE_E2E_PCT: [12.0, 50.0],
    })


RECORD = {"toy": {"note": "why", "tolerance_pct_points": 0.5, "slim_must_beat": {"model": ["LLMVisor-Agg"]},
                  "mape_pct": {"model": {"SLIM": {"throughput": 10.0, "e2e": 12.0}}}}}


def test_the_verdict_passes_reports_drift_and_says_when_nothing_is_recorded():
    passing = headline_verdict(mapes(), RECORD, "toy")
    assert passing.holds and passing.to_text().startswith("PASS toy: all 2 recorded")
    drifted = headline_verdict(mapes(slim_throughput=11.0), RECORD, "toy")
    assert not drifted.holds
    text = drifted.to_text()
    assert text.startswith("DRIFT toy: 1 problem") and "model/SLIM throughput MAPE 11.00% drifted" in text
    lost = headline_verdict(mapes(slim_throughput=200.0), RECORD, "toy")
    assert any("does not beat LLMVisor-Agg" in problem for problem in lost.problems)
    unrecorded = headline_verdict(mapes(), RECORD, "mine")
    assert not unrecorded.holds and unrecorded.to_text().startswith("UNRECORDED mine")


def test_a_must_beat_needs_the_paired_interval_not_just_the_point_estimate():
    def comparisons(throughput_verdict: str) -> pd.DataFrame:
        return pd.DataFrame({col.SETTING: "model", col.PREDICTOR: "SLIM", col.OTHER_PREDICTOR: "LLMVisor-Agg",
                             col.METRIC: ["throughput", "e2e"], col.VERDICT: [throughput_verdict, "better"]})

    assert headline_verdict(mapes(), RECORD, "toy", comparisons("better")).holds
    withheld = headline_verdict(mapes(), RECORD, "toy", comparisons("undecided"))
    assert withheld.problems == ("model: SLIM throughput MAPE 10.00% beats LLMVisor-Agg (100.00%) only within the "
                                 "bootstrap interval of the difference",)


def test_recording_keeps_tolerance_notes_and_claims_and_round_trips(tmp_path):
    updated = record_headlines(RECORD, {"toy": mapes(slim_throughput=11.0), "mine": mapes()})
    assert updated["toy"]["note"] == "why" and updated["toy"]["slim_must_beat"] == {"model": ["LLMVisor-Agg"]}
    assert updated["toy"]["mape_pct"]["model"]["SLIM"] == {"throughput": 11.0, "e2e": 12.0}
    assert updated["mine"]["tolerance_pct_points"] == 0.5 and "note" not in updated["mine"]
    path = tmp_path / "headlines.yaml"
    path.write_text(record_as_yaml(updated))
    assert load_record(path) == updated
    assert headline_verdict(mapes(slim_throughput=11.0), load_record(path), "toy").holds


def test_a_broken_record_names_the_file(tmp_path):
    path = tmp_path / "headlines.yaml"
    path.write_text("toy: [unclosed\n")
    with pytest.raises(ConfigError, match="headlines.yaml: not valid YAML"):
        load_record(path)
    with pytest.raises(ConfigError, match="not found"):
        load_record(tmp_path / "missing.yaml")


def test_the_readme_section_is_updated_only_on_request(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results:start -->\nold\n<!-- results:end -->\nouttro\n")
    generated = tmp_path / "readme_results.md"
    with pytest.raises(SlimError, match="does not exist"):
        update_readme(readme, generated)
    generated.write_text("new table\n")
    assert update_readme(readme, generated)
    assert readme.read_text() == "intro\n<!-- results:start -->\nnew table\n<!-- results:end -->\nouttro\n"
    assert section(readme.read_text(), "results") == "new table"
    assert not update_readme(readme, generated)


def test_sim_must_beat_is_checked_and_kept():
    table = pd.concat([mapes(), pd.DataFrame({col.SETTING: ["model"], col.PREDICTOR: ["SIM"], col.N_VALIDATION: [8],
                                              col.MAPE_THROUGHPUT_PCT: [8.0], col.MAPE_E2E_PCT: [13.0]})],
                      ignore_index=True)
    record = {"toy": dict(RECORD["toy"], sim_must_beat={"model": ["SLIM", "LLMVisor-Agg"]})}
    problems = headline_verdict(table, record, "toy").problems
    assert problems == ("model: SIM e2e MAPE 13.00% does not beat SLIM (12.00%)",)
    assert record_headlines(record, {"toy": table})["toy"]["sim_must_beat"] == {"model": ["SLIM", "LLMVisor-Agg"]}
