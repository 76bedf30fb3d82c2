"""Reading the project's YAML configuration files with errors that name the file."""

from __future__ import annotations

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
