"""Static analysis of a graph: what can run together, where towers meet, what is critical.

Plain functions over a :class:`~simsync.ir.graph.Graph`, in the manner of networkx algorithms.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial

import networkx as nx

from simsync.errors import GraphError
from simsync.ir.costs import expected_duration, transfer_duration
from simsync.ir.graph import Graph

#: For an op that gets from a resource, the ops that put into it (its inputs through it).
Feeds = Mapping[str, Sequence[str]]

__all__ = [
    "Feeds",
    "counter_readers",
    "critical_path",
    "generations",
    "input_towers",
    "lane_unit",
    "meeting_points",
    "own_tower",
    "racing_clients",
    "run_order",
    "run_orders",
    "same_work",
    "topological_order",
    "tower_dependencies",
    "tower_label",
    "tower_scope",
    "tower_work",
    "updating_clients",
]


def counter_readers(graph: Graph) -> frozenset[str]:
    """The ops that read counters only (a global or local step), not the model: a run's read
    of the model is its first read of another op (a program's ``ReadVariableOp`` of its local
    step may run before it).

    >>> from simsync.ir.objects import Device, Op, Variable
    >>> g = Graph()
    >>> g.add_device(Device("/cpu:0"))
    >>> g.add_variable(Variable("w", "/cpu:0", trainable=True))
    >>> g.add_variable(Variable("step", "/cpu:0", trainable=False))
    >>> _ = g.add_op(Op("read_step", "generic", "/cpu:0", reads=("step",)))
    >>> _ = g.add_op(Op("read_w", "generic", "/cpu:0", reads=("w", "step")))
    >>> sorted(counter_readers(g))
    ['read_step']
    """
    return frozenset(
        op.name
        for op in graph.ops()
        if op.reads and all(graph.variables[v].counter for v in op.reads)
    )


def topological_order(graph: Graph) -> list[str]:
    """The ops in an order where every op comes after its inputs (sorted once per graph, see
    :meth:`~simsync.ir.graph.Graph.memo`).

    Raises
    ------
    GraphError
        If the graph has a cycle (the cycle is named).

    >>> from simsync.ir.objects import Device, Op
    >>> g = Graph()
    >>> g.add_device(Device("/gpu:0"))
    >>> a, b = g.add_op(Op("a", "forward", "/gpu:0")), g.add_op(Op("b", "forward", "/gpu:0"))
    >>> g.connect(a, b, a)
    >>> topological_order(g)
    Traceback (most recent call last):
    ...
    simsync.errors.GraphError: the graph has a cycle: a -> b -> a
    """
    return list(graph.memo("topological_order", lambda: tuple(_sort(graph))))


def _sort(graph: Graph) -> list[str]:
    try:
        return list(nx.topological_sort(graph.nx))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(graph.nx)
        path = " -> ".join([*(edge[0] for edge in cycle), cycle[0][0]])
        raise GraphError(f"the graph has a cycle: {path}") from None


def generations(graph: Graph) -> list[list[str]]:
    """Ops grouped by topological generation: each group depends only on earlier ones, so the
    ops of one generation may run at the same time (on different devices).

    >>> from simsync.patterns import tiny_example
    >>> generations(tiny_example())[0]
    ['tower_0/read_variables', 'tower_0/dequeue', 'tower_1/read_variables', 'tower_1/dequeue']
    """
    topological_order(graph)  # a cycle is a GraphError, not networkx's own
    return [list(g) for g in nx.topological_generations(graph.nx)]


def run_order(graph: Graph, fetches: tuple[str, ...]) -> list[str]:
    """The ops one ``sess.run(fetches)`` executes, in a topological order: the fetches and all
    their ancestors (TensorFlow prunes everything else).

    >>> from simsync.patterns import tiny_example
    >>> run_order(tiny_example(), ("tower_0/gradients",))
    ['tower_0/read_variables', 'tower_0/dequeue', 'tower_0/loss', 'tower_0/gradients']
    """
    return run_orders(graph, [fetches])[0]


def run_orders(graph: Graph, fetch_sets: Sequence[tuple[str, ...]]) -> list[list[str]]:
    """:func:`run_order` for many clients at once, sorting the graph only once: with N
    clients of a few ops each, N sorts of the whole graph would be quadratic. Each fetch set's
    order is computed once per graph (the engine, the replay and the summary all ask).

    >>> from simsync.patterns import tiny_example
    >>> orders = run_orders(tiny_example(), [("tower_0/loss",), ("tower_1/gradients",)])
    >>> [len(order) for order in orders]
    [3, 4]
    """
    return [
        list(graph.memo(("run_order", tuple(fetches)), partial(_run_order, graph, fetches)))
        for fetches in fetch_sets
    ]


def _run_order(graph: Graph, fetches: tuple[str, ...]) -> tuple[str, ...]:
    position = graph.memo("topological_position", partial(_positions, graph))
    for fetch in fetches:
        graph.op(fetch)
    needed: set[str] = set(fetches)
    frontier = list(fetches)
    while frontier:  # one walk up from all fetches at once: linear in what is needed
        for parent in graph.nx.predecessors(frontier.pop()):
            if parent not in needed:
                needed.add(parent)
                frontier.append(parent)
    return tuple(sorted(needed, key=position.__getitem__))


def _positions(graph: Graph) -> dict[str, int]:
    """Each op's place in :func:`topological_order`."""
    return {name: i for i, name in enumerate(topological_order(graph))}


