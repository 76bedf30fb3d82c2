"""The layout as the decision (`slim.advisor.layouts`): the choice by tokens/s per GPU, the
deployment on the GPUs available or for a request rate, and `slim advise` across tensor-parallel
sizes on NVIDIA's Llama-3.1-70B FP8 sweep."""

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from slim import cli
from slim.advisor.layout_report import layout_lines
from slim.advisor.layouts import LayoutAdvice, LayoutOutcome

REPO = Path(__file__).resolve().parents[1]


def _outcome(tensor_parallel: int, throughput: float | None) -> LayoutOutcome:
    if throughput is None:
        return LayoutOutcome(tensor_parallel, None, "no cap meets the SLOs")
    recommendation = SimpleNamespace(throughput_per_s=throughput, batch_cap=64.0, measured=True, values_ms={})
    return LayoutOutcome(tensor_parallel, SimpleNamespace(
        recommendation=recommendation, memory=SimpleNamespace(gpu_memory_utilization_needed=0.5),
        max_model_len=2048, served_model="m", gpus_per_server=tensor_parallel))


def test_the_deployment_on_gpus_and_for_a_request_rate():
    tp2, tp4 = _outcome(2, 4000.0), _outcome(4, 6400.0)     # 2,000 and 1,600 tokens/s per GPU
    assert (tp2.throughput_per_gpu, tp4.throughput_per_gpu) == (2000.0, 1600.0)
    assert math.isnan(_outcome(8, None).throughput_per_gpu)
    on_gpus = LayoutAdvice((tp2, tp4), tp2, 8, None, 2048.0)
    assert (on_gpus.replicas, on_gpus.gpus_needed, on_gpus.headroom) == (4, 8, None)
    # 10 requests/s of 2,048 tokens; one TP 2 replica serves 4000 / 2048 = 1.953 requests/s: 6 replicas.
    for_rate = LayoutAdvice((tp2, tp4), tp2, None, 10.0, 2048.0)
    assert for_rate.requests_per_replica == pytest.approx(4000 / 2048)
    assert (for_rate.replicas, for_rate.gpus_needed) == (6, 12)
    assert for_rate.headroom == pytest.approx(6 * 4000 / 2048 / 10 - 1)
    assert LayoutAdvice((_outcome(2, None),), None, 8, None, 2048.0).replicas is None
    assert "more than the 8 GPUs available" in layout_lines(LayoutAdvice((tp2,), tp2, 8, 10.0, 2048.0))[-2]


@pytest.fixture(scope="module")
def silicon(shared_traces_dir):
    folder = shared_traces_dir.parent / "aiconfigurator-silicon"
    if not folder.is_dir():
        pytest.skip(f"{folder} not present")
    return ["advise", "--traces", str(folder), "--model", "llama-3.1-70b-fp8", "--hardware", "h100-sxm-80gb",
            "--input-len", "1024", "--output-len", "1024", "--predictor", "sim"]


@pytest.mark.integration
def test_the_layout_changes_with_the_bound(silicon, capsys):
    """Under TPOT <= 25 ms TP 2's best measured cap gives fewer tokens/s per GPU than TP 4's; under 40 ms
    TP 2 wins (the sweep's central TPOTs)."""
    chosen = {}
    for bound in (25, 40):
        assert cli.main([*silicon, "--slo", f"mean_tpot_ms={bound}", "--gpus", "8", "--tensor-parallel-sizes",
                         "2,4,8", "--json"]) == 0
        document = json.loads(capsys.readouterr().out)
        chosen[bound] = document["chosen_tensor_parallel_size"]
        layouts = {layout["tensor_parallel_size"]: layout for layout in document["layouts"]}
        assert set(layouts) == {2, 4, 8}
        best = max(layouts.values(), key=lambda layout: layout["total_token_throughput_per_gpu"])
        assert best["tensor_parallel_size"] == chosen[bound]
        assert document["replicas"] == 8 // chosen[bound]
        assert document["serve"].startswith("vllm serve llama-3.1-70b-fp8")
        assert all(layout["mean_tpot_ms"] <= bound for layout in layouts.values())
    assert chosen == {25: 4, 40: 2}


