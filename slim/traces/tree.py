"""Walking a trace tree and reading its files so that no single file can stop ingest.

Every directory below the trace root is visited once (symlinked directories are followed,
symlink cycles are not); hidden entries (``.git``, macOS ``._*`` resource forks) are skipped.
A file that cannot be read raises `UnreadableTraceError` naming it, never a bare `OSError`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from slim.errors import UnreadableTraceError


@dataclass(frozen=True)
class TreeFile:
    """One file entry of a directory: its path and, when it cannot be opened, why."""

    path: Path
    problem: str | None = None   # "dangling symlink", "symlink loop", "cannot stat: ..."

    @property
    def name(self) -> str:
        return self.path.name


@dataclass(frozen=True)
class TreeDirectory:
    """A directory of the trace tree with its (non-hidden) file entries, sorted by name."""

    path: Path
    files: tuple[TreeFile, ...]
    problem: str | None = None   # set when the directory itself cannot be listed


def _link_problem(path: Path) -> str | None:
    """Why a symlink cannot be followed to a regular file, or None if it can."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return "dangling symlink"
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "symlink loop"
        return f"cannot stat ({error.strerror})"
    return None


def walk_tree(root: Path) -> Iterator[TreeDirectory]:
    """Every directory under `root` (root first, then depth-first by name) with its files.

    Only regular files (or symlinks meant to be files) are listed: a directory named
    ``x.json`` is walked into, not read. A symlink that leads nowhere is listed with its
    problem. A directory that cannot be listed is yielded with its problem and no files.
    """
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            status = os.stat(directory)
        except OSError as error:
            yield TreeDirectory(directory, (), f"cannot stat ({error.strerror})")
            continue
        if (status.st_dev, status.st_ino) in seen:
            continue  # reached again through a symlink: a cycle or an alias
        seen.add((status.st_dev, status.st_ino))
        try:
            with os.scandir(directory) as entries:
                listed = sorted(entries, key=lambda entry: entry.name)
        except OSError as error:
            yield TreeDirectory(directory, (), f"cannot list ({error.strerror})")
            continue
        files, subdirectories = [], []
        for entry in listed:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir()          # follows symlinks
                is_file = entry.is_file()
            except OSError:
                is_dir = is_file = False
            if is_dir:
                subdirectories.append(path)
            elif is_file:
                files.append(TreeFile(path))
            elif entry.is_symlink():
                files.append(TreeFile(path, _link_problem(path) or "not a regular file"))
        yield TreeDirectory(directory, tuple(files))
        stack.extend(reversed(subdirectories))


def _unreadable(path: Path, error: OSError) -> UnreadableTraceError:
    reason = "symlink loop" if error.errno == errno.ELOOP else (error.strerror or type(error).__name__)
    return UnreadableTraceError(f"{path.name}: cannot read ({reason})", path=path.name)


def read_text(path: Path, max_bytes: int | None = None) -> str:
    """The file's text (undecodable bytes replaced); at most `max_bytes` bytes when given.

    Raises `UnreadableTraceError` naming the file for any operating-system error.
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read() if max_bytes is None else handle.read(max_bytes)
    except OSError as error:
        raise _unreadable(path, error) from error
    return data.decode("utf-8", errors="replace")


def check_readable(path: Path) -> None:
    """Raise `UnreadableTraceError` unless the file can be opened for reading."""
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        raise _unreadable(path, error) from error
