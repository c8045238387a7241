"""What if: an imported graph changed as a whole (no TensorFlow here). Each function returns a
new :class:`~simsync.ir.Graph` and a line for the report.

- :func:`with_towers`: N towers. Towers below the program's own count are kept as they are;
  the others are copies of ``tower_0`` with its placement pattern (its own device ``/gpu:0``
  becomes ``/gpu:k``; what it placed on shared devices, the reads on ``/cpu:0``, stays
  there). A tower's *work* is its ops and the ops outside every tower that depend on it alone
  (each tower's ``ExpandDims`` before ``average_gradients``' ``concat``); ops where towers
  meet take every tower's inputs, and their cost grows with the number of towers (the
  ``concat`` and ``Mean`` of N inputs). A client that runs one tower's work alone (a thread
  of asynchronous training, running its own train op) is copied with its tower: N towers, N
  threads. A program's own SyncReplicasOptimizer then hands out ``max(N, R)`` tokens a step
  (one per worker), where it handed out ``max(its workers, R)``. A program with no towers
  whose threads run one train op (Hogwild) gets N such threads instead.
- the mode changes (``--mode``) are in :mod:`simsync.tf_backend.program.modes`.
- :func:`with_speeds`: device speeds, one per tower's device, repeated.
- :func:`with_link`: every device's port bandwidth and latency.

>>> from simsync.ir import Client, Cost, Device, Graph, Op
>>> g = Graph()
>>> for d in ("/cpu:0", "/gpu:0", "/gpu:1"):
...     g.add_device(Device(d))
>>> for i in (0, 1):
...     grad = g.add_op(Op(f"tower_{i}/grad", "generic", f"/gpu:{i}", Cost(0.01), tower=i))
...     expand = g.add_op(Op(f"ExpandDims_{i}", "generic", "/cpu:0", Cost(0.001)))
...     g.connect(grad, expand, nbytes=400)
>>> concat = g.add_op(Op("concat", "generic", "/cpu:0", Cost(0.002)))
>>> for i in (0, 1):
...     g.connect(f"ExpandDims_{i}", concat, nbytes=400)
>>> g.add_client(Client("main", ("concat",)))
>>> bigger, line = with_towers(g, 4)
>>> line
'4 towers: tower_0 and tower_1 as the program built them, 2 more replicated from tower_0'
>>> sorted(bigger.towers), len(bigger.inputs("concat")), bigger.op("concat").cost.mean
([0, 1, 2, 3], 4, 0.004)
>>> bigger.op("tower_3/grad").device, bigger.op("ExpandDims_0 [tower_3]").device
('/gpu:3', '/cpu:0')
"""

from __future__ import annotations

import dataclasses
import re
import statistics

from simsync.errors import UsageError
from simsync.ir import (
    Graph,
    Link,
    Op,
    crosses_devices,
    run_orders,
    same_work,
    tower_dependencies,
    tower_work,
)
from simsync.kinds.take_gradients import TAKE_GRADIENTS
from simsync.kinds.tokens import ENQUEUE_TOKENS
from simsync.words import plural

__all__ = [
    "MAX_BATCH",
    "MAX_TOWERS",
    "bytes_out",
    "copied_from",
    "on_devices_of_their_own",
    "run_only",
    "scaled",
    "state_of",
    "thread_copy",
    "tower_devices",
    "towers_meet",
    "with_batch",
    "with_link",
    "with_run_work",
    "with_speeds",
    "with_towers",
]

#: The most towers ``--towers`` asks for (a lesson's ``try_towers`` too).
MAX_TOWERS = 64


def _copy_name(name: str, scope: str | None, tower: int) -> str:
    """A copy's name: ``tower_0/x`` becomes ``tower_3/x``; a shared op of tower 0's work,
    ``ExpandDims [tower_3]``."""
    if scope is not None and name.startswith(scope + "/"):
        return f"{scope.rstrip('0123456789')}{tower}/{name[len(scope) + 1 :]}"
    return f"{name} [tower_{tower}]"


