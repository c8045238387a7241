"""The sandboxed side of grading: everything that touches a submission, in a process of its own.

Run by :mod:`simsync.sandbox.bubblewrap` as ``python -I -m simsync.grading.child REQUEST
SUBMISSION WORK``, inside the sandbox. It writes JSON lines to its standard output (the
result); anything else printed goes to standard error. A request is one of two stages, never
both in one process, so a student's code cannot reach the numbers it is graded on:

``build``
    Copy the submission into ``WORK``, install an audit hook (a second wall behind the
    sandbox: no writes outside ``WORK``, no sockets, processes or ``ctypes``), import the
    student's module and call its function on the scenario. Says ``{"graph": ...}`` (the
    graph as data) or ``{"error": ...}``.
``evaluate``
    No student code runs. Build the graph from the data of a ``build`` (or from the
    scenario and the submission's ``training.toml``), then, as asked, simulate it, run it on
    TensorFlow and read ``answers.toml``. Says each product on its own line as soon as it is
    known (``graph``, ``facts``, ``params``, ``answers``), or ``<product>_error``, so a time
    limit reached in TensorFlow keeps the simulation's facts.
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import shutil
import sys
import tomllib
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simsync.errors import SimsyncError
from simsync.files import read_toml
from simsync.ir import Graph, graph_from_dict, graph_to_dict
from simsync.sandbox.bubblewrap import TOO_LARGE
from simsync.sandbox.channel import answer_channel
from simsync.scenario import Scenario, scenario_from_dict

__all__ = ["MAX_OPS", "main", "simsync_folder", "structure_of", "updates_of"]

#: a graph larger than this is refused before it is simulated
MAX_OPS = 5000
#: audit events refused outright
REFUSED = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.fork",
           "os.spawn", "ctypes.", "pty.", "os.kill", "os.forkpty", "webbrowser.",
           "resource.prlimit", "resource.setrlimit")  # fmt: skip
#: audit events that change the file system, checked against the working directory
WRITES = ("os.remove", "os.rename", "os.mkdir", "os.rmdir", "os.chmod", "os.symlink", "os.link",
          "os.truncate", "shutil.rmtree", "os.utime", "os.chown", "shutil.copyfile")  # fmt: skip
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
#: what of the hook's functions may not be set: their code and the values they were bound to
#: (every name they use is an argument's default, never a closure's cell, which could be set)
FUNCTION_PARTS = ("__code__", "__defaults__", "__kwdefaults__")


def main(request_path: str, submission: str, work: str) -> int:
    request = json.loads(Path(request_path).read_text())
    say = answer_channel(
        bool(request.get("sealed")), default=_plain, started=request.get("started_fd")
    )

    if request.get("simsync") not in (None, simsync_folder()):
        print(
            f"the grader uses simsync from {request['simsync']}, but its sandbox finds "
            f"another in {simsync_folder()} (is PYTHONPATH set?): grade without PYTHONPATH",
            file=sys.stderr,
        )
        return 2
    scenario = _scenario(request)
    say(started=True)  # before any student code: a process that never says it failed itself
    try:
        if request["stage"] == "build":
            say(**_build(request, Path(submission), Path(work), scenario))
        else:
            _evaluate(request, Path(submission), scenario, say)
    except OSError as error:
        if error.errno == errno.EFBIG:  # the answer is over the file size limit
            return TOO_LARGE
        raise
    return 0


def simsync_folder() -> str:
    """Where this simsync is installed: the grader and its sandbox must use the same."""
    import simsync

    return str(Path(simsync.__file__).resolve().parent)


def _scenario(request: dict[str, Any]) -> Scenario:
    return scenario_from_dict(tomllib.loads(request["scenario"]), source="scenario.toml")


# ## Stage 1: the student's code


#: a file the grading needs that the submission's copy lacks: none of that name, or one that
#: is not a regular file (a link, a folder, a pipe), which is not copied
MISSING = (
    "the file is missing from your submission (only regular files are graded: not a link, "
    "a folder or a pipe)"
)


def _build(request: dict[str, Any], submission: Path, work: Path, scenario: Scenario) -> dict:
    shutil.copytree(submission, work, dirs_exist_ok=True)
    os.chdir(work)
    _guard(work.resolve())
    sys.path.insert(0, str(work))
    function = request["function"]
    if not (work / f"{request['module']}.py").is_file():
        return {"error": f"{request['module']}.py: {MISSING}"}
    try:
        module = importlib.import_module(request["module"])
        graph = getattr(module, function)(scenario)
        if not isinstance(graph, Graph):
            raise TypeError(f"{function}() returned {type(graph).__name__}, not a Graph")
        _reasonable(graph, scenario.run.steps)
        return {"graph": graph_to_dict(graph)}
    except SimsyncError as error:
        return {"error": str(error)}
    except BaseException as error:  # the student's exception, whatever it is
        return {"error": _describe(error)}


def _guard(root: Path) -> None:
    """Refuse writes outside ``root``, sockets, processes and ctypes (an audit hook cannot be
    removed once installed; what it reads is bound now, as arguments' defaults, so changing
    this module's names later changes nothing, and setting a function's code or defaults,
    which would change the hook's, is refused too)."""

    def inside(
        path: Any,
        root: str = str(root),
        prefix: str = str(root) + os.sep,
        realpath: Any = os.path.realpath,
        null: str = os.devnull,
    ) -> bool:
        if isinstance(path, int):  # an open descriptor: already allowed when it was opened
            return True
        full = realpath(os.fsdecode(path))
        return full in (root, null) or full.startswith(prefix)

    def hook(
        event: str,
        args: tuple[Any, ...],
        refused: tuple[str, ...] = REFUSED,
        writes: tuple[str, ...] = WRITES,
        flags_written: int = WRITE_FLAGS,
        ours: tuple[int, ...] = (),
    ) -> None:
        if event.startswith(refused) or (event == "import" and args[0] == "ctypes"):
            raise PermissionError(f"not allowed while grading: {event}")
        if event == "object.__setattr__" and args[1] in FUNCTION_PARTS and id(args[0]) in ours:
            # this hook's code or defaults (found through the garbage collector)
            raise PermissionError(f"not allowed while grading: setting a function's {args[1]}")
        if event == "open" and args[0] is not None:
            mode, flags = args[1], args[2]
            writing = any(c in str(mode or "") for c in "wax+") or bool(flags & flags_written)
            if writing and not inside(args[0]):
                raise PermissionError(f"not allowed while grading: writing {args[0]}")
        elif event in writes and not all(inside(a) for a in args[:2] if isinstance(a, str)):
            raise PermissionError(f"not allowed while grading: {event} {args[0]}")

    assert hook.__defaults__ is not None
    hook.__defaults__ = (*hook.__defaults__[:-1], (id(hook), id(inside)))
    sys.addaudithook(hook)


#: characters of a student's exception's message kept (the rest would only be cut later)
MOST_MESSAGE = 2000


def _describe(error: BaseException) -> str:
    """The error and the student's lines of the traceback, shortest first; its message at
    most :data:`MOST_MESSAGE` characters, and none where turning it into text fails (its
    ``__str__`` raises: the student's code too)."""
    try:
        frames = [
            f for f in traceback.extract_tb(error.__traceback__) if "simsync" not in f.filename
        ]
        where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    except Exception:
        where = ""
    try:
        message = str(error)
    except Exception:
        message = "(its message could not be made into text)"
    if len(message) > MOST_MESSAGE:
        message = f"{message[:MOST_MESSAGE]}..."
    text = f"{type(error).__name__}: {message}".strip().rstrip(":")
    return f"{text}{where}"


# ## Stage 2: the graph, its simulation, TensorFlow and the answers; no student code


def _evaluate(
    request: dict[str, Any], submission: Path, scenario: Scenario, say: Callable[..., None]
) -> None:
    if request.get("answers"):
        say(**_product("answers", lambda: _answers(submission / "answers.toml")))
    if request.get("graph") is None and request.get("training") is None:
        return
    try:
        if request.get("training") is not None:
            scenario = _with_training(request["scenario"], submission / request["training"])
            from simsync.patterns import build

            graph = build(scenario)
        else:
            from simsync.kinds import check_graph

            # what every executor needs; the values are checked where they are computed
            graph = graph_from_dict(
                _graph_data(request["graph"]), check=lambda g: check_graph(g, values=False)
            )
        _reasonable(graph, scenario.run.steps)
    except SimsyncError as error:
        say(error=str(error))
        return
    say(structure=structure_of(graph, request.get("devices", []), request.get("before", [])))
    if request.get("facts"):
        numerics = bool(request.get("numerics", True))
        say(
            **_product(
                "facts", lambda: _facts(graph, scenario, request.get("target_loss"), numerics)
            )
        )
    if request.get("tensorflow_steps"):
        steps = int(request["tensorflow_steps"])
        say(**_product("params", lambda: _params(graph, scenario, steps)))


def structure_of(graph: Graph, devices: list[str], before: list[list[str]]) -> dict[str, Any]:
    """What the structure checks read off a graph: its sync points and towers, where each op
    (or variable) of ``devices`` runs (None: no such op), and for each pair of ``before``
    whether a path leads from the first op to the second (or which of them does not exist)."""
    import networkx as nx

    from simsync.kinds import sync_points

    def placed(name: str) -> dict[str, Any] | None:
        if name not in graph.nx:
            if name in graph.variables:
                return {"device": graph.variables[name].device, "participants": []}
            return None
        op = graph.op(name)
        return {"device": op.device, "participants": list(op.participants)}

    def path(first: str, second: str) -> dict[str, Any]:
        missing = next((n for n in (first, second) if n not in graph.nx), None)
        found = missing is None and nx.has_path(graph.nx, first, second)
        return {"before": first, "after": second, "missing": missing, "path": found}

    return {
        "sync_points": sync_points(graph),
        "towers": len(graph.towers),
        "devices": {name: placed(name) for name in devices},
        "before": [path(str(a), str(b)) for a, b in before],
        # where every variable lives: a misplaced one is named with the others like it
        "variables": {name: v.device for name, v in graph.variables.items()},
        "updates": updates_of(graph),
    }


def updates_of(graph: Graph) -> list[dict[str, Any]]:
    """Each op that writes a variable with data of a tower (an apply of the gradients), and
    the towers none of its data comes from: what it computes with, followed back along data
    edges only (an op that only waits for a tower, by a control dependency, takes nothing of
    it). Every variable counts, trainable or not (which variables a program's graph calls
    trainable is its process's word); one written with no tower's data (a global step's
    increment) is none of these.

    >>> from simsync.ir import Op, Variable
    >>> g = Graph()
    >>> g.add_variable(Variable("w", "/cpu:0"))
    >>> for i in (0, 1):
    ...     _ = g.add_op(Op(f"grad_{i}", "generic", "/cpu:0", tower=i))
    >>> _ = g.add_op(Op("apply", "generic", "/cpu:0", writes=("w",)))
    >>> g.connect("grad_0", "apply")
    >>> g.connect("grad_1", "apply", control=True)
    >>> updates_of(g)
    [{'op': 'apply', 'missing': [1]}]
    """
    towers = set(graph.towers)
    found = []
    for op in graph.ops():
        if not op.writes:
            continue
        seen, stack, reached = {op.name}, [op.name], set()
        while stack:
            for tensor in graph.inputs(stack.pop()):
                if not tensor.control and tensor.src not in seen:
                    seen.add(tensor.src)
                    stack.append(tensor.src)
                    tower = graph.op(tensor.src).tower
                    if tower is not None:
                        reached.add(tower)
        if reached:
            found.append({"op": op.name, "missing": sorted(towers - reached)})
    return found


def _graph_data(line: str) -> Any:
    """The graph of a build stage's answer line (text: the grader does not parse it)."""
    try:
        return json.loads(line)["graph"]
    except (ValueError, RecursionError, KeyError, TypeError):
        raise SimsyncError("the graph your code returned could not be read back") from None


def _product(name: str, make: Callable[[], Any]) -> dict[str, Any]:
    try:
        return {name: make()}
    except SimsyncError as error:
        return {f"{name}_error": str(error)}
    except Exception as error:  # whatever the student's graph does to the machinery
        return {f"{name}_error": f"{type(error).__name__}: {error}"}


def _with_training(scenario_text: str, path: Path) -> Scenario:
    """The assignment's scenario with the ``[training]`` table of the submitted file: the only
    table a submission sets (the cluster, the model and the run stay the assignment's), checked
    as any scenario is."""
    if not path.is_file():
        raise SimsyncError(f"{path.name}: {MISSING}")
    submitted = _toml(path, "training file")
    data = tomllib.loads(scenario_text)
    data["training"] = submitted.get("training", {})
    return scenario_from_dict(data, source=path.name)


def _answers(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise SimsyncError("answers.toml could not be read: the file is missing")
    return _toml(path, "answers file")


def _toml(path: Path, what: str) -> dict[str, Any]:
    """A file of the submission, named as the student named it (never by the sandbox's path)."""
    return read_toml(path, what, name=path.name)


def _reasonable(graph: Graph, steps: int) -> None:
    if len(graph) > MAX_OPS:
        raise SimsyncError(f"the graph has {len(graph)} ops; at most {MAX_OPS} are graded")
    for client in graph.clients:
        if client.steps is not None and client.steps > 10 * steps:
            raise SimsyncError(
                f"client '{client.name}' runs {client.steps} steps; at most {10 * steps}"
            )


def _facts(
    graph: Graph, scenario: Scenario, target_loss: float | None, numerics: bool = True
) -> dict[str, Any]:
    """The simulation's facts (``numerics`` off for an imported program: its ops are
    simulated for timing only)."""
    from simsync.simulation import simulate, training_clients
    from simsync.trace import loss_curve, time_to_loss
    from simsync.tutor.facts import simulation_facts

    sim = simulate(scenario, graph=graph, numerics=numerics)
    facts = simulation_facts(sim)
    if target_loss is not None:
        curve = loss_curve(sim.trace, max(1, len(training_clients(sim.graph))))
        facts["target_loss"] = target_loss
        facts["time_to_target"] = time_to_loss(curve, target_loss)
    return facts


def _params(graph: Graph, scenario: Scenario, steps: int) -> dict[str, Any]:
    from simsync.tf_backend import run_on_tensorflow

    run = run_on_tensorflow(scenario.with_run(steps=steps), warmup=0, timing_steps=0, graph=graph)
    return {graph.variable(n).model_parameter: value for n, value in run.params.items()}


def _plain(value: Any) -> Any:
    """numpy's numbers and arrays, tuples and dates as JSON has them."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, set | frozenset):
        return sorted(value)
    return str(value)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
