"""The objects a dataflow graph holds: ops, tensors, devices, links, variables, resources,
clients, and an op's cost.

This is TensorFlow's model of a program, reduced to what decides *when* things run:

- an :class:`Op` runs on one device (a collective op on several) and costs time;
- a :class:`Tensor` carries bytes from one op to another; crossing devices costs a transfer,
  and a control edge (``nbytes=0, control=True``) only orders;
- a :class:`Variable` is state on a device; ops declare which variables they read and write;
- a :class:`Resource` is other state that outlives a run: a FIFO queue of tokens, or a
  ConditionalAccumulator of gradients; an op names the resource it acts on;
- a :class:`Client` is a loop running ``sess.run(fetches)`` again and again;
- :class:`GraphFacts` are what the graph's maker says of it as a whole (the training it
  builds, an imported program's batch and ``sess.run`` costs).

Every object is frozen and checks its values when it is made (:mod:`simsync.ir.limits`): a
negative cost or a zero speed never reaches a graph. :class:`~simsync.ir.graph.Graph` holds
them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simsync.errors import GraphError
from simsync.ir import limits

__all__ = [
    "LOCALHOST",
    "BatchFacts",
    "Client",
    "Cost",
    "Device",
    "GraphFacts",
    "Link",
    "Op",
    "Resource",
    "Tensor",
    "Variable",
]


#: The host of a device unless it names another: where the clients (``sess.run``) run too.
LOCALHOST = "localhost"


@dataclass(frozen=True)
class Device:
    """A place that runs ops: ``/gpu:0``, ``/cpu:0``. ``speed`` divides compute costs.

    A device runs one op at a time, unless it is ``concurrent``: a parameter device's CPU runs
    many small ops at once on TensorFlow's inter-op threads (reads and applies of many workers).
    """

    name: str
    kind: str = "gpu"
    speed: float = 1.0
    host: str = LOCALHOST
    concurrent: bool = False

    def __post_init__(self) -> None:
        limits.check_fields(self, f"device '{self.name}'", limits.DEVICE)


@dataclass(frozen=True)
class Link:
    """Every device's port: a transfer holds the sender's out-port and the receiver's in-port
    for ``nbytes / bytes_per_second``, then arrives ``latency`` seconds later."""

    bytes_per_second: float = float("inf")
    latency: float = 0.0

    def __post_init__(self) -> None:
        limits.check_fields(self, "link", limits.LINK)

    def transfer_time(self, nbytes: int) -> float:
        """Seconds a transfer of ``nbytes`` holds the ports.

        >>> Link(bytes_per_second=1e9).transfer_time(5 * 10**8)
        0.5
        """
        return nbytes / self.bytes_per_second


@dataclass(frozen=True)
class Cost:
    """How long an op takes at speed 1.

    A fixed cost is ``Cost(seconds)``. A random one names a ``group`` drawn once per step from
    ``distribution`` with mean ``mean``; each op of the group takes ``fraction`` of the draw, so a
    tower's forward and backward share one draw of its compute time. ``overhead`` is added to
    every execution and not divided by the device's speed (a framework's fixed cost per op).
    The op that takes a cost checks its numbers (:func:`simsync.ir.limits.check_cost`), so
    the message names the op.
    """

    mean: float = 0.0
    distribution: str = "constant"
    group: str | None = None
    fraction: float = 1.0
    shift: float = 0.0
    sigma: float = 0.5
    overhead: float = 0.0

    @property
    def expected(self) -> float:
        """Expected seconds at speed 1 (``fraction`` of the group's mean), without overhead."""
        return self.mean * self.fraction


@dataclass(frozen=True)
class Variable:
    """State on a device. Every write bumps its version; every read records the version seen.

    A variable that is not ``trainable`` holds a counter, not a model parameter: a
    ``global_step`` (its value is its version) or a worker's ``local_step`` (set from a token);
    or, with an ``initial`` value, numbers that update ops write and the model reads but no
    gradient moves (batch norm's moving statistics: every element starts at ``initial``).
    """

    name: str
    device: str
    shape: tuple[int, ...] = ()
    nbytes: int = 0
    trainable: bool = True
    #: the model parameter it holds (a mirrored copy ``tower_1/layer_0/kernel`` holds
    #: ``layer_0/kernel``); empty: the variable's own name
    parameter: str = ""
    #: not trainable, but holding numbers: where every element starts (None: a counter)
    initial: float | None = None

    def __post_init__(self) -> None:
        limits.check_fields(self, f"variable '{self.name}'", limits.VARIABLE)

    @property
    def model_parameter(self) -> str:
        """The name of the model parameter the variable holds."""
        return self.parameter or self.name

    @property
    def counter(self) -> bool:
        """Whether the variable counts (a global or local step) rather than holds numbers."""
        return not self.trainable and self.initial is None


@dataclass(frozen=True)
class Resource:
    """State that outlives one ``sess.run`` besides variables.

    ``kind`` is ``"queue"`` (a FIFO: enqueue, enqueue_many, blocking dequeue; it starts with
    ``initial`` items of value 0; with a ``capacity`` above 0 an enqueue waits for room, as a
    ``tf.queue.FIFOQueue(capacity)``'s does; ``item`` names what it holds, in a learner's
    words: ``"token"``, ``"element"``) or ``"accumulator"`` (a ConditionalAccumulator:
    gradients pushed with a local step are accepted if not stale; a take of R blocks until R
    were accepted, returns their mean and bumps the accumulator's step). ``note`` says, in a
    learner's words, what the resource needs to make progress: a deadlock's explanation quotes
    it.
    """

    name: str
    kind: str
    device: str
    initial: int = 0
    note: str = ""
    capacity: int = 0
    item: str = "token"

    def __post_init__(self) -> None:
        owner = f"resource '{self.name}'"
        limits.check_fields(self, owner, limits.RESOURCE)
        if self.capacity and self.initial > self.capacity:
            raise GraphError(
                f"{owner}: initial {self.initial}: must be at most its capacity {self.capacity}"
            )

    @property
    def noun(self) -> str:
        """What it is, in a learner's words.

        >>> Resource("q", "queue", "/cpu:0").noun
        'a token queue'
        >>> Resource("f", "queue", "/cpu:0", item="element").noun
        'a queue of elements'
        """
        if self.kind == "queue":
            return "a token queue" if self.item == "token" else f"a queue of {self.item}s"
        return "an accumulator"


@dataclass(frozen=True)
class Op:
    """A node of the graph: what runs, where, and for how long.

    Parameters
    ----------
    name : str
        A TensorFlow-style scope (``tower_2/gradients``), unique in the graph.
    kind : str
        What the op does: a kind of :mod:`simsync.kinds` (``"read"``, ``"forward"``,
        ``"aggregate"``, ...; ``simsync.api`` has a constant for each, ``FORWARD``).
    device : str
        The device it runs on (a collective op: the first of its participants).
    cost : Cost, optional
        How long it takes at speed 1; by default no time.
    tower : int, optional
        The tower it belongs to; ``None`` for shared ops.
    reads, writes : tuple of str, optional
        The variables it reads and writes.
    participants : tuple of str, optional
        A collective op's devices: it runs on all of them at once.
    nbytes : int, optional
        What each participant of a collective contributes (a ring all-reduce's time).
    locks : tuple of str, optional
        Mutexes the op holds while it runs (a critical section around a read or an apply).
    max_staleness : int, optional
        An op that writes variables drops its update, as TensorFlow's
        ``DropStaleGradientOptimizer`` does, when more than this many updates were applied
        since its client's run read them.
    resource : str, optional
        The resource an op whose kind acts on one acts on (a queue, an accumulator).
    amount : int, optional
        How many gradients a take waits for (R), or how many tokens an enqueue puts.
    gradient : str, optional
        The variable whose gradient a push sends.

    Raises
    ------
    GraphError
        If a field is not what it may be (a negative cost, a string where a tuple of names
        goes): the message names the op and the field.

    Examples
    --------
    >>> Op("tower_0/loss", "forward", "/gpu:0", Cost(0.004), tower=0).cost.mean
    0.004
    """

    name: str
    kind: str
    device: str
    cost: Cost = field(default_factory=Cost)
    tower: int | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    participants: tuple[str, ...] = ()
    nbytes: int = 0
    locks: tuple[str, ...] = ()
    max_staleness: int | None = None
    resource: str | None = None
    amount: int = 0
    gradient: str | None = None

    def __post_init__(self) -> None:
        owner = f"op '{self.name}'"
        limits.check_fields(self, owner, limits.OP)
        if not isinstance(self.cost, Cost):
            raise GraphError(f"{owner}: cost {self.cost!r}: must be a Cost, e.g. Cost(0.01)")
        limits.check_cost(self.cost, owner)

    @property
    def devices(self) -> tuple[str, ...]:
        """The devices the op occupies while it runs."""
        return self.participants or (self.device,)


@dataclass(frozen=True)
class Tensor:
    """An edge: ``dst`` cannot start before ``src`` ends (and, across devices, before the
    bytes have crossed the link). Add one with :meth:`Graph.add_tensor`, or a chain with
    :meth:`Graph.connect`.

    Parameters
    ----------
    src, dst : str
        The ops it joins, by name.
    nbytes : int, optional
        The bytes it carries; crossing devices, they cost a transfer.
    control : bool, optional
        A control edge only orders (TensorFlow's ``control_dependencies``): it is no input.
    shape : tuple of int, optional
        The tensor's shape, where known.
    dtype : str, optional
        Its type, where known.

    Raises
    ------
    GraphError
        If a field is not what it may be (negative bytes): the message names the tensor.
    """

    src: str
    dst: str
    nbytes: int = 0
    control: bool = False
    shape: tuple[int, ...] | None = None
    dtype: str | None = None

    def __post_init__(self) -> None:
        limits.check_fields(self, f"tensor {self.src} -> {self.dst}", limits.TENSOR)


@dataclass(frozen=True)
class Client:
    """A loop running ``sess.run(fetches)`` again and again (a thread of the program).

    Parameters
    ----------
    name : str
        Unique in the graph.
    fetches : tuple of str
        The ops one run fetches; it executes them and everything they depend on.
    steps : int, optional
        How many runs; ``None``: the scenario's ``[run] steps`` (``simulate``'s ``steps``).
    overhead : float, optional
        Seconds each ``sess.run`` spends outside the ops (feeding, starting the executor,
        fetching), charged before the run's first op, under the process's GIL.
    run_work : float, optional
        Seconds of TensorFlow's own work in each run after ``overhead`` and before the first
        op (the executor starting a large graph's run, as an imported program's fit finds
        it): like the ops, it holds a core and not the GIL, so threads pay it side by side.
    run_latency : float, optional
        Seconds each run waits after ``run_work``, holding nothing: TensorFlow handing the
        run to its executor's threads and back, as a ``sess.run`` of one ``NoOp`` measures
        it beyond the CPU time it takes.
    staleness_bound : int, optional
        Clients with a bound s run stale-synchronously: one starts its run k only when every
        such client has finished k - s runs.
    shared_steps : bool, optional
        Clients with shared steps take their runs from one pool, ``steps`` per such client,
        like threads that stop when a global step counter reaches its limit: a fast client
        makes more runs than a slow one.
    until : str, optional
        A variable: the client runs until its version reaches the scenario's steps (workers
        that stop at a global step).
    daemon : bool, optional
        A daemon (a queue runner's thread) loops until the others are done: it need not
        finish, and a run left blocked when they are is not a deadlock.

    Raises
    ------
    GraphError
        If a field is not what it may be (``steps=0``, a string for ``fetches``): the message
        names the client and the field.
    """

    name: str
    fetches: tuple[str, ...]
    steps: int | None = None
    overhead: float = 0.0
    run_work: float = 0.0
    run_latency: float = 0.0
    staleness_bound: int | None = None
    shared_steps: bool = False
    until: str | None = None
    daemon: bool = False

    def __post_init__(self) -> None:
        limits.check_fields(self, f"client '{self.name}'", limits.CLIENT)


@dataclass(frozen=True)
class BatchFacts:
    """The examples an imported program's step takes in, as its import found them.

    Parameters
    ----------
    size : int
        Examples in one batch, as the program ran.
    ops : tuple of str
        The ops whose work grows with the batch.
    carry : tuple of str
        The ops whose output tensors carry the batch's examples.
    per_tower : bool, optional
        Each tower brings in its own batch (True), or the towers split one batch brought in
        outside them (False).
    """

    size: int
    ops: tuple[str, ...] = ()
    carry: tuple[str, ...] = ()
    per_tower: bool = True

    def __post_init__(self) -> None:
        limits.check_fields(self, "batch", limits.BATCH)


@dataclass(frozen=True)
class GraphFacts:
    """What the graph's maker says of the graph as a whole: a pattern, the training it built
    (reported, never branched on: what runs is the graph's), an imported program its source,
    batch and the cost of its ``sess.run``. A graph's facts are replaced, never changed:
    ``graph.facts = dataclasses.replace(graph.facts, mode="sync")``.

    Parameters
    ----------
    mode, aggregation : str, optional
        The pattern's training mode and how its towers combine gradients, as its scenario
        names them.
    batch_norm : str, optional
        Where the towers' batch-norm statistics come from, when the model has batch norm.
    apply : str, optional
        How an asynchronous worker applies its update.
    workers, replicas_to_aggregate, init_tokens : int, optional
        SyncReplicasOptimizer's workers, the gradients one apply takes and the tokens its
        queue starts with.
    source : str, optional
        The program an imported graph came from, as shown to the user.
    global_step : str, optional
        The variable an imported program counts its steps in.
    batch : BatchFacts, optional
        The examples an imported program's step takes in.
    session_run, session_run_work, session_run_latency : float, optional
        Seconds of a ``sess.run`` of one ``NoOp`` in the imported program's session: under
        the GIL, on a core without it, and waiting (a new client's ``overhead``,
        ``run_work`` and ``run_latency``).

    Examples
    --------
    >>> import dataclasses
    >>> facts = dataclasses.replace(GraphFacts(), mode="sync", aggregation="mean")
    >>> facts.mode, facts.batch
    ('sync', None)
    >>> GraphFacts(workers=-1)
    Traceback (most recent call last):
    ...
    simsync.errors.GraphError: graph facts: workers -1: must be an integer >= 0, or None
    """

    mode: str | None = None
    aggregation: str | None = None
    batch_norm: str | None = None
    apply: str | None = None
    workers: int | None = None
    replicas_to_aggregate: int | None = None
    init_tokens: int | None = None
    source: str | None = None
    global_step: str | None = None
    batch: BatchFacts | None = None
    session_run: float = 0.0
    session_run_work: float = 0.0
    session_run_latency: float = 0.0

    def __post_init__(self) -> None:
        limits.check_fields(self, "graph facts", limits.FACTS)
        if self.batch is not None and not isinstance(self.batch, BatchFacts):
            raise GraphError(f"graph facts: batch {self.batch!r}: must be a BatchFacts, or None")
