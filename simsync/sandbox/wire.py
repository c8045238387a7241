"""What a sandboxed process says, typed, and the parent's check of it, whole, before any use.

A process that ran someone else's code (a student's submission, a program imported by
``simsync simulate``) may say anything: that code can replace ``json.dumps``, or write to the
answer's descriptor itself. So whatever such a process says is an attacker's data. Each
message is a ``TypedDict`` below, its limits in ``Annotated`` (:class:`Limit`), and
:func:`read` checks a value against one, whole: its type, every key (none missing, none
unknown), every number (finite, in its range), every text's length, every list's and table's
size. The first thing wrong is one :class:`WireError` naming the field and what it may be,
never a traceback further on. Nothing read here becomes a path, a file name or a cache key:
the parent makes its own (:func:`simsync.tf_backend.program.cost_cache.graph_key` hashes what was
read).

The messages, by the process that says them:

- a program's (:mod:`simsync.tf_backend.program.child`): :class:`ProgramSaid` --
  :class:`GraphData`, :class:`Machine`, :class:`Profile` (also what the cost cache keeps, and
  a ``--costs`` file: :class:`CostsFile`), :class:`Measured`, :class:`Values`, and
  :class:`Export` (the graph of a program that is graded, for a second process to load)
  and :class:`Averaging` (how that graph's updates weigh its towers, measured there);
- the grader's (:mod:`simsync.grading.child`): :class:`GradingSaid`.

Examples
--------
>>> read(Machine, {"tensorflow": "2.21.0", "devices": "logical CPU devices",
...                "processor": "x", "cores": 2, "profile_form": 6}, "machine")["cores"]
2
>>> read(OpCost, {"device": "/cpu:0", "seconds": "x"}, "profile.ops['a']")
Traceback (most recent call last):
...
simsync.sandbox.wire.WireError: profile.ops['a'].seconds: a number from 0 to 1e+06, not str 'x'
"""

from __future__ import annotations

import functools
import math
import re
import sys
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, TypedDict, get_args, get_origin

from simsync.errors import SimsyncError, printable

__all__ = [
    "MOST_SECONDS",
    "Averaging",
    "ClientCost",
    "CostsFile",
    "Export",
    "GradingSaid",
    "GraphData",
    "Limit",
    "Machine",
    "Measured",
    "OpCost",
    "OpData",
    "Profile",
    "ProgramSaid",
    "Structure",
    "Values",
    "WireError",
    "read",
    "read_graph",
    "read_said",
    "unfit_name",
]


class WireError(SimsyncError):
    """What a sandboxed process said is not what it may say: the field, and what it may be."""


@dataclass(frozen=True)
class Limit:
    """A field's limits: ``most`` characters of a text, or items of a list or table; ``low``
    and ``high`` of a number; ``finite`` unless a number may be NaN or infinite (a loss);
    ``controls`` when a text may hold control characters (a message, shown escaped: a name
    never may, as it is shown as it is)."""

    most: int | None = None
    low: float | None = None
    high: float | None = None
    finite: bool = True
    controls: bool = False


#: seconds of one op or step, at most (the IR's limit too: about eleven days)
MOST_SECONDS = 1e6
#: without a limit of its own: a text's characters, a list's or table's items, a number's size
TEXT, ITEMS, NUMBER = 4096, 1_000_000, 2.0**53
#: inputs and control inputs of a graph's ops in all (a 5,000-op program has some 20,000)
MOST_EDGES = 500_000
#: how deep free-form data (a simulation's facts, a student's answers) may nest
DEPTH = 16
#: control characters: never in a name (an escape sequence would reach the terminal)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
#: half of a UTF-16 pair, alone: JSON's \ud800 escapes give it, and no encoder takes it
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def unfit_name(text: str) -> str | None:
    r"""What in ``text`` no name on the wire may hold, in words, or None: a control
    character, or half a UTF-16 pair (a file name's byte that is not UTF-8, as Python reads
    it). A program's file name is in every op's traceback, so it must fit.

    >>> unfit_name("train.py"), unfit_name("nl\nname.py"), unfit_name(chr(0xDCFF) + ".py")
    (None, 'a control character', 'a byte that is not UTF-8')
    """
    if _CONTROL.search(text):
        return "a control character"
    if _SURROGATE.search(text):
        return "a byte that is not UTF-8"
    return None


