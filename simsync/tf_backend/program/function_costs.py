"""Costs of a TensorFlow 2 program's ``tf.function`` step, from TensorFlow's own profiler (in
the sandbox's child; research/tf2.md §2).

A ``tf.function`` called eagerly has no ``step_stats`` (``RunOptions(trace_level=FULL_TRACE)``
has no eager counterpart). Its kernels are timed by ``tf.profiler.experimental`` instead:

1. a few untraced calls warm it up, then
   :data:`~simsync.tf_backend.program.step_costs.TRACED_STEPS` calls are traced (2, below);
   then a block of untraced calls is timed around the call (the step's wall time, as
   :func:`~simsync.tf_backend.program.step_costs.profile_loop` times a ``sess.run``). The traced
   calls come first: TensorFlow's executor learns from each run which kernels are cheap
   (a running mean of their cycles, from a high first guess), runs those inline and traces
   them no more. Measured on ``tests/fixtures/programs/tf2_step.py``: traced after the
   timed block, 8 of its 27 timed ops had events, one of its 5 MatMuls none; after 5 calls,
   every op TensorFlow traces at all;
2. each traced call runs in a
   ``tf.profiler.experimental.Trace("train", step_num=i)``, with the host tracer only
   (``host_tracer_level=2``, no Python tracer); the profiler writes one ``.xplane.pb`` into a
   temporary folder, read back here (:func:`xplane_steps`);
3. in plane ``/host:CPU``, each event whose name is ``"<node>:<kernel type>"`` and whose node
   is an op of the step's graph is a kernel of that op, but on tf.data's threads
   (:data:`DATA_THREADS`: a dataset's own functions) (the type is the kernel's, which
   oneDNN may rename: ``_MklMatMul`` for a ``MatMul``), in the step whose ``train`` event holds
   its start. Kernel events carry no device: the op's device is the graph's (its partition
   graph's). TensorFlow does not trace inexpensive kernels (``Const``, ``Identity``,
   ``Reshape``, ``ExpandDims``) nor, as kernels, asynchronous ones (``_Recv``), and a
   collective's event (it has one) is not its work (:data:`ASYNCHRONOUS`): those ops get no
   cost, as ops folded into constants get none in a TF1 profile.

Each op's cost is then kept as a TF1 profile keeps it
(:class:`~simsync.tf_backend.program.step_costs.Found`: its own time and its latency from its
last input's end), in the same form (:class:`~simsync.sandbox.wire.Profile`), cached the same
way (:mod:`~simsync.tf_backend.program.cost_cache`). What a call costs beyond its ops is measured
on a ``tf.function`` of one ``NoOp`` (:func:`function_call_split`).
"""

from __future__ import annotations

import functools
import glob
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from simsync.tf_backend.program.collectives import COLLECTIVES, NCCL
from simsync.tf_backend.program.functions import FunctionLoop
from simsync.tf_backend.program.step_costs import (
    TRACED_STEPS,
    UNTRACED_STEPS,
    WARMUP_STEPS,
    Found,
    timed_block,
)

#: steps per worker in a timed round of a coordinator's steps (:func:`timed_calls`)
ROUND = 5
#: steps per worker in a traced round (:func:`xplane_rounds`): its workers start it together,
#: so its first steps race as a running loop's do not (both workers read, then both write:
#: one stale update a round), a bias of about one in this many steps of each worker's
TRACED_ROUND = 25
#: traced rounds in a cross-check's run: each one block of its staleness' interval
TRACED_ROUNDS = 5

#: the profiler's lines (threads) of tf.data, which run a dataset's own functions: their
#: nodes may share a name with the step's (a ``map``'s ``Cast``, whose hundreds of events
#: ran beside the step's ``Cast`` and read as 20 false violations of the held-out
#: "Distributed training with Keras" tutorial), and none of the step's kernels runs there
DATA_THREADS = "tf_data"
#: kernels whose event is not their work: an asynchronous kernel's event starts it, then
#: (the executor runs what it made ready in its callback) may hold its successors' too; it
#: is a sync point, its wait in no event (research/tf2.md §2)
ASYNCHRONOUS = COLLECTIVES | NCCL

