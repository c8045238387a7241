"""The sandboxed side of importing a program: run it (or read its MetaGraphDef) with
TensorFlow, and say what its training loop is, as JSON lines.

Run by :func:`simsync.tf_backend.program.load.capture_program` through the sandbox
(:func:`simsync.sandbox.bubblewrap.run_child`) as ``python -I -m
simsync.tf_backend.program.child REQUEST FOLDER WORK``: ``FOLDER`` holds a copy of the
program (and the ``.py`` files beside it), which is copied into ``WORK`` and run there. It
may start threads (TensorFlow does), never processes. Lines said, in order (their types:
:class:`~simsync.sandbox.wire.ProgramSaid`, which the parent checks whole):

``{"started": true}``, then either ``{"error": "one line"}`` or ``{"graph": DATA}`` (the
graph as plain data, see :mod:`simsync.tf_backend.program.convert`), ``{"machine": {...}}``
and ``{"profile": {...}}`` (absent when the request's salted ``known`` keys hold this graph's:
the parent has its costs cached), or, when the request asks to ``measure`` (a cross-check's
run), ``{"measured": {...}}`` instead
(:func:`~simsync.tf_backend.program.step_costs.measure_loop`), or, when it asks to ``replay``
a simulated order, ``{"values": {...}}``
(:func:`~simsync.tf_backend.program.replay.replay_loop`), or, when it asks to ``export``
(a graded program), only ``{"export": {...}}`` (:func:`export_loop`): a second process, which
runs none of the program's code, loads that export (``kind`` ``"meta"`` with the ``loop`` it
describes) and says the graph and its costs, sealed
(:mod:`simsync.sandbox.channel`). The request's ``args`` are the program's command line
(``sys.argv[1:]``); ``source`` is the hash of the program's files the parent keys its costs
by (:func:`~simsync.tf_backend.program.cost_cache.graph_key`).
"""

from __future__ import annotations

import base64
import errno
import functools
import io
import json
import os
import re
import runpy
import shutil
import sys
import traceback
import types
from pathlib import Path
from typing import Any

from simsync.sandbox.channel import answer_channel
from simsync.tf_backend.program.capture import (
    PUSHES,
    Call,
    Ended,
    Loop,
    Observer,
    left_out_updates,
    missing_workers,
    training_fetches,
    upstream,
)
from simsync.tf_backend.program.cost_cache import graph_key, is_known
from simsync.tf_backend.program.ops_data import made_in, op_data
from simsync.tf_backend.program.outside import reaches_outside

__all__ = ["export_loop", "graph_data", "main", "thread_names"]

#: characters of the program's own prints kept (the rest is dropped)
PRINTED = 2**20
#: an exported loop's runs (in the process that loads it) give up after this long: a queue
#: the program filled by hand before its loop is empty there
EXPORTED_RUN_TIMEOUT_MS = 60_000


