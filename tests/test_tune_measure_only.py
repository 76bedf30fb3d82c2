"""`slim tune` on a model slim cannot describe (an ``unsupported:`` entry of the models file, a
``config.json`` whose quantisation is not modelled): named in one line, tuned with no prior by the
bisection's runs alone, settled on the cap a full measurement chooses within the bound, resumed with
nothing to run; and the plan names the bisection's probe. The loop runs `tests/fake_vllm_bench.py`,
which simulates such a model as a catalog model of its size (``--simulate-as``)."""

import contextlib
import io
import json

import fake_vllm_bench
import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from test_tune_cli import template

from slim import columns as col
from slim.cli import main
from slim.decision.candidates import GOODPUT, THROUGHPUT, Estimates, candidate_view
from slim.decision.rule import recommend
from slim.defaults import DEFAULT_EPSILON, DEFAULT_MARGIN
from slim.errors import UnsupportedArchitectureError, UnsupportedQuantizationError
from slim.specs.architecture import UnsupportedModel, load_architectures
from slim.specs.hardware import HARDWARE_FILE, load_hardware
from slim.specs.hf_config import architecture_from_hf_config
from slim.specs.slo import IN_BATCH_E2E
from slim.traces.usable import trace_options, usable_runs
from slim.tune.guard import ShadowBisection
from slim.tune.no_prior import bisection_order_bounds
from slim.tune.runner import read_attempts

CAPS = [1, 2, 4, 8, 16, 32, 64]
SETUP = ["--hardware", "a100-sxm-40gb", "--num-prompts", "64", "--candidates", ",".join(map(str, CAPS))]
DECILM = "Deci/DeciLM-7B"
NEW_FORMAT = "acme/opt-350m-newformat"


