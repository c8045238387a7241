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
   update a trainable variable or push a gradient to a ``ConditionalAccumulator`` (a worker
   of ``SyncReplicasOptimizer``). A call of a callable the program made with
   ``make_callable`` is a run of its fetches; a queue runner's thread runs its enqueue op
   through one, which is never a loop (though the chief's runner of
   ``SyncReplicasOptimizer`` runs the update). The first thread to get
   there waits until no other thread joins a loop for :data:`SETTLE_SECONDS`, so N threads
   calling ``sess.run(train_op)`` are N clients; the others block where they are. Then the
   loop is :class:`Loop`, handed to ``on_loop`` (which profiles it and ends the process).

The queue runners the program starts (``QueueRunner.create_threads``) are kept: the chief's
of ``SyncReplicasOptimizer`` is in no collection. While :attr:`Observer.tracing` is set (the
profile's own runs), the runs of a queue runner whose enqueue waits for an accumulator (the
chief's) are traced: their step stats go to :attr:`Observer.runner_stats`.

A program that ends without a loop is a :class:`Ended`, which says why in one line.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ACCUMULATORS",
    "DEQUEUES",
    "ENQUEUES",
    "FIFO_QUEUES",
    "FUNCTION_CALLS",
    "HANDLE_READS",
    "LOGICAL_DEVICES",
    "PROFILE_THREAD",
    "PUSHES",
    "RECOVERY_WAIT_SECONDS",
    "RUNNER_TRACES",
    "TAKES",
    "VARIABLE_OPS",
    "WRITE_WORDS",
    "Call",
    "Ended",
    "Loop",
    "Observer",
    "calls_write",
    "carried_variable",
    "fetch_names",
    "is_handle",
    "left_out_updates",
    "missing_workers",
    "program_device",
    "training_fetches",
    "upstream",
    "variables_written",
]

#: CPU devices every observed session has: ``CPU:0`` and one per ``/gpu:i`` up to 16
LOGICAL_DEVICES = 17
#: the chief's runner (SyncReplicasOptimizer) traces this many of its runs, one in so many
RUNNER_TRACES = 5
RUNNER_TRACE_EVERY = 4
#: the name of the threads the profile starts to run a loop's clients together
PROFILE_THREAD = "simsync-profile"
#: how often a worker of a cluster that is not the chief looks for the chief's variables
RECOVERY_WAIT_SECONDS = 0.5
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
#: the ops that make a variable (its handle, or the variable itself)
#: the ops of a variable (its handle, or its reference)
VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable", "VarHandleOpV2"})
#: a ``ConditionalAccumulator`` (dense gradients; SyncReplicasOptimizer's, one per variable),
#: a push to one (``apply_grad``, with the worker's local step) and a take (``take_grad(R)``)
ACCUMULATORS = frozenset({"ConditionalAccumulator", "ResourceConditionalAccumulator"})
PUSHES = frozenset({"AccumulatorApplyGradient", "ResourceAccumulatorApplyGradient"})
TAKES = frozenset({"AccumulatorTakeGradient", "ResourceAccumulatorTakeGradient"})


@dataclass
class Call:
    """One ``sess.run``: the thread that made it, the names of its fetches, and its feeds."""

    thread: str
    fetches: tuple[str, ...]
    raw_fetches: Any
    feed_dict: Any = None
    #: the session it runs in (a cluster in one process: each worker's thread its own)
    session: Any = None


@dataclass
class Loop:
    """The training loop: per thread that loops, its last call (fetches and feeds)."""

    session: Any
    graph: Any
    calls: dict[str, Call]
    runs_before: int
    #: the observer: its ``tracing`` turns the tracing of the chief's runs on and off, its
    #: ``runner_stats`` keep them, its ``trace_lock`` is held by a traced run
    observer: Observer
    #: the queue runners the program made (its collection's and those it started itself)
    runners: list[Any] = field(default_factory=list)


class Ended(Exception):
    """The program stopped before a training loop was known; ``str()`` says why."""