@pytest.mark.integration
def test_a_layout_above_the_gpus_loses_with_its_reason_and_the_rate_sizes_the_fleet(silicon, capsys):
    assert cli.main([*silicon, "--slo", "mean_tpot_ms=40", "--gpus", "2"]) == 0
    out = capsys.readouterr().out
    assert "TP 4: no cap (needs 4 GPUs, 2 available)" not in out      # default sizes stop at the GPUs
    # TP 1 holds the 70 GB of fp8 weights with room for a couple of sequences: predicted, far behind.
    assert "TP 1: --max-num-seqs" in out and "(predicted)" in out and "On 2 GPUs: 1 replica(s) x TP 2" in out
    assert cli.main([*silicon, "--slo", "mean_tpot_ms=40", "--tensor-parallel-sizes", "2,4", "--gpus", "2"]) == 0
    assert "TP 4: no cap (needs 4 GPUs, 2 available)" in capsys.readouterr().out
    assert cli.main([*silicon, "--slo", "mean_tpot_ms=40", "--tensor-parallel-sizes", "2", "--request-rate", "20",
                     "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    per_replica = document["layouts"][0]["total_token_throughput"] / 2048
    assert document["replicas"] == math.ceil(20 / per_replica) and document["gpus_needed"] == 2 * document["replicas"]
    assert cli.main([*silicon, "--slo", "mean_tpot_ms=5", "--tensor-parallel-sizes", "2,4,8"]) == \
        cli.EXIT_NO_FEASIBLE_CAP
    assert "No layout meets the SLOs." in capsys.readouterr().out


def test_a_layout_is_charged_the_gpus_of_its_whole_server():
    """TP 4 at data-parallel 4 occupies 16 GPUs: the same total throughput is a quarter per GPU."""
    alone = _outcome(4, 6400.0)
    ranked = LayoutOutcome(4, SimpleNamespace(**{**vars(alone.advice), "gpus_per_server": 16}), None, 4)
    assert (alone.throughput_per_gpu, ranked.throughput_per_gpu) == (1600.0, 400.0)
    assert (ranked.name, ranked.gpus_per_replica) == ("TP 4 x DP 4", 16)
    advice = LayoutAdvice((ranked,), ranked, 32, None, 2048.0)
    assert (advice.replicas, advice.gpus_needed) == (2, 32)
    assert "--tensor-parallel-size 4 --data-parallel-size 4 --max-num-seqs 16 " in layout_lines(advice)[-1]


SWEEP_HEADER = (REPO / "tests" / "data" / "aiconfigurator_silicon" / "sweep.csv").read_text().splitlines()[0]
IN_FLIGHT = (4, 8, 16, 32, 64)


def _sweep_row(data_parallel: int, in_flight: int) -> dict[str, str]:
    """A made-up closed-loop row of MiniMax-M2.5 at TP 4: TPOT 10 + 0.25 N ms, 1 ms slower at DP 4."""
    tpot_ms = 10.0 + 0.25 * in_flight + (1.0 if data_parallel > 1 else 0.0)
    return {"id": f"dp{data_parallel}_c{in_flight}", "silicon_data_source": f"silicon_concurrency={in_flight}",
            "backend": "vllm", "backend_version": "0.12.0", "model_path": "MiniMaxAI/MiniMax-M2.5",
            "system": "h100_sxm", "precision": "fp8", "mode": "agg", "isl": "1024", "osl": "1024",
            "gemm_quant_mode": "fp8", "moe_quant_mode": "fp8", "batch_size": str(in_flight // data_parallel),
            "tp_size": "4", "pp_size": "1", "attention_dp_size": str(data_parallel), "moe_tp_size": "1",
            "moe_ep_size": str(4 * data_parallel), "silicon_ttft_ms": "100.0", "silicon_tpot_ms": f"{tpot_ms}"}


def test_runs_at_another_data_parallel_size_are_a_layout_of_their_own(tmp_path):
    """A sweep of TP 4 at DP 1 (4 GPUs) and DP 4 (16 GPUs): each layout is judged on its own runs and
    its throughput is per GPU of its whole server, so DP 1 wins on 16 GPUs."""
    import csv

    from slim.advisor.layouts import advise_layouts
    from slim.advisor.request import AdviceRequest
    from slim.specs.slo import Slos

    fields = SWEEP_HEADER.split(",")
    with (tmp_path / "sweep.csv").open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fields, restval="")
        writer.writeheader()
        writer.writerows(_sweep_row(dp, n) for dp in (1, 4) for n in IN_FLIGHT)
    request = AdviceRequest(tmp_path, "minimax-m2.5", 1024, 1024, slos=Slos.of(["mean_tpot_ms=20"]),
                            hardware="h100-sxm-80gb", predictor="sim", candidates=IN_FLIGHT, plan=False)
    layouts = advise_layouts(request, (4,), gpus=16)
    by_size = {outcome.data_parallel: outcome for outcome in layouts.outcomes}
    assert sorted(by_size) == [1, 4] and layouts.chosen is by_size[1]
    for data_parallel, gpus in ((1, 4), (4, 16)):
        outcome = by_size[data_parallel]
        recommendation = outcome.advice.recommendation
        # Under 20 ms the best cap is 32 at both sizes (TPOT 18 ms at DP 1, 19 ms at DP 4; 64 measures 26 ms).
        assert recommendation.measured and recommendation.batch_cap == 32 and outcome.gpus_per_replica == gpus
        measured = next(row for row in outcome.advice.candidates if row.max_num_seqs == recommendation.batch_cap)
        assert measured.runs == 1, "one run per cap: the other data-parallel size's are not averaged in"
        tpot_ms = 10.0 + 0.25 * recommendation.batch_cap + (1.0 if data_parallel > 1 else 0.0)
        e2e_s = (100.0 + 1023 * tpot_ms) / 1000
        assert outcome.throughput_per_gpu == pytest.approx(recommendation.batch_cap * 2048 / e2e_s / gpus)
    assert layouts.replicas == 4 and layouts.gpus_needed == 16