def with_towers(graph: Graph, towers: int) -> tuple[Graph, str]:
    """``graph`` with ``towers`` towers (see the module's docstring)."""
    have = sorted(graph.towers)
    if not 1 <= towers <= MAX_TOWERS:
        raise UsageError(f"--towers {towers}: must be from 1 to {MAX_TOWERS}")
    if not have:
        return _with_threads(graph, towers)
    work = tower_work(graph)
    _refuse_towers_that_meet(graph, towers)
    first = [op for op in graph.ops() if work.get(op.name) == 0]
    scope = _scope(first)
    own = _own_device(first)
    new = state_of(graph, graph.link)
    devices = dict(graph.devices)
    depends = tower_dependencies(graph)
    renamed: dict[tuple[str, int], str] = {}
    alone = _run_by_dropped(graph, work, depends, towers) if len(have) > 1 else set()
    for op in graph.ops():
        tower = work.get(op.name)
        if (tower is not None and tower >= towers) or op.name in alone:
            continue  # a tower dropped, or an op only a dropped tower's thread ran
        meeting = tower is None and len(depends[op.name]) > 1
        cost = op.cost
        if meeting and any(work.get(t.src) is not None for t in graph.inputs(op.name)):
            cost = dataclasses.replace(cost, mean=cost.mean * towers / len(have))
        new.add_op(dataclasses.replace(op, cost=cost))
    for tower in range(len(have), towers):
        device = _device_of(own, tower)
        if own is not None and device is not None and device not in devices:
            devices[device] = dataclasses.replace(graph.devices[own], name=device)
        for op in first:
            name = _copy_name(op.name, scope, tower)
            renamed[(op.name, tower)] = name
            placed = device if (own is not None and op.device == own) else op.device
            new.add_op(
                dataclasses.replace(
                    op,
                    name=name,
                    device=placed or op.device,
                    tower=tower if op.tower is not None else None,
                )
            )
    for placed_on in devices.values():
        new.add_device(placed_on)
    for tensor in graph.edges():
        if tensor.src in new.nx and tensor.dst in new.nx:
            new.add_tensor(tensor)
    for tower in range(len(have), towers):
        for tensor in graph.edges():
            if work.get(tensor.src) != 0 and work.get(tensor.dst) != 0:
                continue
            src = renamed.get((tensor.src, tower), tensor.src)
            dst = renamed.get((tensor.dst, tower), tensor.dst)
            if src in new.nx and dst in new.nx and (src, dst) != (tensor.src, tensor.dst):
                new.add_tensor(dataclasses.replace(tensor, src=src, dst=dst))
    last = min(towers, len(have)) - 1
    names = {client.name for client in graph.clients}
    for client in graph.clients:
        thread_of = _own_tower(client.fetches, work, depends) if len(have) > 1 else None
        if thread_of is not None:  # a thread running one tower's train op: copied with it
            if thread_of < towers:
                new.add_client(client)
            for tower in range(len(have), towers) if thread_of == 0 else ():
                copied = tuple(renamed.get((fetch, tower), fetch) for fetch in client.fetches)
                name = _copy_client(client.name, tower, names)
                new.add_client(dataclasses.replace(client, name=name, fetches=copied))
            continue
        fetches = []
        for name in client.fetches:
            if name in new.nx:
                fetches.append(name)
                if work.get(name) == 0:  # a fetch of tower 0 (its loss): each copy's too
                    fetches += [renamed[(name, t)] for t in range(len(have), towers)]
            elif work.get(name, 0) >= towers:  # a fetch of a dropped tower: the last kept
                match = [o.name for o in graph.ops() if work.get(o.name) == last]
                fetches.append(_same_in(name, work[name], last, scope, match))
        new.add_client(dataclasses.replace(client, fetches=tuple(dict.fromkeys(fetches))))
    return new, _line(towers, len(have), scope) + _tokens_per_step(new, len(have), towers)


