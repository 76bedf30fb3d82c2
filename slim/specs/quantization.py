"""A checkpoint's quantisation, read as vLLM reads it: ``quantization_config`` of ``config.json`` (and
ModelOpt's ``hf_quant_config.json`` beside it) turned into the `WeightFormats` of its tensor classes.

Methods (vLLM's names) and what each quantises (formats and bits: `slim.specs.formats`):

    fp8                 every linear layer, fp8 e4m3 per tensor or block-wise (``weight_block_size``)
    fbgemm_fp8          every linear layer, fp8 per output channel
    compressed-tensors  the ``config_groups``' targets (``Linear``: every linear layer), each group's
                        ``weights`` (num_bits, type, strategy, group_size) and ``input_activations``
                        (the compute dtype; none: weight-only); ``kv_cache_scheme`` an fp8 KV cache
    modelopt            ModelOpt ``quant_algo`` FP8: every linear layer, fp8 per tensor
    modelopt_fp4        ModelOpt ``quant_algo`` NVFP4: every linear layer, 4-bit with fp8 scales per 16
    awq, gptq           every linear layer, ``bits`` with a 16-bit scale and a zero point per ``group_size``
    mxfp4               gpt-oss: only the routed experts, 4-bit with one 8-bit scale per 32
    bitsandbytes        every linear layer, 4-bit (nf4/fp4, optionally double-quantised) or 8-bit

Modules a config leaves unquantised (``ignore``, ``modules_to_not_convert``, ``ignored_layers``,
``exclude_modules``, ``llm_int8_skip_modules``) are matched by name: the LM head, embeddings and
routers are 16-bit anyway; attention, dense FFNs or experts listed there stay 16-bit. One format per
class is modelled, so a list that splits the dense part (attention 16-bit, dense FFN quantised) or
names single layers is refused naming the key: `UnsupportedQuantizationError` for what is not
modelled (a method, a format, a split), `ConfigError` for a config that is malformed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from slim.errors import ConfigError, UnsupportedQuantizationError
from slim.specs.formats import (
    MXFP4,
    SIXTEEN_BIT,
    TensorFormat,
    WeightFormats,
    bitsandbytes_4bit_format,
    fp8_format,
    grouped_int_format,
    nvfp4_format,
)

DENSE_CLASSES = ("attention", "dense_ffn")
ALL_LINEAR = frozenset({"attention", "dense_ffn", "experts"})


def _module_classes(pattern: str, key: str, source: Path) -> frozenset[str]:
    """The linear-layer classes a module name or ``re:`` pattern of an exclusion or target list covers
    (empty: the LM head, embeddings or routers, 16-bit whatever the method)."""
    text = str(pattern).removeprefix("re:").lower()
    if pattern == "Linear":
        return ALL_LINEAR
    if re.search(r"lm_head|embed|wte\b", text) or re.search(r"router|e_score_correction_bias", text) \
            or re.search(r"gate(?![_a-z])", text):
        return frozenset()
    if re.search(r"layers\.\d", text):
        raise UnsupportedQuantizationError(
            f"{source}: {key} names single layers ('{pattern}'): formats that differ by layer "
            "are not modelled (one format per tensor class)")
    if "shared_expert" in text:
        return frozenset({"dense_ffn"})
    if "expert" in text:
        return frozenset({"experts"})
    if re.search(r"attn|attention", text):
        return frozenset({"attention"})
    if re.search(r"mlp|ffn|feed_forward", text):
        return frozenset({"dense_ffn", "experts"})
    raise UnsupportedQuantizationError(
        f"{source}: {key} names '{pattern}', which matches no tensor class modelled here "
        "(attention, dense FFN, experts, LM head, embeddings, routers)")


def _class_formats(linear: TensorFormat, excluded: list | None, key: str, source: Path, *,
                   has_dense_ffn: bool) -> tuple[TensorFormat, TensorFormat]:
    """``(dense, routed experts)`` formats when every linear layer takes `linear` except the modules
    `excluded` lists."""
    classes: set[str] = set()
    for pattern in excluded or ():
        classes |= _module_classes(pattern, key, source)
    experts = SIXTEEN_BIT if "experts" in classes else linear
    dense_excluded = {name for name in DENSE_CLASSES if name in classes}
    present = set(DENSE_CLASSES) if has_dense_ffn else {"attention"}
    if not dense_excluded & present:
        return linear, experts
    if present <= dense_excluded:
        return SIXTEEN_BIT, experts
    raise UnsupportedQuantizationError(
        f"{source}: {key} leaves {' and '.join(sorted(dense_excluded & present))} 16-bit while "
        f"{' and '.join(sorted(present - dense_excluded))} is quantised: one format for the dense "
        "part (attention, dense FFN, shared experts) is modelled")


def _integer(spec: dict, key: str, where: str, source: Path) -> int:
    value = spec.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{source}: {where}.{key} is {value!r}, not an integer")
    return value


# --- one parser per method -------------------------------------------------------------------

def _fp8(quant: dict, source: Path, has_dense_ffn: bool) -> WeightFormats:
    block = quant.get("weight_block_size")
    linear = fp8_format(tuple(block) if block else None)
    key = "quantization_config.ignored_layers" if "ignored_layers" in quant \
        else "quantization_config.modules_to_not_convert"
    dense, experts = _class_formats(linear, quant.get("ignored_layers", quant.get("modules_to_not_convert")), key,
                                    source, has_dense_ffn=has_dense_ffn)
    return WeightFormats(dense, experts, method="fp8")


def _fbgemm_fp8(quant: dict, source: Path, has_dense_ffn: bool) -> WeightFormats:
    dense, experts = _class_formats(fp8_format(), quant.get("modules_to_not_convert"),
                                    "quantization_config.modules_to_not_convert", source, has_dense_ffn=has_dense_ffn)
    return WeightFormats(dense, experts, method="fbgemm_fp8")


_CT_COMPUTE = {("float", 8): "fp8", ("int", 8): "int8", ("float", 4): "fp4"}


def _compressed_tensors_format(group: str, spec: dict, source: Path) -> TensorFormat:
    where = f"quantization_config.config_groups.{group}"
    weights = spec.get("weights")
    if not isinstance(weights, dict):
        raise ConfigError(f"{source}: {where}.weights is missing")
    bits, kind = _integer(weights, "num_bits", f"{where}.weights", source), weights.get("type", "int")
    strategy = weights.get("strategy", "tensor")
    activations = spec.get("input_activations")
    if activations:
        compute = _CT_COMPUTE.get((activations.get("type", "int"), activations.get("num_bits")))
        if compute is None:
            raise UnsupportedQuantizationError(
                f"{source}: {where}.input_activations ({activations.get('num_bits')}-bit "
                f"{activations.get('type')}) is not modelled; known: fp8, int8, fp4")
    else:
        compute = "bf16"
    if kind == "float" and bits == 8:
        block = weights.get("block_structure")
        return fp8_format(tuple(block) if strategy == "block" and block else None, compute)
    if kind == "float" and bits == 4:
        return nvfp4_format(weights.get("group_size") or 16, compute)
    if kind == "int" and bits in (4, 8):
        group_size = weights.get("group_size") if strategy == "group" else None
        return grouped_int_format(f"int{bits}", bits, group_size, zero_point=not weights.get("symmetric", True),
                                  compute_dtype=compute)
    raise UnsupportedQuantizationError(
        f"{source}: {where}.weights ({bits}-bit {kind}, strategy {strategy}) is not modelled; "
        "known: 8-bit float, 4-bit float (nvfp4), 4- and 8-bit int")


def _compressed_tensors(quant: dict, source: Path, has_dense_ffn: bool) -> WeightFormats:
    sparsity = quant.get("sparsity_config")
    if sparsity and sparsity.get("format", "dense") != "dense":
        raise UnsupportedQuantizationError(
            f"{source}: quantization_config.sparsity_config ({sparsity.get('format')}): sparse "
            "weights are not modelled")
    groups = quant.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise ConfigError(f"{source}: quantization_config.config_groups is missing")
    by_class: dict[str, TensorFormat] = {}
    for group, spec in groups.items():
        fmt = _compressed_tensors_format(group, spec, source)
        for target in spec.get("targets", ["Linear"]):
            for name in _module_classes(target, f"quantization_config.config_groups.{group}.targets", source):
                if by_class.setdefault(name, fmt) != fmt:
                    raise UnsupportedQuantizationError(
                        f"{source}: quantization_config.config_groups give {name} two formats "
                        f"({by_class[name].name}, {fmt.name})")
    for pattern in quant.get("ignore") or ():
        for name in _module_classes(pattern, "quantization_config.ignore", source):
            by_class[name] = SIXTEEN_BIT
    present = DENSE_CLASSES if has_dense_ffn else ("attention",)
    dense_formats = {by_class.get(name, SIXTEEN_BIT) for name in present}
    if len(dense_formats) > 1:
        raise UnsupportedQuantizationError(
            f"{source}: quantization_config gives attention and the dense FFN different formats: "
            "one format for the dense part is modelled")
    kv = quant.get("kv_cache_scheme")
    if kv and (kv.get("type"), kv.get("num_bits")) != ("float", 8):
        raise UnsupportedQuantizationError(f"{source}: quantization_config.kv_cache_scheme ({kv.get('num_bits')}-bit "
                          f"{kv.get('type')}) is not modelled; known: 8-bit float (fp8)")
    return WeightFormats(dense_formats.pop(), by_class.get("experts", SIXTEEN_BIT), method="compressed-tensors",
                         kv_cache_scheme="fp8" if kv else None)


_MODELOPT_ALGOS = {"FP8": "modelopt", "NVFP4": "modelopt_fp4"}


def _modelopt(quant: dict, source: Path, has_dense_ffn: bool) -> WeightFormats:
    spec = quant.get("quantization", quant)
    algo = spec.get("quant_algo")
    if algo not in _MODELOPT_ALGOS:
        raise UnsupportedQuantizationError(f"{source}: ModelOpt quant_algo '{algo}' is not modelled; known: "
                          f"{', '.join(_MODELOPT_ALGOS)}")
    linear = fp8_format() if algo == "FP8" else nvfp4_format(spec.get("group_size") or 16)
    dense, experts = _class_formats(linear, spec.get("exclude_modules"), "quantization.exclude_modules", source,
                                    has_dense_ffn=has_dense_ffn)
    kv = spec.get("kv_cache_quant_algo")
    if kv not in (None, "FP8"):
        raise UnsupportedQuantizationError(f"{source}: ModelOpt kv_cache_quant_algo '{kv}' is not modelled; known: FP8")
    return WeightFormats(dense, experts, method=_MODELOPT_ALGOS[algo], kv_cache_scheme="fp8" if kv else None)


def _group_size(quant: dict, *keys: str) -> int | None:
    for key in keys:
        if key in quant:
            return None if quant[key] in (None, -1) else int(quant[key])
    return None


def _awq(quant: dict, source: Path, has_dense_ffn: bool) -> WeightFormats:
    bits = int(quant.get("bits", quant.get("w_bit", 4)))
    linear = grouped_int_format(f"awq int{bits}", bits, _group_size(quant, "group_size", "q_group_size"),
                                zero_point=bool(quant.get("zero_point", True)))
    dense, experts = _class_formats(linear, quant.get("modules_to_not_convert"),
                                    "quantization_config.modules_to_not_convert", source, has_dense_ffn=has_dense_ffn)
    return WeightFormats(dense, experts, method="awq")


def _gptq(quant: dict, source: Path, has_dense_ffn: bool) -> WeightFormats:
    if quant.get("dynamic"):
        raise UnsupportedQuantizationError(
            f"{source}: quantization_config.dynamic gives modules formats of their own: formats that "
            "differ by module are not modelled")
    if quant.get("lm_head"):
        raise UnsupportedQuantizationError(
            f"{source}: quantization_config.lm_head: a quantised LM head is not modelled")
    bits = int(quant.get("bits", 4))
    # GPTQ checkpoints store qzeros even for symmetric quantisation.
    linear = grouped_int_format(f"gptq int{bits}", bits, _group_size(quant, "group_size"), zero_point=True)
    return WeightFormats(linear, linear, method="gptq")


def _mxfp4(quant: dict, source: Path, has_dense_ffn: bool) -> WeightFormats:
    _, experts = _class_formats(MXFP4, quant.get("modules_to_not_convert"),
                                "quantization_config.modules_to_not_convert", source, has_dense_ffn=has_dense_ffn)
    return WeightFormats(SIXTEEN_BIT, experts, method="mxfp4")


def _bitsandbytes(quant: dict, source: Path, has_dense_ffn: bool) -> WeightFormats:
    if quant.get("load_in_4bit"):
        linear = bitsandbytes_4bit_format(str(quant.get("bnb_4bit_quant_type", "fp4")),
                                          bool(quant.get("bnb_4bit_use_double_quant", False)))
    elif quant.get("load_in_8bit"):
        linear = TensorFormat("bitsandbytes int8", 8.0, "int8")
    else:
        raise ConfigError(f"{source}: quantization_config has neither load_in_4bit nor load_in_8bit")
    dense, experts = _class_formats(linear, quant.get("llm_int8_skip_modules"),
                                    "quantization_config.llm_int8_skip_modules", source, has_dense_ffn=has_dense_ffn)
    return WeightFormats(dense, experts, method="bitsandbytes")


_PARSERS: dict[str, Callable[[dict, Path, bool], WeightFormats]] = {
    "fp8": _fp8, "fbgemm_fp8": _fbgemm_fp8, "compressed-tensors": _compressed_tensors, "modelopt": _modelopt,
    "modelopt_fp4": _modelopt, "awq": _awq, "gptq": _gptq, "mxfp4": _mxfp4, "bitsandbytes": _bitsandbytes,
}
"""Quantisation methods modelled, by vLLM's name."""


def weight_formats_from_config(quant: dict[str, Any] | None, hf_quant_config: dict[str, Any] | None, source: Path,
                               *, has_dense_ffn: bool, has_experts: bool) -> WeightFormats:
    """The formats of a checkpoint whose ``config.json`` has `quant` as ``quantization_config`` and whose
    folder has `hf_quant_config` (ModelOpt) beside it; 16-bit without either. An unknown method is
    refused naming the known ones."""
    if hf_quant_config is not None:
        method = "modelopt"
        quant = hf_quant_config
    elif not quant:
        return WeightFormats()
    else:
        method = str(quant.get("quant_method", "")).lower()
    if method not in _PARSERS:
        raise UnsupportedQuantizationError(
            f"{source}: quantization_config.quant_method '{method}' is not modelled; known: "
            f"{', '.join(_PARSERS)}")
    if method == "mxfp4" and not has_experts:
        raise ConfigError(f"{source}: mxfp4 quantises routed experts, and this model has none")
    return _PARSERS[method](quant, source, has_dense_ffn)
