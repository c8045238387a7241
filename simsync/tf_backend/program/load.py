"""Import a TensorFlow program (or a MetaGraphDef) into an IR graph: the parent's side, which
imports no TensorFlow.

:func:`capture_program` copies the program and the ``.py`` files beside it (regular files,
within limits) into a temporary folder, runs :mod:`simsync.tf_backend.program.child` on it
in the sandbox (:mod:`simsync.sandbox.bubblewrap`: no network, writes only to its own
temporary folder, the time and memory limits of :class:`ImportLimits`, threads but no new
processes), and reads what it says **as an attacker's data**: that process ran the program,
which may have rewritten anything it says. Every answer is checked whole against its type
(:mod:`simsync.sandbox.wire`) before any of it is used, and whatever is wrong is one
:class:`ProgramError` line, never a traceback. Nothing it says names a file: the costs are
kept under a key made here (:func:`~simsync.tf_backend.program.cost_cache.graph_key`: a hash of
the program's files as copied, the graph it reported and the machine), and where the program
made an op is read off the files copied (:mod:`~simsync.tf_backend.program.made_in`).

The costs come from the child's traced steps the first time, then from the cache
(:mod:`simsync.tf_backend.program.cost_cache`), or from ``costs=`` (a file measured on another
machine). The graph is :func:`~simsync.tf_backend.program.convert.convert`'s, its costs as
traced: fitting them to the untraced step needs the simulator, above this package
(:func:`simsync.simulation.importing.import_program`, the entry point).

With ``export`` (the grader's), the program's own process says nothing the import believes:
it only exports its loop (:func:`~simsync.tf_backend.program.child.export_loop`), and a
second process, which runs none of the program's code, loads that export, runs and times it,
and says the graph and its costs, sealed (:mod:`simsync.sandbox.channel`). So the graph
graded is the graph that ran there, and its costs that process's measure of it.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
import statistics
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from simsync.errors import GraphError, UsageError, printable
from simsync.ir import Graph
from simsync.sandbox.bubblewrap import (
    Limits,
    Network,
    Outcome,
    Sandbox,
    find_sandbox,
    locked_folder,
    remove_stale_folders,
    run_child,
)
from simsync.sandbox.channel import parse_line
from simsync.sandbox.wire import (
    Averaging,
    GraphData,
    OpData,
    Profile,
    ProgramSaid,
    WireError,
    read_graph,
    read_said,
    unfit_name,
)
from simsync.tf_backend.profile.machine import cached_efficiency
from simsync.tf_backend.program import cost_cache
from simsync.tf_backend.program.cluster import join, private_network, task_says, trainers
from simsync.tf_backend.program.convert import convert
from simsync.tf_backend.program.made_in import Source, made_in

__all__ = [
    "MOST_DEVICES",
    "PROGRAM_SUFFIXES",
    "ChildFailed",
    "ImportLimits",
    "Imported",
    "ProgramError",
    "capture_program",
    "devices_refused",
    "measure_program",
    "replay_program",
]

#: processes whose median step time the profile's is the median of (:func:`_more_walls`)
PROFILE_PROCESSES = 3
#: what ``simsync simulate FILE`` reads as a program rather than a scenario
PROGRAM_SUFFIXES = (".py", ".meta", ".pbtxt")
#: the program's folder: ``.py`` files copied beside it and in the folders below it (its own
#: modules and packages), at most, and their size; the program (or its MetaGraphDef) itself
#: may be larger; how deep below it folders are read
MAX_FILES, MAX_FILE_BYTES, MAX_PROGRAM_BYTES, MAX_DEPTH = 200, 2**20, 16 * 2**20, 4
#: folders read for them at most (a program in a home folder of many)
MAX_FOLDERS = 500
#: folders below a program that hold no module of its own
NOT_ITS_OWN = frozenset({"__pycache__", "site-packages", "node_modules", "venv", "env"})
#: the most of what its process said went wrong that a line shows
MAX_ERROR = 1000


@dataclass(frozen=True)
class ImportLimits(Limits):
    """The sandbox's limits for a program: TensorFlow's import and a few traced steps; its
    answer (a graph of thousands of ops, a cross-check's traced steps) may be large."""

    cpu_seconds: int = 300
    wall_seconds: float = 180.0
    memory_bytes: int = 6 * 2**30
    file_bytes: int = 256 * 2**20
    line_bytes: int = 64 * 2**20


class ProgramError(UsageError):
    """A program that cannot be imported: one line naming it and saying why."""


class ChildFailed(ProgramError):
    """The process that runs a program could not start (no program code ran): this machine's
    or the sandbox's failure (a full temporary folder), never the program's."""


@dataclass(frozen=True)
class Given:
    """The model a graded program's updates are compared with
    (:func:`~simsync.tf_backend.program.averaging.probe_averaging`): the reference
    solution's exported loop, its MetaGraphDef's bytes and its loop's clients."""

    meta: bytes = field(repr=False)
    clients: list[dict[str, Any]]


#: where the given model's MetaGraphDef is put beside a graded program's, for its child
GIVEN_META = "given/model.meta"


@dataclass
class Imported:
    """An imported program: its IR graph, the report of what was kept and ignored, and where
    its costs came from."""

    graph: Graph
    report: dict[str, Any]
    profile: Profile
    costs_from: str
    key: str
    data: GraphData = field(repr=False)
    #: how its updates weigh its towers, measured by the process that loaded its export (a
    #: graded program's: :mod:`~simsync.tf_backend.program.averaging`); None otherwise
    averaging: Averaging | None = None
    #: its exported loop (a graded program's), to compare another program with
    export: Given | None = None
    #: how fast this machine's cores run when all are busy, when its devices are logical
    efficiency: float | None = None
    #: the cost cache's folder its fit is kept in (None: not kept), and the machine it ran on
    kept_in: Path | None = None
    machine: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class _Copied:
    """A program's files as the parent copied them: their hash, and their source."""

    digest: str
    source: Source

    @classmethod
    def of(cls, files: Mapping[str, bytes], program: str, args: Sequence[str] = ()) -> _Copied:
        """Its files, and the command line they run with (``-- 3000`` builds another
        graph than ``-- 2`` may, of the same ops: costs are kept apart)."""
        return cls(cost_cache.digest(files, program, args), Source.of(files, program))


@dataclass(frozen=True)
class _Runner:
    """How a program's child is run: what is copied and run (the program, or the
    MetaGraphDef of an exported loop, with that ``loop``, sealed), its command line, the
    sandbox, its limits and the folders hidden in it. ``shown`` names the program in every
    line said; ``program`` and ``made_in`` are an exported loop's (its program's files,
    where its process said it made each op)."""

    source: Path
    shown: str
    args: tuple[str, ...] = ()
    limits: Limits | None = None
    sandbox: Sandbox | None = None
    hidden: tuple[Path, ...] = ()
    loop: dict[str, Any] | None = None
    program: _Copied | None = None
    made_in: Mapping[str, Any] | None = None
    #: a program written for a cluster: its jobs and their tasks (``--tasks``), each task
    #: told who it is by TF_CONFIG, and by the TF1 flags with ``task_flags``
    tasks: Mapping[str, int] | None = None
    task_flags: bool = True
    #: an exported loop's model to compare with (:class:`Given`)
    given: Given | None = None
    #: whether an exported loop's updates are measured (how they weigh the towers)
    averaging: bool = True
    #: TensorFlow given this many logical devices before the program runs (``--devices``:
    #: a ``tf.distribute`` strategy that takes every device has as many replicas), or None
    devices: int | None = None


@dataclass
class _Answer:
    """What a child said, checked whole, with the files it ran and the parent's key of its
    graph (None without a graph)."""

    said: ProgramSaid
    copied: _Copied
    key: str | None = None
    #: why the child stopped early (a limit), or ""
    stopped: str = ""

    def missing(self, shown: str, what: str) -> ProgramError:
        """The error of an answer without ``what``, with why the child stopped, if known."""
        return ProgramError(f"{shown}: {what}" + (f" ({self.stopped})" if self.stopped else ""))

    @property
    def data(self) -> GraphData:
        return self.said["graph"]


def capture_program(
    path: str | os.PathLike[str],
    *,
    args: Sequence[str] = (),
    costs: str | os.PathLike[str] | None = None,
    refresh: bool = False,
    limits: Limits | None = None,
    sandbox: Sandbox | None = None,
    steps: int = 5,
    hidden: tuple[Path, ...] = (),
    cache: Path | Literal[False] | None = None,
    export: bool = False,
    processes: int = PROFILE_PROCESSES,
    name: str | None = None,
    tasks: Mapping[str, int] | None = None,
    task_flags: bool = True,
    given: Given | None = None,
    averaging: bool = True,
    devices: int | None = None,
) -> Imported:
    """Run the program at ``path`` in the sandbox until its training loop is known, and
    return its graph with its costs as traced (see the module's docstring; fitted to its
    untraced step by :func:`simsync.simulation.importing.import_program`). ``args`` are its
    command line (``sys.argv[1:]``). ``refresh`` profiles again even when the cache has this graph;
    ``cache`` is the cost cache's folder (None: the user's; False: none, neither read nor
    written); ``export`` believes nothing the program's process says but where it made each
    op, checked against its source (the grader's); ``processes`` time the step
    (:func:`_more_walls`). ``sandbox`` defaults to bubblewrap
    (:data:`~simsync.sandbox.bubblewrap.NO_SANDBOX` only for trusted code). A program that
    cannot be imported raises :class:`ProgramError` with one line, which names it ``name``
    (default: its path). ``hidden`` folders are empty inside the sandbox (the grader's: the
    assignments and their solutions). A program written for a cluster runs as its cluster
    of ``tasks`` (``{"ps": 1, "worker": 2}``, :mod:`~simsync.tf_backend.program.cluster`),
    each task told who it is by ``TF_CONFIG`` and, with ``task_flags``, the TF1 flags. An
    exported program's updates are compared with the ``given`` model's
    (:class:`Given`: another's export, ``Imported.export``); with ``averaging`` false, an
    exported program's updates are not measured at all (``Imported.averaging`` is None: a
    reference solution, whose export is only given to others). With ``devices``, TensorFlow
    has that many logical devices before the program runs (:func:`devices_refused`)."""
    source = Path(path)
    shown = printable(name or str(source), one_line=True)
    folder = None if cache is False else (cache or cost_cache.costs_folder())
    chosen = cost_cache.load_costs(costs) if costs is not None else None
    if chosen is not None and not chosen["profile"]["ops"]:
        raise ProgramError(
            f"{printable(str(costs), one_line=True)}: a costs file of no op's costs (its "
            "profile.ops is empty)"
        )
    devices_refused(source, shown, devices)
    runner = _Runner(
        source, shown, tuple(args), limits, sandbox, hidden, tasks=tasks, task_flags=task_flags,
        devices=devices,
    )  # fmt: skip
    if tasks is not None and export:
        raise ProgramError(f"{shown}: a graded program runs in one process, not as a cluster")
    remove_stale_folders()  # a program's copies a killed import left
    own = None
    with locked_folder("simsync-export-") as exported:
        if export:
            runner = replace(_exported(runner, Path(exported)), given=given, averaging=averaging)
            own = Given(runner.source.read_bytes(), list((runner.loop or {})["clients"]))
        answer = _profiled(runner, steps, folder, refresh or folder is None, chosen is not None)
        key = str(answer.key)
        if "profile" in answer.said and processes > 1 and tasks is None:
            _more_walls(runner, answer.said["profile"], key, processes)
    profile, costs_from, costs_file = _profile(answer, folder, chosen, costs)
    if chosen is not None:
        names = {op["name"] for op in answer.data["ops"]}
        timed = set(profile["ops"])
        if len(timed & names) < len(timed) / 2:
            raise ProgramError(
                f"{shown}: {printable(str(costs), one_line=True)} holds the costs of another "
                "graph (most of its ops are not this program's)"
            )
    kept = folder if chosen is None else None  # a fit of costs from elsewhere is not kept
    imported = _imported(runner, answer, profile, costs_from, kept)
    imported.report["costs_file"] = None if costs_file is None else str(costs_file)
    return replace(imported, export=own)


def _imported(
    runner: _Runner, answer: _Answer, profile: Profile, costs_from: str, folder: Path | None
) -> Imported:
    """The import of a program whose child gave ``answer`` (checked whole) and whose costs
    are ``profile``: its graph converted (its fit to be kept in ``folder``, if any), or one
    :class:`ProgramError` line, whatever the answer held."""
    data, shown = answer.data, runner.shown
    efficiency = cached_efficiency() if data.get("logical_devices") else None
    try:
        graph, report = convert(
            data,
            profile,
            1.0 if efficiency is None else efficiency,
            made_in=_places(runner, answer),
        )
    except GraphError as error:
        raise ProgramError(f"{shown}: {error}") from None
    except (KeyError, TypeError, ValueError) as error:
        raise ProgramError(f"{shown}: its graph could not be read ({error!r})") from None
    report["source"] = shown
    report["costs"] = costs_from
    graph.facts = replace(graph.facts, source=report["source"])
    averaging = answer.said.get("averaging")
    machine = dict(answer.said.get("machine", {}))
    return Imported(graph, report, profile, costs_from, str(answer.key), data, averaging,
                    efficiency=efficiency, kept_in=folder, machine=machine)  # fmt: skip


#: the most logical devices ``--devices`` gives TensorFlow
MOST_DEVICES = 16


def devices_refused(source: Path, shown: str, devices: int | None) -> None:
    """Refuses (:class:`ProgramError`, one line) ``devices`` logical devices for a program
    that cannot take them: fewer than 1 or more than :data:`MOST_DEVICES`, or a MetaGraphDef
    (its graph names its devices; no code of its runs to take TensorFlow's).

    >>> devices_refused(Path("train.py"), "train.py", 2)
    >>> devices_refused(Path("model.meta"), "model.meta", 2)
    Traceback (most recent call last):
    ...
    simsync.tf_backend.program.load.ProgramError: model.meta: --devices gives a program \
TensorFlow's devices before it runs; a MetaGraphDef's graph names its own
    """
    if devices is None:
        return
    if not 1 <= devices <= MOST_DEVICES:
        raise ProgramError(f"{shown}: --devices {devices}: from 1 to {MOST_DEVICES}")
    if source.suffix != ".py":
        raise ProgramError(
            f"{shown}: --devices gives a program TensorFlow's devices before it runs; a "
            "MetaGraphDef's graph names its own"
        )


def measure_program(
    path: str | os.PathLike[str],
    *,
    args: Sequence[str] = (),
    traced: int = 10,
    untraced: int = 30,
    limits: Limits | None = None,
    sandbox: Sandbox | None = None,
    tasks: Mapping[str, int] | None = None,
    task_flags: bool = True,
    devices: int | None = None,
) -> tuple[str, GraphData, dict[str, Any]]:
    """Run the program at ``path`` again, in a process of its own, until its training loop
    is known, and measure it (:func:`~simsync.tf_backend.program.step_costs.measure_loop`:
    ``untraced`` timed steps and ``traced`` traced ones per client): the graph's key (the
    same as the import's when the program built the same graph), the graph as plain data
    (:func:`~simsync.tf_backend.program.convert.convert`'s input) and what was measured. A
    program written for a cluster runs as its cluster of ``tasks`` (see
    :func:`capture_program`), all of its workers measured together; with ``devices``, on
    that many logical devices (as imported)."""
    shown = printable(str(path), one_line=True)
    devices_refused(Path(path), shown, devices)
    runner = _Runner(
        Path(path), shown, tuple(args), limits, sandbox, tasks=tasks, task_flags=task_flags,
        devices=devices,
    )  # fmt: skip
    answer = _run(runner, {"measure": {"traced": traced, "untraced": untraced}})
    if "measured" not in answer.said:
        raise answer.missing(shown, "its run was not measured")
    return str(answer.key), answer.data, dict(answer.said["measured"])


def replay_program(
    path: str | os.PathLike[str],
    plan: dict[str, Any],
    key: str,
    *,
    args: Sequence[str] = (),
    limits: Limits | None = None,
    sandbox: Sandbox | None = None,
    devices: int | None = None,
) -> dict[str, Any]:
    """Run the program at ``path`` again, in the sandbox (on ``devices`` logical devices, as
    imported), until its training loop is known, and replay ``plan``
    (:func:`~simsync.tf_backend.program.values.replay_plan`) with its own ops
    (:func:`~simsync.tf_backend.program.replay.replay_loop`): its values in the simulated
    order. ``key`` is the imported graph's: a program that builds another graph this time
    (it draws its shape at random?) is refused in one line."""
    shown = printable(str(path), one_line=True)
    runner = _Runner(Path(path), shown, tuple(args), limits, sandbox, devices=devices)
    answer = _run(runner, {"replay": plan, "profile": False})
    if answer.key != key:
        raise ProgramError(
            f"{shown}: it built another graph when run again (it draws its shape?): no values"
        )
    if "values" not in answer.said:
        raise answer.missing(shown, "its values were not replayed")
    return dict(answer.said["values"])


def _exported(runner: _Runner, folder: Path) -> _Runner:
    """Run the program until its loop is known and have it export the loop (its process says
    nothing else); the runner of the second process that loads it from ``folder``."""
    answer = _run(runner, {"export": True})
    if "export" not in answer.said:
        raise answer.missing(runner.shown, "its training loop was not exported")
    export = answer.said["export"]
    try:
        meta = base64.b64decode(export["meta"], validate=True)
    except (binascii.Error, ValueError):
        raise ProgramError(f"{runner.shown}: its exported graph is not base64") from None
    exported = folder / f"{runner.source.stem}.meta"
    exported.write_bytes(meta)
    return replace(
        runner,
        source=exported,
        args=(),
        loop={"clients": export["clients"]},
        program=answer.copied,
        made_in=export["made_in"],
    )


def _profiled(
    runner: _Runner, steps: int, folder: Path | None, refresh: bool, chosen: bool
) -> _Answer:
    """The child's answer with a graph, and a profile unless ``chosen`` costs come from a
    file or the cache (``folder``, unless ``refresh``) has this graph's. The child learns only
    salted hashes of the cached keys (:func:`~simsync.tf_backend.program.cost_cache.known_keys`);
    one that skipped its profile for a key the cache does not have (gone since, or it lied)
    is run again, told that no key is known."""
    salt = os.urandom(16)
    keys = [] if refresh or folder is None else cost_cache.known_keys(salt, folder)
    request: dict[str, Any] = {"steps": steps, "known": {"salt": salt.hex(), "keys": keys}}
    if runner.loop is not None and runner.averaging:  # graded: how its updates weigh towers
        given = runner.given
        request["averaging"] = (
            {"given": {"meta": GIVEN_META, "clients": given.clients}} if given else True
        )
    if chosen:
        request["profile"] = False  # the costs come from the file
    answer = _run(runner, request)
    if chosen or "profile" in answer.said or answer.stopped:  # a limit stopped it: said
        if answer.stopped and not chosen and "profile" not in answer.said:
            raise answer.missing(runner.shown, "its costs were not measured")
        return answer
    if folder is not None and cost_cache.cached_costs(str(answer.key), folder) is not None:
        return answer
    answer = _run(runner, {**request, "known": {}})
    if "profile" not in answer.said:
        raise answer.missing(runner.shown, "its costs were not measured")
    return answer


def _places(runner: _Runner, answer: _Answer) -> dict[str, str]:
    """Where the program made each op, by function and line, read off its files
    (:func:`~simsync.tf_backend.program.made_in.made_in`) at the lines its process named:
    an exported loop's program, else the answer's own."""
    program = runner.program or answer.copied
    claims = runner.made_in
    if claims is None:
        claims = {op["name"]: op["made_in"] for op in answer.data["ops"]}
    ops = {op["name"]: op for op in answer.data["ops"]}
    places = {}
    for name, claim in claims.items():
        op = ops.get(name)
        if not claim or op is None:
            continue
        where = made_in(program.source, claim[0], claim[1], op["type"], _joins(op, ops))
        if where is not None:
            places[name] = where
    return places


def _joins(op: OpData, ops: Mapping[str, OpData]) -> bool:
    """Whether ``op`` joins tensors of two computations or more (where towers meet by data,
    so made by name): inputs from distinct ops, not counting a constant, nor an op of no
    input that is not a placeholder (a variable's, a queue's or an accumulator's handle)."""
    computed = set()
    for tensor in op["inputs"]:
        producer = ops.get(tensor["op"])
        if producer is None or producer["type"] == "Const":
            continue
        if producer["inputs"] or producer["type"].startswith("Placeholder"):
            computed.add(tensor["op"])
    return len(computed) >= 2


def _more_walls(runner: _Runner, profile: Profile, key: str, processes: int) -> None:
    """Each client's ``wall`` in ``profile``: the median over ``processes`` processes (this
    one and more, each run to its loop and timed, untraced) of their median step. On this
    machine one process's median step differs from another's by up to a tenth or more
    (where its threads landed, what else ran), and a prediction fitted to one process would
    carry that into every prediction made from it."""
    walls = {thread: [c["wall"]] for thread, c in profile["clients"].items()}
    for _ in range(processes - 1):
        try:
            answer = _run(runner, {"measure": {"traced": 0, "untraced": 30}})
        except ProgramError:  # this run failed (a time limit): the others' steps still count
            continue
        if answer.key != key or "measured" not in answer.said:
            continue  # it built another graph this time: its steps are not this graph's
        for thread, measured in answer.said["measured"]["clients"].items():
            if thread in walls and measured["walls"]:
                walls[thread].append(statistics.median(measured["walls"]))
    for thread, found in walls.items():
        profile["clients"][thread]["wall"] = statistics.median(found)
        profile["clients"][thread]["process_walls"] = found


def _run(runner: _Runner, request: dict[str, Any]) -> _Answer:
    """Run the child as ``runner`` says with ``request`` (the program's name, its kind, its
    files' hash and ``args`` added), and return what it said, checked whole, with a graph and
    its machine or an export; else raise :class:`ProgramError` with one line. A program
    written for a cluster runs as its cluster (:func:`_run_cluster`)."""
    if runner.devices is not None:  # each task of a cluster's too
        request = {**request, "devices": runner.devices}
    if runner.tasks is not None:
        return _run_cluster(runner, request, runner.tasks)
    shown, source = runner.shown, runner.source
    kind = "meta" if source.suffix in (".meta", ".pbtxt") else "python"
    limits = runner.limits or ImportLimits()
    with locked_folder("simsync-program-") as folder:
        files = _copy(source, Path(folder), shown)
        if runner.given is not None:  # beside the program's, not among its files
            (Path(folder) / GIVEN_META).parent.mkdir()
            (Path(folder) / GIVEN_META).write_bytes(runner.given.meta)
        copied = runner.program or _Copied.of(files, source.name, runner.args)
        request = {**request, "program": source.name, "kind": kind, "args": list(runner.args)}
        request["source"] = copied.digest
        if runner.loop is not None:
            request["loop"] = runner.loop
        # sealed: a graph loaded (no code of the program's runs there), or a graded
        # program's export, which its own code cannot write in its place (the key is held
        # where the source rules let no code reach)
        sealed = kind == "meta" or bool(request.get("export"))
        outcome = _child(runner, request, Path(folder), limits, sealed=sealed)
    said = _checked(outcome.said, shown)
    if said.get("error"):
        ran_again = " (its graph, loaded again without its code)" if runner.loop else ""
        error = printable(said["error"], one_line=True)
        error = error if len(error) <= MAX_ERROR else f"{error[:MAX_ERROR]}..."
        if "ModuleNotFoundError" in error and source.suffix == ".py":
            error += _copied_modules(source)
        raise ProgramError(f"{shown}{ran_again}: {error}")
    exported = "export" in said and bool(request.get("export"))  # only when asked for
    if exported or ("graph" in said and "machine" in said):
        answer = _Answer(said, copied, stopped=outcome.too_long(limits) or outcome.error or "")
        if "graph" in said:
            answer.key = cost_cache.graph_key(copied.digest, said["graph"], said["machine"])
        return answer
    why = (
        outcome.too_long(limits) or outcome.error or "it ended without an answer simsync could read"
    )
    if not outcome.started and not why.startswith(("stopped", "not run")):
        last = printable((outcome.stderr.strip().splitlines() or [why])[-1], one_line=True)
        raise ChildFailed(f"{shown}: the process that runs it could not start: {last[:300]}")
    if "took longer" in why or "CPU time" in why:
        why += " (a loop before its first sess.run, or a blocked queue?)"
    elif why.endswith("SIGABRT"):
        why += (
            " (TensorFlow stops so when it cannot start a thread or get memory: "
            f"{limits.memory_bytes / 2**30:g} GiB here; does the program start many threads?)"
        )
    raise ProgramError(f"{shown}: {why}")


def _run_cluster(runner: _Runner, request: dict[str, Any], jobs: Mapping[str, int]) -> _Answer:
    """Run every task of the cluster ``jobs`` (:mod:`~simsync.tf_backend.program.cluster`),
    each a child in the sandbox, all in one private network, until every task that trains
    has said its graph and costs (or one has failed, or the wall clock is up); then end them
    all and join what they said into one program's answer. A task at its training loop
    waits until every task that trains is at its own: their steps are timed together."""
    shown, source = runner.shown, runner.source
    if source.suffix != ".py":
        raise ProgramError(f"{shown}: --tasks runs a program (.py), not a MetaGraphDef")
    limits = runner.limits or ImportLimits()
    training = trainers(jobs)
    answered: set[tuple[str, int]] = set()
    looping: set[tuple[str, int]] = set()
    failed: list[tuple[str, int]] = []
    lock = threading.Lock()

    def over() -> bool:
        return bool(failed) or len(answered) == len(training)

    def done_for(task: tuple[str, int]) -> Callable[[bytes], bool]:
        def done(tail: bytes) -> bool:
            if task in training and tail.rstrip().endswith(ANSWERED):
                with lock:
                    answered.add(task)
            return over()

        return done

    def ready_for(task: tuple[str, int]) -> Callable[[bytes], bool]:
        """Whether ``task`` may go on from its loop: every task that trains is at its own,
        so their steps are timed together."""

        def ready(tail: bytes) -> bool:
            if task in training and LOOPING in tail:
                with lock:
                    looping.add(task)
            return len(looping) == len(training)

        return ready

    outcomes: dict[tuple[str, int], Any] = {}
    with private_network() as enter, locked_folder("simsync-program-") as folder:
        files = _copy(source, Path(folder), shown)
        copied = _Copied.of(files, source.name, runner.args)

        def run_task(job: str, index: int) -> None:
            flags, config = task_says(jobs, job, index, runner.task_flags)
            said = {
                **request,
                "program": source.name,
                "kind": "python",
                "args": [*runner.args, *flags],
                "source": copied.digest,
                "task": {"tf_config": config},
            }
            network = Network(enter, done_for((job, index)), ready_for((job, index)))
            try:
                outcomes[(job, index)] = _child(runner, said, Path(folder), limits, network=network)
            finally:
                # its answer is whole once it said so, though the program then ended (its
                # loop at its last global step) before the line was seen as its output's last:
                # else the cluster waited for it to its wall clock's end (180 s)
                outcome = outcomes.get((job, index))
                said_all = outcome is not None and outcome.said.get("answered") is True
                with lock:
                    if (job, index) in training and said_all:
                        answered.add((job, index))  # the others (a ps) end at their next look
                    elif (job, index) in training and (job, index) not in answered:
                        failed.append((job, index))

        started = [
            threading.Thread(target=run_task, args=(job, i), daemon=True)
            for job, count in jobs.items()
            for i in range(count)
        ]
        for thread in started:
            thread.start()
        for thread in started:
            thread.join()
    first = outcomes.get(failed[0]) if failed else None
    if first is not None:  # the task that failed first says why, before the ones it ended
        said = _checked(first.said, f"{shown} (task {failed[0][0]} {failed[0][1]})")
        if said.get("error") and said.get("answered") is not True:
            error = printable(said["error"], one_line=True)[:MAX_ERROR]
            raise ProgramError(f"{shown} (task {failed[0][0]} {failed[0][1]}): {error}")
    answers = []
    for job, index in training:
        outcome = outcomes.get((job, index))
        task = f"{shown} (task {job} {index})"
        if outcome is None:
            raise ProgramError(f"{task}: its process could not be run")
        said = _checked(outcome.said, task)
        wanted = ("graph", "machine", "measured" if "measure" in request else "profile")
        whole = all(key in said for key in wanted) and said.get("answered") is True
        if said.get("error") and not whole:  # an error once its cluster was ended: not its
            raise ProgramError(f"{task}: {printable(said['error'], one_line=True)[:MAX_ERROR]}")
        if not whole:
            why = outcome.too_long(limits) or outcome.error
            if why is None and failed and failed[0] != (job, index):
                why = f"task {failed[0][0]} {failed[0][1]} failed first"
            raise ProgramError(f"{task}: it said no training loop ({why or 'no answer'})")
        answers.append(said)
    joined = join(answers, source.name)
    try:
        checked = read_said(ProgramSaid, joined, "its cluster")
        read_graph(checked["graph"], "its cluster's graph")
    except WireError as error:
        raise ProgramError(f"{shown}: {error}") from None
    answer = _Answer(checked, copied)  # type: ignore[arg-type]
    answer.key = cost_cache.graph_key(copied.digest, joined["graph"], joined["machine"])
    return answer


def _child(
    runner: _Runner,
    request: dict[str, Any],
    folder: Path,
    limits: Limits,
    sealed: bool = False,
    network: Network | None = None,
) -> Outcome:
    """One child of the program (:mod:`~simsync.tf_backend.program.child`) run on
    ``request`` with the files of ``folder``, in the runner's sandbox."""
    return run_child(
        runner.sandbox or find_sandbox(),
        request,
        folder,
        limits,
        runner.hidden,
        module="simsync.tf_backend.program.child",
        threads=True,
        sealed=sealed,
        network=network,
    )


#: the lines a task of a cluster says at its loop (then waits for the others), and once its
#: answer is whole
LOOPING, ANSWERED = b'{"looping": true}', b'{"answered": true}'


def _checked(said: dict[str, Any], shown: str) -> ProgramSaid:
    """What the child said, every line checked whole (:func:`~simsync.sandbox.wire.read_said`;
    the graph, which came as text, parsed first)."""
    said = dict(said)
    if "graph" in said:
        try:
            said["graph"] = parse_line(said["graph"])["graph"]
        except ValueError as error:
            raise ProgramError(
                f"{shown}: its process said a graph that is not one ({error})"
            ) from None
        except (KeyError, TypeError):
            raise ProgramError(f"{shown}: its process said a graph that is not one") from None
    try:
        checked: ProgramSaid = read_said(ProgramSaid, said, "its process")  # type: ignore[assignment]
        if "graph" in checked:
            read_graph(checked["graph"], "its graph")
    except WireError as error:
        raise ProgramError(f"{shown}: {error}") from None
    return checked


def _profile(
    answer: _Answer, folder: Path | None, chosen: Any, costs: Any
) -> tuple[Profile, str, Path | None]:
    """The profile to use, where it came from (measured now, ``--costs``, or the cache), and
    the file of the cache it is kept in (None: in none)."""
    said, key = answer.said, str(answer.key)
    if "profile" in said:
        profile = said["profile"]
        measured = f"measured now ({profile['steps']} traced steps)"
        if folder is None:
            return profile, measured, None
        return profile, measured, cost_cache.save_costs(key, said["machine"], profile, folder)
    if chosen is not None:
        where = chosen["machine"].get("processor")
        return chosen["profile"], f"{costs} (measured on {where})", None
    cached = None if folder is None else cost_cache.cached_costs(key, folder)
    if folder is None or cached is None:
        raise ProgramError("the cached costs of this graph vanished: run again")
    return cached["profile"], "cached", cost_cache.costs_path(key, folder)


def _copy(source: Path, target: Path, shown: str) -> dict[str, bytes]:
    """The program and the ``.py`` files beside it and in the folders below it (its modules
    and packages, :func:`_beside`), regular files only: copied, and each file's bytes by
    name, a path relative to the program's folder (``shown`` names the program in an
    error)."""
    if not source.is_file():
        what = "not found" if not source.exists() else "not a regular file"
        raise ProgramError(f"{shown}: {what}")
    if source.suffix not in PROGRAM_SUFFIXES:
        raise ProgramError(
            f"{shown}: a program must be a .py file, or a MetaGraphDef (.meta, .pbtxt)"
        )
    unfit = unfit_name(source.name)  # TensorFlow names it in every op's traceback
    if unfit is not None:
        raise ProgramError(f"{shown}: its file name holds {unfit}: rename it")
    copied = {}
    names = [source.name]
    if source.suffix == ".py":
        names += _beside(source)[:MAX_FILES]
    for name in names:
        program = name == source.name
        most = MAX_PROGRAM_BYTES if program else MAX_FILE_BYTES
        # the program as named, a link followed; a file beside it only if it is no link
        flags = os.O_RDONLY | os.O_NONBLOCK | (0 if program else os.O_NOFOLLOW)
        try:
            fd = os.open(source.parent / name, flags)
        except OSError as error:
            if program:
                raise ProgramError(f"{shown}: {error.strerror}") from None
            continue
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            content = handle.read(most + 1)
        if len(content) > most and name == source.name:
            raise ProgramError(f"{shown}: larger than {most // 2**20} MiB")
        if len(content) <= most:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(content)
            copied[name] = content
    return copied


def _beside(source: Path) -> list[str]:
    """The ``.py`` files beside the program and in the folders below it, at most
    :data:`MAX_DEPTH` deep, nearest first (paths relative to its folder, ``/`` between
    folders): not in a hidden folder, a virtual environment or a folder of installed
    packages (:data:`NOT_ITS_OWN`), nor behind a link; at most :data:`MAX_FOLDERS`
    folders read."""
    found, level, read = [], [source.parent], 0
    for _ in range(MAX_DEPTH + 1):
        below = []
        for folder in level[: MAX_FOLDERS - read]:
            read += 1
            try:
                entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
            except OSError:
                continue
            for entry in entries:
                if entry.is_symlink():
                    continue
                if entry.is_file() and entry.name.endswith(".py") and entry.path != str(source):
                    found.append(Path(entry.path).relative_to(source.parent).as_posix())
                elif entry.is_dir() and _its_own(entry):
                    below.append(Path(entry.path))
        if len(found) > MAX_FILES or read >= MAX_FOLDERS:
            break
        level = below
    return found


def _copied_modules(source: Path) -> str:
    """What of a program's modules its sandbox holds, for an error that one is missing."""
    count = len(_beside(source))
    cut = (
        f"; of {count} or more .py files there, only the first {MAX_FILES} (move the program "
        "to a folder of its own)"
        if count > MAX_FILES
        else ""
    )
    return (
        " (the program runs in a sandbox, with the .py files beside it and in the folders "
        f"below it, {MAX_DEPTH} deep{cut}; an installed module must be in this Python's "
        "environment)"
    )


def _its_own(entry: os.DirEntry[str]) -> bool:
    """Whether a folder below a program may hold its modules (not hidden, not a virtual
    environment's or installed packages')."""
    if entry.name.startswith(".") or entry.name in NOT_ITS_OWN:
        return False
    return not os.path.exists(os.path.join(entry.path, "pyvenv.cfg"))
