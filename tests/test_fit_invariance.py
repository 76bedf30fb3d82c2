"""Every MAPE of Table III is a function of the data alone (no BLAS kernel, noise or start order).

For the real public traces and the simulated grid, the full held-out evaluation (SLIM, its
ablations, LLMVisor-Agg, IMAI OOD-LR, on the real traces SIM and SLIM at SIM's predicted
batch, and the ranges over training-equivalent fits) must move by less than 0.05 MAPE
points under
(a) another OpenBLAS kernel (`OPENBLAS_CORETYPE`, in a subprocess; only kernels this CPU runs),
(b) each measured throughput multiplied by ``1 + 1e-9 u`` (u seeded uniform in [-1, 1] per run),
(c) the SLIM start grid in reverse order, and SIM's start grid in reverse order.
The prediction bands of Figs. 9 and 10 (SLIM's and IMAI OOD-LR's, columns `PredictionMetric.band_*`)
must move by less than `BAND_TOLERANCE` (relative) under the same three.
The simulator's schedules (slim.sim.schedules) are simulated once and passed to every
evaluation: they hold no fitted quantity.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import slim.model.fit as fit_module
import slim.sim.schedule_fit as schedule_fit
from slim import columns as col
from slim.paper.heldout import evaluate_setting, mape_table
from slim.paper.splits import load_settings
from slim.sim.constants import load_sim_constants
from slim.sim.grid import simulate_grid_to_dir
from slim.sim.schedules import ScheduleTable
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware
from slim.traces.clean import clean_runs
from slim.traces.ingest import ingest_traces

REPO = Path(__file__).resolve().parents[1]
TOLERANCE_PCT_POINTS = 0.05
BAND_TOLERANCE = 1e-3
"""Largest relative change of a band bound: 0.1%, far below the bands' own widths (several %)."""
BAND_KEYS = [col.SETTING, col.PREDICTOR, col.ROLE, col.RUN_ID]
BAND_COLUMNS = tuple(name for metric in col.PREDICTION_METRICS for name in (metric.band_low, metric.band_high))
MAPE_VALUE_COLUMNS = tuple(name for metric in col.MAPE_METRICS
                           for name in (metric.mape, metric.mape_low, metric.mape_high))
SETTINGS_FILES = {"h100-public": REPO / "config/settings/h100-public.yaml",
                  "simulated": REPO / "config/settings/paper.yaml"}

EVALUATE_SCRIPT = """
import json, sys
import pandas as pd
from threadpoolctl import threadpool_info
from slim.paper.heldout import evaluate_setting, mape_table
from slim.paper.splits import load_settings
from slim.sim.constants import load_sim_constants
from slim.sim.schedules import read_schedules
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware
catalog, hardware = load_architectures(), load_hardware()["h100-64gb"]
constants = load_sim_constants("slim/sim/h100-64gb-sim.yaml")
for clean_path, settings_path, schedules_path, out_path in zip(*[iter(sys.argv[1:])] * 4):
    schedules = read_schedules(schedules_path, constants) if schedules_path != "-" else None
    evaluations = [evaluate_setting(pd.read_parquet(clean_path), s, catalog, hardware, schedules)
                   for s in load_settings(settings_path) if s.applicable]
    predictions = pd.concat([e.predictions for e in evaluations], ignore_index=True)
    table = mape_table(predictions, pd.concat([e.identifiability for e in evaluations], ignore_index=True))
    table.to_csv(out_path, index=False)
    band_columns = [c for c in predictions.columns if "_band_" in c]
    predictions[["setting", "predictor", "role", "run_id", *band_columns]].to_csv(out_path + ".bands.csv", index=False)
print(json.dumps(sorted({info.get("architecture", "?") for info in threadpool_info()
                         if info.get("internal_api") == "openblas"})))
"""


