"""Figures 9 and 10: layout, printed MAPEs, input errors, byte-identical saves, and the adapters."""

import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.collections import PolyCollection

from slim import columns as col
from slim.errors import PlotInputError
from slim.paper.figures.common import save_figure
from slim.paper.figures.heldout import plot_heldout_settings, plot_unseen_model
from slim.paper.heldout import IMAI, LLMVISOR, SIM, SLIM, mape_table
from slim.paper.splits import HeldOutSetting

REPO = Path(__file__).resolve().parents[1]
LABEL = "synthetic test data (simulated)"
BATCH_SIZES = np.array([1, 2, 4, 8, 16, 32, 64, 128], dtype=float)
SETTINGS = [
    HeldOutSetting("same_curve", "Same curve", {"max_num_seqs": [1, 4, 8]}, {"max_num_seqs": [2, 16]}),
    HeldOutSetting("input_length", "Input length", not_applicable="n/a: no input-length sweep here"),
    HeldOutSetting("model", "Model (big, OL 390)", {"model": ["small"]}, {"model": ["big"]}),
]


def _curve(setting: str, predictor: str, model: str, output_len: int, role: str, batch: np.ndarray,
           error: float, rng: np.random.Generator) -> pd.DataFrame:
    """Rows of one curve whose predictions are off by about `error` (relative)."""
    input_len = 250.0
    e2e_s = 0.01 * output_len * (1 + batch / 64)
    throughput = batch * (input_len + output_len) / e2e_s
    factor = 1 + error * rng.choice([-1.0, 1.0], size=batch.size)
    return pd.DataFrame({
        "setting": setting, "predictor": predictor, "run_id": [f"{model}/{output_len}/{b:g}" for b in batch],
        "model": model, "max_num_seqs": batch, "input_len_mean": input_len, "output_len_mean": float(output_len),
        "output_len_nominal": float(output_len), "mean_batch_size": batch * 0.98,
        "predicted_mean_batch_size": batch * 0.97 if predictor == SIM else np.nan,
        "measured_throughput": throughput, "predicted_throughput": throughput * factor,
        "measured_e2e_s": e2e_s, "predicted_e2e_s": e2e_s / factor, "role": role,
        # A 5% band for the predictors that have one (SLIM, IMAI), NaN for the others.
        "predicted_e2e_s_band_low": e2e_s / factor / 1.05 if predictor in (SLIM, IMAI) else np.nan,
        "predicted_e2e_s_band_high": e2e_s / factor * 1.05 if predictor in (SLIM, IMAI) else np.nan,
        "predicted_throughput_band_low": throughput * factor / 1.05 if predictor in (SLIM, IMAI) else np.nan,
        "predicted_throughput_band_high": throughput * factor * 1.05 if predictor in (SLIM, IMAI) else np.nan,
        **dict.fromkeys((col.PREDICTED_THROUGHPUT_CONFORMAL_LOW, col.PREDICTED_THROUGHPUT_CONFORMAL_HIGH,
                         col.PREDICTED_E2E_CONFORMAL_LOW_S, col.PREDICTED_E2E_CONFORMAL_HIGH_S), np.nan),
    })[list(col.PREDICTION_COLUMNS)]


def synthetic_predictions() -> pd.DataFrame:
    """Two settings: the same-curve one with two validation curves, the model one with all predictors."""
    rng = np.random.default_rng(7)
    train_b, validate_b = BATCH_SIZES[[0, 2, 3]], BATCH_SIZES[[1, 4, 5, 6, 7]]
    frames = []
    for model, output_len in (("small", 130), ("big", 260)):
        frames.append(_curve("same_curve", SLIM, model, output_len, "train", train_b, 0.02, rng))
        frames.append(_curve("same_curve", SLIM, model, output_len, "validate", validate_b, 0.10, rng))
    frames.append(_curve("model", SLIM, "small", 390, "train", BATCH_SIZES, 0.02, rng))
    for predictor, error in ((SLIM, 0.12), (LLMVISOR, 0.5), (IMAI, 0.3)):
        frames.append(_curve("model", predictor, "big", 390, "validate", BATCH_SIZES, error, rng))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def predictions() -> pd.DataFrame:
    return synthetic_predictions()


