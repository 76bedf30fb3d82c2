"""`slim advise --plot`'s frontier reads at a glance: 900 x 600 px, cap labels that do not overlap,
the caps the simulator refused drawn apart and named in the legend, and each SLO bound drawn only
on the axis of its own metric (the others named, not drawn)."""

import io
import math
import struct
from types import SimpleNamespace

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from slim.advisor.advise import CandidateRow
from slim.paper.figures.frontier import (
    DEFAULT_AXIS,
    advice_frontier_figure,
    axis_metric,
    bound_lines,
    interactivity,
    save_frontier,
)

# An A100 curve as advise sees it (tests/data/user_dataset, opt-2.7b IL 256 OL 256): six measured caps
# bunched at the high-interactivity end, SIM's prediction of every cap, the two largest refused.
MEASURED = {1: (198.7, 10.1, 13.1), 2: (393.3, 10.2, 13.3), 4: (770.8, 10.4, 13.5), 8: (1481.8, 10.8, 14.1),
            16: (2602.0, 11.6, 15.0), 32: (4580.6, 13.2, 17.1)}
PREDICTED = {1: (199.6, 10.0, 10.0), 2: (394.4, 10.1, 10.2), 4: (770.9, 10.4, 10.4), 8: (1474.2, 10.8, 10.9),
             16: (2710.4, 11.8, 11.8), 32: (4640.1, 13.7, 13.7), 64: (7198.5, 17.5, 17.5),
             128: (10018.3, 24.9, 25.2), 256: (12247.7, 38.7, 40.6), 512: (12341.9, 39.8, 42.7)}
REFUSED = (256.0, 512.0)
LIMITS_MS = {"p99_tpot_ms": 17.0, "mean_ttft_ms": 5000.0}


def values(throughput: float, mean_tpot_ms: float, p99_tpot_ms: float) -> dict[str, float]:
    return {"throughput": throughput, "mean_tpot_ms": mean_tpot_ms, "p99_tpot_ms": p99_tpot_ms,
            "mean_in_batch_e2e_ms": 256 * mean_tpot_ms}


def advice(limits_ms=LIMITS_MS, chosen: float = 16.0, gpus_per_server: int = 1):
    rows = tuple(CandidateRow(float(cap), values(*MEASURED[cap]) if cap in MEASURED else {}, values(*predicted),
                              runs=int(cap in MEASURED), refused=float(cap) in REFUSED)
                 for cap, predicted in PREDICTED.items())
    return SimpleNamespace(model="opt-2.7b", input_len=256.0, output_len=256.0, hardware="a100-80gb",
                           predictor="sim", limits_ms=dict(limits_ms), candidates=rows,
                           recommendation=SimpleNamespace(batch_cap=chosen), gpus_per_server=gpus_per_server)


def series(ax, label: str):
    """The data line of the measured or predicted points (drawn with their error bars)."""
    return next(container.lines[0] for container in ax.containers if container.get_label() == label)


def png_size(data: bytes) -> tuple[int, int]:
    return struct.unpack(">II", data[16:24])


def test_the_advice_frontier_is_900_by_600_pixels_as_a_png(tmp_path):
    path = tmp_path / "frontier.png"
    save_frontier(advice_frontier_figure(advice()), path)
    assert png_size(path.read_bytes()) == (900, 600)


def test_refused_caps_are_red_crosses_named_in_the_legend_and_off_the_predicted_line():
    ax = advice_frontier_figure(advice()).axes[0]
    refused = [line for line in ax.get_lines() if line.get_label() == "refused by SIM (simulated preemption)"]
    assert len(refused) == 1 and refused[0].get_marker() == "X" and refused[0].get_markerfacecolor() == "none"
    assert refused[0].get_markeredgecolor() == "tab:red"
    assert sorted(refused[0].get_xdata()) == sorted(1000 / PREDICTED[cap][2] for cap in (256, 512))
    predicted = series(ax, "predicted")
    assert len(predicted.get_xdata()) == len(PREDICTED) - len(REFUSED)
    legend = [text.get_text().replace("\n", " ") for text in ax.get_legend().get_texts()]
    assert "refused by SIM (simulated preemption)" in legend


