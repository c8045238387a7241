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
wall time (:mod:`simsync.tf_backend.program.fit`).

The result is a plain dict (:func:`profile_loop`), the form the cache keeps
(:mod:`simsync.tf_backend.program.costs`):

``ops``
    ``{op name: {"device": "/gpu:0", "seconds": median latency, "busy": median}}`` for every
    op a traced step ran (``busy``: from when the executor took it to its end);
``tensors``
    ``{"op:slot": bytes}`` as allocated;
``clients``
    ``{thread: {"overhead": s, "python": s, "cpu": s, "wall": median s, "span": median s,
    "walls": [...]}}``: a ``sess.run``'s own cost, the part of it that holds the GIL and its
    CPU time (:func:`session_run_split`), the walls of the untraced block, the median span
    of the traced steps.

The queue runners' threads run beside all this, as they do in the program. What each of
their enqueue ops needs (the elements it puts: reading, decoding, making a batch) is traced
as well, a few runs of its inputs alone (:func:`_runner_work`); the enqueue itself is not
run here, as it would wait on a full queue. Its cost, a copy of the elements into the queue,
is taken as the dequeue's out of it (:mod:`~simsync.tf_backend.program.convert`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from simsync.tf_backend.program.capture import FIFO_QUEUES, Loop, program_device
from simsync.tf_backend.session.step_stats import read_step_stats, tracer_lane

__all__ = [
    "MOST_TIMED",
    "QUEUE_STEPS",
    "TIMED_SECONDS",
    "TRACED_STEPS",
    "UNTRACED_STEPS",
    "WARMUP_STEPS",
    "measure_loop",
    "profile_loop",
    "queue_size_ops",
    "session_run_split",
    "step_stats_records",
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


def profile_loop(
    tf: Any, loop: Loop, steps: int = TRACED_STEPS, untraced: int = UNTRACED_STEPS
) -> dict[str, Any]:
    """Trace ``steps`` runs of each looping client, after ``untraced`` timed ones; see the
    module's docstring."""
    found = _Found()
    clients: dict[str, Any] = {}
    run = loop.session.run
    waits = {
        op.name: [t.op.name for t in op.inputs] + [c.name for c in op.control_inputs]
        for op in loop.graph.get_operations()
    }
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    for thread, call in loop.calls.items():
        walls = _timed_runs(tf, run, call, untraced)
        spans = []
        for _ in range(steps):
            metadata = tf.compat.v1.RunMetadata()
            run(call.raw_fetches, call.feed_dict, options=options, run_metadata=metadata)
            records = step_stats_records(metadata.step_stats)
            found.keep(records, waits)
            if records:
                spans.append(max(r["end"] for r in records) - min(r["start"] for r in records))
        clients[thread] = {
            "wall": statistics.median(walls),
            "span": statistics.median(spans) if spans else 0.0,
            "walls": walls,
        }
    for records in _runner_work(tf, loop, steps):
        found.keep(records, waits)
    # after the timed runs: a second session slows the program's own in the same process
    session_run = session_run_split(tf, loop.session)
    for client in clients.values():
        client.update(session_run)
    names = set(op.name for op in loop.graph.get_operations())
    return {
        "ops": {
            name: {
                "device": found.devices[name],
                "seconds": statistics.median(seconds),
                "busy": statistics.median(found.busy[name]),
            }
            for name, seconds in found.durations.items()
            if name in names
        },
        "tensors": found.tensors,
        "clients": clients,
        "steps": steps,
    }


@dataclass
class _Found:
    """What the traced runs found, per op: its latencies and busy times, its device, and
    the bytes of its outputs."""

    durations: dict[str, list[float]] = field(default_factory=dict)
    busy: dict[str, list[float]] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)
    tensors: dict[str, int] = field(default_factory=dict)

    def keep(self, records: list[dict[str, Any]], waits: dict[str, list[str]]) -> None:
        """Keep one traced run's records (their starts move back: :func:`_latencies`)."""
        for record in records:  # its own time, before the wait for it is added
            self.busy.setdefault(record["name"], []).append(record["end"] - record["start"])
        _latencies(records, waits)
        for record in records:
            self.durations.setdefault(record["name"], []).append(record["end"] - record["start"])
            self.devices[record["name"]] = record["device"]
            self.tensors.update(record["outputs"])


