"""Where a real dataset's traces are found, and what the workflow says when they are not.

A real dataset's relative ``trace_dir`` is looked up, in this order, in
1. the traces root: the environment variable ``SLIM_TRACES_ROOT`` if set, else the config's
   ``traces_root`` (the shipped config: ``../shared/traces``; default: the repository root);
2. the fetched cache, ``fetch.cache`` (default ``raw_traces/fetched``), where
   ``snakemake fetch_traces`` puts each source's verified files.
The first folder that exists is read in place. A dataset found in neither is an error, or, where
its entry says ``required: false``, skipped with one line that names it, the folders looked in
and the command that fetches it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slim.errors import ConfigError

TRACES_ROOT_VARIABLE = "SLIM_TRACES_ROOT"
DEFAULT_TRACE_CACHE = "raw_traces/fetched"
FETCH_COMMAND = "snakemake --cores 2 fetch_traces"


@dataclass(frozen=True)
class TraceSearch:
    """The folders a relative trace_dir is looked up in, in order, each with the setting it comes from."""

    roots: tuple[tuple[Path, str], ...]

    def candidates(self, trace_dir: str) -> list[tuple[Path, str]]:
        path = Path(trace_dir)
        if path.is_absolute():
            return [(path, "trace_dir")]
        return [(root / path, origin) for root, origin in self.roots]


def trace_search(config: Mapping[str, Any], base_dir: Path = Path("."),
                 environ: Mapping[str, str] | None = None) -> TraceSearch:
    """The traces root (SLIM_TRACES_ROOT, else config traces_root) and then the fetched cache."""
    environ = os.environ if environ is None else environ
    if environ.get(TRACES_ROOT_VARIABLE):
        root, origin = Path(environ[TRACES_ROOT_VARIABLE]), TRACES_ROOT_VARIABLE
    else:
        root, origin = Path(config.get("traces_root", ".")), "traces_root"
    cache = Path(config.get("fetch", {}).get("cache", DEFAULT_TRACE_CACHE))
    roots = [(root if root.is_absolute() else base_dir / root, origin),
             (cache if cache.is_absolute() else base_dir / cache, "fetch.cache")]
    return TraceSearch(tuple(roots))


def trace_cache(config: Mapping[str, Any], base_dir: Path = Path(".")) -> Path:
    """The folder fetched sources go to (one subfolder per source)."""
    cache = Path(config.get("fetch", {}).get("cache", DEFAULT_TRACE_CACHE))
    return cache if cache.is_absolute() else base_dir / cache


@dataclass(frozen=True)
class AbsentDataset:
    """A real dataset of run_datasets whose traces are in none of the folders looked in."""

    name: str
    looked_in: tuple[tuple[Path, str], ...]
    source: str | None

    @property
    def message(self) -> str:
        """The one line the workflow prints for it, and the error where one of its artefacts is asked for."""
        places = " nor ".join(f"{path.as_posix()} ({origin})" for path, origin in self.looked_in)
        if self.source:
            how = f"fetch them with `{FETCH_COMMAND}`, or point {TRACES_ROOT_VARIABLE} at a copy"
        else:
            how = f"no download is configured for them: point {TRACES_ROOT_VARIABLE} (or traces_root) at a copy"
        return f"dataset '{self.name}' skipped: its real traces are not in {places}; {how}"


def locate_trace_dir(name: str, entry: Mapping[str, Any], search: TraceSearch) -> Path | AbsentDataset:
    """The folder a real dataset's traces are read from, or what was looked for where none exists."""
    candidates = search.candidates(str(entry["trace_dir"]))
    for path, _origin in candidates:
        if path.exists():
            return path
    return AbsentDataset(name, tuple(candidates), entry.get("source"))


def check_source(key: str, entry: Mapping[str, Any], sources: Mapping[str, Any]) -> None:
    """A dataset's `source` names a configured trace source, and a relative trace_dir lies inside it
    (the fetched cache holds each source in a folder of that name; an absolute trace_dir is read as
    it is, and the cache is not consulted for it)."""
    source = entry.get("source")
    if source is None:
        return
    if source not in sources:
        known = ", ".join(sources) or "none configured"
        raise ConfigError(f"{key}.source = '{source}' is not a key of trace_sources (known: {known})")
    trace_dir = Path(str(entry["trace_dir"]))
    if not trace_dir.is_absolute() and trace_dir.parts[:1] != (source,):
        raise ConfigError(f"{key}.trace_dir = '{entry['trace_dir']}' must begin with its source's name "
                          f"('{source}/...'), where {FETCH_COMMAND} puts the fetched files")