_FLOAT = sys.float_info.max

Name = Annotated[str, Limit(most=TEXT)]
Short = Annotated[str, Limit(most=256)]
Count = Annotated[int, Limit(low=0, high=2**31)]
Bytes = Annotated[int, Limit(low=0, high=10**15)]
Seconds = Annotated[float, Limit(low=0, high=MOST_SECONDS)]
#: a time stamp of a traced run (seconds since the epoch, or since a clock's start)
Stamp = Annotated[float, Limit(low=0, high=1e12)]
Line = Annotated[str, Limit(most=8192, controls=True)]
#: what went wrong, as said (a user's exception's message may be long: shown shortened)
Message = Annotated[str, Limit(most=2**20, controls=True)]
Names = Annotated[list[Name], Limit(most=ITEMS)]
Dim = Annotated[int, Limit(low=0, high=2**48)]
Shape = Annotated[list[Dim | None], Limit(most=64)]
#: a shape as it ran: every dimension known
Ran = Annotated[list[Dim], Limit(most=64)]
#: where the program made an op: its file (a name in the program's folder) and line
MadeIn = tuple[Annotated[str, Limit(most=255)], Annotated[int, Limit(low=1, high=10**7)]]


# ## A program's graph


class TensorData(TypedDict):
    op: Name
    slot: Annotated[int, Limit(low=0, high=65536)]
    shape: Shape | None
    dtype: Annotated[str, Limit(most=64)]
    bytes: Bytes | None


class OpData(TypedDict):
    name: Name
    type: Short
    device: Annotated[str, Limit(most=512)]
    colocate: Annotated[list[Name], Limit(most=1024)]
    inputs: Annotated[list[TensorData], Limit(most=100_000)]
    control: Annotated[list[Name], Limit(most=100_000)]
    made_in: MadeIn | None
    shape: NotRequired[Shape | None]
    bytes: NotRequired[Bytes | None]
    shared_name: NotRequired[Name]
    #: a FIFO queue's: -1 for no bound
    capacity: NotRequired[Annotated[int, Limit(low=-1, high=2**31)]]
    elements: NotRequired[Count | None]
    #: a function's call (a tf.function, a tf.cond): whether its functions write a variable
    calls_write: NotRequired[bool]
    #: a collective op's key (its kind, group and instance), alike for the ops of one
    #: collective in every task of a cluster (:mod:`~simsync.tf_backend.program.collectives`)
    collective: NotRequired[Name]


class ClientData(TypedDict):
    thread: Short
    name: Short
    fetches: Annotated[list[Name], Limit(most=100_000)]
    #: the shape of each tensor its runs feed
    feeds: NotRequired[Annotated[dict[Name, Ran], Limit(most=100_000)]]


class QueueRunnerData(TypedDict):
    queue: Name
    threads: Count
    enqueue: Names
    enqueue_ops: Names


class Collections(TypedDict):
    update_ops: Names
    train_op: Names
    global_step: Names


class GraphData(TypedDict):
    """The graph of a program's training loop (:func:`~simsync.tf_backend.program.child.
    graph_data`), :func:`~simsync.tf_backend.program.convert.convert`'s input."""

    #: the program's file name, as the parent gave it (shown escaped)
    program: Annotated[str, Limit(most=255, controls=True)]
    order: Annotated[list[Name], Limit(most=200_000)]
    ops: Annotated[list[OpData], Limit(most=200_000)]
    clients: Annotated[list[ClientData], Limit(most=1024)]
    trainable: Names
    queue_runners: Annotated[list[QueueRunnerData], Limit(most=1024)]
    queue_sizes: dict[Name, Count]
    collections: Collections
    logical_devices: bool
    cores: Annotated[int, Limit(low=1, high=65536)]
    runs_before_loop: Count