def tower_dependencies(graph: Graph) -> dict[str, frozenset[int]]:
    """For every op, the towers whose ops it depends on (itself included); computed once per
    graph.

    >>> from simsync.patterns import tiny_example
    >>> sorted(tower_dependencies(tiny_example())["average_gradients"])
    [0, 1]
    """
    return dict(_towers(graph))


def tower_work(graph: Graph) -> dict[str, int]:
    """Each op's tower, for the ops that are a tower's work: its own ops, and the ops outside
    every tower that depend on it alone (each tower's ``ExpandDims`` before
    ``average_gradients``' ``concat``, an asynchronous thread's apply).

    >>> from simsync.patterns import tiny_example
    >>> work = tower_work(tiny_example())
    >>> work["tower_1/loss"], "average_gradients" in work
    (1, False)
    """
    work = {}
    for name, towers in _towers(graph).items():
        own = graph.op(name).tower
        if own is not None:
            work[name] = own
        elif len(towers) == 1:
            work[name] = next(iter(towers))
    return work


#: a name's own part, without TensorFlow's index of a repeated name (``MatMul_1``) or a
#: what-if's copy's tower (``ExpandDims [tower_3]``)
_NUMBERED = re.compile(r"(_\d+)?( \[tower_\d+\])?$")


def same_work(graph: Graph) -> list[tuple[str, ...]]:
    """The towers' copies of the same work: groups of ops, one in each of two or more towers,
    alike in kind, in their name's own part and in where they stand among their tower's ops
    (what each takes in and gives on, to any depth), and alone in their tower so; an op with
    no such copy (tower 0's shared work, a tower built differently) is in no group. A
    tower's ops are its work (:func:`tower_work`: its own, and those outside it that depend
    on it alone, as each tower's ``ExpandDims`` before the averaging). Towers
    found by scope (``tower_1/MatMul``) or by device (a replica's ``replica_1/...``, TF's
    ``update_1``) match alike.

    >>> from simsync.ir import Op, Tensor
    >>> g = Graph()
    >>> for i, prefix in enumerate(("", "replica_1/")):
    ...     _ = g.add_op(Op(f"{prefix}MatMul", "forward", f"/cpu:{i}", tower=i))
    ...     _ = g.add_op(Op(f"{prefix}MatMul_1", "backward", f"/cpu:{i}", tower=i))
    ...     g.add_tensor(Tensor(f"{prefix}MatMul", f"{prefix}MatMul_1", 4))
    >>> _ = g.add_op(Op("Assert", "generic", "/cpu:0", tower=0))
    >>> same_work(g)
    [('MatMul', 'replica_1/MatMul'), ('MatMul_1', 'replica_1/MatMul_1')]
    """
    towers = tower_work(graph)
    if len(set(towers.values())) < 2:
        return []
    label = {
        name: hash((graph.op(name).kind, _NUMBERED.sub("", name.rsplit("/", 1)[-1])))
        for name in towers
    }
    classes = len(set(label.values()))
    for _ in range(len(towers)):  # refined until the classes stop splitting
        label = {name: _refined(graph, name, label, towers) for name in towers}
        now = len(set(label.values()))
        if now == classes:
            break
        classes = now
    groups: dict[int, dict[int, list[str]]] = {}
    for name, tower in towers.items():
        groups.setdefault(label[name], {}).setdefault(tower, []).append(name)
    return sorted(
        tuple(names[0] for _, names in sorted(each.items()))
        for each in groups.values()
        if len(each) > 1 and all(len(names) == 1 for names in each.values())
    )


def _refined(graph: Graph, name: str, label: dict[str, int], towers: dict[str, int]) -> int:
    """``name``'s label with its neighbours' and the bytes of the tensors between them (an op
    outside the towers by its name: the same op for every tower)."""

    def of(other: str) -> object:
        return label[other] if other in towers else other

    ins = sorted(hash((of(t.src), t.nbytes)) for t in graph.inputs(name))
    outs = sorted(hash((of(t.dst), t.nbytes)) for t in graph.outputs(name))
    return hash((label[name], tuple(ins), tuple(outs)))


