"""`slim advise` on the checkpoints people serve now, each described by its published `config.json`
(`tests/data/hf_configs/`, written from the models' published architectures), with and without an
fp8 KV cache: a prediction, a memory plan and a knee where the model fits one GPU, one line naming
why where it does not."""

import json
from pathlib import Path

import pytest

from slim import cli

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO / "tests" / "data" / "user_dataset" / "traces"     # opt runs on an A100 80 GB, tensor parallel 1
FITS_ONE_GPU = ("qwen3-30b-a3b", "gpt-oss-120b", "llama-3.1-70b-fp8", "qwen2.5-32b-awq", "gemma-3-27b")
TOO_BIG = ("mixtral-8x7b", "deepseek-v3")      # 16-bit Mixtral (87 GiB) and DeepSeek-V3 (~630 GiB) on 80 GB


def _advise(capsys, config: str, *extra: str) -> tuple[int, dict]:
    code = cli.main(["advise", "--traces", str(TRACES), "--model-config",
                     str(REPO / "tests" / "data" / "hf_configs" / config / "config.json"), "--hardware", "a100-80gb",
                     "--input-len", "256", "--output-len", "256", "--slo-ms", "60000", "--no-plan", "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("config", FITS_ONE_GPU)
def test_a_modern_checkpoint_gets_a_prediction_a_memory_plan_and_a_knee(capsys, config):
    code, plain = _advise(capsys, config)
    assert code == 0, plain
    cap = plain["recommendation"]["max_num_seqs"]
    chosen = next(c for c in plain["candidates"] if c["max_num_seqs"] == cap)
    assert chosen["predicted"]["total_token_throughput"] > 0
    assert plain["memory"]["num_gpu_blocks_override"] >= 32 and plain["knee"]["b_knee"] > 0
    code, fp8 = _advise(capsys, config, "--kv-cache-dtype", "fp8")
    assert code == 0, fp8
    per_sequence = {doc["memory"]["kv_bytes_needed"] / doc["recommendation"]["max_num_seqs"] for doc in (plain, fp8)}
    assert max(per_sequence) == pytest.approx(2 * min(per_sequence))       # one byte per KV element, not two
    assert fp8["knee"]["b_knee"] > plain["knee"]["b_knee"]


@pytest.mark.parametrize("config", TOO_BIG)
def test_a_checkpoint_too_big_for_one_gpu_is_named_in_one_line(capsys, config):
    code, document = _advise(capsys, config)
    assert code == cli.EXIT_NO_FEASIBLE_CAP
    assert "split over 1 rank(s) leave no KV cache on each a100-80gb" in document["message"]


def _tune(capsys, tmp_path, config: str, *extra: str) -> tuple[int, dict | str]:
    name = json.loads((REPO / "tests" / "data" / "hf_configs" / config / "config.json").read_text()).get(
        "_name_or_path", config)
    code = cli.main(["tune", "--traces", str(tmp_path), "--model-config",
                     str(REPO / "tests" / "data" / "hf_configs" / config / "config.json"), "--workload",
                     f"{name}:256:256", "--hardware", "a100-80gb", "--slo-ms", "60000", "--json", *extra])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err)


@pytest.mark.parametrize("config", FITS_ONE_GPU)
def test_tune_plans_a_modern_checkpoint_from_its_prediction(capsys, tmp_path, config):
    for kv in ((), ("--kv-cache-dtype", "fp8")):
        code, body = _tune(capsys, tmp_path, config, *kv)
        assert code == 0, body
        recommendation = body["workloads"][0]["recommendation"]
        assert recommendation["total_token_throughput"] > 0 and not recommendation["measured"]
        assert body["next"][0]["commands"]["server"].startswith("vllm serve ")


@pytest.mark.parametrize("config", TOO_BIG)
def test_tune_names_a_checkpoint_too_big_for_its_layout_in_one_line(capsys, tmp_path, config):
    code, err = _tune(capsys, tmp_path, config)
    assert code == cli.EXIT_NO_FEASIBLE_CAP and "at tensor parallel 1" in err and "--tensor-parallel-size" in err
    assert len(err.strip().splitlines()) == 1


def test_tune_plans_mixtral_across_two_gpus(capsys, tmp_path):
    code, body = _tune(capsys, tmp_path, "mixtral-8x7b", "--tensor-parallel-size", "2")
    assert code == 0, body
    assert "--tensor-parallel-size 2" in body["next"][0]["commands"]["server"]


def test_both_commands_exit_3_in_one_line_where_vllm_refuses_the_tensor_parallel_size(capsys, tmp_path):
    code, document = _advise(capsys, "opt-1.3b", "--tensor-parallel-size", "3")      # 32 heads over 3 ranks
    assert code == cli.EXIT_NO_FEASIBLE_CAP and "--tensor-parallel-size 3" in document["message"]
    code, err = _tune(capsys, tmp_path, "opt-1.3b", "--tensor-parallel-size", "3")
    assert code == cli.EXIT_NO_FEASIBLE_CAP and "at tensor parallel 3" in err and "divide" in err
    assert len(err.strip().splitlines()) == 1



def test_both_commands_exit_3_where_no_layout_asked_for_can_run(capsys, tmp_path):
    code, document = _advise(capsys, "opt-1.3b", "--tensor-parallel-sizes", "3", "--gpus", "8")
    assert code == cli.EXIT_NO_FEASIBLE_CAP, document
    code, err = _tune(capsys, tmp_path, "opt-1.3b", "--tensor-parallel-sizes", "3", "--gpus", "8")
    assert code == cli.EXIT_NO_FEASIBLE_CAP and err.startswith("slim tune: ") and "no layout asked for can run" in err
