"""The modelled characterisation (paper Figs. 3-6, `slim.paper.modelled_characterisation`):
config parsing, the sweep table's known truths (shares, monotone trends, the decode-attention
intensity and roofline), the cost model's GEMM split, the figures and byte-identical CSV output."""

import re
from copy import deepcopy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from slim.errors import ConfigError, PlotInputError
from slim.gpu.roofline import ridge_point_flop_per_byte
from slim.paper.characterisation_config import parse_characterisation_config, resolve_characterisation
from slim.paper.decode_attention_table import load_paper_table1
from slim.paper.figures.common import save_figure
from slim.paper.figures.modelled import (
    plot_attention_roofline,
    plot_decode_kernel_shares,
    plot_decode_utilisation,
    plot_phase_breakdown,
)
from slim.paper.modelled_characterisation import (
    TABLE_COLUMNS,
    characterisation_csv,
    characterisation_table,
    decode_bandwidth_cap,
    decode_phase_metrics,
    load_characterisation,
)
from slim.sim.constants import SIM_CONSTANTS_FILE
from slim.sim.cost import StepCostModel
from slim.specs.architecture import BYTES_PER_FP16, MODELS_FILE, load_architectures
from slim.specs.hardware import HARDWARE_FILE, load_hardware
from slim.specs.workload import Workload

REPO = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
SECTION = CONFIG["characterisation"]


@pytest.fixture(scope="module")
def setup():
    # simulator.constants defaults to the packaged file (config/README.md); the shipped config omits it.
    constants = CONFIG["simulator"].get("constants")
    return load_characterisation(SECTION, MODELS_FILE, HARDWARE_FILE,
                                 SIM_CONSTANTS_FILE if constants is None else REPO / constants)


@pytest.fixture(scope="module")
def table(setup):
    return characterisation_table(*setup)


def sweep(table, quantity):
    return table[table["sweep"] == quantity].sort_values("value")


# --- configuration ------------------------------------------------------------------

def test_config_parses_into_one_point_per_swept_value():
    config = parse_characterisation_config(SECTION)
    assert config.base == Workload(**SECTION["base"])
    points = config.points()
    assert len(points) == sum(len(values) for values in SECTION["sweeps"].values())
    for quantity, value, workload in points:
        assert getattr(workload, quantity) == value
        for other in ("batch_size", "input_len", "output_len"):
            if other != quantity:
                assert getattr(workload, other) == SECTION["base"][other]
    assert Workload(4, 256, 2048).active_context_tokens == 9216       # Table I's convention


@pytest.mark.parametrize("change, message", [
    ({"model": None}, "characterisation: missing key(s) characterisation.model"),
    ({"colour": "red"}, "unknown key(s) colour"),
    ({"base": {"batch_size": 4, "input_len": 256}}, "characterisation.base"),
    ({"base": {"batch_size": 0, "input_len": 256, "output_len": 256}}, "characterisation.base.batch_size"),
    ({"sweeps": {"batch_size": [1, 4, -2]}}, "characterisation.sweeps.batch_size[2]"),
    ({"sweeps": {"batch_size": [4]}}, "characterisation.sweeps.batch_size"),
    ({"sweeps": {"batch_size": [4, 4]}}, "repeats"),
    ({"sweeps": {"depth": [1, 2]}}, "characterisation.sweeps.depth"),
    ({"seed": -1}, "characterisation.seed"),
])
def test_config_errors_name_the_key(change, message):
    section = deepcopy(SECTION)
    for key, value in change.items():
        if value is None:
            del section[key]
        else:
            section[key] = value
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_characterisation_config(section)


@pytest.mark.parametrize("key, value", [("model", "gpt-9"), ("hardware", "tpu-v9")])
def test_unknown_model_or_hardware_names_the_key(key, value):
    config = parse_characterisation_config({**SECTION, key: value})
    with pytest.raises(ConfigError, match=f"characterisation.{key} = '{value}'"):
        resolve_characterisation(config, load_architectures(MODELS_FILE),
                                 load_hardware(HARDWARE_FILE))


# --- the table: known truths ---------------------------------------------------------

def test_table_has_every_point_and_column(table):
    assert list(table.columns) == list(TABLE_COLUMNS)
    assert len(table) == len(parse_characterisation_config(SECTION).points())
    assert np.all(table["active_context_tokens"] == table["batch_size"] * (table["input_len"] + table["output_len"]))
    assert np.all(table["simulated_preemptions"] == 0)        # the sweeps fit the KV cache