def evaluate_with_bands(clean: pd.DataFrame, dataset: str,
                        schedules: ScheduleTable | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table III (with the identifiability columns) and every prediction's band."""
    catalog, hardware = load_architectures(), load_hardware()["h100-64gb"]
    evaluations = [evaluate_setting(clean, setting, catalog, hardware, schedules)
                   for setting in load_settings(SETTINGS_FILES[dataset]) if setting.applicable]
    predictions = pd.concat([e.predictions for e in evaluations], ignore_index=True)
    return (mape_table(predictions, pd.concat([e.identifiability for e in evaluations], ignore_index=True)),
            predictions[[*BAND_KEYS, *BAND_COLUMNS]])


def evaluate(clean: pd.DataFrame, dataset: str, schedules: ScheduleTable | None) -> pd.DataFrame:
    return evaluate_with_bands(clean, dataset, schedules)[0]


def _largest_difference(first: pd.DataFrame, second: pd.DataFrame, keys: list[str], columns, relative: bool
                        ) -> tuple[pd.DataFrame, float]:
    """The two tables merged row by row on `keys`, and the largest (relative or absolute)
    difference of any of `columns` between them; a value that is NaN must be NaN in both."""
    merged = first.merge(second, on=keys, suffixes=("_a", "_b"), validate="one_to_one")
    assert len(merged) == len(first) == len(second)
    changes = []
    for name in columns:
        a, b = merged[f"{name}_a"].to_numpy(float), merged[f"{name}_b"].to_numpy(float)
        assert (np.isnan(a) == np.isnan(b)).all(), name
        finite = ~np.isnan(a)
        difference = a[finite] / b[finite] - 1.0 if relative else a[finite] - b[finite]
        changes.append(float(np.max(np.abs(difference), initial=0.0)))
    return merged, max(changes)


def largest_band_change(first: pd.DataFrame, second: pd.DataFrame) -> float:
    """Largest relative difference of any band bound between two band tables; a bound that is NaN
    (no band, or an undetermined IMAI prediction) must be NaN in both."""
    merged, change = _largest_difference(first, second, BAND_KEYS, BAND_COLUMNS, relative=True)
    assert np.isfinite(merged[[f"{name}_a" for name in BAND_COLUMNS]].to_numpy(float)).any()
    return change


def largest_change(first: pd.DataFrame, second: pd.DataFrame) -> float:
    """Largest absolute difference of any MAPE (or range bound) between two tables; a
    bound that is NaN (undetermined baseline) must be NaN in both."""
    merged, change = _largest_difference(first, second, [col.SETTING, col.PREDICTOR], MAPE_VALUE_COLUMNS,
                                         relative=False)
    assert (merged[f"{col.VALIDATION_DETERMINED}_a"] == merged[f"{col.VALIDATION_DETERMINED}_b"]).all()
    return change


@pytest.fixture(scope="module")
def clean_tables(public_clean, tmp_path_factory) -> dict[str, pd.DataFrame]:
    """The cleaned tables of the real traces and of the full simulated grid."""
    catalog = load_architectures()
    _, real = public_clean
    grid = yaml.safe_load((REPO / "config/sim_grid.yaml").read_text())
    sim_dir = tmp_path_factory.mktemp("simulated")
    constants = load_sim_constants(REPO / "slim/sim/h100-64gb-sim.yaml")
    simulate_grid_to_dir(grid, catalog, load_hardware(), constants, sim_dir, workers=min(2, os.cpu_count() or 1))
    simulated, _ = clean_runs(ingest_traces(sim_dir, "simulated", catalog))
    return {"h100-public": real, "simulated": simulated}


@pytest.fixture(scope="module")
def schedules(public_schedules) -> dict[str, ScheduleTable | None]:
    """SIM runs on the real traces only (on the simulated grid it would be circular)."""
    return {"h100-public": public_schedules, "simulated": None}


@pytest.fixture(scope="module")
def reference_results(clean_tables, schedules) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    return {dataset: evaluate_with_bands(clean, dataset, schedules[dataset]) for dataset, clean in clean_tables.items()}


@pytest.fixture(scope="module")
def reference_tables(reference_results) -> dict[str, pd.DataFrame]:
    return {dataset: tables for dataset, (tables, _) in reference_results.items()}


@pytest.fixture(scope="module")
def reference_bands(reference_results) -> dict[str, pd.DataFrame]:
    return {dataset: bands for dataset, (_, bands) in reference_results.items()}


def supported_kernels() -> list[str]:
    """OpenBLAS kernels this CPU can run (x86-64 only; elsewhere none)."""
    try:
        flags = set(next(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                         if line.startswith("flags")).split(":", 1)[1].split())
    except (OSError, StopIteration):
        return []
    kernels = []
    if "sse3" in flags or "pni" in flags:
        kernels.append("Prescott")
    if "avx" in flags:
        kernels.append("Sandybridge")
    if {"avx2", "fma"} <= flags:
        kernels.append("Haswell")
    if {"avx512f", "avx512bw", "avx512vl"} <= flags:
        kernels.append("SkylakeX")
    return kernels


def test_table3_is_the_same_under_every_blas_kernel(clean_tables, schedules, reference_tables, reference_bands,
                                                    tmp_path):
    kernels = supported_kernels()
    if not kernels:
        pytest.skip("no x86-64 OpenBLAS kernels to compare on this CPU")
    arguments = []
    for dataset, clean in clean_tables.items():
        clean.to_parquet(tmp_path / f"{dataset}.parquet")
        schedules_path = "-"
        if schedules[dataset] is not None:
            schedules_path = str(tmp_path / f"{dataset}_schedules.parquet")
            schedules[dataset].to_frame().to_parquet(schedules_path)
        arguments += [str(tmp_path / f"{dataset}.parquet"), str(SETTINGS_FILES[dataset]), schedules_path,
                      f"{dataset}.csv"]
    script = tmp_path / "evaluate.py"
    script.write_text(EVALUATE_SCRIPT)
    default_kernel = None
    for kernel in [None, *kernels]:   # None: the machine's default kernel
        if kernel is not None and [kernel] == default_kernel:
            continue                  # already run as the default
        env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_CORETYPE"}
        if kernel is not None:
            env["OPENBLAS_CORETYPE"] = kernel
        run_dir = tmp_path / (kernel or "default")
        run_dir.mkdir()
        result = subprocess.run([sys.executable, str(script), *[str(run_dir / a) if a.endswith(".csv") else a
                                                                 for a in arguments]],
                                cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        used = json.loads(result.stdout.strip().splitlines()[-1])
        if kernel is None:
            default_kernel = used
        else:   # OpenBLAS names some kernels otherwise (Prescott: "Katmai"), so compare with the default
            assert used != default_kernel, f"OPENBLAS_CORETYPE={kernel} had no effect: {used}"
        for dataset in clean_tables:
            table = pd.read_csv(run_dir / f"{dataset}.csv")
            change = largest_change(reference_tables[dataset], table)
            assert change < TOLERANCE_PCT_POINTS, f"{dataset} under {kernel or 'default'} ({used}): {change}"
            bands = pd.read_csv(run_dir / f"{dataset}.csv.bands.csv")
            band_change = largest_band_change(reference_bands[dataset], bands)
            assert band_change < BAND_TOLERANCE, f"bands of {dataset} under {kernel or 'default'}: {band_change}"


@pytest.mark.parametrize("dataset", ["h100-public", "simulated"])
def test_table3_is_the_same_when_throughputs_move_by_1e_9(dataset, clean_tables, schedules, reference_tables,
                                                          reference_bands):
    clean = clean_tables[dataset].copy()
    factor = 1.0 + 1e-9 * np.random.default_rng(20261201).uniform(-1.0, 1.0, len(clean))
    for name in (col.TOTAL_TOKEN_THROUGHPUT, col.REQUEST_THROUGHPUT, col.OUTPUT_TOKEN_THROUGHPUT):
        clean[name] = clean[name] * factor
    clean[col.E2E_LATENCY_S] = clean[col.MEAN_BATCH_SIZE] / clean[col.REQUEST_THROUGHPUT]
    table, bands = evaluate_with_bands(clean, dataset, schedules[dataset])
    assert largest_change(reference_tables[dataset], table) < TOLERANCE_PCT_POINTS
    assert largest_band_change(reference_bands[dataset], bands) < BAND_TOLERANCE


@pytest.mark.parametrize("dataset", ["h100-public", "simulated"])
def test_table3_is_the_same_with_the_start_grids_reversed(dataset, clean_tables, schedules, reference_tables,
                                                          reference_bands, monkeypatch):
    grid = fit_module.start_grid
    monkeypatch.setattr(fit_module, "start_grid", lambda specs: list(reversed(grid(specs))))
    assert fit_module.start_grid([fit_module.FIT_PARAMETERS[0]]) == [(0.75,), (0.25,)]
    monkeypatch.setattr(schedule_fit, "STARTS", tuple(reversed(schedule_fit.STARTS)))
    table, bands = evaluate_with_bands(clean_tables[dataset], dataset, schedules[dataset])
    assert largest_change(reference_tables[dataset], table) < TOLERANCE_PCT_POINTS
    assert largest_band_change(reference_bands[dataset], bands) < BAND_TOLERANCE


def test_the_real_model_transfer_reports_what_the_data_cannot_decide(reference_tables):
    """Two OPT models at one output length leave SLIM's overhead constants open: Table III
    must show a range for it, and mark both baselines' Llama-2 predictions as undetermined."""
    table = reference_tables["h100-public"].set_index([col.SETTING, col.PREDICTOR])
    slim_row = table.loc[("model", "SLIM")]
    assert not slim_row[col.VALIDATION_DETERMINED]
    assert slim_row[col.N_EQUIVALENT_SOLUTIONS] > 0 and "unidentified" in slim_row[col.UNIDENTIFIED]
    low, high = slim_row[col.MAPE_THROUGHPUT_LOW_PCT], slim_row[col.MAPE_THROUGHPUT_HIGH_PCT]
    assert low <= slim_row[col.MAPE_THROUGHPUT_PCT] <= high and high - low > 5.0
    for baseline in ("LLMVisor-Agg", "IMAI OOD-LR"):
        assert not table.loc[("model", baseline)][col.VALIDATION_DETERMINED]
        assert np.isnan(table.loc[("model", baseline)][col.MAPE_THROUGHPUT_LOW_PCT])
    same_curve = table.loc[("same_curve", "SLIM")]
    assert same_curve[col.VALIDATION_DETERMINED] and same_curve[col.UNIDENTIFIED] == "identified"
    assert same_curve[col.MAPE_THROUGHPUT_LOW_PCT] == same_curve[col.MAPE_THROUGHPUT_HIGH_PCT]
