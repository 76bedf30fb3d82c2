"""What a server is asked to run: ``B`` requests of ``IL`` prompt and ``OL`` output tokens, the
paper's configuration less the model (Section IV)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Workload:
    """``B`` requests of ``IL`` prompt and ``OL`` output tokens.

    The fields are numbers (one offline run, e.g. a characterisation point) or equal-length
    arrays with one entry per configuration (e.g. the rows a baseline is fitted on, where
    ``batch_size`` is the measured mean running batch).
    """

    batch_size: int | float | np.ndarray    # B
    input_len: int | float | np.ndarray     # IL, tokens
    output_len: int | float | np.ndarray    # OL, tokens

    @property
    def active_context_tokens(self):
        """``B (IL + OL)``: the context attended at the last decode step (Table I's convention)."""
        return self.batch_size * (self.input_len + self.output_len)

    def with_value(self, quantity: str, value) -> Workload:
        """A copy with one of ``batch_size``, ``input_len``, ``output_len`` replaced."""
        return replace(self, **{quantity: value})
