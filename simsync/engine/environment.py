"""A SimPy environment that counts the events it processes."""

from __future__ import annotations

from typing import Any

import simpy
from simpy.core import EmptySchedule

__all__ = ["CountingEnvironment"]


class CountingEnvironment(simpy.Environment):
    """:class:`simpy.Environment` whose ``events`` is the number of events processed so far.

    ``run()`` without ``until`` counts in a local loop, so counting costs no extra call per
    event; ``step()`` and ``run(until)`` count through the ``step`` override.

    >>> env = CountingEnvironment()
    >>> def ticker(env):
    ...     for _ in range(3):
    ...         yield env.timeout(1)
    >>> _ = env.process(ticker(env)); env.run()
    >>> env.now, env.events
    (3, 5)
    """

    def __init__(self) -> None:
        super().__init__()
        self.events = 0

    def step(self) -> None:
        super().step()
        self.events += 1  # only once the event was processed: an empty schedule raises

    def run(self, until: Any = None) -> Any:
        if until is not None:
            return super().run(until)
        step = super().step
        processed = 0
        try:
            while True:
                step()
                processed += 1
        except EmptySchedule:
            return None
        finally:
            self.events += processed
