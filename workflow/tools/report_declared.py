"""What the workflow declares for its report: the files of a target's DAG flagged with `report(...)`,
as Snakemake itself loads the workflow and resolves the DAG (its Python API), built or not."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from report_data import ReportCheckError


@dataclass(frozen=True, order=True)
class ReportFlag:
    """One file of the DAG flagged with `report(...)`: its path, the rule of the job that names it and,
    for a directory, how the report picks its files (`htmlindex`, or `patterns` whose wildcards are
    read off the files on disk, plus the job's own `wildcards`)."""

    path: str
    rule: str
    is_directory: bool = False
    htmlindex: str | None = None
    patterns: tuple[str, ...] = ()
    wildcards: Mapping[str, str] = field(default_factory=dict, compare=False)


def flagged_report_files(workdir: Path, target: str = "all") -> list[ReportFlag]:
    """Every file flagged with `report(...)` among the outputs and inputs of the jobs of `target`'s
    DAG, built or not, as Snakemake's own report (`snakemake.report.auto_report`) collects them.

    The workflow is loaded with Snakemake's Python API (`snakemake.api.SnakemakeApi`), so the rule
    files' Python (loops, f-strings, variables, `directory(...)`) is evaluated, never parsed here.
    Raises ReportCheckError when Snakemake cannot load the workflow or build the DAG."""
    from snakemake.api import SnakemakeApi
    from snakemake.io import get_flag_value, is_flagged
    from snakemake.settings.types import DAGSettings, OutputSettings, Quietness, ResourceSettings

    workdir = Path(workdir).resolve()
    flags: set[ReportFlag] = set()
    # Snakemake changes into the working directory and changes back only when its workflow object
    # is garbage-collected: restore the caller's directory here, whatever happens.
    with contextlib.chdir(workdir), SnakemakeApi(OutputSettings(quiet={Quietness.ALL},
                                                                enable_file_logging=False)) as api:
        try:
            workflow_api = api.workflow(resource_settings=ResourceSettings(cores=1),
                                        snakefile=workdir / "Snakefile", workdir=workdir)
            workflow_api.dag(DAGSettings(targets={target}))
            # The public DAG API only prints (`summary`, `printdag`); the jobs themselves are reached
            # the way its own `summary` and `create_report` reach them: prepare the DAG (no lock, an
            # incomplete file is fine) and build it.
            workflow = workflow_api._workflow
            workflow._prepare_dag(forceall=False, ignore_incomplete=True, lock_warn_only=True, nolock=True)
            workflow._build_dag()
        # Loading runs the Snakefile's Python, which may raise anything (NameError, SyntaxError, ...)
        # besides Snakemake's own errors; Snakemake's command line catches them all alike.
        except Exception as error:
            raise ReportCheckError(f"Snakemake cannot resolve the DAG of {target!r} in {workdir}: "
                                   f"{type(error).__name__}: {error}") from error
        for job in workflow.dag.jobs:
            for file in (*job.output, *job.input):
                if is_flagged(file, "report"):
                    report = get_flag_value(file, "report")
                    flags.add(ReportFlag(path=str(file), rule=job.rule.name, is_directory=bool(file.is_directory),
                                         htmlindex=report.htmlindex, patterns=tuple(report.patterns or ()),
                                         wildcards=dict(job.wildcards_dict)))
    return sorted(flags)


def report_paths(flag: ReportFlag, workdir: Path) -> list[str]:
    """The paths under which the report embeds a flagged file, relative to `workdir`: the file itself;
    for a directory its `htmlindex` file, or every file on disk matching one of its `patterns`
    (Snakemake's `glob_wildcards`, as the report reads them). A directory whose patterns match
    nothing (not built yet) yields the patterns themselves, so the check names them as missing."""
    if not flag.is_directory:
        return [flag.path]
    if flag.htmlindex is not None:
        return [str(Path(flag.path) / flag.htmlindex)]
    if not flag.patterns:
        raise ReportCheckError(f"{flag.path} (rule {flag.rule}) is a directory flagged with report(...) without "
                               "patterns=[...] or htmlindex=...: Snakemake cannot build the report")
    from snakemake.io import apply_wildcards, glob_wildcards

    paths = []
    for pattern in flag.patterns:
        relative = str(Path(flag.path) / pattern)
        found = glob_wildcards(str(Path(workdir) / relative))._asdict()
        matches = [dict(zip(found, values)) for values in zip(*found.values())] if found else []
        paths += [apply_wildcards(relative, {**values, **flag.wildcards}) for values in matches] or [relative]
    return sorted(set(paths))


def expected_report_artefacts(workdir: Path, target: str = "all",
                              flags: Iterable[ReportFlag] | None = None) -> list[str]:
    """The files the report must embed, sorted: every file of `target`'s DAG, built or not, flagged with
    `report(...)` (`flagged_report_files` unless `flags` are given), a directory as the files the
    report takes from it."""
    flags = list(flags) if flags is not None else flagged_report_files(workdir, target)
    if not flags:
        raise ReportCheckError(f"no file of the DAG of {target!r} in {workdir} is flagged with report(...)")
    return sorted({path for flag in flags for path in report_paths(flag, workdir)})
