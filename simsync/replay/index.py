"""What the replay reads off a graph alone: the same for every trace of it, so made once per
graph and kept in the graph's memo (:meth:`simsync.ir.Graph.memo`), never changed.

The replay (:mod:`simsync.replay.values`) is this index and a small state of its own: the
variables' versions, the runs being evaluated, the losses, what the trace says was read and
taken. A what-if, a cross-check or a lesson that replays one graph several times (other
seeds, other traces) finds the index made.
"""

from __future__ import annotations

from dataclasses import dataclass

from simsync.ir import Graph, Op, run_orders
from simsync.kinds import kind_of
from simsync.kinds.contract import Inputs, slots
from simsync.kinds.dequeue import batch_positions
from simsync.kinds.registry import OpKind

__all__ = ["ReplayIndex", "replay_index"]


@dataclass(frozen=True)
class ReplayIndex:
    """A graph as the replay reads it (plain dictionaries, for speed; none is changed)."""

    #: per client, its position among the graph's clients (the batches' stream)
    client_index: dict[str, int]
    #: per client, the ops its run runs
    ops: dict[str, set[str]]
    #: per op, its data inputs' ops by name
    inputs: dict[str, list[str]]
    op_of: dict[str, Op]
    #: the variables that hold numbers (not counters)
    numbered: frozenset[str]
    #: per op, the variables it writes that hold numbers
    written: dict[str, tuple[str, ...]]
    kind_of: dict[str, OpKind]
    #: per op: the op, its data inputs' names and ops, their positions by role (what the
    #: rules ask for)
    about: dict[str, tuple[Op, list[str], list[Op], dict[str | None, tuple[int, ...]]]]
    #: per op without data inputs, its (empty) inputs, made once
    no_inputs: dict[str, Inputs]
    #: per client, the position of each tower's batch among the run's batches
    positions: dict[str, dict[int, int]]
    parameter_of: dict[str, str]
    trainable: dict[str, bool]
    #: per op, whether it reads variables that hold numbers (the versions its run read)
    reads_model: dict[str, bool]
    #: per client, how many of its run's ops read them
    model_reads: dict[str, int]


def replay_index(graph: Graph) -> ReplayIndex:
    """The index of ``graph``, made once and kept until its ops, tensors, clients or
    variables change."""
    key = ("replay index", tuple(graph.clients), tuple(graph.variables.items()))
    return graph.memo(key, lambda: _index(graph))


def _index(graph: Graph) -> ReplayIndex:
    orders = run_orders(graph, [client.fetches for client in graph.clients])
    ops = {c.name: set(order) for c, order in zip(graph.clients, orders, strict=True)}
    inputs = {
        op.name: [t.src for t in graph.inputs(op.name) if not t.control] for op in graph.ops()
    }
    numbered = frozenset(name for name, v in graph.variables.items() if not v.counter)
    op_of = {op.name: op for op in graph.ops()}
    kinds = {name: kind_of(op.kind) for name, op in op_of.items()}
    froms = {name: [op_of[src] for src in srcs] for name, srcs in inputs.items()}
    positions_by_role = {
        name: slots([kinds[src].provides for src in srcs]) for name, srcs in inputs.items()
    }
    reads_model = {name: any(v in numbered for v in op.reads) for name, op in op_of.items()}
    return ReplayIndex(
        client_index={client.name: i for i, client in enumerate(graph.clients)},
        ops=ops,
        inputs=inputs,
        op_of=op_of,
        numbered=numbered,
        written={name: tuple(v for v in op.writes if v in numbered) for name, op in op_of.items()},
        kind_of=kinds,
        about={
            name: (op, inputs[name], froms[name], positions_by_role[name])
            for name, op in op_of.items()
        },
        no_inputs={
            name: Inputs.of(op, [], [], positions_by_role[name])
            for name, op in op_of.items()
            if not inputs[name]
        },
        positions={
            client: batch_positions(op_of[n] for n in names) for client, names in ops.items()
        },
        parameter_of={name: v.model_parameter for name, v in graph.variables.items()},
        trainable={name: v.trainable for name, v in graph.variables.items()},
        reads_model=reads_model,
        model_reads={
            client: sum(1 for name in names if reads_model[name]) for client, names in ops.items()
        },
    )
