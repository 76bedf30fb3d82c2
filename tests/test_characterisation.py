"""Characterisation artefacts: Fig. 1 and Fig. 2 layouts on small synthetic run tables
(crosses exactly on the preempted runs, one panel per sweep), Table I against the
paper's configurations, byte-identical re-saves and the three Snakemake adapters.

Table I's intensity is exact for the roofline (``2 H_q / (H_kv b_kv) = 4.0`` FLOP/B
for Mistral-7B) but the paper *measured* 3.79-3.97. The roofline value is within 5%
of the mean measured value (3.90; gap 2.6%) but not of every row: the two rows at
3.79 are 5.5% below it, so the per-row check is within 6%.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.errors import ConfigError, PlotInputError
from slim.paper.decode_attention_table import (
    intensity_agreement,
    load_paper_table1,
    table1_display,
    table1_frame,
    table1_latex,
)
from slim.paper.figures.characterisation import plot_batch_scaling, plot_length_sweeps
from slim.paper.figures.common import save_figure
from slim.paper.measured_characterisation import PREEMPTED, sweep_panels
from slim.specs.architecture import MODELS_FILE, load_architectures
from slim.specs.hardware import HARDWARE_FILE, load_hardware

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config"
LABEL = "synthetic test data (simulated)"
MAX_NUM_SEQS = np.array([1, 2, 4, 8, 16, 32, 64, 128], dtype=float)


def _runs(model: str, input_len: float, output_len: float, plateau_tokens_per_s: float,
          preempted_from: float | None = None) -> pd.DataFrame:
    """One synthetic curve: throughput saturating at `plateau_tokens_per_s`, Little's-law E2E."""
    mean_batch = MAX_NUM_SEQS * 0.97
    throughput = plateau_tokens_per_s * mean_batch / (mean_batch + 16.0)
    request_throughput = throughput / (input_len + output_len)
    preempted = MAX_NUM_SEQS >= preempted_from if preempted_from is not None else np.zeros(MAX_NUM_SEQS.size, bool)
    status = np.where(preempted, PREEMPTED, "ok")
    return pd.DataFrame({
        col.MODEL: model, col.MAX_NUM_SEQS: MAX_NUM_SEQS, col.INPUT_LEN_NOMINAL: input_len,
        col.OUTPUT_LEN_NOMINAL: output_len, col.MEAN_BATCH_SIZE: mean_batch,
        col.TOTAL_TOKEN_THROUGHPUT: throughput, col.E2E_LATENCY_S: mean_batch / request_throughput,
        col.STATUS: status,
    })


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    failed = pd.DataFrame({col.MODEL: ["small"], col.STATUS: ["server_start_failed"]})
    return pd.concat([_runs("small", 100, 300, 10_000), _runs("big", 100, 300, 4_000, preempted_from=64),
                      failed], ignore_index=True)


@pytest.fixture(scope="module")
def sweep() -> pd.DataFrame:
    """'small' sweeps OL at IL 250; 'grid' has a full IL x OL grid (a simulated-style sweep)."""
    parts = [_runs("small", 250, ol, 20_000 / (1 + ol / 500)) for ol in (130, 260, 520)]
    parts += [_runs("grid", il, ol, 9_000 / (1 + (il + ol) / 1000)) for il in (128, 512) for ol in (128, 512)]
    parts += [_runs("grid", 128, 1024, 9_000 / 2.2)]
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def table1():
    paper = load_paper_table1(CONFIG / "paper_table1.yaml")
    arch = load_architectures(MODELS_FILE)[paper.model]
    hardware = load_hardware(HARDWARE_FILE)[paper.hardware]
    return paper, arch, hardware, table1_frame(arch, hardware, paper.rows)


def _cross_points(ax) -> set[tuple[float, float]]:
    return {(float(x), float(y)) for line in ax.get_lines() if line.get_marker() == "x"
            for x, y in zip(line.get_xdata(), line.get_ydata())}


# --- Fig. 1 -------------------------------------------------------------------------