__all__ = [
    "ASYNCHRONOUS",
    "DATA_THREADS",
    "function_call_split",
    "measure_function",
    "profile_function",
    "timed_calls",
    "xplane_rounds",
    "xplane_steps",
]


def profile_function(
    tf: Any,
    loop: FunctionLoop,
    data: dict[str, Any],
    steps: int = TRACED_STEPS,
    trace: bool = True,
) -> dict[str, Any]:
    """The profile of the loop's step (see the module's docstring), for its graph ``data``
    (:func:`~simsync.tf_backend.program.functions.function_graph_data`). Without ``trace``
    its steps run as traced ones would, untraced, and it holds no op's cost (a cluster's
    worker that is not the first: :func:`~simsync.tf_backend.program.cluster.traces`)."""
    devices = {op["name"]: op["device"] for op in data["ops"]}
    waits = {op["name"]: [t["op"] for t in op["inputs"]] + op["control"] for op in data["ops"]}
    found = Found()
    spans = []
    for _ in range(WARMUP_STEPS):
        loop.call()
    for records in xplane_steps(tf, loop, steps, devices, trace):  # first: see the docstring
        found.keep(records, waits)
        if records:
            spans.append(max(r["end"] for r in records) - min(r["start"] for r in records))
    walls = timed_calls(loop, UNTRACED_STEPS)
    client = {
        "wall": statistics.median(walls),
        "span": statistics.median(spans) if spans else 0.0,
        "walls": walls,
        **function_call_split(tf, coordinator=loop.coordinator),
    }
    return {
        "ops": found.ops(),
        "tensors": found.tensors,
        "shapes": found.shapes,
        "clients": {loop.thread: client},
        "steps": steps,
    }


def measure_function(
    tf: Any,
    loop: FunctionLoop,
    data: dict[str, Any],
    traced: int,
    untraced: int,
    trace: bool = True,
) -> dict[str, Any]:
    """What a cross-check compares, measured in a run of its own
    (:func:`~simsync.tf_backend.program.step_costs.measure_loop`'s form): the walls of
    ``untraced`` timed calls, then ``traced`` traced ones, each op's device, start and end;
    with a ``ClusterCoordinator``, then ``traced`` rounds of its workers' steps traced
    together (:func:`xplane_rounds`: ``rounds``)."""
    devices = {op["name"]: op["device"] for op in data["ops"]}
    for _ in range(WARMUP_STEPS if traced else 0):
        loop.call()
    # traced first, as the profile's (see the module's docstring); untraced, the calls alone
    records = xplane_steps(tf, loop, traced, devices, trace) if traced else []
    steps = [
        [[r["name"], r["device"], r["start"], r["end"], r["end"]] for r in one] for one in records
    ]
    if not trace:
        steps = []
    walls = timed_calls(loop, untraced)
    measured: dict[str, Any] = {
        "clients": {loop.thread: {"walls": walls, "steps": steps, "queues": {}}}
    }
    if loop.coordinator is not None and traced:
        measured["rounds"] = xplane_rounds(tf, loop, TRACED_ROUNDS, devices)
    return measured