@dataclass
class Observer:
    """Wraps ``BaseSession`` while the program runs; see the module's docstring."""

    tf: Any
    real_gpus: int
    on_loop: Callable[[Loop], None]
    #: a run (and every op of it) gives up after this long; 0: never
    timeout_ms: int = 0
    #: a task of a cluster: it starts its server and connects its sessions to it
    cluster: bool = False
    #: the servers the program started (their ``ServerDef``): a cluster of one process
    servers: list[Any] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    sessions: int = 0
    looping: dict[str, Call] = field(default_factory=dict)
    _seen: dict[tuple[str, tuple[str, ...]], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _leader: str | None = None
    _placed: dict[int, int] = field(default_factory=dict)
    _trains: dict[tuple[str, ...], bool] = field(default_factory=dict)
    #: the queue runners started by the program (``create_threads``), in order
    runners: list[Any] = field(default_factory=list)
    #: set by the profile: trace the runs of the runners that wait for an accumulator
    tracing: bool = False
    #: step stats of the traced runs of the runners that wait for an accumulator
    runner_stats: list[Any] = field(default_factory=list)
    runner_runs: int = 0
    #: held by a traced run: TensorFlow traces one run at a time in a process
    trace_lock: threading.Lock = field(default_factory=threading.Lock)
    #: the loop was handed to ``on_loop``
    handed: bool = False
    #: sessions made while set keep TensorFlow's own graph rewriting (Grappler), as a
    #: student's plain session does: the measuring compares the step with and without it
    rewriting: bool = False
    _waiting: dict[tuple[str, ...], bool] = field(default_factory=dict)

    def install(self) -> None:
        from tensorflow.python.client import session as session_module
        from tensorflow.python.training import queue_runner_impl

        base = session_module.BaseSession
        real_init, real_run, real_make_callable = base.__init__, base.run, base.make_callable
        runner_class = queue_runner_impl.QueueRunner
        real_create = runner_class.create_threads
        observer = self

        def __init__(self: Any, target: str = "", graph: Any = None, config: Any = None) -> None:
            if target and not observer.cluster and not observer.whole_cluster(target):
                raise Ended(  # it would wait for a cluster not there
                    f"connects its session to a TensorFlow server ({str(target)[:100]}) of "
                    "a cluster whose other tasks it does not start: a program of one "
                    "process per task runs as its cluster with --tasks, such as --tasks "
                    "ps=1,worker=2 (docs/importing.md)"
                )
            observer.sessions += 1
            real_init(self, target, graph, observer.configure(config))

        def run(self: Any, fetches: Any, feed_dict: Any = None, *args: Any, **kwargs: Any) -> Any:
            observer.before_run(self, fetches, feed_dict)
            return real_run(self, fetches, feed_dict, *args, **kwargs)

        def make_callable(self: Any, fetches: Any, *args: Any, **kwargs: Any) -> Any:
            """A queue runner's thread runs its enqueue op through a callable: one that
            traces its runs while :attr:`tracing` is set, for the chief's runner. Any other
            callable (a program's loop of ``sess.make_callable(train_op)``) is a run of
            its fetches each time it is called, observed as ``run`` is."""
            if not observer.runs_enqueue(fetches):
                return observed_callable(self, fetches, *args, **kwargs)
            if args or kwargs or not observer.waits_for_accumulator(self.graph, fetches):
                return real_make_callable(self, fetches, *args, **kwargs)
            inner = real_make_callable(self, fetches, accept_options=True)

            def runner_run() -> Any:
                # a few of its runs, every RUNNER_TRACE_EVERY-th (a traced run holds the
                # trace lock while the take waits for the workers, whose runs are traced
                # too); one traced run at a time in a process (TensorFlow's profiler):
                # untraced while another is
                observer.runner_runs += 1
                if (
                    not observer.tracing
                    or observer.runner_runs % RUNNER_TRACE_EVERY
                    or len(observer.runner_stats) >= RUNNER_TRACES
                    or not observer.trace_lock.acquire(blocking=False)
                ):
                    return inner()
                try:
                    tf = observer.tf.compat.v1
                    metadata = tf.RunMetadata()
                    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
                    out = inner(options=options, run_metadata=metadata)
                finally:
                    observer.trace_lock.release()
                observer.runner_stats.append(metadata.step_stats)
                return out

            return runner_run

        def observed_callable(
            self: Any, fetches: Any, feed_list: Any = None, accept_options: bool = False
        ) -> Any:
            inner = real_make_callable(self, fetches, feed_list, accept_options)
            fed = list(feed_list) if feed_list is not None else []

            def called(*values: Any, **kwargs: Any) -> Any:
                observer.before_run(self, fetches, dict(zip(fed, values, strict=False)) or None)
                return inner(*values, **kwargs)

            return called

        def create_threads(self: Any, *args: Any, **kwargs: Any) -> Any:
            if all(self is not known for known in observer.runners):
                observer.runners.append(self)
            return real_create(self, *args, **kwargs)

        server_class = self.tf.distribute.Server  # tf.compat.v1.train.Server too
        real_server, real_join = server_class.__init__, server_class.join

        def server(self: Any, *args: Any, **kwargs: Any) -> None:
            real_server(self, *args, **kwargs)
            observer.servers.append(self.server_def)

        def join(self: Any) -> None:
            if not observer.cluster and not observer.whole_cluster(self.target):
                raise Ended(
                    "waits on its TensorFlow server (server.join()) for the other tasks of "
                    "its cluster, which it does not start: a program of one process per task "
                    "runs as its cluster with --tasks, such as --tasks ps=1,worker=2 "
                    "(docs/importing.md)"
                )
            real_join(self)

        base.__init__ = __init__
        base.run = run
        base.make_callable = make_callable
        runner_class.create_threads = create_threads
        server_class.__init__ = server
        server_class.join = join
        if self.cluster:
            self._quick_start()
        self.real_run = real_run

    def whole_cluster(self, target: Any) -> bool:
        """Whether the server of ``target`` is one of this process's and the process
        started every task of its cluster (a cluster in one process, its workers threads)."""
        if not self.servers:
            return False
        tasks = {(job.name, index) for job in self.servers[0].cluster.job for index in job.tasks}
        started = {(d.job_name, d.task_index) for d in self.servers}
        addresses = {
            job.tasks[d.task_index]
            for d in self.servers
            for job in d.cluster.job
            if job.name == d.job_name and d.task_index in job.tasks
        }
        text = target.decode(errors="replace") if isinstance(target, bytes) else str(target)
        where = text.removeprefix("grpc://")
        return started == tasks and where in addresses

    def _quick_start(self) -> None:
        """A worker that is not the chief waits for the chief's variables, trying again
        every ``recovery_wait_secs`` (30 s unless the program says): every
        :data:`RECOVERY_WAIT_SECONDS` here, as the time it waits is only its start."""
        manager = self.tf.compat.v1.train.SessionManager
        real = manager.__init__

        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            kwargs["recovery_wait_secs"] = min(
                kwargs.get("recovery_wait_secs", RECOVERY_WAIT_SECONDS), RECOVERY_WAIT_SECONDS
            )
            real(self, *args, **kwargs)

        manager.__init__ = __init__

    def configure(self, config: Any) -> Any:
        """The program's configuration with simsync's devices and no graph rewriting (but
        while :attr:`rewriting` is set: the rewriting the configuration asks for,
        TensorFlow's default unless it says otherwise)."""
        tf = self.tf
        merged = tf.compat.v1.ConfigProto()
        if config is not None:
            merged.CopyFrom(config)
        merged.device_count["CPU"] = LOGICAL_DEVICES
        merged.allow_soft_placement = True
        if not self.rewriting:
            merged.graph_options.rewrite_options.disable_meta_optimizer = True
        if self.timeout_ms:
            merged.operation_timeout_in_ms = self.timeout_ms
        return merged

    def before_run(self, session: Any, fetches: Any, feed_dict: Any) -> None:
        """Record the call; block it if its thread loops (the first thread to loop profiles
        and ends the process). The profile's own threads (:data:`PROFILE_THREAD`) run freely
        once the loop is known."""
        if self.handed and threading.current_thread().name.startswith(PROFILE_THREAD):
            return
        graph = session.graph
        self.place(graph)
        thread = threading.current_thread().name
        call = Call(thread, fetch_names(graph, fetches), fetches, feed_dict, session)
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
        self._settle(_workers(graph))
        with self._lock:
            loop = Loop(
                session,
                graph,
                dict(self.looping),
                len(self.calls),
                self,
                self.all_runners(graph),
            )
            self.handed = True
        self.on_loop(loop)

    def all_runners(self, graph: Any) -> list[Any]:
        """The queue runners of ``graph``: its ``QUEUE_RUNNERS`` collection's, then those
        the program started itself (SyncReplicasOptimizer's chief queue runner is not in
        the collection)."""
        found = list(graph.get_collection(self.tf.compat.v1.GraphKeys.QUEUE_RUNNERS))
        found += [
            r
            for r in self.runners
            if all(r is not f for f in found) and r.queue.queue_ref.graph is graph
        ]
        return found

    def runs_enqueue(self, fetches: Any) -> bool:
        """Whether ``fetches`` is the enqueue op of a queue runner the program started."""
        return any(fetches is op for runner in self.runners for op in runner.enqueue_ops)

    def waits_for_accumulator(self, graph: Any, fetches: Any) -> bool:
        """Whether running ``fetches`` takes from an accumulator (once per fetch set; False
        for fetches that are not the graph's)."""
        try:
            names = fetch_names(graph, fetches)
        except (TypeError, ValueError, KeyError):
            return False
        if names not in self._waiting:
            ops = [graph.get_operation_by_name(name) for name in names]
            self._waiting[names] = any(op.type in TAKES for op in upstream(ops))
        return self._waiting[names]

    def trains(self, graph: Any, call: Call) -> bool:
        """Whether the call's fetches update a trainable variable or push a gradient to an
        accumulator (once per fetch set): a loop that only fills a queue is not the training
        loop."""
        if call.fetches not in self._trains:
            self._trains[call.fetches] = bool(training_fetches(graph, call.fetches))
        return self._trains[call.fetches]

    def _settle(self, workers: int = 0) -> None:
        """Wait until no other thread has joined a loop for :data:`SETTLE_SECONDS`, and, for
        the ``workers`` of a SyncReplicasOptimizer, until every one has (a worker left out
        would leave the others waiting for its gradients); :data:`SETTLE_MOST_SECONDS` at
        most."""
        started = time.monotonic()
        count, since = len(self.looping), time.monotonic()
        while time.monotonic() - started < SETTLE_MOST_SECONDS:
            time.sleep(0.05)
            if len(self.looping) != count:
                count, since = len(self.looping), time.monotonic()
            elif time.monotonic() - since >= SETTLE_SECONDS and count >= workers:
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
                "sess.run(train_op) in a loop) and TensorFlow 2 programs that call a "
                "tf.function training step in a loop (Keras fit() too, and under a "
                "MirroredStrategy); TensorFlow 2 eager code outside a tf.function and other "
                "tf.distribute strategies are not supported"
            )
        return (
            f"ran to its end after {len(self.calls)} Session.run calls, none of them a "
            "training loop: simsync imports a thread calling sess.run(train_op) again and "
            "again, where train_op updates a trainable variable"
        )


