"""What parsing the workflow does besides reading it: `prepare_run` is the one place, called once from
workflow/rules/common.smk, where it touches anything outside the config (the process environment,
downloads, stderr, the trace manifests)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slim.pipeline.config import ResolvedDatasets, resolve_datasets, with_catalog_defaults
from slim.pipeline.manifest import update_trace_manifest
from slim.pipeline.planning import Plan
from slim.pipeline.trace_locations import trace_cache
from slim.traces.fetch import fetch_source, trace_source

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def prepare_run(config: dict[str, Any]) -> Plan:
    """The plan of the run the workflow is parsed for. Every effect of parsing the workflow happens
    here, once, before any job is planned, in this order:

    1. OPENBLAS_NUM_THREADS, OMP_NUM_THREADS and MKL_NUM_THREADS are set to 1 in this process's
       environment where unset (an exported value wins): Snakemake already runs up to --cores jobs at
       once, and OpenBLAS's own threads, which spin while idle, would oversubscribe the CPUs.
    2. `config` gains the packaged catalogs where it names none (models_file, hardware_file,
       simulator.constants; `with_catalog_defaults`), so rules can name them as inputs.
    3. With fetch.auto, every trace source that a real dataset of run_datasets lacks is downloaded
       into fetch.cache (one stderr line each), and the datasets are resolved again.
    4. The line of every real dataset skipped for want of traces is printed to stderr.
    5. ``config["skipped_datasets"]`` maps each skipped dataset to its line (derived, not
       configuration: the report's front page, workflow/report/workflow.rst, reads it).
    6. results/<dataset>/trace_manifest.tsv of every real dataset is rewritten where the list of its
       trace files (path, size, mode, mtime) changed, so editing or adding a trace file reruns ingest.
    """
    for variable in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(variable, "1")
    with_catalog_defaults(config)
    resolved = resolve_datasets(config)
    if config["fetch"].get("auto"):
        _fetch_absent_sources(config, resolved)
        resolved = resolve_datasets(config)
    for absent in resolved.absent.values():
        print(absent.message, file=sys.stderr)
    config["skipped_datasets"] = {name: dataset.message for name, dataset in resolved.absent.items()}
    plan = Plan.build(config, resolved)
    for name in plan.real_datasets:
        update_trace_manifest(plan.datasets[name].trace_dir, plan.trace_manifest(name))
    return plan


def _fetch_absent_sources(config: Mapping[str, Any], resolved: ResolvedDatasets) -> None:
    """Download every trace source a skipped dataset names into the fetched cache (fetch.auto)."""
    cache = trace_cache(config).as_posix()
    for source in sorted({absent.source for absent in resolved.absent.values() if absent.source}):
        print(f"fetch.auto: fetching trace source '{source}' into {cache}", file=sys.stderr)
        fetch_source(trace_source(source, config["trace_sources"][source]), Path(cache) / source,
                     timeout_s=config["fetch"]["timeout_s"], attempts=config["fetch"]["attempts"])
