"""Costs of a program's own graph from a few traced steps (in the sandbox's child).

For each client of the loop in turn (its fetches and feeds, alone), a few untraced runs warm
the session up, a block of untraced runs is timed around ``sess.run`` (the step's wall time,
as a cross-check's runs measure it), then a few runs are traced with
``RunOptions(trace_level=FULL_TRACE)``. ``step_stats`` give each executed op's device and when
it ended; its cost is its *latency*: from when its last input was ready in that step (or the
step began) to its end, which holds the kernel, the executor's hand-over to it and any wait
for a core on this machine (on a 2-core machine running 17 logical devices, most of a small
op's time). Each output's allocated bytes are kept too. What a run costs beyond its ops is
what a ``sess.run`` of one ``NoOp`` costs on a session configured the same way
(:func:`session_run_split`): the client's overhead, of which only the Python side holds the
GIL, and only its CPU time a core. Traced steps run slower than untraced ones, so the
latencies are scaled when the graph is imported until the simulated step is the untraced
wall time (:mod:`simsync.simulation.fit`).

The result is a plain dict (:func:`profile_loop`), the form the cache keeps
(:mod:`simsync.tf_backend.program.cost_cache`):

``ops``
    ``{op name: {"device": "/gpu:0", "seconds": median latency, "busy": median}}`` for every
    op a traced step ran (``busy``: from when the executor took it to its end);
``tensors``
    ``{"op:slot": bytes}`` as allocated;
``shapes``
    ``{"op:slot": [dims]}`` as the traced steps carried them (a placeholder's ``None`` batch,
    as fed);
``clients``
    ``{thread: {"overhead": s, "python": s, "cpu": s, "wall": median s, "span": median s,
    "walls": [...]}}``: a ``sess.run``'s own cost, the part of it that holds the GIL and its
    CPU time (:func:`session_run_split`), the walls of the untraced block, the median span
    of the traced steps.

The queue runners' threads run beside all this, as they do in the program. What each of
their enqueue ops needs (the elements it puts: reading, decoding, making a batch) is traced
as well, a few runs of its inputs alone (:func:`_runner_work`); the enqueue itself is not
run here, as it would wait on a full queue. Its cost, a copy of the elements into the queue,
is taken as the dequeue's out of it (:mod:`~simsync.tf_backend.program.convert`). The chief's
queue runner of ``SyncReplicasOptimizer`` (its enqueue of tokens waits for the takes of
gradients the workers push) is not run here: its own runs are traced while the clients run
(:attr:`~simsync.tf_backend.program.capture.Observer.tracing`).
"""

from __future__ import annotations

import functools
import itertools
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simsync.tf_backend.program.capture import (
    FIFO_QUEUES,
    PROFILE_THREAD,
    PUSHES,
    RUNNER_TRACES,
    TAKES,
    Ended,
    Loop,
    program_device,
    upstream,
)
from simsync.tf_backend.session.step_stats import read_step_stats, tracer_lane

__all__ = [
    "MOST_TIMED",
    "QUEUE_STEPS",
    "TIMED_SECONDS",
    "TRACED_STEPS",
    "UNTRACED_STEPS",
    "WARMUP_STEPS",
    "Found",
    "all_at_once",
    "measure_loop",
    "profile_loop",
    "queue_size_ops",
    "session_run_split",
    "step_stats_records",
    "timed_block",
]

#: traced steps per client, after a block of untraced ones timed (after a warm-up): at least
#: UNTRACED_STEPS, and more until TIMED_SECONDS have passed, at most MOST_TIMED
TRACED_STEPS = 5
UNTRACED_STEPS = 30
TIMED_SECONDS = 1.0
MOST_TIMED = 400
WARMUP_STEPS = 5
#: runs of each client, after its measured ones, that also fetch its FIFO queues' sizes
QUEUE_STEPS = 100
#: clients run together (workers of SyncReplicasOptimizer): a run longer than this (ms) is
#: given up, as it waits for workers that are done (a minute, until steps were timed)
TOGETHER_TIMEOUT_MS = 60_000
#: ... and once steps were timed, this many steps (at least LEAST_TIMEOUT_MS)
TIMEOUT_STEPS, LEAST_TIMEOUT_MS = 100, 250
#: a client run with others tries at most this many runs per traced one it needs
TRACE_TRIES = 20


