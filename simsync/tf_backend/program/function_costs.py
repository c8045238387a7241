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
   is an op of the step's graph is a kernel of that op (the type is the kernel's, which
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

import glob
import os
import statistics
import tempfile
import time
from typing import Any

from simsync.tf_backend.program.functions import COLLECTIVES, NCCL, FunctionLoop
from simsync.tf_backend.program.step_costs import (
    TRACED_STEPS,
    UNTRACED_STEPS,
    WARMUP_STEPS,
    Found,
    timed_block,
)

#: kernels whose event is not their work: an asynchronous kernel's event starts it, then
#: (the executor runs what it made ready in its callback) may hold its successors' too; it
#: is a sync point, its wait in no event (research/tf2.md §2)
ASYNCHRONOUS = COLLECTIVES | NCCL

__all__ = [
    "ASYNCHRONOUS",
    "function_call_split",
    "measure_function",
    "profile_function",
    "timed_calls",
    "xplane_steps",
]


def profile_function(
    tf: Any, loop: FunctionLoop, data: dict[str, Any], steps: int = TRACED_STEPS
) -> dict[str, Any]:
    """The profile of the loop's step (see the module's docstring), for its graph ``data``
    (:func:`~simsync.tf_backend.program.functions.function_graph_data`)."""
    devices = {op["name"]: op["device"] for op in data["ops"]}
    waits = {op["name"]: [t["op"] for t in op["inputs"]] + op["control"] for op in data["ops"]}
    found = Found()
    spans = []
    for _ in range(WARMUP_STEPS):
        loop.call()
    for records in xplane_steps(tf, loop, steps, devices):  # first: see the docstring
        found.keep(records, waits)
        if records:
            spans.append(max(r["end"] for r in records) - min(r["start"] for r in records))
    walls = timed_calls(loop, UNTRACED_STEPS)
    client = {
        "wall": statistics.median(walls),
        "span": statistics.median(spans) if spans else 0.0,
        "walls": walls,
        **function_call_split(tf),
    }
    return {
        "ops": found.ops(),
        "tensors": found.tensors,
        "shapes": found.shapes,
        "clients": {loop.thread: client},
        "steps": steps,
    }


def measure_function(
    tf: Any, loop: FunctionLoop, data: dict[str, Any], traced: int, untraced: int
) -> dict[str, Any]:
    """What a cross-check compares, measured in a run of its own
    (:func:`~simsync.tf_backend.program.step_costs.measure_loop`'s form): the walls of
    ``untraced`` timed calls, then ``traced`` traced ones, each op's device, start and end."""
    devices = {op["name"]: op["device"] for op in data["ops"]}
    for _ in range(WARMUP_STEPS if traced else 0):
        loop.call()
    steps = [  # traced first, as the profile's (see the module's docstring)
        [[r["name"], r["device"], r["start"], r["end"], r["end"]] for r in records]
        for records in (xplane_steps(tf, loop, traced, devices) if traced else [])
    ]
    walls = timed_calls(loop, untraced)
    return {"clients": {loop.thread: {"walls": walls, "steps": steps, "queues": {}}}}


def timed_calls(loop: FunctionLoop, least: int) -> list[float]:
    """:data:`WARMUP_STEPS` calls of the step, then the timed block of its calls
    (:func:`~simsync.tf_backend.program.step_costs.timed_block`)."""
    for _ in range(WARMUP_STEPS):
        loop.call()
    return timed_block(loop.call, least)


def xplane_steps(
    tf: Any, loop: FunctionLoop, steps: int, devices: dict[str, str]
) -> list[list[dict[str, Any]]]:
    """The records of ``steps`` traced calls (one list per step: each kernel of an op of
    ``devices``, its name, device, start and end in seconds), read off the profiler's
    XSpace (see the module's docstring)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    options = tf.profiler.experimental.ProfilerOptions(
        host_tracer_level=2, python_tracer_level=0, device_tracer_level=0
    )
    space = xplane_pb2.XSpace()
    with tempfile.TemporaryDirectory(prefix="simsync-profile-") as folder:
        tf.profiler.experimental.start(folder, options=options)
        try:
            for step in range(steps):
                with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
                    loop.call()
        finally:
            tf.profiler.experimental.stop()
        paths = glob.glob(os.path.join(folder, "plugins", "profile", "*", "*.xplane.pb"))
        if not paths:
            return []
        with open(paths[0], "rb") as handle:
            space.ParseFromString(handle.read())
    windows: list[tuple[int, int]] = []
    kernels: list[tuple[str, int, int]] = []
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            for event in line.events:
                named = plane.event_metadata[event.metadata_id].name
                start = line.timestamp_ns * 1000 + event.offset_ps  # picoseconds
                if named == "train":
                    windows.append((start, start + event.duration_ps))
                    continue
                node, colon, kind = named.rpartition(":")
                if colon and node in devices and kind not in ASYNCHRONOUS:
                    kernels.append((node, start, start + event.duration_ps))
    windows.sort()
    found: list[list[dict[str, Any]]] = [[] for _ in windows]
    for node, start, end in kernels:
        for index, (began, ended) in enumerate(windows):
            if began <= start < ended:
                found[index].append(
                    {
                        "name": node,
                        "device": devices[node],
                        "start": start / 1e12,
                        "end": end / 1e12,
                        "done": end / 1e12,
                        "outputs": {},
                        "shapes": {},
                    }
                )
                break
    return found


def function_call_split(tf: Any, calls: int = 100) -> dict[str, float]:
    """What one call of a ``tf.function`` costs beyond its ops on this machine, over
    ``calls`` calls of one that runs a ``NoOp``, after a few to warm it up, in the form of
    :func:`~simsync.tf_backend.program.step_costs.session_run_split`: ``overhead`` its median
    wall time, ``python`` the part outside TensorFlow's ``TFE_Py_Execute`` (which releases
    the GIL while the function runs), ``cpu`` the calling thread's CPU time (lower
    quartiles, as there)."""
    from tensorflow.python.eager import execute

    @tf.function
    def nothing() -> None:
        tf.no_op()

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