def towers_meet(graph: Graph) -> str | None:
    """Why ``--towers`` cannot copy the towers of ``graph``, or None when it can: towers that
    take each other's data themselves (a ``tf.distribute`` strategy's all-reduce: one op in
    each replica, each taking every replica's gradients), of which it is not known which of
    a copy's ops would take which towers'."""
    work = tower_work(graph)
    for tensor in graph.edges():
        src, dst = work.get(tensor.src), work.get(tensor.dst)
        if not tensor.control and src is not None and dst is not None and src != dst:
            return (
                f"this program's towers meet inside themselves ({tensor.dst} in tower {dst} "
                f"takes {tensor.src} of tower {src}, as a tf.distribute strategy's all-reduces "
                "and reductions do), which simsync cannot copy for other numbers of towers yet"
            )
    return None


def _refuse_towers_that_meet(graph: Graph, towers: int) -> None:
    """Refuses (``UsageError``) to copy towers that meet inside themselves
    (:func:`towers_meet`)."""
    why = towers_meet(graph)
    if why is not None:
        raise UsageError(
            f"--towers {towers}: {why}: run the program with as many replicas instead "
            f"(--devices {towers} where its strategy takes every device, as "
            f"MirroredStrategy() does; a cluster's workers: --tasks worker={towers})"
        )


def _with_threads(graph: Graph, threads: int) -> tuple[Graph, str]:
    """``graph`` (no towers) with ``threads`` threads running its one train op, where the
    program ran two or more (Hogwild): the first ``threads`` of them, or copies of the first.

    >>> from simsync.ir import Client, Cost, Graph, Op
    >>> g = Graph()
    >>> _ = g.add_op(Op("train", "generic", "/cpu:0", Cost(0.001)))
    >>> for i in (0, 1):
    ...     g.add_client(Client(f"thread_{i}", ("train",)))
    >>> more, line = _with_threads(g, 3)
    >>> [c.name for c in more.clients]
    ['thread_0', 'thread_1', 'thread_2']
    >>> line
    '3 threads: thread_0 and thread_1 as the program ran them, 1 more like thread_0'
    """
    loops = [c for c in graph.clients if not c.daemon]
    alike = [c for c in loops if c.fetches == loops[0].fetches] if loops else []
    if len(alike) < 2:
        raise UsageError(
            "--towers: the program's graph has no towers to replicate, nor threads running "
            "one train op to add to"
        )
    new = _copy(graph)
    kept = {c.name for c in alike[:threads]}
    new.clients = [c for c in graph.clients if c.name in kept or c not in alike]
    taken = {c.name for c in graph.clients}
    for k in range(len(alike), threads):
        new.add_client(dataclasses.replace(alike[0], name=_copy_client(alike[0].name, k, taken)))
    if threads <= len(alike):
        return new, f"{plural(threads, 'thread')}: the program's first {threads} of {len(alike)}"
    ran = " and ".join(c.name for c in alike) if len(alike) == 2 else f"{len(alike)} threads"
    return new, (
        f"{plural(threads, 'thread')}: {ran} as the program ran them, "
        f"{threads - len(alike)} more like {alike[0].name}"
    )


def _tokens_per_step(new: Graph, had: int, towers: int) -> str:
    """A program's own SyncReplicasOptimizer puts ``max(N, R)`` tokens a step, N its
    workers (its ``total_num_replicas``) and R the gradients a take waits for: with one
    worker per tower, ``max(towers, R)`` in ``new`` (the program's count kept where it was
    not ``max(N, R)``), and the line's words for it ("" when there are none)."""
    replicas = max((op.amount for op in new.ops() if op.kind == TAKE_GRADIENTS.name), default=0)
    changed = [
        op
        for op in new.ops()
        if op.kind == ENQUEUE_TOKENS.name
        and op.amount == max(had, replicas) != max(towers, replicas)
    ]
    for op in changed:
        new.replace_op(dataclasses.replace(op, amount=max(towers, replicas)))
    if not changed:
        return ""
    return f"; {max(towers, replicas)} tokens a step, each step still applying {replicas} gradients"


