"""Benchmark: time a from-scratch `snakemake all` and a no-op rerun in a scratch copy.

Run by hand from the repository root: ``python workflow/bench/benchmark_pipeline.py [--cores 8]``.
It copies the workflow and the code (`slim/`, `baselines/`) to a temporary folder (so your
results/ stay untouched, and each copy runs its own code: PYTHONPATH is the copy's root),
runs every rule from scratch, then runs `all` again (nothing to do), and prints both wall
times, the wall seconds of every job grouped by rule (from Snakemake's job start/finish
lines), and SLIM's MAPE on the public traces against the project's quality bars per held-out
setting, and SIM's (the calibrated simulator as a predictor) against its aim on the unseen-model
transfers. The goals on the 2-core development machine: fresh `all` <= 60 s, no-op rerun <= 3 s;
the CPU seconds of the whole run (user + system of every job) are printed too, since on 2 cores
with `--cores 8` the wall time of one job says little about its cost.

``--baseline REV`` also benchmarks the committed tree of REV (``git archive``), side by side in
the same invocation: the two alternate (baseline fresh and no-op, then this tree's, for each of
``--rounds``), the ratio of their CPU seconds is printed, and every file under results/ and
figures/ of the two is compared byte for byte (any difference is listed and the exit code is 1).
"""

from __future__ import annotations

import argparse
import collections
import filecmp
import io
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
QUALITY_BARS_PCT = {"output_length": 5.0, "model": 15.0, "same_curve": 12.0}
SIM_AIM_PCT = {"model": 5.0, "model_output_length": 5.0}   # an unseen model of the same hardware
COPIED = ("Snakefile", "workflow", "config", "profiles", "README.md", "environment.yml", "slim", "baselines")
COMPARED = ("results", "figures")
FRESH_GOAL_S, NOOP_GOAL_S = 60.0, 3.0

_TIMESTAMP = re.compile(r"^\[(\w{3} \w{3}\s+\d+ \d\d:\d\d:\d\d \d{4})\]")
_RULE = re.compile(r"^(?:local)?rule (\S+):")
_JOBID = re.compile(r"^\s+jobid: (\d+)")
_FINISHED = re.compile(r"^Finished jobid: (\d+)")


@dataclass
class Timing:
    """One tree's fresh run and no-op rerun."""

    label: str
    fresh_s: float
    fresh_cpu_s: float
    noop_s: float
    noop_cpu_s: float
    log_text: str


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


def run_snakemake(workdir: Path, snakemake_args: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of Snakemake and all its jobs, the finished process), with the
    copy's own code first on the import path."""
    before = os.times()
    start = time.perf_counter()
    environ = {key: value for key, value in os.environ.items() if key != "SLIM_TRACES_ROOT"}
    environ["PYTHONPATH"] = str(workdir)
    result = subprocess.run([sys.executable, "-m", "snakemake", *snakemake_args],
                            cwd=workdir, capture_output=True, text=True, env=environ)
    after = os.times()
    cpu_s = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return time.perf_counter() - start, cpu_s, result


