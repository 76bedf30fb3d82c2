"""The model catalog (`slim/specs/models.yaml`, shipped with the package: `MODELS_FILE`): transformer
architectures (`slim.specs.transformer.Architecture`, re-exported here) by name, alias and Hugging
Face id, and which of them SLIM's dense formula covers.

An entry gives a dense 16-bit architecture in SLIM's symbols (Section VI-A, Eq. 4: ``L``, ``D``,
``H_q``, ``H_kv``, ``D_ff``, the FFN kind, ``n_params``), or the keys of the model's published
``config.json`` under ``hf_config`` (read as `slim.specs.hf_config` reads a checkpoint), or a
``base`` entry served with ``quantization`` and ``kv_cache_dtype`` (vLLM's flags), or an
``unsupported`` reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

import numpy as np

from slim.defaults import MODELS_FILE
from slim.errors import ConfigError, UnknownModelError, UnsupportedArchitectureError
from slim.specs.formats import BYTES_PER_FP16
from slim.specs.hf_config import architecture_from_hf_mapping
from slim.specs.transformer import Architecture, FfnKind, MlaSpec, MoeSpec, ParameterCounts, SlidingWindow
from slim.yaml_files import read_yaml_mapping, require_keys

__all__ = ["BYTES_PER_FP16", "MODELS_FILE", "Architecture", "ArchitectureArrays", "ArchitectureCatalog", "FfnKind",
           "MlaSpec", "MoeSpec", "ParameterCounts", "SlidingWindow", "UnsupportedModel", "load_architectures"]

FINE_TUNE_SUFFIX = re.compile(r"[-_.](?:instruct|chat|it|hf|base|sft|dpo|rlhf)(?=[-_.]|$)")
"""What a fine-tuned (or re-packaged) variant adds to its base model's name: ``Meta-Llama-3-8B-Instruct``
(``Mistral-7B-Instruct-v0.1``) has the architecture of ``Meta-Llama-3-8B`` (``Mistral-7B-v0.1``), so it
resolves to it."""


@dataclass(frozen=True)
class ArchitectureArrays:
    """Architecture constants as float arrays, one entry per configuration: the vectorised
    `Architecture` with which SLIM and the baselines evaluate many models at once.

    `ffn_ratio` is None where the source does not give it: the baselines' feature tables
    carry only ``L``, ``D``, ``H_q`` and ``H_kv`` (`baselines.features.ARCHITECTURE_COLUMNS`).
    """

    n_layers: np.ndarray             # L
    hidden_dim: np.ndarray           # D
    n_q_heads: np.ndarray            # H_q
    n_kv_heads: np.ndarray           # H_kv
    ffn_ratio: np.ndarray | None = None   # r_ff

    @property
    def kv_dim(self) -> np.ndarray:
        """``D_kv = H_kv d_h = H_kv D / H_q`` (equals ``D`` without GQA)."""
        return self.n_kv_heads * (self.hidden_dim / self.n_q_heads)

    @classmethod
    def stack(cls, architectures: Sequence[Architecture]) -> "ArchitectureArrays":
        """One entry per architecture, in order."""
        def values(name: str) -> np.ndarray:
            return np.array([getattr(arch, name) for arch in architectures], dtype=float)

        return cls(values("n_layers"), values("hidden_dim"), values("n_q_heads"), values("n_kv_heads"),
                   values("ffn_ratio"))

    def take(self, indices: np.ndarray) -> "ArchitectureArrays":
        """The entries at `indices` (e.g. one per row of a table, from per-model constants)."""
        return ArchitectureArrays(self.n_layers[indices], self.hidden_dim[indices], self.n_q_heads[indices],
                                  self.n_kv_heads[indices],
                                  None if self.ffn_ratio is None else self.ffn_ratio[indices])


@dataclass(frozen=True)
class UnsupportedModel:
    """A model the catalog names but cannot describe (an entry with ``unsupported:``): its name, aliases
    and the specific reason, given wherever it is asked for."""

    name: str
    display_name: str
    reason: str
    aliases: tuple[str, ...] = field(default_factory=tuple)

    def error(self, source: Path | None = None) -> UnsupportedArchitectureError:
        where = f" ({source})" if source else ""
        return UnsupportedArchitectureError(f"model '{self.name}'{where} is not supported: {self.reason}")


_REQUIRED_KEYS = (
    "display_name", "n_layers", "hidden_dim", "n_q_heads", "n_kv_heads",
    "ffn_dim", "ffn_kind", "n_params", "vocab_size",
)


def _aliases(entry: dict) -> tuple[str, ...]:
    """The entry's aliases, lower-cased, with its Hugging Face id."""
    names = [*entry.get("aliases", []), *([entry["hf_id"]] if entry.get("hf_id") else [])]
    return tuple(dict.fromkeys(str(alias).lower() for alias in names))