def test_shares_sum_to_one(table):
    np.testing.assert_allclose(table["prefill_share"] + table["decode_share"], 1.0, rtol=1e-12)
    np.testing.assert_allclose(table["attention_share"] + table["ffn_share"] + table["other_share"], 1.0, rtol=1e-12)
    for column in ("prefill_share", "attention_share", "ffn_share", "other_share"):
        assert np.all((table[column] > 0) & (table[column] < 1)), column


def test_prefill_share_falls_with_output_length_and_rises_with_input_length_and_batch(table):
    assert np.all(np.diff(sweep(table, "output_len")["prefill_share"]) < 0)
    assert np.all(np.diff(sweep(table, "input_len")["prefill_share"]) > 0)
    assert np.all(np.diff(sweep(table, "batch_size")["prefill_share"]) > 0)


def test_long_prompts_are_chunked_yet_cost_at_least_their_compute(setup, table):
    """IL 16384 runs through the 512-token budget in chunks; its prefill time is still at
    least the compute of all prompt tokens' GEMMs and causal attention pairs (jitter >= 1 - 3 sigma)."""
    _, arch, hw, consts = setup
    cost = StepCostModel(arch, hw, consts)
    row = sweep(table, "input_len").iloc[-1]
    batch, il = int(row["batch_size"]), int(row["input_len"])
    assert il > consts.max_num_batched_tokens
    gemm_flops_per_token = float(cost.gemm_components(np.array([1.0]))["gemm_flops"][0])
    compute_s = (batch * il * gemm_flops_per_token + batch * il * (il + 1) / 2 * cost.prefill_flops_per_pair) \
        / cost.compute_rate
    assert row["prefill_s"] >= (1 - 3 * consts.jitter_rel_sigma) * compute_s
    assert row["prefill_s"] <= 1.5 * compute_s


def test_dram_utilisation_grows_with_batch_and_stays_under_the_memory_efficiency(setup, table):
    _, _, _, consts = setup
    batch = sweep(table, "batch_size")
    assert np.all(np.diff(batch["dram_util_mean"]) > 0)
    cap = decode_bandwidth_cap(consts)
    assert np.all(table["dram_util_peak"] <= cap + 1e-12)
    assert np.all(table["dram_util_peak"] >= table["dram_util_mean"] - 1e-12)
    assert np.all(table["compute_util_peak"] >= table["compute_util_mean"] - 1e-12)
    assert np.all(table["compute_util_peak"] <= consts.gemm_compute_efficiency + 1e-12)
    # decode is bandwidth-bound: far more of the bandwidth than of the tensor cores is used
    assert np.all(table["dram_util_mean"] > 3 * table["compute_util_mean"])


def test_attention_share_grows_with_active_context_in_every_sweep(table):
    for quantity in ("batch_size", "input_len", "output_len"):
        rows = sweep(table, quantity).sort_values("active_context_tokens")
        assert np.all(np.diff(rows["attention_share"]) > 0), quantity
        assert np.all(np.diff(rows["ffn_share"]) < 0), quantity


def test_final_attention_intensity_is_2_hq_over_hkv_bkv_and_memory_bound(setup, table):
    _, arch, hw, _ = setup
    expected = 2 * arch.n_q_heads / (arch.n_kv_heads * BYTES_PER_FP16)
    assert expected == 4.0                                       # Mistral-7B: 32 query, 8 KV heads
    np.testing.assert_allclose(table["final_attention_intensity_flop_per_byte"], expected, rtol=0.05)
    assert np.all(table["final_attention_intensity_flop_per_byte"] < ridge_point_flop_per_byte(hw))


