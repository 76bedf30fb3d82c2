"""Checks of the pipeline configuration that a JSON schema cannot express.

The schema (workflow/schemas/config.schema.yaml) checks types and ranges; this
module checks that names point at things that exist (trace folders, models,
hardware, settings files), so a wrong config fails before any job runs, with a
message naming the key and the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from slim import columns as col
from slim.errors import ConfigError, TraceFormatError
from slim.paper.characterisation_config import parse_characterisation_config, resolve_characterisation
from slim.paper.generalisation_config import SECTION, GeneralisationConfig
from slim.paper.splits import load_settings
from slim.pipeline.trace_locations import AbsentDataset, TraceSearch, check_source, locate_trace_dir, trace_search
from slim.sim.constants import SIM_CONSTANTS_FILE
from slim.specs.architecture import MODELS_FILE, ArchitectureCatalog, load_architectures
from slim.specs.hardware import HARDWARE_FILE, Hardware, load_hardware
from slim.traces.ingest import trace_root_problem
from slim.traces.offline_ingest import IngestOptions
from slim.traces.run_files import classify_directory
from slim.traces.static_batch import AcceleratorLookup
from slim.traces.summary_table import DEFAULT_LAYOUT, TableLayout, table_headers
from slim.traces.tree import walk_tree


@dataclass(frozen=True)
class DatasetConfig:
    """One dataset entry of config.yaml, resolved."""

    name: str
    kind: str
    trace_dir: Path
    hardware: Hardware | None        # None where table.hardware_map gives each row its accelerator
    models: tuple[str, ...]
    settings_file: Path | None
    description: str
    bca_file: Path | None = None
    hardware_map: Mapping[str, Hardware] = field(default_factory=dict)
    table_layout: TableLayout = DEFAULT_LAYOUT
    hardware_catalog: Mapping[str, Hardware] | None = None   # the hardware file (labels that are its keys)
    rows: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)   # datasets.<name>.rows: rows kept
    source: str | None = None       # datasets.<name>.source: the trace source `fetch_traces` downloads
    table: Mapping[str, Any] | None = None   # datasets.<name>.table as configured (its summary tables' columns)

    @property
    def hardware_key(self) -> str | None:
        """The dataset's `hardware` key of the hardware file, or None where its table maps rows to accelerators."""
        return None if self.hardware is None else self.hardware.name

    @property
    def reads_summary_tables(self) -> bool:
        """Whether its runs come from summary tables (offline static batches) rather than run folders."""
        return self.table is not None

    @property
    def ingest_options(self) -> IngestOptions:
        """What ingest needs from this entry: the accelerator(s) and the summary tables' columns."""
        return IngestOptions(AcceleratorLookup(self.hardware, dict(self.hardware_map), self.hardware_catalog),
                             self.table_layout)

    @property
    def is_simulated(self) -> bool:
        return self.kind == "simulated"

    @property
    def label(self) -> str:
        """Name as shown in tables and figures: simulated data is always marked."""
        kind = "simulated" if self.is_simulated else "real"
        return self.name if kind in self.name else f"{self.name} ({kind})"


def _workflow_path(path: Path) -> str:
    """`path` relative to the working directory when it lies below it (the workflow's paths are
    relative), else absolute."""
    relative = os.path.relpath(path.resolve())
    return path.resolve().as_posix() if relative.startswith("..") else Path(relative).as_posix()


def with_catalog_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """Set `models_file` and `hardware_file` to the catalogs shipped in the package where the config
    names none, and `simulator.constants` to the packaged calibrated constants (in place, so rules
    can take ``config["models_file"]`` as an input); returns `config`."""
    config.setdefault("models_file", _workflow_path(MODELS_FILE))
    config.setdefault("hardware_file", _workflow_path(HARDWARE_FILE))
    if isinstance(config.get("simulator"), dict):
        config["simulator"].setdefault("constants", _workflow_path(SIM_CONSTANTS_FILE))
    return config


@dataclass(frozen=True)
class ResolvedDatasets:
    """The datasets of run_datasets: those this run builds, and the real ones skipped for want of traces."""

    available: dict[str, DatasetConfig]
    absent: dict[str, AbsentDataset]


