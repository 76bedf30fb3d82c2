"""The `slim` command: one-line errors with distinct exit codes, --json, --version and --help, the
training selection and its held-out check, the warnings, and real runs on the public traces."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slim import __version__
from slim.advisor.advise import AdviceRequest, advise
from slim.advisor.report import render_text
from slim.cli import EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_NO_FEASIBLE_CAP, build_parser, main
from slim.errors import NoFeasibleCapError
from slim.specs.architecture import MODELS_FILE
from slim.specs.hardware import HARDWARE_FILE

REPO = Path(__file__).resolve().parents[1]
WORKLOAD = ["--model", "opt-1.3b", "--hardware", "h100-64gb", "--input-len", "242", "--output-len", "520", "--no-plan"]


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
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "does not exist", "nope")


def test_trace_dir_without_runs(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("not a benchmark run\n")
    code, _, err = run_main(capsys, ["advise", "--traces", str(tmp_path), *WORKLOAD, "--slo-ms", "8000"])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "no vLLM benchmark runs")


def test_unknown_model_and_hardware(capsys, shared_traces_dir):
    traces = str(shared_traces_dir / "output_length")
    code, _, err = run_main(capsys, ["advise", "--traces", traces, "--model", "gpt-9", "--input-len", "242",
                                     "--output-len", "520", "--slo-ms", "8000", "--hardware", "h100-64gb",
                                     "--models-file", str(MODELS_FILE)])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "unknown model 'gpt-9'")
    code, _, err = run_main(capsys, ["advise", "--traces", traces, *WORKLOAD[:2], "--hardware", "tpu-v9",
                                     *WORKLOAD[4:], "--slo-ms", "8000", "--hardware-file", str(HARDWARE_FILE)])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "unknown hardware 'tpu-v9'")


USER_TRACES = REPO / "tests" / "data" / "user_dataset" / "traces"   # OPT-1.3B and 2.7B on an A100 80 GB
USER_WORKLOAD = ["--input-len", "256", "--output-len", "256", "--slo-ms", "3500"]


@pytest.mark.parametrize("argv", [
    ["advise", "--traces", str(USER_TRACES), "--model", "opt-2.7b", *USER_WORKLOAD, "--hardware", "rtx-4090"],
    ["tune", "--traces", str(USER_TRACES), "--workload", "opt-2.7b:256:256", "--slo-ms", "3500",
     "--hardware", "rtx-4090"],
    ["check", str(USER_TRACES), "--hardware", "rtx-4090"]], ids=["advise", "tune", "check"])
def test_an_unknown_gpu_names_the_known_keys_and_how_to_add_one(capsys, argv):
    code, out, err = run_main(capsys, argv)
    assert code == EXIT_BAD_INPUT and out == ""
    assert_one_line_error(err, f"slim {argv[0]}: error: unknown hardware 'rtx-4090'; known: h100-64gb", "a100-80gb",
                          "add it with --hardware-file FILE, a YAML mapping of key -> peak_flops_per_s, "
                          "hbm_bandwidth_bytes_per_s, memory_bytes, gpu_memory_utilization")


RTX_4090 = {"peak_flops_per_s": 1.65e14, "hbm_bandwidth_bytes_per_s": 1.008e12, "memory_bytes": 25769803776,
            "gpu_memory_utilization": 0.9}


def test_a_hardware_file_adds_its_gpus_to_the_shipped_catalog(tmp_path):
    from slim.specs.hardware import load_hardware, load_hardware_with_shipped

    mine = tmp_path / "gpus.yaml"
    mine.write_text(yaml.safe_dump({"rtx-4090": RTX_4090, "a100-80gb": {**RTX_4090, "memory_bytes": 2**36}},
                                   sort_keys=False))
    shipped = load_hardware(HARDWARE_FILE)
    catalog = load_hardware_with_shipped(mine)
    assert list(catalog) == [*shipped, "rtx-4090"], "the file's new keys join the shipped ones, after them"
    assert catalog["a100-80gb"].memory_bytes == 2**36, "an entry of the file replaces the shipped one"
    assert catalog["h200"] == shipped["h200"] and catalog["rtx-4090"].peak_flops_per_s == 1.65e14
    assert load_hardware_with_shipped(HARDWARE_FILE) == shipped
    assert list(load_hardware(mine)) == ["rtx-4090", "a100-80gb"], "the pipeline reads its hardware_file alone"


def test_advise_tune_and_check_run_on_a_shipped_gpu_beside_a_hardware_file_of_others(capsys, tmp_path):
    mine = tmp_path / "gpus.yaml"
    mine.write_text(yaml.safe_dump({"rtx-4090": RTX_4090}))
    on_a100 = ["--hardware", "a100-80gb", "--hardware-file", str(mine)]
    code, out, err = run_main(capsys, ["advise", "--traces", str(USER_TRACES), "--model", "opt-2.7b", *USER_WORKLOAD,
                                       *on_a100, "--no-plan", "--json"])
    assert code == 0 and json.loads(out)["workload"]["hardware"] == "a100-80gb", err
    code, _, err = run_main(capsys, ["tune", "--traces", str(USER_TRACES), "--workload", "opt-2.7b:256:256",
                                     "--slo-ms", "3500", "--candidates", "1,8,32", *on_a100])
    assert code == 0, err
    code, _, err = run_main(capsys, ["check", str(USER_TRACES), *on_a100])
    assert code == 0, err


@pytest.fixture(scope="module")
def public_advice(shared_traces_dir):
    return advise(AdviceRequest(shared_traces_dir / "output_length", "opt-1.3b", 242, 520, slo_s=8.0, epsilon=0.1,
                                hardware="h100-64gb", models_file=MODELS_FILE, hardware_file=HARDWARE_FILE,
                                plan=False))


def test_real_advice_on_the_public_traces(public_advice):
    decision, memory = public_advice.recommendation, public_advice.memory
    assert public_advice.n_runs == public_advice.fit.n_train_points >= 100
    assert decision.feasible and decision.values_ms["mean_in_batch_e2e_ms"] <= 8000.0 and decision.efficiency > 0.1
    assert decision.measured, "every candidate of the curve was measured: the decision rests on the runs"
    assert decision.batch_cap in (16, 32, 64, 128)
    assert public_advice.kv_capacity_source == "traces"
    # 242 + 520 tokens -> 48 blocks of 16 per sequence; one block is 16 x 196,608 bytes for OPT-1.3B.
    assert memory.num_gpu_blocks_override == decision.batch_cap * 48
    assert memory.kv_bytes_needed == pytest.approx(decision.batch_cap * 768 * 196_608)
    assert 0 < memory.gpu_memory_utilization_needed < 0.9
    assert memory.memory_saved_bytes > 0


def test_infeasible_slo_is_a_one_line_error_with_its_own_exit_code(capsys, shared_traces_dir):
    code, _, err = run_main(capsys, ["advise", "--traces", str(shared_traces_dir / "output_length"), *WORKLOAD,
                                     "--slo-ms", "10", "--models-file", str(MODELS_FILE),
                                     "--hardware-file", str(HARDWARE_FILE)])
    assert code == EXIT_NO_FEASIBLE_CAP == 3
    assert_one_line_error(err, "no candidate meets mean_in_batch_e2e_ms", "> 10 ms")


@pytest.mark.integration
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


CHECK_HEADER = ["status", "run", "fault_file", "model", "input_len", "output_len", "max_num_seqs", "reason"]


def test_check_prints_a_header_and_a_line_per_run_with_its_model_lengths_and_cap(capsys):
    code, out, err = run_main(capsys, ["check", str(BROKEN), "--models-file", str(MODELS_FILE)])
    assert code == 0
    header, *lines = [line.split("\t") for line in out.splitlines()]
    assert header == CHECK_HEADER
    assert len(lines) == len(list(BROKEN.glob("*/"))) and all(len(fields) == len(CHECK_HEADER) for fields in lines)
    by_run = {fields[1]: dict(zip(CHECK_HEADER, fields)) for fields in lines}
    assert by_run["port_clash"] == {
        "status": "server_start_failed", "run": "port_clash", "fault_file": "server_err.log", "model": "opt-1.3b",
        "input_len": "-", "output_len": "-", "max_num_seqs": "-",   # the server never started: no lengths, no cap
        "reason": "server_err.log: OSError: [Errno 98] Address already in use"}
    assert by_run["duplicate_b"]["status"] == "duplicate"
    assert [by_run["duplicate_a"][name] for name in CHECK_HEADER[:7]] == ["ok", "duplicate_a", "-", "opt-1.3b", "242",
                                                                         "130", "32"]
    assert "usable" in err


def test_check_json_holds_each_run_and_the_counts(capsys):
    code, out, _ = run_main(capsys, ["check", str(BROKEN), "--json"])
    document = json.loads(out)
    assert code == document["exit_code"] == 0 and document["status"] == "ok"
    by_run = {run["run"]: run for run in document["runs"]}
    assert list(by_run["duplicate_a"]) == [*CHECK_HEADER, "usable"]
    assert by_run["duplicate_a"] | {"reason": None} == {
        "status": "ok", "run": "duplicate_a", "fault_file": None, "model": "opt-1.3b", "input_len": 242.0,
        "output_len": 130.0, "max_num_seqs": 32, "reason": None, "usable": True}
    assert by_run["port_clash"]["fault_file"] == "server_err.log" and by_run["port_clash"]["usable"] is False
    counts = document["counts"]
    assert counts["runs"] == len(document["runs"]) and counts["usable"] == sum(r["usable"] for r in document["runs"])
    assert sum(counts["by_status"].values()) == counts["runs"] and counts["by_status"]["duplicate"] >= 1


def test_check_exits_2_when_nothing_is_usable_and_names_a_missing_folder(capsys, tmp_path):
    code, out, _ = run_main(capsys, ["check", str(_all_bad_folder(tmp_path / "runs"))])
    assert code == EXIT_BAD_INPUT, "1 is kept for a bug"
    assert sorted(line.split("\t")[0] for line in out.splitlines()[1:]) == ["corrupt", "server_start_failed"]
    code, out, _ = run_main(capsys, ["check", str(tmp_path / "runs"), "--json"])
    assert code == EXIT_BAD_INPUT and json.loads(out)["status"] == "no_usable_run"
    code, _, err = run_main(capsys, ["check", str(tmp_path / "nope")])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "does not exist", "nope")
    (tmp_path / "a_file").write_text("x")   # one file is read as traces (a summary table, an offline result)
    code, _, err = run_main(capsys, ["check", str(tmp_path / "a_file")])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "no vLLM benchmark runs found under", "a_file",
                          "no file in a layout slim reads: docs/traces.md lists them")
    # A table with its own headers says how to map them; an empty folder says where to start.
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "bench.csv").write_text("Model,Batch Size,Latency\nopt-125m,8,1.5\n")
    code, _, err = run_main(capsys, ["check", str(tmp_path / "tables")])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "bench.csv has the columns Model, Batch Size, Latency", "--table-columns YAML")
    (tmp_path / "empty").mkdir()
    code, _, err = run_main(capsys, ["check", str(tmp_path / "empty")])
    assert code == EXIT_BAD_INPUT and "slim tune, given the workload, prints the first benchmarks" in err


def test_advise_without_usable_runs_prints_why_for_each_run(capsys, tmp_path):
    code, out, err = run_main(capsys, ["advise", "--traces", str(_all_bad_folder(tmp_path / "runs")), *WORKLOAD,
                                       "--slo-ms", "8000", "--models-file", str(MODELS_FILE)])
    assert code == EXIT_BAD_INPUT and out == ""
    first, header, *runs = err.strip().splitlines()
    assert "no usable runs" in first and "corrupt: 1" in first and header.split() == CHECK_HEADER
    assert sorted(line.strip().split("\t")[:3] for line in runs) == [
        ["corrupt", "truncated", "vllm-infqps-opt-1.3b-20250901-101500.json"],
        ["server_start_failed", "port_clash", "server_err.log"]]


# ---------------------------------------------------------------- scripting: --json, --version, --help

LAYOUT = REPO / "tests" / "data" / "formats" / "bench_serve_metadata"   # OPT-1.3B, IL 256, OL 128, caps 1..256
LAYOUT_WORKLOAD = ["--traces", str(LAYOUT), "--model", "opt-1.3b", "--hardware", "h100-64gb", "--input-len", "256",
                   "--output-len", "128", "--no-plan"]


def test_version_prints_the_package_version(capsys):
    code, out, _ = run_main(capsys, ["--version"])
    assert code == 0 and out.strip() == f"slim {__version__}"


@pytest.mark.integration
@pytest.mark.parametrize("argv", [["check", str(BROKEN)], ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000"],
                                  ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--json"]],
                         ids=["check", "advise", "advise-json"])
def test_a_reader_that_closes_the_output_early_ends_the_command_quietly(argv):
    process = subprocess.Popen([sys.executable, "-m", "slim", *argv], cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    process.stdout.close()   # as `| head -1` does once it has its line; here before the first one
    err = process.stderr.read()
    assert process.wait(timeout=120) == EXIT_BROKEN_PIPE == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err, err


HEAVY_PACKAGES = ("numpy", "scipy", "pandas", "matplotlib", "sklearn")
_IMPORTED_BY_HELP = """
import contextlib, io, sys
from slim.cli import main
for argv in (["--help"], ["advise", "--help"], ["tune", "--help"], ["check", "--help"]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        main(argv)
print(" ".join(sorted(sys.modules)))
"""


@pytest.mark.integration   # a fresh interpreter: this one imported everything already
def test_help_imports_no_numerics_and_no_command_it_does_not_run():
    modules = subprocess.run([sys.executable, "-c", _IMPORTED_BY_HELP], cwd=REPO, capture_output=True, text=True,
                             timeout=60, check=True).stdout.split()
    assert "slim.cli" in modules and "slim.tune.cli" in modules
    assert not [name for name in modules if name.split(".")[0] in HEAVY_PACKAGES]
    assert not [name for name in modules if name.startswith(("slim.advisor", "slim.sim", "slim.predictors",
                                                             "slim.model", "slim.traces", "slim.paper"))
                or (name.startswith("slim.tune.") and name != "slim.tune.cli")]


def test_the_command_line_offers_every_predictor_the_registry_offers():
    from slim.defaults import PREDICTOR_OPTIONS
    from slim.predictors import advise_predictors, tune_predictors

    assert set(advise_predictors()) == set(tune_predictors()) == set(PREDICTOR_OPTIONS)


def help_text(capsys, command: str) -> str:
    code, out, _ = run_main(capsys, [command, "--help"])
    assert code == 0
    return " ".join(out.split())


def test_the_help_says_what_advise_and_tune_do(capsys):
    advise = help_text(capsys, "advise")
    assert "meets the E2E SLO" not in advise and "Fit SLIM on every usable run" not in advise
    for fragment in ("vLLM's benchmark prints, by their names (--slo p99_tpot_ms=50", "--goodput ttft:2000 tpot:50",
                     "judged on its measured values", "else the simulator's, SIM", "refused",
                     "whether the decision is settled or which benchmark would settle it"):
        assert fragment in advise
    tune = help_text(capsys, "tune")
    for fragment in ("stated in vLLM's metric names", "measured within every SLO", "--tolerance at --confidence",
                     "(1 + --margin) x a bisection's GPU time", "with --run"):
        assert fragment in tune


def test_every_option_of_every_command_says_what_it_does():
    commands = next(action for action in build_parser()._actions if isinstance(action, argparse._SubParsersAction))
    for name, parser in commands.choices.items():
        assert parser.description, name
        silent = [action.option_strings for action in parser._actions if not action.help]
        assert not silent, f"slim {name}: options without a help text: {silent}"


def test_help_gives_an_example_and_every_exit_code(capsys):
    code, out, _ = run_main(capsys, ["advise", "--help"])
    assert code == 0
    assert "example" in out and "slim advise --traces" in out and "--json" in out
    for line in ("0  done", "1  unexpected failure", "2  bad input", "3  no candidate --max-num-seqs meets the SLOs",
                 "4  slim tune --run stopped", "141  the reader of the output closed it early"):
        assert line in out
    for option in ("--models-file YAML", "--hardware-file YAML", "--model-config CONFIG_JSON", "--train-models"):
        assert option in out
    assert "h200" in out and "l40s" in out    # the shipped GPUs are listed


def test_json_output_holds_the_recommendation_memory_flags_and_candidates(capsys):
    code, out, err = run_main(capsys, ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--json"])
    assert code == 0, err
    document = json.loads(out)
    assert document["status"] == "ok" and document["exit_code"] == 0 and document["slim_version"] == __version__
    recommendation = document["recommendation"]
    cap = recommendation["max_num_seqs"]
    assert cap in [c["max_num_seqs"] for c in document["candidates"]]
    chosen = next(c for c in document["candidates"] if c["max_num_seqs"] == cap)
    assert chosen["meets_slo"] == {"mean_in_batch_e2e_ms": True} and chosen["meets_efficiency_floor"]
    assert recommendation["measured"] and recommendation["mean_in_batch_e2e_ms"] <= 5000
    assert recommendation["total_token_throughput"] == chosen["measured"]["total_token_throughput"]
    assert set(chosen["predicted"]) == {"total_token_throughput", "mean_in_batch_e2e_ms", "mean_tpot_ms"}
    assert document["memory"]["num_gpu_blocks_override"] == cap * 24   # 384 tokens = 24 blocks of 16
    assert document["workload"] == {"model": "opt-1.3b", "hardware": "h100-64gb", "input_len": 256.0,
                                    "output_len": 128.0, "slo_ms": {"mean_in_batch_e2e_ms": 5000.0},
                                    "slo_resolved_on_prediction": [], "served_model": "facebook/opt-1.3b",
                                    "goodput": None, "epsilon": 0.1, "confidence": None}
    assert document["decision"] is None, "--no-plan"
    assert all("mean_in_batch_e2e_ms_upper_bound" not in candidate for candidate in document["candidates"])
    assert document["fit"]["n_train_runs"] == document["fit"]["n_usable_runs"] == 9
    assert document["warnings"] == [] and document["held_out_check"] is None


@pytest.mark.parametrize("argv, code, status", [
    ([*LAYOUT_WORKLOAD, "--slo-ms", "1"], EXIT_NO_FEASIBLE_CAP, "no_feasible_cap"),
    ([*LAYOUT_WORKLOAD, "--slo-ms", "5000", "--hardware", "tpu-v9"], EXIT_BAD_INPUT, "error"),
])
def test_json_errors_are_a_document_too(capsys, argv, code, status):
    exit_code, out, err = run_main(capsys, ["advise", *argv, "--json"])
    document = json.loads(out)
    assert exit_code == code == document["exit_code"] and document["status"] == status
    assert document["message"] in err
    if code == EXIT_NO_FEASIBLE_CAP:   # what each candidate would have given
        assert len(document["candidates"]) == 10 and all(c["measured"] for c in document["candidates"][:9])


def test_json_lists_why_each_run_is_unusable(capsys, tmp_path):
    code, out, _ = run_main(capsys, ["advise", "--traces", str(_all_bad_folder(tmp_path / "runs")), *WORKLOAD,
                                     "--slo-ms", "8000", "--json"])
    assert code == EXIT_BAD_INPUT
    runs = json.loads(out)["runs"]
    assert sorted((run["status"], run["run"]) for run in runs) == [("corrupt", "truncated"),
                                                                    ("server_start_failed", "port_clash")]
    assert all(list(run) == CHECK_HEADER for run in runs)


def test_a_target_model_is_required(capsys):
    code, _, err = run_main(capsys, ["advise", "--traces", str(LAYOUT), "--input-len", "256", "--output-len", "128",
                                     "--slo-ms", "5000", "--hardware", "h100-64gb"])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "--model", "--model-config")


# ---------------------------------------------------------------- training selection and warnings

def test_exclude_runs_leaves_them_out_and_names_a_pattern_that_matches_nothing(capsys):
    code, out, _ = run_main(capsys, ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--json",
                                     "--exclude-runs", "max_num_seqs_256", "--exclude-runs", "max_num_seqs_12*"])
    assert code == 0
    fit = json.loads(out)["fit"]
    assert (fit["n_usable_runs"], fit["n_train_runs"], fit["n_left_out_runs"]) == (9, 7, 2)
    held_out = json.loads(out)["held_out_check"]    # the target's runs left out are predicted
    assert held_out["n_runs"] == 2 and held_out["throughput_mape_pct"] >= 0
    code, _, err = run_main(capsys, ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--exclude-runs", "nothing*"])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "'nothing*' matches no usable run")


def test_train_models_must_name_a_profiled_model(capsys):
    code, _, err = run_main(capsys, ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--train-models", "opt-2.7b"])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "'opt-2.7b' has no usable run")


def test_a_model_never_trained_on_is_predicted_and_checked_on_its_runs(shared_traces_dir):
    advice = advise(AdviceRequest(shared_traces_dir / "output_length", "llama-2-7b", 250, 390, slo_s=20.0,
                                  hardware="h100-64gb", train_models=["opt-1.3b", "opt-2.7b"], plan=False))
    assert advice.train_models == ("opt-1.3b", "opt-2.7b") and advice.n_left_out == advice.held_out.n_runs
    assert advice.held_out.model == "llama-2-7b" and advice.held_out.n_runs >= 30
    assert 0 < advice.held_out.throughput_mape_pct < 50
    assert [warning.code for warning in advice.warnings] == ["target_not_trained"]


def test_a_cap_above_the_kv_capacity_and_an_unprofiled_model_are_warned_about(shared_traces_dir):
    # Llama-2-13B was never profiled (the traces hold OPT-1.3B, OPT-2.7B and Llama-2-7B); at IL 242 + OL 520
    # vLLM's default reservation on the 64 GB H100 holds 55.7 sequences, and SLIM-BCA picks the cap 64.
    advice = advise(AdviceRequest(shared_traces_dir / "output_length", "llama-2-13b", 242, 520, slo_s=60.0,
                                  epsilon=0.1, hardware="h100-64gb", plan=False))
    assert advice.recommendation.batch_cap == 64 and not advice.recommendation.measured
    assert advice.kv_capacity_sequences == pytest.approx(55.7, abs=0.05)
    assert advice.kv_capacity_source == "default reservation"
    codes = [warning.code for warning in advice.warnings]
    assert codes == ["target_not_profiled", "cap_exceeds_kv_capacity", "kv_exceeds_reservation"]
    capacity_warning = advice.warnings[1].message
    assert "--max-num-seqs 64 exceeds the KV capacity of 55.7 sequences" in capacity_warning
    assert "--max-num-seqs 55 predicts" in capacity_warning


# ---------------------------------------------------------------- --model-config

HF_CONFIGS = REPO / "tests" / "data" / "hf_configs"


def test_a_hugging_face_config_describes_the_target(capsys, tmp_path):
    # The layout's OPT-1.3B runs, the target described by its config.json under another name: the
    # runs of that name are still those of the model the config replaces.
    code, out, err = run_main(capsys, ["advise", "--traces", str(LAYOUT), "--model-config",
                                       str(HF_CONFIGS / "opt-1.3b" / "config.json"), "--input-len", "256",
                                       "--output-len", "128", "--slo-ms", "5000", "--json", "--hardware", "h100-64gb",
                                       "--no-plan"])
    assert code == 0, err
    document = json.loads(out)
    assert document["workload"]["model"] == "opt-1.3b" and document["fit"]["n_usable_runs"] == 9
    code, _, err = run_main(capsys, ["advise", *LAYOUT_WORKLOAD[:2], "--model-config", str(tmp_path / "none.json"),
                                     "--input-len", "256", "--output-len", "128", "--slo-ms", "5000",
                                     "--hardware", "h100-64gb"])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "model config not found")
@pytest.mark.integration   # the simulator on every real run
def test_sim_predictor_simulates_each_cap_and_refuses_preempting_ones(shared_traces_dir):
    """OPT-2.7B at 242 + 520 tokens: its KV cache holds about 223 such sequences, so SIM
    predicts preemption at caps 256 and 512 and refuses them; SLIM's default is unchanged."""
    advice = advise(AdviceRequest(shared_traces_dir / "output_length", "opt-2.7b", 242, 520, slo_s=20.0, epsilon=0.1,
                                  candidates=(64, 128, 256, 512), predictor="sim", hardware="h100-64gb",
                                  sim_constants_file=REPO / "slim/sim/h100-64gb-sim.yaml", plan=False))
    assert advice.predictor == "sim" and advice.refused_caps == (256.0, 512.0)
    assert advice.recommendation.feasible and advice.recommendation.batch_cap in (64, 128)
    assert advice.fit.n_train_points >= 100
    text = render_text(advice)
    assert text.startswith("SIM (the simulator) calibrated") and "SIM refused --max-num-seqs 256, 512" in text


def test_unknown_predictor_is_an_argument_error(capsys):
    code, out, err = run_main(capsys, ["advise", "--traces", "x", *WORKLOAD, "--slo-ms", "8000",
                                       "--predictor", "oracle"])
    assert code == 2 and out == ""
    assert_one_line_error(err, "--predictor")


# ---------------------------------------------------------------- --confidence

@pytest.mark.parametrize("value", ["0", "1", "1.5", "-0.2", "nan", "ninety"])
def test_confidence_outside_the_open_unit_interval_exits_2_with_one_line(capsys, value):
    code, out, err = run_main(capsys, ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--confidence", value])
    assert code == EXIT_BAD_INPUT and out == ""
    assert_one_line_error(err, "--confidence")


def test_confidence_is_for_slim_only(capsys):
    code, _, err = run_main(capsys, ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--confidence", "0.9",
                                     "--predictor", "sim"])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "--confidence", "--predictor sim")


