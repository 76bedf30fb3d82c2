"""CI checks of the headline MAPE numbers against values this pipeline produced before.

`config/headlines.yaml` records, per dataset, setting and predictor, the MAPE (%)
of throughput and E2E measured once and committed, with a tolerance in
percentage points, and per setting the baselines SLIM must beat (on both metrics).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import yaml

from slim.errors import ConfigError
from slim.paper.heldout import SLIM

_METRICS = {"throughput": "mape_throughput_pct", "e2e": "mape_e2e_pct"}


def load_expected(path: str | Path, dataset: str) -> dict:
    expected = yaml.safe_load(Path(path).read_text()) or {}
    if dataset not in expected:
        raise ConfigError(f"{path}: no headline entry for dataset '{dataset}'; run "
                          f"`snakemake results/{dataset}/headlines_measured.yaml` and record it")
    return expected[dataset]


def measured_headlines(mapes: pd.DataFrame, tolerance_pct_points: float) -> dict:
    """The current MAPEs in the layout of config/headlines.yaml (to record a new baseline)."""
    values: dict = {}
    for row in mapes.itertuples(index=False):
        values.setdefault(row.setting, {})[row.predictor] = {
            name: round(float(getattr(row, column)), 2) for name, column in _METRICS.items()}
    return {"tolerance_pct_points": tolerance_pct_points, "mape_pct": values}


def check_headlines(mapes: pd.DataFrame, expected: dict) -> list[str]:
    """Every deviation from the recorded headlines, as readable lines; empty when all hold."""
    problems = []
    tolerance = float(expected["tolerance_pct_points"])
    for setting, predictors in expected["mape_pct"].items():
        for predictor, metrics in predictors.items():
            match = mapes[(mapes["setting"] == setting) & (mapes["predictor"] == predictor)]
            if match.empty:
                problems.append(f"{setting}/{predictor}: recorded but not computed")
                continue
            for name, recorded in metrics.items():
                current = float(match[_METRICS[name]].iloc[0])
                if abs(current - recorded) > tolerance:
                    problems.append(f"{setting}/{predictor} {name} MAPE {current:.2f}% drifted from the recorded "
                                    f"{recorded:.2f}% by more than {tolerance} points")
    for setting, baselines in expected.get("slim_must_beat", {}).items():
        rows = mapes[mapes["setting"] == setting].set_index("predictor")
        for baseline in baselines:
            for name, column in _METRICS.items():
                if not rows.loc[SLIM, column] < rows.loc[baseline, column]:
                    problems.append(f"{setting}: SLIM {name} MAPE {rows.loc[SLIM, column]:.2f}% does not beat "
                                    f"{baseline} ({rows.loc[baseline, column]:.2f}%)")
    return problems