class _NoDebugger:
    """What absl's debugger flags call instead of pdb in a program's process: its main, run
    as without them; no post-mortem (pdb would read ``.pdbrc`` commands, which the program
    can write: the thirty-fourth attack ran its own code so, past the source rules)."""

    @staticmethod
    def runcall(function: Any, *args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    @staticmethod
    def post_mortem(*args: Any, **kwargs: Any) -> None:
        return None


def _no_debugger() -> None:
    """absl's ``--run_with_pdb`` and ``--pdb_post_mortem`` (``--pdb``) reach no debugger,
    however the program builds its command line (:class:`_NoDebugger`)."""
    try:
        from absl import app
    except ImportError:  # no absl: no debugger flags either
        return
    app.pdb = _NoDebugger  # type: ignore[attr-defined]


def _give_devices(tf: Any, count: int, gpus: int) -> None:
    """``--devices``: TensorFlow's devices as the program will find them, ``count`` of them:
    logical CPUs without GPUs, else the first ``count`` GPUs, or the first split into
    ``count`` virtual ones where there are fewer. A program that sets its own logical devices
    before it starts TensorFlow sets them over these."""
    from simsync.tf_backend.session.gpus import VIRTUAL_GPU_MEMORY_MB

    if not gpus:
        cpu = tf.config.list_physical_devices("CPU")[0]
        logical = [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        tf.config.set_logical_device_configuration(cpu, logical)
        return
    physical = tf.config.list_physical_devices("GPU")
    if count <= len(physical):
        tf.config.set_visible_devices(physical[:count], "GPU")
        return
    tf.config.set_visible_devices(physical[:1], "GPU")
    memory = tf.config.LogicalDeviceConfiguration(memory_limit=VIRTUAL_GPU_MEMORY_MB)
    tf.config.set_logical_device_configuration(physical[0], [memory] * count)


def main(request_path: str, folder: str, work: str) -> int:
    request = json.loads(Path(request_path).read_text())
    say = answer_channel(bool(request.get("sealed")), started=request.get("started_fd"))
    sys.stdout = sys.stderr = _Capped(sys.stderr)  # the program's prints: the first MiB
    say(started=True)
    shutil.copytree(folder, work, dirs_exist_ok=True)
    os.chdir(work)
    program = Path(work, request["program"])
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # TensorFlow's own kernels, as the program's own `python` gets them: oneDNN's on an x86
    # CPU, whose Softmax rounds otherwise than the plain kernel (a graded program that
    # compared it exactly trained otherwise at home than measured here with oneDNN off)
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    _no_debugger()

    gpus = len(tf.config.list_physical_devices("GPU"))
    if request.get("devices"):  # --devices: before the program can take TensorFlow's
        _give_devices(tf, int(request["devices"]), gpus)
    _read_given(tf, request)

    task = request.get("task")
    if task is not None:  # who it is in its cluster, as TF_CONFIG says it to a program
        os.environ["TF_CONFIG"] = json.dumps(task["tf_config"])
    answered: list[bool] = []

    def on_loop(loop: Loop) -> None:
        if task is not None:  # a task of a cluster: its loop is timed when every one's is
            say(looping=True)
            sys.stdin.buffer.readline()
        try:
            _answer(tf, request, loop, gpus, say, str(program.resolve().parent))
        except Ended as ended:  # said in a line of its own
            say(error=str(ended))
        except BaseException as error:
            say(error=f"could not read the training loop: {_cause(error)}")
        if task is None:
            os._exit(0)
        # a task of a cluster trains on, as written: the other workers may wait for its
        # gradients, until every one has answered and the parent ends them all (what
        # goes wrong then, as its servers end, is not its answer's)
        say(answered=True)
        answered.append(True)

    exported = request["kind"] == "meta" and request.get("loop") is not None
    timeout = EXPORTED_RUN_TIMEOUT_MS if exported else 0
    observer = Observer(tf, gpus, on_loop, timeout_ms=timeout, cluster=task is not None)
    observer.install()
    functions = None
    if request["kind"] != "meta":  # a tf.function step in a Python loop
        from simsync.tf_backend.program.functions import FunctionObserver

        def on_function_loop(loop: Any) -> None:
            if task is not None:  # a task of a cluster: its loop is timed when every one's is
                say(looping=True)
                sys.stdin.buffer.readline()
            try:
                _answer_function(tf, request, loop, gpus, say, task)
            except Ended as ended:
                say(error=str(ended))
            except tf.errors.OutOfRangeError as error:  # its step's iterator came to its end
                say(error=f"could not time its training step: {_cause(error)}: {RAN_OUT}")
            except BaseException as error:
                say(error=f"could not read the training loop: {_cause(error)}")
            if task is None:
                os._exit(0)
            # a worker of a cluster trains on, as written: the others' steps meet its own at
            # their all-reduces, until every one has answered and the parent ends them all
            say(answered=True)
            answered.append(True)

        functions = FunctionObserver(tf, on_function_loop)
        functions.install()

    def no_loop() -> str:
        said = functions.why_no_loop() if functions is not None and not observer.calls else None
        return said or observer.why_no_loop(eager=tf.executing_eagerly())

    def failed(message: str) -> None:
        if not answered:  # after its answer, a task of a cluster ends as its servers do
            say(error=message)

    try:
        if request["kind"] == "meta":
            _meta(tf, program, observer, request)
        else:
            sys.argv = [str(program), *request.get("args", [])]
            if request.get("export"):  # graded: the file the grader read, which nothing
                # writes over (a tf.function is converted from its file's lines, read again)
                program = Path(folder, request["program"])
                sys.argv[0] = str(program)
            else:  # its modules beside it (a graded program's are refused before it runs)
                sys.path.insert(0, work)
            names = runpy.run_path(str(program), run_name="__main__")
            if not observer.calls and not _uses_tensorflow(names):
                raise Ended(
                    "ran to its end without TensorFlow (none of its names is TensorFlow or "
                    "Keras): simsync imports TensorFlow 1.x-style programs (tf.compat.v1: "
                    "build a graph, then call sess.run(train_op) in a loop)"
                )
        failed(no_loop())
    except Ended as ended:
        failed(str(ended))
    except SystemExit as stop:
        if stop.code not in (None, 0):
            failed(f"exited with status {stop.code} before its training loop")
        else:
            failed(no_loop())
    except SyntaxError as error:
        where = f"{Path(error.filename or program).name}:{error.lineno}: " if error.lineno else ""
        failed(f"{where}SyntaxError: {error.msg}")  # no line: null bytes, said of the file
    except BaseException as error:
        failed(_described(error, program))
    os._exit(0)


def _uses_tensorflow(names: dict[str, Any]) -> bool:
    """Whether a program's names (its module's, as it ended) hold TensorFlow or Keras: a
    module of theirs, or an object made by one."""
    for value in names.values():
        module = value.__name__ if isinstance(value, types.ModuleType) else None
        module = module or getattr(type(value), "__module__", "") or ""
        if str(module).startswith(("tensorflow", "keras", "tf_keras")):
            return True
    return False


class _Capped(io.TextIOBase):
    """The program's standard output and error: the first :data:`PRINTED` characters go to
    standard error (the parent reads only its end), the rest nowhere. A program that prints
    a gigabyte would otherwise stop at the file size limit."""

    def __init__(self, stream: Any) -> None:
        self.stream, self.left = stream, PRINTED

    def write(self, text: str) -> int:
        if self.left > 0:
            self.stream.write(text[: self.left])
            self.left -= len(text)
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


def _described(error: BaseException, program: Path) -> str:
    """``train.py:12: ValueError: message``: the program's own line nearest the error."""
    if isinstance(error, OSError) and error.errno == errno.EFBIG:
        return (
            "wrote a file larger than the sandbox allows (its output goes to standard error, "
            "of which the first MiB is kept: write less)"
        )
    frames = traceback.extract_tb(error.__traceback__)
    inside = [f for f in frames if Path(f.filename).parent == program.parent]
    where = f"{Path(inside[-1].filename).name}:{inside[-1].lineno}: " if inside else ""
    return f"{where}{_cause(error)}"


#: lines of TensorFlow's message for an op's error that say where, not what
_WHERE_LINES = re.compile(
    r"^(Graph execution error|Detected at node|Node:|File |\[\[|\d+ root error|"
    r"\d+ successful operations|\d+ derived errors|Errors may have originated)"
)


#: why a tf.function step's input ran out while it was timed, and what to do
RAN_OUT = (
    "its input ran out while simsync timed the step, which it calls again with the same "
    "iterator (some hundreds of times, a second's worth at least): give the step a dataset "
    "that repeats (`dataset.repeat()`, with `steps_per_epoch` for Keras fit()), or more "
    "batches per epoch"
)


def _cause(error: BaseException) -> str:
    """``NotFoundError at 'RestoreV2': what went wrong``: one line of at most 300 characters;
    of TensorFlow's error for an op, its first cause and the op, not the lines that say
    where each root error was detected.

    >>> class NotFoundError(Exception): pass
    >>> _cause(NotFoundError("Graph execution error:\\n\\nDetected at node 'RestoreV2' "
    ...     "defined at (most recent call last):\\nNode: 'RestoreV2'\\n2 root error(s) found.\\n"
    ...     "  (0) NOT_FOUND: Failed to find any matching files for /tmp/m\\n"
    ...     "\\t [[{{node RestoreV2}}]]\\n  (1) NOT_FOUND: Failed"))
    "NotFoundError at 'RestoreV2': Failed to find any matching files for /tmp/m"
    >>> _cause(ValueError("a\\n b")), _cause(NotImplementedError())
    ('ValueError: a b', 'NotImplementedError')
    """
    text = str(error)
    node = re.search(r"\{\{node ([^}]+)\}\}|^Node: '([^']+)'", text, re.MULTILINE)
    lines = [line.strip() for line in text.splitlines()]
    causes = [
        re.sub(r"^\(\d+\) [A-Z_]+: ", "", line)
        for line in lines
        if line and not _WHERE_LINES.match(line)
    ]
    if node is None or not causes:
        said = " ".join(text.split())[:300]
        return f"{type(error).__name__}: {said}" if said else type(error).__name__
    where = node.group(1) or node.group(2)
    return f"{type(error).__name__} at '{where}': {' '.join(causes[0].split())[:300]}"


def _meta(tf: Any, path: Path, observer: Any, request: dict[str, Any]) -> None:
    """A MetaGraphDef: import it, run its initialisers and queue runners, and hand the loop
    of the request's ``loop`` (an exported program's: each thread's fetches and feeds, fed
    zeros of the shapes it fed) or of its ``train_op`` collection. No user code runs."""

    source: Any = str(path)  # a file, binary or text (.pbtxt), as TensorFlow reads it
    if request.get("loop") is not None:  # a graded program's export: before any op runs
        source = tf.compat.v1.MetaGraphDef()
        try:
            source.ParseFromString(path.read_bytes())
        except Exception as error:
            raise Ended(f"is not a MetaGraphDef TensorFlow can read: {error}") from None
        outside = reaches_outside(source.graph_def)
        if outside is not None:
            raise Ended(outside)
    graph = tf.Graph()
    with graph.as_default():
        try:
            tf.compat.v1.train.import_meta_graph(source, clear_devices=False)
        except Exception as error:
            raise Ended(f"is not a MetaGraphDef TensorFlow can read: {error}") from None
        calls = _exported_calls(graph, request["loop"]) if request.get("loop") else None
        train = graph.get_collection(tf.compat.v1.GraphKeys.TRAIN_OP)
        if calls is None and not train:
            raise Ended(
                "names no train op: before tf.compat.v1.train.export_meta_graph, add it with "
                "tf.compat.v1.add_to_collection(tf.compat.v1.GraphKeys.TRAIN_OP, train_op)"
            )
        session = _initialised(tf, graph, observer)
        tf.compat.v1.train.start_queue_runners(sess=session)
        if any(op.type in PUSHES for op in graph.get_operations()):
            raise Ended(
                "pushes gradients to accumulators (SyncReplicasOptimizer): a MetaGraphDef "
                "does not say how its workers and its chief run; import the program itself"
            )
        if calls is None:
            fetches = [op.name for op in train]
            calls = {"MainThread": Call("MainThread", tuple(fetches), fetches)}
        observer.looping.update(calls)  # their runs from here on are the profile's
        runners = observer.all_runners(graph)
        observer.on_loop(Loop(session, graph, dict(calls), 0, observer, runners))


def _given(tf: Any, averaging: Any, observer: Any) -> Loop | None:
    """The loop of the given model (``averaging["given"]``: the reference solution's export,
    its MetaGraphDef as :func:`_read_given` read it before the graded graph was loaded, and
    its loop), its variables initialised, or None when there is none to compare with
    (:func:`~simsync.tf_backend.program.averaging.probe_averaging`)."""
    given = averaging.get("given") if isinstance(averaging, dict) else None
    if given is None:
        return None
    if isinstance(given.get("meta"), str):  # not read: why
        raise Ended(f"the given model's graph cannot be read: {given['meta']}")
    graph = tf.Graph()
    with graph.as_default():
        try:
            tf.compat.v1.train.import_meta_graph(given["meta"], clear_devices=False)
        except Exception as error:
            raise Ended(f"the given model's graph cannot be read: {error}") from None
        calls = _exported_calls(graph, {"clients": given["clients"]})
        session = _initialised(tf, graph, observer)
    return Loop(session, graph, calls, 0, observer, [])


def _read_given(tf: Any, request: dict[str, Any]) -> None:
    """The given model's MetaGraphDef read into the request's ``averaging["given"]`` before
    anything of the graded graph runs, in place of its file's name: what the graph's ops
    could reach is never read again (they may reach no file: :mod:`~simsync.tf_backend.
    program.outside`)."""
    averaging = request.get("averaging")
    given = averaging.get("given") if isinstance(averaging, dict) else None
    if not isinstance(given, dict) or not isinstance(given.get("meta"), str):
        return
    meta = tf.compat.v1.MetaGraphDef()
    try:
        meta.ParseFromString(Path(given["meta"]).read_bytes())
    except Exception as error:  # said when the given model is asked for
        given["meta"] = f"{given['meta']}: {type(error).__name__}"
        return
    given["meta"] = meta


def _initialised(tf: Any, graph: Any, observer: Any) -> Any:
    """A session of ``graph`` (the default graph), its ops placed on this machine's devices
    and its variables initialised."""
    init = [
        tf.compat.v1.global_variables_initializer(),
        tf.compat.v1.local_variables_initializer(),
    ]
    session = tf.compat.v1.Session(graph=graph)
    observer.place(graph)
    observer.real_run(session, init)
    return session


def _exported_calls(graph: Any, loop: dict[str, Any]) -> dict[str, Call]:
    """The calls of an exported loop (:func:`export_loop`). Each runs only the fetches that
    train (:func:`~simsync.tf_backend.program.capture.training_fetches`): what else the loop
    fetched (a loss to print) was the program's process's word, and is left out of what is
    timed; and the first also runs every update of a trainable variable that no thread's
    fetches run (:func:`~simsync.tf_backend.program.capture.left_out_updates`): leaving its
    slow training out of the list would time a lighter step. A thread whose step runs a
    part of another's only is left out: which threads loop is that process's word too, and
    a light one said beside the real loop would shorten the mean step. It feeds
    placeholders, each zeros of its own static shape and type, read off the graph: the ones
    it said it fed,
    and those the updates it left out need. How large they are would be that process's word
    too (feeding a concat's input prunes what made it; a batch of 0 costs nothing), so a
    placeholder of a dimension not fixed cannot be timed and is said so."""
    calls = {}
    every: list[list[str]] = []
    for client in loop["clients"]:
        try:
            fetches = [graph.get_operation_by_name(name).name for name in client["fetches"]]
            fetches = training_fetches(graph, fetches)
            if not fetches:
                raise Ended(f"the loop of thread {client['thread']!r} it exported trains nothing")
            feeds = [graph.get_tensor_by_name(name) for name in client["feeds"]]
        except (KeyError, ValueError, TypeError) as error:
            raise Ended(f"its exported loop does not fit its graph: {error}") from None
        every.append(fetches)
        calls[client["thread"]] = (fetches, feeds)
    runs = {
        thread: {op.name for op in upstream([graph.get_operation_by_name(n) for n in fetches])}
        for thread, (fetches, _) in calls.items()
    }
    for thread, ran in runs.items():  # a lighter loop said beside the one that trains
        if any(ran < other for other in runs.values()):
            del calls[thread]
    first = next(iter(calls), None)
    if first is not None:
        fetches, feeds = calls[first]
        added = left_out_updates(graph, every)
        ops = [graph.get_operation_by_name(name) for name in added]
        needed = [op.outputs[0] for op in upstream(ops) if op.type == "Placeholder"]
        fed = {t.name for t in feeds}  # by name: a tensor's == makes an op
        calls[first] = ([*fetches, *added], [*feeds, *(t for t in needed if t.name not in fed)])
    return {
        thread: Call(thread, tuple(fetches), fetches, _zeros(feeds) or None)
        for thread, (fetches, feeds) in calls.items()
    }


def _zeros(tensors: list[Any]) -> dict[Any, Any]:
    """Zeros to feed each placeholder of ``tensors``, of its static shape and type."""
    import numpy as np

    feeds = {}
    for tensor in tensors:
        if tensor.op.type != "Placeholder":
            raise Ended(f"its exported loop feeds {tensor.name}, which is no placeholder")
        dims = tensor.shape.as_list() if tensor.shape.rank is not None else None
        if dims is None or None in dims:
            raise Ended(
                f"it feeds the placeholder {tensor.op.name} of shape {dims}: a graded "
                "program's placeholders need every dimension fixed (its batch too), "
                "as what it feeds cannot be taken on its word"
            )
        feeds[tensor] = np.zeros(dims, dtype=tensor.dtype.as_numpy_dtype)
    return feeds


def export_loop(tf: Any, loop: Loop, folder: str) -> dict[str, Any]:
    """The loop for a second process that runs none of the program's code: its graph as a
    MetaGraphDef (base64; with the queue runners the program started itself), each looping
    thread's fetches and the shapes and types of what it fed, and where the program made
    each op of a file in ``folder`` (:func:`~simsync.tf_backend.program.ops_data.made_in`;
    the parent checks it against the source)."""
    import numpy as np

    graph = loop.graph
    runners = graph.get_collection_ref(tf.compat.v1.GraphKeys.QUEUE_RUNNERS)
    runners.extend(r for r in loop.runners if all(r is not known for known in runners))
    meta = tf.compat.v1.train.export_meta_graph(graph=graph, clear_devices=False)
    clients = []
    for thread, call in loop.calls.items():
        feeds = {}
        for key, value in (call.feed_dict or {}).items():
            element = graph.as_graph_element(key)
            array = np.asarray(value)
            if array.dtype.kind not in "biuf":
                raise Ended(f"feeds {element.name} {array.dtype} values: only numbers are graded")
            feeds[element.name] = {"shape": list(array.shape), "dtype": array.dtype.name}
        clients.append({"thread": thread, "fetches": list(call.fetches), "feeds": feeds})
    places = {op.name: made_in(op, folder) for op in graph.get_operations()}
    return {
        "meta": base64.b64encode(meta.SerializeToString()).decode(),
        "clients": clients,
        "made_in": {name: where for name, where in places.items() if where is not None},
    }


def _machine(tf: Any, gpus: int) -> dict[str, Any]:
    """The machine the costs are measured on."""
    from simsync.tf_backend.profile.machine import processor

    return {
        "tensorflow": tf.__version__,
        "devices": f"{gpus} GPU(s)" if gpus else "logical CPU devices",
        "processor": processor(),
        "cores": os.cpu_count() or 1,
        # what a profile holds: 2 since its step time is timed in a block of untraced steps,
        # 3 since it times the work of the queue runners' enqueues, 6 since it splits a
        # sess.run's own cost into the GIL's part, CPU and waiting
        "profile_form": 6,
    }


def _answer(tf: Any, request: dict[str, Any], loop: Any, gpus: int, say: Any, folder: str) -> None:
    """Answer the ``request`` of the program (in ``folder``) whose ``loop`` is known."""
    from simsync.tf_backend.program.step_costs import profile_loop

    missing = missing_workers(loop)
    if missing:
        raise Ended(missing)
    tasks = _tasks_in_threads(loop)
    if tasks is not None:  # a cluster in one process: each worker's thread, its own graph
        _answer_tasks(tf, request, tasks, gpus, say)
        return
    if request.get("export"):
        say(export=export_loop(tf, loop, folder))
        return
    data = graph_data(tf, loop, request["program"], gpus)
    machine = _machine(tf, gpus)
    say(graph=data)
    say(machine=machine)
    measure = request.get("measure")
    if request.get("replay"):
        from simsync.tf_backend.program.replay import replay_loop

        try:
            values = replay_loop(tf, loop, request["replay"])
        except Exception as error:
            say(error=f"could not replay its values: {type(error).__name__}: {error}")
            return
        say(values=values)
    elif measure:
        from simsync.tf_backend.program.step_costs import measure_loop

        say(measured=measure_loop(tf, loop, int(measure["traced"]), int(measure["untraced"])))
    elif request.get("profile", True) and not _known(request, data, machine):
        say(profile=profile_loop(tf, loop, int(request.get("steps", 5))))
    if request.get("averaging"):  # a graded loop: how its updates weigh its towers
        from simsync.tf_backend.program.averaging import probe_averaging

        try:
            say(averaging=probe_averaging(loop, _given(tf, request["averaging"], loop.observer)))
        except Ended as ended:
            say(averaging={"towers": 0, "updates": [], "problem": str(ended)[:2000]})
        except Exception as error:  # one line: TensorFlow's own cause and op, no traceback
            problem = f"its towers' weights could not be measured: {_cause(error)}"
            say(averaging={"towers": 0, "updates": [], "problem": problem[:2000]})


def _answer_function(
    tf: Any, request: dict[str, Any], loop: Any, gpus: int, say: Any, task: Any = None
) -> None:
    """Answer the ``request`` of a TensorFlow 2 program whose loop calls a ``tf.function``
    step (:mod:`~simsync.tf_backend.program.functions`): its graph and machine, then its
    profile (:mod:`~simsync.tf_backend.program.function_costs`) or a cross-check's
    measure. Grading (an export) and values (a replay) are refused in one line. A ``task``
    of a cluster is always profiled, its steps traced only where it is the first
    (:func:`~simsync.tf_backend.program.cluster.traces`): its steps meet the other tasks'
    at their all-reduces, so every task calls its step alike (one that skipped its
    profile, its costs known, would leave the others' profiles to its own loop's pace)."""
    from simsync.tf_backend.program.cluster import join, traces
    from simsync.tf_backend.program.function_costs import measure_function, profile_function
    from simsync.tf_backend.program.functions import function_graph_data, scheduled_on

    trace = task is None or traces(task["tf_config"])

    if request.get("export"):
        raise Ended(
            "trains with a tf.function step (TensorFlow 2): a graded program is TensorFlow "
            "1.x-style for now (a graph, then sess.run(train_op) in a loop)"
        )
    if request.get("replay"):
        raise Ended(
            "trains with a tf.function step (TensorFlow 2): its values are not replayed yet"
        )
    data = function_graph_data(tf, loop, request["program"], gpus)
    machine = _machine(tf, gpus)
    workers = loop.workers()
    measure = request.get("measure")
    if workers:  # a ParameterServerStrategy's: each worker a client, its step its own
        answers = scheduled_on(workers, data, machine)
        if measure:  # each step traced alone (the first worker's, as named), then together
            found = measure_function(
                tf, loop, data, int(measure["traced"]), int(measure["untraced"])
            )
            (client,) = found["clients"].values()
            for k, answer in enumerate(answers):
                alone = {**client, "steps": client["steps"] if k == 0 else []}
                answer["measured"] = {"clients": {loop.thread: alone}}
            said = join(answers, request["program"])
            say(graph=said["graph"])
            say(machine=machine)
            say(measured={**said["measured"], "rounds": found.get("rounds", [])})
            return
        said = join(answers, request["program"])
        say(graph=said["graph"])
        say(machine=machine)
        if request.get("profile", True) and not _known(request, said["graph"], machine):
            profile = profile_function(tf, loop, data, int(request.get("steps", 5)))
            said = join(scheduled_on(workers, data, machine, profile), request["program"])
            say(profile=said["profile"])
        return
    say(graph=data)
    say(machine=machine)
    if measure:
        traced, untraced = int(measure["traced"]), int(measure["untraced"])
        say(measured=measure_function(tf, loop, data, traced, untraced, trace))
    elif request.get("profile", True) and (task or not _known(request, data, machine)):
        say(profile=profile_function(tf, loop, data, int(request.get("steps", 5)), trace))


def _tasks_in_threads(loop: Loop) -> list[Loop] | None:
    """A loop whose threads run in sessions of graphs of their own (a cluster of one
    process, a worker per thread) as one loop per thread, in the order of their threads'
    names; None when every thread runs in the loop's graph."""
    if all(
        call.session is None or call.session.graph is loop.graph for call in loop.calls.values()
    ):
        return None
    return [
        Loop(
            call.session,
            call.session.graph,
            {thread: call},
            loop.runs_before,
            loop.observer,
            loop.observer.all_runners(call.session.graph),
        )
        for thread, call in sorted(loop.calls.items())
    ]


def _answer_tasks(tf: Any, request: dict[str, Any], tasks: list[Loop], gpus: int, say: Any) -> None:
    """The answer of a cluster in one process: each worker's loop (:func:`_tasks_in_threads`)
    profiled, or measured, at once with the others, each on a thread of its own, and their
    graphs joined as a cluster's tasks' are
    (:func:`~simsync.tf_backend.program.cluster.join`)."""
    from simsync.tf_backend.program.cluster import join
    from simsync.tf_backend.program.step_costs import all_at_once, measure_loop, profile_loop

    if request.get("export") or request.get("replay"):
        raise Ended(
            "runs a cluster in one process (a graph per worker's thread): it is simulated "
            "and cross-checked, not graded nor replayed"
        )
    if any(op.type in PUSHES for task in tasks for op in task.graph.get_operations()):
        raise Ended(
            "runs SyncReplicasOptimizer's workers as threads of one process, each with a "
            "graph of its own: not imported yet; run each task as a process of its own "
            "with --tasks (docs/importing.md)"
        )
    machine = _machine(tf, gpus)
    measure = request.get("measure")
    answers: list[dict[str, Any]] = [{} for _ in tasks]

    def one(index: int, task: Loop) -> None:
        answer: dict[str, Any] = {"machine": machine}
        answer["graph"] = graph_data(tf, task, request["program"], gpus)
        if measure:
            found = measure_loop(tf, task, int(measure["traced"]), int(measure["untraced"]))
            answer["measured"] = found
        else:
            answer["profile"] = profile_loop(tf, task, int(request.get("steps", 5)))
        answers[index] = answer

    all_at_once([functools.partial(one, i, task) for i, task in enumerate(tasks)])
    joined = join(answers, request["program"])
    for key in ("graph", "machine", "profile", "measured"):
        if key in joined:
            say(**{key: joined[key]})


def _known(request: dict[str, Any], data: dict[str, Any], machine: dict[str, Any]) -> bool:
    """Whether the parent has the costs of this graph (its salted keys say so)."""
    key = graph_key(request["source"], data, machine)
    known = request.get("known") or {}
    return is_known(key, bytes.fromhex(known.get("salt", "")), list(known.get("keys", ())))


def thread_names(fetches: dict[str, tuple[str, ...]], order: list[str]) -> dict[str, str]:
    """The client name of each looping thread (by its fetches), in the order the clients
    go: the threads in the order their fetches were made in the graph (``order``), not the
    order they reached their loop, which is a race. So the same program gives the same
    clients, names and graph key every time. One thread is ``main``.

    >>> thread_names({"Thread-2": ("train_1",), "Thread-1": ("train",)}, ["train", "train_1"])
    {'Thread-1': 'thread_0', 'Thread-2': 'thread_1'}
    >>> thread_names({"MainThread": ("train",)}, ["train"])
    {'MainThread': 'main'}
    """
    made = {name: index for index, name in enumerate(order)}
    threads = sorted(
        fetches, key=lambda thread: (min(made.get(f, len(made)) for f in fetches[thread]), thread)
    )
    if len(threads) == 1:
        return dict.fromkeys(threads, "main")
    return {
        thread: "main" if thread == "MainThread" else f"thread_{index}"
        for index, thread in enumerate(threads)
    }


def fed_shapes(graph: Any, feed_dict: Any) -> dict[str, list[int]]:
    """The shape of each tensor a ``sess.run`` feeds (``{"x:0": [100, 784]}``): a fed
    placeholder runs no op, so no traced step says how large it was."""
    import numpy as np

    shapes = {}
    for key, value in (feed_dict or {}).items():
        try:
            element = graph.as_graph_element(key)
            shape = np.shape(value)
        except (TypeError, ValueError, KeyError):
            continue  # not a tensor and an array: TensorFlow refused that run already
        if hasattr(element, "op"):
            shapes[element.name] = [int(d) for d in shape]
    return shapes


def graph_data(tf: Any, loop: Any, program: str, gpus: int) -> dict[str, Any]:
    """The loop's graph as plain data (the input of
    :func:`~simsync.tf_backend.program.convert.convert`)."""
    graph = loop.graph
    folder = str(Path(program).resolve().parent)
    ops = [op_data(op, folder) for op in graph.get_operations()]
    fetches = {thread: tuple(call.fetches) for thread, call in loop.calls.items()}
    names = thread_names(fetches, [op["name"] for op in ops])
    keys = tf.compat.v1.GraphKeys
    runners = loop.runners
    return {
        "program": program,
        "order": [op["name"] for op in ops],
        "ops": ops,
        "clients": [
            {
                "thread": thread,
                "name": name,
                "fetches": list(fetches[thread]),
                "feeds": fed_shapes(graph, loop.calls[thread].feed_dict),
            }
            for thread, name in names.items()
        ],
        "trainable": [v.op.name for v in graph.get_collection(keys.TRAINABLE_VARIABLES)],
        "queue_runners": [
            {
                "queue": runner.queue.name,
                "threads": len(runner.enqueue_ops),
                "enqueue": sorted({op.name for op in runner.enqueue_ops}),
                # one thread per enqueue op listed (the same op twice: two threads)
                "enqueue_ops": [op.name for op in runner.enqueue_ops],
            }
            for runner in runners
        ],
        "queue_sizes": queue_sizes(tf, loop),
        "collections": {
            "update_ops": [op.name for op in graph.get_collection(keys.UPDATE_OPS)],
            "train_op": [_name(item) for item in graph.get_collection(keys.TRAIN_OP)],
            "global_step": [_name(item) for item in graph.get_collection(keys.GLOBAL_STEP)],
        },
        "logical_devices": gpus == 0,
        "cores": os.cpu_count() or 1,
        "runs_before_loop": loop.runs_before,
    }


def queue_sizes(tf: Any, loop: Any) -> dict[str, int]:
    """How many elements each FIFO queue of the loop's graph holds as the loop starts: what
    the program (and its queue runners, until now) put in before its training loop."""
    from simsync.tf_backend.program.step_costs import queue_size_ops

    sizes = queue_size_ops(tf, loop.graph)
    held = loop.session.run(list(sizes.values())) if sizes else []
    return {name: int(size) for name, size in zip(sizes, held, strict=True)}


def _name(item: Any) -> str:
    return str(getattr(item, "name", item)).split(":")[0]


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
