"""Small I/O helpers shared by the workflow scripts: the rule's log, and deterministic, crash-safe writes.

Every writer goes to a temporary file in the destination's folder and renames it over the
destination (`slim.atomic.write_atomic`), so an interrupted job leaves either the old file
or the new one, never half a parquet; Snakemake's ``rerun-incomplete`` then reruns the job.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import TracebackType
from typing import Any

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


@dataclass
class JobSpecs:
    """What a fitting or simulating job loads first, each on first use: the model catalog
    (input ``models``), the accelerator table (input ``hardware``) and the job's accelerator in it
    (param ``hardware``), and the cached simulator schedules (inputs ``sim_schedules`` and
    ``sim_constants``: `read_sim_schedules`)."""

    inputs: Any
    params: Any

    @cached_property
    def catalog(self):
        from slim.specs.architecture import load_architectures

        return load_architectures(self.inputs.models)

    @cached_property
    def hardware_table(self):
        from slim.specs.hardware import load_hardware

        return load_hardware(self.inputs.hardware)

    @cached_property
    def hardware(self):
        return self.hardware_table[self.params.hardware]

    @cached_property
    def schedules(self):
        return read_sim_schedules(self.inputs.sim_schedules, self.inputs.sim_constants)


def job_specs(snakemake: Any) -> JobSpecs:
    """The `JobSpecs` of a Snakemake job (the ``snakemake`` object of a script)."""
    return JobSpecs(snakemake.input, snakemake.params)
