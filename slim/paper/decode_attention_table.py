"""Paper Table I: the decode-attention roofline of Mistral-7B, ours analytical (zero
parameters, `slim.gpu.roofline`) beside the paper's measured values (config/paper_table1.yaml).

`table1_frame` is a pure function of an architecture, a GPU and the paper's configurations;
`table1_latex` renders it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from slim import columns as col
from slim.errors import ConfigError
from slim.gpu.roofline import (
    attainable_flops_per_s,
    decode_attention_intensity,
    decode_context_len,
    ridge_point_flop_per_byte,
)
from slim.paper.table_format import to_booktabs, to_html_page
from slim.specs.architecture import Architecture
from slim.specs.hardware import Hardware
from slim.yaml_files import SAFE_LOADER, require_keys


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
        raw = yaml.load(path.read_text(), Loader=SAFE_LOADER)
    except FileNotFoundError as error:
        raise ConfigError(f"paper Table I file not found: {path}") from error
    for key in ("source", "model", "hardware", "rows"):
        if not isinstance(raw, dict) or key not in raw:
            raise ConfigError(f"{path}: missing top-level key '{key}'")
    for index, row in enumerate(raw["rows"]):
        require_keys(row, PAPER_TABLE1_KEYS, f"{path}: rows[{index}]")
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
    col.require_columns(paper, PAPER_TABLE1_KEYS, "table1_frame: the paper's rows")
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


def table1_html(frame: pd.DataFrame, arch: Architecture, hw: Hardware, source: str) -> str:
    """The same table as an HTML page (`tables.to_html_page`), for the Snakemake report."""
    return to_html_page(table1_display(frame), table1_caption(frame, arch, hw, source), "Table I")
