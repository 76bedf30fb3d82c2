"""The rough edges of `slim advise` and `slim tune` a new user meets, each pinned: advise answers on the
few runs tune settles from, caps are integers in every JSON document and file, no reason reads
"P = 0.00" and no recommendation is its own challenger, a failed reference run names the way out and
the loop goes on, the reference run a bisection needs is not charged to the margin, a cap whose run
preempted is not proposed again, an unjudged metric is named as unjudged, advise and tune print the
same benchmark, and the serve line names the model as the user did (a checkpoint folder included)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from slim import columns as col
from slim.cli import main
from slim.specs.slo import Slos
from slim.tune.measurement import Measurement
from slim.tune.runner import LEDGER
from slim.tune.session import TuneSession, TuneSettings
from slim.tune.workload import WORKLOAD, Workload

USER_TRACES = REPO / "tests" / "data" / "user_dataset" / "traces"
FAKE_BENCH = REPO / "tests" / "fake_vllm_bench.py"
ADVISE = ["--model", "opt-2.7b", "--hardware", "a100-80gb", "--input-len", "256", "--output-len", "256"]


def _three_runs(tmp_path: Path) -> Path:
    """Three caps of one curve of the user dataset: fewer runs than SIM's 7 or SLIM's 6 free constants."""
    traces = tmp_path / "three"
    for cap in (1, 8, 16):
        shutil.copytree(USER_TRACES / "opt-2.7b" / "ol256" / f"max_num_seqs_{cap}", traces / f"max_num_seqs_{cap}")
    return traces


def _json(capsys, argv: list[str]) -> tuple[int, dict]:
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("objective", [["--slo", "p99_tpot_ms=17"], ["--slo-ms", "3500", "--predictor", "slim"]])
def test_advise_answers_on_runs_too_few_to_fit_its_predictor_and_says_it_used_the_prior(tmp_path, capsys, objective):
    code, document = _json(capsys, ["advise", "--traces", str(_three_runs(tmp_path)), *ADVISE, *objective,
                                     "--no-plan"])
    assert code == 0, document
    assert document["fit"]["prior"] is True and "free constants" in document["fit"]["prior_reason"]
    assert document["fit"]["n_train_runs"] == 0 and document["fit"]["params"] is None
    main(["advise", "--traces", str(_three_runs(tmp_path / "again")), *ADVISE, *objective, "--no-plan"])
    assert "prior" in capsys.readouterr().out.splitlines()[0]


def _caps_in(document, path: str = "") -> list[tuple[str, object]]:
    """Every value of a JSON document that is a cap: a key naming ``max_num_seqs``, or the cap lists of a
    certificate (challengers, unjudged, repeat, an exclusion's cap)."""
    found = []
    if isinstance(document, dict):
        for key, value in document.items():
            where = f"{path}.{key}"
            if key.endswith("max_num_seqs") or key == "cap":
                found.append((where, value))
            elif key in ("challengers", "unjudged", "repeat", "unjudged_caps") and isinstance(value, list):
                found += [(f"{where}[]", cap) for cap in value]
            else:
                found += _caps_in(value, where)
    elif isinstance(document, list):
        for position, value in enumerate(document):
            found += _caps_in(value, f"{path}[{position}]")
    return found


def test_every_cap_in_the_json_documents_is_an_integer(tmp_path, capsys):
    _, advised = _json(capsys, ["advise", "--traces", str(USER_TRACES), *ADVISE, "--slo", "p99_tpot_ms=17"])
    _, tuned = _json(capsys, ["tune", "--traces", str(USER_TRACES), "--hardware", "a100-80gb", "--workload",
                              "opt-2.7b:256:256", "--slo-ms", "3500", "--results", str(tmp_path / "runs")])
    caps = _caps_in(advised) + _caps_in(tuned)
    assert len(caps) > 20
    assert [(where, value) for where, value in caps if value is not None and not isinstance(value, int)] == []


def test_the_recommended_cap_is_never_listed_among_the_caps_that_could_beat_it():
    from slim.tune.report import _decision_lines

    workload = {"certificate": {"settled": False, "max_num_seqs": 32, "challengers": [64, 128], "repeat": [],
                                "needs_throughput_at_one": False, "exclusions": [], "notes": []},
                "recommendation": {"max_num_seqs": 64, "measured": False, "total_token_throughput": 1.0,
                                   "reason": None},
                "slo_ms": {}, "bound": None, "failed_caps": [], "data_parallel_size": 1}
    line = _decision_lines(workload)[0]
    assert "could still be beaten by caps 128" in line and "64, 128" not in line


def test_no_proposal_reads_a_probability_of_zero(monkeypatch):
    import slim.tune.proposals as proposals

    session, workload = _session(Slos.of(slo_ms=2500.0))
    for cap in (1.0, 8.0):
        session.record(_row(session, cap), Measurement(100.0 * cap ** 0.9, 1.0 + cap / 100, 10.0))
    monkeypatch.setattr(proposals, "decision_probabilities",
                        lambda view, epsilon: np.where(view.caps == 32.0, 0.5, 0.0))
    reasons = [p.reason for p in proposals.propose(session)]
    assert reasons and not any("P = 0.00" in reason for reason in reasons)
    assert any("P = 0.50" in reason for reason in reasons)


CAPS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)