def vllm_model_argument(name: str, arch: Architecture | None) -> str:
    """The model as ``vllm serve`` and ``vllm bench`` should load it: `name` where vLLM can load it as
    given (a Hugging Face id ``org/model``, or a local checkpoint folder), else the catalog entry's
    Hugging Face id (a catalog name such as ``opt-2.7b`` is not a Hub id: vLLM would not find it),
    else `name`."""
    if "/" in name or Path(name).is_dir() or arch is None or not arch.hf_id:
        return name
    return arch.hf_id


def _architecture_from_entry(name: str, entry: dict, source: Path) -> Architecture:
    require_keys(entry, _REQUIRED_KEYS, f"{source}: model '{name}'")
    if entry["ffn_kind"] not in ("two_matrix", "swiglu"):
        raise ConfigError(
            f"{source}: model '{name}' has ffn_kind '{entry['ffn_kind']}'; "
            "use 'two_matrix' or 'swiglu'"
        )
    if entry["hidden_dim"] % entry["n_q_heads"]:
        raise ConfigError(f"{source}: model '{name}': hidden_dim is not a multiple of n_q_heads")
    arch = Architecture(
        name=name,
        display_name=str(entry["display_name"]),
        n_layers=int(entry["n_layers"]),
        hidden_dim=int(entry["hidden_dim"]),
        n_q_heads=int(entry["n_q_heads"]),
        n_kv_heads=int(entry["n_kv_heads"]),
        ffn_dim=int(entry["ffn_dim"]),
        ffn_kind=entry["ffn_kind"],
        n_params=int(entry["n_params"]),
        vocab_size=int(entry["vocab_size"]),
        embed_proj_dim=entry.get("embed_proj_dim"),
        aliases=_aliases(entry),
        hf_id=entry.get("hf_id"),
        tied_embeddings=bool(entry.get("tie_word_embeddings", False)),
    )
    if arch.parameters.other < 0:
        raise ConfigError(f"{source}: model '{name}': n_params {arch.n_params} is below its matrices and embeddings "
                          f"({arch.n_params - arch.parameters.other}); is tie_word_embeddings missing?")
    return arch


def _architecture_from_hf_entry(name: str, entry: dict, source: Path) -> Architecture:
    config = entry["hf_config"]
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: model '{name}': hf_config must be the mapping of its config.json's keys")
    arch = architecture_from_hf_mapping(config, Path(f"{source}: model '{name}' hf_config"), name,
                                        entry.get("hf_quant_config"))
    return replace(arch, display_name=str(entry.get("display_name", name)), aliases=_aliases(entry),
                   hf_id=entry.get("hf_id", arch.hf_id))


def _served_from_entry(name: str, entry: dict, source: Path, architectures: dict[str, Architecture]) -> Architecture:
    base = architectures.get(str(entry["base"]))
    if base is None:
        raise ConfigError(f"{source}: model '{name}': base '{entry['base']}' is not a model of the file "
                          "(a served form names the entry it serves)")
    try:
        served = base.served(entry.get("quantization"), str(entry.get("kv_cache_dtype", "auto")))
    except ConfigError as error:
        raise ConfigError(f"{source}: model '{name}': {error}") from error
    return replace(served, name=name, display_name=str(entry.get("display_name", name)), aliases=_aliases(entry),
                   hf_id=entry.get("hf_id", base.hf_id))


def _unsupported_from_entry(name: str, entry: dict, source: Path) -> UnsupportedModel:
    reason = entry["unsupported"]
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigError(f"{source}: model '{name}': 'unsupported' must be the reason, in words")
    return UnsupportedModel(name, str(entry.get("display_name", name)), reason.strip(), _aliases(entry))


