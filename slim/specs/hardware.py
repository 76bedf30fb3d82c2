"""Accelerator constants (peak FLOP/s, HBM bandwidth, memory), from the hardware catalog
(`slim/specs/hardware.yaml`, shipped with the package: `HARDWARE_FILE`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slim.yaml_files import read_yaml_mapping, require_keys

HARDWARE_FILE = Path(__file__).with_name("hardware.yaml")
"""The hardware catalog shipped with the package; the pipeline's `hardware_file` points at it too."""

GIB = 2**30
"""Bytes in a GiB (vLLM and the server logs print memory in GiB)."""

_REQUIRED_KEYS = ("peak_flops_per_s", "hbm_bandwidth_bytes_per_s", "memory_bytes", "gpu_memory_utilization")


@dataclass(frozen=True)
class Hardware:
    """One GPU. SLIM's ``F_max`` is `peak_flops_per_s`, ``BW_max`` is `hbm_bandwidth_bytes_per_s`."""

    name: str
    peak_flops_per_s: float
    hbm_bandwidth_bytes_per_s: float
    memory_bytes: int
    gpu_memory_utilization: float = 0.9
    display_name: str = ""

    @property
    def vllm_budget_bytes(self) -> float:
        """Memory vLLM may use: ``gpu_memory_utilization x memory``."""
        return self.gpu_memory_utilization * self.memory_bytes


def hardware_from_mapping(name: str, entry: dict, source: str = "config") -> Hardware:
    """Build a `Hardware` from one config entry, naming the missing key on error."""
    require_keys(entry, _REQUIRED_KEYS, f"{source}: hardware '{name}'")
    return Hardware(
        name=name,
        peak_flops_per_s=float(entry["peak_flops_per_s"]),
        hbm_bandwidth_bytes_per_s=float(entry["hbm_bandwidth_bytes_per_s"]),
        memory_bytes=int(entry["memory_bytes"]),
        gpu_memory_utilization=float(entry["gpu_memory_utilization"]),
        display_name=str(entry.get("display_name", name)),
    )


def load_hardware(path: str | Path = HARDWARE_FILE) -> dict[str, Hardware]:
    """Load every hardware entry of a hardware file."""
    path = Path(path)
    raw = read_yaml_mapping(path, f"hardware file not found: {path}", "a mapping of hardware name -> constants")
    return {name: hardware_from_mapping(name, entry, str(path)) for name, entry in raw.items()}
