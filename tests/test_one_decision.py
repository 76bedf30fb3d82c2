"""One decision: on the same runs and SLOs, `slim advise` and `slim tune`'s plan choose the same cap, on
every public fixed-length curve under one SLO of each kind; and the SLOs as a user states them on the
command line (a per-token SLO prints its measured and predicted value; one the runs cannot judge exits
2 with one line)."""

from __future__ import annotations

import pytest

from slim import columns as col
from slim.advisor.advise import AdviceRequest, advise
from slim.cli import EXIT_BAD_INPUT, main
from slim.errors import AdvisorError
from slim.sim.run_cache import SimulationCache
from slim.specs.slo import Slos

SLO_KINDS = {
    "in-batch E2E, relative": ["mean_in_batch_e2e_ms=2x"],
    "p99 TPOT, relative": ["p99_tpot_ms=2x"],
    "p99 TPOT, absolute": ["p99_tpot_ms=25"],
    "p99 ITL, relative": ["p99_itl_ms=2x"],
}
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