def check_config(config: dict[str, Any], base_dir: Path = Path("."),
                 environ: Mapping[str, str] | None = None) -> dict[str, DatasetConfig]:
    """Resolve and check every dataset of a schema-valid config that this run builds (real datasets
    with ``required: false`` and no traces are left out: see `resolve_datasets`); raise `ConfigError`
    naming the key."""
    return resolve_datasets(config, base_dir, environ).available


def resolve_datasets(config: dict[str, Any], base_dir: Path = Path("."),
                     environ: Mapping[str, str] | None = None) -> ResolvedDatasets:
    """Resolve and check every dataset of run_datasets; raise `ConfigError` naming the key.

    A real dataset's trace folder is looked up as `slim.pipeline.trace_locations` says
    (`environ` stands for the process environment, for SLIM_TRACES_ROOT). `models_file` and
    `hardware_file` default to the packaged catalogs (`with_catalog_defaults`)."""
    catalog = load_architectures(base_dir / config.get("models_file", MODELS_FILE))
    hardware = load_hardware(base_dir / config.get("hardware_file", HARDWARE_FILE))
    datasets = config["datasets"]
    for position, name in enumerate(config["run_datasets"]):
        if name not in datasets:
            raise ConfigError(f"run_datasets[{position}] = '{name}' is not a key of `datasets` "
                              f"(known: {', '.join(datasets)})")
    for name in config["run_datasets"]:
        if datasets[name]["kind"] == "simulated" and "simulator" not in config:
            raise ConfigError(f"datasets.{name} is simulated, but the config has no `simulator` section "
                              "(grid, constants, calibration_dataset) to write it")
    if config["default_dataset"] not in config["run_datasets"]:
        raise ConfigError(f"default_dataset = '{config['default_dataset']}' must be listed in run_datasets")
    search = trace_search(config, base_dir, environ)
    available, absent = {}, {}
    for name in config["run_datasets"]:
        resolved = _check_dataset(name, datasets[name], catalog, hardware, base_dir, config.get("trace_sources", {}),
                                  search)
        if isinstance(resolved, AbsentDataset):
            absent[name] = resolved
        else:
            available[name] = resolved
    if config["default_dataset"] in absent:
        raise ConfigError(f"default_dataset = '{config['default_dataset']}': "
                          f"{absent[config['default_dataset']].message}")
    if not available:
        raise ConfigError("every dataset of run_datasets is skipped, so there is nothing to build: "
                          + "; ".join(dataset.message for dataset in absent.values()))
    _check_figure_sections(config, catalog, hardware)
    return ResolvedDatasets(available, absent)


def _check_figure_sections(config: dict[str, Any], catalog: ArchitectureCatalog,
                           hardware: dict[str, Hardware]) -> None:
    """Names in the optional sections batch_scaling, length_sweeps, characterisation and beyond_paper.

    A Fig. 1 row may name a dataset of `datasets` that this run leaves out of
    run_datasets (the row is then skipped), but not an unknown one. The
    generalisation section (Fig. 11) is checked by `generalisation_config` when its
    targets are planned.
    """
    batch_scaling = config.get("batch_scaling")
    if batch_scaling:
        for position, name in enumerate(batch_scaling["datasets"]):
            if name not in config["datasets"]:
                raise ConfigError(f"batch_scaling.datasets[{position}] = '{name}' is not a key of `datasets` "
                                  f"(known: {', '.join(config['datasets'])})")
        for name in batch_scaling.get("output_len", {}):
            if name not in batch_scaling["datasets"]:
                raise ConfigError(f"batch_scaling.output_len.{name}: '{name}' is not in batch_scaling.datasets")
    for name, models in config.get("length_sweeps", {}).get("models", {}).items():
        if name not in config["datasets"]:
            raise ConfigError(f"length_sweeps.models.{name}: '{name}' is not a key of `datasets`")
        dataset_models = {catalog.resolve_name(m) for m in config["datasets"][name]["models"] if m in catalog}
        for position, model in enumerate(models):
            if model not in catalog or catalog.resolve_name(model) not in dataset_models:
                raise ConfigError(f"length_sweeps.models.{name}[{position}] = '{model}' is not a model of "
                                  f"datasets.{name}.models ({', '.join(sorted(dataset_models))})")
    for name, models in config.get("beyond_paper", {}).get("datasets", {}).items():
        if name not in config["datasets"]:
            raise ConfigError(f"beyond_paper.datasets.{name}: '{name}' is not a key of `datasets` "
                              f"(known: {', '.join(config['datasets'])})")
        for position, model in enumerate(models or []):
            if model not in catalog:
                raise ConfigError(f"beyond_paper.datasets.{name}[{position}] = '{model}' is not a model the "
                                  "models file describes")
    _check_layout_replay(config.get("beyond_paper", {}))
    scored = config.get("beyond_paper", {}).get("datasets", {})
    for position, name in enumerate(config.get("beyond_paper", {}).get("frontiers", [])):
        if name not in scored:
            raise ConfigError(f"beyond_paper.frontiers[{position}] = '{name}' is not a dataset of "
                              f"beyond_paper.datasets ({', '.join(scored)})")
    if config.get("characterisation"):
        if "simulator" not in config:
            raise ConfigError("characterisation (Figs. 3-6) is modelled with the simulator's constants: "
                              "add the `simulator` section or remove `characterisation`")
        resolve_characterisation(parse_characterisation_config(config["characterisation"]), catalog, hardware)


