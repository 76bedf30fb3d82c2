"""Constants of the vLLM serving simulator: calibrated kernel efficiencies and
overheads, plus the fixed scheduler and memory settings of the server.

The memory constants come from the public traces' own server logs
(``Memory profiling results: total_gpu_memory=63.43GiB ... non_torch_memory=0.10GiB``
and the growth of ``peak_torch_memory`` with ``--max-num-seqs``); the scheduler
constants default to vLLM V0 (``max_num_batched_tokens=512`` is what the server
log prints: "Chunked prefill is enabled with max_num_batched_tokens=512"). A run of a
V1 server takes V1's scheduler and budget from its vLLM version
(`slim.sim.vllm_defaults.constants_for_vllm_version`), or from these fields set by hand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from slim.columns import SIM_FITTED_CONSTANTS
from slim.defaults import SIM_CONSTANTS_FILE  # noqa: F401 (the simulator's constants file, imported from here)
from slim.errors import ConfigError
from slim.gpu.kv_memory import VllmMemoryProfile
from slim.specs.hardware import GIB
from slim.yaml_files import read_yaml_mapping

ENGINES = ("v0", "v1")
"""The vLLM schedulers the simulator runs: V0's ``_schedule_chunked_prefill`` (`slim.sim.scheduler`)
and V1's ``Scheduler.schedule`` (`slim.sim.scheduler_v1`)."""

_SCHEDULER_DEFAULTS = {"scheduler_engine": "v0", "async_scheduling": False}
"""The scheduler fields at V0; `SimConstants.to_dict` leaves them out there, so a V0 constants
file is written as it always was."""

FITTED_CONSTANTS = SIM_FITTED_CONSTANTS
"""The constants `calibrate` fits (gemm_compute_efficiency, gemm_memory_efficiency,
attention_memory_efficiency, kernel_latency_s, step_overhead_base_s, step_overhead_per_seq_s,
xformers_attention_latency_s, tensor_parallel_step_overhead_s; named in `slim.columns`, whose tables
carry them); everything else is fixed from logs or vLLM defaults. The last two are paid only by runs
on vLLM V0's XFormers backend and by runs at tensor_parallel > 1: where no training run pays one,
the calibration holds it at zero (`slim.sim.schedule_fit.PAID_BY_SOME_RUNS`)."""

BOUNDS: dict[str, tuple[float, float]] = {
    "gemm_compute_efficiency": (0.05, 1.0),
    "gemm_memory_efficiency": (0.05, 1.0),
    "attention_memory_efficiency": (0.05, 1.0),
    "kernel_latency_s": (0.0, 50e-6),
    "step_overhead_base_s": (0.0, 20e-3),
    "step_overhead_per_seq_s": (0.0, 500e-6),
    "xformers_attention_latency_s": (0.0, 50e-6),
    "tensor_parallel_step_overhead_s": (0.0, 10e-3),
}
"""Physical bounds of the fitted constants (efficiencies in (0, 1])."""