def _all_texts(figure) -> list[str]:
    return [text.get_text() for text in figure.findobj(lambda artist: hasattr(artist, "get_text"))]


def test_fig9_has_two_rows_per_applicable_setting_and_prints_slim_mape(predictions):
    mapes = mape_table(predictions)
    figure = plot_heldout_settings(predictions, mapes, SETTINGS, LABEL)
    assert len(figure.axes) == 2 * 2  # two applicable settings, throughput and E2E rows
    texts = _all_texts(figure)
    for setting in ("same_curve", "model"):
        row = mapes[(mapes["setting"] == setting) & (mapes["predictor"] == SLIM)].iloc[0]
        for metric in ("mape_throughput_pct", "mape_e2e_pct"):
            assert any(f"SLIM MAPE {row[metric]:.1f} %" in text for text in texts)
    assert [ax.get_title() for ax in figure.axes[:2]] == ["Same curve", "Model (big, OL 390)"]
    assert LABEL in figure.get_suptitle()
    assert any("Input length" in text and "n/a" in text for text in texts)  # the skipped setting is named
    assert all(ax.get_xscale() == "log" for ax in figure.axes)


def test_fig9_draws_one_colour_per_validation_curve(predictions):
    figure = plot_heldout_settings(predictions, mape_table(predictions), SETTINGS, LABEL)
    legend_labels = [text.get_text() for text in figure.axes[2].get_legend().get_texts()]
    assert legend_labels == ["big, OL 260", "small, OL 130"]


def test_fig9_names_an_applicable_setting_without_predictions(predictions):
    without_model = predictions[predictions["setting"] != "model"]
    with pytest.raises(PlotInputError, match="'model'"):
        plot_heldout_settings(without_model, mape_table(without_model), SETTINGS, LABEL)


def test_fig10_puts_each_predictors_mape_in_the_legend(predictions):
    mapes = mape_table(predictions)
    figure = plot_unseen_model(predictions, mapes, "model", LABEL, setting_label="Model (big, OL 390)")
    assert len(figure.axes) == 2
    for ax, metric in zip(figure.axes, ("mape_throughput_pct", "mape_e2e_pct")):
        labels = [text.get_text() for text in ax.get_legend().get_texts()]
        assert labels[0] == "Measured"
        for predictor in (SLIM, LLMVISOR, IMAI):
            value = mapes.loc[(mapes["setting"] == "model") & (mapes["predictor"] == predictor), metric].item()
            assert f"{predictor} (MAPE {value:.1f} %)" in labels
    assert LABEL in figure.get_suptitle()


def _band_polygons(ax) -> list[np.ndarray]:
    """The vertices of every shaded band (fill_between) of an axes."""
    return [path.vertices for collection in ax.collections if isinstance(collection, PolyCollection)
            for path in collection.get_paths()]


def test_fig9_shades_slims_band_for_every_validation_curve(predictions):
    figure = plot_heldout_settings(predictions, mape_table(predictions), SETTINGS, LABEL)
    # Same-curve E2E panel: two validation curves, two bands, spanning the band columns' values.
    polygons = _band_polygons(figure.axes[2])
    assert len(polygons) == 2
    validate = predictions[(predictions["setting"] == "same_curve") & (predictions["role"] == "validate")]
    heights = np.concatenate([vertices[:, 1] for vertices in polygons])
    assert np.isclose(heights.max(), validate["predicted_e2e_s_band_high"].max())
    assert np.isclose(heights.min(), validate["predicted_e2e_s_band_low"].min())
    assert any("SLIM 90% band" in text for text in _all_texts(figure))


