"""The per-GPU frontier with one curve per layout (`slim.paper.figures.layout_frontier`): a curve and a
colour per advised layout, the chosen layout and cap ringed and named, a layout without advice named
with its reason, throughput over every GPU of a server, the same bytes from the same input; the
pipeline's frontiers per cell of a dataset's clean runs; and `slim advise --tensor-parallel-sizes
... --plot`."""

import math
import struct
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from slim import cli
from slim import columns as col
from slim.advisor.candidates import CandidateRow
from slim.advisor.layouts import LayoutAdvice, LayoutOutcome
from slim.paper.figures.frontier import save_frontier
from slim.paper.figures.layout_frontier import (
    advice_layout_frontier,
    cell_file_name,
    dataset_layout_frontiers,
    layout_frontier_figure,
    save_layout_frontiers,
)

REPO = Path(__file__).resolve().parents[1]
CAPS = (1.0, 4.0, 16.0, 64.0)
OUTPUT_LEN = 1024.0


def _candidate(cap: float, tensor_parallel: int, measured: bool) -> CandidateRow:
    """A made-up server: TPOT 8 + cap / TP ms, throughput cap x 2048 / E2E tokens/s."""
    tpot_ms = 8.0 + cap / tensor_parallel
    values = {"throughput": cap * 2048 / (1023 * tpot_ms / 1000), "mean_tpot_ms": tpot_ms}
    predicted = {name: 1.05 * value for name, value in values.items()}
    return CandidateRow(cap, values if measured else {}, predicted, runs=int(measured))


def _outcome(tensor_parallel: int, chosen_cap: float, gpus: int | None = None, data_parallel: int = 1,
             limit_ms: float = 30.0) -> LayoutOutcome:
    rows = tuple(_candidate(cap, tensor_parallel, cap <= 16) for cap in CAPS)
    chosen = next(row for row in rows if row.max_num_seqs == chosen_cap)
    throughput = (chosen.measured or chosen.predicted)["throughput"]
    recommendation = SimpleNamespace(batch_cap=chosen_cap, throughput_per_s=throughput, measured=bool(chosen.measured))
    advice = SimpleNamespace(model="llama-3.1-70b-fp8", input_len=1024.0, output_len=OUTPUT_LEN,
                             hardware="h100-sxm-80gb", predictor="sim", limits_ms={"mean_tpot_ms": limit_ms},
                             candidates=rows, recommendation=recommendation,
                             gpus_per_server=gpus or tensor_parallel * data_parallel)
    return LayoutOutcome(tensor_parallel, advice, None, data_parallel)


def _layouts() -> LayoutAdvice:
    tp2, tp4 = _outcome(2, 16.0), _outcome(4, 64.0)
    lost = LayoutOutcome(8, None, "needs 8 GPUs, 4 available")
    chosen = max((tp2, tp4), key=lambda outcome: outcome.throughput_per_gpu)
    return LayoutAdvice((tp2, tp4, lost), chosen, 4, None, 2048.0)


def _series(ax, label: str):
    return next(container.lines[0] for container in ax.containers if container.get_label() == label)


def _legend(ax) -> list[str]:
    return [text.get_text().replace("\n", " ") for text in ax.get_legend().get_texts()]


def test_one_curve_and_one_colour_per_advised_layout():
    ax = layout_frontier_figure(advice_layout_frontier(_layouts())).axes[0]
    measured = [_series(ax, f"TP {size} measured") for size in (2, 4)]
    predicted = [_series(ax, f"TP {size} predicted") for size in (2, 4)]
    assert [len(line.get_xdata()) for line in measured] == [3, 3]          # caps 1, 4 and 16 measured
    assert [len(line.get_xdata()) for line in predicted] == [4, 4]
    assert measured[0].get_color() != measured[1].get_color()
    assert [line.get_color() for line in measured] == [line.get_color() for line in predicted]
    assert [line.get_markerfacecolor() for line in predicted] == ["none", "none"], "predicted points are open"
    assert not any(container.get_label().startswith("TP 8") for container in ax.containers)
    assert "TP 2 (2 GPUs per server)" in _legend(ax) and "TP 4 (4 GPUs per server)" in _legend(ax)


