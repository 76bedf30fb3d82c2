"""Time the simulator on the default grid: `python workflow/bench/bench_sim.py [out_dir] [workers]`.

Writes every run directory of config/sim_grid.yaml under out_dir (default: a temporary
folder, removed afterwards) and prints the wall time; the target is under 60 s on 2 cores.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from slim.sim.constants import SimConstants, load_sim_constants  # noqa: E402
from slim.sim.grid import simulate_grid_to_dir  # noqa: E402
from slim.specs.architecture import MODELS_FILE, load_architectures  # noqa: E402
from slim.specs.hardware import HARDWARE_FILE, load_hardware  # noqa: E402


def main(out_dir: str | None, workers: int) -> None:
    spec = yaml.safe_load((REPO / "config" / "sim_grid.yaml").read_text())
    constants_path = REPO / "config" / "hardware" / "h100-64gb-sim.yaml"
    constants = load_sim_constants(constants_path) if constants_path.exists() else SimConstants()
    architectures = load_architectures(MODELS_FILE)
    hardware = load_hardware(HARDWARE_FILE)
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(out_dir) if out_dir else Path(scratch)
        start = time.perf_counter()
        run_dirs = simulate_grid_to_dir(spec, architectures, hardware, constants, target, workers=workers)
        elapsed = time.perf_counter() - start
    print(f"{len(run_dirs)} runs simulated and written in {elapsed:.1f} s with {workers} worker(s)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None, int(sys.argv[2]) if len(sys.argv) > 2 else 2)
