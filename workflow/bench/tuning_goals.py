"""The tuning loop's goals, measured on the replay: `python workflow/bench/tuning_goals.py [RESULTS]`.

Reads every ``results/<dataset>/tuning_replay.csv`` and ``tuning_calibration.csv`` under RESULTS
(default results/, built by `snakemake --cores 2 tuning --configfile config/config.yaml
config/accelerators.yaml`) and prints, per real dataset and tuning policy (one session per
workload, out-of-sample prior, under noise), each goal of `slim.paper.replay.summary.tuning_goals`
with its figure beside the best model-free search's. A measurement, not a test: it exits 0 whatever
it finds, and says how many goals are met.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from slim.paper.replay.summary import GOAL_CHECKS, summarise, tuning_goals  # noqa: E402


def main(results: Path) -> int:
    replays, calibrations, real = {}, [], []
    for path in sorted(results.glob("*/tuning_replay.csv")):
        calibration = pd.read_csv(path.with_name("tuning_calibration.csv"))
        label = str(calibration["dataset"].iloc[0]) if not calibration.empty else path.parent.name
        replays[label] = pd.read_csv(path)
        calibrations.append(calibration.assign(dataset=label))
        if not calibration.empty and calibration["dataset_kind"].iloc[0] == "real":
            real.append(label)
    if not replays:
        print(f"no tuning replay under {results}; build it with: snakemake --cores 2 tuning "
              "--configfile config/config.yaml config/accelerators.yaml", file=sys.stderr)
        return 1
    goals = tuning_goals(summarise(replays), pd.concat(calibrations, ignore_index=True), real)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 40)
    pd.set_option("display.max_colwidth", 80)
    print(goals.T.to_string(header=False) if len(goals) else "no real dataset replayed with a tuning prior")
    checks = [goal for _, row in goals.iterrows() for goal in (row[name] for name in GOAL_CHECKS) if goal is not None]
    print(f"\ngoals met: {sum(map(bool, checks))} of {len(checks)} (coverage is not a goal under an adversarial prior)")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "results"))
