"""The paper's characterisation artefacts (Section V): Fig. 1 (throughput and E2E
latency against the mean batch size), Fig. 2 (the same under length sweeps) and
Table I (decode-attention roofline of Mistral-7B, ours analytical beside the
paper's measured values).

Plot functions are pure: they take a per-run table (columns of `slim.columns`) and
return a matplotlib `Figure` built without pyplot; save it with
`slim.plots.save_figure`. `table1_frame` is a pure function of an architecture, a
GPU and the paper's configurations; `table1_latex` renders it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from slim import columns as col
from slim.errors import ConfigError
from slim.gpu.roofline import (
    attainable_flops_per_s,
    decode_attention_intensity,
    decode_context_len,
    ridge_point_flop_per_byte,
)
from slim.plots import PlotInputError, check_columns
from slim.specs.architecture import Architecture
from slim.specs.hardware import Hardware
from slim.tables import to_booktabs

FIG1_STATUSES = ("ok", "preempted")
PREEMPTED = "preempted"
"""Run status set by ingest when vLLM preempted requests: the KV cache capacity was exceeded."""

FIG1_REQUIRED_COLUMNS = (col.MODEL, col.MAX_NUM_SEQS, col.MEAN_BATCH_SIZE, col.TOTAL_TOKEN_THROUGHPUT,
                         col.E2E_LATENCY_S, col.STATUS)
FIG2_REQUIRED_COLUMNS = (col.MODEL, col.MAX_NUM_SEQS, col.MEAN_BATCH_SIZE, col.TOTAL_TOKEN_THROUGHPUT,
                         col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL)

# Swept length -> (the length held fixed, short label used in titles and legends).
SWEEPS = {
    col.OUTPUT_LEN_NOMINAL: (col.INPUT_LEN_NOMINAL, "OL"),
    col.INPUT_LEN_NOMINAL: (col.OUTPUT_LEN_NOMINAL, "IL"),
}
THROUGHPUT_LABEL = "Throughput (total tokens/s)"
E2E_LABEL = "E2E latency (s, Little's law)"
MODEL_MARKERS = ("o", "s", "^", "D", "v", "P")
SWEEP_COLORMAP = "viridis"
CROSS_STYLE = {"marker": "x", "markersize": 9, "markeredgewidth": 2.0, "linestyle": "none", "color": "crimson"}


# --- Fig. 1 -------------------------------------------------------------------------

def batch_scaling_runs(runs: pd.DataFrame, output_len: float | None = None) -> pd.DataFrame:
    """The runs Fig. 1 shows: status ``ok`` or ``preempted`` with measured metrics.

    A dataset with one workload per model (ShareGPT traces) is shown whole
    (``output_len=None``). A dataset with length sweeps is shown at one nominal
    output length: the runs at ``output_len`` and, per model, at the most common
    nominal input length among them (ties: the smallest), so each model gives one
    curve. Raises `PlotInputError` if nothing is left.
    """
    check_columns(runs, FIG1_REQUIRED_COLUMNS, "runs")
    shown = runs[runs[col.STATUS].isin(FIG1_STATUSES)].dropna(
        subset=[col.MEAN_BATCH_SIZE, col.TOTAL_TOKEN_THROUGHPUT, col.E2E_LATENCY_S])
    if output_len is not None:
        check_columns(shown, (col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL), "runs")
        shown = shown[shown[col.OUTPUT_LEN_NOMINAL] == output_len]
        modal_input = shown.groupby(col.MODEL)[col.INPUT_LEN_NOMINAL].transform(_modal_value)
        shown = shown[shown[col.INPUT_LEN_NOMINAL] == modal_input]
    if shown.empty:
        where = "" if output_len is None else f" at output length {output_len:g}"
        raise PlotInputError(f"Fig. 1: no run with status in {FIG1_STATUSES} and measured metrics{where}")
    return shown


def plot_batch_scaling(runs: pd.DataFrame, dataset_label: str, output_len: float | None = None) -> Figure:
    """Fig. 1 for one dataset: see `plot_batch_scaling_rows`."""
    return plot_batch_scaling_rows([(dataset_label, runs, output_len)])


def plot_batch_scaling_rows(rows: Sequence[tuple[str, pd.DataFrame, float | None]]) -> Figure:
    """Fig. 1: total-token throughput (Eq. 6) and E2E latency against the mean batch size.

    ``T = B (IL + OL) / E2E`` (Eq. 6) is the benchmark's total-token throughput;
    E2E latency is Little's law, ``E2E = mean batch size / request throughput``
    (column `e2e_latency_s`). The x-axis is the *mean* batch size measured while
    serving (log scale), not the configured ``--max-num-seqs``. One line per model
    through its runs in ``max_num_seqs`` order; runs with status ``preempted``
    (vLLM preempted requests: the KV cache capacity was exceeded) carry a red cross.

    One figure row per ``(dataset label, runs, output_len)``; the runs shown are
    `batch_scaling_runs` (the whole dataset, or one nominal output length of a
    length sweep). A model keeps its colour and marker across rows.
    """
    if not rows:
        raise PlotInputError("Fig. 1: no dataset to plot")
    shown_rows = [(label, batch_scaling_runs(runs, output_len), output_len) for label, runs, output_len in rows]
    models = sorted(set().union(*(shown[col.MODEL].unique() for _, shown, _ in shown_rows)))
    figure = Figure(figsize=(11.0, 0.6 + 4.2 * len(rows)), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(rows), 2, squeeze=False)
    for row_axes, (label, shown, output_len) in zip(axes, shown_rows):
        _draw_batch_scaling(row_axes, shown, models)
        workload = "" if output_len is None else f", OL {output_len:g}"
        row_axes[0].set_title(f"{label}{workload}", loc="left", fontsize="medium")
    title = "Throughput and E2E latency vs mean batch size"
    figure.suptitle(title if len(rows) > 1 else f"{title}, {rows[0][0]}")
    return figure


def _draw_batch_scaling(axes: Sequence[Axes], shown: pd.DataFrame, models: list[str]) -> None:
    """One row of Fig. 1: throughput and E2E panels, a legend of the models present."""
    present = [model for model in models if model in set(shown[col.MODEL])]
    for ax, metric, label in zip(axes, (col.TOTAL_TOKEN_THROUGHPUT, col.E2E_LATENCY_S),
                                 (THROUGHPUT_LABEL, E2E_LABEL)):
        for model in present:
            index = models.index(model)
            curve = shown[shown[col.MODEL] == model].sort_values([col.MAX_NUM_SEQS, col.MEAN_BATCH_SIZE])
            ax.plot(curve[col.MEAN_BATCH_SIZE], curve[metric], color=f"C{index % 10}",
                    marker=MODEL_MARKERS[index % len(MODEL_MARKERS)], markersize=4.5, linewidth=1.4,
                    label=model, zorder=2)
            preempted = curve[curve[col.STATUS] == PREEMPTED]
            if not preempted.empty:
                ax.plot(preempted[col.MEAN_BATCH_SIZE], preempted[metric], zorder=4, **CROSS_STYLE)
        _log_batch_axis(ax, "Mean batch size (running requests)")
        ax.set_ylabel(label)
    handles = [Line2D([], [], color=f"C{models.index(model) % 10}",
                      marker=MODEL_MARKERS[models.index(model) % len(MODEL_MARKERS)], markersize=4.5, label=model)
               for model in present]
    n_preempted = int((shown[col.STATUS] == PREEMPTED).sum())
    if n_preempted:
        handles.append(Line2D([], [], label=f"KV cache capacity exceeded (preempted, {n_preempted} run(s))",
                              **CROSS_STYLE))
    axes[0].legend(handles=handles, loc="upper left", fontsize="small")


# --- Fig. 2 -------------------------------------------------------------------------

@dataclass(frozen=True)
class SweepPanel:
    """One model's sweep of one nominal length, the other held at `fixed_value`."""

    model: str
    swept_column: str          # col.OUTPUT_LEN_NOMINAL or col.INPUT_LEN_NOMINAL
    fixed_column: str
    fixed_value: float

    @property
    def title(self) -> str:
        swept_label = SWEEPS[self.swept_column][1]
        fixed_label = SWEEPS[self.fixed_column][1]
        return f"{self.model}: {swept_label} sweep ({fixed_label} {self.fixed_value:g})"