def test_the_chosen_layout_and_cap_is_ringed_and_named():
    layouts = _layouts()
    ax = layout_frontier_figure(advice_layout_frontier(layouts)).axes[0]
    (ring,) = [line for line in ax.get_lines() if line.get_label() == "chosen"]
    chosen = layouts.chosen
    assert chosen.tensor_parallel == 4
    row = next(row for row in chosen.advice.candidates if row.max_num_seqs == 64.0)   # predicted only
    assert ring.get_xdata()[0] == pytest.approx(1000 / row.predicted["mean_tpot_ms"])
    assert ring.get_ydata()[0] == pytest.approx(row.predicted["throughput"] / 4)
    assert f"chosen: TP 4, --max-num-seqs 64 ({chosen.throughput_per_gpu:,.0f} tokens/s per GPU)" in _legend(ax)


def test_a_layout_without_advice_is_named_with_its_reason():
    ax = layout_frontier_figure(advice_layout_frontier(_layouts())).axes[0]
    assert "TP 8: no advice (needs 8 GPUs, 4 available)" in _legend(ax)
    none_advised = LayoutAdvice((LayoutOutcome(2, None, "no batch cap meets the constraints"),
                                 LayoutOutcome(4, None, "no usable run at --tensor-parallel-size 4")),
                                None, None, None, 2048.0)
    ax = layout_frontier_figure(advice_layout_frontier(none_advised)).axes[0]
    assert _legend(ax)[-2:] == ["TP 2: no advice (no batch cap meets the constraints)",
                                "TP 4: no advice (no usable run at --tensor-parallel-size 4)"]
    assert not ax.containers


def test_the_bound_is_one_grey_line_where_every_layout_shares_it_else_one_per_layout():
    ax = layout_frontier_figure(advice_layout_frontier(_layouts())).axes[0]
    bounds = [line for line in ax.get_lines() if line.get_label().startswith("SLO ")]
    assert [list(line.get_xdata()) for line in bounds] == [[pytest.approx(1000 / 30.0)] * 2]
    apart = LayoutAdvice((_outcome(2, 16.0, limit_ms=25.0), _outcome(4, 16.0)), None, None, None, 2048.0)
    ax = layout_frontier_figure(advice_layout_frontier(apart)).axes[0]
    bounds = [line for line in ax.get_lines() if line.get_label().startswith("SLO ")]
    assert sorted(line.get_xdata()[0] for line in bounds) == pytest.approx([1000 / 30.0, 1000 / 25.0])
    assert "TP 2: SLO mean_tpot_ms <= 25 ms (admissible to its right)" in _legend(ax)


def test_a_data_parallel_layout_is_per_gpu_of_its_whole_server():
    alone, ranked = _outcome(4, 16.0), _outcome(4, 16.0, data_parallel=4)
    ax = layout_frontier_figure(advice_layout_frontier(LayoutAdvice((alone, ranked), alone, None, None,
                                                                    2048.0))).axes[0]
    assert list(_series(ax, "TP 4 x DP 4 measured").get_ydata()) == pytest.approx(
        [value / 4 for value in _series(ax, "TP 4 measured").get_ydata()])
    assert "TP 4 x DP 4 (16 GPUs per server)" in _legend(ax)


def test_the_same_layouts_draw_the_same_900_by_600_png(tmp_path):
    paths = [tmp_path / f"{number}.png" for number in range(2)]
    for path in paths:
        save_frontier(layout_frontier_figure(advice_layout_frontier(_layouts())), path)
    data = [path.read_bytes() for path in paths]
    assert data[0] == data[1]
    assert struct.unpack(">II", data[0][16:24]) == (900, 600)


# ---------------------------------------------------------------- the pipeline's frontiers per cell

def _run(model: str, tensor_parallel: int, data_parallel: int, in_flight: int, input_len: int = 1024) -> dict:
    """A made-up clean closed-loop run: TPOT 8 + N / TP ms, throughput N (IL + OL) / E2E."""
    tpot_ms = 8.0 + in_flight / tensor_parallel
    e2e_s = (100.0 + (OUTPUT_LEN - 1) * tpot_ms) / 1000
    return {col.RUN_ID: f"{model}_tp{tensor_parallel}_dp{data_parallel}_il{input_len}_c{in_flight}",
            col.HARDWARE: "h100-sxm-80gb", col.MODEL: model, col.INPUT_LEN_NOMINAL: float(input_len),
            col.OUTPUT_LEN_NOMINAL: OUTPUT_LEN, col.MAX_NUM_SEQS: float(in_flight),
            col.TENSOR_PARALLEL: tensor_parallel, col.DATA_PARALLEL: data_parallel,
            col.GPUS_PER_SERVER: float(tensor_parallel * data_parallel), col.MEAN_TPOT_MS: tpot_ms,
            col.E2E_LATENCY_S: e2e_s, col.TOTAL_TOKEN_THROUGHPUT: in_flight * (input_len + OUTPUT_LEN) / e2e_s}


