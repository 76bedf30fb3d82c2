"""The headline record (the verdict artefact, re-recording), the README's headline table and the generated
sections of README.md and docs/results.md."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import REPO

from slim import columns as col
from slim.errors import ConfigError, SlimError
from slim.paper.headline_table import ABSENT, DatasetHeadline, headline_table
from slim.paper.headlines import headline_verdict, load_record, record_as_yaml, record_headlines
from slim.paper.splits import HeldOutSetting
from slim.pipeline.readme import GENERATED_SECTIONS, section, update_documents


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


def test_generated_sections_are_copied_only_on_request_and_all_or_nothing(tmp_path):
    readme, page = tmp_path / "README.md", tmp_path / "results.md"
    readme.write_text("intro\n<!-- headline:start -->\nold\n<!-- headline:end -->\noutro\n")
    page.write_text("<!-- results:start -->\nold\n<!-- results:end -->\n<!-- accelerators:start -->\nkept\n"
                    "<!-- accelerators:end -->\n")
    headline, results, accelerators = (tmp_path / name for name in ("headline.md", "results.md.gen", "acc.md"))
    documents = {readme: {"headline": headline}, page: {"results": results, "accelerators": accelerators}}
    headline.write_text("new headline\n")
    with pytest.raises(SlimError, match="results.md.gen does not exist"):
        update_documents(documents)
    assert section(readme.read_text(), "headline") == "old"        # nothing written while one file is missing
    results.write_text("new table\n")
    assert update_documents(documents) == {readme: True, page: True}
    assert readme.read_text() == "intro\n<!-- headline:start -->\nnew headline\n<!-- headline:end -->\noutro\n"
    assert section(page.read_text(), "results") == "new table"
    assert section(page.read_text(), "accelerators") == "kept"     # optional: its file is absent
    accelerators.write_text("every accelerator\n")
    assert update_documents(documents) == {readme: False, page: True}
    assert section(page.read_text(), "accelerators") == "every accelerator"
    readme.write_text("no markers\n")
    with pytest.raises(SlimError, match="README.md: no generated section 'headline'"):
        update_documents(documents)


def test_every_generated_section_has_its_markers_in_the_shipped_documents():
    for document, sections in GENERATED_SECTIONS.items():
        text = (REPO / document).read_text()
        for name in sections:
            assert section(text, name), f"{document}: section {name} is empty"


def test_sim_must_beat_is_checked_and_kept():
    table = pd.concat([mapes(), pd.DataFrame({col.SETTING: ["model"], col.PREDICTOR: ["SIM"], col.N_VALIDATION: [8],
                                              col.MAPE_THROUGHPUT_PCT: [8.0], col.MAPE_E2E_PCT: [13.0]})],
                      ignore_index=True)
    record = {"toy": dict(RECORD["toy"], sim_must_beat={"model": ["SLIM", "LLMVisor-Agg"]})}
    problems = headline_verdict(table, record, "toy").problems
    assert problems == ("model: SIM e2e MAPE 13.00% does not beat SLIM (12.00%)",)
    assert record_headlines(record, {"toy": table})["toy"]["sim_must_beat"] == {"model": ["SLIM", "LLMVisor-Agg"]}


def test_the_headline_table_reads_each_datasets_tables_beside_the_papers():
    settings = [HeldOutSetting("same_curve", "Same curve", {}, {}), HeldOutSetting("model", "Model (X, OL 1)", {}, {})]
    reference = {"table3": {"model": {"SLIM": [24.3, 16.5]}}, "headline_mape_reduction_pct": 79.3,
                 "headline_time_saving_pct": 43.85}
    reduction = pd.DataFrame({col.MAPE_REDUCTION_PCT: [-27.75], col.MAPE_REDUCTION_CI_LOW: [-54.4],
                              col.MAPE_REDUCTION_CI_HIGH: [-6.7]})
    costs = pd.DataFrame({"setting": ["Model (X, OL 1)", "Mean"], "Time save (%)": [40.0, 45.04]})
    no_reduction = reduction.assign(**{col.MAPE_REDUCTION_PCT: float("nan")})
    table = headline_table([DatasetHeadline("real", mapes(11.44), reduction, costs),
                            DatasetHeadline("other", mapes(3.0), no_reduction)], settings, reference)
    rows = {line.split(" | ")[0].strip("| "): line.strip("| ").split(" | ")[1:] for line in table.splitlines()
            if line.startswith("| ") and "---" not in line}
    assert rows["SLIM throughput MAPE, same curve, %"] == [ABSENT, ABSENT, ABSENT]   # no such setting, no paper value
    assert rows["SLIM throughput MAPE, model, %"] == ["11.4", "3.0", "24.3"]
    assert rows["Average MAPE reduction vs the two baselines, %"] == ["-27.8 (CI -54.4 to -6.7)", ABSENT, "79.3"]
    assert rows["Profiling time saved by the held-out settings (Table VI), %"] == ["45.0", ABSENT, "43.85"]

