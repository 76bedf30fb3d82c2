"""The parallel sizes of the rows of a candidates or runs table (`slim.specs.data_parallel.parallel_sizes`:
1 where a row records none, vLLM's default): the tensor-parallel size ``t``, the data-parallel size
``d`` (`slim.predictors.data_parallel.data_parallel_sizes`, by which the predictors split a server),
the GPUs one server of the two occupies, ``t x d``, by which a run's duration is charged, and whether
its experts were spread by expert parallelism (vLLM's ``--enable-expert-parallel``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from slim import columns as col
from slim.errors import AdvisorError
from slim.predictors.data_parallel import data_parallel_sizes
from slim.specs.data_parallel import parallel_sizes


def tensor_parallel_sizes(frame: pd.DataFrame) -> np.ndarray:
    """Each row's tensor-parallel size (1 where not recorded)."""
    return parallel_sizes(frame, col.TENSOR_PARALLEL)


def pipeline_parallel_sizes(frame: pd.DataFrame) -> np.ndarray:
    """Each row's pipeline-parallel size (1 where not recorded)."""
    return parallel_sizes(frame, col.PIPELINE_PARALLEL)


def server_gpus(frame: pd.DataFrame) -> np.ndarray:
    """The GPUs one server of each row occupies: ``t x d``."""
    return tensor_parallel_sizes(frame) * data_parallel_sizes(frame)


def layout_sizes(frame: pd.DataFrame) -> list[tuple[int, int]]:
    """Each row's ``(t, d)``."""
    return list(zip(tensor_parallel_sizes(frame).tolist(), data_parallel_sizes(frame).tolist()))


def expert_parallel_enabled(frame: pd.DataFrame) -> np.ndarray:
    """Whether each row's server spread a mixture-of-experts model's experts over its GPUs (vLLM's
    ``--enable-expert-parallel``): an expert-parallel size above 1 recorded (False where none is)."""
    return parallel_sizes(frame, col.EXPERT_PARALLEL) > 1


def layout_expert_parallel(frame: pd.DataFrame, layout_label: str) -> bool:
    """Whether the runs of one layout (`layout_label` names it in the error) spread the experts
    (`expert_parallel_enabled`): a server with and one without are different deployments, so runs of
    both kinds at one layout raise `AdvisorError` rather than being judged as one curve."""
    enabled = expert_parallel_enabled(frame)
    if enabled.any() and not enabled.all():
        raise AdvisorError(f"the runs at {layout_label} mix servers with and without --enable-expert-parallel "
                           f"({int(enabled.sum())} with, {int((~enabled).sum())} without): they are two deployments; "
                           "keep one kind in the folder (advise can leave the others out with --exclude-runs)")
    return bool(enabled.any())
