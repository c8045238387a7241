"""From TensorFlow's ``RunMetadata.step_stats`` to simsync's Trace.

The step's node executions are read once each (:mod:`simsync.tf_backend.session.step_stats`: on a
GPU, timed by their kernels). Each TensorFlow node maps to the IR op whose name is the longest
prefix of its name scope. An IR op's span is from its first node's start to its last node's end, up
to and including its gate (``done``); the ``output/`` identities after the gate hand the results on
and are not part of the span (see :mod:`simsync.tf_backend.session.lower`). Nodes that are not part
of any IR op are sorted into kinds: the runtime's own (``_SOURCE``, ``_SINK``, and copies between
devices, named ``.../_12``), hand-offs, state and feeds (``variables/``, ``versions/``,
``feeds/``), and *unmapped*: anything else, which the cross-check reports. On a GPU an IR op is
timed by the kernels of its nodes (those that launched any), on the CPU by its nodes' executor
records; the census counts which. A copy between the host and a GPU whose node belongs to an IR op
is a :class:`~simsync.trace.TransferRecord` from that op to its consumer on the other device.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from simsync.ir import Graph
from simsync.tf_backend.session.step_stats import Copy, NodeRun, read_step_stats
from simsync.trace import OpRecord, TransferRecord

__all__ = ["NodeCensus", "classify", "owner", "traced_step"]

INFRASTRUCTURE = {"variables": "state", "versions": "state", "locks": "state", "feeds": "feeds"}


@dataclass
class NodeCensus:
    """How many TensorFlow node executions fell in each kind, over the traced steps."""

    mapped: int = 0
    infrastructure: Counter[str] = field(default_factory=Counter)
    unmapped: Counter[str] = field(default_factory=Counter)
    #: IR op records per kind, by what timed them: ``kernels`` (a GPU's) or ``executor``
    timed_by: dict[str, Counter[str]] = field(default_factory=dict)

    def timing_source(self, kind: str) -> str:
        """What timed the ops of ``kind``: ``kernels``, ``executor``, or ``both``."""
        sources = sorted(self.timed_by.get(kind, Counter()))
        return sources[0] if len(sources) == 1 else "both" if sources else ""


def classify(name: str, ir_ops: set[str]) -> tuple[str, str]:
    """``("op", ir_op)`` for a node of an IR op, else ``(kind, name)``.

    >>> ops = {"tower_0/loss", "average_gradients"}
    >>> classify("tower_0/loss/MatMul", ops), classify("average_gradients", ops)
    (('op', 'tower_0/loss'), ('op', 'average_gradients'))
    >>> classify("_SOURCE", ops), classify("tower_0/loss/output/Identity/_7", ops)
    (('runtime', '_SOURCE'), ('runtime', 'tower_0/loss/output/Identity/_7'))
    >>> classify("tower_0/loss/output/Identity", ops), classify("tower_0/loss/done", ops)
    (('handoff', 'tower_0/loss/output/Identity'), ('op', 'tower_0/loss'))
    >>> classify("feeds/tower_0/x", ops), classify("Mystery", ops)
    (('feeds', 'feeds/tower_0/x'), ('unmapped', 'Mystery'))
    """
    parts = name.split("/")
    if name.startswith(("_", "edge_")) or parts[-1].startswith("_"):
        return "runtime", name
    for cut in range(len(parts), 0, -1):
        prefix = "/".join(parts[:cut])
        if prefix in ir_ops:
            return ("handoff", name) if parts[cut : cut + 1] == ["output"] else ("op", prefix)
    return INFRASTRUCTURE.get(parts[0], "unmapped"), name


def owner(name: str, ir_ops: set[str]) -> str | None:
    """The IR op a TensorFlow node belongs to (its longest name-scope prefix), None if none.

    >>> owner("tower_0/loss/output/Identity/_7", {"tower_0/loss"}), owner("_SOURCE", set())
    ('tower_0/loss', None)
    """
    parts = name.split("/")
    for cut in range(len(parts), 0, -1):
        if "/".join(parts[:cut]) in ir_ops:
            return "/".join(parts[:cut])
    return None


def traced_step(
    step_stats: Any,
    graph: Graph,
    step: int,
    base: float,
    census: NodeCensus,
    losses: dict[str, float],
    client: str = "main",
) -> tuple[list[OpRecord], list[TransferRecord]]:
    """One :class:`OpRecord` per IR op that ran in this step, and one
    :class:`TransferRecord` per copy between host and GPU of an IR op's result; times
    relative to ``base``."""
    ir_ops = set(graph.nx.nodes)
    step_nodes = read_step_stats(step_stats)
    nodes: dict[str, list[NodeRun]] = {}
    for run in step_nodes.nodes:
        kind, key = classify(run.name, ir_ops)
        if kind != "op":
            target = census.unmapped if kind == "unmapped" else census.infrastructure
            target[key if kind == "unmapped" else kind] += 1
            continue
        census.mapped += 1
        nodes.setdefault(key, []).append(run)
    spans: dict[str, tuple[float, float]] = {}
    done: dict[str, float] = {}  # when its outputs existed (NodeRun.done)
    for name, runs in nodes.items():
        timed = [r for r in runs if r.timed_by == "kernels"] or runs
        spans[name] = (
            min(r.start for r in timed) * 1e-6 - base,
            max(r.end for r in timed) * 1e-6 - base,
        )
        done[name] = max(r.done or r.end for r in timed) * 1e-6 - base
        census.timed_by.setdefault(graph.op(name).kind, Counter())[timed[0].timed_by] += 1
    records = []
    for name, (start, end) in spans.items():
        op = graph.op(name)
        arrivals = tuple((t.src, spans[t.src][1]) for t in graph.inputs(name) if t.src in spans)
        ready = max((t for _, t in arrivals), default=start)
        records.append(
            OpRecord(
                name,
                op.kind,
                op.devices,
                client,
                step,
                ready,
                start,
                end,
                arrivals,
                losses.get(name),
                done=done[name],
            )
        )
    records.sort(key=lambda r: (r.start, r.op))
    transfers = [
        transfer
        for copy in step_nodes.copies
        if (transfer := _transfer(copy, graph, ir_ops, spans, client, step, base, census))
    ]
    return records, transfers


def _transfer(
    copy: Copy,
    graph: Graph,
    ir_ops: set[str],
    spans: dict[str, tuple[float, float]],
    client: str,
    step: int,
    base: float,
    census: NodeCensus,
) -> TransferRecord | None:
    """A copy of an IR op's result (its hand-off, ``output/``) as a transfer to the consumer
    on another device that started first after it; None (and counted) for other copies: the
    runtime's own (feeds) and those inside an op (a loop's control on a GPU)."""
    sender = copy.name.rpartition("/")[0] if "/_" in copy.name else copy.name
    kind, _ = classify(sender, ir_ops)
    src = owner(sender, ir_ops) if kind == "handoff" else None  # an op's result, handed on
    start, end = copy.start * 1e-6 - base, copy.end * 1e-6 - base
    consumers = [
        t.dst
        for t in graph.outputs(src)
        if not t.control and graph.op(t.dst).device != graph.op(src).device
    ] if src is not None else []  # fmt: skip
    if src is None or not consumers:  # the runtime's, or inside an op (a loop's control)
        census.infrastructure["copies"] += 1
        return None
    dst = min(consumers, key=lambda d: (spans[d][0] < end, abs(spans[d][0] - end)) if d in spans
              else (True, float("inf")))  # fmt: skip
    nbytes = copy.nbytes or next(t.nbytes for t in graph.outputs(src) if t.dst == dst)
    source, target = graph.op(src), graph.op(dst)
    return TransferRecord(
        src, dst, source.device, target.device, nbytes, client, step, start, end, end
    )
