"""A server's parallel sizes as a runs or candidates table records them, and how a data-parallel
server shares its requests in flight among its ranks: vLLM's ``--max-num-seqs`` holds per rank, and
its load balancer sends each request to the least loaded rank, so the ranks' loads differ by at most
one request."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd


def parallel_sizes(frame: pd.DataFrame, column: str) -> np.ndarray:
    """Each row's parallel size in `column` (tensor, pipeline, data or expert parallel): 1 where the
    table has no such column or a row records none, NaN or less than 1 (vLLM's default)."""
    if column not in frame:
        return np.ones(len(frame), dtype=int)
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
    return np.where(np.isfinite(values) & (values >= 1), values, 1.0).round().astype(int)


def per_rank_cap(requests: float, ranks: int) -> int:
    """vLLM's ``--max-num-seqs`` of a server of `ranks` data-parallel ranks holding `requests` in
    flight: the most any rank holds, ``ceil(requests / ranks)``."""
    return math.ceil(float(requests) / int(ranks) - 1e-9)


def cap_words(requests: float, ranks: int) -> str:
    """A cap as vLLM takes it: ``--max-num-seqs B``; with data parallelism the server's requests in
    flight beside each rank's flag, ``B requests in flight (--max-num-seqs b per rank)``."""
    if int(ranks) <= 1:
        return f"--max-num-seqs {float(requests):g}"
    return f"{float(requests):g} requests in flight (--max-num-seqs {per_rank_cap(requests, ranks)} per rank)"


@dataclass(frozen=True)
class RankShare:
    """`ranks` of a server's data-parallel ranks, each holding `requests` in flight."""

    requests: int
    ranks: int


def rank_shares(requests: float, ranks: int) -> tuple[RankShare, ...]:
    """How a server of `ranks` ranks holds `requests` (rounded to whole requests) in flight: ``r``
    ranks at ``q + 1`` and the others at ``q``, where ``requests = q x ranks + r``; the larger
    share first, idle ranks (a share of 0) left out."""
    quotient, remainder = divmod(max(int(round(float(requests))), 0), int(ranks))
    shares = (RankShare(quotient + 1, remainder), RankShare(quotient, int(ranks) - remainder))
    return tuple(share for share in shares if share.requests > 0 and share.ranks > 0)
