"""Small I/O helpers shared by the workflow scripts: the rule's log, and deterministic, crash-safe writes.

Every writer goes to a temporary file in the destination's folder and renames it over the
destination (`slim.atomic.write_atomic`), so an interrupted job leaves either the old file
or the new one, never half a parquet; Snakemake's ``rerun-incomplete`` then reruns the job.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from types import TracebackType

import pandas as pd

from slim.atomic import write_atomic

__all__ = ["open_log", "worker_count", "write_atomic", "write_csv", "write_parquet", "write_text"]

_PYTHONS_EXCEPTHOOK = sys.excepthook


def _log_uncaught(logger: logging.Logger) -> None:
    """Make an exception that ends the script go into the log (with its traceback) as well as to stderr."""
    def hook(kind: type[BaseException], error: BaseException, traceback: TracebackType | None) -> None:
        if not issubclass(kind, KeyboardInterrupt):
            logger.critical("the job failed", exc_info=(kind, error, traceback))
        _PYTHONS_EXCEPTHOOK(kind, error, traceback)

    sys.excepthook = hook


def open_log(log_path: str | Path) -> logging.Logger:
    """Send this script's log records, its warnings and, should it fail, the exception and its
    traceback to the rule's `log:` file (the traceback also still goes to stderr, where Snakemake
    shows it)."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=str(log_path), filemode="w", level=logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s", force=True)
    logging.captureWarnings(True)
    logger = logging.getLogger("slim")
    _log_uncaught(logger)
    return logger


def write_parquet(frame: pd.DataFrame, path: str | Path) -> None:
    """Parquet without pandas' index metadata, so equal frames give equal bytes."""
    write_atomic(path, lambda target: frame.to_parquet(target, index=False, engine="pyarrow", compression="zstd"))


def write_csv(frame: pd.DataFrame, path: str | Path) -> None:
    write_atomic(path, lambda target: frame.to_csv(target, index=False, float_format="%.6g", lineterminator="\n"))


def write_text(text: str, path: str | Path) -> None:
    """A text file, written as UTF-8 with the newlines given."""
    write_atomic(path, lambda target: target.write_text(text, encoding="utf-8"))


def worker_count(threads: int) -> int:
    """Processes a job may start: its Snakemake `threads`, but never more than the CPUs this
    process may run on (`snakemake --cores 8` on a 2-CPU machine gives 2, not 8)."""
    return max(1, min(int(threads), len(os.sched_getaffinity(0))))


def read_sim_schedules(schedule_files: list[str], constant_files: list[str]):
    """A rule's optional inputs ``sim_schedules`` and ``sim_constants`` (one file each, or none
    where SIM is not evaluated) as a `slim.sim.schedules.ScheduleTable`, or None."""
    if not schedule_files:
        return None
    from slim.sim.constants import load_sim_constants
    from slim.sim.schedules import read_schedules

    return read_schedules(schedule_files[0], load_sim_constants(constant_files[0]))
