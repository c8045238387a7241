"""The plan of a program's values: the simulated order of reads and writes, as the program's
own ops can replay it (the parent's side: no TensorFlow here).

:func:`replay_plan` reads the simulation's record of every variable access (which version
each run read, which op wrote which version, in the simulated order) and says, for the child
(:mod:`simsync.tf_backend.program.replay`), in that order:

- ``["compute", client, step, {variable: version}]``: compute a run's values with the
  variables at the versions it read; placed at the first of its last read and its first
  write;
- ``["write", client, step, op]``: apply one of the run's writes to the latest versions.

Each client says which thread's feeds it uses, which tensors its compute fetches (the inputs
of its writes), and its writes: the program's op each one is, and the tensor whose value goes
into each of its inputs. For the program as written that is the op's own input. For a thread
of ``--mode async``, an input the averaging fed (ops the mode left out) takes the one tensor
of the thread's tower that went into the averaging: its own gradient instead of the mean.

What cannot be replayed raises :class:`NoValues` with the reason: a what-if whose ops the
program does not have (towers copied from ``tower_0``, or dropped from its averaging), and a
program whose workers push to accumulators (its own ``SyncReplicasOptimizer``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from simsync.ir import Graph, tower_work
from simsync.kinds import kind_of
from simsync.tf_backend.program.whatif import copied_from
from simsync.trace import Trace, VariableAccess
from simsync.words import plural

__all__ = ["NoValues", "replay_plan"]

_HANDLES = ("resource",)


class NoValues(Exception):
    """The values of this simulation cannot come from the program's own ops; why."""


def replay_plan(
    graph: Graph, trace: Trace, data: Mapping[str, Any], original: Graph
) -> dict[str, Any]:
    """The plan of the simulation of ``graph`` (``trace`` kept with detail), a what-if of the
    imported ``original`` made from the program ``data`` describes; see the module's
    docstring."""
    ops = {op["name"]: op for op in data["ops"]}
    made = [op.name for op in graph.ops() if copied_from(op.name)[0] not in ops]
    # ops on an accumulator or a token queue (SyncReplicas): made by the what-if, not copied
    added = [op for op in graph.ops() if op.name in made and kind_of(op.kind).action]
    if added:
        raise NoValues(
            f"the what-if added {len(added)} ops of simsync's own (such as '{added[0].name}', "
            f"{added[0].kind}): the replay computes with the program's ops only, and has "
            "none for these yet"
        )
    if made:
        raise NoValues(
            f"the what-if made {len(made)} ops the program does not have (such as "
            f"'{made[0]}'): TensorFlow has nothing to compute them with; run the program "
            "built that way instead"
        )
    pooled = sorted(name for name, r in graph.resources.items() if r.kind == "accumulator")
    if pooled:  # the program's own SyncReplicasOptimizer
        raise NoValues(
            f"its workers push their gradients to {plural(len(pooled), 'accumulator')} (such "
            f"as '{pooled[0]}'), and the replay has no accumulator yet: it would apply "
            "each worker's gradient where TensorFlow applies their mean once per step"
        )
    batch, own = (g.facts.batch and g.facts.batch.size for g in (graph, original))
    if batch != own:
        raise NoValues(
            f"the what-if's batch is {batch}, the program fed its ops batches of {own}: run "
            "the program with that batch instead"
        )
    if sorted(graph.towers) != sorted(original.towers):
        raise NoValues(
            f"the program's averaging takes its {len(original.towers)} towers' gradients, "
            f"the what-if has {len(graph.towers)}; run the program built that way instead"
        )
    threads = {client["name"]: client["thread"] for client in data["clients"]}
    clients: dict[str, Any] = {}
    for client in graph.clients:
        if client.daemon and client.name not in threads:
            continue  # a queue runner's thread: its elements are the program's own
        thread = threads.get(client.name)
        if thread is None:  # a thread of --mode async: the program's one loop, per tower
            if len(threads) != 1:
                raise NoValues(f"client '{client.name}' is not one of the program's threads")
            (thread,) = threads.values()
        clients[client.name] = {
            "thread": thread,
            "losses": [copied_from(name)[0] for name in client.fetches],
            "fetch": [],
            "writes": {},
        }
    events, variables, write_ops = _events(graph, trace, original, ops, clients)
    return {
        "variables": variables,
        "write_ops": sorted(write_ops),
        "clients": clients,
        "events": events,
    }


