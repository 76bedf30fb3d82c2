"""The tuning loop with a real benchmark: each proposed run through a command template, its result
read back with the project's ingest, until every decision is settled or a budget is spent.

The template is split like a shell would (`shlex.split`) but run without one, as an argument list;
its ``{placeholders}`` (`slim.tune.plan.placeholders`) are filled with values the tool
chose (caps, lengths, the model as the user named it, paths under the results folder), never with
anything read from a trace file. Where the template itself asks for a shell (``sh -c '...'``), the
values substituted into the shell's script are quoted with `shlex.quote`. Each run is started in a
process group of its own, and the whole group is stopped on a timeout or Ctrl-C, so a benchmark's
own children do not outlive the loop.

Every attempt is written beside its result: ``command.log`` (the argument list and exit code),
``stdout.log`` and ``stderr.log`` in the run's folder, and one line in the results folder's
``attempts.jsonl`` with the run's fingerprint (`run_fingerprint`: the template, the server
settings, slim's version). A rerun resumes from what is there: measured runs are ingested again as
facts, and a candidate whose attempt failed or gave no usable run is not proposed again while the
fingerprint is the same; a failure under another fingerprint, without one (an older ledger), or
interrupted is not trusted and the candidate may run again, as may every failure with
``retry_failed``. Without a template (planning), a failure excludes its candidate when the
fingerprint differs at most in the template.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import string
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from slim import __version__
from slim import columns as col
from slim.decision.layouts import Layout
from slim.errors import AdvisorError, CannotStartError, NoUsableRunsError, TraceFormatError
from slim.traces.usable import trace_options, usable_runs
from slim.tune.commands import MULTI_ARGUMENT_PLACEHOLDERS, placeholders, served_model, serving_flags
from slim.tune.loop import LoopStep, run_loop
from slim.tune.measurement import Measurement, Unusable, measurement_of_runs
from slim.tune.plan import TunePlan
from slim.tune.proposals import Proposal
from slim.tune.request import TuneRequest
from slim.tune.server_sizes import expert_parallel_enabled, layout_sizes

LEDGER = "attempts.jsonl"
MAX_FAILURES_IN_A_ROW = 3
"""The loop stops after this many runs in a row gave nothing usable: the template is likely broken."""
SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}
STOP_GRACE_S = 5.0
"""How long a stopped run's process group has between SIGTERM and SIGKILL."""
EXIT_TIMED_OUT, EXIT_CANNOT_START, EXIT_INTERRUPTED = 124, 127, 130
RUN_TIMEOUT_FLOOR_S = 1.0
"""The shortest time limit a run is given (wall seconds), however small its allowance."""


def template_fields(template: str) -> set[str]:
    """The placeholder names a template uses.

    Raises `AdvisorError` for braces that do not pair up and for positional fields (``{}``, ``{0}``)."""
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as error:
        raise AdvisorError(f"--run template has unbalanced braces ({error}); write a placeholder as {{name}} "
                           "and a literal brace as {{ or }}") from error
    positional = [name for name in names if name == "" or name.isdigit()]
    if positional:
        raise AdvisorError(f"--run template has a positional placeholder {{{positional[0]}}}; name the value, "
                           "e.g. {model} or {max_concurrency}")
    return set(names)


def render_template(template: str, values: dict[str, str]) -> list[str]:
    """The argument list of one run: the template split, each argument's placeholders filled, and
    quoted for the shell where the argument is a shell's ``-c`` script."""
    unknown = template_fields(template) - set(values)
    if unknown:
        raise AdvisorError(f"--run template names unknown placeholder(s) {sorted(unknown)}; known: "
                           f"{', '.join(sorted(values))}")
    try:
        words = shlex.split(template)
    except ValueError as error:
        raise AdvisorError(f"--run template cannot be split into arguments: {error}") from error
    if not words:
        raise AdvisorError("--run template is empty")
    # A switch placeholder left empty ({expert_parallel_flag} off) adds no argument, not an empty one;
    # a multi-argument one is already quoted for a shell (shlex.join) and split into arguments otherwise.
    quoted = {name: value if name in MULTI_ARGUMENT_PLACEHOLDERS else shlex.quote(value) if value else ""
              for name, value in values.items()}
    shell = Path(words[0]).name in SHELLS
    argv = []
    for position, word in enumerate(words):
        script = shell and position > 0 and words[position - 1] == "-c"
        alone = word[1:-1] if word.startswith("{") and word.endswith("}") else None
        if not script and alone in MULTI_ARGUMENT_PLACEHOLDERS:
            argv += shlex.split(values[alone])
            continue
        try:
            filled = word.format_map(quoted if script else values)
        except (ValueError, KeyError, IndexError, AttributeError) as error:
            raise AdvisorError(f"--run template: cannot fill '{word}' ({error})") from error
        if filled or not word:
            argv.append(filled)
    return argv