#: ops that take a variable's handle (or reference) and only read it
HANDLE_READS = frozenset(
    {
        "ReadVariableOp", "ResourceGather", "ResourceGatherNd", "VariableShape",
        "VarIsInitializedOp", "IsVariableInitialized", "DestroyResourceOp",
    }
)  # fmt: skip


#: the ops that write a variable (through its handle or its reference): their types hold one
#: of these
WRITE_WORDS = ("Apply", "Assign", "Scatter", "CountUpTo")
#: ops that call functions of the graph's library (a tf.function, tf.cond and tf.while_loop
#: of TensorFlow 2's control flow)
FUNCTION_CALLS = frozenset(
    {
        "If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase",
        "PartitionedCall", "StatefulPartitionedCall",
    }
)  # fmt: skip


def is_handle(dtype: str) -> bool:
    """Whether a tensor of this type (its name) is a resource's handle or a reference."""
    return dtype == "resource" or dtype.endswith("_ref")


def carried_variable(tensor: Any) -> str | None:
    """The variable (its op's name) a handle or reference ``tensor`` carries, followed back
    through the ops that pass it on (``tf.identity(v.handle)``, a ``tf.cond``'s switch);
    None for any other tensor. ``tensor`` is TensorFlow's, or any object with ``.dtype.name``
    and ``.op`` (``.op.name``, ``.op.type``, ``.op.inputs``) alike."""
    op = _variable_op(tensor)
    return None if op is None else str(op.name)


