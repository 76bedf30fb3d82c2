"""The models a `slim tune` request names, resolved against the models catalog (`request_models`): a
``--model-config`` or a checkpoint folder (``vllm serve DIR``) adds its architecture, and
``--quantization`` and ``--kv-cache-dtype`` serve it as vLLM would.

A model slim cannot describe (an ``unsupported:`` entry of the models file, or a checkpoint whose
architecture feature or quantisation is not modelled: `slim.errors.NotModelledError`) is not
refused: the catalog knows it by name only (`ArchitectureCatalog.measuring`), so its runs are read
as measurements, and the session tunes it with no prior, by measurement alone
(`slim.tune.no_prior`). `RequestModels.no_prior` says why, in one line per model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from slim.errors import NotModelledError
from slim.specs.architecture import ArchitectureCatalog, UnsupportedModel, load_architectures
from slim.specs.hf_config import architecture_from_hf_config, default_model_name, read_checkpoint
from slim.tune.request import TuneRequest


@dataclass(frozen=True)
class RequestModels:
    """The catalog a request's session reads runs and predicts with, and the models in it no prior
    describes: canonical name -> why (the reason the catalog gives, in one line)."""

    catalog: ArchitectureCatalog
    no_prior: dict[str, str]


def no_prior_line(model: str, why: str) -> str:
    """The one line `slim tune` prints for a model it tunes by measurement alone."""
    return (f"no prior for {model}: {why}; tuning it by measurement alone (a plain bisection's runs, the "
            "decision on the measured caps only; memory flags left to vLLM's defaults)")


def checkpoint_folder(model: str) -> Path | None:
    """`model` where it names a local checkpoint folder (one holding a ``config.json``), as ``vllm serve
    DIR`` takes it."""
    folder = Path(model).expanduser()
    return folder if folder.is_dir() and (folder / "config.json").is_file() else None


def _with_checkpoint(catalog: ArchitectureCatalog, config: Path, name: str | None) -> ArchitectureCatalog:
    """`catalog` with the model a ``config.json`` describes, named `name` (None: its own name); one
    whose feature or quantisation is not modelled is known by name only, with the error as its reason."""
    try:
        return catalog.with_architecture(architecture_from_hf_config(config, name))
    except NotModelledError as error:
        raw, _, source = read_checkpoint(config)
        model_name = (name or default_model_name(raw, source)).strip().lower()
        published = str(raw.get("_name_or_path") or "").strip().rstrip("/").lower()
        aliases = tuple(alias for alias in (published,) if alias and alias != model_name)
        return catalog.measuring(UnsupportedModel(model_name, str(raw.get("_name_or_path") or model_name),
                                                  str(error), aliases))


def request_models(request: TuneRequest) -> RequestModels:
    """The request's catalog (module docstring): the models file, ``--model-config``, the checkpoint
    folders a workload names, each model served under ``--quantization`` and ``--kv-cache-dtype``; and
    the models of its workloads no prior describes, each with why."""
    catalog = load_architectures(request.models_file)
    if request.model_config is not None:
        catalog = _with_checkpoint(catalog, request.model_config, request.model_config_name)
    for spec in request.workloads:
        folder = checkpoint_folder(spec.model)
        if folder is not None and spec.model not in catalog:     # vllm serve DIR: the folder describes it
            catalog = _with_checkpoint(catalog, folder / "config.json", spec.model)
    no_prior: dict[str, str] = {}
    for model in dict.fromkeys(spec.model for spec in request.workloads):
        unsupported = catalog.unsupported(model) if model not in catalog else None
        if unsupported is not None:
            catalog = catalog.measuring(unsupported)
        measured_only = catalog.measured_only(model)
        if measured_only is None:
            catalog = catalog.serving(model, request.quantization, request.kv_cache_dtype)
        else:       # a served form of a model slim cannot size cannot be sized either
            no_prior[measured_only.name] = str(measured_only.error(catalog.source if unsupported else None))
    return RequestModels(catalog, no_prior)
