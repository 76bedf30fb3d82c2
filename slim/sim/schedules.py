"""The simulated schedule of every real run, simulated once and kept: the cache SIM calibrates on.

With every request sent at once (request rate ``inf``), which sequences run in which engine
step never depends on the cost constants the simulator fits (`FITTED_CONSTANTS`), only on the
configuration (model, IL, OL, ``--max-num-seqs``, number of prompts), the fixed scheduler and
memory constants and the seed. One simulation per run configuration therefore gives its
`ScheduleStats`, and from them, for *any* fitted constants and exactly (`slim.sim.linear_cost`):

* the benchmark duration, hence the total-token throughput ``completed (IL + OL) / duration``;
* the time-averaged running batch over the server's active window, which is what the
  pipeline measures as the mean batch size (``num_requests_running`` scraped while
  ``running + waiting > 0``): ``(R_test + R_main) / (D_test + D_main)``, with ``D`` the
  durations and ``R`` the running-weighted durations of the client's single test prompt
  and of the benchmark window;
* the preemptions (a property of the schedule alone).

An offline static batch (``benchmark_mode`` ``offline_static_batch``: vLLM's ``bench latency``,
B requests handed to the engine at once, no client test prompt) is simulated as such
(`ScheduleKey.static_batch`): ``num_prompts = max_num_seqs = B`` all submitted at t = 0, as
the modelled characterisation's offline runs are (`slim.paper.modelled_characterisation`), with
``max_model_len = IL + OL``; it has no test window (``RunSchedule.test`` is None, which counts
as zero time), so its duration is the batch's latency and its mean batch the time-averaged
running batch of that one window.

A run whose server's vLLM release is known (the runs table's optional ``vllm_version``) is
simulated under that release's scheduler, V0 or V1, and its token budget
(`slim.sim.vllm_defaults`); the version is part of its `ScheduleKey`, so schedules of one
configuration under two engines never mix. A run of unknown version keeps the constants' own
scheduler (V0 unless they say otherwise).

`simulate_schedules` builds a `ScheduleTable` from a runs table; it round-trips through a
parquet file (`ScheduleTable.to_frame` / `from_frame`), one row per run configuration; a table
written before versions were known (no ``vllm_version`` column) reads as of unknown version.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple

import numpy as np
import pandas as pd

from slim import columns as col
from slim.defaults import DEFAULT_NUM_PROMPTS
from slim.errors import ConfigError
from slim.sim.client_latency import keep_client_latencies
from slim.sim.constants import SimConstants
from slim.sim.engine import simulate_run
from slim.sim.metrics import ScheduleStats
from slim.sim.run_cache import SimulationCache
from slim.sim.vllm_defaults import scheduler_release
from slim.specs.architecture import ArchitectureCatalog
from slim.specs.hardware import Hardware

SCHEDULE_SEED = 0
"""Seed of every cached schedule (the step jitter), as `slim.sim.calibrate` has always used."""

_STATS_PARTS = ("main", "main_running", "test", "test_running")
_STATS_SCALARS = ("s_context", "s_pairs", "s_seqs", "w_steps", "n_steps")


class ScheduleKey(NamedTuple):
    """A run configuration as the simulator sees it (lengths rounded to whole tokens)."""

    model: str
    input_len: int
    output_len: int
    max_num_seqs: int
    num_prompts: int
    tensor_parallel: int = 1
    static_batch: bool = False
    """An offline static batch (module docstring): every request at t = 0, no test prompt."""
    vllm_version: str = ""
    """The server's vLLM release ("" where unknown: the constants' own scheduler)."""


_KEY_COLUMNS_REQUIRED = ScheduleKey._fields[:-2]
"""The key columns every schedules table has (``static_batch`` and ``vllm_version`` came later)."""


def is_static_batch(row: pd.Series) -> bool:
    """Whether a runs-table row is an offline static batch (`columns.BenchmarkMode`)."""
    return row.get(col.BENCHMARK_MODE) == col.BenchmarkMode.OFFLINE_STATIC_BATCH


def key_of_row(row: pd.Series) -> ScheduleKey:
    """The configuration of one row of a runs table (`slim.columns` names); a static batch of B
    requests is B prompts at ``max_num_seqs`` B."""
    prompts = row.get(col.NUM_PROMPTS)
    tensor_parallel = row.get(col.TENSOR_PARALLEL)
    static = is_static_batch(row)
    batch = int(row[col.MAX_NUM_SEQS])
    return ScheduleKey(str(row[col.MODEL]), int(round(float(row[col.INPUT_LEN_MEAN]))),
                       int(round(float(row[col.OUTPUT_LEN_MEAN]))), batch,
                       batch if static else int(prompts) if pd.notna(prompts) and prompts else DEFAULT_NUM_PROMPTS,
                       int(tensor_parallel) if pd.notna(tensor_parallel) and tensor_parallel else 1, static,
                       _version_of(row.get(col.VLLM_VERSION)))


def _version_of(value: object) -> str:
    """A runs table's ``vllm_version`` cell as a key field: the first release of its scheduler
    (`scheduler_release`), "" where absent, NaN, unreadable as a version or a release running the
    constants' own scheduler."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return ""
    try:
        return scheduler_release(str(value))
    except ConfigError:
        return ""


