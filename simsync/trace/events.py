"""The Trace: what happened, op by op. Both executors emit it; everything after them reads it.

Times are seconds from the start of the run. Records are named tuples: cheap to make by the
hundred thousand, immutable, and compared by value. A trace holds:

- one :class:`OpRecord` per op execution: when its inputs had all arrived (``ready``), when it
  got its device(s) (``start``) and when it finished (``end``), and when each input arrived;
- one :class:`TransferRecord` per tensor that crossed devices and took time (a free link,
  infinite bandwidth and no latency, records none);
- one :class:`VariableAccess` per variable read or write, with the version seen or made;
- one :class:`Read` per execution of an op that reads variables: the versions it saw (kept even
  when the detail above is not; the replay of values rests on it);
- one :class:`StepRecord` per ``sess.run`` of a client;
- one :class:`Update` per execution of an op that writes variables: the ledger of updates;
- one :class:`ResourceEvent` per event on a stateful resource: a token enqueued or dequeued, a
  gradient pushed to an accumulator (accepted or dropped as stale), a take of the average.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "OpRecord",
    "Read",
    "ResourceEvent",
    "StepRecord",
    "Trace",
    "TransferRecord",
    "Update",
    "VariableAccess",
]


class OpRecord(NamedTuple):
    op: str
    kind: str
    devices: tuple[str, ...]
    client: str
    step: int
    ready: float
    start: float
    end: float
    arrivals: tuple[tuple[str, float], ...] = ()
    loss: float | None = None
    #: seconds it waited on a resource (a token, R gradients) after its inputs arrived
    blocked: float = 0.0
    #: when its outputs existed, if before its end (a traced op: its kernel's end, before
    #: TensorFlow's executor handed them on and recorded it); None: at its end
    done: float | None = None

    @property
    def outputs_at(self) -> float:
        """When its outputs existed: what an op that takes them starts after."""
        return self.end if self.done is None else self.done

    @property
    def queued(self) -> float:
        """Seconds between being ready and getting the device, less any time blocked on a
        resource: contention, not dependencies."""
        return self.start - self.ready - self.blocked


class TransferRecord(NamedTuple):
    src: str
    dst: str
    src_device: str
    dst_device: str
    nbytes: int
    client: str
    step: int
    start: float
    end: float
    arrival: float


class VariableAccess(NamedTuple):
    variable: str
    op: str
    client: str
    step: int
    time: float
    version: int
    write: bool


class Read(NamedTuple):
    """The versions one read op saw, in the order of the op's ``reads``."""

    client: str
    step: int
    op: str
    versions: tuple[int, ...]


class StepRecord(NamedTuple):
    client: str
    step: int
    start: float
    end: float
    loss: float | None = None

    @property
    def duration(self) -> float:
        return self.end - self.start


class Update(NamedTuple):
    """One update of the variables, as a ledger line.

    ``read`` is the version the client's run read; ``before`` the version just before this
    update landed (or was dropped). An applied update makes version ``before + 1``, so its
    staleness, version at apply - version read - 1, is ``before - read``: how many other
    updates landed between the read and this one.
    """

    client: str
    step: int
    op: str
    read: int
    before: int
    applied: bool
    time: float

    @property
    def staleness(self) -> int:
        return self.before - self.read


class ResourceEvent(NamedTuple):
    """One event on a queue or a ConditionalAccumulator, in the order it happened.

    ``action`` and what ``value`` and ``amount`` mean for it:

    - ``enqueue``: ``amount`` tokens of value ``value`` (a global step) put on the queue, or
      ``amount`` elements (value 0) on a program's input queue;
    - ``dequeue``: one token of value ``value`` taken off it;
    - ``dequeue_elements``: ``amount`` elements taken off a program's input queue;
    - ``push``: one gradient tagged with local step ``value``; ``accepted`` is False when the
      accumulator dropped it as stale (``value`` below the accumulator's step);
    - ``take``: the mean of the ``amount`` gradients accumulated since the last take; ``value``
      is the accumulator's step after it (one more than before).
    """

    resource: str
    action: str
    op: str
    client: str
    step: int
    time: float
    value: int = 0
    amount: int = 1
    accepted: bool = True


@dataclass
class Trace:
    """Everything one run produced. ``source`` says which executor made it."""

    source: str = "simulator"
    ops: list[OpRecord] = field(default_factory=list)
    transfers: list[TransferRecord] = field(default_factory=list)
    accesses: list[VariableAccess] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)
    resources: list[ResourceEvent] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    events: int = 0
    #: final values of the variables that hold numbers but are not trained (moving statistics)
    values: dict[str, Any] = field(default_factory=dict)
    #: why no values were computed though the run asked for them (a ``generic`` op, which
    #: computes none, stands where they would pass); None when they were, or were not asked for
    values_skipped: str | None = None

    @property
    def makespan(self) -> float:
        """Seconds from the first step's start to the last step's end."""
        if not self.steps:
            return 0.0
        return max(s.end for s in self.steps) - min(s.start for s in self.steps)
