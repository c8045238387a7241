"""A SimPy environment that counts the events it processes."""

from __future__ import annotations

import simpy

__all__ = ["CountingEnvironment"]


class CountingEnvironment(simpy.Environment):
    """:class:`simpy.Environment` whose ``events`` is the number of events processed so far.

    >>> env = CountingEnvironment()
    >>> def ticker(env):
    ...     for _ in range(3):
    ...         yield env.timeout(1)
    >>> _ = env.process(ticker(env)); env.run()
    >>> env.now, env.events
    (3, 6)
    """

    def __init__(self) -> None:
        super().__init__()
        self.events = 0

    def step(self) -> None:
        self.events += 1
        super().step()
