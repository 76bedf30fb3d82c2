"""Benchmark: time a from-scratch `snakemake all` and a no-op rerun in a scratch copy.

Run by hand from the repository root: ``python workflow/bench/benchmark_pipeline.py [--cores 8]``.
It copies the workflow to a temporary folder (so your results/ stay untouched), runs every
rule from scratch, then runs `all` again (nothing to do), and prints both wall times, the
wall seconds of every job grouped by rule (from Snakemake's job start/finish lines), and
SLIM's MAPE on the public traces against the project's quality bars per held-out setting, and
SIM's (the calibrated simulator as a predictor) against its aim on the unseen-model transfers.
The goals on the 2-core development machine: fresh `all` <= 60 s, no-op rerun <= 3 s; the
CPU seconds of the whole run (user + system of every job) are printed too, since on 2 cores with
`--cores 8` the wall time of one job says little about its cost.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
QUALITY_BARS_PCT = {"output_length": 5.0, "model": 15.0, "same_curve": 12.0}
SIM_AIM_PCT = {"model": 5.0, "model_output_length": 5.0}   # an unseen model of the same hardware
COPIED = ("Snakefile", "workflow", "config", "profiles", "README.md", "environment.yml")
FRESH_GOAL_S, NOOP_GOAL_S = 60.0, 3.0

_TIMESTAMP = re.compile(r"^\[(\w{3} \w{3}\s+\d+ \d\d:\d\d:\d\d \d{4})\]")
_RULE = re.compile(r"^(?:local)?rule (\S+):")
_JOBID = re.compile(r"^\s+jobid: (\d+)")
_FINISHED = re.compile(r"^Finished jobid: (\d+)")


def job_seconds(log_text: str) -> dict[str, list[float]]:
    """Wall seconds of every job, by rule, from Snakemake's default output (1-s resolution)."""
    now, pending_rule, started, per_rule = None, None, {}, collections.defaultdict(list)
    for line in log_text.splitlines():
        if match := _TIMESTAMP.match(line):
            now = datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y")
        elif match := _RULE.match(line):
            pending_rule = match.group(1)
        elif (match := _JOBID.match(line)) and pending_rule:
            started[match.group(1)] = (pending_rule, now)
            pending_rule = None
        elif (match := _FINISHED.match(line)) and match.group(1) in started:
            rule, start = started.pop(match.group(1))
            per_rule[rule].append((now - start).total_seconds())
    return per_rule


def run_all(workdir: Path, cores: int) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of Snakemake and all its jobs, the finished process)."""
    before = os.times()
    start = time.perf_counter()
    environ = {key: value for key, value in os.environ.items() if key != "SLIM_TRACES_ROOT"}
    result = subprocess.run([sys.executable, "-m", "snakemake", "all", "--cores", str(cores)],
                            cwd=workdir, capture_output=True, text=True, env=environ)
    after = os.times()
    cpu_s = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return time.perf_counter() - start, cpu_s, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=8, help="--cores for snakemake (default 8, as the README)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy and print its path")
    parser.add_argument("--without-traces", action="store_true",
                        help="no ../shared beside the copy (as in a clone with nothing beside it): the real datasets "
                             "are skipped and only the simulated part is built and timed")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="slim-bench-"))
    try:
        workdir = scratch / "repo"
        workdir.mkdir()
        for item in COPIED:
            source = REPO / item
            if source.exists():
                (shutil.copytree if source.is_dir() else shutil.copy)(source, workdir / item)
        if not args.without_traces:
            # The traces root (../shared/traces) must still resolve from the scratch copy.
            (scratch / "shared").symlink_to(REPO.parent / "shared")
        fresh_s, fresh_cpu_s, result = run_all(workdir, args.cores)
        if result.returncode != 0:
            print(result.stderr[-3000:], file=sys.stderr)
            return result.returncode
        noop_s, noop_cpu_s, rerun = run_all(workdir, args.cores)
        if rerun.returncode != 0:
            print(rerun.stderr[-3000:], file=sys.stderr)
            return rerun.returncode
        load = os.getloadavg()[0]
        print(f"snakemake all --cores {args.cores} from scratch: {fresh_s:.1f} s wall, {fresh_cpu_s:.1f} s CPU "
              f"(goal <= {FRESH_GOAL_S:.0f} s wall on {os.cpu_count()} CPUs; load average now {load:.1f})")
        print(f"no-op rerun: {noop_s:.1f} s wall, {noop_cpu_s:.1f} s CPU (goal <= {NOOP_GOAL_S:.0f} s)")
        per_rule = job_seconds(result.stderr + result.stdout)
        print("job wall seconds by rule (jobs, total, longest):")
        for rule, seconds in sorted(per_rule.items(), key=lambda item: -sum(item[1])):
            print(f"  {rule:28s} {len(seconds):3d} {sum(seconds):7.0f} {max(seconds):6.0f}")
        if args.without_traces:
            return 0
        mapes = pd.read_csv(workdir / "results" / "h100-public" / "table3.csv")
        print("SLIM throughput MAPE on the public traces vs the quality bars:")
        for setting, bar in QUALITY_BARS_PCT.items():
            value = mapes[(mapes["setting"] == setting) & (mapes["predictor"] == "SLIM")]["mape_throughput_pct"].iloc[0]
            print(f"  {setting}: {value:.1f}% (bar <= {bar:.0f}%): {'met' if value <= bar else 'NOT met'}")
        print("SIM throughput MAPE on the public traces vs its aim on an unseen model:")
        for setting, aim in SIM_AIM_PCT.items():
            value = mapes[(mapes["setting"] == setting) & (mapes["predictor"] == "SIM")]["mape_throughput_pct"].iloc[0]
            print(f"  {setting}: {value:.1f}% (aim <= {aim:.0f}%): {'met' if value <= aim else 'NOT met'}")
    finally:
        if args.keep:
            print(f"scratch copy kept at {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
