"""Accelerator constants (peak FLOP/s per dtype, HBM bandwidth, memory, the link tensor-parallel ranks
talk over), from the hardware catalog (`slim/specs/hardware.yaml`, shipped with the package:
`HARDWARE_FILE`). The pipeline reads the one file its config names (`load_hardware`); `slim`'s
``--hardware-file`` adds a user's file to the shipped catalog (`load_hardware_with_shipped`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from slim.errors import ConfigError
from slim.specs.formats import COMPUTE_DTYPES
from slim.yaml_files import read_yaml_mapping, require_keys

HARDWARE_FILE = Path(__file__).with_name("hardware.yaml")
"""The hardware catalog shipped with the package; the pipeline's `hardware_file` points at it too."""

GIB = 2**30
"""Bytes in a GiB (vLLM and the server logs print memory in GiB)."""

_REQUIRED_KEYS = ("peak_flops_per_s", "hbm_bandwidth_bytes_per_s", "memory_bytes", "gpu_memory_utilization")
ADD_HARDWARE = f"add it with --hardware-file FILE, a YAML mapping of key -> {', '.join(_REQUIRED_KEYS)}"
"""How a user adds an accelerator the catalog lacks (`unknown_hardware_message`)."""
_OPTIONAL_RATES = ("peak_fp8_flops_per_s", "peak_int8_ops_per_s", "peak_fp4_flops_per_s",
                   "interconnect_bandwidth_bytes_per_s", "interconnect_latency_s")
"""Optional keys (absent: the part lacks the dtype, or the link is not described), each > 0 where given."""

ONE_SHOT, RING = "one_shot", "ring"
ALLREDUCE_KINDS = (ONE_SHOT, RING)
"""How vLLM all-reduces across tensor-parallel ranks on an accelerator (`Hardware.tensor_parallel_allreduce`):
``one_shot``: vLLM's custom all-reduce (``vllm/distributed/device_communicators/custom_all_reduce.py``,
CUDA only, used where every pair of GPUs is linked by NVLink), each rank reading its peers' buffers
in one step, so its latency does not grow with the ranks; ``ring``: NCCL or RCCL's ring, ``2 (t - 1)``
hops whose latency grows with the ranks (every other accelerator, AMD's included in vLLM of 2024)."""


@dataclass(frozen=True)
class Hardware:
    """One GPU. SLIM's ``F_max`` is `peak_flops_per_s` (dense 16-bit tensor FLOP/s), ``BW_max`` is
    `hbm_bandwidth_bytes_per_s`. The dense tensor peaks of the narrower dtypes are None where the
    part has no tensor cores for them; `interconnect_*` describe the link tensor-parallel ranks use
    (per GPU and per direction), None where not described."""

    name: str
    peak_flops_per_s: float
    hbm_bandwidth_bytes_per_s: float
    memory_bytes: int
    gpu_memory_utilization: float = 0.9
    display_name: str = ""
    tensor_parallel_allreduce: str = RING   # ALLREDUCE_KINDS
    peak_fp8_flops_per_s: float | None = None
    peak_int8_ops_per_s: float | None = None
    peak_fp4_flops_per_s: float | None = None
    interconnect: str = ""
    interconnect_bandwidth_bytes_per_s: float | None = None   # per GPU, per direction
    interconnect_latency_s: float | None = None

    def peak_flops_for(self, compute_dtype: str) -> float:
        """Dense tensor peak for GEMMs in `compute_dtype` (`slim.specs.formats.COMPUTE_DTYPES`): the
        dtype's own peak, or the 16-bit peak where the part lacks it (vLLM then runs a weight-only
        kernel, e.g. Marlin, that dequantises to 16 bits: an A100 serving fp8 weights)."""
        if compute_dtype not in COMPUTE_DTYPES:
            raise ConfigError(f"compute dtype '{compute_dtype}' is not one of {', '.join(COMPUTE_DTYPES)}")
        peak = {"fp8": self.peak_fp8_flops_per_s, "int8": self.peak_int8_ops_per_s,
                "fp4": self.peak_fp4_flops_per_s}.get(compute_dtype)
        return self.peak_flops_per_s if peak is None else peak

    def tensor_parallel_collective_steps(self, tensor_parallel: int) -> int:
        """The collective steps per engine step that grow with the ranks (`ALLREDUCE_KINDS`): none at
        ``t = 1``, one for a one-shot all-reduce, ``t - 1`` for a ring (the simulator's TP step overhead
        is paid once per such step)."""
        if tensor_parallel <= 1:
            return 0
        return 1 if self.tensor_parallel_allreduce == ONE_SHOT else tensor_parallel - 1

    @property
    def vllm_budget_bytes(self) -> float:
        """Memory vLLM may use: ``gpu_memory_utilization x memory``."""
        return self.gpu_memory_utilization * self.memory_bytes


def hardware_from_mapping(name: str, entry: dict, source: str = "config") -> Hardware:
    """Build a `Hardware` from one config entry, naming the missing key on error."""
    require_keys(entry, _REQUIRED_KEYS, f"{source}: hardware '{name}'")
    allreduce = str(entry.get("tensor_parallel_allreduce", RING))
    if allreduce not in ALLREDUCE_KINDS:
        raise ConfigError(f"{source}: hardware '{name}': tensor_parallel_allreduce must be one of "
                          f"{', '.join(ALLREDUCE_KINDS)}, got '{allreduce}'")
    optional = {}
    for key in _OPTIONAL_RATES:
        value = entry.get(key)
        if value is None:
            continue
        try:
            number = float(value)   # PyYAML reads 1.979e15 (no exponent sign) as a string
        except (TypeError, ValueError):
            number = float("nan")
        if isinstance(value, bool) or not number > 0:
            raise ConfigError(f"{source}: hardware '{name}': {key} must be a number > 0, got {value!r}")
        optional[key] = number
    return Hardware(
        name=name,
        peak_flops_per_s=float(entry["peak_flops_per_s"]),
        hbm_bandwidth_bytes_per_s=float(entry["hbm_bandwidth_bytes_per_s"]),
        memory_bytes=int(entry["memory_bytes"]),
        gpu_memory_utilization=float(entry["gpu_memory_utilization"]),
        display_name=str(entry.get("display_name", name)),
        tensor_parallel_allreduce=allreduce,
        interconnect=str(entry.get("interconnect", "")),
        **optional,
    )


def load_hardware(path: str | Path = HARDWARE_FILE) -> dict[str, Hardware]:
    """Load every hardware entry of one hardware file (and nothing else: the pipeline's `hardware_file`)."""
    path = Path(path)
    raw = read_yaml_mapping(path, f"hardware file not found: {path}", "a mapping of hardware name -> constants")
    return {name: hardware_from_mapping(name, entry, str(path)) for name, entry in raw.items()}


def load_hardware_with_shipped(path: str | Path = HARDWARE_FILE) -> dict[str, Hardware]:
    """The shipped catalog with the entries of a user's hardware file added (``--hardware-file``): an
    entry of `path` replaces the shipped one of the same key, the others join them (after the shipped
    keys, in the file's order). `path` the shipped file itself: the shipped catalog."""
    shipped = load_hardware(HARDWARE_FILE)
    path = Path(path)
    if path.resolve() == HARDWARE_FILE.resolve():
        return shipped
    return {**shipped, **load_hardware(path)}


def unknown_hardware_message(key: str, catalog: Mapping[str, Hardware]) -> str:
    """Why `key` is no accelerator of `catalog`: the keys it knows, and how to add one."""
    return f"unknown hardware '{key}'; known: {', '.join(catalog)}; {ADD_HARDWARE}"