def test_fig1_two_panels_one_line_per_model_and_crosses_on_preempted_runs(runs):
    figure = plot_batch_scaling(runs, LABEL)
    throughput_ax, e2e_ax = figure.axes
    assert LABEL in figure.get_suptitle()
    assert throughput_ax.get_xscale() == "log"
    model_lines = [line for line in throughput_ax.get_lines() if line.get_marker() != "x"]
    assert sorted(line.get_label() for line in model_lines) == ["big", "small"]
    preempted = runs[runs[col.STATUS] == PREEMPTED]
    assert len(preempted) == 2
    for ax, metric in ((throughput_ax, col.TOTAL_TOKEN_THROUGHPUT), (e2e_ax, col.E2E_LATENCY_S)):
        assert _cross_points(ax) == set(zip(preempted[col.MEAN_BATCH_SIZE], preempted[metric]))
    legend = e2e_ax.get_legend()
    legend_labels = [text.get_text() for text in legend.get_texts()]
    assert any("KV cache capacity exceeded" in label for label in legend_labels)
    # The legend lies outside both panels, so it can cover no curve whatever the data.
    figure.canvas.draw()
    box = legend.get_window_extent()
    assert not any(box.overlaps(ax.get_window_extent()) for ax in (throughput_ax, e2e_ax))


def test_fig1_has_no_crosses_without_preemption(runs):
    figure = plot_batch_scaling(runs[runs[col.STATUS] != PREEMPTED], LABEL)
    assert all(not _cross_points(ax) for ax in figure.axes)


def test_fig1_needs_its_columns_and_usable_runs(runs):
    with pytest.raises(PlotInputError, match=col.E2E_LATENCY_S):
        plot_batch_scaling(runs.drop(columns=[col.E2E_LATENCY_S]), LABEL)
    with pytest.raises(PlotInputError, match="no run"):
        plot_batch_scaling(runs[runs[col.STATUS] == "server_start_failed"], LABEL)


# --- Fig. 2 -------------------------------------------------------------------------

def test_sweep_panels_find_output_and_input_length_sweeps(sweep):
    panels = [(p.model, p.swept_column, p.fixed_value) for p in sweep_panels(sweep)]
    # 'grid': IL 128 has three OLs (the modal IL), OL 128 and 512 tie for the modal OL -> the smaller.
    assert panels == [("grid", col.OUTPUT_LEN_NOMINAL, 128.0), ("grid", col.INPUT_LEN_NOMINAL, 128.0),
                      ("small", col.OUTPUT_LEN_NOMINAL, 250.0)]


def test_fig2_one_column_per_panel_one_line_per_swept_length(sweep):
    figure = plot_length_sweeps(sweep, LABEL)
    assert len(figure.axes) == 2 * 3
    top = figure.axes[:3]  # subplots(2, n) lists the top row first
    assert [len(ax.get_lines()) for ax in top] == [3, 2, 3]
    assert [line.get_label() for line in top[2].get_lines()] == ["OL 130", "OL 260", "OL 520"]
    assert all(ax.get_xscale() == "log" for ax in figure.axes)
    bottom_small = figure.axes[5]
    expected = sweep[(sweep[col.MODEL] == "small") & (sweep[col.OUTPUT_LEN_NOMINAL] == 130)]
    np.testing.assert_allclose(bottom_small.get_lines()[0].get_xdata(), expected[col.MEAN_BATCH_SIZE])
    np.testing.assert_allclose(top[2].get_lines()[0].get_xdata(), expected[col.MAX_NUM_SEQS])


def test_fig2_single_workload_model_gets_one_panel(runs):
    usable = runs[runs[col.STATUS] == "ok"]
    figure = plot_length_sweeps(usable, LABEL)
    assert len(figure.axes) == 2 * 2
    assert all(len(ax.get_lines()) == 1 for ax in figure.axes)


# --- Table I ------------------------------------------------------------------------

def test_table1_active_context_and_roofline_values(table1):
    paper, arch, hardware, frame = table1
    assert len(frame) == 7
    assert frame["active_context_tokens"].tolist() == [2048, 17408, 132096, 9216, 66560, 9216, 66560]
    # AI = 2 H_q / (H_kv b_kv) = 2 * 32 / (8 * 2) = 4 for every configuration.
    assert frame["intensity_model_flop_per_byte"].tolist() == pytest.approx([4.0] * 7)
    # Bandwidth-bound: the ceiling is AI x BW = 4 x 1.62 TB/s = 6.48 TFLOP/s, far below 989.
    assert frame["attainable_tflop_per_s"].tolist() == pytest.approx([6.48] * 7)
    assert frame["dram_util_at_model_intensity_pct"].iloc[0] == pytest.approx(100 * 1.79 / 6.48)


def test_table1_intensity_close_to_the_papers_measurements(table1):
    """Within 5% of the mean measured AI, within 6% (not 5%) of every measured row."""
    _, _, _, frame = table1
    model = frame["intensity_model_flop_per_byte"]
    measured = frame["intensity_paper_flop_per_byte"]
    assert measured.min() == pytest.approx(3.79) and measured.max() == pytest.approx(3.97)
    assert np.all(np.abs(model - measured.mean()) / measured.mean() < 0.05)
    assert np.all(np.abs(model - measured) / measured < 0.06)
    assert np.any(np.abs(model - measured) / measured > 0.05)   # the honest caveat: two rows at 3.79
    gap_to_mean, worst_gap = intensity_agreement(frame)
    assert gap_to_mean == pytest.approx(4.0 / 3.9 - 1)
    assert worst_gap == pytest.approx(4.0 / 3.79 - 1)


