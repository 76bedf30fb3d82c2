"""Time and memory of reading one large metrics CSV: `python workflow/bench/bench_metrics_csv.py [MB]`.

Writes a synthetic ``metrics_engine.csv`` of about MB megabytes (default 200) with the public
traces' ten columns into a temporary folder (removed afterwards), parses it in a fresh process
and prints the wall time and the peak resident memory; the target is under 500 MB.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
HEADER = ("time [s],scheduler_total_time,model_forward_total_time,gpu_cache_usage_perc,num_requests_running,"
          "num_requests_waiting,num_preemptions_total,request_success_total,prompt_tokens_total,"
          "generation_tokens_total\n")
_MEASURE = """
import resource, sys, time
from pathlib import Path
from slim.traces.metrics_csv import parse_engine_metrics
start = time.perf_counter()
metrics = parse_engine_metrics(Path(sys.argv[1]))
seconds = time.perf_counter() - start
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{seconds:.2f} s, peak RSS {peak_mb:.0f} MB, mean batch {metrics.mean_batch_size:.2f}")
"""


def write_metrics_csv(path: Path, megabytes: float, seed: int = 0) -> int:
    """A synthetic metrics CSV of about `megabytes` MB, once-a-second samples; the number of rows."""
    rng = np.random.default_rng(seed)
    rows, written, chunk = 0, 0, 100_000
    with open(path, "w") as handle:
        handle.write(HEADER)
        while written < megabytes * 1024 * 1024:
            running, waiting = rng.integers(0, 512, chunk), rng.integers(0, 2000, chunk)
            text = "".join(f"{i + 0.137:.6f},{i * 0.01:.6f},{i * 0.2:.6f},{r / 2048:.6f},{r}.0,{w}.0,0.0,{i}.0,"
                           f"{i * 242}.0,{i * 130}.0\n" for i, r, w in zip(range(rows, rows + chunk), running, waiting))
            handle.write(text)
            written, rows = written + len(text), rows + chunk
    return rows


def main(megabytes: float) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "metrics_engine.csv"
        rows = write_metrics_csv(path, megabytes)
        print(f"{path.stat().st_size / 1e6:.0f} MB, {rows:,} rows: ", end="", flush=True)
        subprocess.run([sys.executable, "-c", _MEASURE, str(path)], cwd=REPO, check=True)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 200.0)
