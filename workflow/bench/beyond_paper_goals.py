"""The goals beyond the paper: `python workflow/bench/beyond_paper_goals.py [accuracy.csv]`.

Reads the per-model accuracy (default results/beyond_paper/accuracy.csv, built by
`snakemake --cores 2 beyond_paper --configfile config/config.yaml config/beyond_paper.yaml`) and
prints, per accelerator and model, the simulator's TPOT MAPE zero-shot (constants calibrated on the
accelerator's other models) and calibrated on three runs
per curve against the goals (15% and 5%; `slim.paper.beyond_paper.GOALS`); then the calibrated
TPOT MAPE against AIConfigurator's where its anchor was measured (aiconfigurator_predictions.csv,
`workflow/bench/aiconfigurator_anchor.py`; AIConfigurator scored on every run it answered, the
calibration on the curves' runs left after three calibrate); then the layout replay's goals
(layout_goals.csv: regret per GPU, GPU time against the bisection per layout
and the exhaustive sweep, and tune's per-layout cap decisions; `slim.paper.replay.layout_summary`).
A measurement, not a test: it exits 0 whatever it finds, and says how many goals are met.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from slim.paper.beyond_paper import GOALS, goal_verdicts  # noqa: E402


def _against_anchor(models: pd.DataFrame, anchor: pd.DataFrame) -> pd.DataFrame:
    """Per model of the anchor: the simulator's TPOT MAPE calibrated on three runs per curve (scored on
    the curves' other runs) beside AIConfigurator's on every run it answered, and whether it is below."""
    answered = anchor.dropna(subset=["aiconfigurator_mean_tpot_ms"])
    errors = (answered["aiconfigurator_mean_tpot_ms"] / answered["measured_mean_tpot_ms"] - 1.0).abs() * 100.0
    theirs = errors.groupby(answered["model"]).mean().rename("aiconfigurator_tpot_mape")
    ours = models[models["metric"] == "mean_tpot_ms"].set_index("model")["calibrated_mape"]
    table = pd.concat([ours, theirs], axis=1, join="inner").reset_index()
    table["calibrated_below_aiconfigurator"] = [("n/a" if pd.isna(a) else "yes" if a < b else "no")
                                                for a, b in zip(table["calibrated_mape"],
                                                                table["aiconfigurator_tpot_mape"])]
    return table.round(1)


def main(path: Path) -> int:
    if not path.is_file():
        print(f"{path} does not exist; build it with: snakemake --cores 2 beyond_paper "
              "--configfile config/config.yaml config/beyond_paper.yaml", file=sys.stderr)
        return 1
    verdicts = goal_verdicts(pd.read_csv(path))
    print(verdicts.to_string(index=False, float_format=lambda value: f"{value:.1f}"))
    columns = [f"{key} <= {goal:g}%" for key, goal in GOALS.items()]
    met = int((verdicts[columns] == "met").to_numpy().sum())
    scored = int((verdicts[columns] != "n/a").to_numpy().sum())
    print(f"{met} of {scored} TPOT goals met ({len(verdicts)} models; n/a: no run left once three calibrate)")
    anchor = path.with_name("aiconfigurator_predictions.csv")
    if anchor.is_file():
        print()
        print(_against_anchor(pd.read_csv(path), pd.read_csv(anchor)).to_string(index=False))
    else:
        print(f"{anchor} does not exist: no AIConfigurator anchor (python workflow/bench/aiconfigurator_anchor.py)")
    layouts = path.with_name("layout_goals.csv")
    if layouts.is_file():
        goals = pd.read_csv(layouts)
        print()
        print(goals.to_string(index=False))
        print(f"{int(goals['met'].sum())} of {len(goals)} layout replay goals met")
    else:
        print(f"{layouts} does not exist: the layout replay's goals were not built")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "results/beyond_paper/accuracy.csv"))
