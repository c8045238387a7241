"""Run a user's TensorFlow program with its ``Session`` observed, until its training loop is
known (in the sandbox's child: :mod:`simsync.tf_backend.program.child`).

What is observed, by wrapping ``BaseSession.__init__`` and ``BaseSession.run`` (every
``tf.compat.v1.Session``, ``InteractiveSession`` and ``MonitoredSession`` goes through them):

1. **Sessions** are made with simsync's configuration: enough CPU devices for ``/gpu:i`` to
   map to a logical device of its own when the machine has fewer GPUs
   (:data:`LOGICAL_DEVICES`), and no graph rewriting (Grappler), so every op of the graph runs
   as built and its timings map back to it by name.
2. **Placement**: before a run hands new ops to the session, an op on ``/gpu:i`` that has no
   GPU here is moved to the logical device ``CPU:i+1`` (``/cpu:0`` stays ``CPU:0``), as the
   backend does for scenarios. :func:`program_device` maps them back.
3. **Runs**: every ``sess.run`` is recorded (its thread, its fetches, its feeds) and then runs
   as the program asked (initialisers, a queue filled, a first step). The **training loop**
   of a thread is found when it calls ``run`` a second time with the same fetches, and they
   update a trainable variable. The first thread to get
   there waits until no other thread joins a loop for :data:`SETTLE_SECONDS`, so N threads
   calling ``sess.run(train_op)`` are N clients; the others block where they are. Then the
   loop is :class:`Loop`, handed to ``on_loop`` (which profiles it and ends the process).

A program that ends without a loop is a :class:`Ended`, which says why in one line.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEQUEUES",
    "ENQUEUES",
    "FIFO_QUEUES",
    "LOGICAL_DEVICES",
    "Call",
    "Ended",
    "Loop",
    "Observer",
    "fetch_names",
    "program_device",
]

#: CPU devices every observed session has: ``CPU:0`` and one per ``/gpu:i`` up to 16
LOGICAL_DEVICES = 17
#: how long the first thread in its loop waits for no other thread to join one
SETTLE_SECONDS = 0.5
#: at most this long, whatever happens
SETTLE_MOST_SECONDS = 5.0
_GPU = re.compile(r"(?i)/(?:device:)?gpu:(\d+)")

#: the queues whose waits simsync models: FIFO order, a capacity, nothing else to wait for
FIFO_QUEUES = frozenset({"FIFOQueueV2", "FIFOQueue", "PaddingFIFOQueueV2", "PaddingFIFOQueue"})
#: queue ops and how many elements each moves (``n`` of a dequeue_many is its second input)
ENQUEUES = frozenset({"QueueEnqueueV2", "QueueEnqueue", "QueueEnqueueManyV2", "QueueEnqueueMany"})
DEQUEUES = frozenset(
    {"QueueDequeueV2", "QueueDequeue", "QueueDequeueManyV2", "QueueDequeueMany",
     "QueueDequeueUpToV2", "QueueDequeueUpTo"}
)  # fmt: skip


@dataclass
class Call:
    """One ``sess.run``: the thread that made it, the names of its fetches, and its feeds."""

    thread: str
    fetches: tuple[str, ...]
    raw_fetches: Any
    feed_dict: Any = None


@dataclass
class Loop:
    """The training loop: per thread that loops, its last call (fetches and feeds)."""

    session: Any
    graph: Any
    calls: dict[str, Call]
    runs_before: int


class Ended(Exception):
    """The program stopped before a training loop was known; ``str()`` says why."""


@dataclass
class Observer:
    """Wraps ``BaseSession`` while the program runs; see the module's docstring."""

    tf: Any
    real_gpus: int
    on_loop: Callable[[Loop], None]
    calls: list[Call] = field(default_factory=list)
    sessions: int = 0
    looping: dict[str, Call] = field(default_factory=dict)
    _seen: dict[tuple[str, tuple[str, ...]], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _leader: str | None = None
    _placed: dict[int, int] = field(default_factory=dict)
    _trains: dict[tuple[str, ...], bool] = field(default_factory=dict)

    def install(self) -> None:
        from tensorflow.python.client import session as session_module

        base = session_module.BaseSession
        real_init, real_run = base.__init__, base.run
        observer = self

        def __init__(self: Any, target: str = "", graph: Any = None, config: Any = None) -> None:
            observer.sessions += 1
            real_init(self, target, graph, observer.configure(config))

        def run(self: Any, fetches: Any, feed_dict: Any = None, *args: Any, **kwargs: Any) -> Any:
            observer.before_run(self, fetches, feed_dict)
            return real_run(self, fetches, feed_dict, *args, **kwargs)

        base.__init__ = __init__
        base.run = run
        self.real_run = real_run

    def configure(self, config: Any) -> Any:
        """The program's configuration with simsync's devices and no graph rewriting."""
        tf = self.tf
        merged = tf.compat.v1.ConfigProto()
        if config is not None:
            merged.CopyFrom(config)
        merged.device_count["CPU"] = LOGICAL_DEVICES
        merged.allow_soft_placement = True
        merged.graph_options.rewrite_options.disable_meta_optimizer = True
        return merged

    def before_run(self, session: Any, fetches: Any, feed_dict: Any) -> None:
        graph = session.graph
        self.place(graph)
        thread = threading.current_thread().name
        call = Call(thread, fetch_names(graph, fetches), fetches, feed_dict)
        with self._lock:
            self.calls.append(call)
            key = (thread, call.fetches)
            self._seen[key] = self._seen.get(key, 0) + 1
            if self._seen[key] < 2 or thread in self.looping or not self.trains(graph, call):
                return
            self.looping[thread] = call
            leader = self._leader is None
            if leader:
                self._leader = thread
        if not leader:
            threading.Event().wait()  # the leader profiles, then ends the process
        self._settle()
        with self._lock:
            loop = Loop(session, graph, dict(self.looping), len(self.calls))
        self.on_loop(loop)

    def trains(self, graph: Any, call: Call) -> bool:
        """Whether the call's fetches update a trainable variable (once per fetch set): a
        loop that only fills a queue is not the training loop."""
        if call.fetches not in self._trains:
            trainable = set()
            for variable in graph.get_collection("trainable_variables"):
                handle = getattr(variable, "handle", None)
                trainable.add((handle if handle is not None else variable).op.name)
            seen: set[str] = set()
            stack = [graph.get_operation_by_name(name) for name in call.fetches]
            found = False
            while stack and not found:
                op = stack.pop()
                if op.name in seen:
                    continue
                seen.add(op.name)
                writes = any(word in op.type for word in ("Apply", "Assign", "Scatter"))
                found = writes and any(t.op.name in trainable for t in op.inputs[:1])
                stack.extend(t.op for t in op.inputs)
                stack.extend(op.control_inputs)
            self._trains[call.fetches] = found
        return self._trains[call.fetches]

    def _settle(self) -> None:
        """Wait until no other thread has joined a loop for :data:`SETTLE_SECONDS`."""
        started = time.monotonic()
        count, since = len(self.looping), time.monotonic()
        while time.monotonic() - started < SETTLE_MOST_SECONDS:
            time.sleep(0.05)
            if len(self.looping) != count:
                count, since = len(self.looping), time.monotonic()
            elif time.monotonic() - since >= SETTLE_SECONDS:
                return

    def place(self, graph: Any) -> None:
        """Move ops on ``/gpu:i`` that has no GPU here to ``CPU:i+1`` (new ops only)."""
        operations = graph.get_operations()
        done = self._placed.get(id(graph), 0)
        for op in operations[done:]:
            device = op.device
            found = _GPU.search(device) if device else None
            if found is None:
                continue
            index = int(found.group(1))
            if index < self.real_gpus:
                continue
            if index + 1 >= LOGICAL_DEVICES:
                raise Ended(
                    f"op '{op.name}' is placed on {device}: simsync maps at most "
                    f"{LOGICAL_DEVICES - 1} GPUs to devices of this machine"
                )
            op._set_device(_GPU.sub(f"/device:CPU:{index + 1}", device))
        self._placed[id(graph)] = len(operations)

    def why_no_loop(self, eager: bool) -> str:
        """Why the program ended without a training loop, in one line."""
        if not self.calls:
            eager_note = " (it ran eagerly, TensorFlow 2 style)" if eager else ""
            return (
                f"ran to its end without calling Session.run{eager_note}: simsync imports "
                "TensorFlow 1.x-style programs (tf.compat.v1: build a graph, then call "
                "sess.run(train_op) in a loop); TensorFlow 2 eager code, tf.function and "
                "Keras fit() are not supported"
            )
        return (
            f"ran to its end after {len(self.calls)} Session.run calls, none of them a "
            "training loop: simsync imports a thread calling sess.run(train_op) again and "
            "again, where train_op updates a trainable variable"
        )


def fetch_names(graph: Any, fetches: Any) -> tuple[str, ...]:
    """The op names of ``fetches`` (an op, a tensor, a name, or lists, tuples and dicts of
    them), in order, each once."""
    names: list[str] = []

    def walk(item: Any) -> None:
        if isinstance(item, dict):
            for value in item.values():
                walk(value)
        elif isinstance(item, list | tuple):
            for value in item:
                walk(value)
        elif item is not None:
            found = graph.as_graph_element(item, allow_tensor=True, allow_operation=True)
            name = found.name if hasattr(found, "type") else found.op.name
            if name not in names:
                names.append(name)

    walk(fetches)
    return tuple(names)


def program_device(device: str) -> str:
    """The program's name for a placed device: ``/cpu:0``; ``/gpu:i`` for a real GPU or for
    the logical ``CPU:i+1`` that stood for it.

    >>> program_device("/job:localhost/replica:0/task:0/device:CPU:3")
    '/gpu:2'
    >>> program_device("/device:CPU:0"), program_device("/device:GPU:1")
    ('/cpu:0', '/gpu:1')
    """
    found = re.search(r"(?i)device:(cpu|gpu):(\d+)", device)
    if found is None:
        return "/cpu:0"
    kind, index = found.group(1).lower(), int(found.group(2))
    if kind == "gpu":
        return f"/gpu:{index}"
    return "/cpu:0" if index == 0 else f"/gpu:{index - 1}"
