"""The tuning loop's goals, measured on the replay: `python workflow/bench/tuning_goals.py [RESULTS]`.

Reads every ``results/<dataset>/tuning_replay.csv`` and ``tuning_calibration.csv`` under RESULTS
(default results/, built by `snakemake --cores 2 tuning --configfile config/config.yaml
config/accelerators.yaml`) and prints, per dataset and tuning policy, whether each goal of
`slim.paper.tuning_replay.tuning_goals` is met. A measurement, not a test: it exits 0 whatever it
finds, and says how many goals are met.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from slim.paper.tuning_replay import tuning_goals  # noqa: E402


def main(results: Path) -> int:
    replays, calibrations = {}, []
    for path in sorted(results.glob("*/tuning_replay.csv")):
        calibration = pd.read_csv(path.with_name("tuning_calibration.csv"))
        label = str(calibration["dataset"].iloc[0]) if not calibration.empty else path.parent.name
        replays[label] = pd.read_csv(path)
        calibrations.append(calibration.assign(dataset=label))
    if not replays:
        print(f"no tuning replay under {results}; build it with: snakemake --cores 2 tuning "
              "--configfile config/config.yaml config/accelerators.yaml", file=sys.stderr)
        return 1
    goals = tuning_goals(replays, pd.concat(calibrations, ignore_index=True))
    pd.set_option("display.width", 200)
    print(goals.to_string(index=False))
    checks = goals[["regret_goal", "gpu_goal", "beats_model_free", "coverage_goal"]]
    print(f"\ngoals met: {int(checks.to_numpy().sum())} of {checks.size}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "results"))