class Machine(TypedDict):
    """The machine a program's child ran on: what its costs were measured on."""

    tensorflow: Annotated[str, Limit(most=64)]
    devices: Annotated[str, Limit(most=64)]
    processor: Short
    cores: Annotated[int, Limit(low=1, high=65536)]
    profile_form: Count


# ## Costs: what a program's traced steps measured (and what the cost cache keeps)


class OpCost(TypedDict):
    device: Annotated[str, Limit(most=512)]
    seconds: Seconds
    busy: NotRequired[Seconds]


class ClientCost(TypedDict):
    wall: Seconds
    span: NotRequired[Seconds]
    walls: NotRequired[Annotated[list[Seconds], Limit(most=100_000)]]
    overhead: NotRequired[Seconds]
    python: NotRequired[Seconds]
    cpu: NotRequired[Seconds]
    together: NotRequired[bool]
    #: the parent's: each process's median step (kept in the cache)
    process_walls: NotRequired[Annotated[list[Seconds], Limit(most=64)]]


class FitBasis(TypedDict):
    walls: dict[Short, Seconds]
    together: bool
    efficiency: Annotated[float, Limit(low=0, high=1)] | None
    cores: Annotated[int, Limit(low=1, high=65536)] | None
    logical_devices: bool | None
    form: Count


class FitReport(TypedDict):
    scale: Annotated[float, Limit(low=0, high=1e6)]
    per_run: NotRequired[Seconds]
    wall: NotRequired[Seconds]
    simulated: NotRequired[Seconds]
    why: NotRequired[Line]


class Fit(TypedDict):
    """The parent's fit of a graph to its untraced step, kept with the costs."""

    basis: FitBasis
    report: FitReport


class Profile(TypedDict):
    """A program's costs (:func:`~simsync.tf_backend.program.step_costs.profile_loop`)."""

    ops: dict[Name, OpCost]
    tensors: dict[Name, Bytes]
    #: each output's shape as the traced steps carried it
    shapes: NotRequired[dict[Name, Ran]]
    clients: dict[Short, ClientCost]
    steps: Count
    fit: NotRequired[Fit]


class CostsFile(TypedDict):
    """A file of the cost cache, or one given with ``--costs FILE``."""

    key: Annotated[str, Limit(most=64)]
    machine: dict[Short, Annotated[str, Limit(most=256)] | int]
    profile: Profile


# ## What a cross-check's run of a program measured, and its values replayed


#: one op of a traced step: its name, its device, when it started and ended, and when its
#: outputs existed
Record = tuple[Name, Annotated[str, Limit(most=512)], Stamp, Stamp, Stamp]


class MeasuredClient(TypedDict):
    walls: Annotated[list[Seconds], Limit(most=100_000)]
    steps: Annotated[list[Annotated[list[Record], Limit(most=200_000)]], Limit(most=10_000)]
    queues: dict[Name, Annotated[list[Count], Limit(most=100_000)]]
    together: NotRequired[bool]


#: one kernel of a round of a coordinator's workers: its node's name and when it started
Kernel = tuple[Name, Stamp]


class Round(TypedDict):
    """A traced round of a coordinator's workers: its steps, its kernels (see
    :func:`~simsync.tf_backend.program.function_costs.xplane_rounds`)."""

    steps: Count
    kernels: Annotated[list[Kernel], Limit(most=200_000)]


class Measured(TypedDict):
    """:func:`~simsync.tf_backend.program.step_costs.measure_loop`'s answer
    (:func:`~simsync.tf_backend.program.function_costs.measure_function`'s: with a
    coordinator, its ``rounds`` too)."""

    clients: dict[Short, MeasuredClient]
    rounds: NotRequired[Annotated[list[Round], Limit(most=1_000)]]


Loss = Annotated[float, Limit(finite=False)]


class Values(TypedDict):
    """:func:`~simsync.tf_backend.program.replay.replay_loop`'s answer."""

    losses: dict[Short, Annotated[list[tuple[Count, Loss]], Limit(most=10**6)]]
    final: dict[Name, tuple[Loss, Loss]]
    versions: dict[Name, Count]


# ## A graded program: its graph exported, for a second process to load


