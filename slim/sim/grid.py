"""Expand a simulation grid (a dict loaded from ``config/sim_grid.yaml``) into runs and
write them as run directories in the public-trace layout.

Grid spec::

    hardware: h100-64gb          # key of the hardware catalog
    num_prompts: 2000
    seed: 0                      # per-run seed = seed + crc32(run key) (distinct jitter streams)
    max_model_len: {opt-1.3b: 2048, ...}   # optional; else SimConstants.default_max_model_len
    sweeps:
      - name: output_length
        dir: "output_length/_{output_len}"    # sweep folder; {input_len}/{output_len} filled in
        models: [opt-1.3b, {name: qwen2-72b, tensor_parallel: 4}]
        input_len: [256]
        output_len: [16, 32]
        max_num_seqs: [1, 2, 4]
"""

from __future__ import annotations

import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from slim.errors import ConfigError
from slim.sim.constants import SimConstants
from slim.sim.engine import simulate_run
from slim.sim.result import SimResult
from slim.sim.rundir import write_run_dir
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware


@dataclass(frozen=True)
class GridRun:
    """One configuration of the grid."""

    sweep_dir: str
    model: str
    tensor_parallel: int
    input_len: int
    output_len: int
    max_num_seqs: int
    num_prompts: int
    seed: int
    max_model_len: int | None


def _require(mapping: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in mapping:
        raise ConfigError(f"sim grid: {where} lacks key '{key}'")
    return mapping[key]


def expand_grid(grid_spec: Mapping[str, Any]) -> list[GridRun]:
    """All runs of a grid spec, in spec order (see the module docstring for the format)."""
    num_prompts = int(grid_spec.get("num_prompts", 2000))
    base_seed = int(grid_spec.get("seed", 0))
    max_model_len = dict(grid_spec.get("max_model_len") or {})
    runs: list[GridRun] = []
    for index, sweep in enumerate(_require(grid_spec, "sweeps", "the spec")):
        where = f"sweep {index} ({sweep.get('name', '?')})"
        dir_template = str(sweep.get("dir", "output_length/_{output_len}"))
        for model_entry in _require(sweep, "models", where):
            if isinstance(model_entry, str):
                model, tensor_parallel = model_entry, 1
            else:
                model = str(_require(model_entry, "name", where))
                tensor_parallel = int(model_entry.get("tensor_parallel", 1))
            for input_len in _require(sweep, "input_len", where):
                for output_len in _require(sweep, "output_len", where):
                    sweep_dir = dir_template.format(input_len=input_len, output_len=output_len)
                    for max_num_seqs in _require(sweep, "max_num_seqs", where):
                        key = f"{sweep_dir}/{model}/{tensor_parallel}/{input_len}/{output_len}/{max_num_seqs}"
                        runs.append(GridRun(sweep_dir, model, tensor_parallel, int(input_len), int(output_len),
                                            int(max_num_seqs), num_prompts,
                                            base_seed + zlib.crc32(key.encode()) % 1_000_000,
                                            max_model_len.get(model)))
    keys = [(r.sweep_dir, r.model, r.max_num_seqs, r.num_prompts) for r in runs]
    if len(set(keys)) != len(keys):
        raise ConfigError("sim grid: two runs map to the same run directory; give the sweeps distinct 'dir' "
                          "templates (include {input_len} or {output_len})")
    return runs


def _hardware_of(grid_spec: Mapping[str, Any], hardware: Hardware | Mapping[str, Hardware]) -> Hardware:
    if isinstance(hardware, Hardware):
        return hardware
    name = str(grid_spec.get("hardware", "h100-64gb"))
    if name not in hardware:
        raise ConfigError(f"sim grid: hardware '{name}' not in the hardware catalog ({', '.join(hardware)})")
    return hardware[name]


def _simulate(run: GridRun, architectures: ArchitectureCatalog, hw: Hardware, consts: SimConstants) -> SimResult:
    return simulate_run(architectures[run.model], hw, consts, run.input_len, run.output_len, run.max_num_seqs,
                        run.num_prompts, run.seed, run.tensor_parallel, max_model_len=run.max_model_len)


def simulate_grid(grid_spec: Mapping[str, Any], architectures: ArchitectureCatalog,
                  hardware: Hardware | Mapping[str, Hardware],
                  sim_constants: SimConstants) -> Iterator[tuple[GridRun, SimResult]]:
    """Simulate every run of the grid in order (serially), yielding (run, result)."""
    hw = _hardware_of(grid_spec, hardware)
    for run in expand_grid(grid_spec):
        yield run, _simulate(run, architectures, hw, sim_constants)


def _simulate_and_write(args: tuple) -> str:
    run, architectures, hw, consts, out_dir = args
    result = _simulate(run, architectures, hw, consts)
    return str(write_run_dir(result, out_dir, run.sweep_dir, consts.max_num_batched_tokens))


def simulate_grid_to_dir(grid_spec: Mapping[str, Any], architectures: ArchitectureCatalog,
                         hardware: Hardware | Mapping[str, Hardware], sim_constants: SimConstants,
                         out_dir: str | Path, workers: int = 1) -> list[Path]:
    """Simulate the grid and write one run directory per run under ``out_dir``.

    ``workers > 1`` spreads runs over processes; the output does not depend on it.
    Returns the run directories in grid order.
    """
    hw = _hardware_of(grid_spec, hardware)
    jobs = [(run, architectures, hw, sim_constants, Path(out_dir)) for run in expand_grid(grid_spec)]
    if workers <= 1:
        return [Path(_simulate_and_write(job)) for job in jobs]
    # Longest runs first keeps the workers busy until the end.
    order = sorted(range(len(jobs)), key=lambda i: jobs[i][0].output_len / jobs[i][0].max_num_seqs, reverse=True)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        done = dict(zip(order, pool.map(_simulate_and_write, [jobs[i] for i in order], chunksize=4)))
    return [Path(done[i]) for i in range(len(jobs))]