def _session(slos: Slos, margin: float | None = None) -> tuple[TuneSession, Workload]:
    """One synthetic online workload whose prior predicts every cap exactly."""
    from slim.tune.belief import PriorPrediction

    workload = Workload("opt-125m", 128.0, 32.0, slos)
    caps = np.array(CAPS)
    candidates = pd.DataFrame({col.MODEL: "opt-125m", col.INPUT_LEN_NOMINAL: 128.0, col.OUTPUT_LEN_NOMINAL: 32.0,
                               col.INPUT_LEN_MEAN: 128.0, col.OUTPUT_LEN_MEAN: 32.0, col.MAX_NUM_SEQS: caps,
                               col.NUM_PROMPTS: np.maximum(64.0, 2 * caps), col.BENCHMARK_MODE: "online",
                               col.TENSOR_PARALLEL: 1.0, col.KV_CAPACITY_TOKENS: np.nan,
                               WORKLOAD: workload.label})
    prior = PriorPrediction.of(100.0 * caps ** 0.9, 1.0 + caps / 100.0,
                               **{m.name: 1e3 * (1.0 + caps / 100.0) for m in slos.metrics if not m.in_batch})
    return TuneSession([workload], candidates, prior, TuneSettings(margin=margin)), workload


def _row(session: TuneSession, cap: float) -> int:
    return int(session.candidates.index[session.candidates[col.MAX_NUM_SEQS] == cap][0])


def test_a_failed_reference_run_resolves_the_bound_on_the_prediction_and_names_the_way_out():
    session, workload = _session(Slos.of(slo_relative=2.0))
    assert session.limits_ms(workload) is None       # waits for the reference run
    session.record(_row(session, 1.0), None, gpu_seconds=5.0)
    limits = session.limits_ms(workload)
    assert limits is not None and limits["mean_in_batch_e2e_ms"] == pytest.approx(2 * 1e3 * 1.01, rel=0.05)
    notes = " ".join(session.certificate(workload).notes)
    assert "--retry-failed" in notes and "--slo-reference-cap" in notes
    from slim.tune.proposals import propose

    assert propose(session), "a failed reference run is no dead end: the session goes on"


def test_the_reference_run_a_bisection_needs_is_not_charged_to_its_margin():
    session, workload = _session(Slos.of(slo_relative=2.0), margin=0.5)
    session.record(_row(session, 1.0), Measurement(100.0, 1.01, 50.0, charged=True))
    account = session.account(workload)
    assert account.extra_gpu_seconds == 0.0 and account.on_path_gpu_seconds == 50.0


def _fake_template(*extra: str) -> str:
    return " ".join([sys.executable, str(FAKE_BENCH), "--model {model} --random-input-len {input_len}",
                     "--random-output-len {output_len} --max-concurrency {max_concurrency}",
                     "--num-prompts {num_prompts} --result-dir {result_dir} --result-filename {result_filename}",
                     "--metadata max_num_seqs={server_max_num_seqs} --hardware a100-sxm-40gb", *extra])


TUNE = ["--workload", "facebook/opt-125m:128:32", "--hardware", "a100-sxm-40gb", "--num-prompts", "64",
        "--candidates", "1,2,4,8,16,32,64"]


