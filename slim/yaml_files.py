"""Reading the project's YAML configuration files with errors that name the file."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from slim.errors import ConfigError

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""`yaml.safe_load`'s loader with libyaml's parser where PyYAML has it: the same constructor and
resolver (so the same values), parsed about seven times faster, which every job pays for its
catalogs and the simulator's constants."""


def parse_yaml(path: str | Path, text: str | None = None) -> Any:
    """The content of a YAML file (or of `text`, read from it).

    Raises `ConfigError` naming the file, line and column of a syntax error.
    """
    path = Path(path)
    try:
        return yaml.load(path.read_text() if text is None else text, Loader=SAFE_LOADER)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise ConfigError(f"{path}: YAML syntax error{where}: {problem}") from error


def read_yaml_mapping(path: str | Path, missing_message: str, expected: str = "a mapping") -> dict[str, Any]:
    """The top-level mapping of a YAML file.

    Raises `ConfigError` with `missing_message` when the file does not exist,
    ``"<path>: expected <expected>"`` when its top level is not a mapping, and a message
    naming the file and line of a syntax error.
    """
    path = Path(path)
    try:
        raw = parse_yaml(path)
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
