"""Regression baselines of the SLIM paper (Section VI-E, refs. [10] and [11]), reconstructed as
scikit-learn estimators: LLMVisor-Agg and IMAI OOD-LR."""

from baselines.imai import ImaiOodLr
from baselines.llmvisor import LLMVisorAgg

__all__ = ["ImaiOodLr", "LLMVisorAgg"]