def _variable_op(tensor: Any) -> Any:
    """The variable's op ``tensor`` carries (:func:`carried_variable`), or None."""
    for _ in range(10_000):  # a chain of passes, at most (a cycle ends there)
        op = tensor.op
        if op.type in VARIABLE_OPS:
            return op
        if not is_handle(tensor.dtype.name):
            return None
        if op.type == "IdentityN":  # each output its own input's
            tensor = op.inputs[tensor.value_index]
            continue
        handed = [t for t in op.inputs if is_handle(t.dtype.name)]
        if not handed:
            return None
        tensor = handed[0]
    return None


def variables_written(op: Any) -> list[str]:
    """The variables ``op`` writes: an op of an optimizer's kind (an apply, an assign, a
    scatter: :data:`WRITE_WORDS`), or a function's call whose body holds one
    (:func:`calls_write`: a ``tf.function``, a ``tf.cond``), writes every variable whose
    handle or reference it takes, however passed to it (``tf.identity(v.handle)``). ``op``
    is TensorFlow's, or alike (:func:`carried_variable`; a function's call then says
    ``calls_write`` itself)."""
    if op.type in FUNCTION_CALLS:
        if not calls_write(op):
            return []
    elif not any(word in op.type for word in WRITE_WORDS):
        return []
    found = (carried_variable(tensor) for tensor in op.inputs)
    return list(dict.fromkeys(v for v in found if v is not None))


