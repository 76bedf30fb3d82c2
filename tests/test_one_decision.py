"""One decision: on the same runs and SLOs, `slim advise` and `slim tune`'s plan choose the same cap, on
every public fixed-length curve under one SLO of each kind; and the SLOs as a user states them on the
command line (a per-token SLO prints its measured and predicted value; one the runs cannot judge exits
2 with one line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slim import columns as col
from slim.advisor.advise import AdviceRequest, advise
from slim.advisor.candidates import CandidateRow, advice_certificate, advice_view
from slim.advisor.layouts import advise_layouts
from slim.cli import EXIT_BAD_INPUT, main
from slim.decision.candidates import THROUGHPUT
from slim.defaults import DEFAULT_MAX_RUNS_PER_CAP
from slim.errors import AdvisorError
from slim.sim.run_cache import SimulationCache
from slim.specs.slo import Slos

SLO_KINDS = {
    "in-batch E2E, relative": ["mean_in_batch_e2e_ms=2x"],
    "p99 TPOT, relative": ["p99_tpot_ms=2x"],
    "p99 TPOT, absolute": ["p99_tpot_ms=25"],
    "p99 ITL, relative": ["p99_itl_ms=2x"],
}
USER = Path(__file__).parent / "data" / "user_dataset" / "traces"   # OPT-2.7B, IL 256, OL 256, caps 1..32
EXAMPLE = ["advise", "--traces", "<traces>", "--model", "facebook/opt-2.7b", "--hardware", "h100-64gb",
           "--input-len", "242", "--output-len", "520"]


def public_curves(clean):
    """(model, IL, OL) of every fixed-length public curve (a cap sweep of at least 7 caps)."""
    counts = clean.groupby([col.MODEL, col.INPUT_LEN_NOMINAL, col.OUTPUT_LEN_NOMINAL])[col.MAX_NUM_SEQS].nunique()
    return [key for key, caps in counts.items() if caps >= 7]


@pytest.mark.traces
@pytest.mark.integration
def test_advise_and_the_tune_plan_choose_the_same_cap_on_every_public_curve(shared_traces_dir, public_clean):
    _, clean = public_clean
    curves = public_curves(clean)
    assert len(curves) == 12
    missing_reference = {(model, il, ol) for model, il, ol in curves
                         if not ((clean[col.MODEL] == model) & (clean[col.INPUT_LEN_NOMINAL] == il)
                                 & (clean[col.OUTPUT_LEN_NOMINAL] == ol) & (clean[col.MAX_NUM_SEQS] == 1)).any()}
    assert len(missing_reference) == 1
    differ, undecided, explained = [], [], []
    simulations = SimulationCache()     # every advice simulates the same runs: once
    for kind, slos in SLO_KINDS.items():
        for model, il, ol in curves:
            try:
                advice = advise(AdviceRequest(shared_traces_dir / "output_length", model, float(il), float(ol),
                                              slos=Slos.of(slos), hardware="h100-64gb", simulations=simulations))
            except AdvisorError as error:
                # A measure-only metric's relative bound needs its reference run: both commands ask for it.
                assert "measure that cap first" in str(error)
                undecided.append((kind, model, il, ol))
                continue
            tune = advice.tune
            if (model, il, ol) in missing_reference and slos[0].endswith("x"):
                # advise predicts the reference cap's value; tune measures it first, and says so in one line
                assert tune.disagreement.startswith("slim tune recommends no cap yet: a relative SLO")
                explained.append((kind, model, il, ol))
            elif tune.batch_cap != advice.recommendation.batch_cap or tune.disagreement:
                differ.append(f"{kind} {model} IL {il} OL {ol}: advise {advice.recommendation.batch_cap:g}, "
                              f"tune {tune.batch_cap:g} ({tune.disagreement})")
    assert differ == []
    relative = [kind for kind, slos in SLO_KINDS.items() if slos[0].endswith("x")]
    assert sorted(undecided + explained) == sorted((kind, *curve) for kind in relative for curve in missing_reference)
    assert {kind for kind, *_ in undecided} == {"p99 ITL, relative"}, "only SIM's measure-only metric is refused"


@pytest.mark.traces
@pytest.mark.integration
def test_a_per_token_slo_prints_its_measured_and_predicted_value_at_the_chosen_cap(shared_traces_dir, capsys):
    argv = [str(shared_traces_dir / "output_length") if word == "<traces>" else word for word in EXAMPLE]
    assert main([*argv, "--slo", "p99_tpot_ms=20", "--no-plan"]) == 0
    out = capsys.readouterr().out
    assert "Recommended --max-num-seqs 64 (measured; limited by the SLO p99_tpot_ms)" in out
    line = next(line for line in out.splitlines() if line.strip().startswith("p99_tpot_ms"))
    assert "ms (measured; SIM predicts" in line, line
    assert main([*argv, "--slo", "p99_ttft_ms=2000", "--no-plan"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "p99_ttft_ms cannot be judged from these runs" in err
    assert "--max-concurrency" in err


def test_advise_measures_again_a_cap_within_the_run_to_run_noise_of_its_bound_as_tune_does():
    # Cap 32's p99 TPOT measured 17.1 ms, 0.6 % over the 17 ms bound, once: within 2 % scatter. Were it
    # within the bound it would beat cap 16, so both commands ask for it again before settling, and
    # the decision across layouts (advise's certificate) says so too instead of calling it settled.
    request = AdviceRequest(USER, "opt-2.7b", 256.0, 256.0, slos=Slos.of(["p99_tpot_ms=17"]), hardware="h100-64gb")
    advice = advise(request)
    assert advice.recommendation.batch_cap == 16 and advice.certificate.repeat == (32.0,)
    assert not advice.certificate.settled
    assert advice.tune.next_cap == 32 and "run-to-run scatter" in advice.tune.next_reason
    layouts = advise_layouts(request, (1,), gpus=8)
    assert not layouts.settled and layouts.chosen.next_cap == 32 and layouts.chosen.next_run_repeats
    # Clear of the noise (15 % under a 20 ms bound), nothing is measured again.
    clear = AdviceRequest(USER, "opt-2.7b", 256.0, 256.0, slos=Slos.of(["p99_tpot_ms=20"]), hardware="h100-64gb")
    assert advise(clear).certificate.repeat == ()


def test_a_cap_measured_as_often_as_tune_repeats_is_judged_on_its_runs():
    def rows(repeats: int) -> tuple[CandidateRow, ...]:
        measured = {1.0: (100.0, 10.0), 2.0: (180.0, 17.1)}   # cap 2 just over a 17 ms bound
        return tuple(CandidateRow(cap, {THROUGHPUT: t, col.MEAN_TPOT_MS: m}, {THROUGHPUT: t, col.MEAN_TPOT_MS: m},
                                  runs=1, averaged_runs=repeats if cap == 2.0 else 1, log_sd=0.02 / repeats ** 0.5)
                     for cap, (t, m) in measured.items())

    slos = Slos.of(["mean_tpot_ms=17"])
    once = advice_certificate(advice_view(rows(1), slos, {col.MEAN_TPOT_MS: 17.0}), 0.1, 0.01)
    assert once.repeat == (2.0,) and not once.settled
    limit = advice_certificate(advice_view(rows(DEFAULT_MAX_RUNS_PER_CAP), slos, {col.MEAN_TPOT_MS: 17.0}), 0.1, 0.01)
    assert limit.repeat == () and limit.settled and limit.batch_cap == 1.0


def test_advise_and_tune_hold_a_measurement_to_one_noise_floor():
    # advise scores a measured cap at its runs' scatter, at least DEFAULT_SCATTER (slim.tune.measurement);
    # tune's belief at the larger of that scatter and its kernel's noise_sd. They judge a cap within the
    # noise of its bound alike only while no shipped kernel's floor exceeds DEFAULT_SCATTER.
    from slim.tune.kernel import load_kernels
    from slim.tune.measurement import DEFAULT_SCATTER

    kernels = load_kernels()
    assert all(kernel.noise_sd <= DEFAULT_SCATTER for kernel in kernels.kernels.values())