def test_table1_paper_dram_util_is_its_flops_over_its_intensity_times_bandwidth(table1):
    """The paper's three measured columns agree with BW_max = 1.62 TB/s to its printed precision."""
    _, _, _, frame = table1
    np.testing.assert_allclose(frame["dram_util_at_paper_intensity_pct"], frame["paper_dram_util_pct"], atol=0.15)


def test_table1_latex_marks_ours_analytical(table1):
    paper, arch, hardware, frame = table1
    latex = table1_latex(frame, arch, hardware, paper.source)
    assert r"\toprule" in latex and r"\bottomrule" in latex and r"\label{tab:table1}" in latex
    assert "analytical (roofline), not measured" in latex
    assert "(258, 256, 256) & 132{,}096 & 4.00 & 3.96 & 6.48 & 5.89 & 90.9 & 91.8 & 91.9" in latex
    assert table1_display(frame).shape == (7, 8)


def test_table1_rejects_inconsistent_active_context(table1):
    paper, arch, hardware, _ = table1
    wrong = paper.rows.copy()
    wrong.loc[0, "active_context_tokens"] = 1024
    with pytest.raises(ConfigError, match="B \\(IL \\+ OL\\)"):
        table1_frame(arch, hardware, wrong)


def test_load_paper_table1_names_missing_key(tmp_path):
    path = tmp_path / "table1.yaml"
    path.write_text("source: x\nmodel: mistral-7b\nhardware: h100-64gb\nrows:\n  - {batch_size: 4}\n")
    with pytest.raises(ConfigError, match="rows\\[0\\] lacks key"):
        load_paper_table1(path)


# --- saving and adapters ------------------------------------------------------------

def test_resaving_a_figure_gives_identical_bytes(runs, tmp_path):
    first = (tmp_path / "a.pdf", tmp_path / "a.png")
    second = (tmp_path / "b.pdf", tmp_path / "b.png")
    save_figure(plot_batch_scaling(runs, LABEL), *first)
    save_figure(plot_batch_scaling(runs, LABEL), *second)
    for one, other in zip(first, second):
        assert one.read_bytes() == other.read_bytes()


def _run_adapter(script: str, inputs: dict, outputs: dict, params: dict, log: Path) -> None:
    snakemake = SimpleNamespace(input=SimpleNamespace(**inputs), output=SimpleNamespace(**outputs),
                                params=SimpleNamespace(**params), log=[str(log)])
    runpy.run_path(str(REPO / "workflow" / "scripts" / script), init_globals={"snakemake": snakemake})


def test_adapters_write_their_artefacts(runs, sweep, tmp_path):
    runs.to_parquet(tmp_path / "runs.parquet")
    sweep.to_parquet(tmp_path / "clean.parquet")
    # Fig. 2's adapter is the dataset figures' (tests/test_heldout_figures.py).
    fig1_params = {"dataset_labels": [LABEL, "sweep"], "output_lens": [None, 260]}
    inputs = {"runs": [str(tmp_path / "runs.parquet"), str(tmp_path / "clean.parquet")]}
    outputs = {"pdf": str(tmp_path / "fig1.pdf"), "png": str(tmp_path / "fig1.png")}
    _run_adapter("plot_fig1.py", inputs, outputs, fig1_params, tmp_path / "fig1.log")
    assert Path(outputs["pdf"]).read_bytes().startswith(b"%PDF")
    assert Path(outputs["png"]).read_bytes().startswith(b"\x89PNG")
    assert LABEL in (tmp_path / "fig1.log").read_text()
    outputs = {"tex": str(tmp_path / "table1.tex"), "html": str(tmp_path / "table1.html"),
               "csv": str(tmp_path / "table1.csv")}
    _run_adapter("table1.py", {"paper": str(CONFIG / "paper_table1.yaml"), "models": str(MODELS_FILE),
                               "hardware": str(HARDWARE_FILE)}, outputs, {}, tmp_path / "table1.log")
    assert "not measured" in Path(outputs["tex"]).read_text()
    assert "<table" in Path(outputs["html"]).read_text() and "\\" not in Path(outputs["html"]).read_text()
    assert len(pd.read_csv(outputs["csv"])) == 7