def test_fig10_shades_the_bands_it_has_and_says_which_are_unbounded(predictions):
    figure = plot_unseen_model(predictions, mape_table(predictions), "model", LABEL)
    for ax in figure.axes:
        assert len(_band_polygons(ax)) == 2                     # SLIM and IMAI
        assert "90% band: SLIM, IMAI OOD-LR" in [t.get_text() for t in ax.get_legend().get_texts()]
    undetermined = predictions.copy()
    imai = undetermined["predictor"] == IMAI
    for metric in col.PREDICTION_METRICS:
        undetermined.loc[imai, [metric.band_low, metric.band_high]] = np.nan
    figure = plot_unseen_model(undetermined, mape_table(undetermined), "model", LABEL)
    for ax in figure.axes:
        assert len(_band_polygons(ax)) == 1
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any(label.startswith("90% band: SLIM\n(IMAI OOD-LR: unbounded, not determined") for label in labels)


def test_simulated_ground_truth_is_never_called_measured(predictions):
    """On the simulator's dataset the legends say "simulated" where real data say "measured"."""
    def legend_texts(figure):
        return [text.get_text() for legend in [*figure.legends, *(ax.get_legend() for ax in figure.axes)]
                if legend is not None for text in legend.get_texts()]

    mapes = mape_table(predictions)
    for observed, absent in (("simulated", "measured"), ("measured", "simulated")):
        texts = (legend_texts(plot_unseen_model(predictions, mapes, "model", LABEL, observed=observed))
                 + legend_texts(plot_heldout_settings(predictions, mapes, SETTINGS, LABEL, observed=observed)))
        assert any(observed in text.lower() for text in texts)
        assert not any(absent in text.lower() and "batch" not in text.lower() for text in texts)


def test_fig10_names_a_missing_baseline(predictions):
    without_imai = predictions[predictions["predictor"] != IMAI]
    with pytest.raises(PlotInputError, match=IMAI):
        plot_unseen_model(without_imai, mape_table(without_imai), "model", LABEL)


def test_a_missing_column_is_named(predictions):
    with pytest.raises(PlotInputError, match="predicted_e2e_s"):
        plot_unseen_model(predictions.drop(columns="predicted_e2e_s"), mape_table(predictions), "model", LABEL)


def test_save_figure_writes_byte_identical_files_twice(predictions, tmp_path):
    figure = plot_unseen_model(predictions, mape_table(predictions), "model", LABEL)
    save_figure(figure, tmp_path / "a" / "fig.pdf", tmp_path / "a" / "fig.png")
    save_figure(figure, tmp_path / "b" / "fig.pdf", tmp_path / "b" / "fig.png")
    for name in ("fig.pdf", "fig.png"):
        first, second = (tmp_path / "a" / name).read_bytes(), (tmp_path / "b" / name).read_bytes()
        assert first == second and len(first) > 1000
    assert b"CreationDate" not in (tmp_path / "a" / "fig.pdf").read_bytes()
    assert b"Software" not in (tmp_path / "a" / "fig.png").read_bytes()


def test_write_png_gives_savefigs_bytes_in_one_draw_and_keeps_the_figures_dpi(predictions, tmp_path):
    from slim.paper.figures.common import PNG_DPI, write_png

    saved, written = (plot_unseen_model(predictions, mape_table(predictions), "model", LABEL) for _ in range(2))
    saved.savefig(tmp_path / "saved.png", format="png", dpi=PNG_DPI, metadata={"Software": None})
    figure_dpi = written.dpi
    write_png(written, tmp_path / "written.png")
    assert (tmp_path / "written.png").read_bytes() == (tmp_path / "saved.png").read_bytes()
    assert written.dpi == figure_dpi


