"""Which catalog entry serves a model at a weight precision: a benchmark that names a checkpoint
(a Hugging Face id) and the precision its weights were served in (16-bit, fp8, fp4) ran the entry
of `slim/specs/models.yaml` found here (`served_entry`).

The precision of an entry is that of the weights that hold most of its parameters (the routed
experts of a mixture of experts, else the dense layers; `weight_precision`). An entry serves the
model at a precision when it is the checkpoint itself, already in that precision (gpt-oss-120b's
MXFP4 experts, MiniMax-M2.5's fp8 blocks); else the checkpoint served with vLLM's
``--quantization`` of that precision (a ``base:`` entry, such as ``llama-3.1-70b-fp8``); else a
quantised release of the checkpoint (``Qwen/Qwen3-32B-FP8`` for ``Qwen/Qwen3-32B``), with the same
shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from slim.specs.architecture import Architecture, ArchitectureCatalog
from slim.specs.formats import TensorFormat, WeightFormats

SIXTEEN_BIT = "16-bit"

PRECISION_LABELS: dict[str, str] = {
    "": SIXTEEN_BIT, "bf16": SIXTEEN_BIT, "bfloat16": SIXTEEN_BIT, "fp16": SIXTEEN_BIT, "float16": SIXTEEN_BIT,
    "fp8": "fp8", "fp8_block": "fp8",
    "fp4": "fp4", "mxfp4": "fp4", "nvfp4": "fp4",
}
"""How benchmarks name the precision weights were served in (empty: unquantised) -> the precision
`weight_precision` gives an entry."""

_FORMAT_PRECISIONS = (("bf16", SIXTEEN_BIT), ("fp8", "fp8"), ("mxfp4", "fp4"), ("nvfp4", "fp4"))
"""`TensorFormat.name` prefixes -> precision; another format (AWQ, GPTQ, bitsandbytes) is its own name."""


def precision_of_label(label: str) -> str | None:
    """The precision a benchmark's label names (`PRECISION_LABELS`), or None for a label not listed."""
    return PRECISION_LABELS.get(label.strip().lower())


def _format_precision(fmt: TensorFormat) -> str:
    for prefix, precision in _FORMAT_PRECISIONS:
        if fmt.name.startswith(prefix):
            return precision
    return fmt.name


def weight_precision(arch: Architecture) -> str:
    """``16-bit``, ``fp8``, ``fp4`` (or a format's own name) of the weights holding most of `arch`'s
    parameters: its routed experts where they outnumber the dense layers, else the dense layers."""
    counts = arch.parameters
    bulk = arch.formats.routed_experts if counts.routed_experts > counts.dense else arch.formats.dense
    return _format_precision(bulk)


def _shapes(arch: Architecture) -> Architecture:
    """`arch` without what differs between checkpoints of one model: names, ids, weight formats."""
    return replace(arch, name="", display_name="", aliases=(), hf_id=None, formats=WeightFormats(),
                   kv_cache_dtype="auto", quantization=None, parameter_counts=None)


def _checkpoint(hf_id: str | None) -> str:
    return (hf_id or "").rstrip("/").rsplit("/", 1)[-1].lower()


@dataclass(frozen=True)
class ServedEntry:
    """The catalog entry a (model, precision) ran, and how it serves the model (for the reason)."""

    name: str
    how: str


def served_entry(catalog: ArchitectureCatalog, model: str, precision: str) -> ServedEntry | str:
    """The entry of `catalog` that serves `model` (a name, alias or Hugging Face id) at `precision`
    (a value of `PRECISION_LABELS`), or why there is none (str).

    In order: the model's own entry where its checkpoint is already in `precision`; an entry serving
    that checkpoint (same ``hf_id``) under ``--quantization``; a quantised release of it (an ``hf_id``
    extending the checkpoint's name, as ``Qwen3-32B-FP8`` extends ``Qwen3-32B``) with the same
    shapes. Entries with another KV-cache dtype are not candidates: a run that records none ran
    vLLM's default. Ties go to the first entry of the models file. A model the file marks
    ``unsupported:`` is its own entry at any precision (the file describes no formats for it)."""
    name = catalog.resolve_name(model)
    if name is None:
        unsupported = catalog.unsupported(model)
        if unsupported is not None:
            return ServedEntry(unsupported.name, "the models file's entry (it describes no weight formats)")
        return f"model '{model}' is not in the models file"
    base = catalog.architecture(name)
    if weight_precision(base) == precision:
        return ServedEntry(name, f"the checkpoint as published, {base.formats.describe()}")
    shapes, checkpoint = _shapes(base), _checkpoint(base.hf_id)
    flagged, releases = [], []
    for other_name in catalog.names:
        other = catalog.architecture(other_name)
        if (other_name == name or weight_precision(other) != precision or other.kv_cache_dtype != base.kv_cache_dtype
                or _shapes(other) != shapes):
            continue
        if other.hf_id is not None and other.hf_id == base.hf_id:
            flagged.append(ServedEntry(other_name, f"{base.hf_id} served with --quantization "
                                       f"{other.formats.method}: {other.formats.describe()}"))
        elif checkpoint and _checkpoint(other.hf_id).startswith(checkpoint + "-"):
            # A run that names the 16-bit checkpoint at fp8 served it with vLLM's --quantization fp8 (one
            # scale per tensor). Where the catalog has no such entry (Qwen3-32B), the checkpoint's own fp8
            # release is the nearest it offers: the same shapes and e4m3 weights with a scale per 128 x 128
            # block, 0.02% more weight bytes, and the same fp8 GEMMs, so the decode step's physics agree.
            releases.append(ServedEntry(other_name, f"{other.hf_id}, the checkpoint's quantised release (no "
                                        f"entry serves {base.hf_id} with --quantization at {precision}): "
                                        f"{other.formats.describe()}"))
    found = flagged or releases
    if found:
        return found[0]
    return (f"no entry of the models file serves {base.display_name} ({name}) at {precision}: add one (a "
            "`base:` entry with `quantization:`, or the quantised checkpoint's hf_config)")


def precision_flags(quantization: str | None, kv_cache_dtype: str | None) -> list[str]:
    """vLLM's ``--quantization`` and ``--kv-cache-dtype`` as a request names them, for a ``vllm serve``
    line (none where not named: the checkpoint's own weights and vLLM's ``auto`` KV cache)."""
    flags = ["--quantization", quantization] if quantization is not None else []
    return flags + (["--kv-cache-dtype", kv_cache_dtype] if kv_cache_dtype is not None else [])


def serving_flags_of(arch: Architecture) -> list[str]:
    """The ``--quantization`` and ``--kv-cache-dtype`` a ``vllm serve`` of `arch` needs: those it is served
    with (`Architecture.served`, from a catalog entry's ``base:`` form or the user's flags), none for
    the checkpoint's own weights and vLLM's ``auto`` KV cache."""
    return precision_flags(arch.quantization, None if arch.kv_cache_dtype == "auto" else arch.kv_cache_dtype)
