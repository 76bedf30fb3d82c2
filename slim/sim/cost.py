"""Kernel-level roofline cost of one vLLM engine step (the simulator's clock).

One step runs every scheduled token through the model once. Per layer and per
tensor-parallel rank (``t`` ranks, weights and KV heads sharded ``1/t``):

    GEMM g (in k, out n, T tokens):  FLOPs = 2 T k n,  bytes = 2 k n (weights) + 2 T (k + n)
        time_g = max(FLOPs / (eta_c F_max), bytes / (eta_m BW_max)) + kernel_latency
        GEMMs: QKV (n = D + 2 D_kv), output projection (D -> D), FFN up (gate+up, 2 D_ff,
        for SwiGLU) and down.
    decode attention, context c tokens summed over decoding sequences:
        bytes = c x 2 D_kv b_kv (K and V),  FLOPs = 4 D c    (AI ~ H_q / H_kv FLOP/B)
        time  = max(FLOPs / (eta_c F_max), bytes / (eta_attn BW_max)) + kernel_latency
    prefill attention over p causal (query, key) pairs: FLOPs = 4 D p, compute-bound
    elementwise (2 norms, activation, residuals): memory-bound, 2 T (4 D + D_ff') bytes
    all-reduce (t > 1): 2 per layer, ring: latency + 2 (t-1)/t x 2 T D / NVLink BW
LM head once per step for the sampled sequences, and a CPU-side overhead
``base + per_seq x sequences`` (scheduling, input preparation, sampling, detokenising), plus at
``t > 1`` ranks ``k_t x tensor_parallel_step_overhead_s`` per step: the latency of the step's
collectives (vLLM V0's driver broadcasting each step's inputs to its workers, the all-reduces)
beyond the fixed ``allreduce_latency_s``, with ``k_t`` the accelerator's collective steps
(`slim.specs.hardware.ALLREDUCE_KINDS`: 1 for NVLink's one-shot all-reduce, ``t - 1`` for a ring).

The attention backend is vLLM V0's choice for the model's head size (`attention_backend`):
FlashAttention-2 where it supports the head size, else XFormers, whose PagedAttention decode
kernels add ``xformers_attention_latency_s`` per layer and step. The public traces' server logs
say so: OPT-2.7B (head size 80) logs "Cannot use FlashAttention-2 backend for head size 80 ...
Using XFormers backend", OPT-1.3B (64) and Llama-2-7B (128) do not. A single set of constants
shared by both backends would charge that cost to the shared constants (the GEMM memory
efficiency, the launch latency) and carry it into predictions of FlashAttention models.

This is the simulator's ground truth, deliberately richer than SLIM's closed form
(`slim/model/equations.py`, Eqs. 5-12): nothing here evaluates or is tuned to SLIM.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from slim.errors import ConfigError
from slim.gpu.kv_memory import kv_bytes_per_token_per_rank
from slim.sim.constants import SimConstants
from slim.sim.modern_cost import (
    GemmGroup,
    attention_per_context_token,
    elementwise_bytes_per_token,
    gemm_groups,
    lm_head_group,
    window_share,
)
from slim.specs.architecture import BYTES_PER_FP16, Architecture
from slim.specs.hardware import Hardware
from slim.specs.transformer import tensor_parallel_refusal

KERNELS_PER_LAYER = 5      # QKV, attention, output projection, FFN up, FFN down
ELEMENTWISE_KERNELS_PER_LAYER = 3

FLASH_ATTENTION_HEAD_SIZES = (32, 64, 96, 128, 160, 192, 224, 256)
"""Head sizes vLLM V0's FlashAttention-2 backend supports (its backend selector); any other
head size is served by the XFormers backend."""

FLASH_ATTENTION, XFORMERS = "flash_attn", "xformers"


def attention_backend(arch: Architecture) -> str:
    """vLLM V0's attention backend for `arch` on a CUDA GPU in 16 bits: `FLASH_ATTENTION` where
    FlashAttention-2 supports its head size (`FLASH_ATTENTION_HEAD_SIZES`), else `XFORMERS`."""
    return FLASH_ATTENTION if arch.head_dim in FLASH_ATTENTION_HEAD_SIZES else XFORMERS


@dataclass(frozen=True)
class _Gemm:
    in_features: int
    out_features: int


def _layer_gemms(arch: Architecture, tensor_parallel: int) -> tuple[_Gemm, ...]:
    """The four GEMMs of one decoder layer on one tensor-parallel rank."""
    d, t = arch.hidden_dim, tensor_parallel
    up_out = 2 * arch.ffn_dim if arch.ffn_kind == "swiglu" else arch.ffn_dim
    return (
        _Gemm(d, (d + 2 * arch.kv_dim) // t),
        _Gemm(d // t, d),
        _Gemm(d, up_out // t),
        _Gemm(arch.ffn_dim // t, d),
    )


class StepCostModel:
    """Per-run precomputed coefficients of the step cost (see module docstring).

    The simulator evaluates ``gpu_fixed_s(tokens, sampled) + attention_s_per_context_token x c
    + prefill_s_per_pair x p`` and ``overhead_s(seqs)``; `breakdown` gives the same
    numbers split by component with FLOPs and bytes.
    """

    def __init__(self, arch: Architecture, hw: Hardware, consts: SimConstants, tensor_parallel: int = 1,
                 expert_parallel: int = 1, input_len: float | None = None, output_len: float | None = None):
        if tensor_parallel < 1:
            raise ConfigError(f"tensor_parallel={tensor_parallel}: at least one GPU per model")
        # Whether the experts' blocks split is the layout's to decide (--enable-expert-parallel keeps them
        # whole); either way each rank reads its share of the experts' weights.
        refused = tensor_parallel_refusal(arch, tensor_parallel, expert_parallel=True)
        if refused is not None:
            raise ConfigError(f"{arch.name} at tensor_parallel={tensor_parallel}: {refused}")
        self.arch, self.hw, self.consts, self.tp = arch, hw, consts, tensor_parallel
        self.compute_rate = consts.gemm_compute_efficiency * hw.peak_flops_per_s
        self.memory_rate = consts.gemm_memory_efficiency * hw.hbm_bandwidth_bytes_per_s
        self.attention_rate = consts.attention_memory_efficiency * hw.hbm_bandwidth_bytes_per_s
        # The models the dense 16-bit layer does not describe take their GEMMs, attention and bytes from
        # `slim.sim.modern_cost`; every other model keeps this module's expressions, bit for bit.
        self.modern = arch.dense_formula_gap is not None
        if self.modern:
            self._init_modern(expert_parallel, input_len, output_len)
            return
        self.gemm_layers = (arch.n_layers,) * 4
        self.gemms = _layer_gemms(arch, tensor_parallel)
        lm_in = arch.embed_proj_dim or arch.hidden_dim
        self.lm_head = _Gemm(lm_in, -(-arch.vocab_size // tensor_parallel))
        layers = arch.n_layers
        d_rank = arch.hidden_dim // tensor_parallel
        # Decode attention per context token, all layers: FLOPs and KV bytes.
        self.attention_flops_per_token = layers * 4.0 * d_rank
        self.attention_bytes_per_token = float(kv_bytes_per_token_per_rank(arch, tensor_parallel))
        self.attention_s_per_context_token = max(self.attention_flops_per_token / self.compute_rate,
                                                 self.attention_bytes_per_token / self.attention_rate)
        self.prefill_flops_per_pair = layers * 4.0 * d_rank
        self.prefill_s_per_pair = self.prefill_flops_per_pair / self.compute_rate
        up_width = (2 if arch.ffn_kind == "swiglu" else 1) * arch.ffn_dim // tensor_parallel
        self.elementwise_bytes_per_token = layers * BYTES_PER_FP16 * (4.0 * arch.hidden_dim + 2.0 * up_width)
        # Layers whose attention pays the XFormers backend's latency (none on FlashAttention).
        self.xformers_layers = layers if attention_backend(arch) == XFORMERS else 0

    def _init_modern(self, expert_parallel: int, input_len: float | None, output_len: float | None) -> None:
        arch, t = self.arch, self.tp
        self.groups = gemm_groups(arch, t, expert_parallel)
        self.lm_group = lm_head_group(arch, t)
        self.gemm_layers = tuple(group.layers for group in self.groups)
        share = window_share(arch, input_len, output_len)
        self.attention_flops_per_token, self.attention_bytes_per_token = attention_per_context_token(
            arch, t, share)
        self.attention_s_per_context_token = max(self.attention_flops_per_token / self.compute_rate,
                                                 self.attention_bytes_per_token / self.attention_rate)
        self.prefill_flops_per_pair = self.attention_flops_per_token
        self.prefill_s_per_pair = self.prefill_flops_per_pair / self.compute_rate
        self.elementwise_bytes_per_token = elementwise_bytes_per_token(arch, t)
        self.xformers_layers = 0     # the backends vLLM serves these models on: no XFormers latency

    def _group_time(self, group: GemmGroup, tokens: np.ndarray) -> tuple[np.ndarray, ...]:
        flops, moved = group.work(self.hw, tokens)
        return np.maximum(flops / self.compute_rate, moved / self.memory_rate), flops, moved

    # -- components, vectorised over arrays -------------------------------------------------
    def _gemm_time(self, gemm: _Gemm, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        flops = 2.0 * tokens * gemm.in_features * gemm.out_features
        bytes_moved = BYTES_PER_FP16 * (gemm.in_features * gemm.out_features
                                        + tokens * (gemm.in_features + gemm.out_features))
        time = np.maximum(flops / self.compute_rate, bytes_moved / self.memory_rate)
        return time, flops, bytes_moved

    def gemm_work(self, rows: ArrayLike) -> list[tuple[np.ndarray, np.ndarray]]:
        """(FLOPs, bytes) over `rows` input rows of each layer GEMM (QKV, output projection,
        FFN up, FFN down; one layer, one rank) and last of the LM head: the two sides of each
        GEMM's roofline ``max`` (`slim.sim.linear_cost` takes the cost apart along them)."""
        rows = np.asarray(rows, dtype=float)
        if self.modern:
            return [self._group_time(group, rows)[1:] for group in (*self.groups, self.lm_group)]
        return [self._gemm_time(gemm, rows)[1:] for gemm in (*self.gemms, self.lm_head)]

    def gemm_components(self, tokens: ArrayLike) -> dict[str, np.ndarray]:
        """Layer GEMMs + elementwise kernels for ``tokens`` scheduled tokens (all layers)."""
        tokens = np.asarray(tokens, dtype=float)
        if self.modern:
            return self._modern_gemm_components(tokens)
        active = (tokens > 0).astype(float)
        time = np.zeros_like(tokens)
        flops = np.zeros_like(tokens)
        bytes_moved = np.zeros_like(tokens)
        for gemm in self.gemms:
            g_time, g_flops, g_bytes = self._gemm_time(gemm, tokens)
            time = time + g_time * active
            flops = flops + g_flops
            bytes_moved = bytes_moved + g_bytes * active
        layers = self.arch.n_layers
        elementwise_bytes = self.elementwise_bytes_per_token * tokens
        latency = self.consts.kernel_latency_s * layers * (KERNELS_PER_LAYER - 1 + ELEMENTWISE_KERNELS_PER_LAYER)
        gemm_s = layers * time + (elementwise_bytes / self.memory_rate + latency) * active
        return {"gemm_s": gemm_s, "gemm_flops": layers * flops,
                "gemm_bytes": layers * bytes_moved + elementwise_bytes}

    def _modern_gemm_components(self, tokens: np.ndarray) -> dict[str, np.ndarray]:
        active = (tokens > 0).astype(float)
        time, flops, moved = np.zeros_like(tokens), np.zeros_like(tokens), np.zeros_like(tokens)
        for group in self.groups:
            g_time, g_flops, g_bytes = self._group_time(group, tokens)
            time = time + group.layers * g_time
            flops, moved = flops + group.layers * g_flops, moved + group.layers * g_bytes
        elementwise_bytes = self.elementwise_bytes_per_token * tokens
        latency = self.consts.kernel_latency_s * self.arch.n_layers * (KERNELS_PER_LAYER - 1
                                                                        + ELEMENTWISE_KERNELS_PER_LAYER)
        gemm_s = time + (elementwise_bytes / self.memory_rate + latency) * active
        return {"gemm_s": gemm_s, "gemm_flops": flops, "gemm_bytes": moved * active + elementwise_bytes}

    def gemm_split_components(self, tokens: ArrayLike) -> dict[str, np.ndarray]:
        """`gemm_components`' seconds split by kernel group (all layers, each with its launches):

        ``attention_projection_gemm_s``: QKV and output projection (2 launches per layer);
        ``ffn_gemm_s``: FFN up (gate + up for SwiGLU) and down (2 launches per layer);
        ``elementwise_s``: norms, activation, residuals, ``elementwise bytes / (eta_m BW_max)``
        (3 launches per layer). The three sum to ``gemm_s`` up to floating-point rounding;
        `gemm_components` itself is untouched, so the simulator's step times stay bit-identical.
        """
        tokens = np.asarray(tokens, dtype=float)
        active = (tokens > 0).astype(float)
        layers = self.arch.n_layers
        launch_s = self.consts.kernel_latency_s * layers
        if self.modern:
            split = {"attention_projection_gemm_s": np.zeros_like(tokens), "ffn_gemm_s": np.zeros_like(tokens)}
            attention = {"q", "q_down", "q_up", "kv_down", "kv_up", "qkv", "o"}
            for group in self.groups:
                key = "attention_projection_gemm_s" if group.name in attention else "ffn_gemm_s"
                split[key] = split[key] + group.layers * self._group_time(group, tokens)[0]
            split = {key: (value + launch_s * 2) * active for key, value in split.items()}
            split["elementwise_s"] = (self.elementwise_bytes_per_token * tokens / self.memory_rate
                                      + launch_s * ELEMENTWISE_KERNELS_PER_LAYER) * active
            return split
        # _layer_gemms order: QKV, output projection, FFN up, FFN down.
        groups = {"attention_projection_gemm_s": self.gemms[:2], "ffn_gemm_s": self.gemms[2:]}
        split = {}
        for key, gemms in groups.items():
            time = np.zeros_like(tokens)
            for gemm in gemms:
                time = time + self._gemm_time(gemm, tokens)[0]
            split[key] = (layers * time + launch_s * len(gemms)) * active
        elementwise_bytes = self.elementwise_bytes_per_token * tokens
        split["elementwise_s"] = (elementwise_bytes / self.memory_rate
                                  + launch_s * ELEMENTWISE_KERNELS_PER_LAYER) * active
        return split

    def lm_head_components(self, sampled_seqs: ArrayLike) -> dict[str, np.ndarray]:
        sampled = np.asarray(sampled_seqs, dtype=float)
        time, flops, bytes_moved = (self._group_time(self.lm_group, sampled) if self.modern
                                    else self._gemm_time(self.lm_head, sampled))
        active = (sampled > 0).astype(float)
        return {"lm_head_s": (time + self.consts.kernel_latency_s) * active,
                "lm_head_flops": flops, "lm_head_bytes": bytes_moved * active}

    def allreduce_s(self, tokens: ArrayLike) -> np.ndarray:
        tokens = np.asarray(tokens, dtype=float)
        if self.tp == 1:
            return np.zeros_like(tokens)
        payload = BYTES_PER_FP16 * tokens * self.arch.hidden_dim
        ring = 2.0 * (self.tp - 1) / self.tp * payload / self.consts.nvlink_bandwidth_bytes_per_s
        return 2.0 * self.arch.n_layers * (self.consts.allreduce_latency_s + ring) * (tokens > 0)

    def attention_latency_s(self, tokens: ArrayLike) -> np.ndarray:
        """Attention's launches, one per layer, and on the XFormers backend its extra latency per
        layer (zero for an empty step)."""
        per_step = (self.consts.kernel_latency_s * self.arch.n_layers
                    + self.consts.xformers_attention_latency_s * self.xformers_layers)
        return per_step * (np.asarray(tokens, dtype=float) > 0)

    @property
    def tensor_parallel_overhead_s(self) -> float:
        """The TP step overhead times the accelerator's collective steps per engine step
        (`Hardware.tensor_parallel_collective_steps`: zero at ``t = 1``, one for a one-shot
        all-reduce, ``t - 1`` for a ring)."""
        return self.hw.tensor_parallel_collective_steps(self.tp) * self.consts.tensor_parallel_step_overhead_s

    def overhead_s(self, seqs: ArrayLike) -> np.ndarray:
        """CPU-side step overhead: ``base + per_seq x seqs + k_t x tp_step`` (zero for an empty step)."""
        seqs = np.asarray(seqs, dtype=float)
        return (self.consts.step_overhead_base_s + self.tensor_parallel_overhead_s
                + self.consts.step_overhead_per_seq_s * seqs) * (seqs > 0)

    # -- what the engine calls -----------------------------------------------------------------
    def gpu_fixed_table(self, max_tokens: int, max_sampled: int) -> tuple[list[float], list[float]]:
        """Lookup tables: GPU seconds by scheduled tokens (GEMM + elementwise + all-reduce +
        attention launch) and by sampled sequences (LM head). Python floats, for the step loop."""
        tokens = np.arange(max_tokens + 1, dtype=float)
        by_tokens = self.gemm_components(tokens)["gemm_s"] + self.allreduce_s(tokens) + self.attention_latency_s(tokens)
        by_sampled = self.lm_head_components(np.arange(max_sampled + 1, dtype=float))["lm_head_s"]
        return by_tokens.tolist(), by_sampled.tolist()

    def breakdown(self, n_decode_seqs: ArrayLike, decode_context_tokens: ArrayLike, n_prefill_tokens: ArrayLike,
                  prefill_attention_pairs: ArrayLike | None = None, n_prefill_seqs: ArrayLike | None = None,
                  n_sampled_seqs: ArrayLike | None = None) -> dict[str, np.ndarray]:
        """Seconds, FLOPs and bytes per component of one step (see `step_cost_breakdown`)."""
        n_decode = np.asarray(n_decode_seqs, dtype=float)
        context = np.asarray(decode_context_tokens, dtype=float)
        prefill = np.asarray(n_prefill_tokens, dtype=float)
        if prefill_attention_pairs is None:   # one chunk from position 0: causal triangle
            prefill_attention_pairs = prefill * (prefill + 1.0) / 2.0
        pairs = np.asarray(prefill_attention_pairs, dtype=float)
        if n_prefill_seqs is None:
            n_prefill_seqs = (prefill > 0).astype(float)
        n_prefill_seqs = np.asarray(n_prefill_seqs, dtype=float)
        if n_sampled_seqs is None:
            n_sampled_seqs = n_decode + n_prefill_seqs
        tokens = n_decode + prefill
        gemm = self.gemm_components(tokens)
        lm_head = self.lm_head_components(n_sampled_seqs)
        decode_flops = self.attention_flops_per_token * context
        decode_bytes = self.attention_bytes_per_token * context
        attention_decode = context * self.attention_s_per_context_token
        attention_prefill = pairs * self.prefill_s_per_pair
        attention = attention_decode + attention_prefill + self.attention_latency_s(tokens)
        allreduce = self.allreduce_s(tokens)
        overhead = self.overhead_s(n_decode + n_prefill_seqs)
        gpu = gemm["gemm_s"] + lm_head["lm_head_s"] + attention + allreduce
        return {
            "attention_s": attention, "attention_decode_s": attention_decode,
            "attention_prefill_s": attention_prefill, "gemm_s": gemm["gemm_s"],
            **self.gemm_split_components(tokens),
            "lm_head_s": lm_head["lm_head_s"], "allreduce_s": allreduce, "overhead_s": overhead,
            "gpu_s": gpu, "total_s": gpu + overhead,
            "attention_decode_flops": decode_flops, "attention_decode_bytes": decode_bytes,
            "attention_prefill_flops": self.prefill_flops_per_pair * pairs,
            "gemm_flops": gemm["gemm_flops"], "gemm_bytes": gemm["gemm_bytes"],
            "lm_head_flops": lm_head["lm_head_flops"], "lm_head_bytes": lm_head["lm_head_bytes"],
            "dram_bytes": decode_bytes + gemm["gemm_bytes"] + lm_head["lm_head_bytes"],
        }


