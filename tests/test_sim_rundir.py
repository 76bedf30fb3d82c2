"""slim.sim run directories: the public-trace layout, byte determinism, OOM logs, and a
round trip through the project's own ingest."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from slim import columns as col
from slim.sim import SimConstants, simulate_run
from slim.sim.grid import expand_grid, simulate_grid_to_dir
from slim.sim.rundir import PHASE_FILE, write_run_dir
from slim.specs.hardware import HARDWARE_FILE, load_hardware
from slim.traces.ingest import ingest_run_dir


@pytest.fixture(scope="module")
def hardware():
    return load_hardware(HARDWARE_FILE)


def tree_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


SMALL_GRID = {
    "hardware": "h100-64gb", "num_prompts": 30, "seed": 7,
    "sweeps": [
        {"name": "ol", "dir": "output_length/_{output_len}", "models": ["opt-125m"], "input_len": [64],
         "output_len": [16, 24], "max_num_seqs": [2, 8]},
        {"name": "oom", "dir": "faults/_{output_len}", "models": [{"name": "qwen2-72b", "tensor_parallel": 1}],
         "input_len": [64], "output_len": [16], "max_num_seqs": [4]},
    ],
}


def test_grid_is_byte_deterministic_and_worker_independent(tmp_path, catalog, hardware):
    first = simulate_grid_to_dir(SMALL_GRID, catalog, hardware, SimConstants(), tmp_path / "a")
    simulate_grid_to_dir(SMALL_GRID, catalog, hardware, SimConstants(), tmp_path / "b", workers=2)
    assert len(first) == len(expand_grid(SMALL_GRID)) == 5
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")
    reseeded = dict(SMALL_GRID, seed=8)
    simulate_grid_to_dir(reseeded, catalog, hardware, SimConstants(), tmp_path / "c")
    json_a = next((tmp_path / "a/output_length/_16/opt-125m/_8__30").glob("*.json")).read_text()
    json_c = next((tmp_path / "c/output_length/_16/opt-125m/_8__30").glob("*.json")).read_text()
    assert json_a != json_c


def test_run_dir_layout_and_files(tmp_path, catalog, hardware):
    result = simulate_run(catalog["opt-125m"], hardware["h100-64gb"], SimConstants(), 64, 16, 8, 30, seed=1)
    run_dir = write_run_dir(result, tmp_path, "output_length/_16")
    assert run_dir == tmp_path / "output_length/_16/opt-125m/_8__30"
    names = sorted(p.name for p in run_dir.iterdir())
    assert names[0] == "cache_config.txt" and "metrics_engine.csv" in names and PHASE_FILE in names
    assert [n for n in names if n.endswith(".json")] == ["openai-infqps-opt-125m-20250101-000000.json"]
    content = json.loads(next(run_dir.glob("*.json")).read_text())
    real_keys = ["date", "backend", "model_id", "tokenizer_id", "best_of", "num_prompts", "request_rate", "duration",
                 "completed", "total_input_tokens", "total_output_tokens", "request_throughput", "output_throughput",
                 "total_token_throughput"] + [f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl")
                                               for s in ("mean", "median", "std", "p99")]
    assert list(content) == real_keys
    header = (run_dir / "metrics_engine.csv").read_text().splitlines()[0]
    assert header == ("time [s],scheduler_total_time,model_forward_total_time,gpu_cache_usage_perc,"
                      "num_requests_running,num_requests_waiting,num_preemptions_total,request_success_total,"
                      "prompt_tokens_total,generation_tokens_total")
    assert 'num_gpu_blocks="' in (run_dir / "cache_config.txt").read_text()
    client_log = next(run_dir.glob("log_*.out")).read_text()
    assert "--max-num-seqs=8" in client_log and "random_input_len=64" in client_log
    assert "Running: " in (run_dir / "server_out.log").read_text()


def test_oom_configuration_writes_logs_and_no_json(tmp_path, catalog, hardware):
    h100 = hardware["h100-64gb"]
    oom = simulate_run(catalog["qwen2-72b"], h100, SimConstants(), 256, 128, 8, 10)
    run_dir = write_run_dir(oom, tmp_path, "faults")
    assert not list(run_dir.glob("*.json"))
    assert "CUDA out of memory" in (run_dir / "server_err.log").read_text()
    small_card = replace(h100, memory_bytes=int(14.5 * 1024**3))
    no_cache = simulate_run(catalog["llama-2-7b"], small_card, SimConstants(), 250, 10, 8, 10)
    assert no_cache.status == "no_cache_memory"
    err = (write_run_dir(no_cache, tmp_path, "faults2") / "server_err.log").read_text()
    assert "No available memory for the cache blocks" in err
    row = ingest_run_dir(run_dir, tmp_path, "sim", catalog)
    assert row[col.STATUS] == "out_of_memory" and row[col.MODEL] == "qwen2-72b"


def test_ingest_round_trip(tmp_path, catalog, hardware):
    result = simulate_run(catalog["opt-350m"], hardware["h100-64gb"], SimConstants(), 128, 32, 16, 600, seed=4)
    run_dir = write_run_dir(result, tmp_path, "output_length/_32")
    row = ingest_run_dir(run_dir, tmp_path, "sim", catalog)
    assert row[col.STATUS] == "ok"
    assert row[col.MODEL] == "opt-350m" and row[col.MAX_NUM_SEQS] == 16 and row[col.NUM_PROMPTS] == 600
    assert (row[col.INPUT_LEN_NOMINAL], row[col.OUTPUT_LEN_NOMINAL]) == (128, 32)
    assert row[col.TOTAL_TOKEN_THROUGHPUT] == pytest.approx(result.total_token_throughput_per_s)
    assert row[col.MEAN_BATCH_SIZE] == pytest.approx(result.mean_batch_size)
    assert row[col.KV_CAPACITY_TOKENS] == result.plan.kv_capacity_tokens
    assert row[col.NUM_PREEMPTIONS] == 0
