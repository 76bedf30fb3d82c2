"""A data-parallel server predicted from its ranks: one rule for every predictor whose prediction is
one engine's (SIM, SLIM, SLIM at SIM's batch), so `slim tune`'s prior and `slim advise` predict a
layout ``TP t x DP d`` alike.

vLLM serves ``--data-parallel-size d`` as ``d`` engine ranks of ``t`` GPUs each, every rank
scheduling a batch of its own, and its load balancer spreads the server's ``B`` requests in flight
over them: some ranks hold ``ceil(B / d)``, the others ``floor(B / d)``
(`slim.specs.data_parallel.rank_shares`). A configuration at ``d > 1`` is predicted as its ranks
(`rank_rows`: one row per share, at data-parallel size 1, with `columns.MAX_NUM_SEQS` and
`columns.MAX_CONCURRENCY` the rank's share, the prompts and a measured mean batch in proportion to
it),
and the server is their sum (`server_prediction`, `server_latencies`):

- throughput, goodput and the mean running batch: the sum over the ranks;
- a mean latency (the in-batch E2E, ``mean_*`` statistics): a rank's own where every rank holds the
  same share, else the ranks' mean weighted by the requests each completes per second (its
  throughput: every request has the same tokens);
- a median or a percentile: the worse rank's (an upper bound of the server's; the shares differ by
  one request, so the two ranks differ little);
- the configuration is refused where any of its ranks is, determined where all are.

A configuration at data-parallel size 1, NaN or not given is predicted as it is.

A mixture-of-experts model is the exception (`moe_in_lockstep`): vLLM shards its MoE layers over all
``t x d`` GPUs of the server, whole experts with ``--enable-expert-parallel`` and every expert's
weights without (`FusedMoEParallelConfig.make` in ``vllm/model_executor/layers/fused_moe/config.py``
flattens the tensor-parallel group across the data-parallel ranks), so every rank takes part in every
MoE layer and the ranks step together. Such a server is predicted as one engine carrying all ``B``
requests, as it was measured: NVIDIA's MiniMax-M2.5 runs at TP 4 x DP 4 show the TPOT and throughput
of TP 4 at the same requests in flight, not at a rank's share (`slim.paper.beyond_paper` simulates
those runs so); split into ranks, SIM's prior of them was off by 93% in throughput against 12%.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import pandas as pd

from slim import columns as col
from slim.predictors.contract import E2E, GOODPUT, THROUGHPUT, Interval, Prediction
from slim.specs.data_parallel import parallel_sizes, rank_shares

if TYPE_CHECKING:
    from slim.specs.architecture import ArchitectureCatalog
    from slim.specs.slo import SloMetric

Lockstep = Callable[[str], bool]
"""Whether a model's data-parallel ranks step together (one engine), by the model's catalog name."""


def moe_in_lockstep(catalog: ArchitectureCatalog) -> Lockstep:
    """A mixture-of-experts model of `catalog` steps its ranks together (module docstring)."""
    return lambda model: bool(catalog.routes_experts(model))


def data_parallel_sizes(configs: pd.DataFrame) -> np.ndarray:
    """Each configuration's data-parallel size: 1 where not given, NaN or below 1."""
    return parallel_sizes(configs, col.DATA_PARALLEL)


def _in_lockstep(frame: pd.DataFrame, lockstep: Lockstep | None) -> np.ndarray:
    """Per row of `frame`, whether its model's data-parallel ranks step together (False without `lockstep`)."""
    if lockstep is None or not len(frame):
        return np.zeros(len(frame), dtype=bool)
    return np.array([bool(lockstep(str(model))) for model in frame[col.MODEL]], dtype=bool)


def one_engine_runs(runs: pd.DataFrame, lockstep: Lockstep | None = None) -> np.ndarray:
    """Which `runs` measured one engine, so a predictor can be fitted on them as they are: those at
    data-parallel size 1, and those whose ranks step together (`lockstep`). A dense model's
    data-parallel run measured its ranks' sum, and no run records each rank's share of it."""
    return (data_parallel_sizes(runs) == 1) | _in_lockstep(runs, lockstep)


