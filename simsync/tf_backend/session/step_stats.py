"""Reading ``RunMetadata.step_stats``: every TensorFlow node execution once, on a CPU or a GPU.

On a CPU a traced step lists each node execution once, on the device whose executor ran it.
On a GPU the same step lists it several times (TensorFlow's ``ConvertGpuXSpaceToStepStats``):

- on the executor's device, ``/job:localhost/replica:0/task:0/device:GPU:0``: the launch, on the
  host (a GPU kernel runs later, asynchronously);
- its kernels, named ``node:Type``, on ``/device:GPU:0/stream:N`` (one lane per CUDA stream of
  the physical GPU, virtual GPUs each with their own) and again, all together, on
  ``/device:GPU:0/stream:all``;
- copies between host and GPU on ``/device:GPU:0/stream:N<MemcpyH2D>`` (``<MemcpyD2H>``,
  ``<MemcpyD2D>``), named after the ``_Send`` or ``_Recv`` node that made them, and again
  on ``/device:GPU:0/memcpy``; ``cuStreamSynchronize`` calls on ``/device:GPU:0/sync``.

:func:`read_step_stats` keeps one record per execution: the executor's, timed by its own
kernels where it launched any (the launch falls inside the executor's record; ``scheduled
micros``, when the trace has it, says when), else by the executor's record; the copies once,
as :class:`Copy`; the duplicates (``stream:all``, ``memcpy``) and the synchronisations never.
"""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["Copy", "NodeRun", "StepNodes", "read_step_stats", "tracer_lane"]

#: A lane of the GPU tracer: ``/device:GPU:0/stream:13``, ``.../stream:14<MemcpyH2D>``,
#: ``.../stream:all``, ``.../memcpy``, ``.../sync``, ``.../stream:`` (not known).
_TRACER = re.compile(r"^/device:GPU:(?P<gpu>\d+)/(?P<lane>stream:(?P<stream>\w*)(<(?P<copy>\w+)>)?"
                     r"|memcpy|sync)$")  # fmt: skip
_BYTES = re.compile(r"\bsize:(\d+)")

TimedBy = Literal["kernels", "executor"]


@dataclass(frozen=True)
class NodeRun:
    """One execution of a TensorFlow node: its name, its executor's device and its span in
    microseconds of wall clock (as the trace gives them); ``timed_by`` says whether the span
    is its GPU kernels' or the executor's record. ``done`` is when its outputs existed: its
    kernel's end, before the executor's own work for it (handing its outputs on, recording
    it), which its successors may overlap: a thread preempted in that work ended the node
    81 us after its successor had started on another thread, measured here."""

    name: str
    device: str
    start: float
    end: float
    timed_by: TimedBy
    done: float = 0.0


@dataclass(frozen=True)
class Copy:
    """One copy between the host and a GPU (or within a GPU): the node that made it (a
    ``_Send``, ``_Recv`` or the runtime's own name), its direction (``MemcpyH2D``,
    ``MemcpyD2H``, ``MemcpyD2D``, ``MemcpyP2P``), its physical GPU, its bytes (0: not said)
    and its span in microseconds of wall clock."""

    name: str
    direction: str
    gpu: int
    nbytes: int
    start: float
    end: float


@dataclass(frozen=True)
class StepNodes:
    """A traced step, each execution once, and its copies."""

    nodes: list[NodeRun]
    copies: list[Copy]

    @property
    def on_gpu(self) -> bool:
        """Whether any node was timed by its GPU kernels."""
        return any(node.timed_by == "kernels" for node in self.nodes)


def tracer_lane(device: str) -> tuple[str, str | None] | None:
    """``(lane, copy)`` of a GPU tracer's device name, None for an executor's device.

    >>> tracer_lane("/device:GPU:0/stream:13"), tracer_lane("/device:GPU:0/stream:14<MemcpyH2D>")
    (('stream:13', None), ('stream:14<MemcpyH2D>', 'MemcpyH2D'))
    >>> tracer_lane("/device:GPU:0/stream:all"), tracer_lane("/job:ps/task:0/device:GPU:0")
    (('stream:all', None), None)
    """
    match = _TRACER.match(device)
    return None if match is None else (match["lane"], match["copy"])


def read_step_stats(step_stats: Any) -> StepNodes:
    """Every node execution of a traced step once, and every copy once (see the module)."""
    executions: dict[str, list[tuple[float, float, float, str]]] = defaultdict(list)
    kernels: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    copies: list[Copy] = []
    for device in step_stats.dev_stats:
        lane = tracer_lane(device.device)
        if lane is None:
            for node in device.node_stats:
                start = node.all_start_micros
                end = start + node.all_end_rel_micros
                done = start + node.op_end_rel_micros if node.op_end_rel_micros else end
                executions[node.node_name].append((start, end, min(done, end), device.device))
            continue
        name, copy = lane
        if name in ("stream:all", "memcpy", "sync", "stream:"):
            continue  # the same events again, or no node's
        gpu = int(_TRACER.match(device.device)["gpu"])  # type: ignore[index]
        for node in device.node_stats:
            start = node.all_start_micros
            end = start + node.all_end_rel_micros
            owner = node.node_name.rpartition(":")[0] or node.node_name
            if copy is not None:
                found = _BYTES.search(node.timeline_label)
                nbytes = int(found.group(1)) if found else 0
                copies.append(Copy(owner, copy, gpu, nbytes, start, end))
            else:
                kernels[owner].append((node.scheduled_micros or start, start, end))
    nodes = [
        run
        for name, runs in executions.items()
        for run in _timed(name, sorted(runs), sorted(kernels.get(name, ())))
    ]
    nodes.sort(key=lambda n: (n.start, n.name))
    copies.sort(key=lambda c: (c.start, c.name))
    return StepNodes(nodes, copies)


def _timed(
    name: str,
    runs: list[tuple[float, float, float, str]],
    kernels: list[tuple[float, float, float]],
) -> list[NodeRun]:
    """The executions of one node, each timed by the kernels it launched if any: a kernel
    belongs to the last execution that started before its launch (the executions of a node
    in a loop launch one after another)."""
    starts = [start for start, _, _, _ in runs]
    spans: list[list[float]] = [[] for _ in runs]
    for launched, start, end in kernels:
        index = max(bisect.bisect_right(starts, launched) - 1, 0)
        spans[index] += [start, end]
    timed = []
    for (start, end, done, device), span in zip(runs, spans, strict=True):
        if span:
            timed.append(NodeRun(name, device, min(span), max(span), "kernels", max(span)))
        else:
            timed.append(NodeRun(name, device, start, end, "executor", done))
    return timed
