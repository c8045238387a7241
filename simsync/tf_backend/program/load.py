"""Import a TensorFlow program (or a MetaGraphDef) into an IR graph: the parent's side, which
imports no TensorFlow.

:func:`import_program` copies the program and the ``.py`` files beside it (regular files,
within limits) into a temporary folder, runs :mod:`simsync.tf_backend.program.child` on it
in the sandbox (:mod:`simsync.sandbox.bubblewrap`: no network, writes only to its own
temporary folder, the time and memory limits of :class:`ImportLimits`, threads but no new
processes), and reads what it says. The costs come from the child's traced steps the first
time, then from the cache (:mod:`simsync.tf_backend.program.costs`, keyed by the graph and
the machine), or from ``costs=`` (a file measured on another machine). The graph is
:func:`~simsync.tf_backend.program.convert.convert`'s.
"""

from __future__ import annotations

import json
import os
import stat
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simsync.errors import GraphError, UsageError, printable
from simsync.ir import Graph
from simsync.sandbox.bubblewrap import Limits, Sandbox, find_sandbox, run_child
from simsync.tf_backend.profile.machine import cached_efficiency
from simsync.tf_backend.program import costs as cost_cache
from simsync.tf_backend.program.convert import convert
from simsync.tf_backend.program.fit import apply_fit, fit_costs

__all__ = [
    "PROGRAM_SUFFIXES",
    "ImportLimits",
    "Imported",
    "ProgramError",
    "import_program",
    "measure_program",
    "replay_program",
]

#: processes whose median step time the profile's is the median of (:func:`_more_walls`)
PROFILE_PROCESSES = 3
#: the form of a kept fit: a fit kept in another form is found again
FIT_FORM = 4  # 3: per_run on top of a NoOp run's run_work; 4: tried until within 1 %
#: what ``simsync simulate FILE`` reads as a program rather than a scenario
PROGRAM_SUFFIXES = (".py", ".meta", ".pbtxt")
#: the program's folder: files copied beside it (its own modules), at most, and their size;
#: the program (or its MetaGraphDef) itself may be larger
MAX_FILES, MAX_FILE_BYTES, MAX_PROGRAM_BYTES = 50, 2**20, 16 * 2**20


@dataclass(frozen=True)
class ImportLimits(Limits):
    """The sandbox's limits for a program: TensorFlow's import and a few traced steps."""

    cpu_seconds: int = 300
    wall_seconds: float = 180.0
    memory_bytes: int = 6 * 2**30


class ProgramError(UsageError):
    """A program that cannot be imported: one line naming it and saying why."""


@dataclass
class Imported:
    """An imported program: its IR graph, the report of what was kept and ignored, and where
    its costs came from."""

    graph: Graph
    report: dict[str, Any]
    profile: dict[str, Any]
    costs_from: str
    key: str
    data: dict[str, Any] = field(repr=False, default_factory=dict)


def import_program(
    path: str | os.PathLike[str],
    *,
    args: Sequence[str] = (),
    costs: str | os.PathLike[str] | None = None,
    refresh: bool = False,
    limits: Limits | None = None,
    sandbox: Sandbox | None = None,
    steps: int = 5,
    hidden: tuple[Path, ...] = (),
) -> Imported:
    """Run the program at ``path`` in the sandbox until its training loop is known, and
    return its graph with costs (see the module's docstring). ``args`` are its command line
    (``sys.argv[1:]``). ``refresh`` profiles again even
    when the cache has this graph; ``sandbox`` defaults to bubblewrap
    (:data:`~simsync.sandbox.bubblewrap.NO_SANDBOX` only for trusted code). A program that
    cannot be imported raises :class:`ProgramError` with one line. ``hidden`` folders are
    empty inside the sandbox (the grader's: the assignments and their solutions)."""
    source = Path(path)
    shown = printable(str(source), one_line=True)
    chosen = cost_cache.load_costs(costs) if costs is not None else None
    request: dict[str, Any] = {
        "steps": steps,
        "known": [] if refresh else cost_cache.known_keys(),
    }
    if chosen is not None:
        request["profile"] = False  # the costs come from the file
    said = _run_program(source, request, args, limits, sandbox, hidden)
    data = json.loads(said["graph"])["graph"]
    key = str(said["key"])
    if "profile" in said:  # the step's wall time of more processes than this one
        _more_walls(source, said["profile"], key, args, limits, sandbox, hidden)
    profile, costs_from = _profile(said, key, chosen, costs)
    if chosen is not None:
        names = {op["name"] for op in data["ops"]}
        timed = set(profile["ops"])
        if len(timed & names) < len(timed) / 2:
            raise ProgramError(
                f"{shown}: {printable(str(costs), one_line=True)} holds the costs of another "
                "graph (most of its ops are not this program's)"
            )
    efficiency = cached_efficiency() if data.get("logical_devices") else None
    try:
        graph, report = convert(data, profile, 1.0 if efficiency is None else efficiency)
    except GraphError as error:
        raise ProgramError(f"{shown}: {error}") from None
    except (KeyError, TypeError, ValueError) as error:
        raise ProgramError(f"{shown}: its graph could not be read ({error!r})") from None
    walls = {
        client["name"]: profile["clients"][client["thread"]].get("wall", 0.0)
        for client in data["clients"]
        if client["thread"] in profile.get("clients", {})
    }
    basis = {
        "walls": walls,
        # its clients were timed together (workers of SyncReplicasOptimizer)
        "together": bool(profile.get("clients"))
        and all(c.get("together") for c in profile["clients"].values()),
        "efficiency": efficiency,
        "cores": data.get("cores"),
        "logical_devices": data.get("logical_devices"),
        "form": FIT_FORM,
    }
    graph, fitted = _fitted(graph, basis, profile, key, said, chosen is None)
    report["source"] = str(source)
    report["costs"] = costs_from
    report["fit"] = fitted
    graph.facts["source"] = str(source)
    return Imported(graph, report, profile, costs_from, key, data)