@pytest.mark.integration
def test_a_cap_whose_run_preempted_is_failed_in_the_plan_as_in_the_loop(tmp_path, capsys):
    traces = tmp_path / "runs"
    code, body = _json(capsys, ["tune", "--traces", str(traces), *TUNE, "--slo-ms", "150", "--run",
                                _fake_template(), "--budget-runs", "1"])
    ran = json.loads((traces / "slim-tune" / LEDGER).read_text().splitlines()[0])
    assert isinstance(ran["max_num_seqs"], int), "the ledger writes the cap as vllm serve takes it"
    folder = traces / "slim-tune" / ran["folder"]
    (folder / "server_out.log").write_text("WARNING Sequence group 7 is preempted by PreemptionMode.RECOMPUTE "
                                           "mode because there is not enough KV cache space. "
                                           "total_num_cumulative_preemption=3\n")
    code, body = _json(capsys, ["tune", "--traces", str(traces), *TUNE, "--slo-ms", "150"])
    workload = body["workloads"][0]
    assert [row["max_num_seqs"] for row in workload["failed_caps"]] == [ran["max_num_seqs"]]
    assert "preempted" in workload["failed_caps"][0]["reason"]
    assert ran["max_num_seqs"] not in [run["max_num_seqs"] for run in body["next"]]
    code, body = _json(capsys, ["tune", "--traces", str(traces), *TUNE, "--slo-ms", "150", "--retry-failed"])
    assert body["workloads"][0]["failed_caps"] == []


@pytest.mark.integration
def test_a_failed_reference_run_is_no_dead_end_for_the_loop(tmp_path, capsys):
    code, body = _json(capsys, ["tune", "--traces", str(tmp_path / "runs"), *TUNE, "--slo-relative", "2", "--run",
                                _fake_template("--fail-at 1"), "--budget-runs", "3"])
    assert body["loop"]["runs"] == 3, "the loop stopped at the failed reference run"
    notes = " ".join(body["workloads"][0]["certificate"]["notes"])
    assert "--retry-failed" in notes


def test_a_metric_nothing_predicts_at_an_unmeasured_cap_is_named_unjudged(capsys):
    code = main(["advise", "--traces", str(USER_TRACES), *ADVISE, "--slo", "p99_itl_ms=30", "--candidates",
                 "1,2,4,8,16,32,64", "--no-plan"])
    out = capsys.readouterr().out
    assert code == 0 and "unjudged: --max-num-seqs 64: p99_itl_ms cannot be predicted" in out
    assert "limited by the SLO p99_itl_ms" not in out


def test_advise_and_tune_print_the_same_next_benchmark(tmp_path, capsys):
    _, advised = _json(capsys, ["advise", "--traces", str(USER_TRACES), *ADVISE, "--slo", "p99_tpot_ms=17"])
    _, tuned = _json(capsys, ["tune", "--traces", str(USER_TRACES), "--hardware", "a100-80gb", "--workload",
                              "opt-2.7b:256:256", "--slo", "p99_tpot_ms=17"])
    decision = advised["decision"]
    assert decision["next_max_num_seqs"] == tuned["next"][0]["max_num_seqs"]
    assert decision["next_commands"]["benchmark"] == tuned["next"][0]["commands"]["benchmark"]


def test_the_serve_line_names_the_model_as_the_user_did_and_a_checkpoint_folder_is_a_model(tmp_path, capsys):
    folder = tmp_path / "checkpoints" / "opt-1.3b"
    folder.mkdir(parents=True)
    shutil.copy(REPO / "tests" / "data" / "hf_configs" / "opt-1.3b" / "config.json", folder / "config.json")
    _, tuned = _json(capsys, ["tune", "--traces", str(USER_TRACES), "--hardware", "a100-80gb", "--workload",
                              f"{folder}:256:128", "--slo-ms", "3500", "--results", str(tmp_path / "runs")])
    assert tuned["next"][0]["commands"]["server"].startswith(f"vllm serve {folder} ")
    assert tuned["measured_runs"] > 0, "the folder's model is the catalog's opt-1.3b: its runs are facts"
    code, advised = _json(capsys, ["advise", "--traces", str(USER_TRACES), "--model", str(folder), "--hardware",
                                   "a100-80gb", "--input-len", "256", "--output-len", "128", "--slo-ms", "3500"])
    assert code == 0 and advised["workload"]["served_model"] == str(folder)
    commands = advised["decision"]["next_commands"]
    assert not commands or commands["server"].startswith(f"vllm serve {folder} ")


def test_a_catalog_name_is_served_as_its_checkpoint(tmp_path, capsys):
    """``--model opt-2.7b`` names the catalog's entry; vLLM would look that name up on the Hub and not
    find it, so every vllm command loads the entry's checkpoint, while the results keep the name."""
    _, advised = _json(capsys, ["advise", "--traces", str(USER_TRACES), *ADVISE, "--slo", "p99_tpot_ms=17"])
    assert advised["workload"]["served_model"] == "facebook/opt-2.7b"
    commands = advised["decision"]["next_commands"]
    assert commands["server"].startswith("vllm serve facebook/opt-2.7b ")
    benchmark = commands["benchmark"].split()
    assert benchmark[benchmark.index("--model") + 1] == "facebook/opt-2.7b"
    assert "/opt-2.7b_in256_out256_concurrency" in commands["benchmark"]
    _, tuned = _json(capsys, ["tune", "--traces", str(USER_TRACES), "--hardware", "a100-80gb", "--workload",
                              "opt-2.7b:256:256", "--slo-ms", "3500", "--candidates", "1,8,32,64,256",
                              "--results", str(tmp_path / "runs")])
    assert tuned["workloads"][0]["serve"]["command"].startswith("vllm serve facebook/opt-2.7b ")


