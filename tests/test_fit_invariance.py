"""Every number of Table III is a function of the data alone (no BLAS kernel, noise or start order).

For the real public traces and the simulated grid, the full held-out evaluation (SLIM, its
ablations, LLMVisor-Agg, IMAI OOD-LR, on the real traces SIM and SLIM at SIM's predicted
batch, and the ranges over training-equivalent fits), with the bootstrap intervals of every MAPE
(table3.csv), of every paired difference (mape_comparisons.csv) and of the average-reduction
headline (mape_reduction.csv), must move by less than 0.05 points under
(a) another OpenBLAS kernel (`OPENBLAS_CORETYPE`, in a subprocess; only kernels this CPU runs),
(b) each measured throughput multiplied by ``1 + 1e-9 u`` (u seeded uniform in [-1, 1] per run),
(c) the SLIM start grid in reverse order, and SIM's start grid in reverse order;
and the words (interval notes, resampling units, verdicts) must not change at all.
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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import slim.model.fit as fit_module
import slim.sim.schedule_fit as schedule_fit
from slim import columns as col
from slim.paper.heldout import applicable_setting_names, evaluate_setting, mape_table
from slim.paper.mape_intervals import average_mape_reduction_interval, curve_labels, mape_intervals, with_intervals
from slim.paper.splits import load_settings
from slim.sim.constants import load_sim_constants
from slim.sim.grid import simulate_grid_to_dir
from slim.sim.schedules import ScheduleTable
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware
from slim.traces.clean import clean_runs
from slim.traces.ingest import ingest_traces

# Every setting of two datasets evaluated several times over, and one BLAS kernel per subprocess.
pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
TOLERANCE_PCT_POINTS = 0.05
BAND_TOLERANCE = 1e-3
"""Largest relative change of a band bound: 0.1%, far below the bands' own widths (several %)."""
BAND_KEYS = [col.SETTING, col.PREDICTOR, col.ROLE, col.RUN_ID]
BAND_COLUMNS = tuple(name for metric in col.PREDICTION_METRICS for name in (metric.band_low, metric.band_high))
MAPE_VALUE_COLUMNS = tuple(name for metric in col.MAPE_METRICS
                           for name in (metric.mape, metric.mape_low, metric.mape_high,
                                        metric.mape_ci_low, metric.mape_ci_high))
"""Every number of table3.csv in percentage points: MAPEs, their ranges and their intervals."""
TABLE3_KEYS = [col.SETTING, col.PREDICTOR]
TABLE3_EXACT_COLUMNS = (col.N_VALIDATION, col.CI_RESAMPLED, col.CI_N_UNITS, col.CI_NOTE, col.VALIDATION_DETERMINED)
COMPARISON_KEYS = [col.SETTING, col.PREDICTOR, col.OTHER_PREDICTOR, col.METRIC]
COMPARISON_VALUE_COLUMNS = (col.MAPE_DIFFERENCE_PCT, col.MAPE_DIFFERENCE_CI_LOW, col.MAPE_DIFFERENCE_CI_HIGH)
REDUCTION_VALUE_COLUMNS = (col.MAPE_REDUCTION_PCT, col.MAPE_REDUCTION_CI_LOW, col.MAPE_REDUCTION_CI_HIGH)
SETTINGS_FILES = {"h100-public": REPO / "config/settings/h100-public.yaml",
                  "simulated": REPO / "config/settings/paper.yaml"}

EVALUATE_SCRIPT = f"""
import json, sys
import pandas as pd
from threadpoolctl import threadpool_info
sys.path.insert(0, {str(REPO / "tests")!r})
from test_fit_invariance import evaluate_with_bands   # the very evaluation the in-process tests run
from slim.sim.constants import load_sim_constants
from slim.sim.schedules import read_schedules

constants = load_sim_constants("slim/sim/h100-64gb-sim.yaml")
for dataset, clean_path, schedules_path, out_dir in zip(*[iter(sys.argv[1:])] * 4):
    schedules = read_schedules(schedules_path, constants) if schedules_path != "-" else None
    evaluate_with_bands(pd.read_parquet(clean_path), dataset, schedules).write(out_dir)
print(json.dumps(sorted({{info.get("architecture", "?") for info in threadpool_info()
                         if info.get("internal_api") == "openblas"}})))
"""


