"""`slim tune` end to end: the plan's command lines, the loop through a template that runs a fake
`vllm bench serve` backed by the simulator, resuming, failed runs (trusted only under the same
fingerprint), Ctrl-C, the traces and results folders, and the template's safety."""

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from slim.cli import build_parser, main
from slim.errors import AdvisorError
from slim.tune.cli import tune_request
from slim.tune.runner import LEDGER, read_attempts, render_template, run_fingerprint

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
    code, body, _ = tune(capsys, tmp_path, "--slo-ms", "150")
    assert code == 0 and body["status"] == "open" and body["measured_runs"] == 0
    commands = body["next"][0]["commands"]
    assert commands["server"].startswith("vllm serve facebook/opt-125m --max-num-seqs 64 --max-model-len 160 ")
    cap = int(body["next"][0]["max_num_seqs"])
    assert f"--max-concurrency {cap} " in commands["benchmark"]
    assert "--metadata max_num_seqs=64" in commands["benchmark"] and "vllm bench serve" in commands["benchmark"]
    offline = main(["tune", "--traces", str(tmp_path), *WORKLOAD, "--slo-ms", "150", "--mode", "offline"])
    assert offline == 0 and "vllm bench latency --model facebook/opt-125m --input-len 128 --output-len 32 " \
                            "--batch-size" in capsys.readouterr().out


@pytest.mark.integration
def test_the_loop_runs_until_settled_and_a_rerun_resumes_with_nothing_to_do(tmp_path, capsys):
    traces = tmp_path / "runs"
    code, body, err = tune(capsys, traces, "--slo-ms", "150", "--run", template())
    assert code == 0 and body["status"] == "settled", err
    ran = body["loop"]["runs"]
    assert 1 <= ran < 7 and 1 <= body["measured_runs"] <= ran, "a repeat is a run, not another measured cap"
    certificate = body["workloads"][0]["certificate"]
    chosen = certificate["max_num_seqs"]
    measured = [c for c in body["workloads"][0]["candidates"] if c["measured"]["total_token_throughput"] is not None]
    assert chosen in [c["max_num_seqs"] for c in measured]
    assert all(c["measured"]["mean_in_batch_e2e_ms"] is not None for c in measured)
    serve = body["workloads"][0]["serve"]["command"]
    assert serve.startswith(f"vllm serve facebook/opt-125m --max-num-seqs {chosen:g} --max-model-len 160 "
                            "--gpu-memory-utilization ") and "--num-gpu-blocks-override" in serve
    run_folder = next((traces / "slim-tune").glob("*_concurrency*"))
    log = (run_folder / "command.log").read_text()
    assert "exit_code: 0" in log and '"--max-concurrency"' in log and (run_folder / "stdout.log").is_file()
    assert body["traces_exist"] is False and body["runs_found"] == 0
    again, resumed, _ = tune(capsys, traces, "--slo-ms", "150", "--run", template())
    assert resumed["traces_exist"] is True and resumed["runs_found"] == ran and resumed["skipped_runs"] == []
    assert again == 0 and resumed["loop"]["runs"] == 0
    assert resumed["workloads"][0]["certificate"]["max_num_seqs"] == chosen
    assert len(read_attempts(traces / "slim-tune")) == ran


def first_cap(capsys, traces) -> int:
    """The cap the plan proposes first."""
    return int(tune(capsys, traces, "--slo-ms", "150")[1]["next"][0]["max_num_seqs"])


@pytest.mark.integration
def test_a_failed_run_is_reported_and_never_retried(tmp_path, capsys):
    traces = tmp_path / "runs"
    traces.mkdir()
    cap = first_cap(capsys, traces)
    first, body, err = tune(capsys, traces, "--slo-ms", "150", "--run", template(f"--fail-at {cap}"),
                            "--budget-runs", "1")
    assert body["loop"]["runs"] == 1
    attempts = read_attempts(traces / "slim-tune")
    assert attempts[0].max_num_seqs == cap and not attempts[0].usable and attempts[0].exit_code == 1
    assert "no usable run (exit code 1)" in err
    code, body, _ = tune(capsys, traces, "--slo-ms", "150", "--run", template(f"--fail-at {cap}"))
    caps = [a.max_num_seqs for a in read_attempts(traces / "slim-tune")]
    assert caps.count(cap) == 1, "the failed cap was tried again"
    row = next(c for c in body["workloads"][0]["candidates"] if c["max_num_seqs"] == cap)
    assert row["failed"] and row["measured"]["total_token_throughput"] is None


