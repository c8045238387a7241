"""From TensorFlow's ``RunMetadata.step_stats`` to simsync's Trace.

Each TensorFlow node maps to the IR op whose name is the longest prefix of its name scope. An IR
op's span is from its first node's start to its last node's end, up to and including its gate
(``done``); the ``output/`` identities after the gate hand the results on and are not part of the
span (see :mod:`simsync.tf_backend.session.lower`). Nodes that are not part of any IR op are
sorted into kinds: the runtime's own (``_SOURCE``, ``_SINK``, and copies between devices, named
``.../_12``), hand-offs, state and feeds (``variables/``, ``versions/``, ``feeds/``), and
*unmapped*: anything else, which the cross-check reports.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from simsync.ir import Graph
from simsync.trace import OpRecord

__all__ = ["NodeCensus", "classify", "op_records"]

INFRASTRUCTURE = {"variables": "state", "versions": "state", "locks": "state", "feeds": "feeds"}


@dataclass
class NodeCensus:
    """How many TensorFlow node executions fell in each kind, over the traced steps."""

    mapped: int = 0
    infrastructure: Counter[str] = field(default_factory=Counter)
    unmapped: Counter[str] = field(default_factory=Counter)


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


def op_records(
    step_stats: Any,
    graph: Graph,
    step: int,
    base: float,
    census: NodeCensus,
    losses: dict[str, float],
    client: str = "main",
) -> list[OpRecord]:
    """One :class:`OpRecord` per IR op that ran in this step; times relative to ``base``."""
    ir_ops = set(graph.nx.nodes)
    spans: dict[str, list[float]] = {}
    for device in step_stats.dev_stats:
        for node in device.node_stats:
            kind, key = classify(node.node_name, ir_ops)
            if kind != "op":
                target = census.unmapped if kind == "unmapped" else census.infrastructure
                target[key if kind == "unmapped" else kind] += 1
                continue
            census.mapped += 1
            start = node.all_start_micros * 1e-6 - base
            end = start + node.all_end_rel_micros * 1e-6
            span = spans.setdefault(key, [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)
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
            )
        )
    records.sort(key=lambda r: (r.start, r.op))
    return records
