"""The benchmark client's log: its argparse ``Namespace(...)`` line and the server flags it records."""

from __future__ import annotations

import ast
import re
from typing import Any


def parse_namespace_line(text: str) -> dict[str, Any]:
    """Arguments of the first ``Namespace(...)`` line of a client or server log.

    The line is Python call syntax, so it is parsed with `ast`; values that are
    not literals (``request_rate=inf``, enums) are kept as their source text.
    """
    for line in text.splitlines():
        start = line.find("Namespace(")
        if start < 0:
            continue
        try:
            call = ast.parse(line[start:].strip(), mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if not isinstance(call, ast.Call):
            continue
        arguments: dict[str, Any] = {}
        for keyword in call.keywords:
            try:
                arguments[keyword.arg] = ast.literal_eval(keyword.value)
            except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
                arguments[keyword.arg] = ast.unparse(keyword.value)
        return arguments
    return {}


# A value never starts with "--": in "--enable-chunked-prefill --max-num-seqs=8" the first flag is bare.
_FLAG = re.compile(r"--([\w-]+)(?:[= ](?!--)([^\s]+))?")


def parse_server_flags(server_args: str) -> dict[str, str]:
    """``'--port=1 --max-num-seqs=8 --enable-chunked-prefill'`` -> ``{'max-num-seqs': '8', ...}``."""
    return {flag: (value or "") for flag, value in _FLAG.findall(server_args)}
