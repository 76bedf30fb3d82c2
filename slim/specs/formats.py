"""How weights and the KV cache are stored: bits per weight (scales and zero points included) and the
dtype a matrix multiply runs in, for each weight format vLLM serves, and vLLM's ``--kv-cache-dtype``
and online ``--quantization`` values.

Bits per weight of each format (``b`` payload bits, ``g`` weights sharing one scale; per-tensor and
per-output-channel scales add ``32 / (weights of the tensor or of the row)`` bits, under 0.016 for
rows of 2,048 weights or more, and are neglected)::

    format                                      storage per group of g weights           bits per weight
    16-bit (bf16, fp16)                         -                                        16
    fp8 per tensor / per channel                b = 8 (e4m3), one fp32 scale per         8
      (fp8, fbgemm_fp8, ModelOpt FP8,           tensor or output channel
      compressed-tensors float 8)
    fp8 block-wise b1 x b2 (DeepSeek-V3,        one fp32 scale per b1 x b2 block         8 + 32 / (b1 b2)
      Qwen3-FP8: 128 x 128)                                                              = 8.00195 (128 x 128)
    int grouped, symmetric                      fp16 scale                               b + 16 / g
      (compressed-tensors pack-quantized)
    int grouped, with zero point (AWQ;          fp16 scale + b-bit zero point            b + (16 + b) / g
      GPTQ, whose qzeros are stored                                                      = 4.15625 (b 4, g 128)
      even when symmetric)
    MXFP4 (gpt-oss experts)                     e2m1 (4 bits), one E8M0 scale per 32     4 + 8 / 32 = 4.25
    NVFP4 (ModelOpt, compressed-tensors)        e2m1, one fp8 e4m3 scale per 16          4 + 8 / 16 = 4.5
                                                (+ one fp32 scale per tensor)
    bitsandbytes nf4 / fp4                      fp32 absmax per 64                       4 + 32 / 64 = 4.5
      with double quantisation                  8-bit absmax per 64, fp32 per 256 of     4 + 8 / 64 + 32 / 16384
                                                them                                     = 4.12695
    bitsandbytes int8 (LLM.int8)                fp32 scale per row                       8

The compute dtype is what the GEMM's inputs are in where the accelerator has tensor cores for it:
``fp8`` for fp8 weights with fp8 activations, ``int8`` for W8A8 integer schemes, ``fp4`` for
FP4 x FP4 schemes, ``bf16`` for 16-bit models and weight-only schemes (AWQ, GPTQ, W4A16), whose
kernels (Marlin and the like) dequantise the weights to 16 bits in registers. Where the part lacks
the dtype, vLLM runs a weight-only kernel at 16 bits (`slim.specs.hardware.Hardware.peak_flops_for`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from slim.errors import ConfigError

COMPUTE_DTYPES = ("bf16", "fp8", "int8", "fp4")
"""Dtypes a GEMM runs in (``bf16``: any 16-bit float)."""

BYTES_PER_FP16 = 2
"""fp16/bf16 weights and KV cache: the ``b_kv = 2`` bytes of Eq. 11."""


@dataclass(frozen=True)
class TensorFormat:
    """How one class of weight tensors is stored (`bits_per_weight`, scales and zero points
    included) and multiplied (`compute_dtype`, one of `COMPUTE_DTYPES`); `block` is a block-wise
    format's ``(block_n, block_k)``, the output and input rows one scale covers (fp8's
    ``weight_block_size``), which each rank's share of a split weight must be a multiple of."""

    name: str
    bits_per_weight: float
    compute_dtype: str = "bf16"
    block: tuple[int, int] | None = None

    def __post_init__(self):
        if self.compute_dtype not in COMPUTE_DTYPES:
            raise ConfigError(f"weight format '{self.name}': compute dtype '{self.compute_dtype}' is not one of "
                              f"{', '.join(COMPUTE_DTYPES)}")
        if not self.bits_per_weight > 0:
            raise ConfigError(f"weight format '{self.name}': bits_per_weight must be > 0, got {self.bits_per_weight}")

    @property
    def bytes_per_weight(self) -> float:
        return self.bits_per_weight / 8


SIXTEEN_BIT = TensorFormat("bf16", 16.0, "bf16")
"""Unquantised weights (bf16 or fp16; a float32 checkpoint is served in 16 bits)."""

FP8_BLOCK_SCALE_BITS = 32   # DeepSeek-V3's weight_scale_inv is float32


def fp8_format(block: tuple[int, int] | None = None, compute_dtype: str = "fp8") -> TensorFormat:
    """fp8 (e4m3) weights: 8 bits per tensor or channel scale, ``8 + 32 / (b1 b2)`` block-wise."""
    if block is None:
        return TensorFormat("fp8", 8.0, compute_dtype)
    rows, cols = (int(size) for size in block)
    return TensorFormat(f"fp8 block {rows}x{cols}", 8.0 + FP8_BLOCK_SCALE_BITS / (rows * cols), compute_dtype,
                        (rows, cols))


def grouped_int_format(name: str, bits: int, group_size: int | None, *, zero_point: bool,
                       compute_dtype: str = "bf16", scale_bits: int = 16) -> TensorFormat:
    """Integer weights with a 16-bit scale (and a ``bits``-bit zero point) per group of `group_size`:
    ``b + (16 + b) / g`` with zero points, ``b + 16 / g`` without; per channel (`group_size` None): ``b``."""
    if group_size is None:
        return TensorFormat(name, float(bits), compute_dtype)
    overhead = scale_bits + (bits if zero_point else 0)
    return TensorFormat(f"{name} g{group_size}", bits + overhead / group_size, compute_dtype)


MXFP4 = TensorFormat("mxfp4", 4.0 + 8 / 32, "fp4")
"""OCP microscaling FP4: e2m1 values, one E8M0 (8-bit) scale per 32."""