@pytest.mark.integration
def test_a_relative_slo_measures_its_reference_first(tmp_path, capsys):
    code, body, _ = tune(capsys, tmp_path / "runs", "--slo-relative", "2", "--run", template(), "--budget-runs", "1")
    assert code == 4 and read_attempts(tmp_path / "runs" / "slim-tune")[0].max_num_seqs == 1
    assert body["workloads"][0]["slo_ms"]["mean_in_batch_e2e_ms"] > 0


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


# --- failures are trusted only under the same fingerprint ----------------------------------

def settled_cap(body: dict) -> float:
    assert body["status"] == "settled"
    return body["workloads"][0]["certificate"]["max_num_seqs"]


@pytest.mark.integration
@pytest.mark.parametrize("program", ["no-such-benchmark-program", "not-executable"])
def test_a_template_whose_program_cannot_start_stops_the_loop_at_once(tmp_path, capsys, program):
    if program == "not-executable":
        program = str(tmp_path / program)
        Path(program).write_text("#!/bin/sh\nexit 0\n")
    traces = tmp_path / "runs"
    code = main(["tune", "--traces", str(traces), *WORKLOAD, "--slo-ms", "150", "--run",
                 f"{program} --model {{model}} --max-concurrency {{max_concurrency}}"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"slim tune: error: --run template's program '{program}' cannot be started (")
    assert read_attempts(traces / "slim-tune") == [], "a program that cannot start says nothing about a cap"


@pytest.mark.integration
def test_failures_of_a_broken_template_do_not_outlive_the_fix(tmp_path, capsys):
    traces = tmp_path / "runs"
    broken = f"{sys.executable} -c 'raise SystemExit(3)' --model {{model}} --max-concurrency {{max_concurrency}}"
    code, body, _ = tune(capsys, traces, "--slo-ms", "150", "--run", broken)
    attempts = read_attempts(traces / "slim-tune")
    assert code == 4 and len(attempts) == 3 and {a.exit_code for a in attempts} == {3}
    assert all(a.fingerprint["template"] == broken and a.fingerprint["num_prompts"] == 64
               and a.fingerprint["hardware"] == "a100-sxm-40gb" and a.fingerprint["slim_version"] for a in attempts)
    assert attempts[0].reason == "exit code 3"
    code, body, err = tune(capsys, traces, "--slo-ms", "150", "--run", template())
    assert code == 0 and body["workloads"][0]["failed_caps"] == [], err
    assert "may run again: it ran under another template" in err
    fresh_code, fresh, _ = tune(capsys, tmp_path / "fresh", "--slo-ms", "150", "--run", template())
    assert fresh_code == 0 and settled_cap(body) == settled_cap(fresh)


@pytest.mark.integration
def test_a_trusted_failure_is_named_on_the_decision_line_and_retry_failed_ignores_it(tmp_path, capsys):
    traces = tmp_path / "runs"
    traces.mkdir()
    cap = first_cap(capsys, traces)
    tune(capsys, traces, "--slo-ms", "150", "--run", template(f"--fail-at {cap}"), "--budget-runs", "1")
    _, planned, _ = tune(capsys, traces, "--slo-ms", "150")
    assert planned["workloads"][0]["failed_caps"] == [{"max_num_seqs": cap, "reason": "exit code 1"}]
    assert cap not in [run["max_num_seqs"] for run in planned["next"]]
    assert main(["tune", "--traces", str(traces), *WORKLOAD, "--slo-ms", "150"]) == 0
    decision = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("  open"))
    assert decision.endswith(f"(cap {cap} excluded: its run failed (exit code 1); --retry-failed to try again)")
    _, retrying, _ = tune(capsys, traces, "--slo-ms", "150", "--retry-failed")
    assert retrying["workloads"][0]["failed_caps"] == [] and retrying["next"][0]["max_num_seqs"] == cap
    _, ran, err = tune(capsys, traces, "--slo-ms", "150", "--run", template(), "--retry-failed", "--budget-runs", "1")
    assert [a.max_num_seqs for a in read_attempts(traces / "slim-tune")] == [cap, cap] and ran["measured_runs"] == 1
    assert f"cap {cap} gave no usable run before (exit code 1); it may run again: --retry-failed" in err


