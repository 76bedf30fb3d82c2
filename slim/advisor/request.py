"""One `slim advise` call as data: the traces, the target model and its workload, the SLOs and how to
decide (`AdviceRequest`), validated where it is built."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from slim.decision.candidates import DEFAULT_CANDIDATE_CAPS, DEFAULT_EPSILON, DEFAULT_TOLERANCE
from slim.errors import AdvisorError
from slim.predictors import advise_predictors
from slim.predictors.slim_model import SLIM_SLO_METRICS
from slim.sim.constants import SIM_CONSTANTS_FILE
from slim.sim.run_cache import SimulationCache
from slim.specs.architecture import MODELS_FILE
from slim.specs.hardware import HARDWARE_FILE
from slim.specs.slo import Slos


def default_predictor(slos: Slos) -> str:
    """``slim`` where SLIM predicts every metric of `slos` and no goodput is asked for, else ``sim``
    (which simulates each request, so every statistic but ITL's tail)."""
    if slos.goodput is None and all(metric.name in SLIM_SLO_METRICS for metric in slos.metrics):
        return "slim"
    return "sim"


@dataclass(frozen=True)
class AdviceRequest:
    """One `advise` call: the traces, the target and its workload, and how to decide.

    The target is `model` (a name or alias of `models_file`), or the model a Hugging Face
    `model_config` (``config.json``) describes, named `model` if given. The SLOs are `slos`
    (`slim.specs.slo.Slos`), or `slo_s`, the paper's in-batch E2E in seconds; `epsilon` is the
    batching-efficiency floor of Eq. 13, over the `candidates` caps (cap 1 always added, for
    ``T(1)``, as `slim tune` adds it); `tolerance` is how much more objective (a fraction) another
    cap or layout must be able to give to keep the decision open (its certificate). `hardware` is
    the accelerator the runs ran on (a key of `hardware_file`; no default). SLIM (or SIM) is
    trained on the usable runs of `train_models` (None: every model) less those matching a glob of
    `exclude_runs`. `max_model_len` is vLLM's (None: ``IL + OL``). `sim_constants_file` and
    `num_prompts` are SIM's; `confidence` is SLIM's only. `plan` also builds `slim tune`'s session on
    the same runs, to say whether the decision is settled and which benchmark would settle it.

    Raises `AdvisorError` for an unknown predictor, a confidence outside (0, 1) or with SIM, a
    negative tolerance, or no objective at all.
    """

    traces: str | Path
    model: str | None
    input_len: float
    output_len: float
    slo_s: float | None = None
    slos: Slos | None = None
    epsilon: float = DEFAULT_EPSILON
    hardware: str | None = None
    models_file: str | Path = MODELS_FILE
    hardware_file: str | Path = HARDWARE_FILE
    candidates: Sequence[float] = DEFAULT_CANDIDATE_CAPS
    max_model_len: int | None = None
    model_config: str | Path | None = None
    quantization: str | None = None      # vLLM --quantization the server applies (None: not given)
    kv_cache_dtype: str | None = None    # vLLM --kv-cache-dtype (None: not given, i.e. auto)
    tensor_parallel: int | None = None   # the runs' tensor-parallel size to advise for (None: their smallest)
    data_parallel: int | None = None     # the data-parallel size whose runs measure the workload (None: their smallest)
    train_models: Sequence[str] | None = None
    exclude_runs: Sequence[str] = ()
    predictor: str | None = None
    """``slim``, ``sim``, or None: SLIM where it predicts every SLO metric (the in-batch E2E, the mean
    TPOT) and no goodput is asked for, else SIM (`default_predictor`)."""
    sim_constants_file: str | Path = SIM_CONSTANTS_FILE
    num_prompts: int | None = None
    """Requests each benchmark sends (the next one, and SIM's simulation of each cap); None: as the
    workload's runs sent them, as `slim tune` chooses (`slim.tune.request.benchmark_prompts`)."""
    confidence: float | None = None
    table_columns: str | Path | None = None
    """A YAML file with a summary table's ``columns`` (and ``hardware_map``), as a dataset's ``table:``."""
    tolerance: float = DEFAULT_TOLERANCE
    plan: bool = True
    simulations: SimulationCache | None = field(default=None, compare=False, repr=False)
    """The simulated runs to read from and keep (`slim.sim.run_cache`): a caller advising on the same
    traces several times hands one cache to every request; None: a cache of this call's own."""

    def __post_init__(self) -> None:
        offered = advise_predictors()
        if self.slos is None and self.slo_s is not None:
            object.__setattr__(self, "slos", Slos.of(slo_ms=1e3 * float(self.slo_s)))
        if self.predictor is None:
            object.__setattr__(self, "predictor", "slim" if self.confidence is not None or self.slos is None
                               else default_predictor(self.slos))
        if self.predictor not in offered:
            raise AdvisorError(f"unknown predictor '{self.predictor}'; choose one of {', '.join(offered)}")
        if self.confidence is not None:
            if not (np.isfinite(self.confidence) and 0 < self.confidence < 1):
                raise AdvisorError(f"confidence must lie in (0, 1), got {self.confidence}")
            if offered[self.predictor].simulated:
                raise AdvisorError(f"--confidence bounds a predicted curve; --predictor {self.predictor} has no "
                                   "prediction band")
        if not (np.isfinite(self.tolerance) and self.tolerance >= 0):
            raise AdvisorError(f"tolerance must be a non-negative fraction, got {self.tolerance}")
        if self.slos is None:
            raise AdvisorError("state an objective: --slo NAME=VALUE (e.g. p99_tpot_ms=50), --slo-ms or --goodput")
        for name in ("candidates", "exclude_runs", "train_models"):   # frozen means immutable all the way down
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(value))

    @property
    def candidate_caps(self) -> tuple[float, ...]:
        """The candidates, always with cap 1 (``T(1)`` of the efficiency floor)."""
        return tuple(sorted({float(c) for c in self.candidates} | {1.0}))
