"""What a resource does: the one definition of the token queue, the ConditionalAccumulator and
the four actions ops take on them.

A :class:`~simsync.ir.Resource` declares a queue or an accumulator; an op acts on it through its
kind's :class:`Action`. What the action does is defined here once, as pure state machines with
no clock and no SimPy, in the manner of SimPy's ``BaseResource``: a resource answers
``do_put`` (an op puts when it ends; a put never blocks) and ``do_get`` (an op gets before it
starts: the answer is ``None`` while the resource cannot serve it, and the op waits). The
engine wraps the same states in SimPy events (:mod:`simsync.engine.resources`); the replay and
the statistics of a trace drive :class:`Accumulator` with the events a trace recorded, so
"which gradients did a take average" has one answer everywhere.

- :class:`TokenQueue` (``sync_token_q``): ``enqueue`` puts ``amount`` tokens of one value;
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
(5, '1 token(s)')
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, Protocol, TypeVar

__all__ = [
    "ACTIONS",
    "DEQUEUE",
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
    ``puts``: the op puts when it ends and never blocks; otherwise it gets, and waits for the
    resource once its inputs are there, before it starts, holding no device.
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
#: The chief puts tokens carrying the global step on the queue (``enqueue_many``).
ENQUEUE = Action("enqueue", "queue", puts=True)
#: A worker takes a token, which becomes its local step (``dequeue``).
DEQUEUE = Action("dequeue", "queue", puts=False, sets_counter=True)
#: Every action, by the name a :class:`~simsync.trace.ResourceEvent` records.
ACTIONS: dict[str, Action] = {a.name: a for a in (PUSH, TAKE, ENQUEUE, DEQUEUE)}


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

    def describe(self) -> str:
        """What the resource holds now, in words."""
        ...


class TokenQueue(Generic[Item]):
    """A FIFO queue of integer tokens that starts with ``initial`` tokens of value 0.

    A get takes one token, whatever ``amount`` says (a dequeue, not a dequeue_many).
    """

    noun = "a token queue"

    def __init__(self, initial: int = 0) -> None:
        self.initial = initial
        self.tokens: deque[int] = deque([0] * initial)

    def start(self) -> Put | None:
        """The initial tokens, as one enqueue of value 0 (None: it starts empty)."""
        return Put(0, self.initial, True) if self.initial else None

    def do_put(self, value: int, amount: int, item: Item) -> Put:
        """An enqueue: ``amount`` tokens of ``value`` at the back (``item`` is unused)."""
        self.tokens.extend([value] * amount)
        return Put(value, amount, True)

    def do_get(self, amount: int) -> Got[Item] | None:
        """A dequeue: the oldest token; None while the queue is empty."""
        if not self.tokens:
            return None
        return Got(self.tokens.popleft(), 1, ())

    def wants(self, amount: int) -> str:
        """What a dequeue waits for."""
        return "a token"

    def describe(self) -> str:
        """How many tokens the queue holds."""
        return f"{len(self.tokens)} token(s)" if self.tokens else "empty"


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

    noun = "an accumulator"

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

    def describe(self) -> str:
        """How many gradients it has accepted since the last take."""
        return f"it has {len(self.accepted)}"


#: The state machine of each kind of resource (the kinds :class:`~simsync.ir.Resource` allows).
RESOURCE_KINDS: dict[str, type[TokenQueue[object]] | type[Accumulator[object]]] = {
    "queue": TokenQueue,
    "accumulator": Accumulator,
}


def new_state(kind: str, initial: int = 0) -> ResourceState[Item]:
    """A fresh state of a resource of ``kind``; a queue starts with ``initial`` tokens.

    >>> new_state("accumulator").describe(), new_state("queue", 2).describe()
    ('it has 0', '2 token(s)')
    """
    if kind == "queue":
        return TokenQueue(initial)
    return Accumulator()