class FeedData(TypedDict):
    """What one ``feed_dict`` entry of a loop's run held: the second process feeds zeros."""

    shape: Annotated[list[Annotated[int, Limit(low=0, high=2**31)]], Limit(most=64)]
    dtype: Annotated[str, Limit(most=32)]


class ExportClient(TypedDict):
    thread: Short
    fetches: Annotated[list[Name], Limit(most=100_000)]
    feeds: Annotated[dict[Name, FeedData], Limit(most=1024)]


class Export(TypedDict):
    """A program's training loop for a second process that runs none of its code: its graph
    as a MetaGraphDef (base64), each looping thread's fetches and feeds, and where the
    program made each op (checked against its source by the parent)."""

    meta: Annotated[str, Limit(most=24 * 2**20)]
    clients: Annotated[list[ExportClient], Limit(most=1024)]
    made_in: Annotated[dict[Name, MadeIn], Limit(most=200_000)]


Share = Annotated[float, Limit(low=0, high=1e9)]


class AverageFound(TypedDict):
    """How one update weighs the towers (:mod:`~simsync.tf_backend.program.averaging`)."""

    op: Name
    #: tower j's weight, in order ([]: the towers' values could not be told apart)
    weights: Annotated[list[Annotated[float, Limit(low=-1e9, high=1e9)]], Limit(most=4096)]
    #: the weights are those that fit every update at once (its own values are too few)
    joint: bool
    #: every value it computed was a number (not NaN, not infinite)
    finite: bool
    residual: Share
    permuted: Share
    repeated: Share


class GivenVariable(TypedDict):
    """How one variable's update compares with the given model's, batch by batch
    (:func:`~simsync.tf_backend.program.averaging._given_model`)."""

    variable: Name
    #: the share of its change from batch to batch that no multiple of the given model's
    #: gradient fits
    residual: Share
    #: the smallest of those multiples, as a share of the largest (below 0: turned)
    least: Annotated[float, Limit(low=-1e9, high=1e9)]
    #: the greatest of them, as a share of the largest (at or below 0: turned for every batch)
    most: Annotated[float, Limit(low=-1e9, high=1e9)]
    #: how much each tower's own data weighs in those multiples (as ``data_weights``)
    weights: Annotated[list[Annotated[float, Limit(low=0, high=1e300)]], Limit(most=4096)]
    noise: Annotated[float, Limit(low=0, high=1e9)]


class GivenStep(TypedDict):
    """One whole step of a graded program against the given model's, from the same values
    and batches (:func:`~simsync.tf_backend.program.averaging._descent`)."""

    #: for each variable the given model trains (in the order of ``GivenFound.variables``),
    #: the cosine between the two steps' changes of it (below 0: uphill)
    along: Annotated[list[Annotated[float, Limit(low=-1, high=1)]], Limit(most=100_000)]
    #: and the program's change of it as a multiple of the given model's (0: not trained)
    size: Annotated[list[Annotated[float, Limit(low=0, high=1e300)]], Limit(most=100_000)]


class SettingTurned(TypedDict):
    """A setting of a graded program's updates (its op's input: ``lr``, ``momentum``) out of
    what it may take at a count of steps
    (:func:`~simsync.tf_backend.program.averaging._settings_turn`)."""

    setting: Annotated[str, Limit(most=64)]
    at: Annotated[float, Limit(low=0, high=1e300)]
    #: the value it took (``-0.1``, ``nan``), and what it may take (``0 or above``)
    value: Annotated[str, Limit(most=64)]
    allowed: Annotated[str, Limit(most=64)]


class GivenFound(TypedDict):
    """A graded program's updates against the given model's, or why they could not be."""

    problem: Message | None
    variables: Annotated[list[GivenVariable], Limit(most=100_000)]
    steps: NotRequired[Annotated[list[GivenStep], Limit(most=100)]]
    #: a setting of the updates out of what it may take at some count of steps, if any
    setting_turns: NotRequired[SettingTurned]
    #: why a training of the program on its own data went otherwise than the given
    #: model's gradient at some step, if it did
    trained: NotRequired[Message]


class Averaging(TypedDict):
    """The weights every update of a graded program's step gives its towers, or why none."""

    towers: Count
    updates: Annotated[list[AverageFound], Limit(most=100_000)]
    problem: Message | None
    #: how much each tower's own data weighs in the updates, across several steps of it (a
    #: factor of their geometric mean: 1 each in a mean; [] where it could not be told)
    data_weights: NotRequired[
        Annotated[list[Annotated[float, Limit(low=0, high=1e300)]], Limit(most=4096)]
    ]
    #: the noise of those weights from batch to batch (a standard deviation of their logs)
    data_noise: NotRequired[Annotated[float, Limit(low=0, high=1e9)]]
    #: its updates against the given model's (when there is one to compare with)
    given: NotRequired[GivenFound]


class ProgramSaid(TypedDict, total=False):
    """Every line a program's child may say, merged."""

    started: bool
    error: Message
    graph: GraphData
    machine: Machine
    profile: Profile
    measured: Measured
    values: Values
    export: Export
    averaging: Averaging
    #: a task of a cluster reached its training loop (it waits for every other one's)
    looping: bool
    #: a task of a cluster said all of its answer (it trains on, until its cluster is done)
    answered: bool


# ## The grader's processes


class Placed(TypedDict):
    device: Annotated[str, Limit(most=512)]
    participants: Annotated[list[Annotated[str, Limit(most=512)]], Limit(most=4096)]


class PathFound(TypedDict):
    before: Name
    after: Name
    missing: Name | None
    path: bool


class UpdateFound(TypedDict):
    """An op that writes a trainable variable, and the towers none of its data comes from."""

    op: Name
    missing: Annotated[list[Count], Limit(most=4096)]


class Structure(TypedDict):
    """What the structure checks read off a graph (:func:`simsync.grading.child.structure_of`)."""

    sync_points: Names
    towers: Count
    devices: dict[Name, Placed | None]
    before: Annotated[list[PathFound], Limit(most=10_000)]
    variables: NotRequired[dict[Name, Annotated[str, Limit(most=512)]]]
    updates: NotRequired[Annotated[list[UpdateFound], Limit(most=100_000)]]


class GradingSaid(TypedDict, total=False):
    """Every line a grader's child may say, merged (a build's ``graph`` stays text: the next
    process reads it, checking every object)."""

    started: bool
    error: Message
    graph: Annotated[str, Limit(most=2**31)]
    structure: Structure
    facts: dict[Name, Any]
    facts_error: Message
    params: dict[Name, Any]
    params_error: Message
    answers: dict[Name, Any]
    answers_error: Message


# ## Reading


def read(kind: Any, value: Any, where: str) -> Any:
    """``value`` if it is a ``kind`` (a ``TypedDict`` above, or any type of their fields),
    checked whole; else :class:`WireError` naming the first wrong field from ``where``.

    >>> read(list[tuple[int, Loss]], [[0, float("nan")]], "losses")
    [[0, nan]]
    >>> read(TensorData, {"op": "a", "slot": 0, "shape": None, "dtype": "float32"}, "t")
    Traceback (most recent call last):
    ...
    simsync.sandbox.wire.WireError: t: a table without 'bytes'
    """
    return _check(kind, value, where, Limit())


def read_said(kind: Any, said: dict[str, Any], who: str) -> dict[str, Any]:
    """The lines a process said (merged), each known key checked as ``kind`` (a
    :class:`ProgramSaid` or :class:`GradingSaid`) has it; keys it does not know are dropped (a
    user's code may write any line of JSON); else :class:`WireError`, which names ``who``.

    >>> read_said(ProgramSaid, {"error": 7, "x": 1}, "its process")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    simsync.sandbox.wire.WireError: its process said what it may not: error: a text ... not int 7
    """
    hints = _hints(kind)
    known = {key: value for key, value in said.items() if key in hints}
    try:
        return dict(read(kind, known, ""))
    except WireError as error:
        raise WireError(f"{who} said what it may not: {str(error).lstrip('.')}") from None