def test_a_failure_without_a_fingerprint_or_under_other_settings_is_not_trusted(tmp_path, capsys):
    results = tmp_path / "slim-tune"
    results.mkdir()
    arguments = ["tune", "--traces", str(tmp_path), *WORKLOAD, "--slo-ms", "150"]
    fingerprint = run_fingerprint(tune_request(build_parser().parse_args(arguments)), "bench {model}")
    line = {"workload": "opt-125m IL 128 OL 32", "folder": "x", "exit_code": 1, "usable": False, "gpu_seconds": 1.0}
    ledger = [{**line, "max_num_seqs": 64},                                            # an older ledger's line
              {**line, "max_num_seqs": 32, "fingerprint": {**fingerprint, "num_prompts": 1000}},
              {**line, "max_num_seqs": 16, "fingerprint": fingerprint}]
    (results / LEDGER).write_text("".join(json.dumps(entry) + "\n" for entry in ledger))
    code, body, _ = tune(capsys, tmp_path, "--slo-ms", "150")
    # planning trusts a failure under the same settings, whatever template ran
    assert code == 0 and [row["max_num_seqs"] for row in body["workloads"][0]["failed_caps"]] == [16]


def test_a_failure_at_other_weights_or_kv_cache_is_not_trusted():
    arguments = ["tune", "--traces", ".", *WORKLOAD, "--slo-ms", "150"]
    plain = run_fingerprint(tune_request(build_parser().parse_args(arguments)), None)
    assert "quantization" not in plain and "kv_cache_dtype" not in plain     # older ledgers' fingerprints hold
    fp8 = run_fingerprint(tune_request(build_parser().parse_args(
        [*arguments, "--quantization", "fp8", "--kv-cache-dtype", "fp8"])), None)
    assert fp8 == {**plain, "quantization": "fp8", "kv_cache_dtype": "fp8"}


# --- the template ------------------------------------------------------------------------

