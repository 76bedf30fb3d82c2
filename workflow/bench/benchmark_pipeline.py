"""Benchmark: time a from-scratch `snakemake all` in a scratch copy and report the quality bars.

Run by hand from the repository root: ``python workflow/bench/benchmark_pipeline.py [--cores 2]``.
It copies the workflow to a temporary folder (so your results/ stay untouched), runs every
rule from scratch, prints the wall time, each rule's `benchmark:` seconds, and SLIM's MAPE on
the public traces against the quality bars of the held-out-settings issue.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
QUALITY_BARS_PCT = {"output_length": 5.0, "model": 15.0, "same_curve": 12.0}
COPIED = ("Snakefile", "workflow", "config", "README.md", "environment.yml")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch) / "repo"
        workdir.mkdir()
        for item in COPIED:
            source = REPO / item
            (shutil.copytree if source.is_dir() else shutil.copy)(source, workdir / item)
        # Relative trace paths (../shared/...) must still resolve from the scratch copy.
        (Path(scratch) / "shared").symlink_to(REPO.parent / "shared")
        start = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "snakemake", "all", "--cores", str(args.cores), "--quiet"],
                                cwd=workdir, capture_output=True, text=True)
        wall_s = time.perf_counter() - start
        if result.returncode != 0:
            print(result.stderr[-3000:], file=sys.stderr)
            return result.returncode
        print(f"snakemake all from scratch, {args.cores} cores: {wall_s:.1f} s wall")
        for tsv in sorted((workdir / "benchmarks").rglob("*.tsv")):
            seconds = pd.read_csv(tsv, sep="\t")["s"].iloc[0]
            print(f"  {tsv.relative_to(workdir / 'benchmarks')}: {seconds:.2f} s")
        mapes = pd.read_csv(workdir / "results" / "h100-public" / "table3.csv")
        print("SLIM throughput MAPE on the public traces vs the quality bars:")
        for setting, bar in QUALITY_BARS_PCT.items():
            value = mapes[(mapes["setting"] == setting) & (mapes["predictor"] == "SLIM")]["mape_throughput_pct"].iloc[0]
            print(f"  {setting}: {value:.1f}% (bar <= {bar:.0f}%): {'met' if value <= bar else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