def test_achieved_attention_flops_grow_with_context_and_stay_under_the_roofline(setup, table):
    _, arch, hw, consts = setup
    for quantity in ("batch_size", "input_len", "output_len"):
        rows = sweep(table, quantity)
        assert np.all(np.diff(rows["final_attention_tflop_per_s"]) > 0), quantity
    roof = np.minimum(hw.peak_flops_per_s, table["final_attention_intensity_flop_per_byte"]
                      * hw.hbm_bandwidth_bytes_per_s) / 1e12
    assert np.all(table["final_attention_tflop_per_s"] < roof)
    np.testing.assert_allclose(table["roofline_tflop_per_s"], roof)
    # hand computation for (B, IL, OL) = (4, 256, 256): context 2048 tokens
    context = 4 * 512
    flops = 4 * arch.hidden_dim * arch.n_layers * context
    kv_bytes = 2 * arch.n_layers * arch.kv_dim * BYTES_PER_FP16 * context
    seconds = kv_bytes / (consts.attention_memory_efficiency * hw.hbm_bandwidth_bytes_per_s) \
        + arch.n_layers * consts.kernel_latency_s
    base = table[(table["batch_size"] == 4) & (table["input_len"] == 256) & (table["output_len"] == 256)]
    np.testing.assert_allclose(base["final_attention_tflop_per_s"], flops / seconds / 1e12, rtol=1e-9)
    np.testing.assert_allclose(base["final_attention_dram_util"],
                               kv_bytes / (seconds * hw.hbm_bandwidth_bytes_per_s), rtol=1e-9)


def test_decode_metrics_weight_steps_by_time(setup):
    """A one-step decode: mean and peak coincide and equal that step's bytes / (time x BW)."""
    _, arch, hw, consts = setup
    cost = StepCostModel(arch, hw, consts)
    metrics = decode_phase_metrics(cost, Workload(8, 1000, 1))
    step = cost.breakdown(8, 8 * 1001, 0)
    assert metrics["dram_util_mean"] == pytest.approx(metrics["dram_util_peak"])
    assert metrics["dram_util_mean"] == pytest.approx(float(step["dram_bytes"] / (step["gpu_s"]
                                                                                 * hw.hbm_bandwidth_bytes_per_s)))
    assert metrics["attention_share"] == pytest.approx(float(step["attention_s"] / step["gpu_s"]))


def test_gemm_split_adds_up_to_gemm_time(setup):
    _, arch, hw, consts = setup
    cost = StepCostModel(arch, hw, consts)
    tokens = np.array([0.0, 1.0, 4.0, 258.0, 512.0])
    parts = cost.breakdown(tokens, tokens * 300, 0 * tokens)
    total = parts["attention_projection_gemm_s"] + parts["ffn_gemm_s"] + parts["elementwise_s"]
    np.testing.assert_allclose(total, parts["gemm_s"], rtol=1e-12)
    np.testing.assert_array_equal(parts["gemm_s"], cost.gemm_components(tokens)["gemm_s"])
    assert parts["ffn_gemm_s"][0] == 0.0
    # SwiGLU FFN (3 D x D_ff matrices) outweighs QKV + output projection (D x (2 D + 2 D_kv)) when memory-bound
    assert parts["ffn_gemm_s"][1] > 2 * parts["attention_projection_gemm_s"][1]


# --- output: CSV and figures ---------------------------------------------------------

def test_csv_is_byte_identical_across_two_computations(setup, table, tmp_path):
    first = characterisation_csv(table)
    second = characterisation_csv(characterisation_table(*setup))
    assert first == second
    path = tmp_path / "characterisation.csv"
    path.write_text(first)
    back = pd.read_csv(path)
    assert list(back.columns) == list(TABLE_COLUMNS)
    np.testing.assert_allclose(back["decode_s"], table["decode_s"], atol=1e-6)


def test_plots_return_figures_with_one_panel_per_sweep(setup, table, tmp_path):
    _, _, hw, consts = setup
    paper = load_paper_table1(REPO / "config/paper_table1.yaml")
    assert len(plot_phase_breakdown(table).axes) == 3
    assert len(plot_decode_utilisation(table, decode_bandwidth_cap(consts)).axes) == 3
    assert len(plot_decode_kernel_shares(table).axes) == 1
    figure = plot_attention_roofline(table, hw, paper)
    assert len(figure.axes) == 3
    assert all(len(ax.child_axes) == 1 for ax in figure.axes)     # each panel's zoom inset
    # the paper's seven Table I rows fall on the sweeps: 3 + 3 + 3 (the base row on each)
    diamonds = sum(1 for ax in figure.axes[:3] for line in ax.get_lines() if line.get_marker() == "D")
    assert diamonds == 9
    save_figure(figure, tmp_path / "fig6.pdf", tmp_path / "fig6.png")
    assert (tmp_path / "fig6.png").stat().st_size > 0


def test_plot_rejects_a_table_without_its_columns(table):
    with pytest.raises(PlotInputError, match="attention_share"):
        plot_decode_kernel_shares(table.drop(columns=["attention_share"]))
