"""What a run directory tells every result in it: the client's arguments and the server's flags from
its logs, its engine metrics, KV cache size, failures and preemptions (`DirectoryEvidence`)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import cached_property
from typing import Any

from slim.errors import TraceFormatError, UnreadableTraceError
from slim.traces.client_log import parse_namespace_line, parse_server_flags
from slim.traces.engine_metrics import EngineMetrics, MetricsSeries
from slim.traces.metrics_csv import read_metrics_csv
from slim.traces.prometheus_text import parse_cache_config, read_latency_histograms, read_scrapes
from slim.traces.run_files import RunFiles
from slim.traces.server_log import (
    KvCacheSize,
    kv_cache_size_in_log,
    parse_server_log_batch,
    preemptions_in_log,
)
from slim.traces.tree import read_text

_DIR_MAX_NUM_SEQS = re.compile(r"^_(\d+)_")


def _positive_int(value: Any) -> int | None:
    """An integer flag value (``8``, ``"8"``), or None for text such as ``"auto"`` or ``"$N"``."""
    if isinstance(value, bool):
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        return None
    return number if number > 0 else None


def _setting(content: dict[str, Any], name: str) -> Any:
    """A server setting in a result: ``--metadata name=...`` or a sweep's serve override, with
    ``-``/``_`` and a leading ``--`` in the key tolerated."""
    for key, value in content.items():
        if str(key).lstrip("-").replace("-", "_") == name:
            return value
    return None


class DirectoryEvidence:
    """The files of one run directory, each read once and only when needed."""

    def __init__(self, run_files: RunFiles):
        self.files = run_files

    @cached_property
    def log_texts(self) -> dict[str, str]:
        """Every log's text; `UnreadableTraceError` names the first log that cannot be read."""
        return {path.name: read_text(path) for path in self.files.logs}

    def read_logs(self) -> int:
        """Read every log now, so that an unreadable one becomes the run's status; how many there are."""
        return len(self.log_texts)

    @cached_property
    def server_log_texts(self) -> dict[str, str]:
        return {path.name: self.log_texts[path.name] for path in self.files.server_logs}

    @cached_property
    def client_args(self) -> dict[str, Any]:
        """The benchmark client's arguments: the first ``Namespace(...)`` line of a client log."""
        for path in self.files.client_logs:
            if path.suffix == ".out" or not path.name.startswith("log_"):
                arguments = parse_namespace_line(self.log_texts[path.name])
                if arguments:
                    return arguments
        return {}

    def server_setting(self, flag: str, find_in_log: Callable[[str], int | None]) -> int | None:
        """A positive integer server flag (``--<flag>``) from the client's record of the server
        args, else from the first server log that states it; None if neither does."""
        flags = parse_server_flags(str(self.client_args.get("server_args", "")))
        from_flags = _positive_int(flags.get(flag))
        return from_flags if from_flags is not None else self.first_in_server_logs(find_in_log)

    def server_switch(self, flag: str, find_in_log: Callable[[str], bool | None]) -> bool:
        """Whether a switch server flag (``--<flag>``, no value) was on: in the client's record of the
        server args, else as the first server log that states it; False where neither does."""
        if flag in parse_server_flags(str(self.client_args.get("server_args", ""))):
            return True
        return bool(self.first_in_server_logs(find_in_log))

    def first_in_server_logs(self, find: Callable[[str], Any]) -> Any:
        """What `find` finds first in the server logs (by name), or None."""
        for text in self.server_log_texts.values():
            found = find(text)
            if found is not None:
                return found
        return None

    @cached_property
    def kv_cache_from_logs(self) -> KvCacheSize | None:
        return self.first_in_server_logs(kv_cache_size_in_log)

    @cached_property
    def log_preemptions(self) -> float:
        counts = [preemptions_in_log(text) for text in self.server_log_texts.values()]
        counts = [count for count in counts if not math.isnan(count)]
        return max(counts) if counts else math.nan

    @cached_property
    def log_stats(self) -> tuple[EngineMetrics | None, str]:
        for name, text in self.server_log_texts.items():
            metrics = parse_server_log_batch(text)
            if metrics is not None and not math.isnan(metrics.mean_batch_size):
                return metrics, name
        return None, ""

    @cached_property
    def series(self) -> tuple[list[MetricsSeries], list[str]]:
        """Every readable metrics series (CSVs, then the scrapes as one) and notes on the others.

        An unreadable file raises; an unparseable one is noted and skipped."""
        found, notes = [], []
        for path in self.files.metrics_csvs:
            try:
                found.append(read_metrics_csv(path))
            except UnreadableTraceError:
                raise
            except TraceFormatError as error:
                notes.append(str(error))
        if self.files.scrapes:
            try:
                found.append(read_scrapes(self.files.scrapes))
            except UnreadableTraceError:
                raise
            except TraceFormatError as error:
                notes.append(str(error))
        return found, notes

    @cached_property
    def latency_histograms(self) -> dict[str, float]:
        """The latency statistics of the scrapes' histograms (`read_latency_histograms`); empty
        where they hold none or cannot be parsed (the gauges' reader reports that)."""
        try:
            return read_latency_histograms(self.files.scrapes)
        except UnreadableTraceError:
            raise
        except TraceFormatError:
            return {}

    @cached_property
    def cache_config(self) -> tuple[dict[str, str], str] | None:
        """Labels of the first readable ``vllm:cache_config_info`` and the file holding them."""
        for path in self.files.cache_configs + self.files.scrapes:
            try:
                return parse_cache_config(path), path.name
            except UnreadableTraceError:
                raise
            except TraceFormatError:
                continue
        return None
