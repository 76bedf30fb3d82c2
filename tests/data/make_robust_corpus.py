"""Write the robustness corpus: run directories of every kind that once crashed ingest, was
misclassified, or was left out of the cleaning report, each with the status and the
file at fault that ingest must give it.

The corpus is written at test time (``build_corpus(root)``), never committed: symlink loops and
unreadable files do not survive git. Cases marked ``unprivileged`` hold a file or folder without
read permission; they classify as ``unreadable`` only for a reader that is not root (the tests
run them as ``nobody``). Every number is synthetic.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SPEC = importlib.util.spec_from_file_location("make_corpus", Path(__file__).resolve().parent / "make_corpus.py")
corpus = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(corpus)

JSON_NAME = "openai-infqps-opt-1.3b-20250301-100030.json"


@dataclass(frozen=True)
class Case:
    """One run directory of the corpus and the classification ingest must give it."""

    name: str
    status: str
    fault_file: str | None       # None: not checked
    build: Callable[[Path], None]
    unprivileged: bool = False   # needs a reader that is not root


CASES: list[Case] = []


def case(status: str, fault_file: str | None = None, unprivileged: bool = False):
    def register(build: Callable[[Path], None]) -> Callable[[Path], None]:
        CASES.append(Case(build.__name__, status, fault_file, build, unprivileged))
        return build
    return register


# ---------------------------------------------------------------- helpers

def good(run_dir: Path, **kwargs: Any) -> None:
    """A complete public-layout run (OPT-1.3B, max_num_seqs 8) that ingest accepts."""
    kwargs.setdefault("max_num_seqs", 8)
    corpus.write_old_run(run_dir, **kwargs)


def edit_json(run_dir: Path, **changes: Any) -> None:
    path = run_dir / JSON_NAME
    content = json.loads(path.read_text())
    content.update(changes)
    path.write_text(json.dumps(content) + "\n")   # allow_nan: NaN and Infinity are written as such


def set_raw(run_dir: Path, key: str, literal: str) -> None:
    """Write `literal` as the value of `key` in the result JSON, verbatim (``1e400``, a 400-digit integer)."""
    path = run_dir / JSON_NAME
    text, count = re.subn(rf'"{key}": [^,}}]+', f'"{key}": {literal}', path.read_text(), count=1)
    assert count == 1, f"{key} not in {path}"
    path.write_text(text)


def detailed(run_dir: Path, input_lens: list[Any], output_lens: list[Any]) -> None:
    """A current `vllm bench serve --save-detailed` result with the given per-request lists."""
    result = corpus.bench_serve_result("facebook/opt-1.3b", 4, 4, 2.0, [200] * 4, [50] * 4, "20250901-101500",
                                       {"max_num_seqs": "2"}, detailed=True)
    result["input_lens"], result["output_lens"] = input_lens, output_lens
    corpus.write(run_dir / "vllm-infqps-opt-1.3b-20250901-101500.json", json.dumps(result) + "\n")
    corpus.write(run_dir / "metrics_engine.csv", corpus.old_metrics_csv(*corpus.ramp(2)))


def metrics_with(running: list[float], waiting: list[float] | None = None,
                 preemptions: list[float] | None = None) -> str:
    waiting = waiting or [0.0] * len(running)
    return corpus.old_metrics_csv(running, waiting, [0.01] * len(running), preemptions)


def unreadable(path: Path) -> None:
    os.chmod(path, 0)


XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus."
PREEMPTION_WARNING = (
    "WARNING 03-01 10:00:31 scheduler.py:1483] Sequence group cmpl-1-0 is preempted by "
    "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the "
    "end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV "
    "cache memory. total_num_cumulative_preemption=51")


# ---------------------------------------------------------------- crashes: each becomes the run's status

@case("invalid_values", JSON_NAME)
def infinite_input_tokens(run_dir):
    good(run_dir)
    edit_json(run_dir, total_input_tokens=float("inf"))


@case("invalid_values", JSON_NAME)
def overflowing_output_tokens_literal(run_dir):
    good(run_dir)
    set_raw(run_dir, "total_output_tokens", "1e400")


@case("invalid_values", JSON_NAME)
def integer_too_large_for_a_float(run_dir):
    good(run_dir)
    set_raw(run_dir, "total_output_tokens", "1" + "0" * 400)


@case("corrupt", JSON_NAME)
def json_nested_too_deeply(run_dir):
    good(run_dir)
    corpus.write(run_dir / JSON_NAME, "[" * 200_000 + "]" * 200_000 + "\n")


@case("corrupt", JSON_NAME)
def json_objects_nested_too_deeply(run_dir):
    good(run_dir)
    corpus.write(run_dir / JSON_NAME, '{"a":' * 100_000 + "1" + "}" * 100_000 + "\n")


@case("unreadable", JSON_NAME)
def json_symlink_to_itself(run_dir):
    good(run_dir)
    (run_dir / JSON_NAME).unlink()
    (run_dir / JSON_NAME).symlink_to(JSON_NAME)


@case("unreadable", "metrics_engine.csv")
def metrics_symlink_loop(run_dir):
    good(run_dir)
    (run_dir / "metrics_engine.csv").unlink()
    (run_dir / "metrics_engine.csv").symlink_to("metrics_b.csv")
    (run_dir / "metrics_b.csv").symlink_to("metrics_engine.csv")


@case("unreadable", JSON_NAME)
def dangling_json_symlink(run_dir):
    good(run_dir)
    (run_dir / JSON_NAME).unlink()
    (run_dir / JSON_NAME).symlink_to("../elsewhere/result.json")


@case("unreadable", "metrics_engine.csv")
def dangling_metrics_symlink(run_dir):
    good(run_dir)
    (run_dir / "metrics_engine.csv").unlink()
    (run_dir / "metrics_engine.csv").symlink_to("/nonexistent/metrics.csv")


@case("unreadable", "server_out.log")
def dangling_server_log_symlink(run_dir):
    good(run_dir)
    (run_dir / "server_out.log").unlink()
    (run_dir / "server_out.log").symlink_to("missing.log")


@case("unreadable", JSON_NAME, unprivileged=True)
def json_without_read_permission(run_dir):
    good(run_dir)
    unreadable(run_dir / JSON_NAME)


@case("unreadable", "metrics_engine.csv", unprivileged=True)
def metrics_without_read_permission(run_dir):
    good(run_dir)
    unreadable(run_dir / "metrics_engine.csv")


@case("unreadable", "server_out.log", unprivileged=True)
def server_log_without_read_permission(run_dir):
    good(run_dir)
    unreadable(run_dir / "server_out.log")


@case("unreadable", "cache_config.txt", unprivileged=True)
def cache_config_without_read_permission(run_dir):
    good(run_dir)
    unreadable(run_dir / "cache_config.txt")


@case("unreadable", "", unprivileged=True)
def directory_without_read_permission(run_dir):
    good(run_dir)
    unreadable(run_dir)


@case("invalid_values", "vllm-infqps-opt-1.3b-20250901-101500.json")
def detailed_input_lens_with_nan(run_dir):
    detailed(run_dir, [200, float("nan"), 200, 200], [50] * 4)


@case("invalid_values", "vllm-infqps-opt-1.3b-20250901-101500.json")
def detailed_output_lens_with_text(run_dir):
    detailed(run_dir, [200] * 4, [50, "fifty", 50, 50])


@case("invalid_values", "vllm-infqps-opt-1.3b-20250901-101500.json")
def detailed_output_lens_with_null(run_dir):
    detailed(run_dir, [200] * 4, [50, None, 50, 50])


@case("invalid_values", "vllm-infqps-opt-1.3b-20250901-101500.json")
def detailed_lens_of_different_lengths(run_dir):
    detailed(run_dir, [200] * 3, [50] * 4)


@case("invalid_values", "vllm-infqps-opt-1.3b-20250901-101500.json")
def detailed_output_lens_with_booleans(run_dir):
    detailed(run_dir, [200] * 4, [50, True, 50, 50])


@case("ok", "")
def detailed_lens_with_a_failed_request(run_dir):
    detailed(run_dir, [200] * 4, [50, 0, 50, 50])    # a failed request has output 0: not counted


# ---------------------------------------------------------------- impossible numbers: each gets a reason code

@case("invalid_values", JSON_NAME)
def infinite_request_throughput(run_dir):
    good(run_dir)
    edit_json(run_dir, request_throughput=float("inf"))


@case("invalid_values", JSON_NAME)
def throughput_literal_1e400(run_dir):
    good(run_dir)
    set_raw(run_dir, "total_token_throughput", "1e400")


@case("implausible", JSON_NAME)
def throughput_inconsistent_with_counts(run_dir):
    good(run_dir)
    edit_json(run_dir, total_token_throughput=1e300)


@case("implausible", JSON_NAME)
def request_throughput_inconsistent_with_counts(run_dir):
    good(run_dir)
    edit_json(run_dir, request_throughput=100.0)


@case("implausible", JSON_NAME)
def completed_exceeds_num_prompts(run_dir):
    good(run_dir, num_prompts=100, completed=120)


@case("implausible", "metrics_engine.csv")
def one_absurd_running_sample(run_dir):
    running, waiting, _ = corpus.ramp(64)
    running[3] = 100_000.0
    good(run_dir, max_num_seqs=64, metrics=metrics_with(running, waiting))


@case("implausible", "metrics_engine.csv")
def running_above_max_num_seqs(run_dir):
    good(run_dir, max_num_seqs=8, metrics=metrics_with([0, 12, 12, 12, 0], [0, 20, 8, 0, 0]))


@case("implausible", "metrics_engine.csv")
def running_above_kv_blocks(run_dir):
    good(run_dir, max_num_seqs=8)
    corpus.write(run_dir / "cache_config.txt", corpus.cache_config_txt(4))   # 4 blocks, 8 sequences running


@case("implausible", "metrics_engine.csv")
def kv_usage_in_percent(run_dir):
    running, waiting, kv = corpus.ramp(8)
    good(run_dir, metrics=corpus.old_metrics_csv(running, waiting, [100 * k for k in kv]))


@case("implausible", JSON_NAME)
def littles_law_batch_above_the_cap(run_dir):
    # No metrics recorded: the client's ITL says ~49 requests decoded at once under a cap of 8.
    good(run_dir, metrics="<absent>")


@case("hardware_error", "server_err.log")
def nvrm_xid_without_json(run_dir):
    good(run_dir, with_json=False, metrics="<absent>", server_err=f"[ 1234.5678] {XID}\n")


@case("hardware_error", "server_err.log")
def nvrm_xid_after_json(run_dir):
    good(run_dir, server_err=corpus.SERVER_ERR_OK + XID + "\n")


@case("hardware_error", "server_err.log")
def ecc_error_after_json(run_dir):
    good(run_dir, server_err=corpus.traceback("worker/model_runner.py",
                                              "RuntimeError: CUDA error: uncorrectable ECC error encountered"))


@case("hardware_error", "server_out.log")
def illegal_memory_access_after_json(run_dir):
    good(run_dir, server_extra="ERROR 03-01 10:00:40 engine.py:135] RuntimeError: CUDA error: an illegal "
                               "memory access was encountered")


@case("preempted", "")
def preempted_counter_beside_a_nan_running_sample(run_dir):
    # A missed scrape makes the batch come from the stats lines; the CSV's counter still counts.
    running, waiting, kv = corpus.ramp(4)
    running[3] = float("nan")
    good(run_dir, max_num_seqs=4, metrics=corpus.old_metrics_csv(running, waiting, kv, [0, 0, 2, 2, 3, 3, 3, 3]),
         stats_lines=corpus.v0_stats(4))


@case("preempted", "")
def preempted_only_in_the_server_log(run_dir):
    header = corpus.OLD_METRICS_HEADER.replace(",num_preemptions_total", "")
    running, waiting, kv = corpus.ramp(8)
    rows = corpus.old_metrics_csv(running, waiting, kv).splitlines()[1:]
    rows = [",".join(part for i, part in enumerate(row.split(",")) if i != 6) for row in rows]
    good(run_dir, metrics="\n".join([header, *rows]) + "\n", server_extra=PREEMPTION_WARNING)


@case("preempted", "")
def preemption_counter_all_nan_but_log_warns(run_dir):
    running, waiting, kv = corpus.ramp(8)
    nan = float("nan")
    good(run_dir, metrics=corpus.old_metrics_csv(running, waiting, kv, [nan] * 8), server_extra=PREEMPTION_WARNING)


@case("ok", "")
def preemption_counter_missing_and_no_warning(run_dir):
    header = corpus.OLD_METRICS_HEADER.replace(",num_preemptions_total", "")
    running, waiting, kv = corpus.ramp(8)
    rows = corpus.old_metrics_csv(running, waiting, kv).splitlines()[1:]
    rows = [",".join(part for i, part in enumerate(row.split(",")) if i != 6) for row in rows]
    good(run_dir, metrics="\n".join([header, *rows]) + "\n")   # ok, noting "preemptions not recorded"


@case("invalid_values", "cache_config.txt")
def negative_block_count(run_dir):
    good(run_dir)
    corpus.write(run_dir / "cache_config.txt", corpus.cache_config_txt(-5))


@case("invalid_values", "cache_config.txt")
def zero_block_size(run_dir):
    good(run_dir)
    corpus.write(run_dir / "cache_config.txt", corpus.cache_config_txt(4096, block_size=0))


@case("invalid_values", JSON_NAME)
def completed_is_true(run_dir):
    good(run_dir)
    edit_json(run_dir, completed=True)


@case("invalid_values", JSON_NAME)
def zero_duration(run_dir):
    good(run_dir)
    edit_json(run_dir, duration=0)


@case("invalid_values", JSON_NAME)
def nan_duration(run_dir):
    good(run_dir)
    edit_json(run_dir, duration=float("nan"))


# ---------------------------------------------------------------- directories that were left out

@case("out_of_memory", "log_1000.err")
def only_a_client_err_log_with_oom(run_dir):
    corpus.write(run_dir / "log_1000.err", corpus.traceback(
        "worker/model_runner.py", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."))


@case("failed_unknown", "")
def only_a_client_err_log(run_dir):
    corpus.write(run_dir / "log_1000.err", "load SINGULARITY/3.11.5 (PATH)\nslurmstepd: error: *** JOB CANCELLED\n")


@case("failed_unknown", "")
def only_nvidia_smi_csvs(run_dir):
    corpus.write(run_dir / "metrics_gpu_device_nvidia_smi_0.csv", "time [s],utilization.gpu [%]\n0.1,0\n1.1,97\n")
    corpus.write(run_dir / "metrics_gpu_device_nvidia_smi_dom_0.csv", "time [s],power.draw [W]\n0.1,70\n")


@case("ok", "")
def directory_named_like_a_json_file(run_dir):
    good(run_dir)
    (run_dir / "openai-infqps-opt-1.3b-old.json").mkdir()


@case("ok", "")
def macos_resource_fork_beside_the_json(run_dir):
    good(run_dir)
    corpus.write(run_dir / f"._{JSON_NAME}", "\x00\x05\x16\x07 Mac OS X resource fork")
    corpus.write(run_dir / ".DS_Store", "\x00\x00\x00\x01Bud1")


@case("ok", "")
def notebook_checkpoint_copy_of_the_json(run_dir):
    good(run_dir)
    corpus.write(run_dir / ".ipynb_checkpoints" / JSON_NAME, (run_dir / JSON_NAME).read_text())


@case("ok", "")
def directory_symlink_cycle(run_dir):
    good(run_dir)
    (run_dir / "again").symlink_to(".")


@case("ok", "")
def pytorch_benchmark_copy_beside_the_result(run_dir):
    good(run_dir)
    corpus.write(run_dir / "openai-infqps-opt-1.3b-20250301-100030.pytorch.json", "[]\n")


# ---------------------------------------------------------------- other unusual files

@case("corrupt", JSON_NAME)
def empty_json_file(run_dir):
    good(run_dir)
    corpus.write(run_dir / JSON_NAME, "")


@case("corrupt", JSON_NAME)
def json_is_a_number(run_dir):
    good(run_dir)
    corpus.write(run_dir / JSON_NAME, "42\n")


@case("corrupt", JSON_NAME)
def json_is_binary_garbage(run_dir):
    good(run_dir)
    (run_dir / JSON_NAME).write_bytes(bytes(range(256)) * 4)


@case("ok", "")
def json_with_a_utf8_byte_order_mark(run_dir):
    good(run_dir)
    (run_dir / JSON_NAME).write_bytes(b"\xef\xbb\xbf" + (run_dir / JSON_NAME).read_bytes())


@case("ok", "")
def counts_written_as_text(run_dir):
    good(run_dir)
    edit_json(run_dir, completed="100", num_prompts="100")


@case("ok", "")
def metrics_with_text_cells(run_dir):
    running, waiting, kv = corpus.ramp(8)
    text = corpus.old_metrics_csv(running, waiting, kv).splitlines()
    text[-1] = text[-1].replace(",0.0,", ",n/a,", 1)   # a text cell in an idle sample's kv usage
    good(run_dir, metrics="\n".join(text) + "\n")


@case("missing_metrics", "metrics_engine.csv")
def metrics_csv_of_binary_garbage(run_dir):
    good(run_dir)
    (run_dir / "metrics_engine.csv").write_bytes(bytes(range(256)) * 8)


@case("missing_metrics", "metrics_engine.csv")
def metrics_all_idle(run_dir):
    good(run_dir, metrics=metrics_with([0, 0, 0, 0]))


@case("ok", "")
def cache_config_without_info_line(run_dir):
    good(run_dir)
    corpus.write(run_dir / "cache_config.txt", "# nothing here\n")


@case("ok", "")
def server_log_in_latin1(run_dir):
    good(run_dir)
    with open(run_dir / "server_out.log", "ab") as handle:
        handle.write("INFO Modèle chargé\n".encode("latin-1"))


@case("ok", "")
def client_namespace_nested_too_deeply(run_dir):
    good(run_dir)
    with open(run_dir / "log_1000.out", "a") as handle:
        handle.write("Namespace(x=" + "[" * 50_000 + "]" * 50_000 + ")\n")


@case("unknown_model", "openai-infqps-My Model v2-20250301-100030.json")
def model_path_with_spaces(run_dir):
    good(run_dir, model_path="/models/My Model v2")


@case("ok", "")
def max_num_seqs_metadata_zero_falls_back_to_flags(run_dir):
    good(run_dir, json_overrides={"max_num_seqs": "0"})


@case("out_of_memory", "run=0.failure.json")
def sweep_failure_record_with_oom(run_dir):
    corpus.write(run_dir / "run=0.failure.json", json.dumps({
        "run_number": 0, "error_type": "RuntimeError",
        "error": "Server exited: torch.OutOfMemoryError: CUDA out of memory", "serve_overrides": {"max_num_seqs": 512},
        "bench_overrides": {}}) + "\n")


@case("failed_unknown", "run=0.failure.json")
def sweep_failure_record(run_dir):
    corpus.write(run_dir / "run=0.failure.json", json.dumps({
        "run_number": 0, "error_type": "TimeoutError", "error": "server not ready after 300 s",
        "serve_overrides": {}, "bench_overrides": {}}) + "\n")


@case("corrupt", "benchmarks.json")
def guidellm_report_without_benchmarks(run_dir):
    corpus.write(run_dir / "benchmarks.json", json.dumps({"args": {"model": "facebook/opt-1.3b"}, "benchmarks": []}))


@case("corrupt", "benchmarks.json")
def guidellm_benchmark_without_metrics(run_dir):
    corpus.write(run_dir / "benchmarks.json", json.dumps({"args": {}, "benchmarks": [{"config": {}}]}))


@case("missing_metrics", "metrics.prom")
def scrape_file_that_is_not_prometheus_text(run_dir):
    good(run_dir, metrics="<absent>")
    corpus.write(run_dir / "metrics.prom", "vllm:num_requests_running{engine=0 3\n")


@case("corrupt", JSON_NAME)
def appended_results_with_a_truncated_last_one(run_dir):
    good(run_dir)
    text = (run_dir / JSON_NAME).read_text()
    corpus.write(run_dir / JSON_NAME, text + text + text[: len(text) // 2])


# ---------------------------------------------------------------- good runs among them

@case("ok", "")
def good_public_layout(run_dir):
    good(run_dir, max_num_seqs=16)


@case("ok", "")
def good_public_layout_larger_cap(run_dir):
    good(run_dir, max_num_seqs=32)


def build_corpus(root: Path) -> dict[str, Case]:
    """Write every case under `root` (one directory each); the cases by name."""
    for one in CASES:
        one.build(root / one.name)
    return {one.name: one for one in CASES}