def timed_calls(loop: FunctionLoop, least: int) -> list[float]:
    """:data:`WARMUP_STEPS` calls of the step, then the timed block of its calls
    (:func:`~simsync.tf_backend.program.step_costs.timed_block`). A coordinator's step is
    timed as its workers run it, all at once: rounds of :data:`ROUND` steps per worker
    scheduled, then waited for, each round's time shared among its steps per worker."""
    for _ in range(WARMUP_STEPS):
        loop.call()
    if loop.coordinator is None:
        return timed_block(loop.call, least)
    one_round = functools.partial(_round_of_steps, loop)
    return [wall / ROUND for wall in timed_block(one_round, -(-least // ROUND))]


def _round_of_steps(loop: FunctionLoop, steps: int = ROUND) -> None:
    """``steps`` steps per worker of a coordinator's, scheduled, then waited for."""
    for _ in range(steps * len(loop.workers())):
        loop.coordinator.schedule(loop.function, args=loop.args, kwargs=loop.kwargs)
    loop.coordinator.join()


def xplane_steps(
    tf: Any, loop: FunctionLoop, steps: int, devices: dict[str, str], trace: bool = True
) -> list[list[dict[str, Any]]]:
    """The records of ``steps`` traced calls (one list per step: each kernel of an op of
    ``devices``, its name, device, start and end in seconds), read off the profiler's
    XSpace (see the module's docstring); without ``trace``, ``steps`` calls untraced and
    no records."""
    return [
        [
            {
                "name": node,
                "device": devices[node],
                "start": start / 1e12,
                "end": end / 1e12,
                "done": end / 1e12,
                "outputs": {},
                "shapes": {},
            }
            for node, start, end in kernels
        ]
        for kernels in _traced(tf, steps, loop.call, devices, trace=trace)
    ]


def xplane_rounds(
    tf: Any, loop: FunctionLoop, rounds: int, devices: dict[str, str]
) -> list[dict[str, Any]]:
    """A ``ClusterCoordinator``'s workers at work together, traced: ``rounds`` rounds of
    :data:`TRACED_ROUND` steps per worker scheduled, then waited for; of each, its
    ``steps`` and its ``kernels`` in the order they started (a name and the second it
    started): those of ops of ``devices``, and the ``_Send`` kernels TensorFlow added
    between a worker and a parameter server (named by their nodes: a read's
    ``MatMul/ReadVariableOp/_5``, the updates' ``GroupCrossDeviceControlEdges_0/...``).
    TensorFlow traces a ``_Send`` in every step, but not always the read or the update
    beside it: an executor that found a kernel cheap runs it inline, untraced (of the
    250 updates of 5 rounds, 76 to 250 were traced, in processes alike, while their
    ``_Send`` were traced every time). Which worker ran a kernel the profiler does not
    say: a round's kernels are what the parent reads its staleness off
    (:func:`~simsync.trace.unpaired_staleness`)."""
    run = functools.partial(_round_of_steps, loop, TRACED_ROUND)
    steps = TRACED_ROUND * len(loop.workers())
    return [
        {
            "steps": steps,
            "kernels": [(node, start / 1e12) for node, start, _ in sorted(k, key=lambda k: k[1])],
        }
        for k in _traced(tf, rounds, run, devices, sends=True)
    ]


def _traced(
    tf: Any,
    count: int,
    run: Callable[[], None],
    devices: dict[str, str],
    sends: bool = False,
    trace: bool = True,
) -> list[list[tuple[str, int, int]]]:
    """Each of ``count`` calls of ``run``, traced: the kernels of the ops of ``devices`` that
    started in it (a node's name, its start and end in picoseconds), and with ``sends``
    every ``_Send`` kernel too. Without ``trace``: the calls alone, none traced
    (:func:`~simsync.tf_backend.program.cluster.traces`)."""
    if not trace:
        for _ in range(count):
            run()
        return [[] for _ in range(count)]
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    options = tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=2, python_tracer_level=0, device_tracer_level=0
    )
    with tempfile.TemporaryDirectory(prefix="simsync-profile-") as folder:
        tf.profiler.experimental.start(folder, options=options)
        try:
            for step in range(count):
                with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
                    run()
        finally:
            tf.profiler.experimental.stop()
        paths = glob.glob(os.path.join(folder, "plugins", "profile", "*", "*.xplane.pb"))
        planes = []
        for path in paths:
            with open(path, "rb") as handle:
                space = xplane_pb2.XSpace()
                space.ParseFromString(handle.read())
                planes += list(space.planes)
    windows: list[tuple[int, int]] = []
    kernels: list[tuple[str, int, int]] = []
    for plane in planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            if line.name.startswith(DATA_THREADS):
                continue  # a dataset's functions, not the step's (see DATA_THREADS)
            for event in line.events:
                named = plane.event_metadata[event.metadata_id].name
                start = line.timestamp_ns * 1000 + event.offset_ps  # picoseconds
                if named == "train":
                    windows.append((start, start + event.duration_ps))
                    continue
                node, colon, kind = named.rpartition(":")
                if (
                    colon
                    and (node in devices or (sends and kind == "_Send"))
                    and kind not in ASYNCHRONOUS
                ):
                    kernels.append((node, start, start + event.duration_ps))
    windows.sort()
    found: list[list[tuple[str, int, int]]] = [[] for _ in windows]
    for node, start, end in kernels:
        for index, (began, ended) in enumerate(windows):
            if began <= start < ended:
                found[index].append((node, start, end))
                break
    return found


def function_call_split(tf: Any, calls: int = 100, coordinator: Any = None) -> dict[str, float]:
    """What one call of a ``tf.function`` costs beyond its ops on this machine, over
    ``calls`` calls of one that runs a ``NoOp``, after a few to warm it up, in the form of
    :func:`~simsync.tf_backend.program.step_costs.session_run_split`: ``overhead`` its median
    wall time, ``python`` the part outside TensorFlow's ``TFE_Py_Execute`` (which releases
    the GIL while the function runs), ``cpu`` the calling thread's CPU time (lower
    quartiles, as there). With a ``ParameterServerStrategy``'s ``coordinator``: the call is
    scheduled on a worker and waited for (:func:`_scheduled_call_split`)."""
    from tensorflow.python.eager import execute

    @tf.function
    def nothing() -> None:
        tf.no_op()

    if coordinator is not None:
        return _scheduled_call_split(coordinator, nothing, calls)

    inside: list[float] = []
    real = execute.execute

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            inside.append(time.perf_counter() - started)

    for _ in range(WARMUP_STEPS):
        nothing()
    execute.execute = timed
    walls, cpus = [], []
    try:
        for _ in range(calls):
            started, cpu = time.perf_counter(), time.thread_time()
            nothing()
            walls.append(time.perf_counter() - started)
            cpus.append(time.thread_time() - cpu)
    finally:
        execute.execute = real
    python = [w - i for w, i in zip(walls, inside, strict=False)] if len(inside) == calls else walls
    return {
        "overhead": statistics.median(walls),
        "python": statistics.quantiles(python, n=4)[0],
        "cpu": statistics.quantiles(cpus, n=4)[0],
    }


def _scheduled_call_split(coordinator: Any, nothing: Any, calls: int) -> dict[str, float]:
    """:func:`function_call_split` of a call a ``ClusterCoordinator`` schedules on a worker:
    the schedule, the worker's run (a gRPC call to its server) and the result's fetch.
    ``python``: the CPU time of the thread that schedules and fetches (it holds the GIL
    but where it waits); ``cpu``: the process's (the coordinator's thread that runs the call
    and the servers' too, all in this process)."""
    for _ in range(WARMUP_STEPS):
        coordinator.schedule(nothing).fetch()
    walls, pythons, cpus = [], [], []
    for _ in range(calls):
        started, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
        coordinator.schedule(nothing).fetch()
        walls.append(time.perf_counter() - started)
        pythons.append(time.thread_time() - thread)
        cpus.append(time.process_time() - process)
    return {
        "overhead": statistics.median(walls),
        "python": statistics.quantiles(pythons, n=4)[0],
        "cpu": statistics.quantiles(cpus, n=4)[0],
    }