def _run_by_dropped(
    graph: Graph, work: dict[str, int], depends: dict[str, frozenset[int]], towers: int
) -> set[str]:
    """The ops that only the threads of dropped towers run (their reads of shared
    variables, on ``/cpu:0``): they go with their threads."""
    orders = run_orders(graph, [client.fetches for client in graph.clients])
    kept: set[str] = set()
    dropped: set[str] = set()
    for client, order in zip(graph.clients, orders, strict=True):
        own = _own_tower(client.fetches, work, depends)
        (dropped if own is not None and own >= towers else kept).update(order)
    return dropped - kept


def _own_tower(
    fetches: tuple[str, ...], work: dict[str, int], depends: dict[str, frozenset[int]]
) -> int | None:
    """The tower whose work alone a client's fetches are (a thread of asynchronous training
    runs its own tower's train op, and may fetch a shared counter beside it), or None (the
    tower loop's client fetches every tower)."""
    towers = {work.get(name) for name in fetches if depends[name]}
    return towers.pop() if len(towers) == 1 and None not in towers else None


def _copy_client(name: str, tower: int, taken: set[str]) -> str:
    """The name of the copy of client ``name`` (tower 0's thread) for ``tower``: ``thread_0``
    becomes ``thread_4``; a name taken already gets the tower added."""
    stem = name.rstrip("0123456789")
    copy = f"{stem}{tower}" if stem != name else f"{name} [tower_{tower}]"
    while copy in taken:
        copy = f"{copy} [tower_{tower}]"
    taken.add(copy)
    return copy


def _same_in(name: str, tower: int, other: int, scope: str | None, names: list[str]) -> str:
    """The op of tower ``other`` that matches ``name`` of tower ``tower``."""
    if scope is not None:
        prefix = scope.rstrip("0123456789")
        candidate = re.sub(rf"^{re.escape(prefix)}{tower}/", f"{prefix}{other}/", name)
        if candidate in names:
            return candidate
    return names[-1]


def _scope(ops: list[Op]) -> str | None:
    tops = {op.name.split("/", 1)[0] for op in ops if op.tower is not None and "/" in op.name}
    return next(iter(tops)) if len(tops) == 1 else None


#: a device of tower 0's own: a GPU, or a task of a cluster's job (a worker), by its index
_OWN = re.compile(r"(/gpu:|/job:[A-Za-z0-9_]+/task:)0")


def _own_device(ops: list[Op]) -> str | None:
    """The device tower 0 placed its own ops on, when it is a GPU of its own (or worker 0
    of a cluster: each worker its task)."""
    placed = [op.device for op in ops if op.tower is not None]
    if not placed:
        return None
    device = max(set(placed), key=placed.count)
    return device if _OWN.fullmatch(device) else None


def _device_of(own: str | None, tower: int) -> str | None:
    """Tower ``tower``'s own device, as tower 0's is ``own``.

    >>> _device_of("/gpu:0", 3), _device_of("/job:worker/task:0", 3), _device_of(None, 3)
    ('/gpu:3', '/job:worker/task:3', None)
    """
    return None if own is None else f"{own[:-1]}{tower}"


def _line(towers: int, had: int, scope: str | None) -> str:
    name = scope or "tower 0"
    if towers <= had:
        return f"{plural(towers, 'tower')}: the program's first {towers} of {had}"
    kept = f"{name} and {name.rstrip('0123456789')}{had - 1}" if had == 2 else f"{had} towers"
    return (
        f"{plural(towers, 'tower')}: {kept} as the program built them, "
        f"{towers - had} more replicated from {name}"
    )


def run_only(graph: Graph) -> tuple[Graph, int]:
    """``graph`` without the ops no client runs (a tower's ops that fed only the averaging
    left out, nothing fetched), and how many there were."""
    run = set().union(*run_orders(graph, [client.fetches for client in graph.clients]))
    unrun = [op.name for op in graph.ops() if op.name not in run]
    if not unrun:
        return graph, 0
    new = state_of(graph, graph.link)
    for device in graph.devices.values():
        new.add_device(device)
    for op in graph.ops():
        if op.name in run:
            new.add_op(op)
    for tensor in graph.edges():
        if tensor.src in run and tensor.dst in run:
            new.add_tensor(tensor)
    for client in graph.clients:
        new.add_client(client)
    return new, len(unrun)


