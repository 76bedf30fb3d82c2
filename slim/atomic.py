"""Crash-safe file writes: a temporary file beside the target, renamed over it (`os.replace`,
atomic on POSIX), so an interrupted writer leaves either the old file or the new one, never half
of one. The workflow's writers (`slim.pipeline.io`) and the figures (`slim.paper.figures`) use it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path


def write_atomic(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call ``write(temporary_path)``, then rename the temporary file to `path`.

    The temporary file lies beside `path` (same file system, so the rename is atomic), keeps its
    suffix (writers that choose a format by suffix still do) and is removed if `write` fails.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp{path.suffix}")
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
