"""A large graph folded by name scope: one box per scope of each tower, for reading.

A TensorFlow program's graph has a hundred ops or more per tower (each ``MatMul``, each
``ReadVariableOp``, each op of the gradients), too many to draw one per box in a terminal.
:func:`folded_by_scope` groups them the way the program named them: the ops of one tower under
one name scope below the tower's own (``tower_0/gradients/...``: ``gradients``; below the
scopes every op of the tower shares, when it was built under one more: ``tower_0/foo/...``),
and the shared ops by their top-level scope, a number at its end dropped (``concat``,
``concat_1``, ...: ``concat``). A tower's work outside its scope (its ``ExpandDims`` before
``average_gradients``' ``concat``) goes with its tower. A box costs what its ops cost, sits on
the device most of them run on, and takes an arrow from another box wherever one of its ops
takes a tensor from one of the other's. Where two boxes would feed each other, they are one.
A box of one op keeps its kind (an input queue's dequeue, with the queue it takes from).

>>> from simsync.ir import Cost, Device, Graph, Op
>>> g = Graph()
>>> for d in ("/cpu:0", "/gpu:0", "/gpu:1"):
...     g.add_device(Device(d))
>>> for i in (0, 1):
...     fwd = g.add_op(Op(f"tower_{i}/hidden/MatMul", "generic", f"/gpu:{i}", Cost(1.0), tower=i))
...     relu = g.add_op(Op(f"tower_{i}/hidden/Relu", "generic", f"/gpu:{i}", Cost(1.0), tower=i))
...     grad = g.add_op(Op(f"tower_{i}/gradients/MatMul_grad", "generic", f"/gpu:{i}", tower=i))
...     g.connect(fwd, relu)
...     g.connect(relu, grad)
...     expand = g.add_op(Op(f"ExpandDims_{i}" if i else "ExpandDims", "generic", "/cpu:0"))
...     g.connect(grad, expand)
>>> concat = g.add_op(Op("concat", "generic", "/cpu:0"))
>>> for name in ("ExpandDims", "ExpandDims_1"):
...     g.connect(name, concat)
>>> folded = folded_by_scope(g)
>>> sorted(op.name for op in folded.ops())  # doctest: +NORMALIZE_WHITESPACE
['ExpandDims [tower_0]', 'ExpandDims [tower_1]', 'concat', 'tower_0/gradients',
 'tower_0/hidden (2 ops)', 'tower_1/gradients', 'tower_1/hidden (2 ops)']
>>> folded.op("tower_1/hidden (2 ops)").cost.mean, folded.op("tower_1/hidden (2 ops)").tower
(2.0, 1)
>>> [t.src for t in folded.inputs("concat")]
['ExpandDims [tower_0]', 'ExpandDims [tower_1]']
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Collection

import networkx as nx

from simsync.ir import Cost, Graph, Op, Tensor, tower_scope, tower_work

__all__ = ["folded_by_scope", "ops_in_box"]

#: a trailing number TensorFlow adds to a name taken already (``concat_3``)
_TAKEN = re.compile(r"_\d+$")


def folded_by_scope(graph: Graph) -> Graph:
    """``graph`` with its ops grouped by name scope (see the module's docstring)."""
    work = tower_work(graph)
    prefix = tower_scope(graph)
    scoped = frozenset(f"{prefix}{t}" for t in graph.towers) if prefix else frozenset()
    common = _common_scopes(graph, scoped)
    shared = _shared_depth(graph, common)
    groups: dict[str, list[Op]] = defaultdict(list)
    for op in graph.ops():
        groups[_group(op, work.get(op.name), common, shared)].append(op)
    of = {op.name: key for key, ops in groups.items() for op in ops}
    links = nx.DiGraph()
    links.add_nodes_from(groups)
    for tensor in graph.edges():
        if of[tensor.src] != of[tensor.dst]:
            links.add_edge(of[tensor.src], of[tensor.dst])
    merged = nx.condensation(links)  # boxes that would feed each other become one
    members = merged.graph["mapping"]
    boxes: dict[int, list[str]] = defaultdict(list)
    for key, box in members.items():
        boxes[box].append(key)
    names = {box: _name(sorted(keys), groups) for box, keys in boxes.items()}
    folded = Graph(name=graph.name, link=graph.link)
    for placed in graph.devices.values():
        folded.add_device(placed)
    for queue in graph.resources.values():  # an input queue: its ops are boxes of their own
        folded.add_resource(queue)
    for box, keys in boxes.items():
        ops = [op for key in keys for op in groups[key]]
        device = _main_device(ops)
        towers = {work.get(op.name, op.tower) for op in ops}
        tower = towers.pop() if len(towers) == 1 else None
        total = sum(op.cost.expected for op in ops)
        one = ops[0] if len(ops) == 1 else None  # a box of one op keeps its kind
        kind, resource, amount = (
            (one.kind, one.resource, one.amount) if one else ("generic", None, 0)
        )
        folded.add_op(
            Op(names[box], kind, device, Cost(total), tower=tower, resource=resource, amount=amount)
        )
    for src, dst in merged.edges():
        folded.add_tensor(Tensor(names[src], names[dst]))
    return folded


def _main_device(ops: list[Op]) -> str:
    """Where a box's work is: the device of its ops' largest expected cost, else of most of
    them (a layer's two reads of variables kept on ``/cpu:0`` cost nothing beside its
    ``MatMul`` and add on its tower's GPU: a box of the four is the GPU's).

    >>> ops = [Op("r1", "generic", "/cpu:0", Cost(1e-6)), Op("r2", "generic", "/cpu:0", Cost(1e-6)),
    ...        Op("m", "generic", "/gpu:1", Cost(1e-4)), Op("a", "generic", "/gpu:1", Cost(1e-5))]
    >>> _main_device(ops), _main_device([Op(n, "generic", "/cpu:0") for n in "ab"])
    ('/gpu:1', '/cpu:0')
    """
    cost: dict[str, float] = defaultdict(float)
    count: Counter[str] = Counter()
    for op in ops:
        cost[op.device] += op.cost.expected
        count[op.device] += 1
    return max(count, key=lambda device: (cost[device], count[device]))


def _group(op: Op, tower: int | None, common: dict[str, int], shared: int = 0) -> str:
    """The box of ``op``: its tower's scope and the scope below the ones every op of that
    tower shares (``common``: how many, by tower scope), or its top-level scope (below the
    ``shared`` scopes every op outside the towers' shares; a number at its end dropped) and
    the tower whose work it is."""
    parts = op.name.split("/")
    if _in_tower_scope(op, parts, common):
        depth = 1 + common.get(parts[0], 0)
        if len(parts) > depth + 1:
            return "/".join([*parts[:depth], _TAKEN.sub("", parts[depth])])
        return op.name
    if tower is None and op.resource is not None and parts[0] in common:
        # an op on a resource made in a tower's scope but nobody's tower (the chief's takes of
        # SyncReplicasOptimizer, made by tower 0's optimizer): by its own name there, a
        # number at its end dropped
        return "/".join([*parts[:-1], _TAKEN.sub("", parts[-1])])
    if len(parts) <= shared:
        return op.name
    top = "/".join([*parts[:shared], _TAKEN.sub("", parts[shared])])
    return top if tower is None else f"{top} [tower_{tower}]"


def _in_tower_scope(op: Op, parts: list[str], scoped: Collection[str]) -> bool:
    """Whether ``op`` (its name cut at ``/`` into ``parts``) is in its tower's numbered scope
    (``tower_0/...``, one of ``scoped``), not a tower's op outside it."""
    return op.tower is not None and len(parts) > 1 and parts[0] in scoped


def _common_scopes(graph: Graph, scoped: frozenset[str]) -> dict[str, int]:
    """For each tower's scope (``tower_0``), how many scopes below it every op in it shares
    (``tower_0/foo/...`` for all: 1), so that a tower built under one more scope of its own
    is still folded into its parts."""
    scopes: dict[str, list[list[str]]] = defaultdict(list)
    for op in graph.ops():
        parts = op.name.split("/")
        if _in_tower_scope(op, parts, scoped):
            scopes[parts[0]].append(parts[1:-1])
    common = {}
    for scope, paths in scopes.items():
        depth = 0
        while all(len(p) > depth and p[depth] == paths[0][depth] for p in paths):
            depth += 1
        common[scope] = depth
    return common


def _shared_depth(graph: Graph, common: dict[str, int]) -> int:
    """How many scopes every op outside the towers' scopes shares (a program built under
    ``tf.name_scope("Train")`` all through: 1), so that its ops fold into the scopes below
    rather than into one box of them all.

    >>> from simsync.ir import Cost, Graph, Op
    >>> g = Graph()
    >>> for name in ("Train/Model/MatMul", "Train/Model/add", "Train/gradients/a"):
    ...     _ = g.add_op(Op(name, "generic", "/cpu:0", Cost(1.0)))
    >>> _shared_depth(g, {})
    1
    """
    paths = [
        parts[:-1]
        for op in graph.ops()
        if not _in_tower_scope(op, parts := op.name.split("/"), common)
    ]
    if len(paths) < 2:
        return 0
    depth = 0
    while all(len(p) > depth and p[depth] == paths[0][depth] for p in paths):
        depth += 1
    return depth


#: how a box of several ops says how many it holds, at the end of its name
_HOLDS = re.compile(r" \((\d+) ops\)$")


def ops_in_box(name: str) -> int:
    """How many ops the box (an op of a folded graph) of this name holds: 1 for an op kept
    as it is.

    >>> ops_in_box("tower_1/hidden (2 ops)"), ops_in_box("concat")
    (2, 1)
    """
    held = _HOLDS.search(name)
    return int(held.group(1)) if held else 1


def _name(keys: list[str], groups: dict[str, list[Op]]) -> str:
    """A box's name: its groups' (joined where several had to merge), and how many ops it
    holds when more than one."""
    count = sum(len(groups[key]) for key in keys)
    name = " + ".join(keys)
    return f"{name} ({count} ops)" if count > 1 else name
