"""The tuning loop with a real benchmark: each proposed run through a command template, its result
read back with the project's ingest, until every decision is settled or a budget is spent.

The template is split like a shell would (`shlex.split`) but run without one, as an argument list;
its ``{placeholders}`` (`slim.advisor.tune_plan.placeholders`) are filled with values the tool
chose (caps, lengths, the model as the user named it, paths under the traces folder), never with
anything read from a trace file. Where the template itself asks for a shell (``sh -c '...'``), the
values substituted into the shell's script are quoted with `shlex.quote`.

Every attempt is written beside its result: ``command.log`` (the argument list and exit code),
``stdout.log`` and ``stderr.log`` in the run's folder, and one line in
``<traces>/slim-tune/attempts.jsonl``. A rerun resumes from what is there: measured runs are
ingested again as facts, and a candidate whose attempt failed or gave no usable run is not proposed
again.
"""

from __future__ import annotations

import json
import shlex
import string
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from slim import columns as col
from slim.advisor.training_runs import trace_options, usable_runs
from slim.advisor.tune import LoopStep, Measurement, Proposal, Unusable, run_loop
from slim.advisor.tune_plan import TUNE_FOLDER, TunePlan, measurement_of_runs, placeholders
from slim.errors import AdvisorError, NoUsableRunsError, TraceFormatError

LEDGER = "attempts.jsonl"
MAX_FAILURES_IN_A_ROW = 3
"""The loop stops after this many runs in a row gave nothing usable: the template is likely broken."""
SHELLS = {"sh", "bash", "dash", "zsh", "ksh"}


def template_fields(template: str) -> set[str]:
    """The placeholder names a template uses."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


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
    quoted = {name: shlex.quote(value) for name, value in values.items()}
    shell = Path(words[0]).name in SHELLS
    argv = []
    for position, word in enumerate(words):
        script = shell and position > 0 and words[position - 1] == "-c"
        argv.append(word.format_map(quoted if script else values))
    return argv


@dataclass(frozen=True)
class Attempt:
    workload: str
    max_num_seqs: float
    folder: str
    exit_code: int
    usable: bool
    gpu_seconds: float

    def to_json(self) -> str:
        return json.dumps({"workload": self.workload, "max_num_seqs": self.max_num_seqs, "folder": self.folder,
                           "exit_code": self.exit_code, "usable": self.usable, "gpu_seconds": self.gpu_seconds})


def read_attempts(traces: Path) -> list[Attempt]:
    """Every attempt recorded under the traces folder (a line that cannot be read is skipped)."""
    path = traces / TUNE_FOLDER / LEDGER
    if not path.is_file():
        return []
    attempts = []
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
            attempts.append(Attempt(str(entry["workload"]), float(entry["max_num_seqs"]), str(entry["folder"]),
                                    int(entry["exit_code"]), bool(entry["usable"]), float(entry["gpu_seconds"])))
        except (ValueError, KeyError, TypeError):
            continue
    return attempts


def mark_failed_attempts(plan: TunePlan) -> None:
    """Candidates whose recorded attempt gave no usable run are not proposed again."""
    session = plan.session
    for attempt in read_attempts(plan.request.traces):
        if attempt.usable:
            continue
        rows = session.candidates.index[(session.candidates["workload"] == attempt.workload)
                                        & (session.candidates[col.MAX_NUM_SEQS] == attempt.max_num_seqs)]
        for index in rows:
            if int(index) not in session.measurements:
                session.record(int(index), None)


def execute(argv: list[str], folder: Path, timeout_s: float | None = None) -> tuple[int, float]:
    """Run one benchmark without a shell, logging its command, exit code and output in `folder`;
    ``(exit code, wall seconds)``; a program that cannot start is exit code 127."""
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with open(folder / "stdout.log", "wb") as stdout, open(folder / "stderr.log", "wb") as stderr:
        try:
            code = subprocess.run(argv, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, shell=False,
                                  timeout=timeout_s, check=False).returncode
        except FileNotFoundError as error:
            stderr.write(f"cannot start {argv[0]}: {error}\n".encode())
            code = 127
        except subprocess.TimeoutExpired:
            stderr.write(f"timed out after {timeout_s} s\n".encode())
            code = 124
    seconds = time.monotonic() - started
    (folder / "command.log").write_text(f"argv: {json.dumps(argv)}\nexit_code: {code}\nwall_seconds: {seconds:.3f}\n")
    return code, seconds


def ingest_run(plan: TunePlan, folder: Path):
    """The usable run a benchmark wrote into `folder`, as a measurement; None if there is none."""
    request = plan.request
    from slim.specs.hardware import load_hardware

    options = trace_options(load_hardware(request.hardware_file), request.hardware, request.table_columns)
    try:
        runs = usable_runs(folder, plan.catalog, options, hardware=request.hardware)
    except (NoUsableRunsError, TraceFormatError):
        return None
    return measurement_of_runs(runs) if len(runs) else None


def run_tuning_loop(plan: TunePlan, template: str, budget_runs: int | None = None,
                    budget_gpu_seconds: float | None = None, timeout_s: float | None = None,
                    on_step: Callable[[Proposal, Attempt], None] | None = None) -> tuple[list[LoopStep], str]:
    """`slim.advisor.tune.run_loop` with each proposal run through `template` and ingested, every
    attempt written to the ledger; the steps and why the loop stopped ("settled", "no proposal",
    "run budget", "GPU budget", or `MAX_FAILURES_IN_A_ROW` failed runs in a row)."""
    mark_failed_attempts(plan)
    request = plan.request
    ledger = request.traces / TUNE_FOLDER / LEDGER

    def measure(proposal: Proposal) -> Measurement | Unusable:
        spec, cap = plan.specs[proposal.workload], int(proposal.max_num_seqs)
        values = placeholders(request, spec, cap)
        folder = Path(values["result_dir"])
        code, seconds = execute(render_template(template, values), folder, timeout_s)
        measurement = ingest_run(plan, folder) if code == 0 else None
        result = measurement if measurement is not None else Unusable(
            seconds * request.tensor_parallel,
            f"check the --run template (the last run's output: {folder / 'stderr.log'})")
        attempt = Attempt(proposal.workload, float(cap), str(folder.relative_to(request.traces)), code,
                          measurement is not None, result.gpu_seconds)
        ledger.parent.mkdir(parents=True, exist_ok=True)
        with open(ledger, "a") as handle:
            handle.write(attempt.to_json() + "\n")
        if on_step is not None:
            on_step(proposal, attempt)
        return result

    outcome = run_loop(plan.session, measure, budget_runs, budget_gpu_seconds, MAX_FAILURES_IN_A_ROW)
    return list(outcome.steps), outcome.stopped