def copy_working_tree(destination: Path) -> None:
    """This checkout's workflow and code, as they are on disk (uncommitted changes included)."""
    destination.mkdir(parents=True)
    for item in COPIED:
        source = REPO / item
        if source.is_dir():
            shutil.copytree(source, destination / item, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif source.exists():
            shutil.copy(source, destination / item)


def copy_revision(revision: str, destination: Path) -> None:
    """The workflow and code of a committed revision (`git archive`), without touching the checkout."""
    destination.mkdir(parents=True)
    present = subprocess.run(["git", "ls-tree", "--name-only", revision], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    archive = subprocess.run(["git", "archive", "--format=tar", revision, *[item for item in COPIED
                                                                            if item in present]],
                             cwd=REPO, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(destination, filter="data")


def benchmark_tree(label: str, workdir: Path, snakemake_args: list[str], with_traces: bool) -> Timing:
    """Fresh run, then a no-op rerun, of one tree already copied to `workdir`."""
    if with_traces:
        # The traces root (../shared/traces) must still resolve from the scratch copy.
        (workdir.parent / "shared").symlink_to(REPO.parent / "shared")
    fresh_s, fresh_cpu_s, result = run_snakemake(workdir, snakemake_args)
    if result.returncode != 0:
        raise RuntimeError(f"{label}: the fresh run failed:\n{result.stderr[-3000:]}")
    noop_s, noop_cpu_s, rerun = run_snakemake(workdir, snakemake_args)
    if rerun.returncode != 0:
        raise RuntimeError(f"{label}: the no-op rerun failed:\n{rerun.stderr[-3000:]}")
    return Timing(label, fresh_s, fresh_cpu_s, noop_s, noop_cpu_s, result.stderr + result.stdout)


def output_differences(baseline: Path, candidate: Path) -> list[str]:
    """Every file under results/ and figures/ that is missing from one tree or differs in bytes."""
    differences = []
    for folder in COMPARED:
        files = {side: {path.relative_to(root) for path in (root / folder).rglob("*") if path.is_file()}
                 for side, root in (("baseline", baseline), ("candidate", candidate))}
        for path in sorted(files["baseline"] - files["candidate"]):
            differences.append(f"only in the baseline: {path}")
        for path in sorted(files["candidate"] - files["baseline"]):
            differences.append(f"only in this tree: {path}")
        for path in sorted(files["baseline"] & files["candidate"]):
            if not filecmp.cmp(baseline / path, candidate / path, shallow=False):
                differences.append(f"differs: {path}")
    return differences


def compared_file_count(root: Path) -> int:
    return sum(1 for folder in COMPARED for path in (root / folder).rglob("*") if path.is_file())


def rule_cpu_seconds(workdir: Path) -> dict[str, float]:
    """CPU seconds by benchmark file (`benchmark:` of the heavy rules), largest first."""
    seconds = {}
    for path in sorted((workdir / "benchmarks").rglob("*.tsv")):
        frame = pd.read_csv(path, sep="\t")
        seconds[str(path.relative_to(workdir / "benchmarks"))] = float(frame["cpu_time"].iloc[-1])
    return dict(sorted(seconds.items(), key=lambda item: -item[1]))


def print_timing(timing: Timing) -> None:
    print(f"{timing.label}: fresh {timing.fresh_s:.1f} s wall, {timing.fresh_cpu_s:.1f} s CPU; "
          f"no-op rerun {timing.noop_s:.1f} s wall, {timing.noop_cpu_s:.1f} s CPU")


def print_job_seconds(log_text: str) -> None:
    per_rule = job_seconds(log_text)
    print("job wall seconds by rule (jobs, total, longest):")
    for rule, seconds in sorted(per_rule.items(), key=lambda item: -sum(item[1])):
        print(f"  {rule:28s} {len(seconds):3d} {sum(seconds):7.0f} {max(seconds):6.0f}")


def print_quality(workdir: Path) -> None:
    mapes = pd.read_csv(workdir / "results" / "h100-public" / "table3.csv")
    print("SLIM throughput MAPE on the public traces vs the quality bars:")
    for setting, bar in QUALITY_BARS_PCT.items():
        value = mapes[(mapes["setting"] == setting) & (mapes["predictor"] == "SLIM")]["mape_throughput_pct"].iloc[0]
        print(f"  {setting}: {value:.1f}% (bar <= {bar:.0f}%): {'met' if value <= bar else 'NOT met'}")
    print("SIM throughput MAPE on the public traces vs its aim on an unseen model:")
    for setting, aim in SIM_AIM_PCT.items():
        value = mapes[(mapes["setting"] == setting) & (mapes["predictor"] == "SIM")]["mape_throughput_pct"].iloc[0]
        print(f"  {setting}: {value:.1f}% (aim <= {aim:.0f}%): {'met' if value <= aim else 'NOT met'}")


def print_side_by_side(timings: list[Timing], revision: str) -> None:
    """Each round's figures, then the medians and the ratio this tree / baseline."""
    by_label = collections.defaultdict(list)
    for timing in timings:
        by_label[timing.label].append(timing)
    medians = {label: {field: statistics.median(getattr(t, field) for t in runs)
                       for field in ("fresh_s", "fresh_cpu_s", "noop_s", "noop_cpu_s")}
               for label, runs in by_label.items()}
    print(f"medians over {len(by_label['this tree'])} round(s) (baseline = {revision}):")
    for label, values in medians.items():
        print(f"  {label:12s} fresh {values['fresh_s']:6.1f} s wall {values['fresh_cpu_s']:7.1f} s CPU; "
              f"no-op {values['noop_s']:5.1f} s wall {values['noop_cpu_s']:5.1f} s CPU")
    base, mine = medians["baseline"], medians["this tree"]
    print(f"ratio this tree / baseline: fresh CPU {mine['fresh_cpu_s'] / base['fresh_cpu_s']:.2f}, "
          f"fresh wall {mine['fresh_s'] / base['fresh_s']:.2f}, no-op wall {mine['noop_s'] / base['noop_s']:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=8, help="--cores for snakemake (default 8, as the README)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copies and print their path")
    parser.add_argument("--without-traces", action="store_true",
                        help="no ../shared beside the copy (as in a clone with nothing beside it): the real datasets "
                             "are skipped and only the simulated part is built and timed")
    parser.add_argument("--baseline", metavar="REV",
                        help="also benchmark the committed tree of REV, alternating with this one, and compare their "
                             "results/ and figures/ byte for byte")
    parser.add_argument("--rounds", type=int, default=2,
                        help="with --baseline: how many times each tree is benchmarked, alternating (default 2)")
    parser.add_argument("--target", default="all", help="the Snakemake target (default all)")
    parser.add_argument("--configfile", nargs="+", default=[],
                        help="config files for snakemake (e.g. config/config.yaml config/accelerators.yaml for the "
                             "target accelerators)")
    args = parser.parse_args()
    snakemake_args = [args.target, "--cores", str(args.cores)]
    if args.configfile:
        snakemake_args += ["--configfile", *args.configfile]
    scratch = Path(tempfile.mkdtemp(prefix="slim-bench-"))
    started = datetime.now(timezone.utc)
    print(f"started {started:%Y-%m-%d %H:%M} UTC on {os.cpu_count()} CPUs: snakemake {' '.join(snakemake_args)}")
    try:
        rounds = args.rounds if args.baseline else 1
        trees = [("baseline", copy_revision), ("this tree", None)] if args.baseline else [("this tree", None)]
        timings, first_copy = [], {}
        for round_number in range(rounds):
            for label, copier in trees:
                workdir = scratch / f"{label.replace(' ', '-')}-{round_number}" / "repo"
                if copier is None:
                    copy_working_tree(workdir)
                else:
                    copier(args.baseline, workdir)
                timing = benchmark_tree(label, workdir, snakemake_args, not args.without_traces)
                timings.append(timing)
                print_timing(timing)
                first_copy.setdefault(label, workdir)
        mine = first_copy["this tree"]
        load = os.getloadavg()[0]
        final = [timing for timing in timings if timing.label == "this tree"][-1]
        print(f"snakemake {args.target} --cores {args.cores} from scratch: {final.fresh_s:.1f} s wall, "
              f"{final.fresh_cpu_s:.1f} s CPU (goal <= {FRESH_GOAL_S:.0f} s wall on {os.cpu_count()} CPUs; "
              f"load average now {load:.1f})")
        print(f"no-op rerun: {final.noop_s:.1f} s wall, {final.noop_cpu_s:.1f} s CPU (goal <= {NOOP_GOAL_S:.0f} s)")
        print_job_seconds(final.log_text)
        print("CPU seconds by benchmark file (heavy rules):")
        for name, seconds in rule_cpu_seconds(mine).items():
            print(f"  {name:56s} {seconds:6.1f}")
        status = 0
        if args.baseline:
            print_side_by_side(timings, args.baseline)
            differences = output_differences(first_copy["baseline"], mine)
            print(f"results/ and figures/: {compared_file_count(mine)} files in this tree, "
                  f"{compared_file_count(first_copy['baseline'])} in the baseline; "
                  f"{'byte-identical' if not differences else f'{len(differences)} difference(s):'}")
            for line in differences:
                print(f"  {line}")
            status = 1 if differences else 0
        if not args.without_traces and args.target == "all":
            print_quality(mine)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"scratch copies kept at {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
