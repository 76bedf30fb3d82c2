"""`slim advise` as a library call (`slim.advisor.advise`), without argparse or a subprocess: the
request's checks, the training selection and its held-out check, every warning, and the --json
body of a SIM advice. The synthetic trace folders of tests/data are enough; no real traces needed."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.advisor.advise import Advice, AdviceRequest, advice_warnings, advise
from slim.advisor.bca import bca_from_predictor
from slim.advisor.report import advice_fields, render_text
from slim.advisor.training_runs import held_out_check, select_training_runs
from slim.errors import AdvisorError, TraceFormatError
from slim.gpu.kv_memory import plan_kv_memory
from slim.model.equations import predict_frame
from slim.model.metrics import mape_pct
from slim.predictors.slim_model import FittedSlim
from slim.sim.constants import FITTED_CONSTANTS
from slim.specs.hardware import load_hardware
from slim.traces.usable import usable_runs

DATA = Path(__file__).resolve().parent / "data"
LAYOUT = DATA / "formats" / "bench_serve_metadata"   # one made-up server: OPT-1.3B, IL 256, OL 128, caps 1..256
USER = DATA / "user_dataset" / "traces"             # OPT-1.3B and OPT-2.7B, IL 256, OL 128 and 256, caps 1..32


def request(traces: Path = LAYOUT, model: str | None = "opt-1.3b", **fields) -> AdviceRequest:
    fields.setdefault("hardware", "h100-64gb")
    fields.setdefault("plan", False)
    return AdviceRequest(traces, model, fields.pop("input_len", 256), fields.pop("output_len", 128),
                         fields.pop("slo_s", 5.0), **fields)


# ---------------------------------------------------------------- the request

@pytest.mark.parametrize("fields, fragment", [
    ({"predictor": "oracle"}, "unknown predictor 'oracle'; choose one of slim, sim"),
    ({"confidence": 1.0}, "confidence must lie in (0, 1), got 1.0"),
    ({"confidence": float("nan")}, "confidence must lie in (0, 1)"),
    ({"confidence": 0.9, "predictor": "sim"}, "--predictor sim has no prediction band"),
])
def test_a_request_refuses_an_unknown_predictor_and_a_confidence_it_cannot_hold(fields, fragment):
    with pytest.raises(AdvisorError) as error:
        request(**fields)
    assert fragment in str(error.value)


def test_a_request_is_immutable_all_the_way_down():
    made = request(train_models=["opt-1.3b"], exclude_runs=["max_num_seqs_256"], candidates=[1, 2, 4])
    assert (made.train_models, made.exclude_runs, made.candidates) == (("opt-1.3b",), ("max_num_seqs_256",), (1, 2, 4))
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.slo_s = 1.0   # type: ignore[misc]


def test_the_target_is_named_or_described_and_the_hardware_known():
    with pytest.raises(AdvisorError, match="name the target model"):
        advise(request(model=None))
    with pytest.raises(AdvisorError, match="unknown hardware 'tpu-v9'"):
        advise(request(hardware="tpu-v9"))
    with pytest.raises(AdvisorError, match=r"name the accelerator the runs ran on \(--hardware; shipped: h100-64gb"):
        advise(request(hardware=None))


# ---------------------------------------------------------------- training selection and the held-out check

@pytest.fixture(scope="module")
def user_runs(catalog) -> pd.DataFrame:
    return usable_runs(USER, catalog)


def test_the_training_selection_takes_aliases_and_globs(user_runs, catalog):
    train = select_training_runs(user_runs, catalog, ["facebook/opt-1.3b"], ["opt-1.3b/ol256/*"])
    assert set(train[col.MODEL]) == {"opt-1.3b"} and len(train) == 6
    assert train[col.RUN_ID].str.startswith("opt-1.3b/ol128/").all()
    assert len(select_training_runs(user_runs, catalog, None)) == len(user_runs) == 24


@pytest.mark.parametrize("train_models, exclude_runs, fragment", [
    (["opt-6.7b"], (), "'opt-6.7b' has no usable run"),
    (None, ["opt-13b/*"], "'opt-13b/*' matches no usable run"),
    (["opt-1.3b"], ["opt-1.3b/*"], "leave no run to fit SLIM on"),
])
def test_a_selection_that_selects_nothing_is_named(user_runs, catalog, train_models, exclude_runs, fragment):
    with pytest.raises(TraceFormatError, match=re.escape(fragment)):
        select_training_runs(user_runs, catalog, train_models, exclude_runs)


def test_the_held_out_check_predicts_exactly_the_target_runs_left_out(user_runs, catalog):
    """OPT-2.7B predicted from OPT-1.3B: the check covers OPT-2.7B's 12 runs, no others, and is
    the MAPE of SLIM's prediction of them; the made-up servers differ, so the transfer is not exact."""
    advice = advise(request(USER, "opt-2.7b", hardware="a100-80gb", train_models=["opt-1.3b"]))
    check = advice.held_out
    assert (check.model, check.n_runs, advice.n_left_out) == ("opt-2.7b", 12, 12)
    left_out = user_runs[user_runs[col.MODEL] == "opt-2.7b"]
    e2e_s, throughput = predict_frame(catalog, load_hardware()["a100-80gb"], advice.fit.params, left_out)
    assert check.throughput_mape_pct == pytest.approx(mape_pct(throughput, left_out[col.TOTAL_TOKEN_THROUGHPUT]))
    assert check.e2e_mape_pct == pytest.approx(mape_pct(e2e_s, left_out[col.E2E_LATENCY_S]))
    assert check.throughput_mape_pct > 2 * advice.fit.train_mape_throughput_pct > 0
    assert [warning.code for warning in advice.warnings] == ["target_not_trained"]


