"""The manifest of a real dataset's trace files: what the ingest rule depends on.

Snakemake compares file times, and a folder's time changes only when an entry directly in it
is added or removed, not when a file deeper down is edited. So the ingest rule's input is a
manifest listing every trace file's path, size, permission bits and modification time,
rewritten only when that list differs: its time then changes exactly when a trace file does.
"""

from __future__ import annotations

import os
from pathlib import Path

from slim.pipeline.io import write_text
from slim.traces.tree import walk_tree

HEADER = "path\tsize\tmode\tmtime_ns"


def trace_manifest(trace_root: str | Path) -> str:
    """One tab-separated line per file under `trace_root` (hidden entries skipped, as ingest skips them)."""
    root = Path(trace_root)
    lines = [HEADER]
    for directory in walk_tree(root):
        folder = directory.path.relative_to(root).as_posix()
        if directory.problem is not None:
            lines.append(f"{folder}/\t-\t-\t{directory.problem}")
        for entry in directory.files:
            path = entry.path.relative_to(root).as_posix()
            try:
                status = os.stat(entry.path)
            except OSError:
                lines.append(f"{path}\t-\t-\t{entry.problem or 'cannot stat'}")
                continue
            lines.append(f"{path}\t{status.st_size}\t{status.st_mode & 0o7777:o}\t{status.st_mtime_ns}")
    return "\n".join(lines) + "\n"


def update_trace_manifest(trace_root: str | Path, manifest_path: str | Path) -> str:
    """Write the manifest of `trace_root` to `manifest_path` unless it already says the same;
    return `manifest_path` (as Snakemake input functions do)."""
    manifest_path = Path(manifest_path)
    text = trace_manifest(trace_root)
    try:
        unchanged = manifest_path.read_text() == text
    except (FileNotFoundError, UnicodeDecodeError):
        unchanged = False
    if not unchanged:
        write_text(text, manifest_path)
    return str(manifest_path)