def calls_write(op: Any) -> bool:
    """Whether the functions a call ``op`` runs (a ``tf.function``'s, a ``tf.cond``'s
    branches, a loop's body) hold an op that writes a variable, at any depth."""
    known = getattr(op, "calls_write", None)
    if known is not None:  # said with the graph's data
        return bool(known)
    return any(any(word in node.op for word in WRITE_WORDS) for node in _called_nodes(op))


def calls_state(
    op: Any, computes: frozenset[str], also: frozenset[str] = frozenset()
) -> str | None:
    """The first op, by its type, that the functions a call ``op`` runs hold (at any depth)
    and that is more than computation: a stateful op (a clock, a queue's size, a table, a
    random number, a handle made by name) but ``computes``: TensorFlow declares
    ``PartitionedCall``, ``StatelessIf`` and the like stateless whatever their functions
    hold, so a call must be looked into. ``computes`` are the stateful types that only
    compute (a print, an assert);
    ``also`` are types that count as state though TensorFlow declares them stateless (a
    change of a tensor in place); an op TensorFlow does not know counts as state. None when
    every op only computes, and for an op that runs no function. Not only the functions
    ``op`` names are read, but every one it may run (:func:`_called_nodes`: a gradient
    registered for one, a function named inside another's attributes); another
    implementation of one is refused apart (:func:`implemented_otherwise`)."""
    from tensorflow.python.framework import op_def_registry

    library = _library(op.graph)
    if not runs_functions(op):
        return None
    for node in _called_nodes(op):
        if node.op in library:  # a function called by its name: its own nodes are read
            continue
        known = op_def_registry.get(node.op)
        stateful = known is None or (known.is_stateful and node.op not in computes)
        if stateful or node.op in also:
            return str(node.op)
    return None


def implemented_otherwise(op: Any) -> str | None:
    """A function of ``op``'s graph that declares what it implements
    (``tf.function(experimental_attributes={"api_implements": ...})``), when ``op`` runs
    functions: Grappler's implementation selector may run another function of the same
    ``api_implements`` in place of the one called, chosen by the device and the session's
    rewriting, so what runs depends on where and how (None when there is none)."""
    if not runs_functions(op):
        return None
    for name, function in _library(op.graph).items():
        if "api_implements" in function.attr:
            return str(name)
    return None


def runs_functions(op: Any) -> bool:
    """Whether ``op`` runs functions of its graph's library: a call, a branch, a loop's body
    (``If``, ``While``, ``PartitionedCall``), but any op that names one in an attribute
    (``For``, ``SymbolicGradient``, ``MapDefun``, ``BatchFunction``, ``RemoteCall``...) or
    is one by its type; each looked into, whatever TensorFlow declares of the op itself."""
    return op.type in FUNCTION_CALLS or bool(_called(op.node_def, _library(op.graph)))


