"""Transformer architectures (public model configs) loaded from the model catalog
(`slim/specs/models.yaml`, shipped with the package: `MODELS_FILE`).

Symbols follow the SLIM paper (Section VI-A, Eq. 4): ``L`` layers, hidden size ``D``,
``H_q`` query heads, ``H_kv`` key/value heads, head dim ``d_h = D / H_q``,
``D_kv = H_kv d_h``, and the FFN ratio ``r_ff``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Sequence

import numpy as np

from slim.defaults import MODELS_FILE
from slim.errors import ConfigError, UnknownModelError, UnsupportedArchitectureError
from slim.yaml_files import read_yaml_mapping, require_keys

FfnKind = Literal["two_matrix", "swiglu"]
BYTES_PER_FP16 = 2
"""fp16/bf16 weights and KV cache: the ``b_kv = 2`` bytes of Eq. 11."""


FINE_TUNE_SUFFIX = re.compile(r"[-_.](?:instruct|chat|it|hf|base|sft|dpo|rlhf)(?=[-_.]|$)")
"""What a fine-tuned (or re-packaged) variant adds to its base model's name: ``Meta-Llama-3-8B-Instruct``
(``Mistral-7B-Instruct-v0.1``) has the architecture of ``Meta-Llama-3-8B`` (``Mistral-7B-v0.1``), so it
resolves to it."""


@dataclass(frozen=True)
class Architecture:
    """One decoder-only transformer, as described by its public config."""

    name: str
    display_name: str
    n_layers: int
    hidden_dim: int
    n_q_heads: int
    n_kv_heads: int
    ffn_dim: int
    ffn_kind: FfnKind
    n_params: int
    vocab_size: int
    embed_proj_dim: int | None = None
    aliases: tuple[str, ...] = field(default_factory=tuple)

    @property
    def head_dim(self) -> int:
        """``d_h = D / H_q``."""
        return self.hidden_dim // self.n_q_heads

    @property
    def kv_dim(self) -> int:
        """``D_kv = H_kv d_h = D H_kv / H_q`` (equals ``D`` without GQA)."""
        return self.n_kv_heads * self.head_dim

    @property
    def ffn_ratio(self) -> float:
        """``r_ff`` such that ``4 r_ff D^2`` is the FFN FLOPs per token.

        Two-matrix FFN (OPT): ``r_ff = D_ff / D``.
        Gated SwiGLU FFN (three matrices): ``r_ff = 1.5 D_ff / D``.
        """
        ratio = self.ffn_dim / self.hidden_dim
        return 1.5 * ratio if self.ffn_kind == "swiglu" else ratio

    def weight_bytes(self, bytes_per_param: int = BYTES_PER_FP16) -> int:
        """Weight memory: ``n_params x bytes_per_param`` (fp16/bf16: 2)."""
        return self.n_params * bytes_per_param

    def kv_bytes_per_token(self, bytes_per_element: int = BYTES_PER_FP16) -> int:
        """KV-cache bytes per token: ``2 (K and V) x L x D_kv x b_kv``."""
        return 2 * self.n_layers * self.kv_dim * bytes_per_element


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
    """A model the catalog knows but SLIM's dense formula does not cover (an entry with ``unsupported:``):
    its name, aliases and the specific reason, given wherever it is asked for."""

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


def _architecture_from_entry(name: str, entry: dict, source: Path) -> Architecture:
    require_keys(entry, _REQUIRED_KEYS, f"{source}: model '{name}'")
    if entry["ffn_kind"] not in ("two_matrix", "swiglu"):
        raise ConfigError(
            f"{source}: model '{name}' has ffn_kind '{entry['ffn_kind']}'; "
            "use 'two_matrix' or 'swiglu'"
        )
    if entry["hidden_dim"] % entry["n_q_heads"]:
        raise ConfigError(f"{source}: model '{name}': hidden_dim is not a multiple of n_q_heads")
    return Architecture(
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
        aliases=tuple(str(alias).lower() for alias in entry.get("aliases", [])),
    )


def _unsupported_from_entry(name: str, entry: dict, source: Path) -> UnsupportedModel:
    reason = entry["unsupported"]
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigError(f"{source}: model '{name}': 'unsupported' must be the reason, in words")
    return UnsupportedModel(name, str(entry.get("display_name", name)), reason.strip(),
                            tuple(str(alias).lower() for alias in entry.get("aliases", [])))


class ArchitectureCatalog:
    """All architectures of a models file, looked up by name or alias, and the models it names as
    unsupported (entries with an ``unsupported:`` reason instead of an architecture)."""

    def __init__(self, architectures: dict[str, Architecture], source: Path | None = None,
                 unsupported: dict[str, UnsupportedModel] | None = None):
        self._by_name = dict(architectures)
        self.source = source
        self._alias_to_name: dict[str, str] = {}
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
        return cls({name: _architecture_from_entry(name, entry, path) for name, entry in raw.items()
                    if name not in unsupported}, path, unsupported)

    def unsupported(self, model: str) -> UnsupportedModel | None:
        """The unsupported entry a model name, alias or path names (as `resolve_name` matches), or None."""
        key = model.strip().rstrip("/").lower()
        name = self._unsupported_alias.get(key) or self._unsupported_alias.get(key.rsplit("/", 1)[-1])
        return self._unsupported[name] if name is not None else None

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
        return ArchitectureCatalog({**kept, arch.name: arch}, self.source, self._unsupported)

    def resolve_name(self, model: str) -> str | None:
        """Canonical name for a model name, alias or model path; None if unknown.

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
        return self.resolve_name(model) is not None

    def __getitem__(self, model: str) -> Architecture:
        name = self.resolve_name(model)
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
