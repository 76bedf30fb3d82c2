"""The headline MAPE numbers: the record in `config/headlines.yaml`, the check against it, and re-recording.

`config/headlines.yaml` records, per dataset, setting and predictor, the MAPE (%) of
throughput and E2E measured once and committed, with a tolerance in percentage points,
per setting the predictors SLIM must beat (on both metrics; `slim_must_beat`) and, on real
data, those SIM must beat (`sim_must_beat`), and a note. The pipeline
writes the check's verdict as an artefact (`results/<dataset>/headline_check.txt`) and
never stops on drift; the test suite fails on drift instead. `record_headlines` rewrites
the record from the current `table3.csv` files (``snakemake --cores 2 record_headlines``),
keeping each dataset's tolerance, must-beat lists and note.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import pandas as pd
import yaml

from slim import columns as col
from slim.errors import ConfigError
from slim.paper.heldout import SIM, SLIM
from slim.yaml_files import SAFE_LOADER

DEFAULT_TOLERANCE_PCT_POINTS = 0.5
MUST_BEAT_KEYS = {"slim_must_beat": SLIM, "sim_must_beat": SIM}
"""Record keys listing, per setting, the predictors that the keyed predictor must beat."""
KEPT_KEYS = ("note", *MUST_BEAT_KEYS)

RECORD_HEADER = """\
# Headline MAPEs (%) this pipeline produced, recorded and committed; the rule check_headlines
# writes results/<dataset>/headline_check.txt from them, and tests/test_evaluate.py fails
# when a value drifts by more than the tolerance, or when SLIM (or SIM) stops beating the
# listed predictors. These are our own results, never the paper's numbers. The values are the fits'
# (identifiability rule of slim.model.fit); the ranges over equally good fits are in
# results/<dataset>/table3.csv. Re-record after an intended change, from the current tables:
#     snakemake --cores 2 record_headlines
# (tolerance_pct_points, slim_must_beat, sim_must_beat and note of each dataset are kept).
"""


def load_record(path: str | Path) -> dict:
    """The whole record (every dataset); an empty mapping if the file is empty."""
    path = Path(path)
    try:
        record = yaml.load(path.read_text(), Loader=SAFE_LOADER) or {}
    except FileNotFoundError as error:
        raise ConfigError(f"headline record not found: {path}") from error
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(record, dict):
        raise ConfigError(f"{path}: expected a mapping of dataset name -> headlines")
    return record


def load_expected(path: str | Path, dataset: str) -> dict:
    record = load_record(path)
    if dataset not in record:
        raise ConfigError(f"{path}: no headline entry for dataset '{dataset}'; record one with "
                          "`snakemake --cores 2 record_headlines`")
    return record[dataset]


def measured_headlines(mapes: pd.DataFrame, tolerance_pct_points: float) -> dict:
    """The current MAPEs in the layout of one dataset's entry of config/headlines.yaml."""
    values: dict = {}
    for _, row in mapes.iterrows():
        values.setdefault(str(row[col.SETTING]), {})[str(row[col.PREDICTOR])] = {
            metric.name: round(float(row[metric.mape]), 2) for metric in col.PREDICTION_METRICS}
    return {"tolerance_pct_points": tolerance_pct_points, "mape_pct": values}


def check_headlines(mapes: pd.DataFrame, expected: dict, comparisons: pd.DataFrame | None = None) -> list[str]:
    """Every deviation from the recorded headlines, as readable lines; empty when all hold.

    With `comparisons` (`mape_comparisons.csv`, slim.paper.mape_intervals), a must-beat holds
    only where the paired bootstrap interval of the MAPE difference lies below zero on the
    metric, not merely where the point estimate is lower."""
    problems = []
    tolerance = float(expected["tolerance_pct_points"])
    metric_columns = {metric.name: metric.mape for metric in col.PREDICTION_METRICS}
    for setting, predictors in expected["mape_pct"].items():
        for predictor, metrics in predictors.items():
            match = mapes[(mapes[col.SETTING] == setting) & (mapes[col.PREDICTOR] == predictor)]
            if match.empty:
                problems.append(f"{setting}/{predictor}: recorded but not computed")
                continue
            for name, recorded in metrics.items():
                current = float(match[metric_columns[name]].iloc[0])
                if abs(current - recorded) > tolerance:
                    problems.append(f"{setting}/{predictor} {name} MAPE {current:.2f}% drifted from the recorded "
                                    f"{recorded:.2f}% by more than {tolerance} points")
    for key, winner in MUST_BEAT_KEYS.items():
        for setting, baselines in expected.get(key, {}).items():
            rows = mapes[mapes[col.SETTING] == setting].set_index(col.PREDICTOR)
            for baseline in baselines:
                for name, column in metric_columns.items():
                    if not rows.loc[winner, column] < rows.loc[baseline, column]:
                        problems.append(f"{setting}: {winner} {name} MAPE {rows.loc[winner, column]:.2f}% does not "
                                        f"beat {baseline} ({rows.loc[baseline, column]:.2f}%)")
                    elif comparisons is not None and not _beats_beyond_interval(comparisons, setting, winner,
                                                                                baseline, name):
                        problems.append(f"{setting}: {winner} {name} MAPE {rows.loc[winner, column]:.2f}% beats "
                                        f"{baseline} ({rows.loc[baseline, column]:.2f}%) only within the bootstrap "
                                        "interval of the difference")
    return problems


