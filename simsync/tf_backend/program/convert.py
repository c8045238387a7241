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
- **Input queues** (``tf.queue.FIFOQueue``, padding or not) become queue resources
  (:class:`~simsync.ir.Resource`) with the program's capacity, holding as many elements as
  they held when the training loop started. Their dequeues are ``dequeue_elements`` ops (a
  tower waits while the queue holds too few), their enqueues ``enqueue_elements`` ops (they
  wait while it is full). Kinds: :mod:`simsync.kinds.input_queue`. A queue filled by
  **queue runners** is one only with ``queue_runners=True``: then each thread of a queue
  runner (``QueueRunner(queue, [enqueue] * 2)``: two) is a daemon client looping over its
  enqueue op and what it needs, timed by the profile (the enqueue itself costs what the
  dequeue costs: a copy of the elements). By default such a queue is taken to be never
  short (its dequeues are generic ops that never wait, and the runners' threads are not
  simulated): measured here, the runners' threads kept the queues of the test programs
  full enough at all but 0 to 7 % of the steps' starts, while simulated they fell behind
  with four towers (the step 22 to 34 % too slow), so the default holds what was measured;
  ``simsync crosscheck`` measures it for each program (``input_queues``).
- **SyncReplicasOptimizer in one process** (a worker thread per optimizer): queue and
  accumulator ops of one shared name on one device are one resource (:func:`_shared`), as
  they are in the session. A worker's ``apply_grad`` is a ``push_gradients`` op tagged with
  its local step, its dequeue of a token a ``dequeue_token`` op that writes its local step
  (the ``assign`` after it writes nothing more), the chief's ``take_grad(R)`` a
  ``take_gradients`` op (it costs what a push to its accumulator does: traced, it held its
  wait for the pushes) and its enqueue an ``enqueue_tokens`` op reading the global step.
  The chief's queue runner is a daemon client always (its tokens pace the workers), and the
  workers run until the global step reaches the steps simulated.