def sweep_panels(runs: pd.DataFrame) -> list[SweepPanel]:
    """The length sweeps in a per-run table: per model (sorted by name), an output-length
    panel and/or an input-length panel.

    A model gets a panel for each nominal length that takes more than one value
    among the runs at the other length's most common value (ties: the smallest),
    so a full IL x OL grid yields both panels and a one-dimensional sweep yields
    one. A model with no sweep at all gets a single output-length panel (one line).
    """
    check_columns(runs, FIG2_REQUIRED_COLUMNS, "runs")
    panels = []
    for model in sorted(runs[col.MODEL].unique()):
        rows = runs[runs[col.MODEL] == model]
        model_panels = []
        for swept, (fixed, _) in SWEEPS.items():
            fixed_value = _modal_value(rows[fixed])
            if rows.loc[rows[fixed] == fixed_value, swept].nunique() > 1:
                model_panels.append(SweepPanel(model, swept, fixed, fixed_value))
        if not model_panels:
            model_panels.append(SweepPanel(model, col.OUTPUT_LEN_NOMINAL, col.INPUT_LEN_NOMINAL,
                                           _modal_value(rows[col.INPUT_LEN_NOMINAL])))
        panels += model_panels
    return panels


def plot_length_sweeps(runs: pd.DataFrame, dataset_label: str) -> Figure:
    """Fig. 2: total-token throughput (Eq. 6) under the length sweeps.

    One column per `SweepPanel` (see `sweep_panels`); top row against the
    configured ``max_num_seqs``, bottom row against the measured mean batch size
    (both log scale). One line per nominal value of the swept length, coloured
    from short (dark) to long (light). Pass the cleaned runs (status ``ok``).
    """
    usable = runs.dropna(subset=[col.MAX_NUM_SEQS, col.MEAN_BATCH_SIZE, col.TOTAL_TOKEN_THROUGHPUT])
    panels = sweep_panels(usable)
    if not panels:
        raise PlotInputError("plot_length_sweeps: no run with measured throughput to plot")
    figure = Figure(figsize=(3.9 * len(panels) + 0.6, 7.4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, len(panels), squeeze=False)
    for column, panel in enumerate(panels):
        rows = usable[(usable[col.MODEL] == panel.model) & (usable[panel.fixed_column] == panel.fixed_value)]
        values = sorted(rows[panel.swept_column].unique())
        shades = colormaps[SWEEP_COLORMAP](np.linspace(0.0, 0.85, len(values)) if len(values) > 1 else [0.3])
        for row, x_column, x_label in ((0, col.MAX_NUM_SEQS, "max_num_seqs (configured)"),
                                       (1, col.MEAN_BATCH_SIZE, "Mean batch size (measured)")):
            ax = axes[row, column]
            for value, shade in zip(values, shades):
                curve = rows[rows[panel.swept_column] == value].sort_values([col.MAX_NUM_SEQS, col.MEAN_BATCH_SIZE])
                ax.plot(curve[x_column], curve[col.TOTAL_TOKEN_THROUGHPUT], color=shade, marker="o",
                        markersize=4, linewidth=1.4, label=f"{SWEEPS[panel.swept_column][1]} {value:g}")
            _log_batch_axis(ax, x_label)
            ax.set_ylabel(THROUGHPUT_LABEL if column == 0 else "")
        axes[0, column].set_title(panel.title, fontsize="medium")
        axes[0, column].legend(loc="upper left", fontsize="small")
    figure.suptitle(f"Throughput under the length sweeps, {dataset_label}")
    return figure


# --- Table I ------------------------------------------------------------------------

@dataclass(frozen=True)
class PaperTable1:
    """The paper's Table I as reported (config/paper_table1.yaml): reference values only."""

    source: str
    model: str
    hardware: str
    rows: pd.DataFrame       # batch_size, input_len, output_len, active_context_tokens, and the measured
                             # intensity_flop_per_byte, tflop_per_s, dram_util_pct


PAPER_TABLE1_KEYS = ("batch_size", "input_len", "output_len", "active_context_tokens",
                     "intensity_flop_per_byte", "tflop_per_s", "dram_util_pct")


def load_paper_table1(path: str | Path = "config/paper_table1.yaml") -> PaperTable1:
    """Read the paper's Table I; raise `ConfigError` naming the file and the missing key."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError as error:
        raise ConfigError(f"paper Table I file not found: {path}") from error
    for key in ("source", "model", "hardware", "rows"):
        if not isinstance(raw, dict) or key not in raw:
            raise ConfigError(f"{path}: missing top-level key '{key}'")
    for index, row in enumerate(raw["rows"]):
        missing = [key for key in PAPER_TABLE1_KEYS if key not in row]
        if missing:
            raise ConfigError(f"{path}: rows[{index}] lacks key(s) {', '.join(missing)}")
    rows = pd.DataFrame(raw["rows"], columns=list(PAPER_TABLE1_KEYS))
    return PaperTable1(source=str(raw["source"]), model=str(raw["model"]), hardware=str(raw["hardware"]),
                       rows=rows)


def table1_frame(arch: Architecture, hw: Hardware, paper: pd.DataFrame) -> pd.DataFrame:
    """Table I: analytical decode-attention roofline for each paper configuration (B, IL, OL),
    beside the paper's measured values.

    Analytical columns (roofline, not measured):

    * ``active_context_tokens = B (IL + OL)``, the table's convention (context at
      the last decode step, `slim.gpu.roofline.decode_context_len`);
    * ``intensity_model = 4 B H_q d_h ctx / (2 B H_kv d_h ctx b_kv) = 2 H_q / (H_kv b_kv)``
      FLOP/B (`decode_attention_intensity`; 4.0 for Mistral-7B with fp16 KV);
    * ``attainable = min(F_max, AI x BW_max)`` (`attainable_flops_per_s`), in TFLOP/s;
    * ``dram_util_at_model_intensity_pct = 100 x paper TFLOP/s / (AI_model x BW_max)``:
      the DRAM bandwidth the paper's measured FLOP rate needs if the kernel moved
      exactly the roofline's bytes (equivalently, its fraction of the roofline ceiling);
    * ``dram_util_at_paper_intensity_pct = 100 x paper TFLOP/s / (AI_paper x BW_max)``:
      the same with the paper's measured intensity, a consistency check of the
      paper's own three columns against ``BW_max``.

    Raises `ConfigError` if a stated active context disagrees with ``B (IL + OL)``.
    """
    missing = [key for key in PAPER_TABLE1_KEYS if key not in paper.columns]
    if missing:
        raise ConfigError(f"table1_frame: the paper rows lack column(s) {', '.join(missing)}")
    batch = paper["batch_size"].to_numpy(dtype=float)
    input_len = paper["input_len"].to_numpy(dtype=float)
    output_len = paper["output_len"].to_numpy(dtype=float)
    active = batch * decode_context_len(input_len, output_len)
    stated = paper["active_context_tokens"].to_numpy(dtype=float)
    if not np.array_equal(active, stated):
        bad = np.flatnonzero(active != stated)
        raise ConfigError(f"paper Table I row(s) {bad.tolist()}: stated active context {stated[bad].tolist()} "
                          f"differs from B (IL + OL) = {active[bad].tolist()}")
    intensity = decode_attention_intensity(arch, batch, input_len, output_len)
    attainable_tflop_per_s = attainable_flops_per_s(hw, intensity) / 1e12
    bandwidth_tb_per_s = hw.hbm_bandwidth_bytes_per_s / 1e12
    paper_tflop_per_s = paper["tflop_per_s"].to_numpy(dtype=float)
    paper_intensity = paper["intensity_flop_per_byte"].to_numpy(dtype=float)
    return pd.DataFrame({
        "config": [f"({b:d}, {i:d}, {o:d})" for b, i, o in zip(paper["batch_size"].astype(int),
                                                              paper["input_len"].astype(int),
                                                              paper["output_len"].astype(int))],
        "batch_size": batch,
        "input_len": input_len,
        "output_len": output_len,
        "active_context_tokens": active,
        "intensity_model_flop_per_byte": intensity,
        "intensity_paper_flop_per_byte": paper_intensity,
        "attainable_tflop_per_s": attainable_tflop_per_s,
        "paper_tflop_per_s": paper_tflop_per_s,
        "dram_util_at_model_intensity_pct": 100.0 * paper_tflop_per_s / (intensity * bandwidth_tb_per_s),
        "dram_util_at_paper_intensity_pct": 100.0 * paper_tflop_per_s / (paper_intensity * bandwidth_tb_per_s),
        "paper_dram_util_pct": paper["dram_util_pct"].to_numpy(dtype=float),
    })


def table1_display(frame: pd.DataFrame) -> pd.DataFrame:
    """Table I as printed: configurations as rows, grouped (ours | paper) column headers.

    Every cell is pre-formatted (contexts with thousands separators, intensity and
    TFLOP/s at 2 decimals, utilisation at 1) so `to_booktabs` passes them through.
    """
    columns = pd.MultiIndex.from_tuples([
        ("Active ctx", "tokens"),
        ("AI (FLOP/B)", "roofline"), ("AI (FLOP/B)", "paper"),
        ("TFLOP/s", "roofline ceiling"), ("TFLOP/s", "paper"),
        (r"DRAM util (\%)", "at roofline AI"), (r"DRAM util (\%)", "at paper AI"), (r"DRAM util (\%)", "paper"),
    ])
    cells = []
    for _, row in frame.iterrows():
        cells.append([
            f"{row['active_context_tokens']:,.0f}".replace(",", "{,}"),
            f"{row['intensity_model_flop_per_byte']:.2f}", f"{row['intensity_paper_flop_per_byte']:.2f}",
            f"{row['attainable_tflop_per_s']:.2f}", f"{row['paper_tflop_per_s']:.2f}",
            f"{row['dram_util_at_model_intensity_pct']:.1f}", f"{row['dram_util_at_paper_intensity_pct']:.1f}",
            f"{row['paper_dram_util_pct']:.1f}",
        ])
    index = pd.Index(list(frame["config"]), name="(B, IL, OL)")
    return pd.DataFrame(cells, index=index, columns=columns)


def intensity_agreement(frame: pd.DataFrame) -> tuple[float, float]:
    """(gap to the mean measured AI, largest gap to any measured row), both relative to the
    measured value: ``|AI_model - AI_paper| / AI_paper``."""
    model = frame["intensity_model_flop_per_byte"].to_numpy(dtype=float)
    paper = frame["intensity_paper_flop_per_byte"].to_numpy(dtype=float)
    gap_to_mean = float(np.max(np.abs(model - paper.mean())) / paper.mean())
    return gap_to_mean, float(np.max(np.abs(model - paper) / paper))


def table1_caption(frame: pd.DataFrame, arch: Architecture, hw: Hardware, source: str) -> str:
    """The LaTeX caption: which columns are analytical and which are the paper's measurements."""
    ridge = ridge_point_flop_per_byte(hw)
    gap_to_mean, worst_gap = intensity_agreement(frame)
    worst_row = int(np.argmax(np.abs(frame["intensity_model_flop_per_byte"] - frame["intensity_paper_flop_per_byte"])
                              / frame["intensity_paper_flop_per_byte"]))
    return (
        f"Decode attention of {arch.display_name or arch.name} ($H_q = {arch.n_q_heads}$, "
        f"$H_{{kv}} = {arch.n_kv_heads}$) on {hw.display_name or hw.name}. "
        r"Columns marked \emph{roofline} are analytical (roofline), not measured: "
        r"$\mathrm{AI} = 2 H_q / (H_{kv} b_{kv})$ FLOP per byte of fp16 KV read, independent of $B$, IL and OL; "
        r"ceiling $\min(F_{\max}, \mathrm{AI}\times BW_{\max})$ with "
        f"$F_{{\\max}} = {hw.peak_flops_per_s / 1e12:g}$ TFLOP/s and "
        f"$BW_{{\\max}} = {hw.hbm_bandwidth_bytes_per_s / 1e12:g}$ TB/s "
        f"(ridge point {ridge:.0f} FLOP/B, so decode attention is bandwidth-bound). "
        r"DRAM util at roofline / paper AI $= 100\times$ paper TFLOP/s $/(\mathrm{AI}\times BW_{\max})$. "
        f"Columns marked \\emph{{paper}} are the measured values reported in {source}. "
        "Active context is $B(\\mathrm{IL}+\\mathrm{OL})$ as in the paper. "
        f"The roofline AI is {100 * gap_to_mean:.1f}\\% from the mean measured AI and at most "
        f"{100 * worst_gap:.1f}\\% from any measured row (largest gap: {frame['config'].iloc[worst_row]}, "
        f"measured {frame['intensity_paper_flop_per_byte'].iloc[worst_row]:.2f})."
    )


def table1_latex(frame: pd.DataFrame, arch: Architecture, hw: Hardware, source: str) -> str:
    """Booktabs LaTeX of `table1_frame` with `table1_caption`."""
    return to_booktabs(table1_display(frame), table1_caption(frame, arch, hw, source), "tab:table1")


# --- helpers ------------------------------------------------------------------------

def _modal_value(values: pd.Series) -> float:
    """Most common value; the smallest among ties."""
    counts = values.value_counts()
    return float(min(counts.index[counts == counts.max()]))


def _log_batch_axis(ax: Axes, label: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xlabel(label)
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)