class ArchitectureCatalog:
    """All architectures of a models file, looked up by name, alias or Hugging Face id, and the models
    it names without describing them: entries with an ``unsupported:`` reason instead of an
    architecture. A copy may also know some of those by name only (`measuring`): their runs are
    read, nothing is predicted for them.

    ``catalog[model]`` and ``model in catalog`` answer for every described architecture, dense 16-bit
    or not: one with a `Architecture.dense_formula_gap` (routed experts, latent attention, an explicit
    head dim, quantised weights or KV cache, sliding windows) is served by SLIM's terms beyond the
    paper (`slim.model.modern`) and the simulator's (`slim.sim.modern_cost`)."""

    def __init__(self, architectures: dict[str, Architecture], source: Path | None = None,
                 unsupported: dict[str, UnsupportedModel] | None = None,
                 measured_only: dict[str, UnsupportedModel] | None = None):
        self._by_name = dict(architectures)
        self.source = source
        self._measured_only = dict(measured_only or {})
        self._alias_to_name: dict[str, str] = {}
        for model in self._measured_only.values():
            for alias in (model.name.lower(), *model.aliases):
                self._alias_to_name[alias] = model.name
        for arch in architectures.values():
            self._alias_to_name[arch.name.lower()] = arch.name
            for alias in arch.aliases:
                self._alias_to_name[alias] = arch.name
        self._unsupported = dict(unsupported or {})
        self._unsupported_alias: dict[str, str] = {}
        for model in self._unsupported.values():
            for alias in (model.name.lower(), *model.aliases):
                self._unsupported_alias.setdefault(alias, model.name)

    @classmethod
    def from_yaml(cls, path: str | Path) -> "ArchitectureCatalog":
        path = Path(path)
        raw = read_yaml_mapping(path, f"models file not found: {path}", "a mapping of model name -> architecture")
        unsupported = {name: _unsupported_from_entry(name, entry, path) for name, entry in raw.items()
                       if isinstance(entry, dict) and "unsupported" in entry}
        architectures: dict[str, Architecture] = {}
        for name, entry in raw.items():
            if name in unsupported or (isinstance(entry, dict) and "base" in entry):
                continue
            if not isinstance(entry, dict):
                raise ConfigError(f"{path}: model '{name}' must be a mapping of its architecture")
            architectures[name] = (_architecture_from_hf_entry(name, entry, path) if "hf_config" in entry
                                   else _architecture_from_entry(name, entry, path))
        for name, entry in raw.items():
            if isinstance(entry, dict) and "base" in entry:
                architectures[name] = _served_from_entry(name, entry, path, architectures)
        return cls({name: architectures[name] for name in raw if name in architectures}, path, unsupported)

    def unsupported(self, model: str) -> UnsupportedModel | None:
        """Why the models file does not describe the model a name, alias or path names (as
        `resolve_name` matches): its ``unsupported:`` entry, or the model known by name only
        (`measured_only`); None where it is described or unknown."""
        measured_only = self.measured_only(model)
        if measured_only is not None:
            return measured_only
        key = model.strip().rstrip("/").lower()
        name = self._unsupported_alias.get(key) or self._unsupported_alias.get(key.rsplit("/", 1)[-1])
        return self._unsupported[name] if name is not None else None

    def measured_only(self, model: str) -> UnsupportedModel | None:
        """The model a name, alias or path names where this catalog knows it by name only (`measuring`),
        with why it cannot describe it; None otherwise."""
        name = self.resolve_name(model)
        return self._measured_only.get(name) if name is not None else None

    def measuring(self, model: UnsupportedModel) -> "ArchitectureCatalog":
        """A copy of this catalog that knows `model` (a model it cannot describe: an ``unsupported:``
        entry, or a checkpoint whose feature or quantisation is not modelled) by its name and aliases
        without describing it: ``model in catalog`` holds, so the runs of it ingest reads are usable
        measurements, while ``catalog[model]`` still raises its reason, so nothing predicts them.
        `slim tune` tunes such a model by measurement alone; the pipeline's catalogs have none."""
        return ArchitectureCatalog(self._by_name, self.source, self._unsupported,
                                   {**self._measured_only, model.name: model})

    @property
    def names(self) -> list[str]:
        return list(self._by_name)

    def with_architecture(self, arch: Architecture) -> "ArchitectureCatalog":
        """A copy of this catalog that also holds `arch`. Where `arch`'s name is a name or alias of an
        entry, `arch` replaces that entry under the entry's name and aliases (plus its own name), so
        runs named either way resolve to it."""
        replaced = self.resolve_name(arch.name)
        if replaced is not None:
            old = self._by_name[replaced]
            aliases = tuple(dict.fromkeys((*old.aliases, arch.name.lower(), *arch.aliases)))
            arch = replace(arch, name=old.name, aliases=tuple(a for a in aliases if a != old.name.lower()))
        kept = {name: entry for name, entry in self._by_name.items() if name != replaced}
        return ArchitectureCatalog({**kept, arch.name: arch}, self.source, self._unsupported, self._measured_only)

    def serving(self, model: str, quantization: str | None = None,
                kv_cache_dtype: str | None = None) -> "ArchitectureCatalog":
        """This catalog with `model` as vLLM serves it under ``--quantization`` and ``--kv-cache-dtype``
        (`Architecture.served`; None: the flag is not given), under its own name, so its runs resolve
        to the served form; the catalog itself where neither flag is given."""
        if quantization is None and kv_cache_dtype is None:
            return self
        return self.with_architecture(self[model].served(quantization, kv_cache_dtype or "auto"))

    def resolve_name(self, model: str) -> str | None:
        """Canonical name for a model name, alias, Hugging Face id or model path (any architecture the
        file describes, or a model known by name only: `measuring`); None if unknown.

        A path such as ``/models/opt/opt-1.3b`` resolves by its last component.
        """
        key = model.strip().rstrip("/").lower()
        if key in self._alias_to_name:
            return self._alias_to_name[key]
        basename = key.rsplit("/", 1)[-1]
        if basename in self._alias_to_name:
            return self._alias_to_name[basename]
        base_model = FINE_TUNE_SUFFIX.sub("", basename)
        return self._alias_to_name.get(base_model) if base_model != basename else None

    def nearest(self, model: str, count: int = 3) -> list[str]:
        """The catalog names closest in spelling to `model` (for an unknown model's error)."""
        import difflib

        basename = FINE_TUNE_SUFFIX.sub("", model.strip().rstrip("/").lower().rsplit("/", 1)[-1])
        close = difflib.get_close_matches(basename, list(self._alias_to_name), n=count * 3, cutoff=0.6)
        return list(dict.fromkeys(self._alias_to_name[alias] for alias in close))[:count]

    def __contains__(self, model: str) -> bool:
        """Whether the models file describes the model, or this catalog knows it by name only (`measuring`)."""
        return self.resolve_name(model) is not None

    def routes_experts(self, model: str) -> bool | None:
        """Whether the model the catalog describes is a mixture of experts; None where it does not describe
        it (unknown, or known by name only)."""
        name = self.resolve_name(model)
        if name is None or name in self._measured_only:
            return None
        return self._by_name[name].moe is not None

    def architecture(self, model: str) -> Architecture:
        """Any architecture the file describes (routed experts, latent attention and quantised weights
        included), for the decode-step physics; raises for an ``unsupported:`` entry or an unknown model."""
        name = self.resolve_name(model)
        if name is None or name in self._measured_only:
            return self[model]
        return self._by_name[name]

    def __getitem__(self, model: str) -> Architecture:
        """The architecture of a model the catalog describes (routed experts, latent attention and
        quantised weights included: SLIM's terms beyond the paper and the simulator serve them);
        `UnsupportedArchitectureError` with the reason for an ``unsupported:`` entry,
        `UnknownModelError` naming the nearest for an unknown one."""
        name = self.resolve_name(model)
        if name in self._measured_only:
            raise self._measured_only[name].error()
        if name is None and self.unsupported(model) is not None:
            raise self.unsupported(model).error(self.source)
        if name is None:
            where = f" (in {self.source})" if self.source else ""
            nearest = self.nearest(model)
            hint = f" The nearest known: {', '.join(nearest)}." if nearest else ""
            raise UnknownModelError(
                f"unknown model '{model}'{where}; known: {', '.join(self._by_name)}.{hint} "
                "Add its architecture to the models file, or pass its Hugging Face config.json with --model-config."
            )
        return self._by_name[name]


def load_architectures(path: str | Path = MODELS_FILE) -> ArchitectureCatalog:
    """Load the packaged model catalog (or another models file) into a catalog."""
    return ArchitectureCatalog.from_yaml(path)