def thread_copy(name: str, tower: int) -> str:
    """The name of ``name``'s copy in tower ``tower``'s thread (:func:`copied_from` reads it)."""
    return f"{name} [tower_{tower}]"


_COPY = re.compile(r"^(?P<name>.*) \[tower_(?P<tower>\d+)\]$")


def copied_from(name: str) -> tuple[str, int | None]:
    """The program's op an op of a what-if is, and the tower of the thread whose copy it is
    (None: the program's op itself).

    >>> copied_from(thread_copy("GradientDescent/update_w/ResourceApplyGradientDescent", 1))
    ('GradientDescent/update_w/ResourceApplyGradientDescent', 1)
    >>> copied_from("concat")
    ('concat', None)
    """
    found = _COPY.match(name)
    return (found["name"], int(found["tower"])) if found else (name, None)


def bytes_out(graph: Graph, name: str) -> int:
    """The bytes an op sends on (the most it sends on any one tensor)."""
    return max((t.nbytes for t in graph.outputs(name)), default=0)


def with_speeds(graph: Graph, speeds: list[float]) -> tuple[Graph, str]:
    """Every tower's device at the given speed (the list repeated over the towers)."""
    if not speeds:
        return graph, ""
    towers = sorted(graph.towers)
    placed = tower_devices(graph)
    new = _copy(graph)
    given = {tower: speeds[i % len(speeds)] for i, tower in enumerate(towers)}
    for tower, speed in given.items():
        device = placed.get(tower)
        if device is not None:
            new.devices[device] = dataclasses.replace(new.devices[device], speed=speed)
    shown = ", ".join(f"{s:g}" for s in speeds)
    if not placed:
        return new, f"speeds {shown}: no tower runs on a device of its own, so they change nothing"
    line = f"tower devices at speeds {shown}"
    if len(speeds) != len(towers):  # said, never silently repeated or cut
        each = ", ".join(f"tower_{t} {given[t]:g}" for t in towers)
        line += f" ({plural(len(speeds), 'speed')} for {plural(len(towers), 'tower')}: {each})"
    return new, line


def tower_devices(graph: Graph) -> dict[int, str]:
    """Each tower's device of its own: the first device, in the graph's order, that runs its
    ops and no other tower's (a GPU of a TF1 tower loop, a replica's logical CPU under a
    ``tf.distribute`` strategy, with the ops that meet there; not ``/cpu:0`` where every
    tower reads the variables).

    >>> from simsync.ir import Device, Op
    >>> g = Graph()
    >>> for i in range(2):
    ...     _ = g.add_op(Op(f"tower_{i}/grad", "generic", f"/cpu:{i}", tower=i))
    ...     _ = g.add_op(Op(f"tower_{i}/read", "generic", "/cpu:0", tower=i))
    >>> tower_devices(g)
    {1: '/cpu:1'}
    """
    towers_on: dict[str, set[int]] = {}
    for op in graph.ops():
        if op.tower is not None:
            towers_on.setdefault(op.device, set()).add(op.tower)
    own: dict[int, str] = {}
    for device, towers in towers_on.items():
        if len(towers) == 1:
            own.setdefault(next(iter(towers)), device)
    return own