@pytest.mark.parametrize("placeholder", ["{model", "{}", "}", "{0}", "{model!z}"])
def test_malformed_braces_in_the_template_are_a_one_line_error(tmp_path, capsys, placeholder):
    code = main(["tune", "--traces", str(tmp_path), *WORKLOAD, "--slo-ms", "150", "--run",
                 f"bench --model {placeholder} --cap {{cap}}"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--run template" in err and "Traceback" not in err
    assert not (tmp_path / "slim-tune").exists()


def _running(pid: int) -> bool:
    """Whether a process exists and is not a zombie (a container's init may not reap orphans)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.integration
def test_ctrl_c_stops_the_run_with_its_children_and_logs_it_as_interrupted(tmp_path):
    traces = tmp_path / "runs"
    sleeper = "sh -c 'sleep 100 & echo $! > {result_dir}/grandchild.pid; wait'"
    process = subprocess.Popen([sys.executable, "-m", "slim", "tune", "--traces", str(traces), *WORKLOAD,
                                "--slo-ms", "150", "--run", sleeper], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=REPO)
    deadline = time.monotonic() + 60
    while not list(traces.glob("slim-tune/*/grandchild.pid")) and time.monotonic() < deadline:
        time.sleep(0.1)
    pid_file = next(traces.glob("slim-tune/*/grandchild.pid"))
    time.sleep(0.2)   # the pid is written in full
    grandchild = int(pid_file.read_text())
    assert _running(grandchild)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 130 and out == ""
    assert len(err.strip().splitlines()) == 1 and "interrupted" in err and "Traceback" not in err
    deadline = time.monotonic() + 10
    while _running(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running(grandchild), "the benchmark's child outlived the loop"
    (attempt,) = read_attempts(traces / "slim-tune")
    assert attempt.interrupted and not attempt.failed
    assert "exit_code: interrupted" in (pid_file.parent / "command.log").read_text()


# --- the traces and the results folders -------------------------------------------------

def test_traces_that_do_not_exist_are_an_error_without_run(tmp_path, capsys):
    assert main(["tune", "--traces", str(tmp_path / "nowhere"), *WORKLOAD, "--slo-ms", "150"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "does not exist" in err


def test_empty_traces_and_traces_of_corrupt_runs_are_named(tmp_path, capsys):
    assert main(["tune", "--traces", str(tmp_path), *WORKLOAD, "--slo-ms", "150"]) == 0
    assert f"traces: no benchmark runs under '{tmp_path}': starting from no runs" in capsys.readouterr().out
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "result.json").write_text('{"date": ')
    assert main(["tune", "--traces", str(tmp_path), *WORKLOAD, "--slo-ms", "150"]) == 0
    assert f"traces: none of the 1 run(s) under '{tmp_path}' is usable (corrupt: 1)" in capsys.readouterr().out
    _, body, _ = tune(capsys, tmp_path, "--slo-ms", "150")
    assert body["runs_found"] == 1 and body["measured_runs"] == 0
    (skipped,) = body["skipped_runs"]
    assert skipped["path"] == str(tmp_path / "broken") and skipped["status"] == "corrupt"
    assert "not valid JSON" in skipped["reason"]


@pytest.mark.integration
def test_an_unusable_run_is_named_with_its_reason(tmp_path, capsys):
    traces = tmp_path / "runs"
    traces.mkdir()
    cap = first_cap(capsys, traces)
    code, body, err = tune(capsys, traces, "--slo-ms", "150", "--run", template(f"--corrupt-at {cap}"),
                           "--budget-runs", "1")
    (attempt,) = read_attempts(traces / "slim-tune")
    assert attempt.exit_code == 0 and attempt.failed and attempt.reason.startswith("corrupt: ")
    assert f"cap {cap}: no usable run (corrupt: " in err and "not valid JSON" in err
    assert body["workloads"][0]["failed_caps"][0]["reason"] == attempt.reason
    code, body, err = tune(capsys, traces, "--slo-ms", "150", "--run", template(), "--retry-failed",
                           "--budget-runs", "1")
    named = err.index(f"cap {cap} gave no usable run before (corrupt: ")
    ran = err.index(f"ran opt-125m IL 128 OL 32 cap {cap}")
    assert named < ran and body["measured_runs"] == 1


@pytest.mark.integration
def test_a_summary_table_as_traces_keeps_the_results_beside_it(tmp_path, capsys):
    table = tmp_path / "tables" / "points.csv"
    table.parent.mkdir()
    shutil.copy(REPO / "tests" / "data" / "formats" / "summary_table" / "points.csv", table)
    code, body, _ = tune(capsys, table, "--slo-ms", "150", "--run", template(), "--budget-runs", "1")
    assert body["loop"]["runs"] == 1 and body["results"] == str(tmp_path / "tables" / "slim-tune")
    assert read_attempts(tmp_path / "tables" / "slim-tune")[0].usable
    _, again, _ = tune(capsys, table, "--slo-ms", "150")
    table_rows = len(table.read_text().splitlines()) - 1   # each an A100-80GB point: not this accelerator's
    assert again["measured_runs"] == 1 and again["runs_found"] == table_rows + 1
    assert [run["status"] for run in again["skipped_runs"]] == ["other_rows"] * table_rows


@pytest.mark.integration
def test_results_go_where_results_says_and_are_read_from_there(tmp_path, capsys):
    traces, results = tmp_path / "traces", tmp_path / "elsewhere"
    traces.mkdir()
    _, planned, _ = tune(capsys, traces, "--slo-ms", "150", "--results", str(results))
    assert f"--result-dir {results}/" in planned["next"][0]["commands"]["benchmark"] and not results.exists()
    tune(capsys, traces, "--slo-ms", "150", "--results", str(results), "--run", template(), "--budget-runs", "1")
    assert (results / LEDGER).is_file() and not (traces / "slim-tune").exists()
    _, again, _ = tune(capsys, traces, "--slo-ms", "150", "--results", str(results))
    assert again["measured_runs"] == 1


def test_a_hugging_face_config_describes_a_model_the_catalog_lacks(tmp_path, capsys):
    config = json.loads((REPO / "tests" / "data" / "hf_configs" / "opt-350m" / "config.json").read_text())
    config.update({"_name_or_path": "acme/opt-custom", "num_hidden_layers": 12})
    (tmp_path / "config.json").write_text(json.dumps(config))
    custom = ["tune", "--traces", str(tmp_path), "--workload", "acme/opt-custom:128:32", "--hardware",
              "a100-sxm-40gb", "--slo-ms", "150", "--json"]
    assert main(custom) == 2 and "unknown model 'acme/opt-custom'" in capsys.readouterr().err
    assert main([*custom, "--model-config", str(tmp_path / "config.json")]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["workloads"][0]["workload"] == "opt-custom IL 128 OL 32"
    assert body["next"][0]["commands"]["benchmark"].startswith("vllm bench serve --model acme/opt-custom ")
    assert main([*custom, "--model-config", str(tmp_path / "none.json")]) == 2
    assert "model config not found" in capsys.readouterr().err


def test_a_described_model_is_the_workload_without_model(tmp_path, capsys):
    # --model-config with the lengths and no --model: the workload is the model the config describes,
    # served as the Hugging Face id it records, or as its folder (vllm serve DIR) where it records none.
    config = json.loads((REPO / "tests" / "data" / "hf_configs" / "opt-350m" / "config.json").read_text())
    for recorded, served in (("acme/opt-custom", "acme/opt-custom"), ("", str(tmp_path / "checkpoint"))):
        (tmp_path / "checkpoint").mkdir(exist_ok=True)
        (tmp_path / "checkpoint" / "config.json").write_text(json.dumps({**config, "_name_or_path": recorded}))
        code = main(["tune", "--traces", str(tmp_path), "--model-config", str(tmp_path / "checkpoint" / "config.json"),
                     "--input-len", "128", "--output-len", "32", "--hardware", "a100-sxm-40gb", "--slo-ms", "150",
                     "--json"])
        body = json.loads(capsys.readouterr().out)
        assert code == 0
        assert body["next"][0]["commands"]["server"].startswith(f"vllm serve {served} ")
        assert body["next"][0]["commands"]["benchmark"].startswith(f"vllm bench serve --model {served} ")
    assert main(["tune", "--traces", str(tmp_path), "--model-config", str(tmp_path / "checkpoint" / "config.json"),
                 "--input-len", "128", "--hardware", "a100-sxm-40gb", "--slo-ms", "150"]) == 2
    assert "--model (or --model-config), --input-len and --output-len go together" in capsys.readouterr().err


# --- the documentation of --json ---------------------------------------------------------

def documented_json_fields() -> set[str]:
    """The field names of docs/tuning.md's tables of `slim tune --json` (first column, in backticks)."""
    page = (REPO / "docs" / "tuning.md").read_text()
    section = page.split("## The JSON document: `--json`", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.M))


def test_every_json_field_is_documented_and_every_documented_field_exists(tmp_path, capsys):
    _, body, _ = tune(capsys, tmp_path, "--slo-ms", "150")
    actual = set(body) | {f"workloads[].{key}" for key in body["workloads"][0]}
    assert documented_json_fields() == actual


def test_a_repeated_cap_runs_into_a_folder_of_its_own(tmp_path):
    from slim.specs.slo import Slos
    from slim.tune.commands import placeholders
    from slim.tune.request import TuneRequest, WorkloadSpec

    request = TuneRequest(tmp_path, (WorkloadSpec("facebook/opt-125m", 128, 32),), "a100-sxm-40gb",
                          Slos.of(slo_ms=150))
    spec = request.workloads[0]
    first, second = placeholders(request, spec, 16), placeholders(request, spec, 16, repeat=1)
    assert first["result_dir"] != second["result_dir"] and second["result_dir"].endswith("_concurrency16_run2")


def test_an_slo_no_cap_can_meet_exits_3_as_advise_does(tmp_path, capsys):
    from slim.cli import EXIT_NO_FEASIBLE_CAP

    code, body, _ = tune(capsys, tmp_path, "--slo-ms", "0.01")
    assert code == EXIT_NO_FEASIBLE_CAP == 3
    workload = body["workloads"][0]
    assert body["exit_code"] == 3 and workload["recommendation"]["max_num_seqs"] is None and workload["serve"] is None
    assert workload["recommendation"]["reason"].startswith("no candidate meets mean_in_batch_e2e_ms")


def test_a_metric_the_measured_runs_cannot_judge_is_measured_again_within_the_bound(capsys):
    traces = REPO / "tests" / "data" / "user_dataset" / "traces"
    code = main(["tune", "--traces", str(traces), "--hardware", "a100-80gb", "--workload", "opt-2.7b:256:256",
                 "--slo", "p99_tpot_ms=20", "--slo", "p90_ttft_ms=2000", "--json"])
    body = json.loads(capsys.readouterr().out)
    assert code == 0 and body["status"] == "open" and body["workloads"][0]["bound"]["stopped"] is None
    first = body["next"][0]
    assert "do not judge p90_ttft_ms" in first["reason"]
    assert f"--max-concurrency {first['max_num_seqs']:g} --percentile-metrics" in first["commands"]["benchmark"]


def test_the_servers_run_with_the_quantization_and_kv_cache_dtype_of_the_model_as_served(tmp_path):
    from slim.specs.slo import Slos
    from slim.tune.commands import serve_command, server_command
    from slim.tune.plan import build_plan
    from slim.tune.request import TuneRequest, WorkloadSpec

    def commands(model: str, **flags) -> tuple[list[str], list[str]]:
        plan = build_plan(TuneRequest(tmp_path, (WorkloadSpec(model, 1024, 1024),), "h100-sxm-80gb",
                                      Slos.of(["mean_tpot_ms=25"]), tensor_parallel=4, **flags))
        label = plan.workloads[0].label
        return server_command(plan, label), serve_command(plan, label, 64)

    for command in commands("meta-llama/Llama-3.1-70B", quantization="fp8", kv_cache_dtype="fp8"):
        assert command[-4:] == ["--quantization", "fp8", "--kv-cache-dtype", "fp8"]
    # The catalog's served form of the checkpoint (`base:` with `quantization: fp8`) is served with its flag.
    for command in commands("llama-3.1-70b-fp8"):
        assert command[-2:] == ["--quantization", "fp8"] and "--kv-cache-dtype" not in command
    for command in commands("meta-llama/Llama-3.1-70B"):
        assert "--quantization" not in command and "--kv-cache-dtype" not in command
    # An offline benchmark loads the model itself: with the same flags.
    from slim.tune.commands import proposal_commands
    from slim.tune.proposals import propose

    offline = build_plan(TuneRequest(tmp_path, (WorkloadSpec("meta-llama/Llama-3.1-70B", 1024, 1024),),
                                     "h100-sxm-80gb", Slos.of(["mean_in_batch_e2e_ms=60000"]), mode="offline",
                                     tensor_parallel=4, quantization="fp8", kv_cache_dtype="fp8"))
    benchmark = proposal_commands(offline, propose(offline.session)[0])["benchmark"]
    assert benchmark[:3] == ["vllm", "bench", "latency"]
    assert benchmark[-6:-2] == ["--quantization", "fp8", "--kv-cache-dtype", "fp8"]


@pytest.mark.integration
def test_a_run_past_its_time_limit_is_stopped_with_exit_124_and_says_why(tmp_path):
    from slim.tune.runner import EXIT_TIMED_OUT, _exit_reason, execute

    started = time.monotonic()
    code, seconds = execute([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "run", timeout_s=0.5)
    assert code == EXIT_TIMED_OUT and 0.5 <= seconds < 10 and time.monotonic() - started < 10
    assert "timed out after 0.5 s" in (tmp_path / "run" / "stderr.log").read_text()
    assert "exit_code: 124" in (tmp_path / "run" / "command.log").read_text()
    assert _exit_reason(code, 2.0, 2.0) == "exit code 124: timed out after 2 s (the bound's allowance for an extra run)"
    assert _exit_reason(code, 2.0) == "exit code 124: timed out after 2 s"
