"""Held-out settings (the paper's Table II) read from config and applied to a cleaned table.

A setting is data: a training selector (or a `train_union` of other settings'
training selectors) and a validation selector, each a mapping column -> allowed
values over the cleaned table. Each setting is one global fit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pandas as pd
import yaml

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
    train: Selector = field(default_factory=dict)
    validate: Selector = field(default_factory=dict)
    not_applicable: str | None = None

    @property
    def applicable(self) -> bool:
        return self.not_applicable is None


@dataclass(frozen=True)
class Split:
    """Training and validation rows of one setting."""

    setting: str
    train: pd.DataFrame
    validate: pd.DataFrame


def load_settings(path: str | Path) -> list[HeldOutSetting]:
    """Read and schema-check a settings file; resolve `train_union` references."""
    path = Path(path)
    raw = parse_yaml(path)
    schema = yaml.safe_load(SETTINGS_SCHEMA.read_text())
    try:
        jsonschema.validate(raw, schema)
    except jsonschema.ValidationError as error:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ConfigError(f"{path}: {where}: {error.message}") from error
    entries = {entry["name"]: entry for entry in raw["settings"]}
    settings = []
    for entry in raw["settings"]:
        if entry.get("not_applicable"):
            settings.append(HeldOutSetting(entry["name"], entry["label"], not_applicable=entry["not_applicable"]))
            continue
        train = entry.get("train")
        if "train_union" in entry:
            train = _union_selector(entry, entries, path)
        if not train or "validate" not in entry:
            raise ConfigError(f"{path}: setting '{entry['name']}' needs train (or train_union) and validate")
        settings.append(HeldOutSetting(entry["name"], entry["label"], train, entry["validate"]))
    return settings


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