def _events(
    graph: Graph,
    trace: Trace,
    original: Graph,
    ops: dict[str, Any],
    clients: dict[str, Any],
) -> tuple[list[list[Any]], list[str], set[str]]:
    """The events in the simulated order, the variables they touch, the program's write ops."""
    accesses = trace.accesses
    at = _compute_points(accesses)
    events: list[list[Any]] = []
    variables: set[str] = set()
    write_ops: set[str] = set()
    written: set[tuple[str, int, str]] = set()
    for index, access in enumerate(accesses):
        for client, step, reads in at.get(index, ()):
            variables.update(reads)
            events.append(["compute", client, step, reads])
        variables.add(access.variable)
        if not access.write or (access.client, access.step, access.op) in written:
            continue
        written.add((access.client, access.step, access.op))
        spec = clients[access.client]
        if access.op not in spec["writes"]:
            spec["writes"][access.op] = _write(graph, original, ops, access.op)
            for tensor in spec["writes"][access.op]["inputs"].values():
                if tensor not in spec["fetch"]:
                    spec["fetch"].append(tensor)
        write_ops.add(spec["writes"][access.op]["op"])
        events.append(["write", access.client, access.step, access.op])
    return events, sorted(variables), write_ops


def _compute_points(
    accesses: Sequence[VariableAccess],
) -> dict[int, list[tuple[str, int, dict[str, int]]]]:
    """Where each run's compute goes (before the access of that index), with the versions it
    reads: at the first of its last read and its first write. A read after that point must
    see a version made before it; a run must read each variable at one version (its reads
    are one computation). Else :class:`NoValues`.

    >>> from simsync.trace import VariableAccess as A
    >>> read, apply = A("w", "read", "c", 0, 0.0, 0, False), A("w", "apply", "c", 0, 1.0, 1, True)
    >>> _compute_points([read, apply])
    {0: [('c', 0, {'w': 0})]}
    """
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    made_at: dict[tuple[str, int], int] = {}
    for index, access in enumerate(accesses):
        run = runs.setdefault((access.client, access.step), {"reads": [], "points": [None, None]})
        if access.write:
            made_at[(access.variable, access.version)] = index
            if run["points"][1] is None:
                run["points"][1] = index
        else:
            run["reads"].append((index, access.variable, access.version))
            run["points"][0] = index
    at: dict[int, list[tuple[str, int, dict[str, int]]]] = {}
    for (client, step), run in runs.items():
        point = min(p for p in run["points"] if p is not None)
        versions: dict[str, int] = {}
        for index, variable, version in run["reads"]:
            seen = versions.setdefault(variable, version)
            if seen != version:
                raise NoValues(
                    f"{client} step {step} reads '{variable}' at two versions ({seen} and "
                    f"{version}): one computation of its step cannot see both"
                )
            if index > point and made_at.get((variable, version), -1) > point:
                raise NoValues(
                    f"{client} step {step} reads '{variable}' after its own first update, at "
                    "a version made since: its step cannot be computed before that update"
                )
        at.setdefault(point, []).append((client, step, versions))
    return at


def _write(graph: Graph, original: Graph, ops: dict[str, Any], name: str) -> dict[str, Any]:
    """The program's op the write ``name`` is, and the tensor that feeds each data input."""
    program, tower = copied_from(name)
    inputs: dict[str, str] = {}
    for slot, tensor in enumerate(ops[program]["inputs"]):
        if tensor["dtype"] in _HANDLES or str(tensor["dtype"]).endswith("_ref"):
            continue
        source = f"{tensor['op']}:{tensor['slot']}"
        if tower is not None and tensor["op"] in original.nx and tensor["op"] not in graph.nx:
            source = _own_input(graph, original, ops, tensor, tower, name)
        inputs[str(slot)] = source
    return {"op": program, "inputs": inputs}


def _own_input(
    graph: Graph,
    original: Graph,
    ops: dict[str, Any],
    tensor: dict[str, Any],
    tower: int,
    name: str,
) -> str:
    """The one tensor of ``tower``'s work that went into the averaging that fed ``tensor``."""
    work = original.memo("tower_work", lambda: tower_work(original))
    found: list[str] = []
    todo, seen = [tensor["op"]], {tensor["op"]}
    while todo:
        for up in ops[todo.pop()]["inputs"]:
            source = up["op"]
            if source in graph.nx:
                if work.get(source) == tower:
                    found.append(f"{source}:{up['slot']}")
            elif source in original.nx and source not in seen:  # more of the averaging
                seen.add(source)
                todo.append(source)
    found = list(dict.fromkeys(found))
    if len(found) != 1:
        raise NoValues(
            f"'{name}': the averaging before it takes {len(found)} tensors of tower_{tower}, "
            "not one: which of them is the tower's own gradient is not clear"
        )
    return found[0]