@dataclass(frozen=True)
class RankRows:
    """The ranks of a frame of configurations: `frame` has one row per configuration at data-parallel
    size 1 (as it is) and one per share of each other configuration (`owner`: the configuration's
    position; `ranks`: how many of its ranks hold that share; `split`: per configuration, whether it
    is predicted from its ranks)."""

    frame: pd.DataFrame
    owner: np.ndarray
    ranks: np.ndarray
    split: np.ndarray

    @property
    def configurations(self) -> int:
        return len(self.split)

    @property
    def first(self) -> np.ndarray:
        """Each configuration's first row of `frame`."""
        return np.searchsorted(self.owner, np.arange(self.configurations))

    @property
    def mixed(self) -> np.ndarray:
        """Per configuration: its ranks hold two shares (the cap is not a multiple of the size)."""
        return np.bincount(self.owner, minlength=self.configurations) > 1

    def total(self, values: np.ndarray) -> np.ndarray:
        """The server's sum over its ranks of a per-rank rate (throughput, goodput, running batch)."""
        values = np.asarray(values, dtype=float)
        summed = np.bincount(self.owner, weights=self.ranks * values, minlength=self.configurations)
        return np.where(self.split, summed, values[self.first])

    def mean(self, values: np.ndarray, throughput: np.ndarray | None) -> np.ndarray:
        """The server's mean of a per-request mean latency: a rank's own where the ranks hold one share,
        else weighted by the requests each completes per second (`throughput`, same tokens each)."""
        values = np.asarray(values, dtype=float)
        out = values[self.first].copy()
        if self.mixed.any():
            weights = self.ranks * np.asarray(throughput, dtype=float)
            with np.errstate(divide="ignore", invalid="ignore"):
                weighted = (np.bincount(self.owner, weights=weights * values, minlength=self.configurations)
                            / np.bincount(self.owner, weights=weights, minlength=self.configurations))
            out[self.mixed] = weighted[self.mixed]
        return out

    def worst(self, values: np.ndarray) -> np.ndarray:
        """The worse rank's value of a latency statistic (NaN where any rank's is)."""
        values = np.asarray(values, dtype=float)
        out = values[self.first].copy()
        with np.errstate(invalid="ignore"):
            np.maximum.at(out, self.owner, values)
        return out

    def any(self, flags: np.ndarray) -> np.ndarray:
        out = np.zeros(self.configurations, dtype=bool)
        np.logical_or.at(out, self.owner, np.asarray(flags, dtype=bool))
        return out

    def all(self, flags: np.ndarray) -> np.ndarray:
        out = np.ones(self.configurations, dtype=bool)
        np.logical_and.at(out, self.owner, np.asarray(flags, dtype=bool))
        return out


def rank_rows(configs: pd.DataFrame, lockstep: Lockstep | None = None) -> RankRows | None:
    """The ranks of `configs` (module docstring); None where no configuration has data-parallel size
    above 1 whose model's ranks are engines of their own (`lockstep` False). A configuration's requests
    in flight are its `columns.MAX_NUM_SEQS`."""
    sizes = data_parallel_sizes(configs)
    if (sizes > 1).any():
        sizes = np.where(_in_lockstep(configs, lockstep), 1, sizes)
    if not (sizes > 1).any():
        return None
    caps = configs[col.MAX_NUM_SEQS].to_numpy(dtype=float)
    owner, ranks, shares = [], [], []
    for position, (size, cap) in enumerate(zip(sizes, caps)):
        split = rank_shares(cap, size) if size > 1 else ()
        for share in split or (None,):
            owner.append(position)
            ranks.append(1 if share is None else share.ranks)
            shares.append(math.nan if share is None else float(share.requests))
    owner, shares = np.asarray(owner), np.asarray(shares, dtype=float)
    frame = configs.iloc[owner].reset_index(drop=True)
    at = np.isfinite(shares)
    for name in (col.MAX_NUM_SEQS, col.MAX_CONCURRENCY, col.NUM_PROMPTS, col.MEAN_BATCH_SIZE):
        if name in frame:
            frame[name] = frame[name].astype(float)
    fraction = shares[at] / caps[owner][at]
    frame.loc[at, col.MAX_NUM_SEQS] = shares[at]
    frame.loc[at, col.DATA_PARALLEL] = 1
    if col.MAX_CONCURRENCY in frame:
        concurrency = frame.loc[at, col.MAX_CONCURRENCY].to_numpy(dtype=float)
        frame.loc[at, col.MAX_CONCURRENCY] = np.where(np.isfinite(concurrency), shares[at], np.nan)
    if col.NUM_PROMPTS in frame:
        # Each rank serves the benchmark's prompts in proportion to its share, in whole requests.
        prompts = frame.loc[at, col.NUM_PROMPTS].to_numpy(dtype=float) * fraction
        frame.loc[at, col.NUM_PROMPTS] = np.maximum(np.floor(prompts + 0.5), 1.0)
    if col.MEAN_BATCH_SIZE in frame:
        frame.loc[at, col.MEAN_BATCH_SIZE] = frame.loc[at, col.MEAN_BATCH_SIZE].to_numpy(dtype=float) * fraction
    return RankRows(frame, owner, np.asarray(ranks, dtype=float), sizes > 1)