def profile_loop(
    tf: Any, loop: Loop, steps: int = TRACED_STEPS, untraced: int = UNTRACED_STEPS
) -> dict[str, Any]:
    """Trace ``steps`` runs of each looping client, after ``untraced`` timed ones; see the
    module's docstring."""
    found = Found()
    run = loop.session.run
    waits = {
        op.name: [t.op.name for t in op.inputs] + [c.name for c in op.control_inputs]
        for op in loop.graph.get_operations()
    }
    keeping = threading.Lock()

    def profile_client(thread: str, call: Any, together: _Together | None) -> dict[str, Any]:
        walls = _timed_runs(tf, run, call, untraced, together)
        # the chief's runs (SyncReplicasOptimizer) from now, not among the timed steps
        loop.observer.tracing = True
        spans = []
        for metadata in _traced_runs(tf, loop, thread, call, steps, together):
            records = step_stats_records(metadata.step_stats)
            with keeping:
                found.keep(records, waits)
            if records:
                spans.append(max(r["end"] for r in records) - min(r["start"] for r in records))
        return {
            "wall": statistics.median(walls) if walls else 0.0,
            "span": statistics.median(spans) if spans else 0.0,
            "walls": walls,
        }

    clients = _each_client(tf, loop, profile_client)
    loop.observer.tracing = False
    for stats in list(loop.observer.runner_stats):
        found.keep(step_stats_records(stats), waits)
    for records in _runner_work(tf, loop, steps):
        found.keep(records, waits)
    # after the timed runs: a second session slows the program's own in the same process
    session_run = session_run_split(tf, loop.session)
    for client in clients.values():
        client.update(session_run)
    names = set(op.name for op in loop.graph.get_operations())
    return {
        "ops": found.ops(names),
        "tensors": found.tensors,
        "shapes": found.shapes,
        "clients": clients,
        "steps": steps,
    }


@dataclass
class Found:
    """What the traced runs found, per op: its latencies and busy times, its device, and
    the bytes of its outputs."""

    durations: dict[str, list[float]] = field(default_factory=dict)
    busy: dict[str, list[float]] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)
    tensors: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, list[int]] = field(default_factory=dict)

    def keep(self, records: list[dict[str, Any]], waits: dict[str, list[str]]) -> None:
        """Keep one traced run's records (their starts move back: :func:`_latencies`)."""
        for record in records:  # its own time, before the wait for it is added
            self.busy.setdefault(record["name"], []).append(record["end"] - record["start"])
        _latencies(records, waits)
        for record in records:
            self.durations.setdefault(record["name"], []).append(record["end"] - record["start"])
            self.devices[record["name"]] = record["device"]
            self.tensors.update(record["outputs"])
            self.shapes.update(record["shapes"])

    def ops(self, names: set[str] | None = None) -> dict[str, dict[str, Any]]:
        """Each op's device and median seconds and busy time (of ``names`` only, if given),
        as a profile holds them."""
        return {
            name: {
                "device": self.devices[name],
                "seconds": statistics.median(seconds),
                "busy": statistics.median(self.busy[name]),
            }
            for name, seconds in self.durations.items()
            if names is None or name in names
        }


def _runner_work(tf: Any, loop: Loop, steps: int) -> list[list[dict[str, Any]]]:
    """The records of ``steps`` traced runs of what each queue runner's enqueue op puts on
    its queue (its inputs but the queue's handle), one enqueue op after the other; not of
    one that takes from an accumulator (it would wait for pushes that do not come)."""
    enqueues: dict[str, Any] = {}
    for runner in loop.runners:
        for op in runner.enqueue_ops:
            enqueues.setdefault(op.name, op)
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    found = []
    for op in enqueues.values():
        elements = list(op.inputs[1:])
        if not elements or any(o.type in TAKES for o in upstream([t.op for t in elements])):
            continue
        for _ in range(steps):
            metadata = tf.compat.v1.RunMetadata()
            loop.session.run(elements, options=options, run_metadata=metadata)
            found.append(step_stats_records(metadata.step_stats))
    return found


