"""Seeded draws of compute times.

Each (client, step) has its own generator, seeded from ``(seed, client, step)``, and draws its
groups in natural order (``tower_2`` before ``tower_10``): the draws do not depend on the order
in which events happen, the same seed gives the same draws bit for bit, and adding towers does
not change the draws of the existing ones.
"""

from __future__ import annotations

import math

import numpy as np

from simsync.errors import SimulationError
from simsync.ir import Cost, natural_key

__all__ = ["draw", "draw_step"]


def draw(rng: np.random.Generator, cost: Cost) -> float:
    """One draw of a group's total time (seconds at speed 1) with mean ``cost.mean``.

    >>> rng = np.random.default_rng(0)
    >>> draw(rng, Cost(0.01))
    0.01
    >>> 0.002 <= draw(rng, Cost(0.01, "shifted_exponential", shift=0.002))
    True
    """
    if cost.distribution == "constant":
        return cost.mean
    if cost.distribution == "exponential":
        return float(rng.exponential(cost.mean))
    if cost.distribution == "shifted_exponential":
        return cost.shift + float(rng.exponential(cost.mean - cost.shift))
    if cost.distribution == "lognormal":
        mu = math.log(cost.mean) - cost.sigma**2 / 2
        return float(rng.lognormal(mu, cost.sigma))
    raise SimulationError(f"unknown compute-time distribution {cost.distribution!r}")


def draw_step(seed: int, client: int, step: int, groups: dict[str, Cost]) -> dict[str, float]:
    """Draws for every group of one step: ``{group: seconds}``.

    >>> groups = {"a": Cost(1.0, "exponential"), "b": Cost(1.0, "exponential")}
    >>> draw_step(0, 0, 5, groups) == draw_step(0, 0, 5, groups)
    True
    >>> draw_step(0, 0, 5, groups) == draw_step(1, 0, 5, groups)
    False
    """
    rng = np.random.default_rng([seed, 0, client, step])
    return {group: draw(rng, groups[group]) for group in sorted(groups, key=natural_key)}
