"""Held-out settings (the paper's Table II) read from config and applied to a cleaned table.

A setting is data: a training selector (or a `train_union` of other settings'
training selectors) and a validation selector, each a mapping column -> allowed
values over the cleaned table. Each setting is one global fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from slim import columns as col
from slim.errors import ConfigError, SplitError
from slim.yaml_files import parse_yaml

SETTINGS_SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "settings.schema.yaml"

Selector = dict[str, list[Any]]


@dataclass(frozen=True)
class HeldOutSetting:
    """One row of Table II."""

    name: str
    label: str
    train: Selector | list[Selector] = field(default_factory=dict)
    validate: Selector = field(default_factory=dict)
    not_applicable: str | None = None
    shown_in: tuple[str, ...] = ()
    """Artefacts besides Table III and Fig. 9 that show this setting (``table4``, ``fig10``)."""

    @property
    def applicable(self) -> bool:
        return self.not_applicable is None

    @property
    def predicts_an_unseen_model(self) -> bool:
        """Its validation models are named and none of them is among its training models (a union
        trains on every selector's models; a training selector without `model` trains on all)."""
        trains = self.train if isinstance(self.train, list) else [self.train]
        if not self.applicable or col.MODEL not in self.validate or any(col.MODEL not in s for s in trains):
            return False
        trained = {model for selector in trains for model in selector[col.MODEL]}
        return not trained & set(self.validate[col.MODEL])


@dataclass(frozen=True)
class Split:
    """Training and validation rows of one setting."""

    setting: str
    train: pd.DataFrame
    validate: pd.DataFrame


def load_settings(path: str | Path) -> list[HeldOutSetting]:
    """Read and schema-check a settings file; resolve `train_union` references."""
    import jsonschema

    path = Path(path)
    raw = parse_yaml(path)
    schema = parse_yaml(SETTINGS_SCHEMA)
    try:
        jsonschema.validate(raw, schema)
    except jsonschema.ValidationError as error:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ConfigError(f"{path}: {where}: {error.message}") from error
    entries = {entry["name"]: entry for entry in raw["settings"]}
    settings = []
    for entry in raw["settings"]:
        shown_in = tuple(entry.get("shown_in", ()))
        if entry.get("not_applicable"):
            settings.append(HeldOutSetting(entry["name"], entry["label"], not_applicable=entry["not_applicable"],
                                           shown_in=shown_in))
            continue
        train = entry.get("train")
        if "train_union" in entry:
            train = _union_selector(entry, entries, path)
        if not train or "validate" not in entry:
            raise ConfigError(f"{path}: setting '{entry['name']}' needs train (or train_union) and validate")
        settings.append(HeldOutSetting(entry["name"], entry["label"], train, entry["validate"], shown_in=shown_in))
    return settings


def table4_setting_names(settings: list[HeldOutSetting]) -> list[str]:
    """The rows of Table IV (the ablation): the applicable settings that say ``shown_in: [table4]``,
    or, where none says it, every applicable setting."""
    applicable = [setting for setting in settings if setting.applicable]
    chosen = [setting.name for setting in applicable if "table4" in setting.shown_in]
    return chosen or [setting.name for setting in applicable]


def fig10_setting_name(settings: list[HeldOutSetting]) -> str | None:
    """The setting of Fig. 10 (an unseen model): the applicable one that says ``shown_in: [fig10]``,
    else the first that `predicts_an_unseen_model`; None when the settings have no such setting."""
    applicable = [setting for setting in settings if setting.applicable]
    marked = [setting.name for setting in applicable if "fig10" in setting.shown_in]
    if len(marked) > 1:
        raise ConfigError(f"settings {', '.join(marked)} all say shown_in: [fig10]; Fig. 10 shows one setting")
    unseen = [setting.name for setting in applicable if setting.predicts_an_unseen_model]
    return (marked or unseen or [None])[0]


def _union_selector(entry: dict, entries: dict[str, dict], path: Path) -> list[Selector]:
    """A union is kept as a list of selectors; a row matching any of them is selected."""
    selectors = []
    for member in entry["train_union"]:
        if member not in entries or "train" not in entries[member]:
            raise ConfigError(f"{path}: setting '{entry['name']}': train_union names '{member}', "
                              "which is not a setting with a `train` selector")
        selectors.append(entries[member]["train"])
    return selectors


def select_rows(frame: pd.DataFrame, selector: Selector | list[Selector]) -> pd.DataFrame:
    """Rows matching a selector (every column) or any selector of a list (a union)."""
    selectors = selector if isinstance(selector, list) else [selector]
    mask = pd.Series(False, index=frame.index)
    for one in selectors:
        one_mask = pd.Series(True, index=frame.index)
        for column, allowed in one.items():
            if column not in frame.columns:
                raise SplitError(f"selector column '{column}' is not in the cleaned table")
            one_mask &= frame[column].isin(allowed)
        mask |= one_mask
    return frame[mask]


def split_setting(frame: pd.DataFrame, setting: HeldOutSetting) -> Split:
    """Training and validation rows of a setting.

    Raises `SplitError` naming the setting when it is not applicable or a selector matches no rows.
    """
    if not setting.applicable:
        raise SplitError(f"setting '{setting.name}' is not applicable: {setting.not_applicable}")
    train, validate = select_rows(frame, setting.train), select_rows(frame, setting.validate)
    for part, rows in (("training", train), ("validation", validate)):
        if rows.empty:
            raise SplitError(f"setting '{setting.name}': the {part} selector matches no rows of the cleaned table")
    overlap = set(train[col.RUN_ID]) & set(validate[col.RUN_ID])
    if overlap:
        raise SplitError(f"setting '{setting.name}': {len(overlap)} run(s) are in both training and validation, "
                         f"e.g. {sorted(overlap)[0]}")
    return Split(setting.name, train, validate)