def _together(loop: Loop) -> bool:
    """Whether the loop's clients push gradients to accumulators (workers of
    ``SyncReplicasOptimizer``): then each waits for the others' pushes, and they run
    together."""
    ops = [
        loop.graph.get_operation_by_name(n) for call in loop.calls.values() for n in call.fetches
    ]
    return any(op.type in PUSHES for op in upstream(ops))


@dataclass
class _Together:
    """Clients that run together (workers of ``SyncReplicasOptimizer``): each run is given up
    after ``timeout`` ms, and none stops before every one has its traced runs, since the
    others would wait for its gradients (measured: with one worker done, the other two wait
    for their tokens for ever)."""

    clients: int
    #: whether the runs should go on beyond the workers' traced ones (the chief's are
    #: traced while the workers run)
    wanted: Callable[[], bool] = lambda: False
    timeout: int = TOGETHER_TIMEOUT_MS
    traced: set[str] = field(default_factory=set)
    stop: threading.Event = field(default_factory=threading.Event)

    def shorten(self, walls: list[float]) -> None:
        """A timeout of :data:`TIMEOUT_STEPS` steps of ``walls`` (at least
        :data:`LEAST_TIMEOUT_MS`), once a thread has timed its steps, if shorter."""
        if walls:
            steps = int(TIMEOUT_STEPS * statistics.median(walls) * 1000)
            self.timeout = min(self.timeout, max(LEAST_TIMEOUT_MS, steps))

    def done(self, thread: str, force: bool = False) -> None:
        """``thread`` has its traced runs (or gave up on them); the last one stops all, once
        no more runs are :attr:`wanted` (or by ``force``)."""
        self.traced.add(thread)
        if len(self.traced) >= self.clients and (force or not self.wanted()):
            self.stop.set()


def _chief_wants_traces(loop: Loop) -> bool:
    """Whether the chief's queue runner (it takes from accumulators) has fewer traced runs
    than :data:`RUNNER_TRACES` while the profile traces it."""
    observer = loop.observer
    if not observer.tracing or len(observer.runner_stats) >= RUNNER_TRACES:
        return False
    enqueues = [op for runner in loop.runners for op in runner.enqueue_ops]
    return any(observer.waits_for_accumulator(loop.graph, op) for op in enqueues)


def _each_client(
    tf: Any,
    loop: Loop,
    work: Callable[[str, Any, _Together | None], dict[str, Any]],
    together_always: bool = False,
) -> dict[str, dict[str, Any]]:
    """``work(thread, call, together)`` for each looping client: in turn, each alone; or,
    when they push to accumulators (:func:`_together`), all at once, each on a thread of its
    own as the program runs them (:class:`_Together`). Alone, a worker of
    ``SyncReplicasOptimizer`` whose local step fell behind while the others ran has its
    gradients dropped, and waits for a token nobody puts: measured, it never ends.
    Together, each ``work`` says ``"together": True``. ``together_always``: all at once
    whatever they do (a cross-check's measure of threads the program runs side by side)."""
    if not (together_always or _together(loop)):
        return {thread: work(thread, call, None) for thread, call in loop.calls.items()}
    together = _Together(len(loop.calls), lambda: _chief_wants_traces(loop))
    results: dict[str, dict[str, Any]] = {}

    def one(thread: str, call: Any) -> None:
        try:
            results[thread] = {**work(thread, call, together), "together": True}
        finally:  # a worker that is done stops the others: they would wait for it
            together.done(thread, force=True)

    all_at_once([functools.partial(one, thread, call) for thread, call in loop.calls.items()])
    return {thread: results[thread] for thread in loop.calls}