def test_json_holds_the_confidence_and_the_e2e_upper_bound(capsys):
    # OL 140: no run of the layout measured it, so the decision rests on SLIM's predictions and their bound.
    workload = [*LAYOUT_WORKLOAD[:-3], "--output-len", "140", "--no-plan"]
    code, out, err = run_main(capsys, ["advise", *workload, "--slo-ms", "5000", "--json", "--confidence", "0.9"])
    assert code == 0, err
    document = json.loads(out)
    assert document["workload"]["confidence"] == 0.9
    recommendation = document["recommendation"]
    assert not recommendation["measured"]
    for candidate in document["candidates"]:
        bound = candidate["mean_in_batch_e2e_ms_upper_bound"]
        assert bound > candidate["predicted"]["mean_in_batch_e2e_ms"]
        assert candidate["meets_slo"]["mean_in_batch_e2e_ms"] == (bound <= 5000)
    chosen = next(c for c in document["candidates"] if c["max_num_seqs"] == recommendation["max_num_seqs"])
    assert chosen["mean_in_batch_e2e_ms_upper_bound"] <= 5000
    code, out, _ = run_main(capsys, ["advise", *workload, "--slo-ms", "5000", "--confidence", "0.9"])
    assert code == 0 and "in-batch E2E bound" in out and "confidence 0.9" in out


