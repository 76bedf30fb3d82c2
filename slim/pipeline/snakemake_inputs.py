"""Snakemake input and params functions of the Fig. 11 rules, which check their config section only
when planned (the run's plan, `slim.pipeline.planning.Plan.generalisation`, holds them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slim.paper.generalisation_config import SECTION, GeneralisationConfig
from slim.pipeline.config import DatasetConfig, generalisation_config


class GeneralisationInputs:
    """Snakemake input and params functions of the Fig. 11 rules.

    The config is checked when a Fig. 11 target is planned, not when the
    workflow is parsed, so a run whose run_datasets omit the generalisation
    dataset can still build everything else; asking for Fig. 11 then fails
    before any job runs, naming ``generalisation.dataset``.
    """

    def __init__(self, config: Mapping[str, Any], datasets: Mapping[str, DatasetConfig]):
        self._config, self._datasets = config, datasets

    def resolved(self) -> tuple[GeneralisationConfig, DatasetConfig]:
        checked = generalisation_config(self._config, self._datasets)
        return checked, self._datasets[checked.dataset]

    def clean_table(self, wildcards) -> str:
        return f"results/{self.resolved()[0].dataset}/clean.parquet"

    def dataset_name(self, wildcards) -> str:
        return self.resolved()[0].dataset

    def dataset_label(self, wildcards) -> str:
        return self.resolved()[1].label

    def hardware_name(self, wildcards) -> str:
        return self.resolved()[1].hardware.name

    def train_models(self, wildcards) -> list[str]:
        return list(self.resolved()[0].train_models)

    def target_models(self, wildcards) -> list[str]:
        return list(self.resolved()[0].target_models)

    def report_category(self) -> str:
        """``Generalisation (simulated)`` or ``(real)``, read from the raw config (never fails)."""
        name = self._config.get(SECTION, {}).get("dataset")
        kind = self._config.get("datasets", {}).get(name, {}).get("kind", "unknown")
        return f"Generalisation ({kind})"
