"""What the figure modules share: writing a figure without timestamps, and the colours and
order of the prediction curves (one model at one nominal output length)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import imsave

from slim import columns as col
from slim.atomic import write_atomic

PNG_DPI = 150
CURVE_KEYS = (col.MODEL, col.OUTPUT_LEN_NOMINAL)
"""A prediction curve: the runs of one model at one nominal output length."""

METRIC_AXIS_LABELS = {col.THROUGHPUT_METRIC.name: "Throughput (tokens/s)", col.E2E_METRIC.name: "E2E latency (s)"}
"""Axis label of each `columns.PredictionMetric`."""

# One sequential colour map per model, so curves of one model share a hue and
# darken with output length (Fig. 9's same-curve panel holds every curve).
MODEL_COLORMAPS = ("Blues", "Oranges", "Greens", "Purples", "Reds", "Greys")


def save_figure(figure: Figure, pdf_path: str | Path, png_path: str | Path, dpi: int = PNG_DPI) -> None:
    """Write the figure as PNG and PDF with no timestamps or software version in the
    metadata, so saving the same figure twice gives byte-identical files.

    The figure's layout engine (constrained layout) runs during the PNG render (`write_png`) and
    is then fixed for the PDF: left active, it would lay the figure out anew for every save, and
    its result depends on the previous save's resolution. Always rendering the PNG first keeps
    the two files consistent and deterministic, with two renders instead of three. Each file is
    written crash-safely (`slim.atomic.write_atomic`): a killed job leaves no half-written figure.
    """
    write_atomic(png_path, lambda target: write_png(figure, target, dpi))
    if figure.get_layout_engine() is not None:
        figure.set_layout_engine("none")
    write_atomic(pdf_path, lambda target: figure.savefig(
        target, format="pdf", metadata={"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None}))


def write_png(figure: Figure, path: str | Path, dpi: int = PNG_DPI) -> None:
    """Render the figure at `dpi` with Agg and write it as a PNG without a software version.

    One draw both runs the figure's layout engine and renders: ``savefig`` with a layout engine
    first draws the whole figure once without output to lay it out and then again to render it,
    which costs about a tenth more CPU for the same pixels. The figure's dpi is restored afterwards.
    """
    canvas = FigureCanvasAgg(figure)
    figure_dpi = figure.dpi
    figure.set_dpi(dpi)
    try:
        canvas.draw()
        imsave(path, canvas.buffer_rgba(), format="png", origin="upper", dpi=dpi, metadata={"Software": None})
    finally:
        figure.set_dpi(figure_dpi)


def curves(rows: pd.DataFrame):
    """(curve key, its rows sorted by batch size) for every prediction curve, in a fixed order."""
    for key, curve in rows.groupby(list(CURVE_KEYS), sort=True):
        yield key, curve.sort_values(col.MEAN_BATCH_SIZE)


def curve_colors(rows: pd.DataFrame) -> dict[tuple, tuple]:
    """One colour per curve: a hue per model, darker for longer outputs."""
    keys = [key for key, _ in curves(rows)]
    models = sorted({model for model, _ in keys})
    colors = {}
    for model_index, model in enumerate(models):
        colormap = colormaps[MODEL_COLORMAPS[model_index % len(MODEL_COLORMAPS)]]
        lengths = sorted(output_len for name, output_len in keys if name == model)
        # Sequential maps run light -> dark; the ends are too pale or too dark to read.
        shades = np.linspace(0.45, 0.9, len(lengths)) if len(lengths) > 1 else [0.7]
        for output_len, shade in zip(lengths, shades):
            colors[(model, output_len)] = colormap(shade)
    return colors