def all_at_once(works: list[Callable[[], None]]) -> None:
    """Run each of ``works`` on a thread of its own (named :data:`PROFILE_THREAD`), all at
    once, until every one is done; then raise the first error one of them raised."""
    failed: list[BaseException] = []

    def one(work: Callable[[], None]) -> None:
        try:
            work()
        except BaseException as error:  # raised in the caller's thread
            failed.append(error)

    threads = [
        threading.Thread(target=one, args=(work,), name=f"{PROFILE_THREAD}-{i}", daemon=True)
        for i, work in enumerate(works)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failed:
        raise failed[0]


def _traced_runs(
    tf: Any,
    loop: Loop,
    thread: str,
    call: Any,
    steps: int,
    together: _Together | None = None,
) -> list[Any]:
    """The run metadata of ``steps`` traced runs of ``call``. TensorFlow traces one run at a
    time in a process: a client that runs with others runs untraced while another's run is
    traced, and tries again (at most :data:`TRACE_TRIES` runs per traced one); then it goes
    on running untraced until the others have theirs, or a run waits past the timeout."""
    timeout = together.timeout if together else 0
    options = tf.compat.v1.RunOptions(
        trace_level=tf.compat.v1.RunOptions.FULL_TRACE, timeout_in_ms=timeout
    )
    untraced = tf.compat.v1.RunOptions(timeout_in_ms=timeout)
    lock = loop.observer.trace_lock  # shared with the chief's runner
    found: list[Any] = []
    for tries in itertools.count():
        if together is None and len(found) >= steps:
            break
        if together is not None:
            if len(found) >= steps or tries >= steps * TRACE_TRIES:
                together.done(thread, force=tries >= 2 * steps * TRACE_TRIES)
            if together.stop.is_set():
                break
        mine = len(found) < steps and lock.acquire(blocking=together is None)
        metadata = tf.compat.v1.RunMetadata()
        try:
            loop.session.run(
                call.raw_fetches,
                call.feed_dict,
                options=options if mine else untraced,
                run_metadata=metadata,
            )
        except tf.errors.DeadlineExceededError:
            break
        finally:
            if mine:
                lock.release()
        if mine:
            found.append(metadata)
    return found


def _timed_runs(
    tf: Any, run: Any, call: Any, least: int, together: _Together | None = None
) -> list[float]:
    """:data:`WARMUP_STEPS` runs of ``call``, then at least ``least`` more, each timed around
    ``sess.run`` (seconds), until :data:`TIMED_SECONDS` have passed or :data:`MOST_TIMED`
    runs were timed: the same block in the profile and in a cross-check's runs. On a busy
    machine a sub-millisecond step's median over 40 steps moves by half from one moment to
    the next; over 400, from one process to the next, by about a tenth. No more: a program's
    input may hold only so many batches (a queue filled once), and a step that waits for
    one that never comes would stop the import at its time limit. Run with others, a run
    past their timeout ends the block, and the others' runs get a shorter one
    (:meth:`_Together.shorten`)."""
    options = tf.compat.v1.RunOptions(timeout_in_ms=together.timeout if together else 0)
    for _ in range(WARMUP_STEPS):
        try:
            run(call.raw_fetches, call.feed_dict, options=options)
        except tf.errors.DeadlineExceededError:
            if together is None:  # the session's own limit (a graph loaded from its export)
                raise Ended(
                    "a step waited past the time limit: it takes from a queue nothing fills "
                    "(one the program filled by hand before its loop, with no queue runner?)"
                ) from None
            raise Ended(
                f"a worker's step waited more than {options.timeout_in_ms / 1000:g} s for "
                "the others (SyncReplicasOptimizer): is every worker's token queue and "
                "accumulator the same, on one device?"
            ) from None
    # its input may run out (a queue closed, an epoch), or a step wait for a token no
    # worker will bring (the others are done): either ends the block
    walls = timed_block(
        lambda: run(call.raw_fetches, call.feed_dict, options=options),
        least,
        ended=(tf.errors.OutOfRangeError, tf.errors.DeadlineExceededError),
    )
    if together is not None:
        together.shorten(walls)
    return walls


def timed_block(
    step: Callable[[], Any], least: int, ended: tuple[type[BaseException], ...] = ()
) -> list[float]:
    """Seconds of each of at least ``least`` calls of ``step`` (at most :data:`MOST_TIMED`),
    more until :data:`TIMED_SECONDS` have passed or :data:`MOST_TIMED` were timed: the timed
    block of a TF1 loop's runs and of a TF2 step's calls. An error of ``ended`` ends the
    block, unless nothing was timed yet."""
    walls: list[float] = []
    least = min(least, MOST_TIMED)
    began = time.perf_counter()
    while len(walls) < least or (
        len(walls) < MOST_TIMED and time.perf_counter() - began < TIMED_SECONDS
    ):
        started = time.perf_counter()
        try:
            step()
        except ended:
            if not walls:
                raise
            break
        walls.append(time.perf_counter() - started)
    return walls


def session_run_split(tf: Any, session: Any, runs: int = 100) -> dict[str, float]:
    """What one ``sess.run`` costs beyond its ops on this machine, and how, over ``runs``
    runs of one ``NoOp`` in a graph of its own, on a session configured as the program's
    (its devices and thread pools), after a few runs to warm it up:

    - ``overhead``: the median wall time;
    - ``python``: the part outside TensorFlow's ``TF_SessionRun``, which holds Python's GIL
      (``TF_SessionRun`` releases it: ``Py_BEGIN_ALLOW_THREADS`` in ``tf_session_helper.cc``);
    - ``cpu``: the CPU time of the calling thread (the Python side and TensorFlow's work on
      that thread); the rest of the wall time the run waits for the executor's threads.

    ``python`` and ``cpu`` are the lower quartiles: work of a fixed size that whatever else
    runs on this machine only makes look longer (their medians moved by half from one
    profile to the next here, their lower quartiles by a tenth).
    """
    graph = tf.Graph()
    with graph.as_default():
        nothing = tf.no_op()
    config = getattr(session, "_config", None)
    with tf.compat.v1.Session(graph=graph, config=config) as alone:
        inside: list[float] = []
        call = alone._call_tf_sessionrun

        def timed_call(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return call(*args)
            finally:
                inside.append(time.perf_counter() - started)

        alone._call_tf_sessionrun = timed_call
        for _ in range(WARMUP_STEPS):
            alone.run(nothing)
        inside.clear()
        walls, cpus = [], []
        for _ in range(runs):
            started, cpu = time.perf_counter(), time.thread_time()
            alone.run(nothing)
            walls.append(time.perf_counter() - started)
            cpus.append(time.thread_time() - cpu)
    python = [w - i for w, i in zip(walls, inside, strict=True)]
    return {
        "overhead": statistics.median(walls),
        "python": statistics.quantiles(python, n=4)[0],
        "cpu": statistics.quantiles(cpus, n=4)[0],
    }


def _latencies(records: list[dict[str, Any]], waits: dict[str, list[str]]) -> None:
    """Each op's start moved back to when it could start: its inputs' last end in this step
    (or the step's start), so its cost holds the executor's hand-over to it, and the wait for
    a core, as measured here."""
    if not records:
        return
    first = min(r["start"] for r in records)
    ends = {r["name"]: r["end"] for r in records}
    for record in records:
        ready = max((ends[w] for w in waits.get(record["name"], ()) if w in ends), default=first)
        record["start"] = min(record["end"], max(first, ready))


def step_stats_records(step_stats: Any) -> list[dict[str, Any]]:
    """Every node execution of one traced step, once (on a GPU timed by its kernels, see
    :mod:`simsync.tf_backend.session.step_stats`): name, the program's device, start and end
    (seconds, absolute), its outputs' allocated bytes (``{"op:slot": bytes}``, from the
    executor's records) and their shapes as they ran (``{"op:slot": [dims]}``)."""
    outputs: dict[str, dict[str, int]] = {}
    shapes: dict[str, dict[str, list[int]]] = {}
    for device_stats in step_stats.dev_stats:
        if tracer_lane(device_stats.device) is not None:
            continue  # a GPU's streams: kernels and copies, no outputs
        for node in device_stats.node_stats:
            for out in node.output:
                name, described = f"{node.node_name}:{out.slot}", out.tensor_description
                outputs.setdefault(node.node_name, {})[name] = int(
                    described.allocation_description.requested_bytes
                )
                if not described.shape.unknown_rank:
                    dims = [int(d.size) for d in described.shape.dim]
                    if all(d >= 0 for d in dims):
                        shapes.setdefault(node.node_name, {})[name] = dims
    records = []
    for node in read_step_stats(step_stats).nodes:
        if node.name.startswith("_") or not node.start:
            continue
        # from when the executor took the op to when it was done with it: the kernel and the
        # executor's own work for it (TensorFlow's "all" times), or its kernels on a GPU
        records.append(
            {
                "name": node.name,
                "device": program_device(node.device),
                "start": node.start / 1e6,
                "end": node.end / 1e6,
                "done": node.done / 1e6,
                "outputs": outputs.get(node.name, {}),
                "shapes": shapes.get(node.name, {}),
            }
        )
    return records


def queue_size_ops(tf: Any, graph: Any) -> dict[str, Any]:
    """A ``QueueSize`` op for each FIFO queue of ``graph`` (added to it, once), by queue."""
    made = getattr(graph, "_simsync_queue_sizes", None)
    if made is not None:
        return dict(made)
    queues = [op for op in graph.get_operations() if op.type in FIFO_QUEUES]
    if not queues:
        graph._simsync_queue_sizes = {}
        return {}
    if graph.finalized:  # a MonitoredTrainingSession's graph: the size ops go in too
        graph._unsafe_unfinalize()
    with graph.as_default(), tf.name_scope("simsync_queue_size"):
        sizes = {
            op.name: (tf.raw_ops.QueueSizeV2 if op.type.endswith("V2") else tf.raw_ops.QueueSize)(
                handle=op.outputs[0]
            )
            for op in queues
        }
    graph._simsync_queue_sizes = sizes
    return dict(sizes)


def measure_loop(tf: Any, loop: Loop, traced: int, untraced: int) -> dict[str, Any]:
    """What ``simsync crosscheck PROGRAM.py`` compares with its prediction, measured in a run
    of its own (a process other than the one that measured the costs): one looping client,
    or several all at once, each on a thread of its own, as the program runs them
    (:func:`_each_client`), :data:`WARMUP_STEPS` untraced runs, ``untraced`` runs timed around
    ``sess.run`` (the measured step times), then ``traced`` runs traced (each op's device,
    start and end, for the happens-before relations and who arrived last at each sync
    point), then :data:`QUEUE_STEPS` runs that also fetch the size of each FIFO queue (its
    ``QueueSize`` op takes the queue's handle, as the dequeues do, and runs beside them:
    it may see the queue after some of the step's dequeues, so it counts a step short more
    often than the queue really was as the step began, never less; not for workers, which
    cannot run alone).

    ``{"clients": {thread: {"walls": [s, ...], "steps": [[[name, device, start, end,
    done], ...], ...], "queues": {queue: [size, ...]}}}}``, times in seconds (``done``: when
    its outputs existed, :class:`~simsync.tf_backend.session.step_stats.NodeRun`)."""
    run = loop.session.run

    def measure_client(thread: str, call: Any, together: _Together | None) -> dict[str, Any]:
        walls = _timed_runs(tf, run, call, untraced, together)
        steps = [
            [
                [r["name"], r["device"], r["start"], r["end"], r["done"]]
                for r in step_stats_records(metadata.step_stats)
            ]
            for metadata in _traced_runs(tf, loop, thread, call, traced, together)
        ]
        return {"walls": walls, "steps": steps, "queues": {}}

    # several looping threads run as the program runs them: together (the simulation does)
    clients = _each_client(tf, loop, measure_client, together_always=len(loop.calls) > 1)
    alone = not any(client.get("together") for client in clients.values())
    sizes = queue_size_ops(tf, loop.graph) if alone else {}
    for thread, call in loop.calls.items() if sizes else ():
        found: dict[str, list[int]] = {name: [] for name in sizes}
        for _ in range(QUEUE_STEPS):
            _, held = run([call.raw_fetches, list(sizes.values())], call.feed_dict)
            for name, size in zip(sizes, held, strict=True):
                found[name].append(int(size))
        clients[thread]["queues"] = found
    return {"clients": clients}