@dataclass(frozen=True)
class SimConstants:
    """Everything the simulator needs beyond architecture and hardware.

    Step cost (per engine step, see `slim.sim.cost`): each GEMM costs
    ``max(FLOPs / (gemm_compute_efficiency F_max), bytes / (gemm_memory_efficiency BW_max))
    + kernel_latency_s``; decode attention streams the KV cache at
    ``attention_memory_efficiency BW_max``; the CPU side adds
    ``step_overhead_base_s + step_overhead_per_seq_s x scheduled sequences``, and at tensor
    parallelism ``t > 1`` also ``k_t x tensor_parallel_step_overhead_s``: the step's collectives
    (the driver sending each step's inputs to its workers, the all-reduces), with ``k_t`` the
    accelerator's collective steps (one for NVLink's one-shot all-reduce, ``t - 1`` for a ring;
    `slim.specs.hardware.ALLREDUCE_KINDS`). A model whose
    head size vLLM V0's FlashAttention-2 backend lacks runs on its XFormers backend, whose
    attention adds ``xformers_attention_latency_s`` per layer and step (`slim.sim.cost`).
    """

    # Fitted (see FITTED_CONSTANTS); the defaults are plausible H100 starting points.
    gemm_compute_efficiency: float = 0.6
    gemm_memory_efficiency: float = 0.8
    attention_memory_efficiency: float = 0.6
    kernel_latency_s: float = 5e-6
    step_overhead_base_s: float = 1e-3
    step_overhead_per_seq_s: float = 40e-6
    xformers_attention_latency_s: float = 0.0    # none unless calibrated on XFormers-backend runs
    tensor_parallel_step_overhead_s: float = 0.0  # none unless calibrated on runs at tensor_parallel > 1
    # Fixed: per-step multiplicative jitter (std of the relative noise, clipped at 3 sigma).
    jitter_rel_sigma: float = 0.02
    # Fixed: the all-reduces of tensor parallelism (bandwidth and latency per all-reduce).
    nvlink_bandwidth_bytes_per_s: float = 450e9
    allreduce_latency_s: float = 8e-6
    # Fixed: vLLM V0 scheduler defaults with --enable-chunked-prefill.
    max_num_batched_tokens: int = 512
    block_size: int = 16
    watermark_fraction: float = 0.01    # V0 only: V1 keeps no watermark
    # Fixed: which scheduler runs (ENGINES), and whether V1 schedules a step before the previous
    # step's output is processed (vLLM's async scheduling, the default from 0.14 on).
    scheduler_engine: str = "v0"
    async_scheduling: bool = False
    # Fixed: memory profile, from the public traces' server logs.
    device_reserved_bytes: float = 0.57 * GIB          # 64 GiB card reports 63.43 GiB
    non_torch_memory_bytes: float = 0.10 * GIB
    logits_bytes_per_vocab_entry_per_seq: float = 36.0  # profile-run sampler buffers
    activation_bytes_per_token_per_hidden: float = 45.0  # profile-run hidden activations
    default_max_model_len: int = 2048

    def __post_init__(self) -> None:
        if self.scheduler_engine not in ENGINES:
            raise ConfigError(f"scheduler_engine '{self.scheduler_engine}' is not one of {', '.join(ENGINES)}")
        if self.async_scheduling and self.scheduler_engine != "v1":
            raise ConfigError("async_scheduling is a vLLM V1 mode; set scheduler_engine: v1 with it")

    @property
    def memory_profile(self) -> VllmMemoryProfile:
        """The memory fields, as vLLM's reservation model (`slim.gpu.kv_memory`) takes them."""
        return VllmMemoryProfile(self.device_reserved_bytes, self.non_torch_memory_bytes,
                                 self.logits_bytes_per_vocab_entry_per_seq,
                                 self.activation_bytes_per_token_per_hidden, self.max_num_batched_tokens,
                                 self.block_size)

    def with_fitted(self, values: Mapping[str, float]) -> "SimConstants":
        """A copy with some fitted constants replaced."""
        unknown = set(values) - set(FITTED_CONSTANTS)
        if unknown:
            raise ConfigError(f"not fitted sim constants: {sorted(unknown)}; fitted are {FITTED_CONSTANTS}")
        return replace(self, **{key: float(value) for key, value in values.items()})

    def to_dict(self) -> dict[str, Any]:
        """Every field, but the scheduler fields only where they differ from V0 (`_SCHEDULER_DEFAULTS`)."""
        return {key: value for key, value in asdict(self).items()
                if key not in _SCHEDULER_DEFAULTS or value != _SCHEDULER_DEFAULTS[key]}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "sim constants") -> "SimConstants":
        known = {field.name: field.type for field in fields(cls)}
        unknown = set(values) - set(known)
        if unknown:
            raise ConfigError(f"{source}: unknown sim constant(s) {sorted(unknown)}")
        defaults = cls()
        for key, value in values.items():
            if isinstance(getattr(defaults, key), bool) and not isinstance(value, bool):
                raise ConfigError(f"{source}: sim constant {key} must be true or false, got {value!r}")
        converted = {key: type(getattr(defaults, key))(value) for key, value in values.items()}
        return cls(**converted)


def load_calibration_runs(path: str | Path) -> tuple[str | None, pd.DataFrame]:
    """The runs a constants file was fitted on, as its ``residuals`` list them (model, input_len,
    output_len, max_num_seqs), and the hardware key it names (``hardware``; None where it names
    none). A file without residuals lists no runs."""
    path = Path(path)
    raw = read_yaml_mapping(path, f"sim constants file not found: {path}")
    entries = raw.get("residuals") or []
    if not isinstance(entries, list):
        raise ConfigError(f"{path}: key 'residuals' must be a list of fitted runs")
    columns = ["model", "input_len", "output_len", "max_num_seqs"]
    try:
        runs = pd.DataFrame([{name: entry[name] for name in columns} for entry in entries], columns=columns)
    except (KeyError, TypeError) as error:
        raise ConfigError(f"{path}: a 'residuals' entry lacks {error}; each names {', '.join(columns)}") from None
    hardware = raw.get("hardware")
    return (str(hardware) if hardware is not None else None), runs


def load_sim_constants(path: str | Path) -> SimConstants:
    """Read `SimConstants` from a YAML file (key ``constants:``, or a flat mapping)."""
    path = Path(path)
    raw = read_yaml_mapping(path, f"sim constants file not found: {path}")
    values = raw.get("constants", raw)
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: key 'constants' must be a mapping")
    return SimConstants.from_dict(values, str(path))