def test_caps_left_out_of_one_exact_curve_are_predicted_exactly():
    """The layout's server has a step time SLIM represents exactly: a fit on seven caps predicts
    the two caps left out (128 and 256, the largest) to within 0.01%."""
    advice = advise(request(exclude_runs=["max_num_seqs_128", "max_num_seqs_256"]))
    assert advice.n_runs == 9 and advice.fit.n_train_points == 7 and advice.held_out.n_runs == 2
    assert advice.held_out.throughput_mape_pct < 0.01 and advice.held_out.e2e_mape_pct < 0.01
    assert advice.warnings == ()


def test_no_held_out_check_when_every_target_run_is_trained_on(user_runs, catalog, h100):
    advice = advise(request(USER, "opt-2.7b", hardware="a100-80gb", train_models=["opt-2.7b"]))
    assert advice.held_out is None and advice.n_left_out == 12 and advice.train_models == ("opt-2.7b",)
    train = user_runs[user_runs[col.MODEL] == "opt-2.7b"]
    fitted = FittedSlim.of_fit("SLIM", advice.fit, catalog, h100)
    assert held_out_check(user_runs, train, catalog["opt-2.7b"], fitted) is None


# ---------------------------------------------------------------- the warnings, on a curve known exactly

IL, OL = 256, 128


def toy_curve(caps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``T(B) = 1000 B / (1 + B / 32)`` tokens/s: rising in B, batching efficiency falling."""
    batch = np.asarray(caps, dtype=float)
    throughput = 1000.0 * batch / (1.0 + batch / 32.0)
    return throughput, batch * (IL + OL) / throughput


@pytest.fixture(scope="module")
def toy_decision():
    decision = bca_from_predictor(toy_curve, candidate_batch_sizes=(1, 2, 4, 8, 16, 32, 64, 128), epsilon=0.1,
                                  slo_s=100.0)
    assert decision.batch_cap == 128
    return decision


def warnings_for(catalog, h100, decision, target="opt-1.3b", trained=("opt-1.3b",), capacity=500.0,
                 predict=toy_curve, input_len=IL, output_len=OL):
    runs = pd.DataFrame({col.MODEL: ["opt-1.3b", "opt-2.7b"]})
    train = runs[runs[col.MODEL].isin(trained)]
    memory = plan_kv_memory(catalog["opt-1.3b"], h100, decision.batch_cap, input_len, output_len)
    return advice_warnings(catalog[target], runs, train, decision, capacity, "traces", predict, memory,
                           input_len + output_len)


def test_nothing_to_warn_about(catalog, h100, toy_decision):
    assert warnings_for(catalog, h100, toy_decision) == ()


def test_a_target_never_profiled_or_left_out_of_training(catalog, h100, toy_decision):
    (unprofiled,) = warnings_for(catalog, h100, toy_decision, target="llama-2-7b")
    assert unprofiled.code == "target_not_profiled"
    assert "llama-2-7b has no usable run" in unprofiled.message and "(opt-1.3b) alone" in unprofiled.message
    (untrained,) = warnings_for(catalog, h100, toy_decision, target="opt-2.7b")
    assert untrained.code == "target_not_trained" and "opt-2.7b's runs are left out" in untrained.message


def test_a_cap_above_the_kv_capacity_names_what_the_capacity_gives(catalog, h100, toy_decision):
    # 50.5 sequences fit: vLLM runs 50, where the curve gives 1000 x 50 / (1 + 50/32) = 19,512 tokens/s,
    # 23.8% below the 25,600 of the cap 128.
    (warning,) = warnings_for(catalog, h100, toy_decision, capacity=50.5)
    assert warning.code == "cap_exceeds_kv_capacity"
    assert warning.message.startswith("--max-num-seqs 128 exceeds the KV capacity of 50.5 sequences of 384 tokens "
                                      "(traces): vLLM runs at most about 50 at once")
    assert "--max-num-seqs 50 predicts 19,512 tokens/s (23.8% less)" in warning.message
    (simulated,) = warnings_for(catalog, h100, toy_decision, capacity=50.5, predict=None)   # SIM: no curve to ask
    assert simulated.code == "cap_exceeds_kv_capacity" and simulated.message.endswith("as the simulated run did")


def test_a_cap_whose_kv_cache_exceeds_the_reservation(catalog, h100, toy_decision):
    # 128 sequences of 4,096 tokens of OPT-1.3B need 96 GiB of KV cache: more than the GPU holds.
    codes = [w.code for w in warnings_for(catalog, h100, toy_decision, capacity=1e6, input_len=2048, output_len=2048)]
    assert codes == ["kv_exceeds_reservation"]


# ---------------------------------------------------------------- SIM's advice as a document

def test_a_sim_advice_is_a_json_document_with_its_constants(tmp_path):
    """SIM is calibrated on throughput alone: its E2E training error is null, its parameters the
    fitted constants (`slim advise --predictor sim --json` crashed on both)."""
    advice = advise(request(candidates=(8, 16, 32), predictor="sim"))
    assert isinstance(advice, Advice) and advice.predictor == "sim" and advice.recommendation.batch_cap in (8, 16, 32)
    fit = json.loads(json.dumps(advice_fields(advice)))["fit"]
    assert fit["train_mape_e2e_pct"] is None and fit["n_train_runs"] == 9
    assert set(fit["params"]) == set(FITTED_CONSTANTS)
    assert fit["params"] == {name: getattr(advice.fit.constants, name) for name in FITTED_CONSTANTS}
    assert render_text(advice).startswith("SIM (the simulator) calibrated, every candidate cap simulated, on 9 runs")