def run_fingerprint(request: TuneRequest, template: str | None) -> dict[str, Any]:
    """What an attempt's outcome depends on beyond its candidate: the command template, the server
    settings and slim's version. A recorded failure is trusted only under an equal fingerprint."""
    return {"template": template, "mode": request.mode, "tensor_parallel": request.tensor_parallel,
            **({"tensor_parallel_sizes": list(request.layout_sizes)} if request.across_layouts else {}),
            **({"data_parallel_sizes": sorted(set(request.data_parallel_sizes))} if request.data_parallel_sizes
               else {}),
            **({"quantization": request.quantization} if request.quantization is not None else {}),
            **({"kv_cache_dtype": request.kv_cache_dtype} if request.kv_cache_dtype is not None else {}),
            "num_prompts": request.num_prompts, "server_max_num_seqs": max(request.candidate_caps),
            "hardware": request.hardware, "slim_version": __version__}


@dataclass(frozen=True)
class Attempt:
    """One run of the loop as the ledger records it; `reason` says why it gave nothing usable, and
    an `interrupted` attempt (Ctrl-C) says nothing about its candidate."""

    workload: str
    max_num_seqs: float
    folder: str
    exit_code: int
    usable: bool
    gpu_seconds: float
    fingerprint: dict[str, Any] | None = None
    reason: str = ""
    interrupted: bool = False

    def to_json(self) -> str:
        """One ledger line; the cap as the integer ``--max-num-seqs`` takes."""
        return json.dumps({**asdict(self), "max_num_seqs": int(round(self.max_num_seqs))})

    @property
    def failed(self) -> bool:
        return not self.usable and not self.interrupted


def read_attempts(results_folder: Path) -> list[Attempt]:
    """Every attempt recorded in the results folder's ledger (a line that cannot be read is skipped)."""
    path = results_folder / LEDGER
    if not path.is_file():
        return []
    attempts = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
            fingerprint = entry.get("fingerprint")
            attempts.append(Attempt(str(entry["workload"]), float(entry["max_num_seqs"]), str(entry["folder"]),
                                    int(entry["exit_code"]), bool(entry["usable"]), float(entry["gpu_seconds"]),
                                    fingerprint if isinstance(fingerprint, dict) else None,
                                    str(entry.get("reason") or ""), bool(entry.get("interrupted", False))))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return attempts


def _same_run(recorded: dict[str, Any] | None, current: dict[str, Any]) -> bool:
    if recorded is None:
        return False
    if current["template"] is None:   # planning: whichever template ran, under the same settings
        return {**recorded, "template": None} == current
    return recorded == current


def failure_reason(attempt: Attempt) -> str:
    """Why an attempt gave no usable run, as recorded (an older ledger's line: its exit code)."""
    return attempt.reason or f"exit code {attempt.exit_code}"


def mark_failed_attempts(plan: TunePlan, template: str | None = None,
                         retry_failed: bool = False) -> list[Attempt]:
    """Record the ledger's trusted failures in the session (their candidates are not proposed
    again; module docstring) and return the failures not trusted, whose candidates may run again."""
    session = plan.session
    current = run_fingerprint(plan.request, template)
    untrusted = []
    for attempt in read_attempts(plan.request.results_folder):
        if not attempt.failed:
            continue
        rows = [int(index) for index in session.candidates.index[
            (session.candidates["workload"] == attempt.workload)
            & (session.candidates[col.MAX_NUM_SEQS] == attempt.max_num_seqs)] if int(index) not in session.measurements]
        if not rows:
            continue
        if retry_failed or not _same_run(attempt.fingerprint, current):
            untrusted.append(attempt)
            continue
        for index in rows:
            session.record(index, None)
            plan.failure_reasons[index] = failure_reason(attempt)
    return untrusted


