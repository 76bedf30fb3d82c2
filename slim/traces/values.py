"""Reading one number from a trace file's JSON or table cell, whatever it holds."""

from __future__ import annotations

import math
from typing import Any


def number(value: Any, default: float = math.nan) -> float:
    """A JSON value or table cell as a float: `default` for null, NaN for booleans, text that is not
    a number, lists and values too large for a float."""
    if value is None:
        return default
    if isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan
