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

import random
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

    def __init__(
        self, env: simpy.Environment, callback: Callback, delay: float = 0, value: Any = None
    ) -> None:
        self.env = env
        self.callbacks = [callback]
        self._ok = True
        self._value = value
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
            Scheduled(self.env, callback)  # the grant
        else:
            self.waiters.append(callback)

    def release(self) -> None:
        """Give the place back: to the next waiter, if any."""
        if self.waiters:
            Scheduled(self.env, self.waiters.popleft())  # the grant
        else:
            self.count -= 1


class Cores(Slot):
    """A host's cores as TensorFlow's inter-op thread pool runs ops on them: ``capacity``
    threads, each running one op at a time to its end, and busy cores slow each other (shared
    caches, memory, hyper-threads): while ``k`` ops run, each progresses at

        rate(k) = 1 - (k - 1) / (capacity - 1) * (1 - efficiency)

    seconds of its work per second, ``efficiency`` when all cores are busy. The rate changes
    whenever an op starts or ends, for every op running then: an op that ran beside others
    speeds up once it runs alone. (With ``efficiency`` 1 or one core, an op simply takes its
    own time.)

    Which op a thread runs next is the pool's (Eigen's non-blocking pool): an idle thread
    takes an op at once; when every thread is busy, an op made ready by an op that ran on
    thread ``t`` waits at the front of ``t``'s own queue, and one handed in from outside the
    pool (a run's first ops, from the client's thread) at the back of a thread's queue picked
    at random (``seed``). A thread that finishes takes the front of its own queue, else steals
    the back of another's (tried from a random one on).

    >>> env = simpy.Environment()
    >>> cores, ended = Cores(env, 2, 0.5), {}
    >>> for name, work in (("a", 1.0), ("b", 3.0)):
    ...     cores.request(lambda e: None)
    ...     cores.run(work, lambda e, name=name: ended.setdefault(name, env.now))
    >>> env.run(); ended  # both at half speed until a ends at 2; b's last 2 s alone
    {'a': 2.0, 'b': 4.0}
    """

    __slots__ = ("efficiency", "generation", "idle", "kept", "queues", "random", "rate",
                 "running", "since")  # fmt: skip

    def __init__(
        self, env: simpy.Environment, capacity: int, efficiency: float, seed: int | str = 0
    ) -> None:
        super().__init__(env, capacity)
        self.efficiency = efficiency
        #: threads kept by a finished op for the op it made ready: (run, op index, thread)
        self.kept: deque[tuple[Any, int, int]] = deque()
        #: the threads' queues of ops waiting for them (made when first needed: a host may
        #: have more cores than ops ever run at once), and the started threads with nothing
        #: to run (the lowest is taken first; threads not started yet come after them)
        self.queues: dict[int, deque[Callback]] = {}
        self.idle: list[int] = []
        self.random = random.Random(seed)
        #: the work left (seconds at rate 1) of each op running, and what to call at its end
        self.running: list[list[Any]] = []
        self.rate, self.since, self.generation = 1.0, 0.0, 0

    def request(self, callback: Callback, origin: int | None = None, first: bool = False) -> None:
        """Call ``callback`` with the thread (the event's value) once one is granted.
        ``origin``: the thread whose op made this one ready (None: handed in from outside the
        pool). ``first``: a thread outside the pool that wants a core (a client's Python
        work): while every thread is busy it goes to the front of a random one's queue, and
        runs when that thread's op ends. A thread kept for an op that has not come yet
        (:meth:`keep`) goes to whoever asks for one next while every other is busy."""
        if self.count < self.capacity:
            idle = self.idle
            if origin is not None and origin in idle:
                thread = origin
                idle.remove(origin)
            else:  # an idle thread, else one not started yet (count of them are started)
                thread = idle.pop() if idle else self.count
            self.count += 1
            self._grant(callback, thread)
        elif self.kept:
            self._grant(callback, self.kept.popleft()[2])
        else:
            thread = origin if origin is not None else self.random.randrange(self.capacity)
            queue = self.queues.get(thread)
            if queue is None:
                queue = self.queues[thread] = deque()
            if origin is not None or first:
                queue.appendleft(callback)
            else:
                queue.append(callback)

    def release(self, thread: int = 0) -> None:
        """``thread`` is done with its op: it runs the next from its own queue, else one
        stolen from the back of another's, else waits."""
        queues = self.queues
        own = queues.get(thread)
        if own:
            self._grant(own.popleft(), thread)
            return
        waiting = [t for t, queue in queues.items() if queue]
        if waiting:  # the first queue with work from a random thread on, round the pool
            first, capacity = self.random.randrange(self.capacity), self.capacity
            victim = min(waiting, key=lambda t: (t - first) % capacity)
            self._grant(queues[victim].pop(), thread)
            return
        self.count -= 1
        self.idle.append(thread)
        self.idle.sort(reverse=True)

    def _grant(self, callback: Callback, thread: int = 0) -> None:
        Scheduled(self.env, callback, 0, thread)

    def keep(self, run: Any, index: int, thread: int) -> None:
        """A finished op keeps its thread for the planned op ``index`` of ``run``, which it
        made ready; unless someone asks for a thread first, that op takes it with
        :meth:`claim`."""
        self.kept.append((run, index, thread))

    def claim(self, run: Any, index: int) -> int | None:
        """The thread kept for the planned op ``index`` of ``run``, if it is still kept (at
        most one per thread is: the search is short)."""
        for entry in self.kept:
            if entry[0] is run and entry[1] == index:
                self.kept.remove(entry)
                return entry[2]
        return None

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
    (Got(value=3, amount=1, items=()), '1 token')
    """

    def __init__(self, env: simpy.Environment, resource: Resource) -> None:
        self.env, self.resource = env, resource
        #: an accumulator's items: which op pushed each gradient, and when
        self.state: ResourceState[Arrived] = new_state(
            resource.kind, resource.initial, resource.capacity, resource.item
        )
        self.waiters: deque[Waiter] = deque()
        #: enqueues waiting for room in a full queue
        self.putters: deque[Waiter] = deque()

    def get(self, amount: int, client: str, op: str) -> simpy.Event:
        """An event that succeeds with what the get took (a :class:`~simsync.ir.resources.Got`)
        once the resource can serve it and every get before it."""
        event = self.env.event()
        self.waiters.append(Waiter(client, op, amount, event))
        self._trigger_get()
        return event

    def room(self, amount: int, client: str, op: str) -> simpy.Event:
        """An event that succeeds once room for a put of ``amount`` is reserved (at once
        but in a full queue with a capacity), after every put that waited before it."""
        event = self.env.event()
        self.putters.append(Waiter(client, op, amount, event))
        self._trigger_room()
        return event

    def put(self, value: int, amount: int, item: Arrived | None = None) -> Put:
        """Put (into the room it reserved), then serve the waiting gets the resource now
        can. ``item``: the putting op and the time, which a take hands on as its inputs'
        arrivals."""
        done = self.state.do_put(value, amount, item)
        self._trigger_get()
        return done

    def _trigger_get(self) -> None:
        served = False
        while self.waiters:
            got = self.state.do_get(self.waiters[0].amount)
            if got is None:
                break
            self.waiters.popleft().event.succeed(got)
            served = True
        if served and self.putters:  # a get made room
            self._trigger_room()

    def _trigger_room(self) -> None:
        while self.putters and self.state.do_room(self.putters[0].amount):
            self.putters.popleft().event.succeed(None)

    def waiting(self) -> list[str]:
        """Who waits for what, one line per waiter (a deadlock's explanation)."""
        state = self.state.describe()
        name = self.resource.name
        return [
            f"{w.client} waits in {w.op} for {self.state.wants(w.amount)} from {name} ({state})"
            for w in self.waiters
        ] + [
            f"{w.client} waits in {w.op} for {self.state.wants_room(w.amount)} in {name} ({state})"
            for w in self.putters
        ]