def engine_rows(configs: pd.DataFrame, lockstep: Lockstep | None = None) -> pd.DataFrame:
    """The engines `configs` run on, one row each: their ranks' rows (`rank_rows`), or `configs` itself
    where none is data-parallel."""
    ranks = rank_rows(configs, lockstep)
    return configs if ranks is None else ranks.frame


def _interval(interval: Interval | None, combine: Callable[[np.ndarray], np.ndarray]) -> Interval | None:
    return None if interval is None else replace(interval, low=combine(interval.low), high=combine(interval.high))


def server_prediction(predict_engines: Callable[[pd.DataFrame], Prediction], configs: pd.DataFrame,
                      lockstep: Lockstep | None = None) -> Prediction:
    """`predict_engines`' prediction of `configs` (each row one engine), where a data-parallel
    configuration is its ranks' (module docstring)."""
    ranks = rank_rows(configs, lockstep)
    if ranks is None:
        return predict_engines(configs)
    engines = predict_engines(ranks.frame)
    throughput = np.asarray(engines.throughput_per_s, dtype=float)

    def server(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = {}
        for key, rank_values in values.items():
            out[key] = (ranks.mean(rank_values, values.get(THROUGHPUT, throughput)) if key == E2E
                        else ranks.total(rank_values))
        return out

    return replace(engines, throughput_per_s=ranks.total(throughput),
                   e2e_latency_s=ranks.mean(engines.e2e_latency_s, throughput),
                   mean_batch=ranks.total(engines.mean_batch),
                   e2e_interval=_interval(engines.e2e_interval, lambda v: ranks.mean(v, throughput)),
                   throughput_interval=_interval(engines.throughput_interval, ranks.total),
                   alternatives=tuple(server(alternative) for alternative in engines.alternatives),
                   determined=None if engines.determined is None else ranks.all(engines.determined),
                   refused=None if engines.refused is None else ranks.any(engines.refused))


def server_latencies(latencies_of_engines: Callable[[pd.DataFrame], dict[str, np.ndarray]],
                     throughput_of_engines: Callable[[pd.DataFrame], np.ndarray], configs: pd.DataFrame,
                     metrics: Sequence[SloMetric], lockstep: Lockstep | None = None) -> dict[str, np.ndarray]:
    """`latencies_of_engines`' SLO metrics (and goodput, `GOODPUT`) of `configs`, each row one engine,
    where a data-parallel configuration's are its ranks' (module docstring: a mean weighted by the
    ranks' `throughput_of_engines` where their shares differ, the worse rank's median or percentile,
    the goodput summed)."""
    ranks = rank_rows(configs, lockstep)
    if ranks is None:
        return latencies_of_engines(configs)
    engines = latencies_of_engines(ranks.frame)
    by_name = {metric.name: metric for metric in metrics}
    throughput = throughput_of_engines(ranks.frame) if ranks.mixed.any() else None
    out = {}
    for name, values in engines.items():
        metric = by_name.get(name)
        if name == GOODPUT:
            out[name] = ranks.total(values)
        elif metric is not None and (metric.in_batch or metric.statistic == "mean"):
            out[name] = ranks.mean(values, throughput)
        else:
            out[name] = ranks.worst(values)
    return out
