"""One decision `slim tune` makes: a model at nominal lengths with its SLOs and efficiency floor
(`Workload`), and the labels that tie a candidates table's rows to it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from slim import columns as col
from slim.decision.candidates import DEFAULT_EPSILON
from slim.decision.layouts import Layout
from slim.errors import AdvisorError
from slim.specs.slo import IN_BATCH_E2E, SloBound, SloMetric, Slos

WORKLOAD = "workload"
"""The column of a candidates table that names the workload a candidate belongs to."""


@dataclass(frozen=True)
class Workload:
    """One decision: a model at nominal lengths, its SLOs (relative ones against the measured cap
    `Slos.reference_cap` of this workload, which is then the first run to measure) and its
    efficiency floor."""

    model: str
    input_len: float
    output_len: float
    slos: Slos
    epsilon: float = DEFAULT_EPSILON
    known_cap: float | None = None
    """A cap known to meet every SLO without a run of the session's (the free reference run that set
    them), where the bound's bisection starts; a relative SLO's reference cap is one by itself."""
    tensor_parallel: int | None = None
    """The tensor-parallel size of this decision where the session decides across layouts
    (`slim.tune.layouts`; one workload per layout of a curve), None where it decides the cap alone."""
    data_parallel: int = 1
    """The data-parallel size of this decision's layout (across layouts; its caps are the server's
    requests in flight, over all its ranks)."""
    expert_parallel: bool = False
    """Whether this decision's server spreads the experts over its GPUs (``--enable-expert-parallel``,
    as the workload's runs at its layout did)."""

    @property
    def layout(self) -> Layout | None:
        """The layout this decision is one of across layouts (None: the cap decided alone)."""
        return None if self.tensor_parallel is None else Layout.of_sizes(self.tensor_parallel, self.data_parallel,
                                                                          self.expert_parallel)

    @property
    def bisection_start(self) -> float | None:
        return self.known_cap if self.known_cap is not None else (
            self.slos.reference_cap if self.slos.relative else None)

    @classmethod
    def in_batch(cls, model: str, input_len: float, output_len: float, slo_s: float | None = None,
                 epsilon: float = DEFAULT_EPSILON, multiplier: float | None = None,
                 reference_cap: float = 1.0) -> Workload:
        """A workload whose one SLO is the paper's: the in-batch E2E at most `slo_s` seconds, or
        `multiplier` times its measured value at `reference_cap`."""
        metric = SloMetric.parse(IN_BATCH_E2E)
        bound = (SloBound(metric, limit_ms=1e3 * slo_s) if slo_s is not None and np.isfinite(slo_s)
                 else SloBound(metric, multiplier=multiplier))
        if bound.limit_ms is None and (multiplier is None or multiplier <= 0):
            raise AdvisorError(f"workload {model}: give an SLO in seconds, or a multiplier > 0 of the E2E at a "
                               "reference cap")
        return cls(model, input_len, output_len, Slos((bound,), reference_cap=float(reference_cap)), epsilon)

    @property
    def curve(self) -> str:
        """The model at its lengths, whatever the layout: what the layouts of one decision share."""
        return f"{self.model} IL {self.input_len:g} OL {self.output_len:g}"

    @property
    def label(self) -> str:
        """The decision's name: the curve, and its layout (`Layout.label`) where the session decides
        across layouts."""
        return self.curve + (f" {self.layout.label}" if self.layout is not None else "")


def curve_label(frame: pd.DataFrame) -> pd.Series:
    """`Workload.label` of every row of a runs or candidates table."""
    return (frame[col.MODEL].astype(str) + " IL " + frame[col.INPUT_LEN_NOMINAL].map("{:g}".format) + " OL "
            + frame[col.OUTPUT_LEN_NOMINAL].map("{:g}".format))