def _beats_beyond_interval(comparisons: pd.DataFrame, setting: str, winner: str, other: str, metric: str) -> bool:
    """Whether the paired interval of MAPE(winner) - MAPE(other) lies below zero (either row order)."""
    from slim.paper.mape_intervals import BETTER, WORSE

    rows = comparisons[(comparisons[col.SETTING] == setting) & (comparisons[col.METRIC] == metric)]
    direct = rows[(rows[col.PREDICTOR] == winner) & (rows[col.OTHER_PREDICTOR] == other)]
    if not direct.empty:
        return str(direct[col.VERDICT].iloc[0]) == BETTER
    reverse = rows[(rows[col.PREDICTOR] == other) & (rows[col.OTHER_PREDICTOR] == winner)]
    return not reverse.empty and str(reverse[col.VERDICT].iloc[0]) == WORSE


@dataclass(frozen=True)
class HeadlineVerdict:
    """The outcome of checking one dataset's MAPEs against the record."""

    dataset: str
    recorded: bool
    n_checked: int
    problems: tuple[str, ...]

    @property
    def holds(self) -> bool:
        return self.recorded and not self.problems

    def to_text(self) -> str:
        """The artefact `results/<dataset>/headline_check.txt`: a first line PASS, DRIFT or
        UNRECORDED, then one line per problem."""
        if not self.recorded:
            return (f"UNRECORDED {self.dataset}: config/headlines.yaml has no entry for this dataset; "
                    "record one with `snakemake --cores 2 record_headlines`\n")
        if not self.problems:
            return f"PASS {self.dataset}: all {self.n_checked} recorded headline MAPEs within tolerance\n"
        lines = [f"DRIFT {self.dataset}: {len(self.problems)} problem(s) against the recorded headlines"]
        return "\n".join(lines + [f"- {problem}" for problem in self.problems]) + "\n"


def headline_verdict(mapes: pd.DataFrame, record: Mapping, dataset: str,
                     comparisons: pd.DataFrame | None = None) -> HeadlineVerdict:
    """Check `mapes` (a `table3.csv`) against the dataset's entry of the record, if it has one
    (must-beats against the paired intervals of `comparisons` where given)."""
    if dataset not in record:
        return HeadlineVerdict(dataset, False, 0, ())
    expected = record[dataset]
    n_checked = sum(len(metrics) for predictors in expected["mape_pct"].values() for metrics in predictors.values())
    return HeadlineVerdict(dataset, True, n_checked, tuple(check_headlines(mapes, expected, comparisons)))


def record_headlines(record: Mapping, tables: Mapping[str, pd.DataFrame]) -> dict:
    """A new record: every dataset of `tables` gets its current MAPEs; its tolerance,
    must-beat lists and note are kept from `record` (datasets not in `tables` are kept whole)."""
    updated = {name: dict(entry) for name, entry in record.items()}
    for dataset, mapes in sorted(tables.items()):
        previous = updated.get(dataset, {})
        entry = measured_headlines(mapes, float(previous.get("tolerance_pct_points", DEFAULT_TOLERANCE_PCT_POINTS)))
        for key in KEPT_KEYS:
            if key in previous:
                entry[key] = previous[key]
        updated[dataset] = entry
    return updated


def record_as_yaml(record: Mapping) -> str:
    """The record file's text: `RECORD_HEADER` and the datasets in name order."""
    ordered = {name: {key: record[name][key] for key in ("note", "tolerance_pct_points", *MUST_BEAT_KEYS, "mape_pct")
                      if key in record[name]}
               for name in sorted(record)}
    return RECORD_HEADER + yaml.safe_dump(ordered, sort_keys=False, width=100)