def _check_layout_replay(section: dict[str, Any]) -> None:
    """beyond_paper.layout_replay: each dataset is one the accuracy beyond the paper scores (its
    zero-shot predictions are the replay's prior), each SLO text parses as `--slo` would."""
    from slim.errors import SlimError
    from slim.specs.slo import SloBound

    for name, kinds in section.get("layout_replay", {}).get("slo_kinds", {}).items():
        if name not in section.get("datasets", {}):
            raise ConfigError(f"beyond_paper.layout_replay.slo_kinds.{name}: '{name}' is not in "
                              "beyond_paper.datasets (the replay's prior is that accuracy's zero-shot prediction)")
        for kind, texts in kinds.items():
            for text in texts:
                try:
                    SloBound.parse(text)
                except SlimError as error:
                    raise ConfigError(f"beyond_paper.layout_replay.slo_kinds.{name}.{kind}: {error}") from None


def _check_trace_dir(key: str, entry: dict[str, Any], trace_dir: Path, layout: TableLayout) -> None:
    """A real dataset's trace folder exists, is a folder and holds at least one run (with a ``table``
    section: at least one table its columns read, else the headers each CSV lacks are named)."""
    problem = trace_root_problem(trace_dir)
    if problem:
        raise ConfigError(f"{key}.trace_dir = '{entry['trace_dir']}' (read from {trace_dir.as_posix()}) {problem}; "
                          "point it at a folder of vLLM benchmark run directories")
    directories = [classify_directory(directory, layout) for directory in walk_tree(trace_dir)]
    if "table" in entry and not any(run.tables for run in directories):
        lacking = []
        for directory in walk_tree(trace_dir):
            for entry_file in directory.files:
                if entry_file.problem is None and entry_file.path.suffix.lower() in (".csv", ".parquet"):
                    try:
                        missing = layout.missing_headers(table_headers(entry_file.path))
                    except TraceFormatError as error:
                        missing = [str(error)]
                    lacking.append(f"{entry_file.name} lacks {', '.join(missing)}")
        raise ConfigError(f"{key}.table: no CSV or Parquet table under trace_dir = '{entry['trace_dir']}' has the "
                          f"headers {key}.table.columns names" + (f" ({'; '.join(lacking)})" if lacking else ""))
    if not any(run.looks_like_run for run in directories):
        raise ConfigError(f"{key}.trace_dir = '{entry['trace_dir']}' holds no vLLM benchmark run (no result "
                          "JSON, metrics, server or client log in it or below it); point it at your results")


_NUMERIC_COLUMNS = {col.MAX_NUM_SEQS, col.TENSOR_PARALLEL, col.NUM_PROMPTS, col.INPUT_LEN_NOMINAL,
                    col.OUTPUT_LEN_NOMINAL}