def _runner_work(tf: Any, loop: Loop, steps: int) -> list[list[dict[str, Any]]]:
    """The records of ``steps`` traced runs of what each queue runner's enqueue op puts on
    its queue (its inputs but the queue's handle), one enqueue op after the other."""
    enqueues: dict[str, Any] = {}
    for runner in loop.graph.get_collection(tf.compat.v1.GraphKeys.QUEUE_RUNNERS):
        for op in runner.enqueue_ops:
            enqueues.setdefault(op.name, op)
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    found = []
    for op in enqueues.values():
        elements = list(op.inputs[1:])
        if not elements:
            continue
        for _ in range(steps):
            metadata = tf.compat.v1.RunMetadata()
            loop.session.run(elements, options=options, run_metadata=metadata)
            found.append(step_stats_records(metadata.step_stats))
    return found


def _timed_runs(tf: Any, run: Any, call: Any, least: int) -> list[float]:
    """:data:`WARMUP_STEPS` runs of ``call``, then at least ``least`` more, each timed around
    ``sess.run`` (seconds), until :data:`TIMED_SECONDS` have passed or :data:`MOST_TIMED`
    runs were timed: the same block in the profile and in a cross-check's runs. On a busy
    machine a sub-millisecond step's median over 40 steps moves by half from one moment to
    the next; over 400, from one process to the next, by about a tenth. No more: a program's
    input may hold only so many batches (a queue filled once), and a step that waits for
    one that never comes would stop the import at its time limit."""
    for _ in range(WARMUP_STEPS):
        run(call.raw_fetches, call.feed_dict)
    walls: list[float] = []
    least = min(least, MOST_TIMED)
    began = time.perf_counter()
    while len(walls) < least or (
        len(walls) < MOST_TIMED and time.perf_counter() - began < TIMED_SECONDS
    ):
        started = time.perf_counter()
        try:
            run(call.raw_fetches, call.feed_dict)
        except tf.errors.OutOfRangeError:  # its input ran out (a queue closed, an epoch)
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
    (seconds, absolute) and its outputs' allocated bytes (``{"op:slot": bytes}``, from the
    executor's records)."""
    outputs: dict[str, dict[str, int]] = {}
    for device_stats in step_stats.dev_stats:
        if tracer_lane(device_stats.device) is not None:
            continue  # a GPU's streams: kernels and copies, no outputs
        for node in device_stats.node_stats:
            outputs.setdefault(node.node_name, {}).update(
                {
                    f"{node.node_name}:{out.slot}": int(
                        out.tensor_description.allocation_description.requested_bytes
                    )
                    for out in node.output
                }
            )
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
                "outputs": outputs.get(node.name, {}),
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
    of its own (a process other than the one that measured the costs): for each looping
    client in turn, alone, :data:`WARMUP_STEPS` untraced runs, ``untraced`` runs timed around
    ``sess.run`` (the measured step times), then ``traced`` runs traced (each op's device,
    start and end, for the happens-before relations and who arrived last at each sync
    point), then :data:`QUEUE_STEPS` runs that also fetch the size of each FIFO queue (its
    ``QueueSize`` op takes the queue's handle, as the dequeues do, and runs beside them:
    it may see the queue after some of the step's dequeues, so it counts a step short more
    often than the queue really was as the step began, never less).

    ``{"clients": {thread: {"walls": [s, ...], "steps": [[[name, device, start, end],
    ...], ...], "queues": {queue: [size, ...]}}}}``, times in seconds."""
    run = loop.session.run
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    clients: dict[str, Any] = {}
    for thread, call in loop.calls.items():
        walls = _timed_runs(tf, run, call, untraced)
        steps = []
        for _ in range(traced):
            metadata = tf.compat.v1.RunMetadata()
            run(call.raw_fetches, call.feed_dict, options=options, run_metadata=metadata)
            steps.append(
                [
                    [r["name"], r["device"], r["start"], r["end"]]
                    for r in step_stats_records(metadata.step_stats)
                ]
            )
        clients[thread] = {"walls": walls, "steps": steps, "queues": {}}
    sizes = queue_size_ops(tf, loop.graph)
    for thread, call in loop.calls.items() if sizes else ():
        found: dict[str, list[int]] = {name: [] for name in sizes}
        for _ in range(QUEUE_STEPS):
            _, held = run([call.raw_fetches, list(sizes.values())], call.feed_dict)
            for name, size in zip(sizes, held, strict=True):
                found[name].append(int(size))
        clients[thread]["queues"] = found
    return {"clients": clients}
