"""Reading the project's YAML configuration files with errors that name the file."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from slim.errors import ConfigError


def read_yaml_mapping(path: str | Path, missing_message: str, expected: str = "a mapping") -> dict[str, Any]:
    """The top-level mapping of a YAML file.

    Raises `ConfigError` with `missing_message` when the file does not exist, and
    ``"<path>: expected <expected>"`` when its top level is not a mapping.
    """
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError as error:
        raise ConfigError(missing_message) from error
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected {expected}")
    return raw


def require_keys(entry: Mapping[str, Any], required: Iterable[str], where: str) -> None:
    """Raise `ConfigError` naming every key of `required` that the config entry lacks:
    ``"<where> lacks key(s) a, b"``."""
    missing = [key for key in required if key not in entry]
    if missing:
        raise ConfigError(f"{where} lacks key(s) {', '.join(missing)}")