def new_format_config(folder) -> str:
    """A published small architecture (OPT-350M) quantised by a method slim does not model."""
    config = json.loads((REPO / "tests" / "data" / "hf_configs" / "opt-350m" / "config.json").read_text())
    config.update({"_name_or_path": NEW_FORMAT, "quantization_config": {"quant_method": "some-new-format"}})
    path = folder / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def tune(capsys, traces, workload: str, slo_ms: float, *extra: str) -> tuple[int, dict, str]:
    code = main(["tune", "--traces", str(traces), "--workload", workload, *SETUP, "--slo-ms", str(slo_ms), *extra,
                 "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def full_curve(folder, model: str, stand_in: str, catalog) -> pd.DataFrame:
    """Every candidate cap measured by the fake benchmark (in this process), read back as the session
    reads its runs: one row per cap, ascending."""
    for cap in CAPS:
        with contextlib.redirect_stdout(io.StringIO()):     # its progress line is no part of tune's output
            fake_vllm_bench.main(["--model", model, "--random-input-len", "128", "--random-output-len", "32",
                                  "--max-concurrency", str(cap), "--num-prompts", str(max(64, 2 * cap)),
                                  "--result-dir", str(folder / f"cap{cap}"), "--result-filename", "result.json",
                                  "--metadata", "max_num_seqs=64", "--hardware", "a100-sxm-40gb",
                                  "--simulate-as", stand_in])
    options = trace_options(load_hardware(HARDWARE_FILE), "a100-sxm-40gb", None)
    runs = usable_runs(folder, catalog, options, hardware="a100-sxm-40gb")
    return runs.sort_values(col.MAX_NUM_SEQS).reset_index(drop=True)


def full_measurement_choice(curve: pd.DataFrame, slo_ms: float) -> tuple[int, list[int], float]:
    """Eq. 13 on every cap measured, and the caps the plain bisection over them for the largest within
    the SLO probes, with their GPU time (their recorded durations, one GPU each)."""
    throughput = curve[col.TOTAL_TOKEN_THROUGHPUT].to_numpy(dtype=float)
    e2e_ms = 1e3 * curve[col.E2E_LATENCY_S].to_numpy(dtype=float)
    view = candidate_view(np.array(CAPS, dtype=float),
                          {THROUGHPUT: Estimates.facts(throughput), IN_BATCH_E2E: Estimates.facts(e2e_ms)}.__getitem__,
                          {IN_BATCH_E2E: slo_ms})
    chosen = recommend(view, DEFAULT_EPSILON).batch_cap
    bisection = ShadowBisection(len(CAPS))
    probes = bisection.path_for(bisection.search(lambda position: e2e_ms[position] <= slo_ms))
    return (int(chosen), sorted(CAPS[p] for p in probes),
            float(curve[col.DURATION_S].to_numpy(dtype=float)[probes].sum()))


def measured_only_catalog(model: str):
    """A catalog that reads the runs of `model` (known by name only) as measurements."""
    catalog = load_architectures()
    unsupported = catalog.unsupported(model)
    return catalog.measuring(unsupported if unsupported is not None
                             else UnsupportedModel(model.rsplit("/", 1)[-1].lower(), model, "not modelled",
                                                   (model.lower(),)))


def check_settled_by_measurement(tmp_path, capsys, workload: str, stand_in: str, slo_ms: float, feature: str,
                                 *extra: str) -> None:
    model = workload.rsplit(":", 2)[0]
    traces = tmp_path / "runs"
    code, body, err = tune(capsys, traces, workload, slo_ms, "--run", template("--simulate-as", stand_in), *extra)
    assert code == 0 and body["status"] == "settled", err
    named = [line for line in err.splitlines() if "no prior for" in line]
    assert len(named) == 1 and feature in named[0], err
    assert feature in body["workloads"][0]["no_prior"]
    curve = full_curve(tmp_path / "full", model, stand_in, measured_only_catalog(model))
    chosen, probed, bisection_gpu_seconds = full_measurement_choice(curve, slo_ms)
    certificate = body["workloads"][0]["certificate"]
    assert certificate["settled"] and certificate["max_num_seqs"] == chosen
    rows = body["workloads"][0]["candidates"]
    assert all(value is None for row in rows for value in [*row["predicted"].values(), *row["prior"].values()]), \
        "nothing is predicted"
    attempts = read_attempts(traces / "slim-tune")
    spent = sum(attempt.gpu_seconds for attempt in attempts)
    assert sorted(int(attempt.max_num_seqs) for attempt in attempts) == probed, "the bisection's runs, no other"
    assert spent <= (1 + DEFAULT_MARGIN) * bisection_gpu_seconds * (1 + 1e-9)
    serve = body["workloads"][0]["serve"]
    assert serve["command"] == (f"vllm serve {model} --max-num-seqs {chosen} --max-model-len 160 "
                                "--tensor-parallel-size 1") and serve["num_gpu_blocks_override"] is None
    again, resumed, _ = tune(capsys, traces, workload, slo_ms, "--run", template("--simulate-as", stand_in), *extra)
    assert again == 0 and resumed["loop"]["runs"] == 0 and resumed["skipped_runs"] == []
    assert resumed["workloads"][0]["certificate"]["max_num_seqs"] == chosen
    assert len(read_attempts(traces / "slim-tune")) == len(attempts)


@pytest.mark.integration
def test_an_unsupported_catalog_model_settles_by_measurement_alone_within_the_bound(tmp_path, capsys):
    check_settled_by_measurement(tmp_path, capsys, f"{DECILM}:128:32", "mistral-7b", 500.0,
                                 "variable grouped-query attention")


@pytest.mark.integration
def test_a_quantisation_slim_cannot_size_settles_by_measurement_alone_within_the_bound(tmp_path, capsys):
    config = new_format_config(tmp_path)
    check_settled_by_measurement(tmp_path, capsys, f"{NEW_FORMAT}:128:32", "opt-350m", 120.0,
                                 "quant_method 'some-new-format' is not modelled", "--model-config", config)


def test_the_plan_proposes_the_bisections_probe_and_says_there_is_no_prior(tmp_path, capsys):
    code, body, err = tune(capsys, tmp_path, f"{DECILM}:128:32", 500.0)
    assert code == 0 and body["status"] == "open" and "no prior for decilm-7b" in err
    first_probe = CAPS[ShadowBisection(len(CAPS)).next_probe({})]
    proposal = body["next"][0]
    assert len(body["next"]) == 1 and proposal["max_num_seqs"] == first_probe
    assert "bisection's next probe" in proposal["reason"] and "no prior" in proposal["reason"]
    assert proposal["predicted_gpu_seconds"] is None
    assert main(["tune", "--traces", str(tmp_path), "--workload", f"{DECILM}:128:32", *SETUP, "--slo-ms", "500"]) == 0
    text = capsys.readouterr().out
    assert "prior none" in text and "  no prior: model 'decilm-7b'" in text
    assert f"cap {first_probe}: the bisection's next probe (no prior: measuring only)" in text


def test_a_config_slim_cannot_read_is_still_refused_and_offline_runs_need_a_prior(tmp_path, capsys):
    config = json.loads((REPO / "tests" / "data" / "hf_configs" / "opt-350m" / "config.json").read_text())
    del config["hidden_size"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    broken = ["tune", "--traces", str(tmp_path), "--workload", "facebook/opt-350m:128:32", *SETUP, "--slo-ms", "100",
              "--model-config", str(tmp_path / "config.json")]
    assert main(broken) == 2 and "'hidden_size' is missing" in capsys.readouterr().err
    offline = ["tune", "--traces", str(tmp_path), "--workload", f"{DECILM}:128:32", *SETUP, "--slo-ms", "500",
               "--mode", "offline"]
    assert main(offline) == 2
    assert "no prior for decilm-7b" in capsys.readouterr().err


def test_the_catalog_knows_a_measured_only_model_by_name_without_describing_it(tmp_path):
    catalog = load_architectures()
    assert DECILM not in catalog, "the pipeline's catalog still leaves DeciLM's runs out"
    measuring = catalog.measuring(catalog.unsupported(DECILM))
    assert DECILM in measuring and measuring.resolve_name(DECILM) == "decilm-7b"
    assert measuring.measured_only("decilm-7b").reason == catalog.unsupported(DECILM).reason
    with pytest.raises(UnsupportedArchitectureError, match="variable grouped-query attention"):
        measuring[DECILM]
    assert "decilm-7b" in measuring.with_architecture(catalog["opt-125m"])
    with pytest.raises(UnsupportedQuantizationError, match="some-new-format"):
        architecture_from_hf_config(new_format_config(tmp_path))


def test_a_curve_with_no_prior_is_bounded_by_its_measured_caps_in_the_bisections_order():
    caps = [1.0, 2.0, 4.0, 8.0, 16.0]
    candidates = pd.DataFrame({col.MODEL: ["m"] * 5 + ["n"], col.INPUT_LEN_NOMINAL: 128.0,
                               col.OUTPUT_LEN_NOMINAL: 32.0, col.TENSOR_PARALLEL: 1,
                               col.BENCHMARK_MODE: col.BenchmarkMode.ONLINE, col.MAX_NUM_SEQS: [*caps, 4.0]})
    measured = np.array([False, True, False, True, False, False])
    rows = np.ones(6, dtype=bool)
    throughput = np.array([np.nan, 100.0, np.nan, 300.0, np.nan, np.nan])
    low, high = bisection_order_bounds(candidates, THROUGHPUT, measured, throughput, rows)
    assert low.tolist() == [0.0, 0.0, 100.0, 0.0, 300.0, 0.0]
    assert high.tolist() == [100.0, np.inf, 300.0, np.inf, np.inf, np.inf], "another model's curve is not bounded"
    e2e_ms = np.array([np.nan, 50.0, np.nan, 80.0, np.nan, np.nan])
    low, high = bisection_order_bounds(candidates, IN_BATCH_E2E, measured, e2e_ms, rows)
    assert low.tolist() == [0.0] * 6 and high.tolist() == [50.0, np.inf, 80.0, np.inf, np.inf, np.inf]
    low, high = bisection_order_bounds(candidates, GOODPUT, measured, throughput, rows)
    assert (low == 0).all() and np.isinf(high).all(), "goodput can fall as the cap grows: never bounded"
