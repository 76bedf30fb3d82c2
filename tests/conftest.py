"""Shared test fixtures (the repository root on sys.path, the real public traces) and the two test
tiers: a test that requests the real traces is marked `traces`; a test that starts a subprocess
must be marked `integration`, or it fails saying so, so that `pytest -m "not integration"` stays
the fast tier."""

import importlib.util
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

SHARED_TRACES = REPO.parent / "shared" / "traces" / "vllm-h100-public"

LIBRARY_PROBES = frozenset({"fc-list", "uname", "ldconfig"})
"""Programs libraries start on their own (matplotlib's font cache, platform, ctypes.util): allowed in
every test, since no test asks for them."""

_refusing_subprocesses_for: list[str] = []   # the node id of the running test without `integration`
_popen_init = subprocess.Popen.__init__


def _program(args) -> str:
    first = args if isinstance(args, (str, bytes, os.PathLike)) else next(iter(args), "")
    text = os.fsdecode(first)
    return Path(text.split()[0] if isinstance(args, (str, bytes)) else text).name


def _guarded_popen_init(self, args, *rest, **kwargs):
    if _refusing_subprocesses_for and _program(args) not in LIBRARY_PROBES:
        pytest.fail(f"{_refusing_subprocesses_for[0]} starts a subprocess ({_program(args)}) but is not marked "
                    "integration: add @pytest.mark.integration (the fast tier, -m 'not integration', runs none)",
                    pytrace=False)
    _popen_init(self, args, *rest, **kwargs)


def pytest_configure(config):
    subprocess.Popen.__init__ = _guarded_popen_init


def pytest_unconfigure(config):
    subprocess.Popen.__init__ = _popen_init


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "shared_traces_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.traces)


@contextmanager
def _subprocesses_refused_unless_integration(item):
    refuse = item.get_closest_marker("integration") is None
    if refuse:
        _refusing_subprocesses_for.append(item.nodeid)
    try:
        yield
    finally:
        if refuse:
            _refusing_subprocesses_for.pop()


@pytest.fixture(autouse=True)
def _fake_benchmarks_outlive_their_start_up(monkeypatch):
    """The fake benchmark's simulated runs last well under a second of GPU time, while its interpreter
    alone takes about a second to start on a loaded machine: a run's time limit (its allowance, at
    least `RUN_TIMEOUT_FLOOR_S`) would then stop it depending on the machine's load."""
    from slim.tune import runner

    monkeypatch.setattr(runner, "RUN_TIMEOUT_FLOOR_S", 60.0)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _subprocesses_refused_unless_integration(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    with _subprocesses_refused_unless_integration(item):
        return (yield)


@pytest.fixture(scope="session")
def shared_traces_dir() -> Path:
    """The real public traces, read in place from ../shared (never copied into the repo).

    Skipped with a reason when absent on a developer machine; in CI (env CI set) their
    absence is a failure, because the headline checks run on them.
    """
    if not SHARED_TRACES.is_dir():
        message = f"real traces not found at {SHARED_TRACES} (they live in ../shared/traces beside the checkout)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return SHARED_TRACES


def load_data_generator(name: str) -> ModuleType:
    """A generator script of tests/data (``make_layouts``, ...) as a module, registered in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, REPO / "tests" / "data" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


WORKFLOW_ITEMS = ("Snakefile", "workflow", "config", "profiles", "README.md", "environment.yml")
"""What a copy of the workflow needs besides the installed package (whose catalogs it reads)."""


def copy_workflow(workdir: Path) -> Path:
    """The workflow and its config copied into `workdir` (created), so that a test can run Snakemake
    there; the code and the model and GPU catalogs stay those of the installed package."""
    workdir.mkdir(parents=True, exist_ok=True)
    for item in WORKFLOW_ITEMS:
        source = REPO / item
        (shutil.copytree if source.is_dir() else shutil.copy)(source, workdir / item)
    return workdir
@pytest.fixture(scope="session")
def catalog():
    """The model catalog shipped with the package."""
    from slim.specs.architecture import load_architectures

    return load_architectures()


@pytest.fixture(scope="session")
def h100():
    """The H100 64 GB of the public traces, from the packaged GPU catalog."""
    from slim.specs.hardware import load_hardware

    return load_hardware()["h100-64gb"]


@pytest.fixture(scope="session")
def public_clean(shared_traces_dir):
    """The cleaned table of the real output-length traces (h100-public)."""
    from slim.specs.architecture import load_architectures
    from slim.traces.clean import clean_runs
    from slim.traces.ingest import ingest_traces

    runs = ingest_traces(shared_traces_dir / "output_length", "h100-public", load_architectures())
    return runs, clean_runs(runs)[0]


@pytest.fixture(scope="session")
def public_schedules(public_clean):
    """The simulator's schedule of every ok or preempted real run, simulated once per session
    (what rule sim_schedules caches for the pipeline)."""
    from slim.sim.constants import load_sim_constants
    from slim.sim.schedules import schedules_of_runs
    from slim.specs.architecture import load_architectures
    from slim.specs.hardware import load_hardware

    runs, _ = public_clean
    return schedules_of_runs(runs, load_architectures(), load_hardware()["h100-64gb"],
                             load_sim_constants(REPO / "slim/sim/h100-64gb-sim.yaml"),
                             workers=min(2, os.cpu_count() or 1))