def on_devices_of_their_own(graph: Graph) -> tuple[Graph, str] | None:
    """``graph`` as it would run on GPUs, each tower's device one of its own, where this
    machine's cores are fewer than its towers (their logical devices share the cores, and
    so take turns): its ops no longer sharing a pool of cores, each tower's copy of the same
    work (:func:`~simsync.ir.analysis.same_work`) at the median of the copies' costs (each
    copy was timed while the others took turns with it on the cores, which made some slower
    by chance: on a loaded machine twice as slow); with one line that says so. None where
    the towers' devices do not share fewer cores than there are towers (the graph runs on
    them as it would on GPUs).

    >>> from simsync.ir import Device, LOCALHOST, Op
    >>> g = Graph()
    >>> for i in range(4):
    ...     g.add_device(Device(f"/gpu:{i}", kind="gpu"))
    ...     _ = g.add_op(Op(f"tower_{i}/grad", "generic", f"/gpu:{i}", tower=i))
    >>> on_devices_of_their_own(g) is None
    True
    >>> g.host_cores[LOCALHOST] = 2
    >>> own, line = on_devices_of_their_own(g)
    >>> own.host_cores, line
    ({}, 'here the 4 towers share 2 cores; on GPUs each tower has a device of its own')
    """
    towers = len(graph.towers)
    cores = min(graph.host_cores.values(), default=None)
    if cores is None or towers <= cores:
        return None
    new = _copy(graph)
    new.host_cores.clear()
    new.core_efficiency.clear()
    for copies in same_work(graph):
        typical = statistics.median(graph.op(name).cost.mean for name in copies)
        for name in copies:
            op = graph.op(name)
            new.replace_op(dataclasses.replace(op, cost=dataclasses.replace(op.cost, mean=typical)))
    own = "on GPUs each tower has a device of its own"
    return new, f"here the {towers} towers share {plural(cores, 'core')}; {own}"


#: the largest batch ``--batch`` asks for
MAX_BATCH = 1 << 20


def with_batch(graph: Graph, batch: int) -> tuple[Graph, str]:
    """A batch of ``batch`` examples where the program's inputs bring the batch its import
    found (``graph.facts.batch``, :func:`~simsync.tf_backend.program.convert.find_batch`):
    the ops whose work grows with the batch take their cost beyond an op's fixed cost (the
    median of the others', at most their own) times the ratio, and the tensors that carry
    it carry that many examples.

    >>> from simsync.ir import BatchFacts, Client, Cost, GraphFacts, Op, Tensor
    >>> g = Graph()
    >>> for name, seconds in (("read", 2e-6), ("matmul", 102e-6), ("apply", 2e-6)):
    ...     _ = g.add_op(Op(name, "generic", "/cpu:0", Cost(seconds)))
    >>> g.add_tensor(Tensor("read", "matmul", 64, shape=(4, 4)))
    >>> g.add_tensor(Tensor("matmul", "apply", 400, shape=(100, 1)))
    >>> g.add_client(Client("main", ("apply",)))
    >>> g.facts = GraphFacts(batch=BatchFacts(100, ops=("matmul",), carry=("matmul",)))
    >>> bigger, line = with_batch(g, 400)
    >>> round(bigger.op("matmul").cost.mean * 1e6), bigger.op("apply").cost.mean * 1e6
    (402, 2.0)
    >>> [(t.nbytes, t.shape) for t in bigger.outputs("matmul")], line
    ([(1600, (400, 1))], 'batch 400 (the program ran 100): 1 op and 1 tensor grow with it')
    """
    found = graph.facts.batch
    if found is None:
        raise UsageError(
            f"--batch {batch}: the program's step takes no input that brings examples in (a "
            "fed placeholder, a random draw, a dequeue, a dataset): which of its work grows "
            "with the batch is not known"
        )
    size, ratio = found.size, batch / found.size
    grows, carry = set(found.ops), set(found.carry)
    others = [op.cost.mean for op in graph.ops() if op.name not in grows and op.cost.mean > 0]
    fixed = statistics.median(others) if others else 0.0
    new = state_of(graph, graph.link)
    new.facts = dataclasses.replace(new.facts, batch=dataclasses.replace(found, size=batch))
    for device in graph.devices.values():
        new.add_device(device)
    for op in graph.ops():
        if op.name in grows:
            floor = min(op.cost.mean, fixed)
            cost = dataclasses.replace(op.cost, mean=floor + (op.cost.mean - floor) * ratio)
            op = dataclasses.replace(op, cost=cost)
        new.add_op(op)
    tensors = 0
    for tensor in graph.edges():
        shape = tensor.shape
        if tensor.src in carry and shape and shape[0] == size:
            tensors += 1
            tensor = dataclasses.replace(
                tensor, nbytes=round(tensor.nbytes * ratio), shape=(batch, *shape[1:])
            )
        new.add_tensor(tensor)
    for client in graph.clients:
        new.add_client(client)
    line = f"batch {batch} (the program ran {size})"
    if batch == size:
        return new, line + ": its own, so it changes nothing"
    return new, f"{line}: {plural(len(grows), 'op')} and {plural(tensors, 'tensor')} grow with it"


