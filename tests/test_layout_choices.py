"""The layout decision measured (slim.paper.layout_choices) on a made-up NVIDIA-format sweep: TP 2 and
TP 4 of one workload, read through ingest as the pipeline reads the real file."""

import csv
import math
from pathlib import Path

import pandas as pd
import pytest

from slim.paper.layout_choices import CHOICE_COLUMNS, layout_choices, layout_choices_markdown
from slim.paper.replay.curves import SloKind
from slim.specs.architecture import load_architectures
from slim.specs.hardware import load_hardware
from slim.traces.clean import clean_runs
from slim.traces.ingest import IngestOptions, ingest_traces

SWEEP_HEADER = (Path(__file__).parent / "data" / "aiconfigurator_silicon" / "sweep.csv").read_text().splitlines()[0]
IN_FLIGHT = (4, 8, 16, 32, 64)


def _row(tensor_parallel: int, in_flight: int) -> dict[str, str]:
    """Qwen3-32B at 1024 / 1024: TP 2's TPOT 10 + 0.5 N ms, TP 4's 6 + 0.2 N ms; TTFT 100 ms."""
    tpot_ms = (10.0 + 0.5 * in_flight) if tensor_parallel == 2 else (6.0 + 0.2 * in_flight)
    return {"id": f"tp{tensor_parallel}_c{in_flight}", "silicon_data_source": f"silicon_concurrency={in_flight}",
            "backend": "vllm", "backend_version": "0.12.0", "model_path": "Qwen/Qwen3-32B", "system": "h100_sxm",
            "precision": "bfloat16", "mode": "agg", "isl": "1024", "osl": "1024", "gemm_quant_mode": "bfloat16",
            "batch_size": str(in_flight), "tp_size": str(tensor_parallel), "pp_size": "1", "attention_dp_size": "1",
            "silicon_ttft_ms": "100.0", "silicon_tpot_ms": f"{tpot_ms}"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> pd.DataFrame:
    folder = tmp_path_factory.mktemp("sweep")
    with (folder / "vllm_h100_silicon.csv").open("w", newline="") as stream:
        writer = csv.DictWriter(stream, SWEEP_HEADER.split(","), restval="")
        writer.writeheader()
        writer.writerows(_row(t, n) for t in (2, 4) for n in IN_FLIGHT)
    hardware = load_hardware()
    every_run, _ = clean_runs(ingest_traces(folder, "aiconfigurator-h100", load_architectures(),
                                            IngestOptions.on(hardware, "h100-sxm-80gb")))
    return every_run


def _per_gpu(tensor_parallel: int, in_flight: int) -> float:
    """The closed-loop throughput per GPU: N (IL + OL) / (TTFT + (OL - 1) TPOT) over t GPUs."""
    tpot_ms = (10.0 + 0.5 * in_flight) if tensor_parallel == 2 else (6.0 + 0.2 * in_flight)
    return in_flight * 2048 / ((100.0 + 1023 * tpot_ms) / 1000.0) / tensor_parallel


def test_the_best_layout_per_gpu_under_each_bound_and_its_gain_over_the_smallest(runs):
    kinds = [SloKind("tpot_20", ("mean_tpot_ms=20",)), SloKind("tpot_11", ("mean_tpot_ms=11",)),
             SloKind("tpot_5", ("mean_tpot_ms=5",))]
    table, notes = layout_choices(runs, kinds, 0.1)
    assert list(table.columns) == list(CHOICE_COLUMNS) and notes == []
    by_kind = table.set_index("slo_kind")
    # Under 20 ms TP 2 runs at 16 (18 ms) and TP 4 at 64 (18.8 ms): TP 4 gives more per GPU.
    loose = by_kind.loc["tpot_20"]
    assert (loose["best_layout"], loose["best_cap"], loose["smallest_cap"]) == ("TP 4", 64.0, 16.0)
    assert loose["best_per_gpu"] == pytest.approx(_per_gpu(4, 64), rel=1e-6)
    assert loose["best_over_smallest"] == pytest.approx(_per_gpu(4, 64) / _per_gpu(2, 16), rel=1e-6)
    # Under 11 ms TP 2 meets no cap (12 ms at N = 4); TP 4 runs at 16 (9.2 ms).
    tight = by_kind.loc["tpot_11"]
    assert (tight["best_layout"], tight["best_cap"]) == ("TP 4", 16.0) and math.isnan(tight["smallest_cap"])
    # Under 5 ms no layout meets the bound.
    none = by_kind.loc["tpot_5"]
    assert none["best_layout"] == "" and math.isnan(none["best_per_gpu"])
    text = layout_choices_markdown(table, "made-up (real)")
    assert "| tpot_11 | 1 | 1 | 1 | - |" in text and "| tpot_20 | 1 | 1 | 0 | 1.92x |" in text