@dataclass(frozen=True)
class Evaluation:
    """What the tables rule writes for one dataset (table3.csv with its intervals and the
    identifiability columns, mape_comparisons.csv, mape_reduction.csv), and every prediction's band."""

    table: pd.DataFrame
    comparisons: pd.DataFrame
    reduction: pd.DataFrame
    bands: pd.DataFrame

    FRAMES = ("table", "comparisons", "reduction", "bands")

    def write(self, folder: str | Path) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        for name in self.FRAMES:
            getattr(self, name).to_parquet(Path(folder) / f"{name}.parquet")

    @classmethod
    def read(cls, folder: str | Path) -> Evaluation:
        return cls(*(pd.read_parquet(Path(folder) / f"{name}.parquet") for name in cls.FRAMES))


def evaluate_with_bands(clean: pd.DataFrame, dataset: str, schedules: ScheduleTable | None) -> Evaluation:
    """Table III with its intervals (as workflow/scripts/evaluate_settings.py builds it), the paired
    comparisons, the headline with its interval, and every prediction's band."""
    catalog, hardware = load_architectures(), load_hardware()["h100-64gb"]
    settings = load_settings(SETTINGS_FILES[dataset])
    evaluations = [evaluate_setting(clean, setting, catalog, hardware, schedules)
                   for setting in settings if setting.applicable]
    predictions = pd.concat([e.predictions for e in evaluations], ignore_index=True)
    curves = curve_labels(clean)
    intervals, comparisons = mape_intervals(predictions, curves)
    table = with_intervals(mape_table(predictions, pd.concat([e.identifiability for e in evaluations],
                                                             ignore_index=True)), intervals)
    reduction = average_mape_reduction_interval(predictions, curves, applicable_setting_names(settings))
    return Evaluation(table, comparisons, reduction.to_frame(), predictions[[*BAND_KEYS, *BAND_COLUMNS]])


def _largest_difference(first: pd.DataFrame, second: pd.DataFrame, keys: list[str], columns, relative: bool,
                        exact: tuple[str, ...] = ()) -> tuple[pd.DataFrame, float]:
    """The two tables merged row by row on `keys` (or side by side, without keys), and the
    largest (relative or absolute) difference of any of `columns` between them; a value that
    is NaN must be NaN in both, and the `exact` columns must be equal."""
    if keys:
        merged = first.merge(second, on=keys, suffixes=("_a", "_b"), validate="one_to_one")
    else:
        merged = first.add_suffix("_a").join(second.add_suffix("_b"))
    assert len(merged) == len(first) == len(second)
    for name in exact:
        a, b = (merged[f"{name}_{side}"].fillna("").astype(str) for side in "ab")
        assert (a == b).all(), f"{name}: {list(zip(a[a != b], b[a != b]))[:3]}"
    changes = []
    for name in columns:
        a, b = merged[f"{name}_a"].to_numpy(float), merged[f"{name}_b"].to_numpy(float)
        assert (np.isnan(a) == np.isnan(b)).all(), name
        finite = ~np.isnan(a)
        difference = a[finite] / b[finite] - 1.0 if relative else a[finite] - b[finite]
        changes.append(float(np.max(np.abs(difference), initial=0.0)))
    return merged, max(changes)


def largest_band_change(first: Evaluation, second: Evaluation) -> float:
    """Largest relative difference of any band bound between two evaluations; a bound that is NaN
    (no band, or an undetermined IMAI prediction) must be NaN in both."""
    merged, change = _largest_difference(first.bands, second.bands, BAND_KEYS, BAND_COLUMNS, relative=True)
    assert np.isfinite(merged[[f"{name}_a" for name in BAND_COLUMNS]].to_numpy(float)).any()
    return change


