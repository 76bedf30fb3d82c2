"""The `slim advise` command: one-line errors with a non-zero exit, and a real run on the public traces."""

import subprocess
import sys
from pathlib import Path

import pytest

from slim.cli import advise, format_advice, main

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = ["--model", "opt-1.3b", "--input-len", "242", "--output-len", "520"]


def run_main(capsys, argv):
    try:
        code = main(argv)
    except SystemExit as exit_:   # argparse errors
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(err: str, *fragments: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize("argv, fragment", [
    ([*WORKLOAD, "--slo-ms", "8000"], "--traces"),                                   # missing argument
    (["--traces", "x", *WORKLOAD, "--slo-ms", "-5"], "--slo-ms"),
    (["--traces", "x", *WORKLOAD, "--slo-ms", "8000", "--epsilon", "1.5"], "--epsilon"),
    (["--traces", "x", "--model", "opt-1.3b", "--input-len", "ten", "--output-len", "5", "--slo-ms", "1"],
     "--input-len"),
])
def test_argument_errors_exit_2_with_one_line(capsys, argv, fragment):
    code, out, err = run_main(capsys, ["advise", *argv])
    assert code == 2 and out == ""
    assert_one_line_error(err, fragment)


def test_missing_trace_dir(capsys, tmp_path):
    code, _, err = run_main(capsys, ["advise", "--traces", str(tmp_path / "nope"), *WORKLOAD, "--slo-ms", "8000"])
    assert code == 1
    assert_one_line_error(err, "does not exist", "nope")


def test_trace_dir_without_runs(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("not a benchmark run\n")
    code, _, err = run_main(capsys, ["advise", "--traces", str(tmp_path), *WORKLOAD, "--slo-ms", "8000"])
    assert code == 1
    assert_one_line_error(err, "no vLLM benchmark runs")


def test_unknown_model_and_hardware(capsys, shared_traces_dir):
    traces = str(shared_traces_dir / "output_length")
    code, _, err = run_main(capsys, ["advise", "--traces", traces, "--model", "gpt-9", "--input-len", "242",
                                     "--output-len", "520", "--slo-ms", "8000",
                                     "--models-file", str(REPO / "config/models.yaml")])
    assert code == 1
    assert_one_line_error(err, "unknown model 'gpt-9'")
    code, _, err = run_main(capsys, ["advise", "--traces", traces, *WORKLOAD, "--slo-ms", "8000",
                                     "--hardware", "tpu-v9", "--hardware-file", str(REPO / "config/hardware.yaml")])
    assert code == 1
    assert_one_line_error(err, "unknown hardware 'tpu-v9'")


@pytest.fixture(scope="module")
def public_advice(shared_traces_dir):
    return advise(shared_traces_dir / "output_length", "opt-1.3b", 242, 520, slo_s=8.0, epsilon=0.1,
                  models_file=REPO / "config/models.yaml", hardware_file=REPO / "config/hardware.yaml")


def test_real_advice_on_the_public_traces(public_advice):
    decision, memory = public_advice.decision, public_advice.memory
    assert public_advice.n_runs == public_advice.fit.n_train_points >= 100
    assert decision.feasible and decision.e2e_latency_s <= 8.0 and decision.batching_efficiency > 0.1
    assert decision.batch_cap in (16, 32, 64, 128)
    assert public_advice.kv_capacity_source == "traces"
    # 242 + 520 tokens -> 48 blocks of 16 per sequence; one block is 16 x 196,608 bytes for OPT-1.3B.
    assert memory.num_gpu_blocks_override == decision.batch_cap * 48
    assert memory.kv_bytes_needed == pytest.approx(decision.batch_cap * 768 * 196_608)
    assert 0 < memory.gpu_memory_utilization_needed < 0.9
    assert memory.memory_saved_bytes > 0


def test_infeasible_slo_is_a_one_line_error(capsys, shared_traces_dir):
    code, _, err = run_main(capsys, ["advise", "--traces", str(shared_traces_dir / "output_length"), *WORKLOAD,
                                     "--slo-ms", "10", "--models-file", str(REPO / "config/models.yaml"),
                                     "--hardware-file", str(REPO / "config/hardware.yaml")])
    assert code == 1
    assert_one_line_error(err, "no candidate meets the SLO")


def test_python_dash_m_prints_the_recommendation(shared_traces_dir):
    result = subprocess.run([sys.executable, "-m", "slim", "advise", "--traces",
                             str(shared_traces_dir / "output_length"), *WORKLOAD, "--slo-ms", "8000"],
                            cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    for fragment in ("Recommended --max-num-seqs", "--gpu-memory-utilization", "--num-gpu-blocks-override",
                     "Knee advisor"):
        assert fragment in result.stdout


# ---------------------------------------------------------------- slim check

BROKEN = REPO / "tests" / "data" / "broken_runs"


def _all_bad_folder(root: Path) -> Path:
    (root / "truncated").mkdir(parents=True)
    (root / "truncated" / "vllm-infqps-opt-1.3b-20250901-101500.json").write_text('{"completed": ')
    (root / "port_clash").mkdir()
    (root / "port_clash" / "server_err.log").write_text("OSError: [Errno 98] Address already in use\n")
    return root


def test_check_prints_status_run_file_and_reason_for_every_run(capsys):
    code, out, err = run_main(capsys, ["check", str(BROKEN), "--models-file", str(REPO / "config/models.yaml")])
    assert code == 0
    lines = [line.split("\t") for line in out.splitlines()]
    assert len(lines) == len(list(BROKEN.glob("*/"))) and all(len(fields) == 4 for fields in lines)
    by_run = {run: (status, fault_file, reason) for status, run, fault_file, reason in lines}
    assert by_run["port_clash"] == ("server_start_failed", "server_err.log",
                                    "server_err.log: OSError: [Errno 98] Address already in use")
    assert by_run["duplicate_b"][0] == "duplicate" and by_run["good_old_format"][:2] == ("ok", "-")
    assert "usable" in err


def test_check_exits_1_when_nothing_is_usable_and_names_a_missing_folder(capsys, tmp_path):
    code, out, _ = run_main(capsys, ["check", str(_all_bad_folder(tmp_path / "runs"))])
    assert code == 1
    assert sorted(line.split("\t")[0] for line in out.splitlines()) == ["corrupt", "server_start_failed"]
    code, _, err = run_main(capsys, ["check", str(tmp_path / "nope")])
    assert code == 1
    assert_one_line_error(err, "does not exist", "nope")
    (tmp_path / "a_file").write_text("x")
    code, _, err = run_main(capsys, ["check", str(tmp_path / "a_file")])
    assert_one_line_error(err, "is a file")


def test_advise_without_usable_runs_prints_why_for_each_run(capsys, tmp_path):
    code, out, err = run_main(capsys, ["advise", "--traces", str(_all_bad_folder(tmp_path / "runs")), *WORKLOAD,
                                       "--slo-ms", "8000", "--models-file", str(REPO / "config/models.yaml")])
    assert code == 1 and out == ""
    first, *runs = err.strip().splitlines()
    assert "no usable runs" in first and "corrupt: 1" in first
    assert sorted(line.strip().split("\t")[:3] for line in runs) == [
        ["corrupt", "truncated", "vllm-infqps-opt-1.3b-20250901-101500.json"],
        ["server_start_failed", "port_clash", "server_err.log"]]


def test_sim_predictor_simulates_each_cap_and_refuses_preempting_ones(shared_traces_dir):
    """OPT-2.7B at 242 + 520 tokens: its KV cache holds about 223 such sequences, so SIM
    predicts preemption at caps 256 and 512 and refuses them; SLIM's default is unchanged."""
    advice = advise(shared_traces_dir / "output_length", "opt-2.7b", 242, 520, slo_s=20.0, epsilon=0.1,
                    models_file=REPO / "config/models.yaml", hardware_file=REPO / "config/hardware.yaml",
                    candidates=(64, 128, 256, 512), predictor="sim",
                    sim_constants_file=REPO / "config/hardware/h100-64gb-sim.yaml")
    assert advice.predictor == "sim" and advice.refused_caps == (256.0, 512.0)
    assert advice.decision.feasible and advice.decision.batch_cap in (64, 128)
    assert advice.fit.n_train_points >= 100
    text = format_advice(advice)
    assert text.startswith("SIM (the simulator) calibrated") and "SIM refused --max-num-seqs 256, 512" in text


def test_unknown_predictor_is_an_argument_error(capsys):
    code, out, err = run_main(capsys, ["advise", "--traces", "x", *WORKLOAD, "--slo-ms", "8000",
                                       "--predictor", "oracle"])
    assert code == 2 and out == ""
    assert_one_line_error(err, "--predictor")
