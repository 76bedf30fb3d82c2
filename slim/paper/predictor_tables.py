"""Which registered predictors the paper's tables show: Table III (every predictor the reproduction
compares) and Table IV (SLIM's ablation study), in the registry's order.

A predictor added to the registry (`slim.predictors.register`) joins Table III by its name joining
`TABLE3`; the held-out evaluation, Fig. 10 and the intervals then pick it up.
"""

from __future__ import annotations

from slim.predictors import (
    IMAI,
    LLMVISOR,
    REGISTRY,
    SIM,
    SLIM,
    SLIM_PREDICTED_BATCH,
    SLIM_WITHOUT_DENSE_DECODE,
    SLIM_WITHOUT_KV_SCAN,
)

TABLE3: list[str] = [SLIM, LLMVISOR, IMAI, SIM, SLIM_PREDICTED_BATCH]
"""Table III's predictors (a list, so that a predictor registered later can join it)."""
TABLE4: tuple[str, ...] = (SLIM, SLIM_WITHOUT_KV_SCAN, SLIM_WITHOUT_DENSE_DECODE)
"""Table IV: SLIM and its ablations."""


def table3_labels(present: set[str] | None = None) -> tuple[str, ...]:
    """Table III's predictors, in registry order: every one that runs on every dataset, and those that
    need the simulator's schedules where they were evaluated (`present`; None: all)."""
    return tuple(entry.name for entry in REGISTRY if entry.name in TABLE3
                 and (not entry.needs_schedules or present is None or entry.name in present))


def table4_labels() -> tuple[str, ...]:
    """Table IV's predictors (SLIM and its ablations), in registry order."""
    return tuple(entry.name for entry in REGISTRY if entry.name in TABLE4)


def ablation_labels() -> tuple[str, ...]:
    """Table IV's predictors other than SLIM: the ablations it compares SLIM with."""
    return tuple(label for label in table4_labels() if label != SLIM)
