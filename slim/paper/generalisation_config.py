"""The `generalisation` section of config.yaml (Fig. 11), as data: no fitting, no pandas, so the
workflow can check it when it is parsed (`slim.pipeline.config.generalisation_config`)."""

from __future__ import annotations

from dataclasses import dataclass

SECTION = "generalisation"


@dataclass(frozen=True)
class GeneralisationConfig:
    """The `generalisation` section of config.yaml (checked by `slim.pipeline.config.generalisation_config`)."""

    dataset: str
    train_models: tuple[str, ...]
    target_models: tuple[str, ...]