def _throughput_at_unmeasured_one(measured: list[float]):
    """Throughput over caps 1, 16, 32, 64: cap 1 unmeasured with an interval nothing narrows (as after a
    run far from its prior), the others measured at `measured`."""
    from slim.decision.candidates import Estimates

    n = 4
    value = np.array([np.nan, *measured])
    return Estimates(np.array([False, True, True, True]), value, np.array([126.0, *measured]),
                     np.array([0.03, *measured]), np.array([5e5, *measured]), np.full(n, 0.02))


def test_a_search_stopped_before_t_one_keeps_the_best_measured_cap_as_a_bisection_reads_it():
    from slim.decision.candidates import THROUGHPUT, Estimates, candidate_view
    from slim.decision.certificate import best_measured, certify

    throughput = _throughput_at_unmeasured_one([1556.0, 2537.0, 1576.0])
    view = candidate_view([1.0, 16.0, 32.0, 64.0], lambda name: throughput, {})
    open_certificate = certify(view, 0.1)
    assert not open_certificate.feasible and open_certificate.needs_throughput_at_one
    stopped = best_measured(open_certificate, view, "stopped at the bound")
    # T(1) read from cap 16 (1556 / 16): cap 32 batches efficiently and has the most throughput
    assert stopped.batch_cap == 32.0 and stopped.throughput_per_s == 2537.0 and not stopped.settled
    assert "stopped at the bound" in stopped.notes[-1] and "not certified" in stopped.notes[-1]
    assert not stopped.certified and stopped.to_dict()["certified"] is False and open_certificate.certified
    # T(1) is the smallest measured cap's reading (1556 / 16), not the prediction at cap 1 (126): at a floor
    # of 0.7, cap 32 batches at 0.82 of it (and at 0.63 of the prediction's, which would keep cap 16)
    strict = best_measured(certify(view, 0.7), view, "stopped at the bound")
    assert strict.batch_cap == 32.0
    from slim.decision.layouts import Layout, LayoutCandidate, decide_layouts

    decision = decide_layouts([LayoutCandidate(Layout.of_tensor_parallel(1), view, stopped)])
    assert not decision.settled and "not certified" in decision.chosen.reason
    # an SLO that every measured cap breaks leaves nothing to keep
    tpot = Estimates(np.array([False, True, True, True]), np.array([np.nan, 30.0, 40.0, 60.0]),
                     np.array([10.0, 30.0, 40.0, 60.0]), np.array([5.0, 30.0, 40.0, 60.0]),
                     np.array([20.0, 30.0, 40.0, 60.0]), np.full(4, 0.02))
    bounded = candidate_view([1.0, 16.0, 32.0, 64.0], lambda name: throughput if name == THROUGHPUT else tpot,
                             {"mean_tpot_ms": 25.0})
    assert not best_measured(certify(bounded, 0.1), bounded, "stopped").feasible
    # a certified incumbent is left as it is
    measured = candidate_view([1.0, 16.0, 32.0], lambda name: Estimates.facts([126.0, 1556.0, 2537.0]), {})
    certified = certify(measured, 0.1)
    assert best_measured(certified, measured, "stopped") == certified


def test_the_session_the_bound_stopped_answers_with_its_best_measured_cap():
    from slim.tune.proposals import propose

    session, workload = _session(Slos.of(slo_ms=1e6), margin=0.0)     # an SLO every cap meets
    # measured far from the prior at the large caps: the intervals at cap 1 widen, and no extra run is allowed
    for cap, factor in ((8.0, 1.0), (32.0, 3.0), (64.0, 0.3)):
        session.record(_row(session, cap), Measurement(factor * 100.0 * cap ** 0.9, 1.0 + cap / 100, 10.0))
    assert not propose(session) and workload.label in session.stopped_by_bound
    certificate = session.certificate(workload)
    assert certificate.batch_cap == 32.0 and not certificate.settled      # the most measured throughput
    assert any("stopped at the bound" in note for note in certificate.notes)
