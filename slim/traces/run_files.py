"""Which files of a directory belong to a benchmark run, and what each one is.

Files are recognised by the names the producers give them (the public layout, ``vllm bench
serve``, ``vllm bench sweep serve``, GuideLLM) and, for other names, by their first bytes: a
``*.log`` that reads like a vLLM server log, a ``*.txt``/``*.prom`` scrape of ``/metrics``, a
CSV whose header names ``num_requests_running``, a CSV or Parquet summary table whose headers hold
the vocabulary of `slim.traces.summary_table` (through the dataset's column mapping) or a CSV of
AIConfigurator's silicon sweeps (`slim.traces.silicon_sweep`). A directory
holding any of them looks like a run and gets a row in the cleaning report, even when nothing in
it can be used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from slim.errors import TraceFormatError, UnreadableTraceError
from slim.traces.client_log import parse_namespace_line
from slim.traces.metrics_csv import looks_like_metrics_csv
from slim.traces.prometheus_text import CACHE_CONFIG_INFO, looks_like_scrape
from slim.traces.results import SWEEP_FAILURE_FILE, SWEEP_RUN_FILE, SWEEP_SUMMARY_FILE
from slim.traces.server_log import looks_like_server_log
from slim.traces.silicon_sweep import looks_like_silicon_sweep
from slim.traces.summary_table import DEFAULT_LAYOUT, TableLayout, table_headers
from slim.traces.tree import TreeDirectory, TreeFile, read_text

_SNIFF_BYTES = 65_536
_CLIENT_LOG = re.compile(r"^log_.*\.(out|err)$")
_IGNORED_JSON = re.compile(r"(\.pytorch\.json|\.args\.json|^warmup\.json)$")   # PyTorch-benchmark copies and
# argument sidecars of offline results (read beside their result), sweep warm-ups
_LAUNCHER_CONFIG = re.compile(r"^config-.*\.txt$")                 # the public traces' sweep launcher command


@dataclass
class RunFiles:
    """The run files of one directory, by role (each list sorted by name)."""

    directory: Path
    results: list[Path] = field(default_factory=list)          # benchmark result JSON (any producer)
    sweep_failures: list[Path] = field(default_factory=list)   # vllm bench sweep run=<n>.failure.json
    metrics_csvs: list[Path] = field(default_factory=list)
    scrapes: list[Path] = field(default_factory=list)          # Prometheus text scrapes
    cache_configs: list[Path] = field(default_factory=list)
    server_logs: list[Path] = field(default_factory=list)
    client_logs: list[Path] = field(default_factory=list)
    gpu_csvs: list[Path] = field(default_factory=list)         # nvidia-smi samples (not read)
    tables: list[Path] = field(default_factory=list)           # summary tables, one measured point per row
    broken: list[TreeFile] = field(default_factory=list)       # run files that cannot be opened
    problem: str | None = None                                  # the directory cannot be listed

    @property
    def looks_like_run(self) -> bool:
        return self.problem is not None or any(
            (self.results, self.sweep_failures, self.metrics_csvs, self.scrapes, self.cache_configs,
             self.server_logs, self.client_logs, self.gpu_csvs, self.tables, self.broken))

    @property
    def has_time_series(self) -> bool:
        """Whether the directory holds samples of the server's gauges (one run's, by layout)."""
        return bool(self.metrics_csvs or self.scrapes)

    @property
    def has_files_besides_tables(self) -> bool:
        """Whether anything but summary tables marks the directory as a run's."""
        return self.problem is not None or any(
            (self.results, self.sweep_failures, self.metrics_csvs, self.scrapes, self.cache_configs,
             self.server_logs, self.client_logs, self.gpu_csvs, self.broken))

    @property
    def logs(self) -> list[Path]:
        return sorted(set(self.server_logs) | set(self.client_logs), key=lambda path: path.name)


def _known_role(name: str) -> str | None:
    """The role a file name alone gives, or None when only its content can tell."""
    if name.endswith(".json"):
        if _IGNORED_JSON.search(name):
            return "ignored"
        return "sweep_failures" if SWEEP_FAILURE_FILE.match(name) else "results"
    if name.startswith("metrics_gpu_device_nvidia_smi") and name.endswith(".csv"):
        return "gpu_csvs"
    if name.startswith("metrics_engine") and name.endswith(".csv"):
        return "metrics_csvs"
    if name.startswith("cache_config") and name.endswith(".txt"):
        return "cache_configs"
    if (name.startswith("server_out") or name.startswith("server_err")) and name.endswith(".log"):
        return "server_logs"
    if _CLIENT_LOG.match(name):
        return "client_logs"
    if _LAUNCHER_CONFIG.match(name):
        return "ignored"
    return None


def _sniffed_role(path: Path, table_layout: TableLayout) -> str | None:
    """The role of a file with an unknown name, from its first bytes; None if it is no run file."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            return "tables" if table_layout.matches(table_headers(path)) else None
        except TraceFormatError:
            return None
    if suffix not in (".log", ".out", ".err", ".txt", ".prom", ".csv"):
        return None
    try:
        head = read_text(path, _SNIFF_BYTES)
    except UnreadableTraceError:
        return "broken" if suffix in (".log", ".out", ".err", ".prom") else None
    if suffix == ".csv":
        if looks_like_metrics_csv(head.split("\n", 1)[0]):
            return "metrics_csvs"
        headers = table_headers(path, head)
        return "tables" if looks_like_silicon_sweep(headers) or table_layout.matches(headers) else None
    if suffix in (".txt", ".prom") and looks_like_scrape(head):
        return "scrapes"
    if suffix in (".txt", ".prom") and CACHE_CONFIG_INFO in head:
        return "cache_configs"
    if suffix in (".log", ".out", ".err", ".txt") and looks_like_server_log(head):
        return "server_logs"
    if suffix in (".log", ".out") and parse_namespace_line(head):
        return "client_logs"
    return None


def classify_directory(directory: TreeDirectory, table_layout: TableLayout = DEFAULT_LAYOUT) -> RunFiles:
    """Sort a directory's files into the roles of a run's files; a CSV or Parquet file whose headers
    `table_layout` reads is a summary table."""
    run_files = RunFiles(directory.path, problem=directory.problem)
    for entry in directory.files:
        role = _known_role(entry.name)
        if entry.problem is not None:
            if role not in (None, "ignored"):
                run_files.broken.insert(0, entry)   # a file ingest reads by name is the one to blame
            elif entry.path.suffix.lower() in (".log", ".csv", ".txt", ".prom"):
                run_files.broken.append(entry)
            continue
        role = role or _sniffed_role(entry.path, table_layout)
        if role == "broken":
            run_files.broken.append(entry)
        elif role not in (None, "ignored"):
            getattr(run_files, role).append(entry.path)
    # A sweep point keeps each repetition in run=<n>.json and their list in summary.json.
    if any(SWEEP_RUN_FILE.match(path.name) for path in run_files.results):
        run_files.results = [path for path in run_files.results if path.name != SWEEP_SUMMARY_FILE]
    return run_files
