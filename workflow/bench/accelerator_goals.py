"""The project's accuracy goals per accelerator: `python workflow/bench/accelerator_goals.py [table.csv]`.

Reads the cross-accelerator table (default results/accelerators/cross_accelerator.csv, built by
`snakemake --cores 2 accelerators --configfile config/config.yaml config/accelerators.yaml`) and
prints, per accelerator and held-out setting, SLIM's and SIM's throughput MAPE against the goals:
the better of SIM and SLIM <= 5%, and SLIM alone <= 10% on the NVIDIA accelerators (an accelerator
whose catalog display name begins with "NVIDIA"). A measurement, not a test: it exits 0 whatever
it finds, and says how many goals are met.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from slim.paper.cross_accelerator import (  # noqa: E402
    ACCELERATOR,
    GOAL_BEST_OF_SIM_SLIM_PCT,
    GOAL_SLIM_NVIDIA_PCT,
    goal_report,
)


def main(path: Path) -> int:
    if not path.is_file():
        print(f"{path} does not exist; build it with: snakemake --cores 2 accelerators "
              "--configfile config/config.yaml config/accelerators.yaml", file=sys.stderr)
        return 1
    long = pd.read_csv(path)
    nvidia = {name for name in long[ACCELERATOR].unique() if str(name).upper().startswith("NVIDIA")}
    report = goal_report(long, nvidia)
    print(f"goals: better of SIM and SLIM <= {GOAL_BEST_OF_SIM_SLIM_PCT:g}% throughput MAPE everywhere; "
          f"SLIM <= {GOAL_SLIM_NVIDIA_PCT:g}% on NVIDIA")
    print(f"{'accelerator':45s} {'setting':16s} {'SLIM %':>7s} {'SIM %':>7s} {'best %':>7s}  best<=5  SLIM<=10")
    for _, row in report.iterrows():
        slim_goal = "-" if pd.isna(row["slim_goal_met"]) else ("yes" if row["slim_goal_met"] else "no")
        print(f"{row[ACCELERATOR]:45s} {row['setting']:16s} {row['slim_mape_pct']:7.1f} {row['sim_mape_pct']:7.1f} "
              f"{row['best_mape_pct']:7.1f}  {'yes' if row['best_goal_met'] else 'no':7s}  {slim_goal}")
    nvidia_rows = report[report["slim_goal_met"].notna()]
    print(f"better of SIM and SLIM <= {GOAL_BEST_OF_SIM_SLIM_PCT:g}%: {int(report['best_goal_met'].sum())} of "
          f"{len(report)} accelerator x setting rows; SLIM <= {GOAL_SLIM_NVIDIA_PCT:g}% on NVIDIA: "
          f"{int(nvidia_rows['slim_goal_met'].astype(bool).sum())} of {len(nvidia_rows)}")
    return 0


if __name__ == "__main__":
    default = REPO / "results" / "accelerators" / "cross_accelerator.csv"
    raise SystemExit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else default))