- **Ignored, and counted in the report**: constants (their values exist before a step
  starts), fed placeholders, the ops that make variables (``VarHandleOp``: the variable
  becomes an IR :class:`~simsync.ir.Variable`), FIFO queues (the queue becomes a
  resource, or, filled by queue runners, is never short) and ``ConditionalAccumulator`` ops
  (an accumulator resource), other queues and accumulators (a random shuffle queue, a
  ``SparseConditionalAccumulator``: their ops run as generic ops, and never wait), and every
  op the simulation does not run (initialisers, savers, the queue
  runners' enqueues unless they are simulated), by type.
- **Variables**: an op that takes a variable's handle reads it, or writes it when its type
  applies, assigns or scatters (``ResourceApplyGradientDescent``, ``AssignAddVariableOp``).
- **Tensors** carry their real bytes: the static shape's when it is known, else the bytes the
  profile saw allocated. Two ops joined by several tensors share one IR tensor of their sum.
- **Devices** are the profile's placement (where each op really ran), else the program's
  requested device, its colocation, or its first input's device, else ``/cpu:0``.
- **Towers** from names and devices (:mod:`simsync.tf_backend.program.towers`).
- **Clients**: one per thread that loops, with its fetches and what a ``sess.run`` costs
  beyond its ops (:func:`session_client`): its Python side holds the GIL (the client's
  overhead), the rest of its CPU time a core (``run_work``), the rest of its wall time
  nothing (``run_latency``); one daemon per thread of a FIFO queue's runners.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections import Counter
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any, NamedTuple

import networkx as nx

from simsync.errors import GraphError
from simsync.ir import (
    LOCALHOST,
    BatchFacts,
    Client,
    Cost,
    Device,
    Graph,
    Op,
    Resource,
    Tensor,
    Variable,
    tower_work,
)
from simsync.ir.limits import MAX_TOKENS
from simsync.kinds import sync_points
from simsync.kinds.generic import GENERIC
from simsync.kinds.input_queue import DEQUEUE_ELEMENTS, ENQUEUE_ELEMENTS
from simsync.kinds.push_gradients import PUSH_GRADIENTS
from simsync.kinds.registry import OpKind
from simsync.kinds.take_gradients import TAKE_GRADIENTS
from simsync.kinds.tokens import DEQUEUE_TOKEN, ENQUEUE_TOKENS
from simsync.tf_backend.program.capture import (
    ACCUMULATORS,
    DEQUEUES,
    ENQUEUES,
    FIFO_QUEUES,
    PUSHES,
    TAKES,
    VARIABLE_OPS,
    carried_variable,
    program_device,
    variables_written,
)
from simsync.tf_backend.program.towers import find_towers
from simsync.words import plural

__all__ = [
    "ARGUMENTS",
    "BATCH_INPUTS",
    "CONSTANTS",
    "FED",
    "MAX_OPS",
    "RESOURCES",
    "RESULTS",
    "Batch",
    "convert",
    "find_batch",
    "session_client",
]

#: a step of at most this many ops is simulated; more is refused in one line
MAX_OPS = 20_000
CONSTANTS = frozenset({"Const", "HostConst"})
FED = frozenset({"Placeholder"})
#: a tf.function's arguments and results (its step's graph: a TensorFlow 2 program's)
ARGUMENTS, RESULTS = frozenset({"_Arg"}), frozenset({"_Retval"})
#: resources whose ops run as generic ops (FIFO queues, :data:`FIFO_QUEUES`, are modelled)
RESOURCES = frozenset(
    {
        "RandomShuffleQueueV2", "RandomShuffleQueue", "PriorityQueueV2", "PriorityQueue",
        "SparseConditionalAccumulator", "MutexV2",
    }
)  # fmt: skip
_WRITES = ("Apply", "Assign", "Scatter")
#: an assign of a value as it is (not added to the variable's)
_ASSIGNS = frozenset({"Assign", "AssignVariableOp"})


@dataclasses.dataclass(frozen=True)
class _Step:
    """What the first pass found: the program's ops by name, where each runs, the resources
    they share, SyncReplicasOptimizer's tokens, the queue runners' threads simulated, the ops
    a step runs (``stepped``) and needs with those threads (``needed``), why those not kept
    are not, and the kept ones in the program's order with their towers."""

    ops: dict[str, Any]
    devices: dict[str, str]
    shared: dict[str, str]
    assigned: dict[str, tuple[str, str]]
    tokens: set[str]
    runners: list[_Thread]
    fed: set[str]
    stepped: set[str]
    needed: set[str]
    reasons: dict[str, str]
    kept: list[str]
    towers: Any


def convert(
    data: Mapping[str, Any],
    profile: Mapping[str, Any] | None,
    efficiency: float = 1.0,
    queue_runners: bool = False,
    made_in: Mapping[str, str] | None = None,
) -> tuple[Graph, dict[str, Any]]:
    """The IR graph of the program ``data`` describes, and the report of what was kept,
    ignored and found (see the module's docstring). ``profile`` (from
    :func:`~simsync.tf_backend.program.step_costs.profile_loop`) gives costs and placement;
    ``efficiency`` is how fast this machine's cores run when all are busy (its profile's);
    ``made_in`` where the program made its ops, by function and line
    (:mod:`~simsync.tf_backend.program.made_in`).

    Five passes, each a function of what the ones before found: the ops kept
    (:func:`_kept_ops`), the devices and the machine's pool (:func:`_devices_and_pool`), the
    ops with their variables, resources and tensors (:func:`_add_ops`), the clients
    (:func:`_add_clients`), then the facts and the report (:func:`_facts_and_report`)."""
    timed = (profile or {}).get("ops", {})
    step = _kept_ops(data, timed, queue_runners)
    graph = _devices_and_pool(data, step, timed, efficiency)
    untimed = _add_ops(graph, data, step, profile, queue_runners)
    _add_clients(graph, data, step, profile)
    report = _facts_and_report(graph, data, step, profile, untimed, made_in)
    return graph, report


def _kept_ops(data: Mapping[str, Any], timed: Mapping[str, Any], queue_runners: bool) -> _Step:
    """Pass 1: the ops a step runs (the clients' fetches and what they need) and the queue
    runners' threads simulated, and of those the ones that become IR ops; the others with
    their reason (constants, placeholders, variables, queues...)."""
    ops = {op["name"]: op for op in data["ops"]}
    clients = data["clients"]
    devices = {name: _device(name, ops, timed) for name in ops}
    shared = _shared(ops, devices)
    assigned = _token_assigns(ops, shared, set(data.get("trainable", ())))
    tokens = {shared[_queue_of(ops[dequeue])] for dequeue, _ in assigned.values()}
    runners = _runner_threads(data, ops, shared)
    # the chief's runner of SyncReplicasOptimizer is always simulated: its tokens pace the
    # workers; an input queue's runners only when asked (see the docstring)
    fed = {thread.queue for thread in runners if thread.queue not in tokens}
    if not queue_runners:  # their queues are taken to be never short (see the docstring)
        runners = [thread for thread in runners if thread.queue in tokens]
    stepped = _closure(ops, [name for client in clients for name in client["fetches"]])
    needed = stepped | _closure(ops, [thread.enqueue for thread in runners])
    if len(needed) > MAX_OPS:
        raise GraphError(
            f"a step runs {len(needed):,} TensorFlow ops: simsync simulates at most {MAX_OPS:,}"
        )
    reasons: dict[str, str] = {}
    for name in needed:
        filled = shared.get(name) in fed and not queue_runners  # a FIFO queue's name is shared
        reason = _not_kept(ops[name]["type"], filled)
        if reason is not None:
            reasons[name] = reason
    kept = [name for name in data["order"] if name in needed and name not in reasons]
    towers = find_towers(kept, {name: devices[name] for name in kept})
    return _Step(ops, devices, shared, assigned, tokens, runners, fed, stepped, needed,
                 reasons, kept, towers)  # fmt: skip


def _not_kept(kind: str, filled_by_runners: bool) -> str | None:
    """Why an op of type ``kind`` a step runs is no IR op (None: it is one);
    ``filled_by_runners``: a queue its runners fill, not simulated."""
    if kind in CONSTANTS:
        return "constants (their values exist before the step starts)"
    if kind in FED:
        return "placeholders (fed by sess.run)"
    if kind in ARGUMENTS:
        return "a tf.function's arguments (passed by its call)"
    if kind in RESULTS:
        return "a tf.function's results (returned by its call)"
    if kind in VARIABLE_OPS:
        return "variables (kept as variables, not ops)"
    if kind in FIFO_QUEUES and filled_by_runners:
        return (
            "FIFO queues filled by queue runners (their threads are not simulated: a "
            "dequeue never waits)"
        )
    if kind in FIFO_QUEUES:
        return "FIFO queues (kept as queues, not ops)"
    if kind in ACCUMULATORS:
        return "accumulators (kept as accumulators, not ops)"
    if kind in RESOURCES:
        return (
            "random shuffle or priority queues and accumulators (their ops run, never "
            "waiting: such a queue is never empty)"
        )
    return None


def _devices_and_pool(
    data: Mapping[str, Any], step: _Step, timed: Mapping[str, Any], efficiency: float
) -> Graph:
    """Pass 2: the graph with its devices, and on logical devices the machine's cores as the
    engine's pool (TensorFlow's inter-op threads run their ops, each op for its own time)."""
    graph = Graph(name=data["program"])
    # logical devices timed busy share this machine's cores
    if data.get("logical_devices") and any("busy" in t for t in timed.values()):
        graph.host_cores[LOCALHOST] = max(1, int(data.get("cores") or 1))
        graph.core_efficiency[LOCALHOST] = efficiency
    for device in sorted({step.devices[name] for name in step.kept} | {"/cpu:0"}):
        cpu = "/gpu:" not in device  # a CPU, of this process or of a task of a cluster
        graph.add_device(Device(device, kind="cpu" if cpu else "gpu", concurrent=cpu))
    return graph


def _add_ops(
    graph: Graph,
    data: Mapping[str, Any],
    step: _Step,
    profile: Mapping[str, Any] | None,
    queue_runners: bool,
) -> int:
    """Pass 3: the variables, the queues and accumulators, one IR op per kept op (its kind,
    device, cost, tower, the variables it reads and writes, its resource) and the tensors
    between them; how many kept ops the profile never timed (folded by TensorFlow)."""
    ops, devices, shared, tokens = step.ops, step.devices, step.shared, step.tokens
    assigned, kept, needed = step.assigned, step.kept, step.needed
    timed = (profile or {}).get("ops", {})
    seconds = "busy" if graph.host_cores else "seconds"  # the pool of pass 2
    variables = _variables(graph, ops, needed, devices, data)
    unsimulated = set() if queue_runners else {n for n in needed if shared.get(n) in step.fed}
    queues = _queues(graph, ops, needed - unsimulated, devices, data, step.runners, shared, tokens)
    counters = {name for name, v in graph.variables.items() if v.counter}
    untimed = 0
    views = _views(ops)
    for name in kept:
        op = ops[name]
        # a variable's handle however passed (tf.identity(v.handle)); an op unknown here
        # that takes one writes it (capture.variables_written)
        written = tuple(v for v in variables_written(views[name]) if v in variables)
        handles = [carried_variable(t) for t in views[name].inputs]
        reads = tuple(dict.fromkeys(h for h in handles if h in variables and h not in written))
        if written:
            reads = ()
        if name in assigned:  # the token's dequeue writes the counter
            reads = tuple(h for h in reads if h != assigned[name][1])
            written = tuple(h for h in written if h != assigned[name][1])
        kind, queue, elements = _queue_op(op, queues, shared, tokens)
        if kind is PUSH_GRADIENTS:  # apply_grad(grad, local_step): tagged with the local step
            reads = _counter_read(ops, op["inputs"][1:2], counters)
        elif kind is ENQUEUE_TOKENS:  # fill([N], global_step): tokens of the global step
            reads = _counter_read(ops, op["inputs"][1:], counters)
        elif kind is DEQUEUE_TOKEN:
            written = tuple(v for d, v in assigned.values() if d == name)
        cost = timed.get(name, {}).get(seconds)
        if cost is None and kind is ENQUEUE_ELEMENTS:
            cost = _put_cost(ops, kept, timed, seconds, str(queue), DEQUEUES, shared)
        elif kind is TAKE_GRADIENTS:  # it waited for the pushes while traced: a copy as theirs
            cost = _put_cost(ops, kept, timed, seconds, str(queue), PUSHES, shared)
        elif kind is DEQUEUE_TOKEN:  # it waited for its token while traced
            cost = _put_cost(ops, kept, timed, seconds, str(queue), ENQUEUES, shared, each=True)
        elif profile and name not in timed:
            untimed += 1  # folded by TensorFlow before the step (constant folding)
        graph.add_op(
            Op(
                name,
                kind.name,
                devices[name],
                Cost(float(cost or 0.0)),
                # the chief's take is the workers' meeting, though made in tower 0's scope
                tower=None if kind is TAKE_GRADIENTS else step.towers.of(name),
                reads=reads,
                writes=written,
                resource=queue,
                amount=elements,
            )
        )
    _tensors(graph, ops, kept, profile or {})
    if profile and step.towers.prefix is not None and data.get("logical_devices"):
        _same_costs(graph, ops)
    return untimed


def _add_clients(
    graph: Graph, data: Mapping[str, Any], step: _Step, profile: Mapping[str, Any] | None
) -> None:
    """Pass 4: one client per thread that loops (its fetches, what its ``sess.run`` costs
    beyond its ops; a worker of the program's own SyncReplicasOptimizer runs until the
    global step) and one daemon per queue runner's thread simulated."""
    overheads = (profile or {}).get("clients", {})
    tokens_step = _tokens_step(graph)
    pushes = {op.name for op in graph.ops() if op.kind == PUSH_GRADIENTS.name}
    for client in data["clients"]:
        fetches = tuple(name for name in client["fetches"] if name in graph.nx)
        if not fetches:
            raise GraphError(
                f"the loop of thread '{client['thread']}' fetches only constants "
                f"({', '.join(client['fetches'])}): nothing runs"
            )
        # a sess.run of one NoOp: what a run of another client (a what-if's) costs at least
        python, work, latency = _run_cost(overheads.get(client["thread"], {}))
        graph.facts = dataclasses.replace(
            graph.facts, session_run=python, session_run_work=work, session_run_latency=latency
        )
        until = tokens_step if tokens_step and pushes & _closure(step.ops, list(fetches)) else None
        graph.add_client(
            dataclasses.replace(session_client(graph, client["name"], fetches), until=until)
        )
    for name, enqueue, _ in step.runners:  # a queue runner's thread: sess.run(enqueue) in a loop
        graph.add_client(session_client(graph, name, (enqueue,), daemon=True))


def _facts_and_report(
    graph: Graph,
    data: Mapping[str, Any],
    step: _Step,
    profile: Mapping[str, Any] | None,
    untimed: int,
    made_in: Mapping[str, str] | None,
) -> dict[str, Any]:
    """Pass 5: the graph's facts (its source, global step and batch) and the report of what
    was kept, ignored and found."""
    ops, kept, needed = step.ops, step.kept, step.needed
    steps = [n for n in data.get("collections", {}).get("global_step", []) if n in graph.variables]
    graph.facts = dataclasses.replace(
        graph.facts,
        source=data["program"],
        # the program's global step (tf.train.get_or_create_global_step)
        global_step=steps[0] if steps else None,
    )
    ran = dict((profile or {}).get("shapes", {}))
    for client in data["clients"]:  # a fed placeholder runs no op: its shape is what was fed
        ran.update(client.get("feeds", {}))
    batch = find_batch(ops, [n for n in data["order"] if n in needed], ran)
    if batch is not None:
        found = BatchFacts(
            batch.size,
            ops=tuple(sorted(set(batch.ops) & set(kept))),
            carry=tuple(sorted(set(batch.carry) & set(kept))),
            # each tower brings in its own examples (a step trains on one batch per tower),
            # or they split a batch brought in outside them
            per_tower=any(step.towers.of(name) is not None for name in batch.inputs),
        )
        graph.facts = dataclasses.replace(graph.facts, batch=found)
    report = _report(data, ops, needed, step.reasons, kept, step.towers, untimed, profile, graph)
    report["batch"] = None if batch is None else batch.size
    # where the program made its shared ops (the averaging, the apply) and its sync points
    # (a strategy's all-reduce, one in each tower), by function and line
    points = set(sync_points(graph))
    report["made_in"] = {
        name: (made_in or {})[name]
        for name in kept
        if name in (made_in or {}) and (graph.op(name).tower is None or name in points)
    }
    # what the loop's steps run, and what only the queue runners' threads do
    report["ops"] = sum(1 for name in kept if name in step.stepped)
    report["queue_runner_ops"] = len(kept) - report["ops"]
    report["queue_runner_threads"] = len(step.runners)
    simulated = set(graph.resources)
    report["input_queues"] = _input_queues(ops, step.stepped, simulated, step.shared, step.tokens)
    report["accumulators"] = sorted(
        name for name, resource in graph.resources.items() if resource.kind == "accumulator"
    )
    report["token_queues"] = sorted(step.tokens & set(graph.resources))
    report["update_ops"] = _update_ops(data, graph, step.stepped)
    return report


def _update_ops(data: Mapping[str, Any], graph: Graph, stepped: set[str]) -> dict[str, Any]:
    """The program's updates of batch norm's moving averages: the ops its training loop runs
    that are one tower's work (:func:`~simsync.ir.tower_work`) and write a variable that is
    not trainable (a tower's batch statistics), wherever the program keeps them (a library
    may keep them in a collection of its own, as the Inception trainer's slim does), and its
    ``UPDATE_OPS`` that it runs. How many it collected, how many run, whose towers' those are,
    the variables that more than one tower's updates write (they race: each reads and
    writes the moving average), and those that another op of the step reads in no order
    with their updates (``read_unordered``: an exponential moving average kept of them sees
    the old value or the new one, whichever runs first), with the first such reader.

    >>> from simsync.ir import Cost, Graph, Op, Variable
    >>> g = Graph()
    >>> _ = g.add_variable(Variable("mean", "/cpu:0", trainable=False))
    >>> for i in (0, 1):
    ...     _ = g.add_op(Op(f"tower_{i}/update", "generic", "/cpu:0", Cost(0.0), tower=i,
    ...                     writes=("mean",)))
    >>> data = {"collections": {"update_ops": ["tower_0/update", "tower_1/update", "x"]}}
    >>> _update_ops(data, g, {"tower_0/update", "tower_1/update"})["racing"]
    ['mean']
    >>> _update_ops({}, g, {"tower_1/update"})  # in no collection: found all the same
    {'collected': 0, 'run': 1, 'towers': [1], 'racing': [], 'read_unordered': {}}
    >>> _ = g.add_op(Op("ema/read", "generic", "/cpu:0", Cost(0.0), reads=("mean",)))
    >>> _update_ops({}, g, {"tower_1/update", "ema/read"})["read_unordered"]
    {'mean': 'ema/read'}
    """
    names = list(data.get("collections", {}).get("update_ops", []))
    work = tower_work(graph)
    scalars = {
        op["name"]
        for op in data.get("ops", [])
        if op["type"] in VARIABLE_OPS and op.get("shape") == []
    }
    run = [
        op
        for op in graph.ops()
        if op.name in stepped
        and (
            op.name in names
            or (op.name in work and any(_statistics(graph, v, scalars) for v in op.writes))
        )
    ]
    writers: dict[str, set[int | None]] = {}
    for op in run:
        for variable in op.writes:
            writers.setdefault(variable, set()).add(work.get(op.name, op.tower))
    return {
        "collected": len(names),
        "run": len(run),
        "towers": sorted({t for t in (work.get(op.name, op.tower) for op in run) if t is not None}),
        "racing": sorted(v for v, towers in writers.items() if len(towers) > 1),
        "read_unordered": _read_unordered(graph, run, stepped),
    }


def _read_unordered(graph: Graph, updates: list[Op], stepped: set[str]) -> dict[str, str]:
    """The variables ``updates`` write that another op of the step reads with no path
    between it and an update (neither waits for the other), each with its first reader.
    A read on the way to an update of the same variable is that update's own (two towers'
    updates of one moving average race: that is ``racing``)."""
    readers: dict[str, list[str]] = {}
    written = {v for op in updates for v in op.writes}
    others = stepped - {op.name for op in updates}
    for op in graph.ops():
        if op.name in others:
            for variable in set(op.reads) & written:
                readers.setdefault(variable, []).append(op.name)
    before = {
        op.name: nx.ancestors(graph.nx, op.name)
        for op in updates
        if readers.keys() & set(op.writes)
    }
    found: dict[str, str] = {}
    for variable, names in readers.items():
        writers = [name for name in before if variable in graph.op(name).writes]
        # an update's own read (its moving average's value, on its way to the assign): the
        # race between updates is theirs ("racing"), not a read beside them
        own = set().union(*(before[w] for w in writers))
        for writer in writers:
            ordered = before[writer] | nx.descendants(graph.nx, writer)
            unordered = [n for n in names if n not in own and n not in ordered]
            if unordered:
                found[variable] = unordered[0]
                break
    return dict(sorted(found.items()))


def _views(ops: Mapping[str, Any]) -> dict[str, Any]:
    """The ops of a program's graph data as TensorFlow's ops look to
    :func:`~simsync.tf_backend.program.capture.variables_written`: ``.name``, ``.type`` and
    ``.inputs``, each input's ``.op`` and ``.dtype.name``, and whether a function's call
    writes (one home for which op writes which variable, on either side)."""
    views = {
        name: SimpleNamespace(
            name=name, type=op["type"], inputs=[], calls_write=bool(op.get("calls_write"))
        )
        for name, op in ops.items()
    }
    for name, op in ops.items():
        views[name].inputs = [
            SimpleNamespace(op=views[t["op"]], dtype=SimpleNamespace(name=str(t["dtype"])))
            for t in op["inputs"]
            if t["op"] in views
        ]
    return views


def _statistics(graph: Graph, name: str, scalars: set[str]) -> bool:
    """Whether variable ``name`` holds statistics (batch norm's moving averages): not
    trainable, and not one of ``scalars``, the variables of one number (an optimizer's count
    of steps, a learning rate, which a ``tf.distribute`` strategy's replicas each update)."""
    return not _trainable(graph, name) and name not in scalars


def _trainable(graph: Graph, name: str) -> bool:
    variable = graph.variables.get(name)
    return variable is None or variable.trainable


def _tokens_step(graph: Graph) -> str | None:
    """The step the tokens of the program's own ``SyncReplicasOptimizer`` carry (the global
    step, which the chief's enqueue of tokens reads): its workers run until it reaches the
    steps simulated (``Client.until``), as their loops stop at a global step. A worker
    stopped at a count of its own would leave the others waiting for its gradients: a
    deadlock, in TensorFlow too. None without one step."""
    steps = {v for op in graph.ops() if op.kind == ENQUEUE_TOKENS.name for v in op.reads}
    return next(iter(steps)) if len(steps) == 1 else None


def _run_cost(measured: dict[str, Any]) -> tuple[float, float, float]:
    """A ``sess.run``'s own cost, as the profile measured it
    (:func:`~simsync.tf_backend.program.step_costs.session_run_split`), as the graph's facts
    hold it for :func:`session_client`: the part that holds the GIL (Python's side), the rest of its
    CPU time (TensorFlow's, a core without the GIL) and the rest of its wall time (waiting
    for the executor's threads, holding nothing). A profile that did not split it: all of
    it holds the GIL.

    >>> _run_cost({"overhead": 6e-05, "python": 2e-05, "cpu": 3.5e-05})
    (2e-05, 1.5e-05, 2.5e-05)
    >>> _run_cost({"overhead": 6e-05})
    (6e-05, 0.0, 0.0)
    """
    total = float(measured.get("overhead", 0.0))
    python = min(total, float(measured.get("python", total)))
    cpu = min(total, max(python, float(measured.get("cpu", python))))
    return python, round(cpu - python, 12), round(total - cpu, 12)


def session_client(
    graph: Graph, name: str, fetches: tuple[str, ...], *, daemon: bool = False
) -> Client:
    """A client of an imported graph whose ``sess.run`` costs, beyond its ops, what one of
    one ``NoOp`` cost the program's session: its ``overhead``, ``run_work`` and
    ``run_latency`` (:func:`_run_cost`)."""
    return Client(
        name,
        fetches,
        overhead=graph.facts.session_run,
        run_work=graph.facts.session_run_work,
        run_latency=graph.facts.session_run_latency,
        daemon=daemon,
    )


def _input_queues(
    ops: dict[str, Any],
    stepped: set[str],
    simulated: set[str],
    shared: dict[str, str],
    tokens: set[str],
) -> dict[str, dict[str, Any]]:
    """Each FIFO queue the loop's steps take elements from (not tokens): how many a step
    takes, and whether the simulation has it as a queue (else its dequeues never wait)."""
    found: dict[str, dict[str, Any]] = {}
    for name in sorted(stepped):
        op = ops[name]
        handle = shared.get(_queue_of(op), "")
        if handle in tokens:
            continue
        if op["type"] in DEQUEUES and ops.get(handle, {}).get("type") in FIFO_QUEUES:
            queue = found.setdefault(handle, {"takes": 0, "simulated": handle in simulated})
            queue["takes"] += int(op.get("elements") or 1)
    return found


class _Thread(NamedTuple):
    """A thread of a FIFO queue's runner: its client's name, the op it loops over (an
    enqueue, or a group of them), the queue it fills."""

    name: str
    enqueue: str
    queue: str


def _runner_threads(
    data: Mapping[str, Any], ops: dict[str, Any], shared: dict[str, str]
) -> list[_Thread]:
    """Each thread of the FIFO queues' runners (one per op of its ``enqueue_ops``), named
    ``fifo_queue_runner_0``, ... (a name taken already gets a number more)."""
    threads: list[_Thread] = []
    taken: set[str] = set()
    for runner in data.get("queue_runners", []):
        queue = shared.get(str(runner["queue"]), "")
        if ops.get(queue, {}).get("type") not in FIFO_QUEUES:
            continue
        slug = queue.replace("/", "_")
        for enqueue in (e for e in runner.get("enqueue_ops", runner["enqueue"]) if e in ops):
            name = f"{slug}_runner_{sum(1 for t in threads if t.queue == queue)}"
            while name in taken:
                name += "_"
            taken.add(name)
            threads.append(_Thread(name, enqueue, queue))
    return threads


def _queues(
    graph: Graph,
    ops: dict[str, Any],
    needed: set[str],
    devices: dict[str, str],
    data: Mapping[str, Any],
    runners: list[_Thread],
    shared: dict[str, str],
    tokens: set[str],
) -> set[str]:
    """The FIFO queues and the accumulators the steps use, as resources (see the module's
    docstring), each under the name of its first op (ops of one shared name are one)."""
    fed = Counter(thread.queue for thread in runners)
    sizes = data.get("queue_sizes", {})
    names = set()
    for name in sorted({shared[n] for n in needed if n in shared}):
        op = ops[name]
        if op["type"] in ACCUMULATORS:
            users = sum(1 for other in shared.values() if other == name)
            note = (
                f"{plural(users, 'ConditionalAccumulator op')} of shared name "
                f"'{op.get('shared_name') or name}': the queue runner takes what they push"
            )
            graph.add_resource(Resource(name, "accumulator", devices[name], note=note))
            names.add(name)
            continue
        capacity = min(max(0, int(op.get("capacity") or 0)), MAX_TOKENS)
        initial = min(int(sizes.get(name, 0)), capacity or MAX_TOKENS)
        if fed[name]:
            note = f"{plural(fed[name], 'queue runner thread')} fill '{name}'"
        else:
            note = (
                f"nothing fills '{name}' while the program trains: it held "
                f"{plural(initial, 'element')} when its training loop began"
            )
        graph.add_resource(
            Resource(
                name,
                "queue",
                devices[name],
                initial=initial,
                capacity=capacity,
                item="token" if name in tokens else "element",
                note=note,
            )
        )
        names.add(name)
    return names


def _queue_op(
    op: dict[str, Any], queues: set[str], shared: dict[str, str], tokens: set[str]
) -> tuple[OpKind, str | None, int]:
    """An op's kind, and for an op on a resource of ``queues`` (an enqueue or dequeue of a
    FIFO queue, a push to or take from an accumulator), the resource and how many elements it
    moves (as known before it runs; else a generic op)."""
    handle = shared.get(_queue_of(op), "")
    elements = op.get("elements")
    if handle not in queues:
        return GENERIC, None, 0
    if op["type"] in PUSHES:
        return PUSH_GRADIENTS, handle, 1
    if op["type"] in TAKES and elements:
        return TAKE_GRADIENTS, handle, int(elements)
    if op["type"] in DEQUEUES and handle in tokens and elements == 1:
        return DEQUEUE_TOKEN, handle, 1
    if op["type"] in ENQUEUES and elements:
        return (ENQUEUE_TOKENS if handle in tokens else ENQUEUE_ELEMENTS), handle, int(elements)
    if op["type"] in DEQUEUES and elements and handle not in tokens:
        return DEQUEUE_ELEMENTS, handle, int(elements)
    return GENERIC, None, 0


def _shared(ops: dict[str, Any], devices: dict[str, str]) -> dict[str, str]:
    """For each FIFO queue and accumulator op, the resource it is: the first op of its kind
    with its shared name on its device as placed (ops of one shared name are one resource in
    a session, as the token queue and the accumulators of the workers'
    SyncReplicasOptimizers are), else itself."""
    first: dict[tuple[str, str, str], str] = {}
    found: dict[str, str] = {}
    for name, op in ops.items():
        if op["type"] not in FIFO_QUEUES and op["type"] not in ACCUMULATORS:
            continue
        family = "queue" if op["type"] in FIFO_QUEUES else "accumulator"
        key = (family, op.get("shared_name") or name, devices[name])
        found[name] = first.setdefault(key, name)
    return found


def _token_assigns(
    ops: dict[str, Any], shared: dict[str, str], trainable: set[str]
) -> dict[str, tuple[str, str]]:
    """The ops that assign a dequeued token to a counter (``SyncReplicasOptimizer``: a
    worker's ``local_step = sync_token_q.dequeue()``): for each, the dequeue (of one element
    of a FIFO queue) and the counter (a variable not trained). The queues are the token
    queues; the dequeue is what sets the counter (:data:`~simsync.ir.resources.DEQUEUE`
    makes the token it takes the counter's value), so the assign writes nothing more."""
    found = {}
    for name, op in ops.items():
        if op["type"] not in _ASSIGNS or len(op["inputs"]) < 2:
            continue
        variable, source = op["inputs"][0]["op"], op["inputs"][1]["op"]
        if ops[variable]["type"] not in VARIABLE_OPS or variable in trainable:
            continue
        dequeue = ops[source]
        one = dequeue["type"] in DEQUEUES and dequeue.get("elements") == 1
        if one and _queue_of(dequeue) in shared:
            found[name] = (source, variable)
    return found


def _counter_read(
    ops: dict[str, Any], inputs: list[dict[str, Any]], counters: set[str]
) -> tuple[str, ...]:
    """The counter whose value ``inputs`` carry (through its read and the ops that copy or
    fill it: ``fill([N], global_step)``), as the reads of the op that puts it (a push tagged
    with the local step, tokens of the global step)."""
    stack = [i["op"] for i in inputs]
    seen: set[str] = set()
    while stack:
        name = stack.pop()
        if name in counters:
            return (name,)
        if name in seen or name not in ops:
            continue
        seen.add(name)
        stack.extend(i["op"] for i in ops[name]["inputs"])
    return ()


def _queue_of(op: dict[str, Any]) -> str:
    """The op whose handle a queue op (an enqueue, a dequeue) takes first: its queue ("" for
    an op with no input)."""
    return str(op["inputs"][0]["op"]) if op["inputs"] else ""


def _put_cost(
    ops: dict[str, Any],
    kept: list[str],
    timed: dict[str, Any],
    seconds: str,
    queue: str,
    types: frozenset[str],
    shared: dict[str, str],
    each: bool = False,
) -> float | None:
    """What an op on ``queue`` costs whose traced time is none or held a wait: the median of
    the traced ops of ``types`` on the same resource, a copy of the same things (``each``:
    per element they moved). An enqueue of elements is not traced (the profile runs what it
    puts, not the enqueue, which would wait on a full queue): it costs as the dequeues. A
    take from an accumulator was traced waiting for the workers' pushes: it costs as the
    pushes. A worker's dequeue of a token was traced waiting for it: it costs the token's
    share of the chief's enqueue of the step's tokens."""
    found = [
        float(timed[name][seconds]) / (int(ops[name].get("elements") or 1) if each else 1)
        for name in kept
        if name in timed
        and ops[name]["type"] in types
        and shared.get(_queue_of(ops[name])) == queue
    ]
    return statistics.median(found) if found else None


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


def _device(name: str, ops: dict[str, Any], timed: Mapping[str, Any], depth: int = 0) -> str:
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
        if op["type"] not in VARIABLE_OPS:
            continue
        shape = tuple(op.get("shape") or ())
        if None in shape:  # a variable whose shape is not fixed (validate_shape=False)
            shape = ()
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


#: ops that bring a step's examples in: fed, drawn at random, dequeued, read from a dataset
BATCH_INPUTS = FED | ARGUMENTS | DEQUEUES | {
    "RandomStandardNormal", "RandomUniform", "RandomUniformInt", "TruncatedNormal",
    "IteratorGetNext", "IteratorGetNextSync",
}  # fmt: skip


class Batch(NamedTuple):
    """A step's batch: its size, the ops whose work grows with it, those whose first
    output carries it, and the inputs that bring it in (their first dimension is the batch)."""

    size: int
    ops: tuple[str, ...]
    carry: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()


def find_batch(
    ops: Mapping[str, Any], order: list[str], ran: Mapping[str, list[int]]
) -> Batch | None:
    """The batch of a step that runs the ops of ``order`` (in the order they were made), and
    the ops whose work grows with it; None when no input brings examples in.

    The batch is the first dimension most of the inputs' (:data:`BATCH_INPUTS`) first
    outputs have. A tensor carries it when its first dimension is the batch and its op
    is an input or takes a tensor that carries it: the activations and their gradients.
    An input, and an op taking one, does work that grows with the batch. A weight's
    gradient does not carry it (its shape is the weight's, even where a dimension of the
    weight is as large as the batch): the tensors a variable's update takes are followed
    back, through ops whose inputs all have their output's shape (an ``Identity``, an
    ``AddN``, the towers' ``concat``, give or take a first dimension that is not the
    batch's; not a ``MatMul``), and none of those carries it.

    >>> t = lambda op, shape: {"op": op, "slot": 0, "shape": shape}
    >>> ops = {
    ...     "x": {"type": "Placeholder", "inputs": [], "shape": [None, 4]},
    ...     "w": {"type": "VarHandleOp", "inputs": []},
    ...     "read": {"type": "ReadVariableOp", "inputs": [t("w", None)]},
    ...     "y": {"type": "MatMul", "inputs": [t("x", [None, 4]), t("read", [4, 4])]},
    ...     "dw": {"type": "MatMul", "inputs": [t("x", [None, 4]), t("y", [None, 4])]},
    ...     "apply": {"type": "ResourceApplyGradientDescent",
    ...               "inputs": [t("w", None), t("dw", [4, 4])]},
    ... }
    >>> find_batch(ops, list(ops), {"x:0": [4, 4], "y:0": [4, 4]})
    Batch(size=4, ops=('x', 'y', 'dw'), carry=('x', 'y'), inputs=('x',))
    """
    firsts = {}
    for name in order:
        if ops[name]["type"] in BATCH_INPUTS:
            shape = ran.get(f"{name}:0") or ops[name].get("shape")
            if shape and shape[0] is not None:
                firsts[name] = int(shape[0])
    if not firsts:
        return None
    size = Counter(firsts.values()).most_common(1)[0][0]
    inputs = tuple(name for name, first in firsts.items() if first == size)
    weight_side = _weight_side(ops, ran, size)
    carries, batched = set(), []
    for name in order:
        op = ops[name]
        if op["type"] in BATCH_INPUTS:  # its examples: drawn, dequeued (fed: no op)
            carries.add(name)
            batched.append(name)
            continue
        for tensor in op["inputs"]:
            shape = _shape(tensor, ran)
            if tensor["op"] in carries and shape and shape[0] == size:
                batched.append(name)
                if (name, 0) not in weight_side:
                    carries.add(name)
                break
    return Batch(size, tuple(batched), tuple(n for n in order if n in carries), inputs)


def _weight_side(
    ops: Mapping[str, Any], ran: Mapping[str, list[int]], size: int
) -> set[tuple[str, int]]:
    """The tensors (op, slot) that lead to a variable's update with its shape: its
    gradient, followed back through ops whose every non-scalar input has their output's
    shape, give or take a first dimension, and that contract none (a ``MatMul`` of square
    shapes; see :func:`find_batch`)."""
    found: set[tuple[str, int]] = set()
    stack: list[tuple[str, int]] = []
    for op in ops.values():
        if any(word in op["type"] for word in _WRITES):
            stack.extend((t["op"], t["slot"]) for t in op["inputs"][1:])
    shapes: dict[tuple[str, int], tuple[int, ...] | None] = {}
    for op in ops.values():
        for tensor in op["inputs"]:
            shapes[(tensor["op"], tensor["slot"])] = _shape(tensor, ran)
    while stack:
        key = stack.pop()
        if key in found or key[0] not in ops:
            continue
        found.add(key)
        out = shapes.get(key)
        op = ops[key[0]]
        inputs = [t for t in op["inputs"] if _shape(t, ran) != ()]
        contracts = len(inputs) > 1 and any(word in op["type"] for word in _CONTRACTIONS)
        if (
            out
            and inputs
            and not contracts
            and all(_alike(_shape(t, ran), out, size) for t in inputs)
        ):
            stack.extend((t["op"], t["slot"]) for t in inputs)
    return found


#: ops that sum over a dimension of their inputs: where a batch becomes a weight's shape
_CONTRACTIONS = ("MatMul", "Conv", "Einsum")


def _alike(shape: tuple[int, ...] | None, out: tuple[int, ...], batch: int) -> bool:
    """Whether an op's input of ``shape`` is its output's ``out``, give or take a first
    dimension that is not the batch's (the towers' ``concat`` and their mean, not a sum
    over the batch).

    >>> _alike((2, 32, 4), (32, 4), 32), _alike((32, 4), (4,), 32)
    (True, False)
    """
    if shape is None:
        return False
    if shape == out:
        return True
    if shape[1:] == out:
        return shape[0] != batch
    if shape == out[1:]:
        return out[0] != batch
    return bool(shape and out) and shape[1:] == out[1:] and batch not in (shape[0], out[0])


def _tensors(
    graph: Graph, ops: dict[str, Any], kept: list[str], profile: Mapping[str, Any]
) -> None:
    """One IR tensor per (producer, consumer) pair of kept ops, bytes summed; control edges,
    also through an ignored op that waits for others (a constant under
    ``tf.control_dependencies``: its consumers wait for what it waited for). A tensor whose
    static shape leaves a dimension unknown (a placeholder's ``None`` batch) has the shape and
    bytes the profile's traced steps carried, if they carried it."""
    allocated, ran = profile.get("tensors", {}), profile.get("shapes", {})
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
            shape = _shape(one, ran) if one else None
            graph.add_tensor(
                Tensor(src, name, nbytes, shape=shape, dtype=one["dtype"] if one else None)
            )
        for src in op["control"]:
            control |= {src} if src in keep else waits_for(src)
        for src in sorted(control, key=kept.index):
            graph.add_tensor(Tensor(src, name, control=True))


def _shape(tensor: Mapping[str, Any], ran: Mapping[str, list[int]]) -> tuple[int, ...] | None:
    """A tensor's shape: its static one, else as the traced steps carried it, else unknown.

    >>> _shape({"op": "x", "slot": 0, "shape": [None, 10]}, {"x:0": [100, 10]})
    (100, 10)
    >>> _shape({"op": "x", "slot": 0, "shape": [None, 10]}, {}) is None
    True
    """
    static = tensor["shape"]
    if static is not None and None not in static:
        return tuple(static)
    traced = ran.get(f"{tensor['op']}:{tensor['slot']}")
    return tuple(traced) if traced is not None else None


def _bytes(tensor: dict[str, Any], allocated: Any) -> int:
    if tensor["bytes"] is not None:
        return int(tensor["bytes"])
    return int(allocated.get(f"{tensor['op']}:{tensor['slot']}", 0))


def _report(
    data: Mapping[str, Any],
    ops: dict[str, Any],
    needed: set[str],
    reasons: dict[str, str],
    kept: list[str],
    towers: Any,
    untimed: int,
    profile: Mapping[str, Any] | None,
    graph: Graph,
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
        "queue_runners": data.get("queue_runners", []),
        "collections": data.get("collections", {}),
    }