def test_a_bound_is_drawn_on_the_axis_of_its_own_metric_and_the_others_are_named():
    ax = advice_frontier_figure(advice()).axes[0]
    assert "1000 / p99_tpot_ms" in ax.get_xlabel()
    bounds = [line for line in ax.get_lines() if line.get_label().startswith("SLO ")]
    assert [line.get_label() for line in bounds] == ["SLO p99_tpot_ms <= 17 ms (admissible to its right)"]
    assert list(bounds[0].get_xdata()) == [pytest.approx(1000 / 17.0)] * 2
    measured = series(ax, "measured")
    assert list(measured.get_xdata()) == pytest.approx([1000 / MEASURED[cap][2] for cap in sorted(MEASURED)]), \
        "the measured points sit at their p99 TPOT, the bound's metric, not at their mean TPOT"
    legend = [text.get_text().replace("\n", " ") for text in ax.get_legend().get_texts()]
    assert "SLO mean_ttft_ms <= 5,000 ms: another metric, not drawn" in legend


@pytest.mark.parametrize("bounds, axis", [(["mean_ttft_ms", "p90_itl_ms", "p99_tpot_ms"], "p90_itl_ms"),
                                          (["mean_in_batch_e2e_ms"], "mean_in_batch_e2e_ms"),
                                          (["mean_ttft_ms"], DEFAULT_AXIS), ([], DEFAULT_AXIS)])
def test_the_axis_is_the_first_bound_metric_that_converts_to_tokens_per_second(bounds, axis):
    assert axis_metric(bounds) == axis


def test_bound_lines_keep_only_the_axis_metric():
    on_axis, others = bound_lines({"mean_in_batch_e2e_ms": 4000.0, "p99_tpot_ms": 20.0}, 256.0,
                                  "mean_in_batch_e2e_ms")
    assert on_axis == ((pytest.approx(1000 * 256 / 4000), "SLO mean_in_batch_e2e_ms <= 4,000 ms"),)
    assert others == ("SLO p99_tpot_ms <= 20 ms",)
    assert interactivity({"mean_in_batch_e2e_ms": 4000.0}, "mean_in_batch_e2e_ms", 256.0) == pytest.approx(64.0)
    assert interactivity({"mean_in_batch_e2e_ms": 4000.0}, DEFAULT_AXIS, 256.0) == pytest.approx(64.0)
    assert math.isnan(interactivity({"mean_tpot_ms": 10.0}, "p99_tpot_ms", 256.0))


@pytest.mark.parametrize("limits_ms", [LIMITS_MS, {"mean_in_batch_e2e_ms": 3500.0}, {}], ids=["p99", "e2e", "none"])
def test_cap_labels_overlap_neither_each_other_nor_leave_the_axes(limits_ms):
    figure = advice_frontier_figure(advice(limits_ms))
    FigureCanvasAgg(figure).draw()
    ax = figure.axes[0]
    boxes = [text.get_window_extent() for text in ax.texts]
    assert len(boxes) >= len(MEASURED), "most caps are labelled"
    for number, box in enumerate(boxes):
        assert ax.get_window_extent().contains(box.x0, box.y0) and ax.get_window_extent().contains(box.x1, box.y1)
        assert not any(box.overlaps(other) for other in boxes[number + 1:])


def test_the_same_advice_draws_the_same_bytes():
    drawn = []
    for _ in range(2):
        buffer = io.BytesIO()
        advice_frontier_figure(advice()).savefig(buffer, format="png", dpi=100, metadata={"Software": None})
        drawn.append(buffer.getvalue())
    assert drawn[0] == drawn[1]


def test_throughput_is_per_gpu_of_the_whole_server():
    """A server of tensor-parallel 2 x data-parallel 2 occupies 4 GPUs: every point's throughput is over 4."""
    on_one = advice_frontier_figure(advice()).axes[0]
    on_four = advice_frontier_figure(advice(gpus_per_server=4)).axes[0]
    for label in ("measured", "predicted"):
        assert list(series(on_four, label).get_ydata()) == pytest.approx(
            [value / 4 for value in series(on_one, label).get_ydata()])