def _towers(graph: Graph) -> dict[str, frozenset[int]]:
    """:func:`tower_dependencies`, computed once per graph (not to be changed)."""
    towers: dict[str, frozenset[int]] = graph.memo(
        "tower_dependencies", partial(_tower_dependencies, graph)
    )
    return towers


def _tower_dependencies(graph: Graph) -> dict[str, frozenset[int]]:
    towers: dict[str, frozenset[int]] = {}
    for name in topological_order(graph):
        own = graph.op(name).tower
        found = frozenset() if own is None else frozenset({own})
        for parent in graph.nx.predecessors(name):
            found |= towers[parent]
        towers[name] = found
    return towers


def lane_unit(graph: Graph) -> str:
    """What one tower's share of the graph is called: ``tower`` in synchronous graphs,
    ``worker`` in asynchronous and SyncReplicas ones (the scope of the ops that belong to
    one); computed once per graph.

    >>> from simsync.patterns import tiny_example
    >>> lane_unit(tiny_example())
    'tower'

    A few ops a program named by index in its loop (``images_0/mul``) do not name the lanes:

    >>> from simsync.ir.objects import Device, Op
    >>> g = Graph()
    >>> for t in (0, 1):
    ...     g.add_device(Device(f"/gpu:{t}"))
    ...     for name in (f"images_{t}/mul", f"MatMul_{t}", f"Relu_{t}", f"Mean_{t}"):
    ...         _ = g.add_op(Op(name, "generic", f"/gpu:{t}", tower=t))
    >>> lane_unit(g)
    'tower'
    """
    unit: str = graph.memo("lane_unit", partial(_lane_unit, graph))
    return unit


def _lane_unit(graph: Graph) -> str:
    """The towers' own scope without its ``_`` (``worker`` of ``worker_0/``,
    :func:`tower_scope`); else ``tower``."""
    prefix = tower_scope(graph)
    return prefix[:-1] if prefix and prefix.endswith("_") and prefix != "_" else "tower"


def tower_scope(graph: Graph) -> str | None:
    """The prefix ``P`` of the towers' own name scopes: every tower ``t`` has ops under
    ``Pt/`` (``tower_0/``, ``worker_1/``, ``gpu2/``), and they are at least half of the
    towers' ops; None when no one prefix is. Not a layer's scope such as ``dense_1/`` on one
    tower, nor TensorFlow's numbering of a scope made again in each tower (``model``,
    ``model_1``, ...: tower 0's has no number), nor a few ops a program named by index in
    its tower loop (``images_0/``). Computed once per graph.

    >>> from simsync.patterns import tiny_example
    >>> tower_scope(tiny_example())
    'tower_'
    >>> from simsync.ir.objects import Device, Op
    >>> g = Graph()
    >>> g.add_device(Device("/gpu:0"))
    >>> for name, tower in [("tower_0/a", 0), ("tower_1/a", 1), ("model/b", 0), ("model_1/b", 1)]:
    ...     _ = g.add_op(Op(name, "generic", "/gpu:0", tower=tower))
    >>> tower_scope(g)
    'tower_'
    """
    prefix: str | None = graph.memo("tower_scope", partial(_tower_scope, graph))
    return prefix


def _tower_scope(graph: Graph) -> str | None:
    covered: dict[str, set[int]] = {}
    held: Counter[str] = Counter()
    in_towers = 0
    for op in graph.ops():
        head, _, rest = op.name.partition("/")
        in_towers += op.tower is not None
        if op.tower is not None and rest and head.endswith(str(op.tower)):
            prefix = head.removesuffix(str(op.tower))
            covered.setdefault(prefix, set()).add(op.tower)
            held[prefix] += 1
    towers = set(graph.towers)
    found = [
        prefix
        for prefix, have in covered.items()
        if prefix and towers and have >= towers and 2 * held[prefix] >= in_towers
    ]
    return found[0] if len(found) == 1 else None


def tower_label(graph: Graph, tower: int) -> str:
    """How tower ``tower`` is named where it waited or came last: ``tower_1``, ``worker_1``.

    >>> from simsync.patterns import tiny_example
    >>> tower_label(tiny_example(), 1)
    'tower_1'
    """
    return f"{lane_unit(graph)}_{tower}"


def meeting_points(graph: Graph, feeds: Feeds | None = None) -> list[str]:
    """Ops where towers meet: their direct inputs come from more than one tower's own work.
    The op cannot start before the last of them arrives.

    Which inputs are a tower's own work is :func:`input_towers`'s to say: one that already
    carries several towers (the result of an earlier sync point) is not, so an op fed by it and
    by one tower is not a meeting of towers, however far back the towers met. So every meeting is
    reported, the later ones too: with batch norm synchronised across towers, the statistics,
    their gradients and ``average_gradients`` are three.

    ``average_gradients`` is one because its inputs are every tower's gradients; the
    ``apply_gradients`` after it is not, as its one input already waited.

    ``feeds``: for an op that gets from a resource, the ops that put into it (its inputs
    through the resource: a take of an accumulator waits for the workers' pushes). Which ops
    put and which get is their kinds' to say: :func:`simsync.kinds.sync_points` passes them.

    >>> from simsync.patterns import tiny_example
    >>> meeting_points(tiny_example())
    ['average_gradients']
    """
    return [
        name
        for name in topological_order(graph)
        if len(set(input_towers(graph, name, feeds).values())) > 1
    ]


