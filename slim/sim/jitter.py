"""Per-step jitter of the simulated step durations, ``1 + sigma z_k``.

``z_k`` is a function of (seed, global step index ``k``) only (counter-based: block
``k >> 16`` of ``numpy.random.default_rng([seed, block])``), so stepping one step at a time
and jumping over a stretch of steps draw exactly the same numbers.
"""

from __future__ import annotations

import numpy as np

JITTER_BLOCK_BITS = 16
FIRST_DRAW = 1 << 12
"""Factors drawn when a block is first used; more are drawn as later steps need them (most
runs take a few thousand steps, so drawing whole blocks of 65536 cost more than the runs)."""


class StepJitter:
    """Counter-based per-step jitter factors ``1 + sigma clip(z_k, -3, 3)``."""

    def __init__(self, seed: int, sigma: float):
        self.seed, self.sigma = int(seed), float(sigma)
        self._generators: dict[int, np.random.Generator] = {}
        self._arrays: dict[int, np.ndarray] = {}
        self._lists: dict[int, list[float]] = {}
        self.mask = (1 << JITTER_BLOCK_BITS) - 1

    def _block(self, block: int, needed: int) -> np.ndarray:
        """The factors of `block` drawn so far, at least its first `needed`. A draw continues the
        block's stream (each normal consumes the generator's output in turn), so the factors do not
        depend on how the block was drawn: in pieces as here, or in one draw of all 65536."""
        factors = self._arrays.get(block)
        drawn = 0 if factors is None else len(factors)
        if drawn < needed:
            generator = self._generators.get(block)
            if generator is None:
                generator = self._generators[block] = np.random.default_rng([self.seed, block])
            size = min(1 << JITTER_BLOCK_BITS, max(needed, 2 * drawn, FIRST_DRAW))
            more = 1.0 + self.sigma * np.clip(generator.standard_normal(size - drawn), -3.0, 3.0)
            factors = more if factors is None else np.concatenate((factors, more))
            self._arrays[block] = factors
            self._lists.pop(block, None)
        return factors

    def factor(self, step: int) -> float:
        block, offset = step >> JITTER_BLOCK_BITS, step & self.mask
        values = self._lists.get(block)
        if values is None or offset >= len(values):   # Python floats for the step loop, made on first use
            values = self._lists[block] = self._block(block, offset + 1).tolist()
        return values[offset]

    def factors(self, start: int, count: int) -> np.ndarray:
        pieces, step, left = [], start, count
        while left > 0:
            offset = step & self.mask
            take = min(left, (1 << JITTER_BLOCK_BITS) - offset)
            pieces.append(self._block(step >> JITTER_BLOCK_BITS, offset + take)[offset:offset + take])
            step, left = step + take, left - take
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
