"""The layout as the decision (`slim.advisor.layouts`): the choice by tokens/s per GPU, the
deployment on the GPUs available or for a request rate, and `slim advise` across tensor-parallel
sizes on NVIDIA's Llama-3.1-70B FP8 sweep."""

import json
import math
from types import SimpleNamespace

import pytest

from slim import cli
from slim.advisor.layouts import LayoutAdvice, LayoutOutcome, layout_lines


def _outcome(tensor_parallel: int, throughput: float | None) -> LayoutOutcome:
    if throughput is None:
        return LayoutOutcome(tensor_parallel, None, "no cap meets the SLOs")
    recommendation = SimpleNamespace(throughput_per_s=throughput, batch_cap=64.0, measured=True, values_ms={})
    return LayoutOutcome(tensor_parallel, SimpleNamespace(
        recommendation=recommendation, memory=SimpleNamespace(gpu_memory_utilization_needed=0.5),
        max_model_len=2048, served_model="m"))


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
