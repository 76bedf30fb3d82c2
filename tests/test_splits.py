"""Held-out settings: schema, selection, unions and the errors that name the setting."""

import pandas as pd
import pytest

from slim import columns as col
from slim.errors import ConfigError, SplitError
from slim.paper.splits import load_settings, select_rows, split_setting


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