def read_graph(value: Any, where: str = "graph") -> GraphData:
    """A :class:`GraphData`, checked whole and for its names: each op named once, the order
    the ops', every input, control input and fetch an op of the graph.

    >>> op = {"name": "a", "type": "NoOp", "device": "", "colocate": [], "inputs": [],
    ...       "control": ["b"], "made_in": None}
    >>> read_graph({"program": "p.py", "order": ["a"], "ops": [op], "clients": [],
    ...     "trainable": [], "queue_runners": [], "queue_sizes": {}, "collections":
    ...     {"update_ops": [], "train_op": [], "global_step": []}, "logical_devices": True,
    ...     "cores": 2, "runs_before_loop": 0})
    Traceback (most recent call last):
    ...
    simsync.sandbox.wire.WireError: graph.ops[0].control[0]: 'b' is no op of the graph
    """
    data: GraphData = read(GraphData, value, where)
    names: dict[str, int] = {}
    for index, op in enumerate(data["ops"]):
        if names.setdefault(op["name"], index) != index:
            raise WireError(f"{where}.ops[{index}].name: {_named(op['name'])} is named twice")
    if data["order"] != list(names):
        raise WireError(f"{where}.order: not the ops' names in the graph's order")

    edges = sum(len(op["inputs"]) + len(op["control"]) for op in data["ops"])
    if edges > MOST_EDGES:  # the parent converts and simulates it: its work is bounded here
        raise WireError(
            f"{where}.ops: {edges:,} inputs and control inputs in all; a graph may have at "
            f"most {MOST_EDGES:,}"
        )

    def known(name: str, field: str) -> None:
        if name not in names:
            raise WireError(f"{where}.{field}: {_named(name)} is no op of the graph")

    for index, op in enumerate(data["ops"]):
        for number, tensor in enumerate(op["inputs"]):
            known(tensor["op"], f"ops[{index}].inputs[{number}].op")
        for number, name in enumerate(op["control"]):
            known(name, f"ops[{index}].control[{number}]")
    for index, client in enumerate(data["clients"]):
        for number, name in enumerate(client["fetches"]):
            known(name, f"clients[{index}].fetches[{number}]")
    return data


def _check(kind: Any, value: Any, where: str, limit: Limit) -> Any:
    origin = get_origin(kind)
    if origin is Annotated:
        base, *extra = get_args(kind)
        return _check(base, value, where, next((e for e in extra if isinstance(e, Limit)), limit))
    if origin is NotRequired:
        return _check(get_args(kind)[0], value, where, limit)
    if typing.is_typeddict(kind):
        return _record(kind, value, where)
    if origin in (typing.Union, types.UnionType):
        choices = get_args(kind)
        if value is None and type(None) in choices:
            return None
        others = [c for c in choices if c is not type(None)]
        for other in others[:-1]:
            try:
                return _check(other, value, where, limit)
            except WireError:
                continue
        return _check(others[-1], value, where, limit)
    if origin is list:
        (item,) = get_args(kind)
        _sized(value, list, "a list", where, limit)
        return [_check(item, v, f"{where}[{i}]", Limit()) for i, v in enumerate(value)]
    if origin is tuple:
        items = get_args(kind)
        if not isinstance(value, list | tuple) or len(value) != len(items):
            raise WireError(f"{where}: a list of {len(items)} items, not {_shown(value)}")
        pairs = enumerate(zip(items, value, strict=True))
        return [_check(k, v, f"{where}[{i}]", Limit()) for i, (k, v) in pairs]
    if origin is dict:
        key, item = get_args(kind)
        _sized(value, dict, "a table", where, limit)
        return {
            _check(key, k, f"{where} key", Limit()): _check(item, v, f"{where}[{k!r}]", Limit())
            for k, v in value.items()
        }
    return _scalar(kind, value, where, limit)