@pytest.fixture()
def clean_runs() -> pd.DataFrame:
    rows = [_run("llama-3.1-70b-fp8", tp, 1, n) for tp in (2, 4) for n in (4, 16, 64)]
    rows += [_run("minimax-m2.5", 4, dp, n) for dp in (1, 4) for n in (8, 32)]
    rows += [_run("llama-3.1-70b-fp8", 2, 1, n, input_len=8192) for n in (4, 16)]   # one layout: no figure
    return pd.DataFrame(rows)


def test_a_frontier_per_cell_with_several_layouts_and_a_curve_per_layout(clean_runs):
    frontiers = dataset_layout_frontiers(clean_runs, "nvidia")
    assert [cell_file_name(f) for f in frontiers] == ["llama-3.1-70b-fp8_il1024_ol1024", "minimax-m2.5_il1024_ol1024"]
    llama, minimax = frontiers
    assert [(curve.name, curve.gpus) for curve in llama.curves] == [("TP 2", 2), ("TP 4", 4)]
    assert [(curve.name, curve.gpus) for curve in minimax.curves] == [("TP 4", 4), ("TP 4 x DP 4", 16)]
    alone, ranked = ([p.throughput_per_gpu for p in curve.points] for curve in minimax.curves)
    assert ranked == pytest.approx([value / 4 for value in alone]), "DP 4 runs over 16 GPUs"
    first = clean_runs.iloc[0]
    point = llama.curves[0].points[0]
    assert (point.cap, point.measured) == (4.0, True)
    assert point.interactivity == pytest.approx(1000 / first[col.MEAN_TPOT_MS])
    assert point.throughput_per_gpu == pytest.approx(first[col.TOTAL_TOKEN_THROUGHPUT] / 2)


def test_the_pipeline_frontier_adds_the_zero_shot_predictions_of_its_dataset(clean_runs):
    predictions = pd.DataFrame({col.RUN_ID: clean_runs[col.RUN_ID], "dataset": "nvidia",
                                "zero_shot_mean_tpot_ms": 2 * clean_runs[col.MEAN_TPOT_MS],
                                "zero_shot_total_token_throughput": clean_runs[col.TOTAL_TOKEN_THROUGHPUT] / 2,
                                "sim_status": "ok"})
    predictions.loc[0, "sim_status"] = "no_cache_memory"                  # not started: not drawn
    other = predictions.assign(dataset="elsewhere", zero_shot_mean_tpot_ms=math.nan)
    (llama, _) = dataset_layout_frontiers(clean_runs, "nvidia", pd.concat([other, predictions]))
    predicted = [p for p in llama.curves[0].points if not p.measured]
    assert [p.cap for p in predicted] == [16.0, 64.0]
    measured = {p.cap: p for p in llama.curves[0].points if p.measured}
    assert predicted[0].interactivity == pytest.approx(measured[16.0].interactivity / 2)
    assert predicted[0].throughput_per_gpu == pytest.approx(measured[16.0].throughput_per_gpu / 2)
    assert "predicted: SIM zero-shot" in llama.note


def test_the_cell_figures_are_written_by_name_into_an_emptied_folder(clean_runs, tmp_path):
    folder = tmp_path / "frontiers"
    folder.mkdir()
    (folder / "stale.png").write_bytes(b"old")
    paths = save_layout_frontiers(dataset_layout_frontiers(clean_runs, "nvidia"), folder)
    assert sorted(path.name for path in folder.iterdir()) == ["llama-3.1-70b-fp8_il1024_ol1024.png",
                                                              "minimax-m2.5_il1024_ol1024.png"]
    assert all(path.read_bytes().startswith(b"\x89PNG") for path in paths)


# ---------------------------------------------------------------- slim advise --plot across layouts

def test_advise_across_layouts_draws_the_layout_frontier(capsys, tmp_path):
    """OPT-1.3B's runs are at TP 1 only: TP 2 is named without advice, TP 1's curve drawn."""
    figure = tmp_path / "layouts.png"
    argv = ["advise", "--traces", str(REPO / "tests" / "data" / "formats" / "bench_serve_metadata"), "--model",
            "opt-1.3b", "--hardware", "h100-64gb", "--input-len", "256", "--output-len", "128", "--slo-ms", "5000",
            "--tensor-parallel-sizes", "1,2", "--plot", str(figure)]
    assert cli.main(argv) == cli.EXIT_OK
    assert "TP 2: no cap" in capsys.readouterr().out
    assert struct.unpack(">II", figure.read_bytes()[16:24]) == (900, 600)