def largest_change(first: Evaluation, second: Evaluation) -> float:
    """Largest absolute difference (percentage points) of any MAPE, range bound or interval bound
    of table3.csv, paired difference or interval bound of mape_comparisons.csv, or of the headline
    and its interval, between two evaluations; a number that is NaN (undetermined baseline, no
    interval) must be NaN in both, and the words (notes, verdicts) must be the same."""
    merged, table_change = _largest_difference(first.table, second.table, TABLE3_KEYS, MAPE_VALUE_COLUMNS,
                                               relative=False, exact=TABLE3_EXACT_COLUMNS)
    assert np.isfinite(merged[f"{col.MAPE_THROUGHPUT_CI_LOW_PCT}_a"].to_numpy(float)).any()
    _, comparison_change = _largest_difference(first.comparisons, second.comparisons, COMPARISON_KEYS,
                                               COMPARISON_VALUE_COLUMNS, relative=False,
                                               exact=(col.VERDICT, col.CI_RESAMPLED, col.CI_N_UNITS))
    _, reduction_change = _largest_difference(first.reduction, second.reduction, [], REDUCTION_VALUE_COLUMNS,
                                              relative=False, exact=(col.N_SETTINGS, col.CI_NOTE))
    return max(table_change, comparison_change, reduction_change)


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
def reference_results(clean_tables, schedules) -> dict[str, Evaluation]:
    return {dataset: evaluate_with_bands(clean, dataset, schedules[dataset]) for dataset, clean in clean_tables.items()}


@pytest.fixture(scope="module")
def reference_tables(reference_results) -> dict[str, pd.DataFrame]:
    return {dataset: result.table for dataset, result in reference_results.items()}


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


def test_table3_is_the_same_under_every_blas_kernel(clean_tables, schedules, reference_results, tmp_path):
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
        arguments += [dataset, str(tmp_path / f"{dataset}.parquet"), schedules_path, f"{dataset}.out"]
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
        result = subprocess.run([sys.executable, str(script), *[str(run_dir / a) if a.endswith(".out") else a
                                                                 for a in arguments]],
                                cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        used = json.loads(result.stdout.strip().splitlines()[-1])
        if kernel is None:
            default_kernel = used
        else:   # OpenBLAS names some kernels otherwise (Prescott: "Katmai"), so compare with the default
            assert used != default_kernel, f"OPENBLAS_CORETYPE={kernel} had no effect: {used}"
        for dataset in clean_tables:
            other = Evaluation.read(run_dir / f"{dataset}.out")
            change = largest_change(reference_results[dataset], other)
            assert change < TOLERANCE_PCT_POINTS, f"{dataset} under {kernel or 'default'} ({used}): {change}"
            band_change = largest_band_change(reference_results[dataset], other)
            assert band_change < BAND_TOLERANCE, f"bands of {dataset} under {kernel or 'default'}: {band_change}"


@pytest.mark.parametrize("dataset", ["h100-public", "simulated"])
def test_table3_is_the_same_when_throughputs_move_by_1e_9(dataset, clean_tables, schedules, reference_results):
    clean = clean_tables[dataset].copy()
    factor = 1.0 + 1e-9 * np.random.default_rng(20261201).uniform(-1.0, 1.0, len(clean))
    for name in (col.TOTAL_TOKEN_THROUGHPUT, col.REQUEST_THROUGHPUT, col.OUTPUT_TOKEN_THROUGHPUT):
        clean[name] = clean[name] * factor
    clean[col.E2E_LATENCY_S] = clean[col.MEAN_BATCH_SIZE] / clean[col.REQUEST_THROUGHPUT]
    perturbed = evaluate_with_bands(clean, dataset, schedules[dataset])
    assert largest_change(reference_results[dataset], perturbed) < TOLERANCE_PCT_POINTS
    assert largest_band_change(reference_results[dataset], perturbed) < BAND_TOLERANCE


@pytest.mark.parametrize("dataset", ["h100-public", "simulated"])
def test_table3_is_the_same_with_the_start_grids_reversed(dataset, clean_tables, schedules, reference_results,
                                                          monkeypatch):
    grid = fit_module.start_grid
    monkeypatch.setattr(fit_module, "start_grid", lambda specs: list(reversed(grid(specs))))
    assert fit_module.start_grid([fit_module.FIT_PARAMETERS[0]]) == [(0.75,), (0.25,)]
    monkeypatch.setattr(schedule_fit, "STARTS", tuple(reversed(schedule_fit.STARTS)))
    reversed_starts = evaluate_with_bands(clean_tables[dataset], dataset, schedules[dataset])
    assert largest_change(reference_results[dataset], reversed_starts) < TOLERANCE_PCT_POINTS
    assert largest_band_change(reference_results[dataset], reversed_starts) < BAND_TOLERANCE


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