def step_cost_breakdown(arch: Architecture, hw: Hardware, consts: SimConstants, n_decode_seqs: ArrayLike,
                        decode_context_tokens: ArrayLike, n_prefill_tokens: ArrayLike,
                        prefill_attention_pairs: ArrayLike | None = None, n_prefill_seqs: ArrayLike | None = None,
                        tensor_parallel: int = 1) -> dict[str, np.ndarray]:
    """Modelled cost of one engine step, split by component (per tensor-parallel rank).

    Keys ending ``_s`` are seconds (``attention_s``, ``attention_decode_s``, ``attention_prefill_s``,
    ``gemm_s``, ``lm_head_s``, ``allreduce_s``, ``overhead_s``, ``gpu_s``, ``total_s``; ``gemm_s``
    split as ``attention_projection_gemm_s + ffn_gemm_s + elementwise_s``); ``_flops``
    and ``_bytes`` keys give the work of each component, e.g. the decode-attention arithmetic
    intensity is ``attention_decode_flops / attention_decode_bytes`` (~ H_q / H_kv) and the
    step's DRAM-bandwidth utilisation is ``dram_bytes / (gpu_s x BW_max)``. These are modelled
    values (label them so in figures), vectorised over numpy arrays.

    ``decode_context_tokens`` is the sum over decoding sequences of the tokens each attends
    to; ``prefill_attention_pairs`` defaults to one chunk from position 0,
    ``n (n + 1) / 2``.
    """
    model = StepCostModel(arch, hw, consts, tensor_parallel)
    return model.breakdown(n_decode_seqs, decode_context_tokens, n_prefill_tokens,
                           prefill_attention_pairs, n_prefill_seqs)