def test_confidence_lowers_the_cap_where_the_band_is_wide(shared_traces_dir):
    """Llama-2-7B at an output length no run measured (600), predicted from OPT-1.3B alone: the runs
    leave SLIM's per-layer constants open, so the band is wide. An SLO just above the plain choice's
    predicted E2E is met by the prediction but not by its upper bound, and the confident advisor
    steps down to a cap whose bound meets it."""
    traces, workload = shared_traces_dir / "output_length", ("llama-2-7b", 250, 600)
    common = dict(hardware="h100-64gb", train_models=["opt-1.3b"], plan=False)
    plain = advise(AdviceRequest(traces, *workload, slo_s=30.0, **common))
    assert not plain.recommendation.measured
    slo_ms = plain.recommendation.values_ms["mean_in_batch_e2e_ms"] * 1.001
    plain = advise(AdviceRequest(traces, *workload, slo_s=slo_ms / 1e3, **common))
    confident = advise(AdviceRequest(traces, *workload, slo_s=slo_ms / 1e3, confidence=0.9, **common))
    assert confident.recommendation.batch_cap < plain.recommendation.batch_cap
    bounds = {row.max_num_seqs: row.bound_ms for row in confident.candidates}
    assert bounds[confident.recommendation.batch_cap] <= slo_ms < bounds[plain.recommendation.batch_cap]
    # The band is wide here: the bound is far above the prediction, beyond the fit's own residual scatter.
    assert bounds[plain.recommendation.batch_cap] > 1.2 * plain.recommendation.values_ms["mean_in_batch_e2e_ms"]
    smallest = min(row.predicted["mean_in_batch_e2e_ms"] for row in confident.candidates)
    with pytest.raises(NoFeasibleCapError):   # and tight enough an SLO is met by no bound at all
        advise(AdviceRequest(traces, *workload, slo_s=smallest * 1.001 / 1e3, confidence=0.9, **common))