def nvfp4_format(group_size: int = 16, compute_dtype: str = "fp4") -> TensorFormat:
    """NVFP4: e2m1 values, one fp8 e4m3 scale per `group_size` (16), one fp32 per tensor (neglected)."""
    return TensorFormat(f"nvfp4 g{group_size}", 4.0 + 8 / group_size, compute_dtype)


BNB_BLOCK = 64
BNB_DOUBLE_QUANT_BLOCK = 256


def bitsandbytes_4bit_format(quant_type: str, double_quant: bool) -> TensorFormat:
    """bitsandbytes 4-bit (nf4 or fp4): fp32 absmax per 64 weights, or with double quantisation an
    8-bit absmax per 64 and an fp32 scale per 256 absmax values."""
    if double_quant:
        bits = 4.0 + 8 / BNB_BLOCK + 32 / (BNB_BLOCK * BNB_DOUBLE_QUANT_BLOCK)
        return TensorFormat(f"bitsandbytes {quant_type} double-quant", bits, "bf16")
    return TensorFormat(f"bitsandbytes {quant_type}", 4.0 + 32 / BNB_BLOCK, "bf16")


@dataclass(frozen=True)
class WeightFormats:
    """The formats of a model's weight classes: the dense part (attention, dense FFN, shared experts),
    the routed experts, and the embeddings and LM head, which the quantisation schemes here leave in
    16 bits. Norms, biases, routers and attention sinks stay 16-bit too (`ParameterCounts.other`).

    `method` is the checkpoint's (or ``--quantization``'s) method as vLLM names it (None: 16-bit);
    `kv_cache_scheme` the KV-cache dtype the checkpoint carries scales for (``fp8``) or None."""

    dense: TensorFormat = SIXTEEN_BIT
    routed_experts: TensorFormat = SIXTEEN_BIT
    embeddings: TensorFormat = SIXTEEN_BIT
    method: str | None = None
    kv_cache_scheme: str | None = None

    @property
    def is_sixteen_bit(self) -> bool:
        return self.dense == self.routed_experts == self.embeddings == SIXTEEN_BIT

    def describe(self) -> str:
        """E.g. ``fp8 (dense fp8 block 128x128, 8.002 bits per weight)``."""
        parts = [f"dense {self.dense.name}, {self.dense.bits_per_weight:.4g} bits per weight"]
        if self.routed_experts != self.dense:
            parts.append(f"experts {self.routed_experts.name}, {self.routed_experts.bits_per_weight:.4g} bits")
        return f"{self.method or '16-bit'} ({'; '.join(parts)})"


# --- what vLLM's serving flags change -----------------------------------------------------

KV_CACHE_DTYPE_BYTES = {"auto": None, "bfloat16": 2, "float16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
"""vLLM's ``--kv-cache-dtype`` values modelled here (``vllm/config/cache.py``, ``CacheDType``) and
their bytes per element. ``auto`` is the checkpoint's KV scheme where it records one (ModelOpt's
``kv_cache_quant_algo``, compressed-tensors' ``kv_cache_scheme``: vLLM resolves ``auto`` to it since
vllm-project/vllm#29980), else the model's 16-bit dtype."""

ONLINE_QUANTIZATION = {"fp8": TensorFormat("fp8 dynamic", 8.0, "fp8")}
"""``--quantization`` methods vLLM applies to a 16-bit checkpoint as it loads it: ``fp8`` quantises
every linear layer's weights (dense part and routed experts) to fp8 e4m3 with one scale per tensor
and the activations dynamically (vLLM's ``Fp8Config`` with ``is_checkpoint_fp8_serialized`` false);
embeddings, the LM head and the MoE routers stay 16-bit."""

SERVING_NAMES = {"awq_marlin": "awq", "gptq_marlin": "gptq"}
"""``--quantization`` values that name a kernel for a checkpoint's method rather than another format."""


def kv_cache_bytes_per_element(kv_cache_dtype: str, checkpoint_scheme: str | None = None) -> int:
    """Bytes of one KV-cache element under ``--kv-cache-dtype`` (`KV_CACHE_DTYPE_BYTES`)."""
    if kv_cache_dtype not in KV_CACHE_DTYPE_BYTES:
        raise ConfigError(f"--kv-cache-dtype '{kv_cache_dtype}' is not modelled; known: "
                          f"{', '.join(KV_CACHE_DTYPE_BYTES)}")
    if kv_cache_dtype == "auto":
        return KV_CACHE_DTYPE_BYTES[checkpoint_scheme] if checkpoint_scheme else BYTES_PER_FP16
    return KV_CACHE_DTYPE_BYTES[kv_cache_dtype]


def served_formats(formats: WeightFormats, quantization: str | None) -> WeightFormats:
    """The formats vLLM serves a checkpoint in under ``--quantization`` (None: as the checkpoint is).

    A 16-bit checkpoint takes an online method (`ONLINE_QUANTIZATION`); a quantised one only its
    own method (or a kernel name for it, `SERVING_NAMES`), as vLLM refuses another."""
    if quantization is None:
        return formats
    method = SERVING_NAMES.get(quantization, quantization)
    if formats.method is not None:
        if method != formats.method:
            raise ConfigError(f"--quantization {quantization}: the checkpoint is quantised with "
                              f"'{formats.method}', which vLLM serves only as {formats.method}")
        return formats
    if method not in ONLINE_QUANTIZATION:
        raise ConfigError(f"--quantization {quantization} is not modelled for a 16-bit checkpoint; known: "
                          f"{', '.join(ONLINE_QUANTIZATION)}")
    online = ONLINE_QUANTIZATION[method]
    return replace(formats, dense=online, routed_experts=online, method=method)
