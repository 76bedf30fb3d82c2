# Helpers shared by the rules: resolved datasets, input functions, target lists.
from pathlib import Path

from slim.config import check_config

DATASETS = check_config(config)
DEFAULT_DATASET = config["default_dataset"]


wildcard_constraints:
    dataset="|".join(DATASETS),


def trace_dir(wildcards):
    """The dataset's trace folder (read in place for real data)."""
    return str(DATASETS[wildcards.dataset].trace_dir)


def dataset_targets(dataset):
    """Every artefact one dataset produces."""
    return [
        f"results/{dataset}/clean.parquet",
        f"results/{dataset}/cleaning_report.md",
    ]


def all_targets():
    return [target for dataset in DATASETS for target in dataset_targets(dataset)]
