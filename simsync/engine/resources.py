"""What the engine's ops hold and wait for: places (devices, ports, locks, a host's cores) and
the stateful resources (a FIFO token queue, a ConditionalAccumulator).

- :class:`Slot` and :class:`Cores`: places granted first come first served; :class:`Scheduled`
  is the event a grant is.
- :class:`Waitable`: a queue or an accumulator. What a put or a get does is defined once, as a
  pure state machine, in :mod:`simsync.ir.resources`; here a blocked dequeue or take is a SimPy
  event that succeeds when the state can serve it, and the op waiting on it holds no device
  meanwhile. Each keeps who waits on it and for what, so a deadlock can be explained.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import simpy

from simsync.ir import Resource
from simsync.ir.resources import Put, ResourceState, new_state

#: What an accumulator's item records: the op that pushed the gradient, and when (None when
#: the run keeps no detail).
Arrived = tuple[str, float] | None

__all__ = ["Cores", "Scheduled", "Slot", "Waitable", "Waiter"]

Callback = Callable[[simpy.Event], None]


class Scheduled(simpy.Event):
    """An event that has succeeded and is processed ``delay`` from now, calling ``callback``:
    :class:`simpy.Timeout` with its one callback given (a timeout of 0 is what
    ``Event().succeed()`` schedules), in one call instead of four.

    >>> env, log = simpy.Environment(), []
    >>> _ = Scheduled(env, lambda e: log.append(env.now), 2.5); env.run(); log
    [2.5]
    """

    def __init__(self, env: simpy.Environment, callback: Callback, delay: float = 0) -> None:
        self.env = env
        self.callbacks = [callback]
        self._ok = True
        self._value = None
        env.schedule(self, simpy.events.NORMAL, delay)


class Slot:
    """``capacity`` places (a device, a port, a lock, a host's cores), granted first come first
    served: :class:`simpy.Resource` without its bookkeeping.

    A grant is still a scheduled event, so ops that start at the same moment keep SimPy's order;
    a release hands the place straight to the next waiter (SimPy's release event, which nobody
    waits for, is left out).

    >>> env = simpy.Environment()
    >>> slot, log = Slot(env, 1), []
    >>> slot.request(lambda e: log.append("a")); slot.request(lambda e: log.append("b"))
    >>> env.run(); slot.release(); env.run(); log, slot.count
    (['a', 'b'], 1)
    """

    __slots__ = ("capacity", "count", "env", "waiters")

    def __init__(self, env: simpy.Environment, capacity: int = 1) -> None:
        self.env, self.capacity, self.count = env, capacity, 0
        self.waiters: deque[Callback] = deque()

    def request(self, callback: Callback) -> None:
        """Call ``callback`` once a place is granted (at this moment if one is free)."""
        if self.count < self.capacity:
            self.count += 1
            self._grant(callback)
        else:
            self.waiters.append(callback)

    def release(self) -> None:
        """Give the place back: to the next waiter, if any."""
        if self.waiters:
            self._grant(self.waiters.popleft())
        else:
            self.count -= 1

    def _grant(self, callback: Callback) -> None:
        Scheduled(self.env, callback)


class Cores(Slot):
    """A host's cores, shared by the ops of its devices: at most ``capacity`` run at once,
    granted first come first served (TensorFlow's inter-op threads), and busy cores slow each
    other (shared caches, memory, hyper-threads): while ``k`` ops run, each progresses at

        rate(k) = 1 - (k - 1) / (capacity - 1) * (1 - efficiency)

    seconds of its work per second, ``efficiency`` when all cores are busy. The rate changes
    whenever an op starts or ends, for every op running then: an op that ran beside others
    speeds up once it runs alone. (With ``efficiency`` 1 or one core, an op simply takes its
    own time.)

    >>> env = simpy.Environment()
    >>> cores, ended = Cores(env, 2, 0.5), {}
    >>> for name, work in (("a", 1.0), ("b", 3.0)):
    ...     cores.request(lambda e: None)
    ...     cores.run(work, lambda e, name=name: ended.setdefault(name, env.now))
    >>> env.run(); ended  # both at half speed until a ends at 2; b's last 2 s alone
    {'a': 2.0, 'b': 4.0}
    """

    __slots__ = ("efficiency", "generation", "kept", "rate", "running", "since")

    def __init__(self, env: simpy.Environment, capacity: int, efficiency: float) -> None:
        super().__init__(env, capacity)
        self.efficiency = efficiency
        #: cores kept by a finished op for the op it made ready, oldest first: (run, op index)
        self.kept: deque[tuple[Any, int]] = deque()
        #: the work left (seconds at rate 1) of each op running, and what to call at its end
        self.running: list[list[Any]] = []
        self.rate, self.since, self.generation = 1.0, 0.0, 0

    def request(self, callback: Callback, first: bool = False) -> None:
        """Call ``callback`` once a core is granted. ``first``: an op whose run is already
        under way (TensorFlow's thread that finished its input runs it next): it goes before
        the ops that start a run, and before the continuations already waiting (latest
        first). A core kept for an op that has not come yet (:meth:`keep`) goes to whoever
        asks for a core next; ops already queued when it was kept go on waiting."""
        if self.count >= self.capacity and self.kept:
            self.kept.popleft()
            self._grant(callback)
        elif first and self.count >= self.capacity:
            self.waiters.appendleft(callback)
        else:
            super().request(callback)

    def keep(self, run: Any, index: int) -> None:
        """A finished op keeps its core for the planned op ``index`` of ``run``, which it made
        ready; unless someone asks for a core first, that op takes it with :meth:`claim`."""
        self.kept.append((run, index))

    def claim(self, run: Any, index: int) -> bool:
        """Take the core kept for the planned op ``index`` of ``run``, if it is still kept (at
        most one per core is: the search is short)."""
        if (run, index) not in self.kept:
            return False
        self.kept.remove((run, index))
        return True

    @property
    def shared(self) -> bool:
        """Whether busy cores slow each other at all."""
        return self.capacity > 1 and self.efficiency < 1

    def run(self, work: float, done: Callback) -> None:
        """Run ``work`` seconds of work on a core granted by :meth:`request`; ``done`` is
        called when it is done (release the core there)."""
        if not self.shared:
            self.env.timeout(work).callbacks.append(done)
            return
        self._advance()
        self.running.append([work, done])
        self._schedule()

    def _advance(self) -> None:
        elapsed = (self.env.now - self.since) * self.rate
        for entry in self.running:
            entry[0] -= elapsed
        self.since = self.env.now

    def _schedule(self) -> None:
        busy = len(self.running)
        self.rate = 1 - (busy - 1) / (self.capacity - 1) * (1 - self.efficiency) if busy else 1.0
        self.generation += 1
        if self.running:
            soonest = max(min(entry[0] for entry in self.running), 0.0)
            generation = self.generation
            self.env.timeout(soonest / self.rate).callbacks.append(
                lambda event: self._due(event, generation)
            )

    def _due(self, event: simpy.Event, generation: int) -> None:
        if generation != self.generation:  # an op started or ended since: rescheduled
            return
        self._advance()
        # the op the timer was set for ends, whatever is left of its work: far from time 0, a
        # remainder below half a unit in the last place of ``now`` would set the timer to now
        # again, for ever
        limit = max(1e-12, min(entry[0] for entry in self.running))
        ended = [entry for entry in self.running if entry[0] <= limit]
        self.running = [entry for entry in self.running if entry[0] > limit]
        self._schedule()
        for _, done in ended:
            done(event)


@dataclass
class Waiter:
    """A client's op blocked on a resource, and what it waits for."""

    client: str
    op: str
    amount: int
    event: simpy.Event


class Waitable:
    """A queue or an accumulator in the engine: its state (:mod:`simsync.ir.resources`) and
    the ops waiting to get from it, served first come first served. SimPy's ``BaseResource``
    with its get queue; what a put or a get does is the state's ``do_put`` and ``do_get``.

    >>> from simsync.ir import Resource
    >>> env = simpy.Environment()
    >>> queue = Waitable(env, Resource("q", "queue", "/cpu:0"))
    >>> got = queue.get(1, "worker_0", "worker_0/dequeue_token")
    >>> got.triggered, queue.waiting()
    (False, ['worker_0 waits in worker_0/dequeue_token for a token from q (empty)'])
    >>> queue.put(3, 2)
    Put(value=3, amount=2, accepted=True)
    >>> got.value, queue.state.describe()
    (Got(value=3, amount=1, items=()), '1 token(s)')
    """

    def __init__(self, env: simpy.Environment, resource: Resource) -> None:
        self.env, self.resource = env, resource
        #: an accumulator's items: which op pushed each gradient, and when
        self.state: ResourceState[Arrived] = new_state(resource.kind, resource.initial)
        self.waiters: deque[Waiter] = deque()

    def get(self, amount: int, client: str, op: str) -> simpy.Event:
        """An event that succeeds with what the get took (a :class:`~simsync.ir.resources.Got`)
        once the resource can serve it and every get before it."""
        event = self.env.event()
        self.waiters.append(Waiter(client, op, amount, event))
        self._trigger_get()
        return event

    def put(self, value: int, amount: int, item: Arrived | None = None) -> Put:
        """Put (never blocks), then serve the waiting gets the resource now can. ``item``:
        the putting op and the time, which a take hands on as its inputs' arrivals."""
        done = self.state.do_put(value, amount, item)
        self._trigger_get()
        return done

    def _trigger_get(self) -> None:
        while self.waiters:
            got = self.state.do_get(self.waiters[0].amount)
            if got is None:
                return
            self.waiters.popleft().event.succeed(got)

    def waiting(self) -> list[str]:
        """Who waits for what, one line per waiter (a deadlock's explanation)."""
        state = self.state.describe()
        return [
            f"{w.client} waits in {w.op} for {self.state.wants(w.amount)} from "
            f"{self.resource.name} ({state})"
            for w in self.waiters
        ]
