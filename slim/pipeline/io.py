"""Small I/O helpers shared by the workflow scripts: logging and deterministic, crash-safe writes.

Every writer goes to a temporary file in the destination's folder and renames it over the
destination (`os.replace`, atomic on POSIX), so an interrupted job leaves either the old file
or the new one, never half a parquet; Snakemake's ``rerun-incomplete`` then reruns the job.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd


def open_log(log_path: str | Path) -> logging.Logger:
    """Send this script's log records (and warnings) to the rule's `log:` file."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=str(log_path), filemode="w", level=logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s", force=True)
    logging.captureWarnings(True)
    return logging.getLogger("slim")


@contextmanager
def logged_errors(logger: logging.Logger) -> Iterator[None]:
    """Log any exception leaving the block, with its traceback, to the rule's log, then re-raise it
    (Snakemake still fails the job; the log says why)."""
    try:
        yield
    except Exception:
        logger.exception("the job failed")
        raise


def write_atomic(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call ``write(temporary_path)``, then rename the temporary file to `path`.

    The temporary file lies beside `path` (same file system, so the rename is atomic) and is
    removed if `write` fails.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


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
