"""SimPy environments that count the events they process: one as SimPy runs them (the
benchmarks' bare SimPy runs on it), and the engine's, which runs the same events in the same
order with less work per event."""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.core import EmptySchedule, SimTime
from simpy.events import NORMAL, EventPriority

__all__ = ["CountingEnvironment", "EngineEnvironment"]


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


class EngineEnvironment(CountingEnvironment):
    """:class:`CountingEnvironment` that processes the same events in the same order, faster.

    SimPy keeps every scheduled event in one heap ordered by (time, priority, id). Most of the
    engine's events are due at once: a device granted, a run done, an op with nothing to
    compute. An event scheduled with no delay at normal priority comes after every event
    already due now, so such events go to a first-in first-out list instead, in the order they
    were scheduled; the next event is the smaller (time, priority, id) of the heap's first and
    the list's first. The order is SimPy's exactly, and an event due at once costs no heap
    operation (a heap of a thousand workers' events is ten levels deep).

    >>> env, log = EngineEnvironment(), []
    >>> def worker(env, name, delay):
    ...     yield env.timeout(delay)
    ...     log.append((env.now, name))
    ...     yield env.timeout(0)
    ...     log.append((env.now, name))
    >>> for name, delay in (("a", 1), ("b", 0), ("c", 1)):
    ...     _ = env.process(worker(env, name, delay))
    >>> env.run(); log, env.events
    ([(0, 'b'), (0, 'b'), (1, 'a'), (1, 'c'), (1, 'a'), (1, 'c')], 12)
    """

    def __init__(self) -> None:
        super().__init__()
        #: the events due now with normal priority, as the heap would hold them, in order
        self._due: deque[tuple[SimTime, EventPriority, int, simpy.Event]] = deque()

    def schedule(
        self, event: simpy.Event, priority: EventPriority = NORMAL, delay: SimTime = 0
    ) -> None:
        if delay == 0 and priority == NORMAL:
            self._due.append((self._now, priority, next(self._eid), event))
        else:
            heappush(self._queue, (self._now + delay, priority, next(self._eid), event))

    def peek(self) -> SimTime:
        return self._now if self._due else super().peek()

    def step(self) -> None:
        due, queue = self._due, self._queue
        if due and (not queue or due[0] < queue[0]):
            heappush(queue, due.popleft())  # the first of all: SimPy's step takes it
        super().step()

    def run(self, until: Any = None) -> Any:
        if until is not None:
            return super().run(until)  # through step()
        due, queue = self._due, self._queue
        processed = 0
        try:
            while True:
                if due and (not queue or due[0] < queue[0]):
                    entry = due.popleft()
                elif queue:
                    entry = heappop(queue)
                else:
                    return None
                event = entry[3]
                if not event._ok:  # SimPy's step handles a failure (it may crash the run)
                    heappush(queue, entry)
                    self.step()
                    continue
                # SimPy's Environment.step() for an event that succeeded, inlined
                self._now = entry[0]
                callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
                for callback in callbacks:
                    callback(event)
                processed += 1
        finally:
            self.events += processed