def _called_nodes(op: Any) -> Iterator[Any]:
    """Every node of every function a call ``op`` may run, at any depth (each function
    once): those it and theirs name (:func:`_called`), and the gradient the library
    registers for each (``SymbolicGradient`` runs it in place of differentiating)."""
    library, gradients = _library(op.graph), _gradients(op.graph)
    stack, seen = _called(op.node_def, library), set()
    while stack:
        name = stack.pop()
        if name in seen or name not in library:
            continue
        seen.add(name)
        if name in gradients:
            stack.append(gradients[name])
        for node in library[name].node_def:
            yield node
            stack.extend(_called(node, library))


def _called(node_def: Any, library: dict[str, Any]) -> list[str]:
    """The functions a node calls: by its attributes (a branch, a body, ``f``, and any
    function named inside those functions' own attributes, which a placeholder in the body
    may resolve to) or by its type (a function of the library called by name)."""
    names = [node_def.op] if node_def.op in library else []
    values = list(node_def.attr.values())
    while values:
        value = values.pop()
        if value.HasField("func"):
            names.append(value.func.name)
            values.extend(value.func.attr.values())
        elif value.HasField("list"):
            for function in value.list.func:
                names.append(function.name)
                values.extend(function.attr.values())
    return names


def _gradients(graph: Any) -> dict[str, str]:
    """The gradient function the graph's library registers for a function, by its name."""
    return _read_library(graph)[2]


#: each graph's function library (name -> FunctionDef) and its registered gradients
#: (function -> its gradient's function), read once
_LIBRARIES: dict[int, tuple[Any, dict[str, Any], dict[str, str]]] = {}


def _library(graph: Any) -> dict[str, Any]:
    """The graph's functions, by name."""
    return _read_library(graph)[1]


def _read_library(graph: Any) -> tuple[Any, dict[str, Any], dict[str, str]]:
    """The graph, its functions and its registered gradients, read once (:data:`_LIBRARIES`)."""
    held = _LIBRARIES.get(id(graph))
    if held is None or held[0] is not graph:
        library = graph.as_graph_def().library
        functions = {f.signature.name: f for f in library.function}
        gradients = {g.function_name: g.gradient_func for g in library.gradient}
        held = (graph, functions, gradients)
        _LIBRARIES[id(graph)] = held
    return held


def training_fetches(graph: Any, names: Iterable[str]) -> list[str]:
    """The fetches (op names) that train: whose run updates a trainable variable (an apply,
    an assign, a scatter on it) or pushes a gradient to an accumulator."""
    trainable = set()
    for variable in graph.get_collection("trainable_variables"):
        handle = getattr(variable, "handle", None)
        trainable.add((handle if handle is not None else variable).op.name)

    def updates(op: Any) -> bool:
        return op.type in PUSHES or any(v in trainable for v in variables_written(op))

    return [
        name
        for name in names
        if any(updates(op) for op in upstream([graph.get_operation_by_name(name)]))
    ]


def left_out_updates(graph: Any, fetched: Iterable[Iterable[str]]) -> list[str]:
    """The ops of ``graph`` that update a variable (an optimizer's apply, an assign, a
    scatter, any op that takes its handle and does not only read it:
    :func:`variables_written`) that none of the ``fetched`` lists (op names, one list per
    looping thread) runs: not a variable's initializer, nor what a saver restores, unless
    it computes with data (a queue's, a dataset's: no initializer or restore does). A graded
    program's loop is timed with them too: which fetches its loop ran was its process's
    word, and a forged list could leave its slow training out. Every variable counts,
    trainable or not: the graph's collections are that process's word too. An update that
    writes a variable the fetched ops write, or needs one that does (a global step counted
    after such an update), is added only where a queue runner's thread runs it (the sixth
    attack trained in one, its loop's own update at a rate of 0): else the loop trains those
    variables itself, and the thirty-first attack's decoy (a correct average it built but
    never ran, beside the update of one tower's gradients it ran) was taken into the graded
    step, 6/9 for the 2/9 of the same program without it."""
    initializers = {
        v.initializer.name
        for key in ("variables", "local_variables")
        for v in graph.get_collection(key)
        if getattr(v, "initializer", None) is not None
    }
    ran = [
        op
        for names in fetched
        for op in upstream([graph.get_operation_by_name(name) for name in names])
    ]
    run = {op.name for op in ran}
    trained = {variable for op in ran for variable in variables_written(op)}
    threads = {  # what the queue runners' threads run
        op.name
        for runner in graph.get_collection("queue_runners")
        for op in upstream(list(getattr(runner, "enqueue_ops", None) or []))
    }
    found = []
    for op in graph.get_operations():
        written = variables_written(op)
        if op.name in run or not written:
            continue
        needed = upstream([op])
        decoy = set(written) <= trained or any(set(variables_written(u)) & trained for u in needed)
        if decoy and op.name not in threads:
            continue  # another update of what the loop trains, which no thread runs
        # a variable's initializer, a saver's restore; none computes with data (one that
        # does is training)
        set_up = op.name in initializers or any(u.type.startswith("Restore") for u in needed)
        if set_up and not any("Dequeue" in u.type or "IteratorGetNext" in u.type for u in needed):
            continue
        found.append(op.name)
    return found


