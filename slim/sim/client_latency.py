"""What a benchmark's client measures of a simulated run: each request's TTFT, TPOT and E2EL and the
distribution of the gaps between tokens, under a client that sends every request at once or keeps a
number of them in flight (`slim.sim.result.SimResult.client_latencies_ms`).

A simulation is deterministic, so where the caller holds a `slim.sim.run_cache.SimulationCache` a
configuration asked for again (a tuning session predicts the same candidates as its schedules, the
replay the same ones for every seed) is read from it; `slim.sim.schedules` keeps the client
latencies of the runs it simulates in the cache it is given."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from slim.sim.run_cache import SimulationCache

if TYPE_CHECKING:
    from slim.sim.constants import SimConstants
    from slim.sim.result import SimResult
    from slim.specs.architecture import Architecture
    from slim.specs.hardware import Hardware

ClientLatencies = tuple[dict[str, object], int, float]
"""Per quantity (``ttft``, ``tpot``, ``e2el``: per request, ms; ``itl``: a `GapDistribution`), the
completed requests and the run's duration (s)."""



@dataclass(frozen=True)
class GapDistribution:
    """The gaps between tokens of a run, kept as their mean and their quantiles at every 0.1 %
    (a mean, a median or a percentile is read from them, interpolated)."""

    mean_ms: float
    quantiles_ms: np.ndarray

    LEVELS = np.linspace(0.0, 100.0, 1001)

    @classmethod
    def of(cls, values_ms: np.ndarray) -> GapDistribution:
        values = np.sort(np.asarray(values_ms, dtype=float))
        if not len(values):
            return cls(float("nan"), np.full(len(cls.LEVELS), np.nan))
        # np.percentile's linear rule, read off the sorted values once for every level.
        return cls(float(np.mean(values)), np.interp(cls.LEVELS / 100.0 * (len(values) - 1), np.arange(len(values)),
                                                      values))

    def __len__(self) -> int:
        return len(self.quantiles_ms)

    def percentile(self, level: float) -> float:
        return float(np.interp(level, self.LEVELS, self.quantiles_ms))


def _run_key(arch: Architecture, hardware: Hardware, constants: SimConstants, key: tuple) -> tuple:
    """A run's key: its configuration (a `slim.sim.schedules.ScheduleKey`) and what it was simulated on."""
    return (arch, hardware, constants, key)


def keep_client_latencies(cache: SimulationCache, arch: Architecture, hardware: Hardware, constants: SimConstants,
                          key: tuple, result: SimResult) -> None:
    """Keep a simulated run's client latencies in `cache`: every request at once, and a client
    keeping the run's cap in flight."""
    _store(cache, _run_key(arch, hardware, constants, key), result, key.max_num_seqs)


def _store(cache: SimulationCache, run_key: tuple, result: SimResult, concurrency: int | None) -> None:
    kept = cache.client_latencies
    if result.status != "ok" or result.completed == 0:
        kept[(*run_key, None)] = kept[(*run_key, concurrency)] = None
        return
    gaps = GapDistribution.of(result.client_latencies_ms(None)["itl"])   # the gaps' distribution is all one needs
    for client in dict.fromkeys((None, concurrency)):
        latencies: dict[str, object] = dict(result.client_latencies_ms(client))
        latencies["itl"] = gaps
        kept[(*run_key, client)] = (latencies, result.completed, result.duration_s)


def client_latencies(arch: Architecture, hardware: Hardware, constants: SimConstants, key: tuple,
                     concurrency: int | None, cache: SimulationCache | None = None) -> ClientLatencies | None:
    """The client latencies of `key` (a `slim.sim.schedules.ScheduleKey`) simulated at `constants` under
    a client of `concurrency` requests in flight (None: every request at once), read from `cache` where
    it holds them; None where the simulated server cannot start or completes nothing."""
    from slim.sim.engine import simulate_run

    cache = cache if cache is not None else SimulationCache()
    cache_key = (*_run_key(arch, hardware, constants, key), concurrency)
    if cache_key not in cache.client_latencies:
        result = simulate_run(arch, hardware, constants, key.input_len, key.output_len, key.max_num_seqs,
                              key.num_prompts, 0, key.tensor_parallel, include_test_prompt=not key.static_batch,
                              max_model_len=key.input_len + key.output_len if key.static_batch else None,
                              vllm_version=key.vllm_version or None)
        _store(cache, _run_key(arch, hardware, constants, key), result, concurrency)
    return cache.client_latencies[cache_key]
