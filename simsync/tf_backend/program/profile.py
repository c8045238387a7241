"""Costs of a program's own graph from a few traced steps (in the sandbox's child).

For each client of the loop in turn (its fetches and feeds, alone), a few untraced runs warm
the session up, then runs traced with ``RunOptions(trace_level=FULL_TRACE)`` alternate with
untraced ones. ``step_stats`` give each executed op's device and when it ended; its cost is
its *latency*: from when its last input was ready in that step (or the step began) to its end,
which holds the kernel, the executor's hand-over to it and any wait for a core on this machine
(on a 2-core machine running 17 logical devices, most of a small op's time). Each output's
allocated bytes are kept too; the untraced
runs give the wall time of a ``sess.run``. What a run costs beyond its ops (``sess.run``'s own
work, feeding, fetching) is the median wall time less the median span of the traced steps:
the client's overhead.

The result is a plain dict (:func:`profile_loop`), the form the cache keeps
(:mod:`simsync.tf_backend.program.costs`):

``ops``
    ``{op name: {"device": "/gpu:0", "seconds": median}}`` for every op a traced step ran;
``tensors``
    ``{"op:slot": bytes}`` as allocated;
``clients``
    ``{thread: {"overhead": s, "wall": median s, "span": median s, "walls": [...]}}``.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from simsync.tf_backend.program.capture import Loop, program_device
from simsync.tf_backend.session.step_stats import read_step_stats, tracer_lane

__all__ = ["TRACED_STEPS", "WARMUP_STEPS", "profile_loop", "step_stats_records"]

#: traced steps per client (and as many untraced ones, interleaved)
TRACED_STEPS = 5
WARMUP_STEPS = 2


def profile_loop(tf: Any, loop: Loop, steps: int = TRACED_STEPS) -> dict[str, Any]:
    """Trace ``steps`` runs of each looping client; see the module's docstring."""
    durations: dict[str, list[float]] = {}
    devices: dict[str, str] = {}
    tensors: dict[str, int] = {}
    clients: dict[str, Any] = {}
    run = loop.session.run
    waits = {
        op.name: [t.op.name for t in op.inputs] + [c.name for c in op.control_inputs]
        for op in loop.graph.get_operations()
    }
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    for thread, call in loop.calls.items():
        for _ in range(WARMUP_STEPS):
            run(call.raw_fetches, call.feed_dict)
        walls, spans = [], []
        for _ in range(steps):
            started = time.perf_counter()
            run(call.raw_fetches, call.feed_dict)
            walls.append(time.perf_counter() - started)
            metadata = tf.compat.v1.RunMetadata()
            run(call.raw_fetches, call.feed_dict, options=options, run_metadata=metadata)
            records = step_stats_records(metadata.step_stats)
            _latencies(records, waits)
            if records:
                spans.append(max(r["end"] for r in records) - min(r["start"] for r in records))
            for record in records:
                durations.setdefault(record["name"], []).append(record["end"] - record["start"])
                devices[record["name"]] = record["device"]
                tensors.update(record["outputs"])
        wall = statistics.median(walls)
        span = statistics.median(spans) if spans else 0.0
        clients[thread] = {
            "overhead": max(0.0, wall - span),
            "wall": wall,
            "span": span,
            "walls": walls,
        }
    names = set(op.name for op in loop.graph.get_operations())
    return {
        "ops": {
            name: {"device": devices[name], "seconds": statistics.median(seconds)}
            for name, seconds in durations.items()
            if name in names
        },
        "tensors": tensors,
        "clients": clients,
        "steps": steps,
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
