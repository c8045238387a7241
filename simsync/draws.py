"""Seeded draws of compute times.

Every cost group of every client (a tower's compute, drawn once per step and shared by its
forward and backward ops) has a stream of its own, seeded from ``(seed, client, group)``, and
each step takes a fixed two uniforms from it: step ``s`` is uniforms ``2s`` and ``2s + 1``,
turned into the distribution's value by the inverse transform (exponential) or Box-Muller
(lognormal). So the draws do not depend on the order in which events happen, the same seed gives
the same draws bit for bit, adding towers does not change the draws of the existing ones, and a
draw costs a lookup in a block of uniforms drawn ahead, not a generator per step.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from simsync.errors import SimulationError
from simsync.ir import Cost, natural_key

__all__ = ["DrawStreams", "draw"]

#: Steps of uniforms drawn at once per stream.
BLOCK = 256


def draw(u1: float, u2: float, cost: Cost) -> float:
    """One draw of a group's total time (seconds at speed 1) with mean ``cost.mean``, from two
    uniforms in [0, 1).

    >>> draw(0.5, 0.5, Cost(0.01))
    0.01
    >>> round(draw(1 - math.exp(-1), 0.0, Cost(2.0, "exponential")), 12)  # the 63rd percentile
    2.0
    >>> 0.002 <= draw(0.3, 0.9, Cost(0.01, "shifted_exponential", shift=0.002))
    True
    """
    if cost.distribution == "constant":
        return cost.mean
    if cost.distribution == "exponential":
        return -cost.mean * math.log1p(-u1)
    if cost.distribution == "shifted_exponential":
        return cost.shift - (cost.mean - cost.shift) * math.log1p(-u1)
    if cost.distribution == "lognormal":
        normal = math.sqrt(-2.0 * math.log1p(-u1)) * math.cos(2.0 * math.pi * u2)
        return math.exp(math.log(cost.mean) - cost.sigma**2 / 2 + cost.sigma * normal)
    raise SimulationError(f"unknown compute-time distribution {cost.distribution!r}")


class DrawStreams:
    """The draws of one client's cost groups, step after step (any step may be asked for).

    >>> groups = {"a": Cost(1.0, "exponential"), "b": Cost(1.0, "exponential")}
    >>> first = DrawStreams(0, 0, groups).step(5)
    >>> first == DrawStreams(0, 0, groups).step(5), first == DrawStreams(1, 0, groups).step(5)
    (True, False)
    >>> DrawStreams(0, 0, {"a": groups["a"]}).step(5)["a"] == first["a"]  # another tower added
    True
    """

    def __init__(self, seed: int, client: int, groups: dict[str, Cost]) -> None:
        self.seed, self.client = seed, client
        self.groups = [(name, groups[name]) for name in sorted(groups, key=natural_key)]
        self.blocks: dict[str, tuple[int, np.ndarray]] = {}

    def step(self, step: int) -> dict[str, float]:
        """``{group: seconds}`` for every group at ``step``."""
        index, offset = divmod(step, BLOCK)
        result = {}
        for name, cost in self.groups:
            block = self.blocks.get(name)
            if block is None or block[0] != index:
                block = self.blocks[name] = (index, self._uniforms(name, index))
            uniforms = block[1]
            result[name] = draw(uniforms[2 * offset], uniforms[2 * offset + 1], cost)
        return result

    def _uniforms(self, group: str, index: int) -> np.ndarray:
        generator = np.random.PCG64([self.seed, 0, self.client, zlib.crc32(group.encode())])
        generator.advance(2 * BLOCK * index)
        return np.random.Generator(generator).random(2 * BLOCK)
