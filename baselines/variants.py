"""Named readings of the two regression baselines: the choices the SLIM paper leaves open.

The paper describes IMAI OOD-LR in one sentence ("workload variables and numerical model
characteristics, including batch size, input and output lengths, hidden dimension, layer and
attention-head counts, and interaction features", Section VI-E) and LLMVisor-Agg in two
("piecewise fitted latency functions for prefill and decode, with aggregate token-count features
for batch size, context tokens, and squared prefill length"). Each `BaselineVariant` here is one
reading: a scikit-learn estimator configuration (constructor parameters of `ImaiOodLr` or
`LLMVisorAgg`, cloned before every fit), never a second implementation. The variant marked
``main`` is the one Tables III-IV and the headline use (`slim.paper.heldout.evaluate_setting`).

What Imai et al. state (their abstract; the paper itself, its features, regression model and
loss could not be recovered, no code is public): an analytical roofline model "specific for LLM
implementation and based on the hardware characteristic", combined with regression models
"trained with historical data" that capture "inherent runtime overhead", validated on vLLM and
Triton (R^2 +17%, MSE -81% for vLLM against regression-only models). `imai_roofline_overhead`
is that design as far as it goes: the roofline's form (`baselines.imai.roofline_e2e_s`), that it
enters with coefficient 1, and the overhead's features are our choices.
"""

from __future__ import annotations

from dataclasses import dataclass

from sklearn.base import BaseEstimator, clone

from baselines.imai import ImaiOodLr
from baselines.llmvisor import LLMVisorAgg
from slim.specs.hardware import Hardware

IMAI_LABEL = "IMAI OOD-LR"
LLMVISOR_LABEL = "LLMVisor-Agg"


@dataclass(frozen=True)
class BaselineVariant:
    """One reading of a baseline: `name` (an identifier, in tables), the `baseline` it reads
    (`IMAI_LABEL` or `LLMVISOR_LABEL`), what it is (`description`), the estimator configuration,
    and whether the main tables use it (`main`)."""

    name: str
    baseline: str
    description: str
    estimator: BaseEstimator
    main: bool = False

    def new_estimator(self) -> BaseEstimator:
        """An unfitted copy of the configuration (`sklearn.base.clone`)."""
        return clone(self.estimator)


MAIN_IMAI = ImaiOodLr()
"""Tables III-IV's IMAI OOD-LR: roofline-shaped products, relative loss on E2E."""
MAIN_LLMVISOR = LLMVisorAgg(nonnegative=True)
"""Tables III-IV's LLMVisor-Agg: two segments per function split on B, non-negative coefficients,
relative loss, decode context ``B (IL + OL/2)``."""


def imai_variants(hw: Hardware) -> tuple[BaselineVariant, ...]:
    """The IMAI OOD-LR readings, the main one second; `hw` gives ``roofline_overhead`` its
    ``F_max`` and ``BW_max``."""
    return (
        BaselineVariant("imai_minimal", IMAI_LABEL,
                        "raw variables (B, IL, OL, L, D, H_q, H_kv) and the pairwise workload interactions "
                        "B IL, B OL, IL OL; relative loss on E2E",
                        ImaiOodLr(features="minimal")),
        BaselineVariant("imai_roofline_products", IMAI_LABEL,
                        "the minimal set plus the roofline-shaped products B IL OL, L D^2 OL, L D B OL; "
                        "relative loss on E2E (the main tables' reading)",
                        MAIN_IMAI, main=True),
        BaselineVariant("imai_roofline_overhead", IMAI_LABEL,
                        "Imai et al.'s design as their abstract states it: a zero-parameter roofline E2E from "
                        "the GPU's peak FLOP/s and bandwidth plus a linear regression of the overhead on the "
                        "minimal set; relative loss",
                        ImaiOodLr(features="roofline_overhead", peak_flops_per_s=hw.peak_flops_per_s,
                                  hbm_bandwidth_bytes_per_s=hw.hbm_bandwidth_bytes_per_s)),
        BaselineVariant("imai_products_absolute", IMAI_LABEL,
                        "the main reading fitted by ordinary least squares in seconds (absolute loss)",
                        ImaiOodLr(loss="absolute")),
        BaselineVariant("imai_products_throughput", IMAI_LABEL,
                        "the main features fitted to throughput (relative loss), E2E by Eq. 6",
                        ImaiOodLr(target="throughput")),
        BaselineVariant("imai_minimal_absolute", IMAI_LABEL,
                        "the minimal set fitted by ordinary least squares in seconds (absolute loss)",
                        ImaiOodLr(features="minimal", loss="absolute")),
        BaselineVariant("imai_minimal_throughput", IMAI_LABEL,
                        "the minimal set fitted to throughput (relative loss), E2E by Eq. 6",
                        ImaiOodLr(features="minimal", target="throughput")),
    )


LLMVISOR_VARIANTS: tuple[BaselineVariant, ...] = (
    BaselineVariant("llmvisor_two_segments", LLMVISOR_LABEL,
                    "two segments per function, breakpoint on B chosen by SSE; decode context B (IL + OL/2); "
                    "non-negative coefficients, relative loss (the main tables' reading)",
                    MAIN_LLMVISOR, main=True),
    BaselineVariant("llmvisor_one_segment", LLMVISOR_LABEL,
                    "one linear piece per function (no breakpoint); otherwise as the main reading",
                    LLMVisorAgg(nonnegative=True, n_segments=1)),
    BaselineVariant("llmvisor_split_context", LLMVISOR_LABEL,
                    "decode context as two features, B IL and B OL/2, each with its own coefficient; "
                    "otherwise as the main reading",
                    LLMVisorAgg(nonnegative=True, decode_context="split")),
    BaselineVariant("llmvisor_absolute", LLMVISOR_LABEL,
                    "ordinary least squares on TTFT and ITL in seconds (the original's step-latency fit); "
                    "otherwise as the main reading",
                    LLMVisorAgg(nonnegative=True, loss="absolute")),
)


def baseline_variants(hw: Hardware) -> tuple[BaselineVariant, ...]:
    """Every variant: IMAI OOD-LR's, then LLMVisor-Agg's."""
    return imai_variants(hw) + LLMVISOR_VARIANTS
