"""Mode changes of an imported tower loop (``--mode``), each a transformation of its graph (no
TensorFlow here) that returns a new :class:`~simsync.ir.Graph` and a line for the report.

Both start from where the towers meet (:class:`_Meeting`): the **update** (the ops there that
write variables, the optimizer's applies, and those after them, such as the global step's
increment) and the **averaging** (the other ops there: ``average_gradients``' ``concat`` and
``Mean``, a loss averaged over the towers).

- :func:`as_async` (``--mode async``), the pattern of lesson 4's program: one thread per tower,
  each running its tower's work and then its own copy of the update, fed by its own tower's
  gradients. The averaging is left out. Each thread loops as the program's loop did.
- :func:`as_sync_replicas` (``--mode sync_replicas``, ``--replicas R``): the tower loop wrapped
  in ``SyncReplicasOptimizer`` (the pattern of :mod:`simsync.patterns.sync_replicas`, one
  process): one thread per tower pushes its tower's gradient of each variable to that
  variable's accumulator, tagged with its local step, and then takes a token from the token
  queue; the chief's queue runner, a thread of its own, takes R gradients from every
  accumulator, runs the program's own update on them once, and puts ``max(N, R)`` tokens
  carrying the global step. A gradient pushed with a local step older than its accumulator's
  is dropped, so with R below N the slowest towers' gradients are thrown away. The averaging
  is left out: each take averages what it took, and costs what the program's averaging of
  that variable cost, for R gradients where it had N. Pushes, tokens and the global step's
  own increment (when the program has none) cost their transfers only: the program never
  ran them, so no profile has their times. The chief's ``sess.run`` costs what one of a
  ``NoOp`` did in the profile; each thread's, what the program's loop's did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from simsync.errors import UsageError
from simsync.ir import (
    Client,
    Cost,
    Graph,
    Op,
    Resource,
    Tensor,
    Variable,
    topological_order,
    tower_dependencies,
    tower_work,
)
from simsync.patterns.sync_replicas import (
    APPLY_GRADIENTS,
    ENQUEUE_TOKENS_OP,
    GLOBAL_STEP,
    QUEUE_RUNNER,
    TOKEN_QUEUE,
    accumulator,
    accumulator_note,
    take_op,
)
from simsync.tf_backend.program.convert import session_client
from simsync.tf_backend.program.whatif import bytes_out, run_only, state_of, thread_copy
from simsync.words import plural

__all__ = ["MODE_CHANGES", "ModeChange", "as_async", "as_sync_replicas"]


def as_async(graph: Graph, replicas: int | None = None) -> tuple[Graph, str]:
    """The tower loop as asynchronous threads (``--mode async``): one client per tower, each
    running that tower's work and applying its own gradients (see the module's docstring)."""
    main = _one_loop(graph, "async")
    meeting = _Meeting.of(graph, "async")
    new = meeting.without_shared()
    for tower in sorted(graph.towers):
        meeting.add_thread(new, tower, main)
    new, unfed = run_only(new)
    return new, (
        f"asynchronous: {plural(len(graph.towers), 'thread')}, one per tower, each applying "
        f"its own gradients{_left_out(len(meeting.averaging), unfed)}"
    )


def as_sync_replicas(graph: Graph, replicas: int | None = None) -> tuple[Graph, str]:
    """The tower loop wrapped in SyncReplicasOptimizer, aggregating ``replicas`` gradients per
    step (every tower's when None): see the module's docstring."""
    main = _one_loop(graph, "sync_replicas")
    meeting = _Meeting.of(graph, "sync_replicas")
    towers = sorted(graph.towers)
    aggregate = len(towers) if replicas is None else replicas
    if aggregate < 1:
        raise UsageError(f"--replicas {aggregate}: a step applies at least 1 gradient")
    applies = meeting.applies()
    if not applies:
        raise UsageError(
            "--mode sync_replicas: no op where the towers meet takes what their averaging "
            "made: there are no averaged gradients to aggregate"
        )
    new = meeting.without_shared()
    counter = _global_step(graph, meeting, applies, new)
    queue_device = new.variables[counter].device
    tokens = Resource(TOKEN_QUEUE, "queue", queue_device, initial=aggregate)
    new.add_resource(tokens)
    note = accumulator_note(len(towers), aggregate, aggregate)
    for variable in applies.values():
        device = graph.variables[variable].device
        new.add_resource(Resource(accumulator(variable), "accumulator", device, note=note))
    _add_chief(new, meeting, applies, counter, aggregate, main)
    for tower in towers:
        _add_worker(new, meeting, applies, tower, main, counter)
    new, unfed = run_only(new)
    return new, (
        f"SyncReplicasOptimizer: {plural(len(towers), 'thread')}, one per tower, push "
        f"gradients; the chief applies {aggregate} per step, once"
        f"{_left_out(len(meeting.averaging), unfed)}"
    )


def _left_out(averaging: int, unfed: int) -> str:
    """What a mode change left out: the averaging, and ops no thread runs any more.

    >>> _left_out(8, 0), _left_out(0, 0)
    (', 8 ops of the averaging left out', '')
    >>> _left_out(8, 2)
    ', 8 ops of the averaging left out, 2 ops no thread runs'
    """
    parts = [f"{plural(averaging, 'op')} of the averaging left out"] if averaging else []
    if unfed:
        parts.append(f"{plural(unfed, 'op')} no thread runs")
    return "".join(f", {part}" for part in parts)


@dataclass(frozen=True)
class ModeChange:
    """A mode an imported tower loop can be changed to: its transformation, and whether it
    takes ``--replicas`` (the gradients each step aggregates)."""

    change: Callable[[Graph, int | None], tuple[Graph, str]]
    takes_replicas: bool = False


#: The mode changes ``--mode`` offers, by name: each a transformation of the imported graph.
MODE_CHANGES: dict[str, ModeChange] = {
    "async": ModeChange(as_async),
    "sync_replicas": ModeChange(as_sync_replicas, takes_replicas=True),
}


def _one_loop(graph: Graph, mode: str) -> Client:
    """The program's one loop over every tower, which a mode change turns into threads."""
    have = sorted(graph.towers)
    loops = [client for client in graph.clients if not client.daemon]
    if len(have) < 2:
        raise UsageError(
            f"--mode {mode}: the program's graph has {plural(len(have), 'tower')}; "
            "it needs two or more to run as threads"
        )
    if len(loops) != 1:
        raise UsageError(
            f"--mode {mode}: the program already runs {plural(len(loops), 'thread')}, each "
            f"with a loop of its own; --mode {mode} turns one loop over every tower into one "
            "thread per tower"
        )
    return loops[0]


@dataclass
class _Meeting:
    """Where a tower loop's towers meet: the update (the ops there that write variables, and
    those after them) and the averaging (the rest)."""

    graph: Graph
    work: dict[str, int]
    shared: set[str]
    update: set[str]
    averaging: set[str]

    @classmethod
    def of(cls, graph: Graph, mode: str) -> _Meeting:
        depends = tower_dependencies(graph)
        shared = {op.name for op in graph.ops() if len(depends[op.name]) > 1}
        update = {name for name in shared if graph.op(name).writes}
        if not update:
            raise UsageError(
                f"--mode {mode}: no op where the towers meet updates a variable: there is no "
                "update to apply"
            )
        for name in topological_order(graph):  # the applies, and what follows them
            if name in shared and any(t.src in update for t in graph.inputs(name)):
                update.add(name)
        return cls(graph, tower_work(graph), shared, update, shared - update)

    def without_shared(self) -> Graph:
        """The graph without the ops where the towers meet, and with no clients."""
        graph = self.graph
        new = state_of(graph, graph.link)
        for device in graph.devices.values():
            new.add_device(device)
        for op in graph.ops():
            if op.name not in self.shared:
                new.add_op(op)
        for tensor in graph.edges():
            if tensor.src in new.nx and tensor.dst in new.nx:
                new.add_tensor(tensor)
        for client in graph.clients:
            if client.daemon:
                new.add_client(client)
        return new

    def applies(self) -> dict[str, str]:
        """The update's ops that take the averaged gradients, and the variable each writes."""
        found = {}
        for name in sorted(self.update):
            if any(t.src in self.averaging for t in self.graph.inputs(name)):
                writes = [
                    v for v in self.graph.op(name).writes if self.graph.variables[v].trainable
                ]
                if len(writes) != 1:
                    raise UsageError(
                        f"--mode sync_replicas: '{name}' takes what the towers' averaging made "
                        f"and writes {plural(len(writes), 'trainable variable')}: "
                        "SyncReplicas aggregates one variable's gradients per accumulator, "
                        "each applied to that variable"
                    )
                found[name] = writes[0]
        return found

    def add_thread(self, new: Graph, tower: int, main: Client) -> None:
        """Tower ``tower``'s copy of the update, fed by its own work, and its client."""
        graph, update = self.graph, self.update
        for name in update:
            new.add_op(
                dataclasses.replace(graph.op(name), name=thread_copy(name, tower), tower=tower)
            )
        joined: set[tuple[str, str]] = set()
        for name in update:
            for tensor in graph.inputs(name):
                for source, nbytes in self._sources(tensor, tower):
                    if (source, thread_copy(name, tower)) not in joined:
                        joined.add((source, thread_copy(name, tower)))
                        new.add_tensor(
                            dataclasses.replace(
                                tensor, src=source, dst=thread_copy(name, tower), nbytes=nbytes
                            )
                        )
        own = tuple(thread_copy(name, tower) for name in main.fetches if name in update)
        new.add_client(self.thread(main, tower, own))

    def thread(self, main: Client, tower: int, own: tuple[str, ...]) -> Client:
        """Tower ``tower``'s thread: ``own`` fetches, then its own part of the loop's
        fetches (its loss where the loop fetched the towers' average)."""
        fetches = list(own)
        for name in main.fetches:
            if name in self.averaging:
                fetches += self.feeders(name, tower)
            elif name not in self.update and self._ours(name, tower):
                fetches.append(name)
        return dataclasses.replace(
            main, name=f"thread_{tower}", fetches=tuple(dict.fromkeys(fetches))
        )

    def _ours(self, name: str, tower: int) -> bool:
        """Whether ``name`` is ``tower``'s work or no tower's (another tower's is not)."""
        return self.work.get(name, tower) == tower

    def _sources(self, tensor: Tensor, tower: int) -> list[tuple[str, int]]:
        """What feeds the thread's copy of ``tensor``'s consumer, and with how many bytes."""
        if tensor.src in self.update:
            return [(thread_copy(tensor.src, tower), tensor.nbytes)]
        if tensor.src in self.averaging:
            return [(src, bytes_out(self.graph, src)) for src in self.feeders(tensor.src, tower)]
        return [(tensor.src, tensor.nbytes)] if self._ours(tensor.src, tower) else []

    def feeders(self, name: str, tower: int) -> list[str]:
        """The ops of ``tower``'s work that feed the averaging ops up from ``name``."""
        found = [t.src for t in self._up(name) if self.work.get(t.src) == tower]
        return list(dict.fromkeys(found))

    def averaging_cost(self, name: str) -> float:
        """What the averaging ops that feed ``name`` cost, in all."""
        above = {t.src for t in self._up(name) if t.src in self.averaging}
        return sum(self.graph.op(src).cost.mean for src in above)

    def _up(self, name: str) -> list[Tensor]:
        """The tensors into ``name`` and into the averaging ops up from it, walking up
        through the averaging only."""
        found, todo, seen = [], [name], {name}
        while todo:
            for tensor in self.graph.inputs(todo.pop()):
                found.append(tensor)
                if tensor.src in self.averaging and tensor.src not in seen:
                    seen.add(tensor.src)
                    todo.append(tensor.src)
        return found


def _global_step(graph: Graph, meeting: _Meeting, applies: dict[str, str], new: Graph) -> str:
    """The variable counting the chief's applies: the program's global step where its update
    moves it (the one in its ``GLOBAL_STEP`` collection, else one named ``global_step``);
    otherwise one added, with the op that moves it (SyncReplicasOptimizer needs one: its
    tokens carry it)."""
    moved = {v for name in meeting.update for v in graph.op(name).writes}
    named = [graph.facts.global_step]
    named += sorted(v for v in moved if v.rsplit("/", 1)[-1] == GLOBAL_STEP)
    for step in named:
        if step in moved and not graph.variables[step].trainable:
            return str(step)
    name = GLOBAL_STEP if GLOBAL_STEP not in graph.variables else f"sync_replicas/{GLOBAL_STEP}"
    device = graph.variables[next(iter(applies.values()))].device
    new.add_variable(Variable(name, device, nbytes=8, trainable=False))
    new.add_op(Op(APPLY_GRADIENTS, "apply", device, writes=(name,)))  # as the pattern's
    return name


def _add_chief(
    new: Graph,
    meeting: _Meeting,
    applies: dict[str, str],
    counter: str,
    aggregate: int,
    main: Client,
) -> None:
    """The queue runner: a take of ``aggregate`` gradients per variable, the program's update
    on what it took, the global step, then the next step's tokens."""
    graph = meeting.graph
    workers = len(graph.towers)
    takes: dict[str, str] = {}
    for name, variable in applies.items():
        cost = Cost(meeting.averaging_cost(name) * aggregate / workers)
        take = Op(take_op(variable), "take_gradients", graph.variables[variable].device, cost,
                  resource=accumulator(variable), amount=aggregate)  # fmt: skip
        new.add_op(take)
        takes[name] = take.name
    for name in meeting.update:
        new.add_op(graph.op(name))
    for name in meeting.update:
        for tensor in graph.inputs(name):
            if tensor.src in meeting.averaging:
                sources = [takes[name]] if name in takes else list(takes.values())
                for source in sources:
                    if not new.nx.has_edge(source, name):
                        new.add_tensor(dataclasses.replace(tensor, src=source))
            elif tensor.src in new.nx and meeting.work.get(tensor.src) is None:
                new.add_tensor(tensor)
    ends = [name for name in meeting.update if not any(
        t.dst in meeting.update for t in graph.outputs(name))]  # fmt: skip
    if APPLY_GRADIENTS in new.nx:
        for name in ends:
            new.add_tensor(Tensor(name, APPLY_GRADIENTS, control=True))
        ends = [APPLY_GRADIENTS]
    device = new.variables[counter].device
    enqueue = Op(ENQUEUE_TOKENS_OP, "enqueue_tokens", device, reads=(counter,),
                 resource=TOKEN_QUEUE, amount=max(workers, aggregate))  # fmt: skip
    new.add_op(enqueue)
    for name in ends:
        new.add_tensor(Tensor(name, ENQUEUE_TOKENS_OP, control=True))
    # the chief's sess.run of its few ops costs what one of a NoOp did, not the loop's own
    new.add_client(session_client(graph, QUEUE_RUNNER, (ENQUEUE_TOKENS_OP,), daemon=True))


def _add_worker(
    new: Graph,
    meeting: _Meeting,
    applies: dict[str, str],
    tower: int,
    main: Client,
    counter: str,
) -> None:
    """Tower ``tower``'s thread: its work, a push of its gradient of each variable, and a
    token taken once every push is done."""
    graph = meeting.graph
    local_step = thread_copy("sync_rep_local_step", tower)
    queue_device = new.variables[counter].device
    new.add_variable(Variable(local_step, queue_device, nbytes=8, trainable=False))
    dequeue = thread_copy("sync_replicas/dequeue_token", tower)
    new.add_op(Op(dequeue, "dequeue_token", queue_device, tower=tower, writes=(local_step,),
                  resource=TOKEN_QUEUE))  # fmt: skip
    for name, variable in applies.items():
        push = thread_copy(f"sync_replicas/push_gradients/{variable}", tower)
        device = graph.variables[variable].device
        new.add_op(Op(push, "push_gradients", device, tower=tower, reads=(local_step,),
                      resource=accumulator(variable), gradient=variable))  # fmt: skip
        for tensor in graph.inputs(name):
            if tensor.src in meeting.averaging:
                for source in meeting.feeders(tensor.src, tower):
                    if not new.nx.has_edge(source, push):
                        nbytes = bytes_out(graph, source)
                        new.add_tensor(Tensor(source, push, nbytes, shape=tensor.shape,
                                              dtype=tensor.dtype))  # fmt: skip
        new.add_tensor(Tensor(push, dequeue, control=True))
    # what the tower's own work gave the update beside its gradients (its batch norm's
    # UPDATE_OPS grouped into the train op): the worker's train op runs it before its token
    for name in meeting.update:
        for tensor in graph.inputs(name):
            source = tensor.src
            if meeting.work.get(source) == tower and not new.nx.has_edge(source, dequeue):
                new.add_tensor(Tensor(source, dequeue, control=True))
    new.add_client(dataclasses.replace(meeting.thread(main, tower, (dequeue,)), until=counter))