def _scalar(kind: Any, value: Any, where: str, limit: Limit) -> Any:
    if kind is Any:
        return _free(value, where, DEPTH)
    if kind is bool:
        if not isinstance(value, bool):
            raise WireError(f"{where}: true or false, not {_shown(value)}")
        return value
    if kind is str:
        most = limit.most if limit.most is not None else TEXT
        if not isinstance(value, str) or len(value) > most:
            raise WireError(f"{where}: a text of at most {most:,} characters, not {_shown(value)}")
        if not limit.controls and _CONTROL.search(value):
            raise WireError(f"{where}: a text without control characters, not {_shown(value)}")
        if _SURROGATE.search(value):  # no UTF-8 holds it: printed, it would stop the parent
            raise WireError(f"{where}: a text of Unicode characters, not {_shown(value)}")
        return value
    if kind in (int, float):
        return _number(kind, value, where, limit)
    raise TypeError(f"the wire format has no rule for {kind!r}")  # a bug here, not the data's


def _number(kind: type, value: Any, where: str, limit: Limit) -> Any:
    low = -NUMBER if limit.low is None else limit.low
    high = NUMBER if limit.high is None else limit.high
    whole = kind is int
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and whole:
        ok = isinstance(value, int)
    if ok and isinstance(value, float) and not math.isfinite(value):
        ok = limit.finite is False  # NaN and infinities, where allowed (a loss)
    elif ok:  # an int of any size compares with the bounds exactly: no float conversion
        ok = low <= value <= high
    if not ok:
        what = "a whole number" if whole else "a number"
        raise WireError(f"{where}: {what} from {low:g} to {high:g}, not {_shown(value)}")
    return value


def _record(kind: Any, value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise WireError(f"{where}: a table, not {_shown(value)}")
    hints = _hints(kind)
    unknown = sorted(str(k) for k in value if k not in hints)
    if unknown:
        raise WireError(f"{where}: no key {_shown(unknown[0])} (it may hold {', '.join(hints)})")
    missing = [key for key in _required(kind) if key not in value]
    if missing:
        raise WireError(f"{where}: a table without {sorted(missing)[0]!r}")
    return {key: _check(hints[key], item, f"{where}.{key}", Limit()) for key, item in value.items()}


@functools.cache
def _hints(kind: Any) -> dict[str, Any]:
    return typing.get_type_hints(kind, include_extras=True)


@functools.cache
def _required(kind: Any) -> tuple[str, ...]:
    """The keys a table must hold (read from the hints: with postponed annotations, Python
    3.11's ``__required_keys__`` does not see ``NotRequired``)."""
    if not kind.__total__:
        return ()
    return tuple(k for k, hint in _hints(kind).items() if get_origin(hint) is not NotRequired)


def _sized(value: Any, cls: type, what: str, where: str, limit: Limit) -> None:
    most = limit.most if limit.most is not None else ITEMS
    if not isinstance(value, list | dict) or not isinstance(value, cls) or len(value) > most:
        raise WireError(f"{where}: {what} of at most {most:,} items, not {_shown(value)}")


def _free(value: Any, where: str, depth: int) -> Any:
    """Free-form data (a simulation's facts, an answers table): texts, finite numbers, truth
    values and null, in lists and tables of text keys, nested at most :data:`DEPTH` deep."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _scalar(str, value, where, Limit(most=2**20, controls=True))
    if isinstance(value, int | float):
        return _number(float, value, where, Limit(low=-_FLOAT, high=_FLOAT, finite=False))
    if depth <= 0:
        raise WireError(f"{where}: nested more than {DEPTH} deep")
    if isinstance(value, list):
        _sized(value, list, "a list", where, Limit())
        return [_free(v, f"{where}[{i}]", depth - 1) for i, v in enumerate(value)]
    if isinstance(value, dict):
        _sized(value, dict, "a table", where, Limit())
        return {
            _scalar(str, k, f"{where} key", Limit()): _free(v, f"{where}[{k!r}]", depth - 1)
            for k, v in value.items()
        }
    raise WireError(f"{where}: data of JSON, not {_shown(value)}")


def _named(name: str) -> str:
    return printable(repr(name if len(name) <= 80 else f"{name[:77]}..."), one_line=True)


def _shown(value: Any) -> str:
    """A value in a message: its type and a short, printable ``repr``."""
    text = repr(value)
    text = text if len(text) <= 40 else f"{text[:37]}..."
    return f"{type(value).__name__} {printable(text, one_line=True)}"