def missing_workers(loop: Loop) -> str | None:
    """Why the loop is not all of a SyncReplicasOptimizer's workers, in one line (None when
    it is): a worker that never reached its loop waits for a token that never comes, a
    queue or an accumulator of its own (each worker's optimizer makes them on the global
    step's and the variables' devices)."""
    workers = _workers(loop.graph)
    if len(loop.calls) >= workers:
        return None
    return (
        f"only {len(loop.calls)} of the {workers} workers of its SyncReplicasOptimizer reached "
        "their training loop: the others wait for a token that never comes. Are their token "
        "queue and accumulators the chief's? They are one only when made on one device: make "
        "the global step (where the token queue goes) and the variables outside tf.device('/gpu:i')"
    )


def _workers(graph: Any) -> int:
    """How many workers of a SyncReplicasOptimizer the graph has: its dequeues of one token
    after pushes of gradients (one per worker's optimizer); 0 without."""
    return sum(
        1
        for op in graph.get_operations()
        if op.type in DEQUEUES and any(c.type in PUSHES for c in op.control_inputs)
    )


def upstream(ops: Iterable[Any]) -> list[Any]:
    """``ops`` and every op they need (inputs and control inputs, transitively)."""
    seen: dict[str, Any] = {}
    stack = list(ops)
    while stack:
        op = stack.pop()
        if op.name in seen:
            continue
        seen[op.name] = op
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return list(seen.values())


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
    the logical ``CPU:i+1`` that stood for it; a task of a cluster's, with its job and task
    first (``/job:ps/task:0``, its CPU; ``/job:worker/task:1/gpu:0``).

    >>> program_device("/job:localhost/replica:0/task:0/device:CPU:3")
    '/gpu:2'
    >>> program_device("/device:CPU:0"), program_device("/device:GPU:1")
    ('/cpu:0', '/gpu:1')
    >>> program_device("/job:ps/replica:0/task:0/device:CPU:0"), program_device("/job:ps")
    ('/job:ps/task:0', '/job:ps/task:0')

    A name already the program's (a TensorFlow 2 step's logical ``/cpu:1`` is its own, not a
    stand-in for a GPU: :func:`~simsync.tf_backend.program.functions.step_device`) stays:

    >>> program_device("/cpu:1"), program_device("/gpu:0")
    ('/cpu:1', '/gpu:0')
    """
    if _PROGRAMS.fullmatch(device):
        return device
    task = _TASK.search(device)
    if task is not None and task.group(1) != "localhost":
        placed = _local_device(device)
        where = f"/job:{task.group(1)}/task:{task.group(2) or 0}"
        return where if placed == "/cpu:0" else f"{where}{placed}"
    return _local_device(device)


_TASK = re.compile(r"/job:([A-Za-z0-9_]+)(?:/replica:\d+)?(?:/task:(\d+))?")
#: a device named as the program names it
_PROGRAMS = re.compile(r"/(?:cpu|gpu):\d+")


def _local_device(device: str) -> str:
    found = re.search(r"(?i)device:(cpu|gpu):(\d+)", device)
    if found is None:
        return "/cpu:0"
    kind, index = found.group(1).lower(), int(found.group(2))
    if kind == "gpu":
        return f"/gpu:{index}"
    return "/cpu:0" if index == 0 else f"/gpu:{index - 1}"