def stop_process_group(process: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """Stop a run started in its own process group, with every process it started: SIGTERM to the
    group, then after `grace_s` (or once the leader is gone) SIGKILL to whatever is left."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sent)
        except ProcessLookupError:
            break
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            continue
    process.wait()


def execute(argv: list[str], folder: Path, timeout_s: float | None = None) -> tuple[int, float]:
    """Run one benchmark without a shell, in a process group of its own, logging its command, exit
    code and output in `folder`; ``(exit code, wall seconds)``. A run past `timeout_s` is exit code
    124. On Ctrl-C the run's group is stopped, its log says so, and `KeyboardInterrupt` propagates.

    Raises `CannotStartError` naming the program where it cannot be started (logged as exit code
    127): the template is broken, whatever the cap."""
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def log(code: int | str) -> None:
        (folder / "command.log").write_text(f"argv: {json.dumps(argv)}\nexit_code: {code}\n"
                                            f"wall_seconds: {time.monotonic() - started:.3f}\n")

    with open(folder / "stdout.log", "wb") as stdout, open(folder / "stderr.log", "wb") as stderr:
        try:
            process = subprocess.Popen(argv, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, shell=False,
                                       start_new_session=True)
        except (FileNotFoundError, PermissionError) as error:
            stderr.write(f"cannot start {argv[0]}: {error}\n".encode())
            log(EXIT_CANNOT_START)
            raise CannotStartError(f"--run template's program '{argv[0]}' cannot be started "
                                   f"({error.strerror.lower()}): install it, or name it by its path") from error
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_process_group(process)
            stderr.write(f"timed out after {timeout_s} s\n".encode())
            code = EXIT_TIMED_OUT
        except BaseException:
            stop_process_group(process)
            stderr.write(b"interrupted: the run's process group was stopped\n")
            log("interrupted")
            raise
    log(code)
    return code, time.monotonic() - started


def ingest_run(plan: TunePlan, folder: Path, layout: Layout | None = None) -> tuple[Measurement | None, str]:
    """The usable run a benchmark wrote into `folder`, as a measurement (its GPU time its duration
    times its server's GPUs, ``t x d``), or None and why there is none (the cleaning report's status
    and reason, as `slim check` names them; where `layout` is given, a result that records another
    tensor- or data-parallel size)."""
    request = plan.request
    from slim.specs.hardware import load_hardware_with_shipped

    options = trace_options(load_hardware_with_shipped(request.hardware_file), request.hardware,
                            request.table_columns)
    try:
        runs = usable_runs(folder, plan.catalog, options, hardware=request.hardware)
    except NoUsableRunsError as error:
        return None, "; ".join(f"{run['status']}: {run['reason']}" for run in error.runs) or str(error)
    except TraceFormatError:
        return None, "the benchmark exited 0 but wrote no result file"
    if not len(runs):
        return None, "no usable run"
    recorded = sorted(set(zip(layout_sizes(runs), expert_parallel_enabled(runs).tolist())))
    if layout is not None and recorded != [((layout.tensor_parallel, layout.ranks), layout.expert_parallel)]:
        # A run at another layout than asked would count as another layout's, and a rerun would not find it.
        found = ", ".join(Layout.of_sizes(t, d, experts).label for (t, d), experts in recorded)
        return None, (f"the result records {found}, not {layout.label}: record it (--metadata "
                      "tensor_parallel_size={tensor_parallel_size} data_parallel_size={data_parallel_size} "
                      "enable_expert_parallel={enable_expert_parallel}) and start the server at it "
                      "({expert_parallel_flag})")
    return measurement_of_runs(runs, request.slos), ""


def check_template(plan: TunePlan, template: str) -> None:
    """Fill `template` for the plan's first workload, so that a template error stops the loop
    before anything runs. Raises `AdvisorError` naming what is wrong."""
    label, spec = next(iter(plan.specs.items()))
    render_template(template, placeholders(plan.request, spec, min(plan.request.candidate_caps),
                                           model_flags=serving_flags(plan, label),
                                           served_model=served_model(plan, label)))


def _exit_reason(code: int, timeout_s: float | None, bound_s: float | None = None) -> str:
    if code == EXIT_TIMED_OUT:
        why = " (the bound's allowance for an extra run)" if bound_s is not None and timeout_s == bound_s else ""
        return f"exit code {code}: timed out after {timeout_s:g} s{why}"
    return f"exit code {code}"


def run_tuning_loop(plan: TunePlan, template: str, budget_runs: int | None = None,
                    budget_gpu_seconds: float | None = None, timeout_s: float | None = None,
                    on_step: Callable[[Proposal, Attempt], None] | None = None) -> tuple[list[LoopStep], str]:
    """`slim.tune.loop.run_loop` with each proposal run through `template` and ingested, every
    attempt written to the ledger with its fingerprint; the steps and why the loop stopped
    ("settled", "no proposal", "run budget", "GPU budget", or `MAX_FAILURES_IN_A_ROW` failed runs in
    a row). Mark the ledger's trusted failures in the plan first (`mark_failed_attempts`): the loop
    proposes every candidate the session does not hold as failed. On Ctrl-C the running attempt is
    recorded as interrupted and `KeyboardInterrupt` propagates; a template whose program cannot be
    started raises `CannotStartError` at its first run, recording no attempt (it says nothing about
    the cap)."""
    check_template(plan, template)
    request = plan.request
    results_folder = request.results_folder
    ledger = results_folder / LEDGER
    fingerprint = run_fingerprint(request, template)

    def record(attempt: Attempt) -> None:
        ledger.parent.mkdir(parents=True, exist_ok=True)
        with open(ledger, "a") as handle:
            handle.write(attempt.to_json() + "\n")

    def measure(proposal: Proposal) -> Measurement | Unusable:
        spec, cap = plan.specs[proposal.workload], int(proposal.max_num_seqs)
        layout = plan.layout_of(proposal.workload)
        gpus = layout.gpus      # a run is charged its duration times its server's GPUs
        values = placeholders(request, spec, cap, plan.session.runs_of(proposal.candidate), layout,
                              serving_flags(plan, proposal.workload), served_model(plan, proposal.workload))
        folder = Path(values["result_dir"])
        argv = render_template(template, values)
        relative_folder = str(folder.relative_to(results_folder))
        started = time.monotonic()
        limit_s = (None if proposal.limit_gpu_seconds is None
                   else max(proposal.limit_gpu_seconds / gpus, RUN_TIMEOUT_FLOOR_S))
        run_timeout_s = min((t for t in (timeout_s, limit_s) if t is not None), default=None)
        try:
            code, seconds = execute(argv, folder, run_timeout_s)
        except KeyboardInterrupt:
            record(Attempt(proposal.workload, float(cap), relative_folder, EXIT_INTERRUPTED, False,
                           (time.monotonic() - started) * gpus, fingerprint,
                           "interrupted (Ctrl-C)", interrupted=True))
            raise
        measurement, reason = (ingest_run(plan, folder, layout if request.across_layouts else None) if code == 0
                               else (None, _exit_reason(code, run_timeout_s, limit_s)))
        result = measurement if measurement is not None else Unusable(
            seconds * gpus,
            f"check the --run template (the last run's output: {folder / 'stderr.log'})")
        if measurement is None:
            plan.failure_reasons[proposal.candidate] = reason
        attempt = Attempt(proposal.workload, float(cap), relative_folder, code, measurement is not None,
                          result.gpu_seconds, fingerprint, reason)
        record(attempt)
        if on_step is not None:
            on_step(proposal, attempt)
        return result

    outcome = run_loop(plan.session, measure, budget_runs, budget_gpu_seconds, MAX_FAILURES_IN_A_ROW)
    return list(outcome.steps), outcome.stopped
