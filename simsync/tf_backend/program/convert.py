"""A TensorFlow graph, read as plain data, into simsync's IR (no TensorFlow here).

The child reads the program's graph into plain data (:func:`simsync.tf_backend.program.child`:
each op's name, type, requested device, colocation, inputs with their shapes and bytes,
control inputs, and where the program made it), and :func:`convert` turns that into an IR
:class:`~simsync.ir.Graph`:

- **One IR op per TensorFlow op a step runs**, not groups: the sync points, who waited for
  whom and the critical path are then the program's own ops (``concat``, made in
  ``average_gradients``), each timed by the profile. The ops a step runs are those the
  clients' fetches need (their inputs and control inputs, transitively). Every op is of the
  ``generic`` kind (:mod:`simsync.kinds.generic`): its cost comes from the profile.
- **Logical devices share the machine's cores**: the graph's host has the machine's cores
  (TensorFlow's inter-op threads, the engine's pool) and each op costs its own time as traced
  (``busy``: from when the executor took it to its end); the waits for a thread are the
  pool's. On real GPUs an op costs its *latency* (from when its last input was ready to its
  end), which holds the executor's hand-over to it.
- **The same op in every tower costs the same** on logical devices, with towers found by name
  scope: the median over the towers (:func:`_same_costs`). On 2 cores the towers that
  TensorFlow happened to run last in the few profiled steps measured twice as slow, and the
  simulation then named them the stragglers of every step. A tower slower by its device is
  a ``--speeds`` what-if. On real GPUs each op keeps its own cost: a GPU may really be slower.
- **Ignored, and counted in the report**: constants (their values exist before a step
  starts), fed placeholders, the ops that make variables (``VarHandleOp``: the variable
  becomes an IR :class:`~simsync.ir.Variable`) and queues and accumulators (their ops run
  as generic ops: a dequeue never waits for an empty queue), and every op the training loop
  never runs (initialisers, queue runners' enqueues, savers), by type.
- **Variables**: an op that takes a variable's handle reads it, or writes it when its type
  applies, assigns or scatters (``ResourceApplyGradientDescent``, ``AssignAddVariableOp``).
- **Tensors** carry their real bytes: the static shape's when it is known, else the bytes the
  profile saw allocated. Two ops joined by several tensors share one IR tensor of their sum.
- **Devices** are the profile's placement (where each op really ran), else the program's
  requested device, its colocation, or its first input's device, else ``/cpu:0``.
- **Towers** from names and devices (:mod:`simsync.tf_backend.program.towers`).
- **Clients**: one per thread that loops, with its fetches and its measured overhead.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections import Counter
from typing import Any

from simsync.errors import GraphError
from simsync.ir import LOCALHOST, Client, Cost, Device, Graph, Op, Tensor, Variable, tower_work
from simsync.tf_backend.program.capture import program_device
from simsync.tf_backend.program.towers import find_towers

__all__ = ["CONSTANTS", "FED", "MAX_OPS", "RESOURCES", "VARIABLES", "convert"]

#: a step of at most this many ops is simulated; more is refused in one line
MAX_OPS = 20_000
CONSTANTS = frozenset({"Const", "HostConst"})
FED = frozenset({"Placeholder"})
VARIABLES = frozenset({"VarHandleOp", "VariableV2", "Variable", "VarHandleOpV2"})
RESOURCES = frozenset(
    {
        "FIFOQueueV2", "FIFOQueue", "RandomShuffleQueueV2", "PaddingFIFOQueueV2",
        "PriorityQueueV2", "ConditionalAccumulator", "SparseConditionalAccumulator",
        "ResourceConditionalAccumulator", "MutexV2",
    }
)  # fmt: skip
_WRITES = ("Apply", "Assign", "Scatter")


def convert(
    data: dict[str, Any], profile: dict[str, Any] | None, efficiency: float = 1.0
) -> tuple[Graph, dict[str, Any]]:
    """The IR graph of the program ``data`` describes, and the report of what was kept,
    ignored and found (see the module's docstring). ``profile`` (from
    :func:`~simsync.tf_backend.program.profile.profile_loop`) gives costs and placement;
    ``efficiency`` is how fast this machine's cores run when all are busy (its profile's)."""
    ops = {op["name"]: op for op in data["ops"]}
    clients = data["clients"]
    needed = _closure(ops, [name for client in clients for name in client["fetches"]])
    if len(needed) > MAX_OPS:
        raise GraphError(
            f"a step runs {len(needed):,} TensorFlow ops: simsync simulates at most {MAX_OPS:,}"
        )
    timed = (profile or {}).get("ops", {})
    reasons: dict[str, str] = {}
    for name in needed:
        kind = ops[name]["type"]
        if kind in CONSTANTS:
            reasons[name] = "constants (their values exist before the step starts)"
        elif kind in FED:
            reasons[name] = "placeholders (fed by sess.run)"
        elif kind in VARIABLES:
            reasons[name] = "variables (kept as variables, not ops)"
        elif kind in RESOURCES:
            reasons[name] = (
                "queues and accumulators (their ops run, never blocking: a queue is never empty)"
            )
    kept = [name for name in data["order"] if name in needed and name not in reasons]
    devices = {name: _device(name, ops, timed) for name in ops}
    towers = find_towers(kept, {name: devices[name] for name in kept})

    graph = Graph(name=data["program"])
    # logical devices share this machine's cores: TensorFlow's inter-op threads run their
    # ops, each op for its own time (the engine's pool holds the waits for a thread)
    pooled = bool(data.get("logical_devices")) and any("busy" in t for t in timed.values())
    if pooled:
        graph.host_cores[LOCALHOST] = max(1, int(data.get("cores") or 1))
        graph.core_efficiency[LOCALHOST] = efficiency
    seconds = "busy" if pooled else "seconds"
    for device in sorted({devices[name] for name in kept} | {"/cpu:0"}):
        cpu = device.startswith("/cpu:")
        graph.add_device(Device(device, kind="cpu" if cpu else "gpu", concurrent=cpu))
    variables = _variables(graph, ops, needed, devices, data)
    untimed = 0
    for name in kept:
        op = ops[name]
        handles = [i["op"] for i in op["inputs"] if i["op"] in variables]
        writes = any(word in op["type"] for word in _WRITES)
        if profile and name not in timed:
            untimed += 1  # folded by TensorFlow before the step (constant folding)
        graph.add_op(
            Op(
                name,
                "generic",
                devices[name],
                Cost(float(timed.get(name, {}).get(seconds, 0.0))),
                tower=towers.of(name),
                reads=() if writes else tuple(dict.fromkeys(handles)),
                writes=tuple(dict.fromkeys(handles)) if writes else (),
            )
        )
    _tensors(graph, ops, kept, (profile or {}).get("tensors", {}))
    if profile and towers.prefix is not None and data.get("logical_devices"):
        _same_costs(graph, ops)
    overheads = (profile or {}).get("clients", {})
    for client in clients:
        fetches = tuple(name for name in client["fetches"] if name in graph.nx)
        if not fetches:
            raise GraphError(
                f"the loop of thread '{client['thread']}' fetches only constants "
                f"({', '.join(client['fetches'])}): nothing runs"
            )
        overhead = overheads.get(client["thread"], {}).get("overhead", 0.0)
        graph.add_client(Client(client["name"], fetches, overhead=float(overhead)))
        # a sess.run of one NoOp: what a run of another client (a what-if's) costs at least
        graph.facts["session_run"] = float(overhead)
    graph.facts["source"] = data["program"]
    steps = [n for n in data.get("collections", {}).get("global_step", []) if n in graph.variables]
    if steps:  # the program's global step (tf.train.get_or_create_global_step)
        graph.facts["global_step"] = steps[0]
    return graph, _report(data, ops, needed, reasons, kept, towers, untimed, profile)


def _same_costs(graph: Graph, ops: dict[str, Any]) -> None:
    """On logical devices, with towers found by name scope, the same op of every tower costs
    the median over the towers of the profile's costs: an op of a tower's scope by its name
    there, an op outside every scope that is one tower's work alone (``ExpandDims``,
    ``ExpandDims_1``, ... before ``average_gradients``' concat) by its name without
    TensorFlow's numbering; each also by its type, its inputs' bytes and its kind of device.

    >>> from simsync.ir import Client, Cost, Device, Graph, Op
    >>> g = Graph()
    >>> for i in (0, 1):
    ...     _ = g.add_op(Op(f"tower_{i}/a", "generic", f"/gpu:{i}", Cost(1.0 + 2 * i), tower=i))
    >>> _same_costs(g, {f"tower_{i}/a": {"type": "MatMul"} for i in (0, 1)})
    >>> g.op("tower_0/a").cost.mean, g.op("tower_1/a").cost.mean
    (2.0, 2.0)
    """
    same: dict[tuple[Any, ...], list[Op]] = {}
    for name in tower_work(graph):
        op = graph.op(name)
        inside = name.split("/", 1)[1] if op.tower is not None else _NUMBERED.sub("", name)
        sizes = tuple(t.nbytes for t in graph.inputs(name))
        key = (inside, ops[name]["type"], op.device.startswith("/cpu:"), sizes)
        same.setdefault(key, []).append(op)
    for group in same.values():
        mean = statistics.median(op.cost.mean for op in group)
        for op in group:
            graph.replace_op(dataclasses.replace(op, cost=dataclasses.replace(op.cost, mean=mean)))


#: TensorFlow's numbering of a repeated name: ``ExpandDims_3``, ``gradients_1/AddN``
_NUMBERED = re.compile(r"_\d+(?=/|$)")


def _closure(ops: dict[str, Any], fetches: list[str]) -> set[str]:
    """The ops the fetches need: inputs and control inputs, transitively."""
    needed: set[str] = set()
    stack = [name for name in fetches if name in ops]
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed.add(name)
        op = ops[name]
        stack.extend(i["op"] for i in op["inputs"])
        stack.extend(op["control"])
    return needed


def _device(name: str, ops: dict[str, Any], timed: dict[str, Any], depth: int = 0) -> str:
    """Where op ``name`` runs: as profiled, else as requested, colocated or fed."""
    if name in timed:
        return str(timed[name]["device"])
    op = ops[name]
    if op["device"]:
        return program_device(op["device"])
    if depth < 50:
        for other in op["colocate"]:
            if other != name and other in ops:
                return _device(other, ops, timed, depth + 1)
        if op["inputs"]:
            return _device(op["inputs"][0]["op"], ops, timed, depth + 1)
    return "/cpu:0"


def _variables(
    graph: Graph, ops: dict[str, Any], needed: set[str], devices: dict[str, str], data: Any
) -> set[str]:
    trainable = set(data.get("trainable", ()))
    names = set()
    for name in sorted(needed):
        op = ops[name]
        if op["type"] not in VARIABLES:
            continue
        shape = tuple(op.get("shape") or ())
        graph.add_variable(
            Variable(
                name,
                devices[name],
                shape=shape,
                nbytes=int(op.get("bytes") or 0),
                trainable=name in trainable,
            )
        )
        names.add(name)
    return names


def _tensors(graph: Graph, ops: dict[str, Any], kept: list[str], allocated: Any) -> None:
    """One IR tensor per (producer, consumer) pair of kept ops, bytes summed; control edges,
    also through an ignored op that waits for others (a constant under
    ``tf.control_dependencies``: its consumers wait for what it waited for)."""
    keep = set(kept)
    bridged: dict[str, set[str]] = {}

    def waits_for(name: str) -> set[str]:
        """The kept ops an ignored op waits for, transitively."""
        if name not in bridged:
            bridged[name] = set()
            op = ops[name]
            for src in [i["op"] for i in op["inputs"]] + list(op["control"]):
                bridged[name] |= {src} if src in keep else waits_for(src)
        return bridged[name]

    for name in kept:
        op = ops[name]
        pairs: dict[str, list[dict[str, Any]]] = {}
        control: set[str] = set()
        for tensor in op["inputs"]:
            if tensor["op"] in keep:
                pairs.setdefault(tensor["op"], []).append(tensor)
            else:
                control |= waits_for(tensor["op"])
        for src, tensors in pairs.items():
            nbytes = sum(_bytes(t, allocated) for t in tensors)
            one = tensors[0] if len(tensors) == 1 else None
            shape = tuple(one["shape"]) if one and one["shape"] is not None else None
            graph.add_tensor(
                Tensor(src, name, nbytes, shape=shape, dtype=one["dtype"] if one else None)
            )
        for src in op["control"]:
            control |= {src} if src in keep else waits_for(src)
        for src in sorted(control, key=kept.index):
            graph.add_tensor(Tensor(src, name, control=True))


def _bytes(tensor: dict[str, Any], allocated: Any) -> int:
    if tensor["bytes"] is not None:
        return int(tensor["bytes"])
    return int(allocated.get(f"{tensor['op']}:{tensor['slot']}", 0))


def _report(
    data: dict[str, Any],
    ops: dict[str, Any],
    needed: set[str],
    reasons: dict[str, str],
    kept: list[str],
    towers: Any,
    untimed: int,
    profile: dict[str, Any] | None,
) -> dict[str, Any]:
    """What was kept, ignored and found, for the report and ``--json``."""
    ignored = Counter(reasons.values())
    not_run = Counter(ops[name]["type"] for name in ops if name not in needed)
    if not_run:
        ignored["not run by the training loop"] = sum(not_run.values())
    return {
        "source": data["program"],
        "tensorflow_ops": len(ops),
        "ops": len(kept),
        "grouped": "none: one IR op per TensorFlow op a step runs",
        "ignored": dict(ignored),
        "not_run_by_type": dict(not_run.most_common(8)),
        # ops the traced steps never ran: TensorFlow folded them into constants beforehand
        "folded_by_tensorflow": untimed if profile else None,
        "towers": towers.count,
        "tower_rule": towers.rule,
        "clients": [c["name"] for c in data["clients"]],
        # where the program made its shared ops (the averaging, the apply), by function and line
        "made_in": {
            name: ops[name]["made_in"]
            for name in kept
            if ops[name].get("made_in") and towers.of(name) is None
        },
        "queue_runners": data.get("queue_runners", []),
        "collections": data.get("collections", {}),
    }
