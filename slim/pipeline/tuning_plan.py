"""The tuning replay's target lists (rules in workflow/rules/tuning.smk), a part of
`slim.pipeline.planning.Plan`: every dataset with an advisor config is replayed."""

from __future__ import annotations

from typing import Any, Mapping

from slim.pipeline.config import DatasetConfig


class TuningTargets:
    """The tuning replay's datasets and files, from the plan's `config`, `datasets` and `bca_datasets`."""

    config: Mapping[str, Any]
    datasets: Mapping[str, DatasetConfig]
    bca_datasets: list[str]

    def tuning_files(self, pattern: str) -> list[str]:
        """`pattern` (with {name}) for each dataset the tuning replay covers."""
        return [pattern.format(name=name) for name in self.bca_datasets]

    def tuning_dataset_labels(self) -> list[str]:
        return [self.datasets[name].label for name in self.bca_datasets]

    def tuning_real_datasets(self) -> list[str]:
        return [name for name in self.bca_datasets if not self.datasets[name].is_simulated]

    def tuning_residual_files(self, excluding: str | None = None) -> list[str]:
        """Every real replayed dataset's prior residuals (the kernels' evidence), but `excluding`'s:
        a dataset's replay chooses its kernel on the others only."""
        return [f"results/{name}/tuning_residuals.parquet" for name in self.tuning_real_datasets() if name != excluding]

    def tuning_real_dataset_labels(self) -> list[str]:
        """The replayed datasets the tuning goals are measured on: the real ones."""
        return [self.datasets[name].label for name in self.bca_datasets if not self.datasets[name].is_simulated]

    def tuning_settings_files(self, dataset: str) -> list[str]:
        """The dataset's held-out settings (the paper plan's training sets), or nothing."""
        settings_file = self.datasets[dataset].settings_file
        return [str(settings_file)] if settings_file is not None else []

    def tuning_sim_schedules(self, dataset: str) -> list[str]:
        """SIM's schedules for the replay's SIM prior, where the config has the simulator."""
        return [f"results/{dataset}/sim_schedules.parquet"] if "simulator" in self.config else []

    def tuning_sim_constants(self) -> list[str]:
        """SIM's constants for the replay's SIM prior, where the config has the simulator."""
        return [self.config["simulator"]["constants"]] if "simulator" in self.config else []
