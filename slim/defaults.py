"""Defaults the `slim` command line states in its help, in a module that imports nothing, so that
``slim --help`` answers at once: the modules that apply them (the models catalog, the decision, the
tuning request, session and bound, the simulator, the predictor registry) import them from here.
The hardware catalog's file stays in `slim.specs.hardware`, which is as light and lists its keys
for the help."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

MODELS_FILE = Path(__file__).parent / "specs" / "models.yaml"
"""The model catalog shipped with the package; the pipeline's `models_file` points at it too."""

DEFAULT_CANDIDATE_CAPS: tuple[int, ...] = tuple(2**k for k in range(10))
"""The --max-num-seqs values advise and tune choose among: 1, 2, 4, ..., 512."""
DEFAULT_TENSOR_PARALLEL_SIZES: tuple[int, ...] = (1, 2, 4, 8)
"""The tensor-parallel sizes advise and tune compare when given the GPUs (--gpus) but no sizes."""


def layout_sizes_for(sizes: Sequence[int] | None, tensor_parallel: int | None, gpus: int | None) -> tuple[int, ...]:
    """The tensor-parallel sizes a layout comparison considers: `sizes` (``--tensor-parallel-sizes``)
    where given, else the one `tensor_parallel` (``--tensor-parallel-size``) where given, else
    `DEFAULT_TENSOR_PARALLEL_SIZES` that fit in `gpus` (None: all of them)."""
    if sizes:
        return tuple(sizes)
    if tensor_parallel is not None:
        return (tensor_parallel,)
    return tuple(size for size in DEFAULT_TENSOR_PARALLEL_SIZES if gpus is None or size <= gpus)


DEFAULT_EPSILON = 0.1
"""The batching-efficiency floor of Eq. 13: ``T(B) / (B T(1))`` above it."""
DEFAULT_MARGIN = 0.5
"""A workload may spend at most 50 % more GPU time than a bisection over its candidates."""

SIM_CONSTANTS_FILE = Path(__file__).parent / "sim" / "h100-64gb-sim.yaml"
"""The calibrated H100 64 GB constants shipped with the package (package data, so the installed
`slim advise --predictor sim` finds them); `simulator.constants` defaults to it."""
DEFAULT_NUM_PROMPTS = 2000
"""Requests per simulated run where a runs table does not record them (the public traces' benchmark)."""

DEFAULT_TOLERANCE = 0.01
"""A challenger must be able to beat the incumbent by more than 1 % of its objective to matter."""

TUNE_FOLDER = "slim-tune"
"""Where `slim tune` writes new results and its attempts ledger, inside (or beside) the traces."""
ONLINE, OFFLINE = "online", "offline"
"""`slim tune --mode`: ``vllm bench serve`` against one server, or ``vllm bench latency`` static batches."""
DEFAULT_ONLINE_PROMPTS = 1000
"""``vllm bench serve``'s own ``--num-prompts`` default: what an online benchmark sends unless told."""
DEFAULT_CONFIDENCE = 0.9
"""Confidence of each bound a tuning certificate uses."""
DEFAULT_MAX_RUNS_PER_CAP = 3
"""A measurement within the noise of an SLO is repeated, up to this many runs of one cap."""

SLIM_OPTION, SIM_OPTION = "slim", "sim"
PREDICTOR_OPTIONS = (SLIM_OPTION, SIM_OPTION)
"""The predictors `slim advise --predictor` and `slim tune --predictor` offer, SLIM and the simulator
(SIM), by their option names: the ``option`` fields of `slim.predictors.REGISTRY`."""
