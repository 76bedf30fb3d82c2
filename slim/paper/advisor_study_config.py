"""Configuration of the advisor's artefacts, the file config `datasets.<name>.bca` names
(`config/bca/<dataset>.yaml`, schema `workflow/schemas/bca.schema.yaml`): epsilon, the SLO
multipliers and reference point, the confidence of Table V's confident SLIM-BCA, the Fig. 12
grid, the Table V experiments, the Fig. 13 curves, and the runs the whole study reads (`rows`).
Selectors are mappings column -> allowed values (see `slim.paper.splits`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from slim.decision.candidates import DEFAULT_EPSILON
from slim.errors import ConfigError
from slim.paper.splits import Selector, select_rows
from slim.yaml_files import parse_yaml, read_yaml_mapping


@dataclass(frozen=True)
class CurveSelection:
    """A labelled selector (column -> allowed values) over the cleaned table."""

    label: str
    select: Selector


@dataclass(frozen=True)
class Table5Experiment:
    """One target curve and the growing training sets SLIM-BCA is fitted on."""

    target: CurveSelection
    training: tuple[CurveSelection, ...]


@dataclass(frozen=True)
class BcaStudyConfig:
    """Everything the BCA artefacts of one dataset are configured by."""

    epsilon: float
    strict_slo_multiplier: float
    loose_slo_multiplier: float
    slo_reference_max_num_seqs: float | None   # None: the target curve's smallest profiled point
    sensitivity_epsilons: tuple[float, ...]
    sensitivity_slo_multipliers: tuple[float, ...]
    table5: tuple[Table5Experiment, ...]
    fig12_transfers: tuple[str, ...]          # held-out setting names of the settings file
    fig13_curves: tuple[CurveSelection, ...]
    confidence: float | None = None            # Table V's confident SLIM-BCA; None: not shown
    rows: Selector | None = None               # the runs the study reads; None: every run

    def study_rows(self, clean: pd.DataFrame) -> pd.DataFrame:
        """The cleaned table's runs this study reads (`rows`): a measured curve is one model, IL
        and OL over the batch cap, so a table mixing tensor-parallel degrees keeps one of them."""
        if not self.rows:
            return clean
        chosen = select_rows(clean, self.rows)
        if chosen.empty:
            raise ConfigError(f"BCA config `rows` {self.rows} selects none of the cleaned table's {len(clean)} runs")
        return chosen


BCA_SCHEMA = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "bca.schema.yaml"


def _selection(entry: Any, where: str) -> CurveSelection:
    if not isinstance(entry, dict) or "label" not in entry or not isinstance(entry.get("select"), dict):
        raise ConfigError(f"{where}: expected a mapping with `label` and a `select` mapping")
    select = {str(column): list(values) if isinstance(values, list) else [values]
              for column, values in entry["select"].items()}
    return CurveSelection(str(entry["label"]), select)


def _numbers(raw: dict, key: str, where: Path, default: list[float] | None = None) -> tuple[float, ...]:
    values = raw.get(key, default)
    if not isinstance(values, list) or not values or not all(isinstance(v, (int, float)) for v in values):
        raise ConfigError(f"{where}: `{key}` must be a non-empty list of numbers")
    return tuple(float(v) for v in values)


def load_bca_config(path: str | Path) -> BcaStudyConfig:
    """Read an advisor study file (`config/bca/<dataset>.yaml`); raise `ConfigError` naming the file and key."""
    import jsonschema

    path = Path(path)
    raw = read_yaml_mapping(path, f"BCA config not found: {path}; see config/bca/ for examples")
    try:
        jsonschema.validate(raw, parse_yaml(BCA_SCHEMA))
    except jsonschema.ValidationError as error:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ConfigError(f"{path}: {where}: {error.message}") from error
    slo = raw.get("slo", {})
    epsilon = float(raw.get("epsilon", DEFAULT_EPSILON))
    if not 0 < epsilon < 1:
        raise ConfigError(f"{path}: epsilon must lie in (0, 1), got {epsilon}")
    strict, loose = float(slo.get("strict_multiplier", 2.0)), float(slo.get("loose_multiplier", 4.0))
    if strict <= 0 or loose <= 0:
        raise ConfigError(f"{path}: slo multipliers must be > 0")
    reference = slo.get("reference_max_num_seqs")
    experiments = []
    for position, entry in enumerate(raw.get("table5", [])):
        where = f"{path}: table5[{position}]"
        training = entry.get("training") if isinstance(entry, dict) else None
        if not isinstance(training, list) or not training:
            raise ConfigError(f"{where}: `training` must be a non-empty list of selections")
        experiments.append(Table5Experiment(
            _selection(entry.get("target"), f"{where}.target"),
            tuple(_selection(t, f"{where}.training[{i}]") for i, t in enumerate(training))))
    return BcaStudyConfig(
        epsilon=epsilon,
        strict_slo_multiplier=strict,
        loose_slo_multiplier=loose,
        slo_reference_max_num_seqs=None if reference is None else float(reference),
        sensitivity_epsilons=_numbers(raw.get("sensitivity", {}), "epsilons", path, [0.05, 0.1, 0.2, 0.3]),
        sensitivity_slo_multipliers=_numbers(raw.get("sensitivity", {}), "slo_multipliers", path,
                                             [1.0, 1.25, 1.5, 2.0, 3.0]),
        table5=tuple(experiments),
        fig12_transfers=tuple(str(name) for name in raw.get("fig12_transfers", [])),
        fig13_curves=tuple(_selection(e, f"{path}: fig13_curves[{i}]")
                           for i, e in enumerate(raw.get("fig13_curves", []))),
        confidence=None if raw.get("confidence") is None else float(raw["confidence"]),
        rows={str(column): list(values) for column, values in raw.get("rows", {}).items()} or None,
    )