def keys_of_frame(frame: pd.DataFrame) -> list[ScheduleKey]:
    return [key_of_row(row) for _, row in frame.iterrows()]


@dataclass(frozen=True)
class RunSchedule:
    """One simulated run's schedule: its step statistics and what does not depend on time.

    ``main`` covers the benchmark window, ``test`` the client's single test prompt before it
    (both with their ``running_weighted`` companions); ``status`` is ``"ok"`` or the KV
    plan's failure code, in which case there are no statistics.
    """

    key: ScheduleKey
    status: str
    completed: int
    num_preemptions: int
    kv_capacity_tokens: float
    main: ScheduleStats | None
    test: ScheduleStats | None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def tokens_per_request(self) -> int:
        return self.key.input_len + self.key.output_len


def simulate_schedule(key: ScheduleKey, architectures: ArchitectureCatalog, hw: Hardware,
                      consts: SimConstants, seed: int = SCHEDULE_SEED,
                      cache: SimulationCache | None = None) -> RunSchedule:
    """Simulate one configuration and keep its statistics (the fitted fields of `consts`
    change only the discarded times, never the statistics); with a `cache`, its client latencies
    too, should SIM be asked for them."""
    arch = architectures[key.model]
    if key.static_batch:
        return _simulate_static_batch(key, arch, hw, consts, seed)
    version = key.vllm_version or None
    main = simulate_run(arch, hw, consts, key.input_len, key.output_len, key.max_num_seqs, key.num_prompts, seed,
                        key.tensor_parallel, record_stats=True, vllm_version=version)
    if seed == SCHEDULE_SEED and cache is not None:
        keep_client_latencies(cache, arch, hw, consts, key, main)
    if main.status != "ok" or main.stats is None:
        return RunSchedule(key, main.status, 0, 0, float(main.plan.kv_capacity_tokens), None, None)
    # The test prompt runs from step 0 on an idle server, exactly as a one-request window does.
    test = simulate_run(arch, hw, consts, key.input_len, key.output_len, key.max_num_seqs, 1, seed,
                        key.tensor_parallel, include_test_prompt=False, record_stats=True, vllm_version=version)
    return RunSchedule(key, "ok", main.completed, main.num_preemptions, float(main.plan.kv_capacity_tokens),
                       main.stats, test.stats)