@pytest.mark.integration   # a workflow job end to end: the figures adapter
@pytest.mark.parametrize("fig10_setting", ["model", None])
def test_the_dataset_figures_adapter_writes_pdf_png_and_log(predictions, tmp_path, fig10_setting):
    paths = []
    for setting, rows in predictions.groupby("setting"):
        paths.append(str(tmp_path / f"{setting}.parquet"))
        rows.to_parquet(paths[-1], index=False)
    settings_file = tmp_path / "settings.yaml"
    settings_file.write_text(yaml.safe_dump({"settings": [
        {"name": "same_curve", "label": "Same curve", "train": {"max_num_seqs": [1, 4, 8]},
         "validate": {"max_num_seqs": [2, 16]}},
        {"name": "input_length", "label": "Input length", "not_applicable": "n/a: no input-length sweep here"},
        {"name": "model", "label": "Model (big, OL 390)", "train": {"model": ["small"]},
         "validate": {"model": ["big"]}},
    ]}))
    # Fig. 2 draws the cleaned runs: those the predictions were made on.
    runs = predictions.drop_duplicates("run_id")
    pd.DataFrame({col.MODEL: runs["model"], col.MAX_NUM_SEQS: runs["max_num_seqs"], col.INPUT_LEN_NOMINAL: 250.0,
                  col.OUTPUT_LEN_NOMINAL: runs["output_len_nominal"], col.MEAN_BATCH_SIZE: runs["mean_batch_size"],
                  col.TOTAL_TOKEN_THROUGHPUT: runs["measured_throughput"], col.STATUS: "ok"}
                 ).to_parquet(tmp_path / "clean.parquet", index=False)
    names = ["fig9", "fig2"] + (["fig10"] if fig10_setting else [])
    out = SimpleNamespace(**{f"{name}_{ext}": str(tmp_path / f"{name}.{ext}")
                             for name in names for ext in ("pdf", "png")})
    snakemake = SimpleNamespace(input=SimpleNamespace(predictions=paths, settings=str(settings_file),
                                                      clean=str(tmp_path / "clean.parquet")),
                                output=out, params=SimpleNamespace(dataset="synthetic", dataset_label=LABEL,
                                                                   observed="measured", fig10_setting=fig10_setting,
                                                                   length_sweep_models=None),
                                log=[str(tmp_path / "logs" / "figures.log")])
    runpy.run_path(str(REPO / "workflow" / "scripts" / "plot_dataset_figures.py"),
                   init_globals={"snakemake": snakemake})
    for name in names:
        assert (tmp_path / f"{name}.pdf").read_bytes().startswith(b"%PDF")
        assert (tmp_path / f"{name}.png").read_bytes().startswith(b"\x89PNG")
    assert not (tmp_path / "fig10.pdf").exists() or fig10_setting
    assert LABEL in (tmp_path / "logs" / "figures.log").read_text()


def test_sim_joins_figs_9_and_10_where_the_predictions_hold_it(predictions):
    rng = np.random.default_rng(11)
    with_sim = pd.concat([predictions, _curve("model", SIM, "big", 390, "validate", BATCH_SIZES, 0.05, rng)],
                         ignore_index=True)
    mapes = mape_table(with_sim)
    sim_throughput = mapes.loc[(mapes["setting"] == "model") & (mapes["predictor"] == SIM), "mape_throughput_pct"]
    fig9 = plot_heldout_settings(with_sim, mapes, SETTINGS, LABEL)
    assert any(f"SIM MAPE {sim_throughput.item():.1f} %" in text for text in _all_texts(fig9))
    assert "SIM" in fig9.get_suptitle()
    fig10 = plot_unseen_model(with_sim, mapes, "model", LABEL)
    labels = [text.get_text() for text in fig10.axes[0].get_legend().get_texts()]
    assert f"SIM (MAPE {sim_throughput.item():.1f} %)" in labels
    assert "SIM" not in plot_heldout_settings(predictions, mape_table(predictions), SETTINGS, LABEL).get_suptitle()