def input_towers(graph: Graph, name: str, feeds: Feeds | None = None) -> dict[str, int]:
    """The direct inputs of op ``name`` that are one tower's own work, and that tower.

    An input is a tower's own work when it is placed in that tower, or when it is outside every
    tower and depends on that tower alone. An input that already carries several towers (an
    earlier sync point) is left out: it is no tower's arrival. ``feeds`` adds the inputs
    through a resource (see :func:`meeting_points`).

    >>> from simsync.patterns import tiny_example
    >>> input_towers(tiny_example(), "average_gradients")
    {'tower_0/gradients': 0, 'tower_1/gradients': 1}
    >>> input_towers(tiny_example(), "apply_gradients")
    {}
    """
    found: dict[str, int] = {}
    parents = list(graph.nx.predecessors(name))
    if feeds:
        parents += feeds.get(name, ())
    for parent in parents:
        tower = own_tower(graph, parent)
        if tower is not None:
            found[parent] = tower
    return found


def own_tower(graph: Graph, name: str) -> int | None:
    """The tower op ``name`` is the own work of: the one it is placed in, or, outside every
    tower, the one tower it depends on; None when it carries several towers or none.

    >>> from simsync.patterns import tiny_example
    >>> own_tower(tiny_example(), "tower_1/loss"), own_tower(tiny_example(), "average_gradients")
    (1, None)
    """
    return graph.memo("own_towers", partial(_own_towers, graph)).get(name)


def _own_towers(graph: Graph) -> dict[str, int]:
    """:func:`own_tower` of every op that has one, computed once per graph. An op placed in
    a tower is its own work, unless it is itself where towers meet: its inputs are the
    own work of several towers (each replica's all-reduce under a ``tf.distribute``
    strategy, placed on its replica's device, ends when the last replica's data arrives,
    so it carries every tower, and what waits for it waits for no one tower)."""
    towers = _towers(graph)
    own: dict[str, int] = {}
    for name in topological_order(graph):
        placed = graph.op(name).tower
        if placed is None:
            found = towers[name]
            if len(found) == 1:
                own[name] = next(iter(found))
            continue
        inputs = {own[p] for p in graph.nx.predecessors(name) if p in own}
        if len(inputs - {placed}) == 0:
            own[name] = placed
    return own


def critical_path(graph: Graph) -> tuple[list[str], float]:
    """The longest chain of ops by expected duration plus transfers, and its length in seconds.

    With constant costs and no contention this is exactly one step's time.

    >>> from simsync.patterns import tiny_example
    >>> path, seconds = critical_path(tiny_example())
    >>> path[-2:], round(seconds, 6)
    (['average_gradients', 'apply_gradients'], 0.02)
    """
    finish: dict[str, float] = {}
    best_parent: dict[str, str | None] = {}
    for name in topological_order(graph):
        start, parent = 0.0, None
        for src in graph.nx.predecessors(name):
            arrival = finish[src] + transfer_duration(graph, graph.tensor(src, name))
            if arrival > start or parent is None:
                start, parent = max(start, arrival), src
        finish[name] = start + expected_duration(graph, graph.op(name))
        best_parent[name] = parent
    if not finish:
        return [], 0.0
    end = max(finish.values())
    node: str | None = [n for n, t in finish.items() if t == end][-1]
    path: list[str] = []
    while node is not None:
        path.append(node)
        node = best_parent[node]
    return path[::-1], end


def racing_clients(graph: Graph) -> bool:
    """Whether the graph's clients race: several of them, or runs taken from a common pool
    (asynchronous workers, even one), rather than one client stepping alone.

    >>> from simsync.patterns import tiny_example
    >>> racing_clients(tiny_example())
    False
    """
    return len(graph.clients) > 1 or any(client.shared_steps for client in graph.clients)


def updating_clients(graph: Graph) -> list[str]:
    """The clients whose runs write trainable variables: each of their runs is a step (or an
    update) of the model.

    >>> from simsync.patterns import tiny_example
    >>> updating_clients(tiny_example())
    ['main']
    """
    orders = run_orders(graph, [client.fetches for client in graph.clients])
    return [
        client.name
        for client, order in zip(graph.clients, orders, strict=True)
        if any(graph.variables[v].trainable for name in order for v in graph.op(name).writes)
    ]