def with_link(
    graph: Graph, bandwidth_gbps: float | None, latency_us: float | None
) -> tuple[Graph, str]:
    """Every device's ports at ``bandwidth_gbps`` gigabits per second and ``latency_us``."""
    if bandwidth_gbps is None and latency_us is None:
        return graph, ""
    link = Link(
        graph.link.bytes_per_second if bandwidth_gbps is None else bandwidth_gbps * 1e9 / 8,
        graph.link.latency if latency_us is None else latency_us * 1e-6,
    )
    new = _copy(graph, link)
    parts = []
    if bandwidth_gbps is not None:
        parts.append(f"{bandwidth_gbps:g} Gb/s")
    if latency_us is not None:
        parts.append(f"{latency_us:g} µs latency")
    line = "links at " + ", ".join(parts)
    if not any(crosses_devices(graph, tensor) for tensor in graph.edges()):
        line += ": no tensor of this graph goes from one device to another, so they change nothing"
    return new, line


def scaled(graph: Graph, scale: float) -> Graph:
    """A copy of ``graph`` whose ops take ``scale`` times their cost (the fit of traced
    latencies to the untraced step: :mod:`simsync.simulation.fit`).

    >>> from simsync.ir import Cost, Op
    >>> g = Graph()
    >>> _ = g.add_op(Op("a", "generic", "/cpu:0", Cost(2e-3)))
    >>> scaled(g, 0.5).op("a").cost.mean, g.op("a").cost.mean
    (0.001, 0.002)
    """
    new = _copy(graph)
    for op in graph.ops():
        cost = dataclasses.replace(
            op.cost, mean=op.cost.mean * scale, overhead=op.cost.overhead * scale
        )
        new.replace_op(dataclasses.replace(op, cost=cost))
    return new


def with_run_work(graph: Graph, seconds: float) -> Graph:
    """A copy of ``graph`` whose clients each do ``seconds`` more of TensorFlow's own work
    in every run (``Client.run_work``: the fit of a step longer than its traced ops,
    :mod:`simsync.simulation.fit`); not its daemons (a queue runner's thread runs
    a few ops of its own).

    >>> from simsync.ir import Client, Op
    >>> g = Graph()
    >>> _ = g.add_op(Op("a", "generic", "/cpu:0"))
    >>> g.add_client(Client("main", ("a",), overhead=1e-4))
    >>> fitted = with_run_work(g, 2e-4).clients[0]
    >>> fitted.run_work, fitted.overhead, g.clients[0].run_work
    (0.0002, 0.0001, 0.0)
    """
    return _copy(graph, run_work=seconds)


def state_of(graph: Graph, link: Link) -> Graph:
    """A new graph with ``graph``'s facts, host tables, variables and resources (no devices,
    ops, tensors or clients yet)."""
    new = Graph(name=graph.name, link=link)
    new.facts = graph.facts
    new.host_cores.update(graph.host_cores)
    new.core_efficiency.update(graph.core_efficiency)
    for variable in graph.variables.values():
        new.add_variable(variable)
    for resource in graph.resources.values():
        new.add_resource(resource)
    return new


def _copy(graph: Graph, link: Link | None = None, run_work: float | None = None) -> Graph:
    """A copy of ``graph``, with ``link`` its link and ``run_work`` more for each client but
    the daemons."""
    new = state_of(graph, link or graph.link)
    for device in graph.devices.values():
        new.add_device(device)
    for op in graph.ops():
        new.add_op(op)
    for tensor in graph.edges():
        new.add_tensor(tensor)
    for client in graph.clients:
        new.add_client(
            client
            if run_work is None or client.daemon
            else dataclasses.replace(client, run_work=client.run_work + run_work)
        )
    return new