def _check_selector(where: str, selector: dict[str, list[Any]], catalog: ArchitectureCatalog,
                    models: tuple[str, ...]) -> None:
    """A held-out selector names columns of the runs table and, for models and numeric sweep
    labels, values that can match a row of the dataset."""
    for column, allowed in selector.items():
        if column not in col.RUN_COLUMNS:
            raise ConfigError(f"{where}.{column}: '{column}' is not a column of the runs table "
                              f"(columns: {', '.join(col.RUN_COLUMNS)})")
        for position, value in enumerate(allowed):
            if column == col.MODEL and catalog.resolve_name(str(value)) not in models:
                raise ConfigError(f"{where}.{column}[{position}] = '{value}' selects no rows: it is not one of "
                                  f"the dataset's models ({', '.join(models)})")
            if column in _NUMERIC_COLUMNS and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(f"{where}.{column}[{position}] = {value!r} selects no rows: {column} holds numbers")


def _check_settings(key: str, settings_file: Path, catalog: ArchitectureCatalog, models: tuple[str, ...]) -> None:
    """Every selector of the dataset's held-out settings, before any job runs."""
    for setting in load_settings(settings_file):
        if not setting.applicable:
            continue
        trains = setting.train if isinstance(setting.train, list) else [setting.train]
        for part, selectors in (("train", trains), ("validate", [setting.validate])):
            for selector in selectors:
                _check_selector(f"{key}.settings ({settings_file}): setting '{setting.name}' {part}", selector,
                                catalog, models)


def _real_trace_dir(key: str, name: str, entry: dict[str, Any], search: TraceSearch,
                    layout: TableLayout) -> Path | AbsentDataset:
    """Where a real dataset's traces are; an `AbsentDataset` to skip, or `ConfigError` if it is required."""
    located = locate_trace_dir(name, entry, search)
    if isinstance(located, AbsentDataset):
        if not entry.get("required", True):
            return located
        places = ", ".join(f"{path.as_posix()} ({origin})" for path, origin in located.looked_in)
        raise ConfigError(f"{key}.trace_dir = '{entry['trace_dir']}' does not exist (looked in {places}); point it "
                          "at a folder of vLLM benchmark run directories, or say `required: false` to skip the "
                          "dataset when its traces are absent")
    _check_trace_dir(key, entry, located, layout)
    return located


def _check_dataset(name: str, entry: dict[str, Any], catalog: ArchitectureCatalog,
                   hardware: dict[str, Hardware], base_dir: Path, sources: Mapping[str, Any],
                   search: TraceSearch) -> DatasetConfig | AbsentDataset:
    key = f"datasets.{name}"
    layout = TableLayout.from_config(entry.get("table"))
    check_source(key, entry, sources)
    if entry["kind"] == "real":
        trace_dir = _real_trace_dir(key, name, entry, search, layout)
        if isinstance(trace_dir, AbsentDataset):
            return trace_dir
    else:
        trace_dir = base_dir / entry["trace_dir"]
    if "hardware" in entry and entry["hardware"] not in hardware:
        raise ConfigError(f"{key}.hardware = '{entry['hardware']}' is not in the hardware file "
                          f"(known: {', '.join(hardware)})")
    hardware_map = layout.mapped_accelerators(hardware, f"{key}.table.")
    if entry.get("settings") and "hardware" not in entry:
        raise ConfigError(f"{key}.settings needs {key}.hardware: the held-out evaluation fits one accelerator "
                          "(a dataset whose rows map to several has ingest, cleaning and characterisation only)")
    rows = _check_rows(key, entry, hardware, set(hardware_map.values()))
    for position, model in enumerate(entry["models"]):
        unsupported = catalog.unsupported(model) if model not in catalog else None
        if unsupported is not None and entry.get("settings"):
            raise ConfigError(f"{key}.models[{position}] = '{model}': {unsupported.error()}; {key}.settings fits "
                              "SLIM on the dataset's models, so leave it out of models (its runs are marked "
                              "unsupported_model in the cleaning report)")
        if unsupported is None and model not in catalog:
            raise ConfigError(f"{key}.models[{position}] = '{model}' is not in the models file; "
                              f"add its architecture there (known: {', '.join(catalog.names)})")
    # A dataset without settings is ingested and cleaned only: it may list models SLIM does not cover,
    # whose runs are unsupported_model until the catalog admits them.
    models = tuple(catalog.resolve_name(m) or catalog.unsupported(m).name for m in entry["models"])
    settings_file = None
    if entry.get("settings"):
        settings_file = base_dir / entry["settings"]
        if not settings_file.is_file():
            raise ConfigError(f"{key}.settings = '{entry['settings']}' does not exist")
        _check_settings(key, settings_file, catalog, models)
    bca_file = None
    if entry.get("bca"):
        bca_file = base_dir / entry["bca"]
        if settings_file is None:
            raise ConfigError(f"{key}.bca needs {key}.settings: the advisor study's Table VI and Fig. 12 "
                              "read the held-out settings")
        if not bca_file.is_file():
            raise ConfigError(f"{key}.bca = '{entry['bca']}' does not exist (see config/bca/ for examples, "
                              "or omit the key: the dataset then gets every artefact but the advisor study's)")
    return DatasetConfig(
        name=name, kind=entry["kind"], trace_dir=trace_dir,
        hardware=hardware[entry["hardware"]] if "hardware" in entry else None,
        models=models, settings_file=settings_file, description=entry.get("description", ""), bca_file=bca_file,
        hardware_map=hardware_map, table_layout=layout, hardware_catalog=hardware, rows=rows,
        source=entry.get("source"), table=entry.get("table"),
    )


