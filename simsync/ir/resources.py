"""What a resource does: the one definition of a queue (the token queue, a program's input
queue), the ConditionalAccumulator and the five actions ops take on them.

A :class:`~simsync.ir.Resource` declares a queue or an accumulator; an op acts on it through its
kind's :class:`Action`. What the action does is defined here once, as pure state machines with
no clock and no SimPy, in the manner of SimPy's ``BaseResource``: a resource answers
``do_put`` (an op puts when it ends; a put into a queue with a capacity first reserves room
with ``do_room`` before it starts, waiting while there is none) and ``do_get`` (an op gets
before it starts: the answer is ``None`` while the resource cannot serve it, and the op
waits). The
engine wraps the same states in SimPy events (:mod:`simsync.engine.resources`); the replay and
the statistics of a trace drive :class:`Accumulator` with the events a trace recorded, so
"which gradients did a take average" has one answer everywhere.

- :class:`TokenQueue` (``sync_token_q``, or a program's input queue): ``enqueue`` puts
  ``amount`` items of one value (waiting for room first when the queue has a capacity);
  ``dequeue`` gets the oldest, and waits while there is none.
- :class:`Accumulator` (TensorFlow's ``ConditionalAccumulator``): ``push`` puts one gradient
  tagged with its worker's local step; it is accepted unless the local step is below the
  accumulator's step (stale), and dropped silently otherwise. ``take`` of R waits until at
  least R gradients were accepted, then takes *all* accepted so far (TensorFlow divides by its
  counter), and the accumulator's step moves on by one, so every gradient still tagged with
  the old step will be dropped.

>>> queue = TokenQueue(initial=1)
>>> queue.do_get(1), queue.do_get(1)
(Got(value=0, amount=1, items=()), None)
>>> queue.do_put(5, 2, None)
Put(value=5, amount=2, accepted=True)
>>> queue.do_get(1).value, queue.describe()
(5, '1 token')
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, Protocol, TypeVar

from simsync.words import article, plural

__all__ = [
    "ACTIONS",
    "DEQUEUE",
    "DEQUEUE_ELEMENTS",
    "ENQUEUE",
    "PUSH",
    "RESOURCE_KINDS",
    "TAKE",
    "Accumulator",
    "Action",
    "Got",
    "Put",
    "ResourceState",
    "TokenQueue",
    "new_state",
]

Item = TypeVar("Item")


@dataclass(frozen=True)
class Action:
    """What an op does to its resource, declared once.

    ``resource`` is the kind of resource it acts on (``"queue"`` or ``"accumulator"``).
    ``puts``: the op puts when it ends (on a queue with a capacity it first waits for room,
    as a get waits); otherwise it gets, and waits for the resource once its inputs are
    there, before it starts, holding no device.
    ``sets_counter``: the value it gets becomes the counter its op writes (a dequeued token is
    the worker's local step), with no line in the ledger of updates.
    """

    name: str
    resource: str
    puts: bool
    sets_counter: bool = False


#: A worker pushes a gradient tagged with its local step (``accumulator.apply_grad``).
PUSH = Action("push", "accumulator", puts=True)
#: The chief takes the mean of R or more accepted gradients (``accumulator.take_grad(R)``).
TAKE = Action("take", "accumulator", puts=False)
#: The chief puts tokens carrying the global step on the queue (``enqueue_many``); a
#: program's queue runner puts elements on its input queue (``enqueue``).
ENQUEUE = Action("enqueue", "queue", puts=True)
#: A worker takes a token, which becomes its local step (``dequeue``).
DEQUEUE = Action("dequeue", "queue", puts=False, sets_counter=True)
#: A tower takes elements (its batch) from a program's input queue (``dequeue``,
#: ``dequeue_many``).
DEQUEUE_ELEMENTS = Action("dequeue_elements", "queue", puts=False)
#: Every action, by the name a :class:`~simsync.trace.ResourceEvent` records.
ACTIONS: dict[str, Action] = {a.name: a for a in (PUSH, TAKE, ENQUEUE, DEQUEUE, DEQUEUE_ELEMENTS)}


class Put(NamedTuple):
    """What a put did: ``amount`` things of ``value`` put; ``accepted`` False if dropped."""

    value: int
    amount: int
    accepted: bool


class Got(NamedTuple, Generic[Item]):
    """What a get took: a token of ``value`` (``amount`` 1), or ``amount`` gradients (the
    ``items`` put with them), after which the accumulator is at step ``value``."""

    value: int
    amount: int
    items: tuple[Item, ...]


class ResourceState(Protocol[Item]):
    """What every resource answers (SimPy's ``_do_put`` and ``_do_get``, without events)."""

    def do_put(self, value: int, amount: int, item: Item) -> Put:
        """Put ``amount`` of ``value`` (an accumulator takes one gradient, ``item``)."""
        ...

    def do_get(self, amount: int) -> Got[Item] | None:
        """Get, if the resource can serve a get of ``amount`` now; None: the getter waits."""
        ...

    def start(self) -> Put | None:
        """What the resource held at the start, as a put made before anything ran."""
        ...

    def wants(self, amount: int) -> str:
        """What a get of ``amount`` waits for, in words."""
        ...

    def do_room(self, amount: int) -> bool:
        """Reserve room for a put of ``amount``, if there is; False: the putter waits."""
        ...

    def wants_room(self, amount: int) -> str:
        """What a put of ``amount`` waits for, in words."""
        ...

    def describe(self) -> str:
        """What the resource holds now, in words."""
        ...


class TokenQueue(Generic[Item]):
    """A FIFO queue of integer items that starts with ``initial`` items of value 0: the
    token queue (``item`` ``"token"``), or a program's input queue of elements.

    A get takes ``amount`` items (at least one: a dequeue, a dequeue_many). With a
    ``capacity`` above 0, an enqueue first reserves room for its items
    (:meth:`do_room`), as a ``tf.queue.FIFOQueue``'s enqueue blocks while the queue is
    full; an enqueue of more than the capacity waits for an empty queue (TensorFlow puts its
    items in as room appears).

    >>> q = TokenQueue(initial=1, capacity=2, item="element")
    >>> q.do_room(1), q.do_room(1)
    (True, False)
    >>> q.do_put(0, 1, None).amount, q.describe(), q.do_get(2).amount, q.describe()
    (1, '2 of 2 elements', 2, '0 of 2 elements')
    """

    def __init__(self, initial: int = 0, capacity: int = 0, item: str = "token") -> None:
        self.initial, self.capacity, self.item = initial, capacity, item
        self.tokens: deque[int] = deque([0] * initial)
        #: room held by enqueues that have started and not yet put
        self.reserved = 0

    def start(self) -> Put | None:
        """The initial items, as one enqueue of value 0 (None: it starts empty)."""
        return Put(0, self.initial, True) if self.initial else None

    def _room(self, amount: int) -> int:
        """The room an enqueue of ``amount`` reserves, and gives back as it puts."""
        return min(max(1, amount), self.capacity)

    def do_room(self, amount: int) -> bool:
        """Reserve room for an enqueue of ``amount``, if there is (always, without a
        capacity); False: the enqueue waits."""
        if not self.capacity:
            return True
        need = self._room(amount)
        if len(self.tokens) + self.reserved + need > self.capacity:
            return False
        self.reserved += need
        return True

    def do_put(self, value: int, amount: int, item: Item) -> Put:
        """An enqueue: ``amount`` items of ``value`` at the back (``item`` is unused), into
        the room it reserved."""
        self.tokens.extend([value] * amount)
        if self.capacity:
            self.reserved -= self._room(amount)
        return Put(value, amount, True)

    def do_get(self, amount: int) -> Got[Item] | None:
        """A dequeue of ``amount`` items (at least one), the oldest; None while fewer are
        there. The value got is the last item's."""
        want = max(1, amount)
        if len(self.tokens) < want:
            return None
        taken = [self.tokens.popleft() for _ in range(want)]
        return Got(taken[-1], want, ())

    def wants(self, amount: int) -> str:
        """What a dequeue waits for."""
        want = max(1, amount)
        return article(self.item) if want == 1 else plural(want, self.item)

    def wants_room(self, amount: int) -> str:
        """What an enqueue waits for."""
        return f"room for {plural(self._room(amount) if self.capacity else 1, self.item)}"

    def describe(self) -> str:
        """How many items the queue holds."""
        if self.capacity:
            return f"{len(self.tokens)} of {plural(self.capacity, self.item)}"
        return plural(len(self.tokens), self.item) if self.tokens else "empty"


@dataclass
class Accumulator(Generic[Item]):
    """A ConditionalAccumulator of one variable's gradients: its ``step`` and the gradients
    (``items``) accepted since the last take.

    >>> acc = Accumulator()
    >>> acc.push(0, "w0"), acc.push(0, "w1"), acc.do_get(3)
    (True, True, None)
    >>> acc.take()  # everything accepted so far; the step moves on
    Got(value=1, amount=2, items=('w0', 'w1'))
    >>> acc.push(0, "w2"), acc.push(1, "w3")  # w2 is stale now
    (False, True)
    """

    step: int = 0
    accepted: list[Item] = field(default_factory=list)

    def start(self) -> Put | None:
        """Nothing: an accumulator starts empty, at step 0."""
        return None

    def fresh(self, local_step: int) -> bool:
        """Whether a gradient tagged with ``local_step`` is accepted: not below the step."""
        return local_step >= self.step

    def push(self, local_step: int, item: Item) -> bool:
        """Accept ``item`` unless it is stale; whether it was accepted."""
        if not self.fresh(local_step):
            return False
        self.accepted.append(item)
        return True

    def keep(self, item: Item) -> None:
        """Keep ``item`` as accepted: a push a trace recorded as accepted, replayed."""
        self.accepted.append(item)

    def ready(self, required: int) -> bool:
        """Whether a take of ``required`` can go on: that many were accepted."""
        return len(self.accepted) >= required

    def take(self) -> Got[Item]:
        """Take every gradient accepted since the last take; the step moves on by one."""
        taken, self.accepted = tuple(self.accepted), []
        self.step += 1
        return Got(self.step, len(taken), taken)

    def do_put(self, value: int, amount: int, item: Item) -> Put:
        """A push of one gradient tagged with local step ``value`` (``amount`` is unused)."""
        return Put(value, 1, self.push(value, item))

    def do_get(self, amount: int) -> Got[Item] | None:
        """A take of ``amount`` (R): all accepted, once there are R."""
        return self.take() if self.ready(amount) else None

    def wants(self, amount: int) -> str:
        """What a take of ``amount`` waits for."""
        return f"{amount} gradient(s)"

    def do_room(self, amount: int) -> bool:
        """Always: a push never waits (a stale one is dropped)."""
        return True

    def wants_room(self, amount: int) -> str:
        """Nothing: a push never waits."""
        return "nothing"

    def describe(self) -> str:
        """How many gradients it has accepted since the last take."""
        return f"it has {len(self.accepted)}"


#: The state machine of each kind of resource (the kinds :class:`~simsync.ir.Resource` allows).
RESOURCE_KINDS: dict[str, type[TokenQueue[object]] | type[Accumulator[object]]] = {
    "queue": TokenQueue,
    "accumulator": Accumulator,
}


def new_state(
    kind: str, initial: int = 0, capacity: int = 0, item: str = "token"
) -> ResourceState[Item]:
    """A fresh state of a resource of ``kind``; a queue starts with ``initial`` items (of
    ``item``) and holds at most ``capacity`` (0: any number).

    >>> new_state("accumulator").describe(), new_state("queue", 2).describe()
    ('it has 0', '2 tokens')
    """
    if kind == "queue":
        return TokenQueue(initial, capacity, item)
    return Accumulator()
