"""SIM's held-out accuracy on the public H100 traces: `python workflow/bench/bench_sim_transfer.py [dataset]`.

Reads what the pipeline built (`results/<dataset>/clean.parquet` and `sim_schedules.parquet`,
default dataset h100-public: `snakemake --cores 2 results/h100-public/table3.csv`), calibrates
SIM on each held-out setting's training runs only and prints its validation throughput MAPE
(the chosen fit, as Table III). Then a check that is no setting of the paper: at each output
length, every model predicted from the other two (training runs at that length only), so a
change to the cost model is judged on transfers it was not written for.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from slim import columns as col  # noqa: E402
from slim.model.metrics import mape_pct  # noqa: E402
from slim.paper.splits import load_settings, split_setting  # noqa: E402
from slim.sim.constants import SIM_CONSTANTS_FILE, load_sim_constants  # noqa: E402
from slim.sim.schedule_costs import prediction_costs  # noqa: E402
from slim.sim.schedule_fit import calibrate_on_rows  # noqa: E402
from slim.sim.schedules import read_schedules  # noqa: E402
from slim.specs.architecture import MODELS_FILE, load_architectures  # noqa: E402
from slim.specs.hardware import HARDWARE_FILE, load_hardware  # noqa: E402

SETTINGS_FILE = REPO / "config" / "settings" / "h100-public.yaml"
HARDWARE = "h100-64gb"


def sim_mape(train: pd.DataFrame, validate: pd.DataFrame, schedules, architectures, hw, name: str) -> float:
    """SIM calibrated on `train` (chosen fit, no valley sample), its throughput MAPE % on `validate`."""
    calibration = calibrate_on_rows(train, schedules, architectures, hw, split_name=name, sample_valley=False)
    predicted = prediction_costs(validate, schedules, architectures, hw).predict(calibration.constants)
    return mape_pct(predicted.throughput_per_s, validate[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float))


def main(dataset: str) -> None:
    results = REPO / "results" / dataset
    clean = pd.read_parquet(results / "clean.parquet")
    schedules = read_schedules(results / "sim_schedules.parquet", load_sim_constants(SIM_CONSTANTS_FILE))
    architectures, hw = load_architectures(MODELS_FILE), load_hardware(HARDWARE_FILE)[HARDWARE]
    print("setting\tSIM throughput MAPE %")
    for setting in load_settings(SETTINGS_FILE):
        if setting.applicable:
            split = split_setting(clean, setting)
            mape = sim_mape(split.train, split.validate, schedules, architectures, hw, setting.name)
            print(f"{setting.name}\t{mape:.2f}")
    models = sorted(clean[col.MODEL].unique())
    print("\nleave one model out at each output length (train: the other two models)")
    print("output length\t" + "\t".join(models))
    for length in sorted(clean["output_len_nominal"].unique()):
        at_length = clean[clean["output_len_nominal"] == length]
        values = [sim_mape(at_length[at_length[col.MODEL] != model], at_length[at_length[col.MODEL] == model],
                           schedules, architectures, hw, f"{model} at OL {length}") for model in models]
        print(f"{int(length)}\t" + "\t".join(f"{value:.2f}" for value in values))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "h100-public")
