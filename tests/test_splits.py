"""Held-out settings: schema, selection, unions and the errors that name the setting; which settings
Table IV and Fig. 10 show (data, not names), and the paper's Table III beside them."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from slim import columns as col
from slim.errors import ConfigError, SplitError
from slim.paper.heldout import MAIN_PREDICTORS
from slim.paper.splits import fig10_setting_name, load_settings, select_rows, split_setting, table4_setting_names
from slim.paper.tables import load_paper_reference, paper_matrix, paper_row_labels

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config" / "settings"


def _frame() -> pd.DataFrame:
    rows = [
        {col.RUN_ID: f"{model}/{ol}/{b}", col.MODEL: model, col.OUTPUT_LEN_NOMINAL: ol, col.MAX_NUM_SEQS: b}
        for model in ("opt-1.3b", "opt-2.7b", "llama-2-7b")
        for ol in (130, 260, 390, 520)
        for b in (1, 4, 8, 16)
    ]
    return pd.DataFrame(rows)


def test_shipped_settings_files_load_and_keep_table_ii_order():
    for path in ("config/settings/h100-public.yaml", "config/settings/paper.yaml"):
        names = [setting.name for setting in load_settings(path)]
        assert names == ["same_curve", "input_length", "model", "output_length", "model_output_length"]


def test_public_input_length_setting_is_marked_not_applicable():
    settings = {s.name: s for s in load_settings("config/settings/h100-public.yaml")}
    assert settings["input_length"].not_applicable == "n/a: no input-length sweep in this dataset"
    with pytest.raises(SplitError, match="input_length"):
        split_setting(_frame(), settings["input_length"])


def test_union_trains_on_both_member_sets_and_validates_the_target():
    settings = {s.name: s for s in load_settings("config/settings/h100-public.yaml")}
    split = split_setting(_frame(), settings["model_output_length"])
    model_rows = select_rows(_frame(), settings["model"].train)
    output_rows = select_rows(_frame(), settings["output_length"].train)
    assert set(split.train[col.RUN_ID]) == set(model_rows[col.RUN_ID]) | set(output_rows[col.RUN_ID])
    assert set(split.validate[col.MODEL]) == {"llama-2-7b"}
    assert set(split.validate[col.OUTPUT_LEN_NOMINAL]) == {520}


def test_same_curve_selects_by_batch_cap_on_every_curve():
    settings = {s.name: s for s in load_settings("config/settings/h100-public.yaml")}
    split = split_setting(_frame(), settings["same_curve"])
    assert set(split.train[col.MAX_NUM_SEQS]) == {1, 4, 8}
    assert set(split.validate[col.MAX_NUM_SEQS]) == {16}
    assert len(split.train) == 3 * 4 * 3


def test_a_selector_that_matches_nothing_names_the_setting():
    settings = {s.name: s for s in load_settings("config/settings/h100-public.yaml")}
    frame = _frame()[lambda f: f[col.MODEL] != "llama-2-7b"]
    with pytest.raises(SplitError, match="'model'.*validation selector matches no rows"):
        split_setting(frame, settings["model"])


def test_schema_errors_name_the_file_and_the_entry(tmp_path):
    bad = tmp_path / "settings.yaml"
    bad.write_text("settings:\n  - name: x\n    label: X\n    train: {model: []}\n    validate: {model: [a]}\n")
    with pytest.raises(ConfigError, match="settings.yaml: settings/0/train/model"):
        load_settings(bad)


def test_union_of_an_unknown_setting_is_a_config_error(tmp_path):
    bad = tmp_path / "settings.yaml"
    bad.write_text("settings:\n  - name: x\n    label: X\n    train_union: [nope]\n    validate: {model: [a]}\n")
    with pytest.raises(ConfigError, match="train_union names 'nope'"):
        load_settings(bad)


# ---------------------------------------------------------------- which artefacts show a setting

def _settings(tmp_path, *entries) -> list:
    path = tmp_path / "settings.yaml"
    path.write_text(yaml.safe_dump({"settings": list(entries)}))
    return load_settings(path)


SAME = {"name": "curves", "label": "Same curve", "train": {"max_num_seqs": [1]}, "validate": {"max_num_seqs": [2]}}
UNSEEN = {"name": "big", "label": "Model (B)", "train": {"model": ["a"]}, "validate": {"model": ["b"]}}
LONGER = {"name": "longer", "label": "Output length", "train": {"model": ["a"], "output_len_nominal": [1]},
          "validate": {"model": ["a"], "output_len_nominal": [2]}}


def test_the_shipped_settings_show_the_papers_table_iv_rows_and_fig10_setting():
    for name in ("paper", "h100-public"):
        settings = load_settings(CONFIG / f"{name}.yaml")
        assert table4_setting_names(settings) == ["model", "output_length"]
        assert fig10_setting_name(settings) == "model"


def test_without_marks_table_iv_shows_every_setting_and_fig10_the_first_unseen_model(tmp_path):
    union = {"name": "both", "label": "Model + output length", "train_union": ["big", "longer"],
             "validate": {"model": ["b"]}}
    settings = _settings(tmp_path, SAME, LONGER, UNSEEN, union,
                         {"name": "na", "label": "Input length", "not_applicable": "no sweep"})
    assert table4_setting_names(settings) == ["curves", "longer", "big", "both"]
    assert [s.predicts_an_unseen_model for s in settings] == [False, False, True, True, False]
    assert fig10_setting_name(settings) == "big"


def test_marks_choose_the_rows_and_the_figure_and_no_unseen_model_means_no_fig10(tmp_path):
    settings = _settings(tmp_path, {**SAME, "shown_in": ["table4", "fig10"]}, {**UNSEEN, "shown_in": ["table4"]})
    assert table4_setting_names(settings) == ["curves", "big"]
    assert fig10_setting_name(settings) == "curves"
    assert fig10_setting_name(_settings(tmp_path, SAME, LONGER)) is None
    with pytest.raises(ConfigError, match="Fig. 10 shows one setting"):
        fig10_setting_name(_settings(tmp_path, {**SAME, "shown_in": ["fig10"]}, {**UNSEEN, "shown_in": ["fig10"]}))
    with pytest.raises(ConfigError, match="shown_in"):
        _settings(tmp_path, {**SAME, "shown_in": ["table9"]})


def test_the_papers_table_keeps_one_row_per_setting_when_labels_share_a_prefix(tmp_path):
    settings = _settings(tmp_path, SAME, UNSEEN, {**UNSEEN, "name": "model", "label": "Model (C)"})
    assert paper_row_labels(settings) == ["Same curve", "Model (B)", "Model (C)"]
    reference = load_paper_reference(REPO / "config" / "paper_reference.yaml")
    matrix = paper_matrix(reference, "table3", settings, MAIN_PREDICTORS)
    assert len(matrix) == 3
    assert matrix.loc["Model (C)", ("SLIM", "Thr.")] == 24.3          # the paper's row of that name
    assert matrix.loc["Model (B)"].isna().all()                       # a setting the paper does not have