def _check_rows(key: str, entry: dict[str, Any], hardware: Mapping[str, Hardware],
                mapped: set[Hardware]) -> dict[str, tuple[Any, ...]]:
    """The dataset's `rows` selector: run columns, hardware-file keys for `hardware`, and, where the
    dataset is evaluated on one accelerator (`hardware` with `settings`), only that accelerator's rows
    when its table maps rows to several."""
    rows = {column: tuple(values) for column, values in entry.get("rows", {}).items()}
    for column in rows:
        if column not in col.RUN_COLUMNS:
            raise ConfigError(f"{key}.rows.{column}: '{column}' is not a column of the runs table "
                              f"(columns: {', '.join(col.RUN_COLUMNS)})")
    for position, value in enumerate(rows.get(col.HARDWARE, ())):
        if value not in hardware:
            raise ConfigError(f"{key}.rows.hardware[{position}] = '{value}' is not in the hardware file "
                              f"(known: {', '.join(hardware)})")
    evaluated = entry.get("hardware") if entry.get("settings") else None
    if evaluated is not None and col.HARDWARE in rows and rows[col.HARDWARE] != (evaluated,):
        raise ConfigError(f"{key}.rows.hardware = {list(rows[col.HARDWARE])} must be [{evaluated}], the dataset's "
                          "hardware: the held-out evaluation fits one accelerator's rows")
    if evaluated is not None and len(mapped) > 1 and col.HARDWARE not in rows:
        raise ConfigError(f"{key}.table.hardware_map maps rows to {len(mapped)} accelerators, but the held-out "
                          f"evaluation fits one ({key}.hardware = {evaluated}): add `rows: {{hardware: "
                          f"[{evaluated}]}}` to keep that accelerator's rows")
    return rows


def generalisation_config(config: Mapping[str, Any], datasets: Mapping[str, DatasetConfig]) -> GeneralisationConfig:
    """Check the `generalisation` section against the resolved `datasets` (those of run_datasets).

    Raises `ConfigError` naming ``generalisation.<key>`` when the section is
    missing, its dataset is not in run_datasets, a model is not one of the
    dataset's models, or a model is both trained on and predicted.
    """
    section = config.get(SECTION)
    if not section:
        raise ConfigError(f"`{SECTION}` is missing from the config; add dataset, train_models and target_models")
    name = section["dataset"]
    if name not in datasets:
        raise ConfigError(f"{SECTION}.dataset = '{name}' is not listed in run_datasets "
                          f"(listed: {', '.join(datasets)}); add it there or choose one of them")
    models = datasets[name].models
    for key in ("train_models", "target_models"):
        for position, model in enumerate(section[key]):
            if model not in models:
                raise ConfigError(f"{SECTION}.{key}[{position}] = '{model}' is not a model of "
                                  f"datasets.{name}.models (known: {', '.join(models)})")
    for position, model in enumerate(section["target_models"]):
        if model in section["train_models"]:
            raise ConfigError(f"{SECTION}.target_models[{position}] = '{model}' is also in "
                              f"{SECTION}.train_models; a target must be unseen")
    return GeneralisationConfig(name, tuple(section["train_models"]), tuple(section["target_models"]))