def _simulate_static_batch(key: ScheduleKey, arch, hw: Hardware, consts: SimConstants, seed: int) -> RunSchedule:
    """One static batch: `key.num_prompts` requests submitted at once, no test prompt (no test window)."""
    run = simulate_run(arch, hw, consts, key.input_len, key.output_len, key.max_num_seqs, key.num_prompts, seed,
                       key.tensor_parallel, include_test_prompt=False, max_model_len=key.input_len + key.output_len,
                       record_stats=True, vllm_version=key.vllm_version or None)
    if run.status != "ok" or run.stats is None:
        return RunSchedule(key, run.status, 0, 0, float(run.plan.kv_capacity_tokens), None, None)
    return RunSchedule(key, "ok", run.completed, run.num_preemptions, float(run.plan.kv_capacity_tokens),
                       run.stats, None)


def _simulate_job(args: tuple) -> RunSchedule:
    return simulate_schedule(*args)


class ScheduleTable:
    """Cached schedules by `ScheduleKey`, and the constants they were simulated with (only
    their fixed fields, scheduler, memory and tensor parallelism, matter; `constants` is what
    a calibration on these schedules starts from and keeps)."""

    def __init__(self, schedules: Iterable[RunSchedule], constants: SimConstants):
        self.constants = constants
        self._by_key: dict[ScheduleKey, RunSchedule] = {}
        for schedule in schedules:
            self._by_key.setdefault(schedule.key, schedule)

    def __len__(self) -> int:
        return len(self._by_key)

    def __iter__(self) -> Iterator[RunSchedule]:
        return iter(self._by_key.values())

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def get(self, key: ScheduleKey) -> RunSchedule:
        try:
            return self._by_key[key]
        except KeyError:
            raise ConfigError(f"no cached simulator schedule for {key}; rebuild the schedules of this dataset "
                              "(rule sim_schedules) from a runs table that holds this run") from None

    def for_frame(self, frame: pd.DataFrame) -> list[RunSchedule]:
        """The schedule of every row of `frame`, in row order."""
        return [self.get(key) for key in keys_of_frame(frame)]

    # -- parquet round trip ---------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """One row per schedule (in key order): the key, status and counts, and per stats part
        (``main``, ``main_running``, ``test``, ``test_running``) its weight vectors and sums. The
        ``vllm_version`` column is written only where some schedule has a version, so a table of
        unknown versions has no such column."""
        records = []
        with_version = any(key.vllm_version for key in self._by_key)
        for key in sorted(self._by_key):
            schedule = self._by_key[key]
            fields = key._asdict()
            if not with_version:
                del fields["vllm_version"]
            record = {**fields, "status": schedule.status, "completed": schedule.completed,
                      col.NUM_PREEMPTIONS: schedule.num_preemptions,
                      col.KV_CAPACITY_TOKENS: schedule.kv_capacity_tokens}
            for part, stats in _parts(schedule):
                record[f"{part}_w_tokens"] = None if stats is None else stats.w_tokens.tolist()
                record[f"{part}_w_sampled"] = None if stats is None else stats.w_sampled.tolist()
                for name in _STATS_SCALARS:
                    record[f"{part}_{name}"] = np.nan if stats is None else float(getattr(stats, name))
            records.append(record)
        return pd.DataFrame.from_records(records)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, constants: SimConstants) -> "ScheduleTable":
        """Inverse of `to_frame`; `constants` are those the schedules were simulated with."""
        col.require_columns(frame, (*_KEY_COLUMNS_REQUIRED, "status", "completed", col.NUM_PREEMPTIONS),
                            "schedules table", ConfigError, fix="write it with ScheduleTable.to_frame")
        schedules = []
        for _, row in frame.iterrows():
            key = ScheduleKey(str(row["model"]), *(int(row[name]) for name in _KEY_COLUMNS_REQUIRED[1:]),
                              bool(row.get("static_batch", False)), _version_of(row.get("vllm_version")))
            stats = {part: _stats_of(row, part) for part in _STATS_PARTS}
            for part in ("main", "test"):
                if stats[part] is not None:
                    stats[part].running_weighted = stats[f"{part}_running"]
            schedules.append(RunSchedule(key, str(row["status"]), int(row["completed"]),
                                         int(row[col.NUM_PREEMPTIONS]), float(row[col.KV_CAPACITY_TOKENS]),
                                         stats["main"], stats["test"]))
        return cls(schedules, constants)


def _parts(schedule: RunSchedule) -> list[tuple[str, ScheduleStats | None]]:
    def running(stats: ScheduleStats | None) -> ScheduleStats | None:
        return None if stats is None else stats.running_weighted

    return [("main", schedule.main), ("main_running", running(schedule.main)),
            ("test", schedule.test), ("test_running", running(schedule.test))]


def _stats_of(row: pd.Series, part: str) -> ScheduleStats | None:
    tokens = row[f"{part}_w_tokens"]
    if tokens is None or (isinstance(tokens, float) and np.isnan(tokens)):
        return None
    scalars = {name: float(row[f"{part}_{name}"]) for name in _STATS_SCALARS}
    scalars["n_steps"] = int(scalars["n_steps"])
    return ScheduleStats(np.asarray(tokens, dtype=float), np.asarray(row[f"{part}_w_sampled"], dtype=float),
                         **scalars)


def simulate_schedules(keys: Iterable[ScheduleKey], architectures: ArchitectureCatalog, hw: Hardware,
                       consts: SimConstants, seed: int = SCHEDULE_SEED, workers: int = 1,
                       cache: SimulationCache | None = None) -> ScheduleTable:
    """Simulate every distinct configuration of `keys` once (`workers` processes; the result does not
    depend on them), reading from and keeping in `cache` where one is given (with one worker, the
    simulated runs' client latencies too)."""
    distinct = sorted(set(keys))
    kept = cache.schedules if cache is not None else {}
    every = [(key, architectures[key.model], hw, consts, seed) for key in distinct]
    missing = [i for i, job in enumerate(every) if job not in kept]
    jobs = [(distinct[i], architectures, hw, consts, seed) for i in missing]
    if workers <= 1 or len(jobs) < 2:
        done = [simulate_schedule(*job, cache=cache) for job in jobs]
    else:
        # Longest runs (many steps per request) first keeps the workers busy until the end.
        order = sorted(range(len(jobs)), key=lambda i: (-jobs[i][0].output_len / jobs[i][0].max_num_seqs, i))
        with ProcessPoolExecutor(max_workers=workers) as pool:
            by_order = dict(zip(order, pool.map(_simulate_job, [jobs[i] for i in order], chunksize=2)))
        done = [by_order[i] for i in range(len(jobs))]
    for i, schedule in zip(missing, done):
        kept[every[i]] = schedule
    return ScheduleTable((kept[job] for job in every), consts)


SIMULATED_STATUSES = ("ok", "preempted")
"""Runs whose measurements the simulator is calibrated and validated on (`slim.traces.clean`)."""


def schedules_of_runs(runs: pd.DataFrame, architectures: ArchitectureCatalog, hw: Hardware, consts: SimConstants,
                      workers: int = 1) -> ScheduleTable:
    """The schedule of every ok or preempted run of a runs table (``runs.parquet``)."""
    col.require_columns(runs, (col.STATUS, col.MODEL, col.INPUT_LEN_MEAN, col.OUTPUT_LEN_MEAN, col.MAX_NUM_SEQS),
                        "runs table", ConfigError)
    chosen = runs[runs[col.STATUS].isin(SIMULATED_STATUSES)]
    return simulate_schedules(keys_of_frame(chosen), architectures, hw, consts, workers=workers)


def read_schedules(path: str | Path, consts: SimConstants) -> ScheduleTable:
    """A `ScheduleTable` written with ``to_frame`` to parquet, simulated with `consts`."""
    try:
        frame = pd.read_parquet(path)
    except FileNotFoundError as error:
        raise ConfigError(f"simulator schedules not found: {path}; build them with rule sim_schedules") from error
    return ScheduleTable.from_frame(frame, consts)
