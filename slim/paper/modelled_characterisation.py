"""The paper's Section V characterisation (Figs. 3-6) rebuilt as MODELLED figures: we have
no GPU counters, so every number comes from the calibrated simulator (`slim.sim`).

* Fig. 3, prefill vs decode share of execution time: `slim.sim.engine.simulate_run` with
  ``B`` requests of ``IL`` prompt and ``OL`` output tokens all sent at once (the paper's
  offline mode, no client test prompt), read from its per-phase accounting.
* Figs. 4-6, the decode phase: `slim.sim.cost.StepCostModel.breakdown` evaluated for the
  idealised lock-step decode of those ``B`` sequences, steps ``j = 1..OL`` with every
  sequence attending to ``IL + j`` tokens (``decode_context_tokens = B (IL + j)``).

`characterisation_table` computes one row per (sweep, value); `slim.paper.figures.modelled` draws
the figures from that table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from slim.errors import ConfigError
from slim.paper.characterisation_config import (
    CONFIG_KEY,
    CharacterisationConfig,
    parse_characterisation_config,
    resolve_characterisation,
)
from slim.sim.constants import SimConstants, load_sim_constants
from slim.sim.cost import StepCostModel
from slim.sim.engine import simulate_run
from slim.specs.architecture import Architecture, load_architectures
from slim.specs.hardware import Hardware, load_hardware
from slim.specs.workload import Workload

TABLE_COLUMNS = (
    "sweep", "value", "model", "hardware", "batch_size", "input_len", "output_len", "active_context_tokens",
    "prefill_s", "decode_s", "prefill_share", "decode_share", "simulated_preemptions",
    "dram_util_mean", "dram_util_peak", "compute_util_mean", "compute_util_peak",
    "attention_share", "ffn_share", "other_share",
    "final_attention_intensity_flop_per_byte", "final_attention_tflop_per_s", "final_attention_dram_util",
    "roofline_tflop_per_s",
)
CSV_FLOAT_FORMAT = "%.6f"



def load_characterisation(section: Any, models_path: str | Path, hardware_path: str | Path,
                          constants_path: str | Path
                          ) -> tuple[CharacterisationConfig, Architecture, Hardware, SimConstants]:
    """Parse the config section and load its architecture, GPU and simulator constants."""
    config = parse_characterisation_config(section)
    arch, hw = resolve_characterisation(config, load_architectures(models_path), load_hardware(hardware_path))
    return config, arch, hw, load_sim_constants(constants_path)


# --- the sweep table ------------------------------------------------------------------

def simulated_phase_times(arch: Architecture, hw: Hardware, consts: SimConstants, workload: Workload,
                          seed: int) -> tuple[float, float, int]:
    """(prefill seconds, decode seconds, preemptions) of one offline run, from `simulate_run`.

    ``B`` requests sent at once to a server with ``max_num_seqs = B`` and
    ``max_model_len = IL + OL``, no client test prompt. The engine's accounting: every step
    lasts ``(GPU + CPU overhead) x jitter``; a mixed step's fixed part (GEMMs, LM head,
    launches, CPU overhead) is split between the phases in proportion to its prefill and
    decode tokens, prefill attention goes to prefill, decode attention to decode. So both
    phases include the CPU-side step overhead. Prompts longer than the token budget
    (``max_num_batched_tokens``, 512) are chunked (vLLM's chunked prefill): IL 16384 needs
    no larger budget, its prompt runs as 32 chunks, overlapping earlier requests' decode.
    """
    result = simulate_run(arch, hw, consts, workload.input_len, workload.output_len,
                          max_num_seqs=workload.batch_size, num_prompts=workload.batch_size, seed=seed,
                          include_test_prompt=False, max_model_len=workload.input_len + workload.output_len)
    if result.status != "ok":
        raise ConfigError(f"{CONFIG_KEY}: {arch.name} at (B, IL, OL) = ({workload.batch_size}, {workload.input_len}, "
                          f"{workload.output_len}) cannot start on {hw.name} ({result.status})")
    if result.completed != workload.batch_size:
        raise ConfigError(f"{CONFIG_KEY}: only {result.completed} of {workload.batch_size} requests completed at "
                          f"(B, IL, OL) = ({workload.batch_size}, {workload.input_len}, {workload.output_len})")
    return result.prefill_time_s, result.decode_time_s, result.num_preemptions


def decode_step_breakdown(cost: StepCostModel, workload: Workload) -> dict[str, np.ndarray]:
    """`StepCostModel.breakdown` for decode steps ``j = 1..OL`` of ``B`` sequences in lock step,
    each attending to ``IL + j`` tokens: ``decode_context_tokens = B (IL + j)``, no prefill."""
    steps = np.arange(1, workload.output_len + 1, dtype=float)
    batch = np.full_like(steps, float(workload.batch_size))
    return cost.breakdown(batch, batch * (workload.input_len + steps), np.zeros_like(steps))


def decode_phase_metrics(cost: StepCostModel, workload: Workload) -> dict[str, float]:
    """Modelled decode-phase metrics of one workload (fractions, not percent).

    Over the steps of `decode_step_breakdown`, with ``G_j`` the step's GPU seconds (CPU-side
    overhead excluded: these are GPU kernel metrics):

    * ``dram_util_mean = sum_j bytes_j / (BW_max sum_j G_j)``, ``dram_util_peak = max_j bytes_j / (BW_max G_j)``;
    * ``compute_util_mean = sum_j FLOPs_j / (F_max sum_j G_j)`` (attention + GEMMs + LM head), peak likewise;
    * ``attention_share``, ``ffn_share`` = time-weighted shares of ``sum_j G_j`` in attention
      (with its launches) and FFN GEMMs (with theirs); ``other_share`` the rest (QKV and output
      projection GEMMs, elementwise kernels, LM head);
    * at the final step ``j = OL`` (context ``B (IL + OL)``): attention arithmetic intensity
      ``FLOPs / KV bytes`` (``2 H_q / (H_kv b_kv)``), achieved TFLOP/s
      ``FLOPs / attention seconds`` (its launch latency included) and its DRAM utilisation
      ``KV bytes / (attention seconds x BW_max)``.

    Utilisation never exceeds the cost model's memory efficiencies (``eta_m``, ``eta_attn``).
    """
    parts = decode_step_breakdown(cost, workload)
    gpu_s = parts["gpu_s"]
    flops = parts["attention_decode_flops"] + parts["gemm_flops"] + parts["lm_head_flops"]
    bandwidth, peak_flops = cost.hw.hbm_bandwidth_bytes_per_s, cost.hw.peak_flops_per_s
    total_gpu_s = float(gpu_s.sum())
    attention_share = float(parts["attention_s"].sum()) / total_gpu_s
    ffn_share = float(parts["ffn_gemm_s"].sum()) / total_gpu_s
    final_flops = float(parts["attention_decode_flops"][-1])
    final_bytes = float(parts["attention_decode_bytes"][-1])
    final_attention_s = float(parts["attention_s"][-1])
    return {
        "dram_util_mean": float(parts["dram_bytes"].sum()) / (bandwidth * total_gpu_s),
        "dram_util_peak": float(np.max(parts["dram_bytes"] / (bandwidth * gpu_s))),
        "compute_util_mean": float(flops.sum()) / (peak_flops * total_gpu_s),
        "compute_util_peak": float(np.max(flops / (peak_flops * gpu_s))),
        "attention_share": attention_share,
        "ffn_share": ffn_share,
        "other_share": float((gpu_s - parts["attention_s"] - parts["ffn_gemm_s"]).sum()) / total_gpu_s,
        "final_attention_intensity_flop_per_byte": final_flops / final_bytes,
        "final_attention_tflop_per_s": final_flops / final_attention_s / 1e12,
        "final_attention_dram_util": final_bytes / (final_attention_s * bandwidth),
        "roofline_tflop_per_s": min(peak_flops, final_flops / final_bytes * bandwidth) / 1e12,
    }


def characterisation_table(config: CharacterisationConfig, arch: Architecture, hw: Hardware,
                           consts: SimConstants) -> pd.DataFrame:
    """One row per (sweep, value), columns `TABLE_COLUMNS`: the simulated phase times
    (`simulated_phase_times`, seeded with ``config.seed``) and the modelled decode metrics
    (`decode_phase_metrics`). ``prefill_share = prefill_s / (prefill_s + decode_s)``."""
    cost = StepCostModel(arch, hw, consts)
    rows = []
    for quantity, value, workload in config.points():
        prefill_s, decode_s, preemptions = simulated_phase_times(arch, hw, consts, workload, config.seed)
        rows.append({
            "sweep": quantity, "value": value, "model": arch.name, "hardware": hw.name,
            "batch_size": workload.batch_size, "input_len": workload.input_len, "output_len": workload.output_len,
            "active_context_tokens": workload.active_context_tokens,
            "prefill_s": prefill_s, "decode_s": decode_s,
            "prefill_share": prefill_s / (prefill_s + decode_s), "decode_share": decode_s / (prefill_s + decode_s),
            "simulated_preemptions": preemptions,
            **decode_phase_metrics(cost, workload),
        })
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def characterisation_csv(table: pd.DataFrame) -> str:
    """The table as CSV text, floats at a fixed ``%.6f`` so equal tables give equal bytes."""
    return table.to_csv(index=False, float_format=CSV_FLOAT_FORMAT, lineterminator="\n")


def decode_bandwidth_cap(consts: SimConstants) -> float:
    """The highest DRAM utilisation the cost model allows: ``max(eta_m, eta_attn)``."""
    return max(consts.gemm_memory_efficiency, consts.attention_memory_efficiency)
