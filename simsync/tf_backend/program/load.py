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
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simsync.errors import GraphError, UsageError, printable
from simsync.ir import Graph
from simsync.sandbox.bubblewrap import Limits, Sandbox, find_sandbox, run_child
from simsync.tf_backend.program import costs as cost_cache
from simsync.tf_backend.program.convert import convert

__all__ = ["PROGRAM_SUFFIXES", "ImportLimits", "Imported", "ProgramError", "import_program"]

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
    costs: str | os.PathLike[str] | None = None,
    refresh: bool = False,
    limits: Limits | None = None,
    sandbox: Sandbox | None = None,
    steps: int = 5,
) -> Imported:
    """Run the program at ``path`` in the sandbox until its training loop is known, and
    return its graph with costs (see the module's docstring). ``refresh`` profiles again even
    when the cache has this graph; ``sandbox`` defaults to bubblewrap
    (:data:`~simsync.sandbox.bubblewrap.NO_SANDBOX` only for trusted code). A program that
    cannot be imported raises :class:`ProgramError` with one line."""
    source = Path(path)
    shown = printable(str(source), one_line=True)
    kind = "meta" if source.suffix in (".meta", ".pbtxt") else "python"
    sandbox = sandbox or find_sandbox()
    limits = limits or ImportLimits()
    chosen = cost_cache.load_costs(costs) if costs is not None else None
    with tempfile.TemporaryDirectory(prefix="simsync-program-") as folder:
        _copy(source, Path(folder))
        request = {
            "program": source.name,
            "kind": kind,
            "steps": steps,
            "known": [] if refresh else cost_cache.known_keys(),
        }
        if chosen is not None:
            request["profile"] = False  # the costs come from the file
        outcome = run_child(
            sandbox,
            request,
            Path(folder),
            limits,
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
    data = json.loads(said["graph"])["graph"]
    key = str(said["key"])
    profile, costs_from = _profile(said, key, chosen, costs)
    if chosen is not None:
        names = {op["name"] for op in data["ops"]}
        timed = set(profile["ops"])
        if len(timed & names) < len(timed) / 2:
            raise ProgramError(
                f"{shown}: {printable(str(costs), one_line=True)} holds the costs of another "
                "graph (most of its ops are not this program's)"
            )
    try:
        graph, report = convert(data, profile)
    except GraphError as error:
        raise ProgramError(f"{shown}: {error}") from None
    except (KeyError, TypeError, ValueError) as error:
        raise ProgramError(f"{shown}: its graph could not be read ({error!r})") from None
    report["source"] = str(source)
    report["costs"] = costs_from
    graph.facts["source"] = str(source)
    return Imported(graph, report, profile, costs_from, key, data)


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