def test_advise_names_the_corrupt_run_it_skipped_and_uses_the_rest(capsys, tmp_path):
    import shutil

    traces = tmp_path / "runs"
    shutil.copytree(LAYOUT, traces)
    _all_bad_folder(traces / "broken")
    argv = ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000"]
    argv[argv.index(str(LAYOUT))] = str(traces)
    code, out, _ = run_main(capsys, argv)
    assert code == 0
    skipped = next(line for line in out.splitlines() if line.startswith("traces: skipped"))
    assert "skipped 2 of" in skipped and "corrupt: 1" in skipped and "server_start_failed: 1" in skipped
    code, out, _ = run_main(capsys, [*argv, "--json"])
    assert code == 0
    skipped = sorted((run["status"], Path(run["path"]).name) for run in json.loads(out)["skipped_runs"])
    assert skipped == [("corrupt", "truncated"), ("server_start_failed", "port_clash")]


def test_advise_draws_the_frontier_where_plot_says_and_refuses_another_format(capsys, tmp_path):
    figure = tmp_path / "frontier.png"
    code, out, _ = run_main(capsys, ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--plot", str(figure)])
    assert code == 0 and figure.read_bytes().startswith(b"\x89PNG")
    again = tmp_path / "again.png"
    run_main(capsys, ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--plot", str(again)])
    assert again.read_bytes() == figure.read_bytes(), "the same advice draws the same bytes"
    code, _, err = run_main(capsys, ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--plot", str(tmp_path / "f.jpg")])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "name a .pdf, .png or .svg file")


def test_an_fp8_kv_cache_halves_the_memory_plan_and_an_unknown_dtype_is_named(capsys):
    code, out, err = run_main(capsys, ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--json"])
    assert code == 0, err
    plain = json.loads(out)
    code, out, err = run_main(capsys, ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--json",
                                       "--kv-cache-dtype", "fp8"])
    assert code == 0, err
    fp8 = json.loads(out)
    assert fp8["memory"]["kv_bytes_needed"] * 2 == pytest.approx(
        plain["memory"]["kv_bytes_needed"] * fp8["recommendation"]["max_num_seqs"]
        / plain["recommendation"]["max_num_seqs"])
    code, _, err = run_main(capsys, ["advise", *LAYOUT_WORKLOAD, "--slo-ms", "5000", "--kv-cache-dtype", "fp9"])
    assert code == EXIT_BAD_INPUT
    assert_one_line_error(err, "--kv-cache-dtype 'fp9' is not modelled")