def measure_program(
    path: str | os.PathLike[str],
    *,
    args: Sequence[str] = (),
    traced: int = 10,
    untraced: int = 30,
    limits: Limits | None = None,
    sandbox: Sandbox | None = None,
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Run the program at ``path`` again, in a process of its own, until its training loop
    is known, and measure it (:func:`~simsync.tf_backend.program.profile.measure_loop`:
    ``untraced`` timed steps and ``traced`` traced ones per client): the graph's key (the
    same as the import's when the program built the same graph), the graph as plain data
    (:func:`~simsync.tf_backend.program.convert.convert`'s input) and what was measured."""
    request = {"measure": {"traced": traced, "untraced": untraced}}
    said = _run_program(Path(path), request, args, limits, sandbox)
    if "measured" not in said:
        raise ProgramError(f"{printable(str(path), one_line=True)}: its run was not measured")
    data = json.loads(said["graph"])["graph"]
    return str(said["key"]), data, said["measured"]


def replay_program(
    path: str | os.PathLike[str],
    plan: dict[str, Any],
    key: str,
    *,
    args: Sequence[str] = (),
    limits: Limits | None = None,
    sandbox: Sandbox | None = None,
) -> dict[str, Any]:
    """Run the program at ``path`` again, in the sandbox, until its training loop is known,
    and replay ``plan`` (:func:`~simsync.tf_backend.program.values.replay_plan`) with its own
    ops (:func:`~simsync.tf_backend.program.replay.replay_loop`): its values in the simulated
    order. ``key`` is the imported graph's: a program that builds another graph this time
    (it draws its shape at random?) is refused in one line."""
    shown = printable(str(path), one_line=True)
    request = {"replay": plan, "key": key, "profile": False}
    said = _run_program(Path(path), request, args, limits, sandbox)
    if "values" not in said:
        raise ProgramError(f"{shown}: its values were not replayed")
    return dict(said["values"])


def _fitted(
    graph: Graph,
    basis: dict[str, Any],
    profile: dict[str, Any],
    key: str,
    said: dict[str, Any],
    ours: bool,
) -> tuple[Graph, dict[str, Any]]:
    """``graph`` fitted to its untraced step (:func:`~simsync.tf_backend.program.fit.fit_costs`),
    by the scale kept in simsync's own cache (``ours``; never a ``--costs`` file from
    elsewhere) when it was found on the same ``basis`` (the walls, the cores and their
    efficiency, the form of the fit): a fit simulates the graph, seconds for a large one.
    Else found now, and kept there."""
    known = profile.get("fit")
    if ours and isinstance(known, dict) and known.get("basis") == basis:
        report = dict(known.get("report") or {})
        return apply_fit(graph, report), report
    graph, fitted = fit_costs(graph, basis["walls"], bool(basis.get("together")))
    if ours:
        profile["fit"] = {"basis": basis, "report": fitted}
        cost_cache.save_costs(key, said.get("machine", {}), profile)
    return graph, fitted


def _more_walls(
    source: Path,
    profile: dict[str, Any],
    key: str,
    args: Sequence[str],
    limits: Limits | None,
    sandbox: Sandbox | None,
    hidden: tuple[Path, ...],
) -> None:
    """Each client's ``wall`` in ``profile``: the median over :data:`PROFILE_PROCESSES`
    processes (this one and more, each run to its loop and timed, untraced) of their median
    step. On this machine one process's median step differs from another's by up to a
    tenth or more (where its threads landed, what else ran), and a prediction fitted to one
    process would carry that into every prediction made from it."""
    walls = {thread: [c["wall"]] for thread, c in profile["clients"].items()}
    for _ in range(PROFILE_PROCESSES - 1):
        try:
            said = _run_program(
                source, {"measure": {"traced": 0, "untraced": 30}}, args, limits, sandbox, hidden
            )
        except ProgramError:  # this run failed (a time limit): the others' steps still count
            continue
        if str(said.get("key")) != key or "measured" not in said:
            continue  # it built another graph this time: its steps are not this graph's
        for thread, measured in said["measured"]["clients"].items():
            if thread in walls and measured["walls"]:
                walls[thread].append(statistics.median(measured["walls"]))
    for thread, found in walls.items():
        profile["clients"][thread]["wall"] = statistics.median(found)
        profile["clients"][thread]["process_walls"] = found


def _run_program(
    source: Path,
    request: dict[str, Any],
    args: Sequence[str],
    limits: Limits | None,
    sandbox: Sandbox | None,
    hidden: tuple[Path, ...] = (),
) -> dict[str, Any]:
    """Run the child on the program at ``source`` with ``request`` (the program's name, its
    kind and ``args`` added) and return what it said, with a graph and a key; else raise
    :class:`ProgramError` with one line."""
    shown = printable(str(source), one_line=True)
    kind = "meta" if source.suffix in (".meta", ".pbtxt") else "python"
    with tempfile.TemporaryDirectory(prefix="simsync-program-") as folder:
        _copy(source, Path(folder))
        outcome = run_child(
            sandbox or find_sandbox(),
            {**request, "program": source.name, "kind": kind, "args": list(args)},
            Path(folder),
            limits or ImportLimits(),
            hidden,
            module="simsync.tf_backend.program.child",
            threads=True,
        )
    said = outcome.said
    if said.get("error"):
        raise ProgramError(f"{shown}: {printable(str(said['error']), one_line=True)}")
    if "graph" not in said or "key" not in said:
        why = outcome.error or "it stopped without saying why"
        if "started" in said and "time" in why:
            why += " (a loop before its first sess.run, or a blocked queue?)"
        raise ProgramError(f"{shown}: {why}")
    return said


def _profile(
    said: dict[str, Any], key: str, chosen: dict[str, Any] | None, costs: Any
) -> tuple[dict[str, Any], str]:
    """The profile to use and where it came from: measured now (and cached), ``--costs``,
    or the cache."""
    if "profile" in said:
        saved = cost_cache.save_costs(key, said.get("machine", {}), said["profile"])
        return said[
            "profile"
        ], f"measured now ({said['profile']['steps']} traced steps), kept in {saved}"
    if chosen is not None:
        return chosen["profile"], f"{costs} (measured on {chosen['machine'].get('processor')})"
    if "profile" not in said and said.get("profiled") is False:
        raise ProgramError("the costs were not measured: run again")
    cached = cost_cache.cached_costs(key)
    if cached is None:
        raise ProgramError("the cached costs of this graph vanished: run again")
    return cached["profile"], f"cached ({cost_cache.costs_path(key)})"


def _copy(source: Path, target: Path) -> None:
    """The program and the ``.py`` files beside it, regular files only."""
    if not source.is_file():
        what = "not found" if not source.exists() else "not a regular file"
        raise ProgramError(f"{printable(str(source), one_line=True)}: {what}")
    if source.suffix not in PROGRAM_SUFFIXES:
        raise ProgramError(
            f"{printable(str(source), one_line=True)}: a program must be a .py file, or a "
            "MetaGraphDef (.meta, .pbtxt)"
        )
    names = [source.name]
    if source.suffix == ".py":
        beside = sorted(p.name for p in source.parent.glob("*.py") if p.name != source.name)
        names += beside[:MAX_FILES]
    for name in names:
        most = MAX_PROGRAM_BYTES if name == source.name else MAX_FILE_BYTES
        try:
            fd = os.open(source.parent / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            content = handle.read(most + 1)
        if len(content) > most and name == source.name:
            raise ProgramError(
                f"{printable(str(source), one_line=True)}: larger than {most // 2**20} MiB"
            )
        if len(content) <= most:
            (target / name).write_bytes(content)
