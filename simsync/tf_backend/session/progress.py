"""How far a run on TensorFlow has come: ``TensorFlow: step 130 of 2,040, about 2 minutes left``.

A long cross-check ran silently for minutes; its steps now report as they go, to whoever
shows them (the command line's status line on standard error, a lesson's spinner). The
estimate is the mean time of the steps so far times the steps left; messages come at most
four times a second.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from simsync.scenario.budget import duration

__all__ = ["StepProgress"]

#: Seconds between two messages, at least (the last step always reports).
INTERVAL = 0.25


class StepProgress:
    r"""Count ``total`` steps, telling ``on_progress`` how many are done and how long is left.

    >>> said = []
    >>> clock = iter([0.0, 2.0, 4.0, 6.0]).__next__
    >>> progress = StepProgress(3, said.append, clock=clock)
    >>> for _ in range(3):
    ...     progress.step()
    >>> print(*said, sep="\n")
    TensorFlow: step 1 of 3, about 4 seconds left
    TensorFlow: step 2 of 3, about 2 seconds left
    TensorFlow: step 3 of 3
    """

    def __init__(
        self,
        total: int,
        on_progress: Callable[[str], None] | None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.on_progress, self.clock = total, on_progress, clock
        self.done = 0
        self.started = clock()
        self.shown = -INTERVAL
        self.lock = threading.Lock()  # asynchronous workers count from their own threads

    def step(self) -> None:
        """One more step done."""
        if self.on_progress is None:
            return
        with self.lock:
            self.done += 1
            now = self.clock()
            if now - self.shown < INTERVAL and self.done < self.total:
                return
            self.shown = now
            message = f"TensorFlow: step {self.done:,} of {self.total:,}"
            if self.done < self.total:
                left = (now - self.started) / self.done * (self.total - self.done)
                message += f", about {duration(left)} left"
        self.on_progress(message)
