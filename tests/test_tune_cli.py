"""`slim tune` end to end: the plan's command lines, the loop through a template that runs a fake
`vllm bench serve` backed by the simulator, resuming, failed runs, and the template's safety."""

import json
import sys

import pytest
from conftest import REPO

from slim.advisor.tune_runner import read_attempts, render_template
from slim.cli import main
from slim.errors import AdvisorError

FAKE_BENCH = REPO / "tests" / "fake_vllm_bench.py"
WORKLOAD = ["--workload", "facebook/opt-125m:128:32", "--hardware", "a100-sxm-40gb", "--num-prompts", "64",
            "--candidates", "1,2,4,8,16,32,64"]


def template(*extra: str) -> str:
    return " ".join([sys.executable, str(FAKE_BENCH), "--model {model} --random-input-len {input_len}",
                     "--random-output-len {output_len} --max-concurrency {max_concurrency}",
                     "--num-prompts {num_prompts} --result-dir {result_dir} --result-filename {result_filename}",
                     "--metadata max_num_seqs={server_max_num_seqs} --hardware a100-sxm-40gb", *extra])


def tune(capsys, traces, *arguments):
    code = main(["tune", "--traces", str(traces), *WORKLOAD, *arguments, "--json"])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def test_the_plan_names_the_next_benchmark_as_exact_command_lines(tmp_path, capsys):
    code, body, _ = tune(capsys, tmp_path / "runs", "--slo-ms", "150")
    assert code == 0 and body["status"] == "open" and body["measured_runs"] == 0
    commands = body["next"][0]["commands"]
    assert commands["server"].startswith("vllm serve facebook/opt-125m --max-num-seqs 64")
    cap = int(body["next"][0]["max_num_seqs"])
    assert f"--max-concurrency {cap} " in commands["benchmark"]
    assert "--metadata max_num_seqs=64" in commands["benchmark"] and "vllm bench serve" in commands["benchmark"]
    offline = main(["tune", "--traces", str(tmp_path / "runs"), *WORKLOAD, "--slo-ms", "150", "--mode", "offline"])
    assert offline == 0 and "vllm bench latency --model facebook/opt-125m --input-len 128 --output-len 32 " \
                            "--batch-size" in capsys.readouterr().out


@pytest.mark.integration
def test_the_loop_runs_until_settled_and_a_rerun_resumes_with_nothing_to_do(tmp_path, capsys):
    traces = tmp_path / "runs"
    code, body, err = tune(capsys, traces, "--slo-ms", "150", "--run", template())
    assert code == 0 and body["status"] == "settled", err
    ran = body["loop"]["runs"]
    assert 1 <= ran < 7 and body["measured_runs"] == ran
    certificate = body["workloads"][0]["certificate"]
    chosen = certificate["batch_cap"]
    measured = [c for c in body["workloads"][0]["candidates"] if c["measured_throughput_per_s"] is not None]
    assert chosen in [c["max_num_seqs"] for c in measured]
    assert all(c["measured_e2e_latency_s"] is not None for c in measured)
    run_folder = next((traces / "slim-tune").glob("*_concurrency*"))
    log = (run_folder / "command.log").read_text()
    assert "exit_code: 0" in log and '"--max-concurrency"' in log and (run_folder / "stdout.log").is_file()
    again, resumed, _ = tune(capsys, traces, "--slo-ms", "150", "--run", template())
    assert again == 0 and resumed["loop"]["runs"] == 0 and resumed["workloads"][0]["certificate"]["batch_cap"] == chosen
    assert len(read_attempts(traces)) == ran


@pytest.mark.integration
def test_a_failed_run_is_reported_and_never_retried(tmp_path, capsys):
    traces = tmp_path / "runs"
    first, body, err = tune(capsys, traces, "--slo-ms", "150", "--run", template("--fail-at 64"), "--budget-runs", "1")
    assert body["loop"]["runs"] == 1
    attempts = read_attempts(traces)
    assert attempts[0].max_num_seqs == 64 and not attempts[0].usable and attempts[0].exit_code == 1
    assert "no usable run (exit code 1)" in err
    code, body, _ = tune(capsys, traces, "--slo-ms", "150", "--run", template("--fail-at 64"))
    caps = [a.max_num_seqs for a in read_attempts(traces)]
    assert caps.count(64) == 1, "the failed cap was tried again"
    row = next(c for c in body["workloads"][0]["candidates"] if c["max_num_seqs"] == 64)
    assert row["failed"] and row["measured_throughput_per_s"] is None


@pytest.mark.integration
def test_a_relative_slo_measures_its_reference_first(tmp_path, capsys):
    code, body, _ = tune(capsys, tmp_path / "runs", "--slo-relative", "2", "--run", template(), "--budget-runs", "1")
    assert code == 4 and read_attempts(tmp_path / "runs")[0].max_num_seqs == 1
    assert body["workloads"][0]["certificate"]["slo_s"] > 0


def test_the_template_is_an_argument_list_and_quotes_values_only_for_a_shell():
    values = {"model": "a b;rm -rf x", "cap": "8"}
    assert render_template("bench --model {model} --cap {cap}", values) == ["bench", "--model", "a b;rm -rf x",
                                                                            "--cap", "8"]
    assert render_template("sh -c 'bench --model {model}'", values) == ["sh", "-c", "bench --model 'a b;rm -rf x'"]
    with pytest.raises(AdvisorError, match="unknown placeholder"):
        render_template("bench {nope}", values)


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    assert main(["tune", "--traces", str(tmp_path), "--hardware", "a100-sxm-40gb", "--slo-ms", "100"]) == 2
    assert "name at least one workload" in capsys.readouterr().err
    assert main(["tune", "--traces", str(tmp_path), *WORKLOAD, "--slo-ms", "100", "--budget-runs", "2"]) == 2
    assert "give --run too" in capsys.readouterr().err
    assert main(["tune", "--traces", str(tmp_path), "--workload", "opt-125m:12", "--hardware", "a100-sxm-40gb",
                 "--slo-ms", "100"]) == 2
    assert "MODEL:INPUT_LEN:OUTPUT_LEN" in capsys.readouterr().err


@pytest.mark.integration
def test_a_broken_template_stops_the_loop_after_a_few_failures_and_settles_nothing(tmp_path, capsys):
    broken = f"{sys.executable} -c 'raise SystemExit(3)'"
    code, body, _ = tune(capsys, tmp_path / "runs", "--slo-ms", "150", "--run", broken)
    assert code == 4 and body["loop"]["runs"] == 3 and "3 runs in a row" in body["loop"]["stopped"]
    assert not body["workloads"][0]["certificate"]["settled"]
