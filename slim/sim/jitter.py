"""Per-step jitter of the simulated step durations, ``1 + sigma z_k``.

``z_k`` is a function of (seed, global step index ``k``) only (counter-based: block
``k >> 16`` of ``numpy.random.default_rng([seed, block])``), so stepping one step at a time
and jumping over a stretch of steps draw exactly the same numbers.
"""

from __future__ import annotations

import numpy as np

JITTER_BLOCK_BITS = 16


class StepJitter:
    """Counter-based per-step jitter factors ``1 + sigma clip(z_k, -3, 3)``."""

    def __init__(self, seed: int, sigma: float):
        self.seed, self.sigma = int(seed), float(sigma)
        self._arrays: dict[int, np.ndarray] = {}
        self._lists: dict[int, list[float]] = {}
        self.mask = (1 << JITTER_BLOCK_BITS) - 1

    def _block(self, block: int) -> np.ndarray:
        if block not in self._arrays:
            normal = np.random.default_rng([self.seed, block]).standard_normal(1 << JITTER_BLOCK_BITS)
            self._arrays[block] = 1.0 + self.sigma * np.clip(normal, -3.0, 3.0)
        return self._arrays[block]

    def factor(self, step: int) -> float:
        block = step >> JITTER_BLOCK_BITS
        if block not in self._lists:   # Python floats for the step loop, made on first use
            self._lists[block] = self._block(block).tolist()
        return self._lists[block][step & self.mask]

    def factors(self, start: int, count: int) -> np.ndarray:
        pieces, step, left = [], start, count
        while left > 0:
            offset = step & self.mask
            take = min(left, (1 << JITTER_BLOCK_BITS) - offset)
            pieces.append(self._block(step >> JITTER_BLOCK_BITS)[offset:offset + take])
            step, left = step + take, left - take
        return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
