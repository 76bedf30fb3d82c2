"""Small I/O helpers shared by the workflow scripts: logging and deterministic writes."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pandas as pd


def open_log(log_path: str | Path) -> logging.Logger:
    """Send this script's log records (and warnings) to the rule's `log:` file."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(filename=str(log_path), filemode="w", level=logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s", force=True)
    logging.captureWarnings(True)
    return logging.getLogger("slim")


def write_parquet(frame: pd.DataFrame, path: str | Path) -> None:
    """Parquet without pandas' index metadata, so equal frames give equal bytes."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path, index=False, engine="pyarrow", compression="zstd")


def write_csv(frame: pd.DataFrame, path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False, float_format="%.6g", lineterminator="\n")


def worker_count(threads: int) -> int:
    """Processes a job may start: its Snakemake `threads`, but never more than the CPUs this
    process may run on (`snakemake --cores 8` on a 2-CPU machine gives 2, not 8)."""
    return max(1, min(int(threads), len(os.sched_getaffinity(0))))
