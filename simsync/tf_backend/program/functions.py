"""A TensorFlow 2 program's training step: a ``tf.function`` called eagerly in a Python loop
(in the sandbox's child: :mod:`simsync.tf_backend.program.child`).

What is observed, by wrapping ``tf.function``'s ``Function.__call__`` (research/tf2.md §1):

1. **Its graphs are recorded**: at the first eager call of any ``tf.function``, before it
   runs, TensorFlow's run metadata is turned on
   (``context.context().enable_run_metadata()``): each function instantiated from then on
   leaves its graphs, ``pre_optimization_graph``, ``post_optimization_graph`` (nested
   functions inlined by TensorFlow's own inlining, Grappler applied: what runs) and one
   ``partition_graph`` per device (where each node runs). Turned on later, a function
   already instantiated leaves none; turned on before the program, it would initialise
   TensorFlow's devices before the program configures its logical CPUs.
2. **The loop is found** when a thread calls the same ``tf.function`` eagerly a second time
   and its concrete function (for those arguments) writes a trainable variable. That thread's
   loop is the one client; the call's arguments are its step's, run again by the profile.
3. **The step's graph** is chosen among the recorded ones: those whose arguments (``_Arg``
   nodes) are the concrete function's inputs (by index; an input it does not use is pruned)
   and that hold an op that writes a variable;
   the largest of them (a ``FunctionGraphs`` entry carries no function's name; the small
   ones are datasets', initialisers' and other functions'). Each node's device is its
   partition graph's.
4. It becomes the graph data :mod:`~simsync.tf_backend.program.convert` reads for a TF1
   program (:func:`function_graph_data`): the post-optimization graph, imported into a
   ``tf.Graph`` of its own for its tensors' shapes and types, each argument that carries a
   variable's handle a ``VarHandleOp`` named after the variable (``hidden/weights``), each
   other argument an ``_Arg``, each result a ``_Retval``; the client fetches what the
   function returns (the ops its ``_Retval`` nodes take) and every op no other op takes.

Keras' ``fit()`` is such a loop (its ``multi_step_on_iterator`` is the ``tf.function`` called
each step, the iterator its argument). Under a ``MirroredStrategy`` each replica's ops run on
its own device, and each replica's collective op of one all-reduce takes every replica's
data (:func:`_collective_groups`). Under a ``ParameterServerStrategy`` the program schedules
its step on a ``ClusterCoordinator``, whose threads run it on the workers
(:meth:`FunctionObserver.scheduled`): each worker is a client of its own, and the step's
graph is the one TensorFlow traced (:func:`traced_graphs`; it records no run metadata of a
function run on another task). A ``MultiWorkerMirroredStrategy``'s workers are processes
of their own, run as their cluster (:mod:`~simsync.tf_backend.program.cluster`): each one's
step is imported here, its ops on its task, each collective carrying its key, which the
workers' ops of one all-reduce share. A program that makes another ``tf.distribute``
strategy is refused in one line (:class:`~simsync.tf_backend.program.capture.Ended`), as is
a ``MultiWorkerMirroredStrategy`` outside a cluster.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simsync.tf_backend.program.capture import (
    FUNCTION_CALLS,
    WRITE_WORDS,
    Ended,
    calls_write,
    is_handle,
)
from simsync.tf_backend.program.collectives import COLLECTIVES, NCCL, join_collectives

__all__ = [
    "ARGUMENT",
    "RESULT",
    "FunctionLoop",
    "FunctionObserver",
    "function_graph_data",
    "step_device",
]

#: the nodes of a function's graph that take its arguments and give its results
ARGUMENT, RESULT = "_Arg", "_Retval"
#: the tf.distribute strategies whose programs are imported: a ``MirroredStrategy``'s
#: replicas are towers, a ``ParameterServerStrategy``'s workers asynchronous clients
IMPORTED_STRATEGIES = frozenset(
    {"MirroredStrategy", "ParameterServerStrategyV2", "CollectiveAllReduceStrategy"}
)
#: ... each by the name a program makes it by
STRATEGY_NAMES = {
    "ParameterServerStrategyV2": "ParameterServerStrategy",
    "CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",
}
#: the strategy whose workers are processes of their own, each told its place by TF_CONFIG
MULTI_WORKER = "CollectiveAllReduceStrategy"
#: what a supported program is, said in every refusal
SUPPORTED = (
    "simsync imports a tf.function training step called in a Python loop (its towers "
    "placed with tf.device inside it, or a MirroredStrategy's replicas; Keras fit() too; "
    "a MultiWorkerMirroredStrategy's workers run as its cluster with --tasks) or "
    "scheduled by a ParameterServerStrategy's ClusterCoordinator, and "
    "TensorFlow 1.x-style programs (sess.run in a loop)"
)


@dataclass
class FunctionLoop:
    """The training loop of a TensorFlow 2 program: the ``tf.function`` its thread calls,
    the arguments of its last call, and its step's graph (see the module's docstring)."""

    function: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    thread: str
    concrete: Any
    #: the chosen ``FunctionGraphs`` entry of the run metadata
    recorded: Any
    #: eager calls of tf.functions before the loop was known
    calls_before: int
    #: a ``ParameterServerStrategy``'s ``ClusterCoordinator`` that schedules the step on its
    #: workers (None: the loop's thread calls it)
    coordinator: Any = None

    def call(self) -> Any:
        """One step, as the program's loop makes it: for a coordinator's, one step scheduled
        on whichever worker is free, and its result waited for."""
        if self.coordinator is not None:
            scheduled = self.coordinator.schedule(self.function, args=self.args, kwargs=self.kwargs)
            return scheduled.fetch()
        return self.function(*self.args, **self.kwargs)

    def workers(self) -> list[str]:
        """The devices of the workers that run the step: each a client of its own (none
        when the loop's own thread calls it)."""
        if self.coordinator is None:
            return []
        return [str(worker.device_name) for worker in self.coordinator._cluster.workers]


@dataclass
class FunctionObserver:
    """Wraps ``Function.__call__`` while the program runs; see the module's docstring."""

    tf: Any
    on_loop: Callable[[FunctionLoop], None]
    calls: Counter[tuple[str, int]] = field(default_factory=Counter)
    eager_calls: int = 0
    recorded: list[Any] = field(default_factory=list)
    recording: bool = False
    handed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self) -> None:
        from tensorflow.python.distribute import distribute_lib
        from tensorflow.python.eager.polymorphic_function import polymorphic_function

        function_class = polymorphic_function.Function
        real_call = function_class.__call__
        strategy_class = distribute_lib.StrategyBase
        real_strategy = strategy_class.__init__
        observer = self

        def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
            if not observer.handed and observer.tf.executing_eagerly():
                observer.called(self, args, kwargs)
            return real_call(self, *args, **kwargs)

        def strategy_init(self: Any, *args: Any, **kwargs: Any) -> None:
            name = type(self).__name__
            if not name.startswith("_Default") and name not in IMPORTED_STRATEGIES:
                raise Ended(
                    f"makes a tf.distribute.{STRATEGY_NAMES.get(name, name)}: this strategy "
                    f"is not imported yet; {SUPPORTED}"
                )
            if name == MULTI_WORKER and not _own_task():
                raise Ended(
                    "makes a tf.distribute.MultiWorkerMirroredStrategy outside a cluster (no "
                    "TF_CONFIG): run it as its cluster, one process per worker, with --tasks "
                    "worker=2 (or more workers)"
                )
            real_strategy(self, *args, **kwargs)

        function_class.__call__ = __call__
        strategy_class.__init__ = strategy_init
        self._install_coordinator()

    def _install_coordinator(self) -> None:
        """Wrap ``ClusterCoordinator.schedule``: a ``ParameterServerStrategy``'s step is not
        called by the program's thread but scheduled, each call run by a thread of the
        coordinator's on a worker (research/tf2.md §3)."""
        from tensorflow.python.distribute.coordinator import cluster_coordinator

        coordinator_class = cluster_coordinator.ClusterCoordinator
        real_schedule = coordinator_class.schedule
        observer = self

        def schedule(self: Any, fn: Any, args: Any = None, kwargs: Any = None) -> Any:
            if not observer.handed:
                observer.scheduled(self, fn, tuple(args or ()), dict(kwargs or {}))
            return real_schedule(self, fn, args=args, kwargs=kwargs)

        coordinator_class.schedule = schedule

    def called(self, function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """An eager call of a ``tf.function``: record graphs from now on; hand the loop over
        (and never return) when this is its thread's second call of it and it trains."""
        from tensorflow.python.eager import context

        if not self.recording:
            context.context().enable_run_metadata()
            self.recording = True
        thread = threading.current_thread().name
        with self._lock:
            self.eager_calls += 1
            key = (thread, id(function))
            self.calls[key] += 1
            if self.calls[key] != 2:
                return
        concrete = function.get_concrete_function(*args, **kwargs)
        if not trains(concrete):
            return
        metadata = context.context().export_run_metadata()
        context.context().disable_run_metadata()
        self.recorded.extend(metadata.function_graphs)
        recorded = step_graph(self.recorded, concrete)
        self.handed = True
        self.on_loop(
            FunctionLoop(function, args, kwargs, thread, concrete, recorded, self.eager_calls - 1)
        )

    def scheduled(
        self, coordinator: Any, function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """A ``tf.function`` scheduled on a ``ClusterCoordinator``'s workers: hand the loop
        over (and never return) when its thread schedules it a second time and it trains.
        Its graph is the concrete function's, as traced (TensorFlow records no run metadata
        of a function run on another task: :func:`traced_graphs`)."""
        from tensorflow.python.distribute.coordinator import cluster_coordinator
        from tensorflow.python.util import nest

        thread = threading.current_thread().name
        with self._lock:
            self.eager_calls += 1
            key = (thread, id(function))
            self.calls[key] += 1
            if self.calls[key] != 2 or not hasattr(function, "get_concrete_function"):
                return
        specs = nest.map_structure(
            cluster_coordinator._maybe_as_type_spec,
            cluster_coordinator._select_worker_slice(0, args),
        )
        with coordinator.strategy.scope():
            concrete = function.get_concrete_function(*specs, **kwargs)
        if not trains(concrete):
            return
        self.handed = True
        loop = FunctionLoop(
            function, args, kwargs, thread, concrete, traced_graphs(concrete),
            self.eager_calls - 1, coordinator,
        )  # fmt: skip
        self.on_loop(loop)

    def why_no_loop(self) -> str | None:
        """Why a program that called tf.functions eagerly has no loop, in one line; None
        when it called none."""
        if not self.eager_calls:
            return None
        return (
            f"ran to its end after {self.eager_calls} calls of tf.functions, none of them a "
            "training loop: simsync imports a thread calling one tf.function again and "
            "again, where it updates a trainable variable"
        )


def trains(concrete: Any) -> bool:
    """Whether a concrete function writes a trainable variable it captures (an op of an
    optimizer's kind, or a call of a function that holds one, takes its handle)."""
    graph = concrete.graph
    trainable = {id(v.handle) for v in graph.trainable_variables}
    handles = {inside.op.name for outside, inside in graph.captures if id(outside) in trainable}
    for op in graph.get_operations():
        if op.type in FUNCTION_CALLS:
            if not calls_write(op):
                continue
        elif not any(word in op.type for word in WRITE_WORDS):
            continue
        if any(_handle_of(tensor) in handles for tensor in op.inputs):
            return True
    return False


def _handle_of(tensor: Any) -> str | None:
    """The placeholder a handle ``tensor`` comes from, through the ops that pass it on."""
    for _ in range(1000):
        if not is_handle(tensor.dtype.name):
            return None
        op = tensor.op
        if op.type == "Placeholder":
            return str(op.name)
        handed = [t for t in op.inputs if is_handle(t.dtype.name)]
        if not handed:
            return None
        tensor = handed[0]
    return None


def step_graph(recorded: list[Any], concrete: Any) -> Any:
    """The step's entry among the recorded function graphs (see the module's docstring)."""
    arguments = len(concrete.inputs)
    fitting = [
        entry
        for entry in recorded
        # its arguments are the function's inputs, by index (those it does not use pruned:
        # Keras' step leaves the iterator's first handle out)
        if all(
            n.attr["index"].i < arguments
            for n in entry.post_optimization_graph.node
            if n.op == ARGUMENT
        )
        and any(
            any(word in n.op for word in WRITE_WORDS) for n in entry.post_optimization_graph.node
        )
    ]
    if not fitting:
        raise Ended(
            "its tf.function step's graph was not recorded by TensorFlow (was it called "
            "before simsync could turn its run metadata on?)"
        )
    return max(fitting, key=lambda entry: len(entry.post_optimization_graph.node))


@dataclass
class TracedGraphs:
    """A concrete function's graph as it was traced, in the form of the run metadata's
    ``FunctionGraphs`` entry (:func:`traced_graphs`)."""

    post_optimization_graph: Any
    partition_graphs: list[Any] = field(default_factory=list)


def traced_graphs(concrete: Any) -> TracedGraphs:
    """The graph of a ``tf.function`` run on another task (a ``ParameterServerStrategy``'s
    worker), as the step's graph is read from TensorFlow's run metadata otherwise: TensorFlow
    records none of such a run, so it is the concrete function's graph as traced (its nested
    functions not inlined, Grappler not applied), each input a ``_Arg`` of its index, each
    output a ``_Retval``, each node on the device it was placed on when traced: a worker's ops
    on none (whichever worker runs the step), the updates on their parameter server. An op
    that takes a variable's handle runs where the variable is (TensorFlow's placer puts it
    with its resource)."""
    from tensorflow.core.framework import graph_pb2

    traced = concrete.graph.as_graph_def()
    inputs = {tensor.op.name: index for index, tensor in enumerate(concrete.graph.inputs)}
    variables = {
        inside.op.name: str(outside.device)
        for outside, inside in concrete.graph.captures
        if is_handle(outside.dtype.name)
    }
    definition = graph_pb2.GraphDef()
    definition.library.CopyFrom(traced.library)
    for node in traced.node:
        new = definition.node.add()
        new.CopyFrom(node)
        if node.name in inputs:
            dtype = node.attr["dtype"].type
            new.op = ARGUMENT
            new.ClearField("attr")
            new.attr["T"].type = dtype
            new.attr["index"].i = inputs[node.name]
            if node.attr["shape"].HasField("shape"):
                new.attr["_output_shapes"].list.shape.add().CopyFrom(node.attr["shape"].shape)
            new.device = variables.get(node.name, "")
    placed = {node.name: node.device for node in definition.node}
    for new in definition.node:
        # colocated (``_class``: ``loc:@op``), as the placer places it; the names it gives
        # are the traced graph's, which the step's graph renames
        together = [c.decode()[5:] for c in new.attr["_class"].list.s if c.startswith(b"loc:@")]
        del new.attr["_class"]
        handles = [i.lstrip("^").split(":")[0] for i in new.input if not i.startswith("^")]
        held = [placed[h] for h in [*together, *handles] if h in variables]
        if held and new.op != ARGUMENT:
            new.device = held[0]
    for index, tensor in enumerate(concrete.graph.outputs):
        result = definition.node.add()
        result.name, result.op = f"{RESULT}_{index}", RESULT
        result.input.append(tensor.name if tensor.value_index else tensor.op.name)
        result.attr["T"].type = tensor.dtype.as_datatype_enum
        result.attr["index"].i = index
    return TracedGraphs(definition)


def _own_task() -> str:
    """The device of this process's task, as ``TF_CONFIG`` says it
    (``/job:worker/replica:0/task:1``), or "" outside a cluster."""
    try:
        task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task") or {}
        return f"/job:{task['type']}/replica:0/task:{int(task.get('index', 0))}"
    except (ValueError, TypeError, KeyError, AttributeError):
        return ""


def step_device(device: str) -> str:
    """A node's device as the program names it: ``/cpu:1`` for TensorFlow's
    ``/job:localhost/replica:0/task:0/device:CPU:1`` (a TF2 program's logical CPUs are its
    own, not simsync's stand-ins for GPUs), ``/gpu:0`` for a GPU.

    >>> step_device("/job:localhost/replica:0/task:0/device:CPU:1"), step_device("")
    ('/cpu:1', '/cpu:0')
    """
    found = re.search(r"(?i)device:(cpu|gpu):(\d+)", device)
    return f"/{found.group(1).lower()}:{found.group(2)}" if found else "/cpu:0"


def worker_device(device: str, worker: str = "/job:worker/replica:0/task:0") -> str:
    """A node's device in a step a ``ParameterServerStrategy`` runs on ``worker``: its
    task's (a parameter server's) where the node names one, else the worker's.

    >>> worker_device("/job:ps/replica:0/task:0/device:CPU:0"), worker_device("")
    ('/job:ps/task:0', '/job:worker/task:0')
    >>> worker_device("/device:GPU:0", "/job:worker/replica:0/task:1")
    '/job:worker/task:1/gpu:0'
    """
    if "/job:" not in device:
        device = worker + device[device.find("/device:") :] if "/device:" in device else worker
    found = _TASK_DEVICE.search(device)
    if found is None:
        return "/cpu:0"
    job, task, kind, index = found.groups()
    where = f"/job:{job}/task:{task or 0}"
    if kind is None or (kind.lower() == "cpu" and index == "0"):
        return where
    return f"{where}/{kind.lower()}:{index}"


_TASK_DEVICE = re.compile(
    r"/job:([A-Za-z0-9_]+)(?:/replica:\d+)?(?:/task:(\d+))?(?:/device:([A-Za-z]+):(\d+))?"
)


def function_graph_data(tf: Any, loop: FunctionLoop, program: str, gpus: int) -> dict[str, Any]:
    """The step's graph as plain data, in the form a TF1 program's has (the input of
    :func:`~simsync.tf_backend.program.convert.convert`; see the module's docstring)."""
    from simsync.tf_backend.program.ops_data import op_data

    step = imported_step(tf, loop)
    own = _own_task()
    placed: Callable[[str], str] = step_device
    if loop.coordinator is not None:
        placed = worker_device
    elif own:  # a task of a cluster (a MultiWorkerMirroredStrategy's worker): its own ops
        placed = functools.partial(worker_device, worker=own)
    devices = {}
    for node in loop.recorded.post_optimization_graph.node:
        devices[node.name] = placed(node.device)
    for partition in loop.recorded.partition_graphs:
        for node in partition.node:
            devices[node.name] = placed(node.device)
    made = _made_ops(loop.concrete.graph)
    folder = str(Path(program).resolve().parent)
    ops = []
    for op in _ordered(step.graph.get_operations()):
        data = op_data(op, folder)
        if op.name in step.arguments and op.type != "VarHandleOp":
            data["type"] = ARGUMENT
        data["device"] = devices.get(step.arguments.get(op.name, op.name), "/cpu:0")
        origin = made.get(op.name)  # where the program made it: its traced op's line
        data["made_in"] = None if origin is None else op_data(origin, folder)["made_in"]
        ops.append(data)
    keys = _collective_keys(step, loop)
    for data in ops:  # each collective's key, which a cluster's tasks' ops meet by
        if data["name"] in keys:
            data["collective"] = keys[data["name"]]
    groups: dict[str, list[str]] = {}
    for name, key in keys.items():
        groups.setdefault(key, []).append(name)
    join_collectives(ops, [names for names in groups.values() if len(names) >= 2])
    names = {op["name"] for op in ops}
    returned = []
    for node, tensor in step.results:  # the function's results: ops of no output
        returned.append(tensor["op"])
        ops.append(
            {
                "name": _free(node.name, names),
                "type": RESULT,
                "device": devices.get(node.name, "/cpu:0"),
                "colocate": [],
                "inputs": [tensor],
                "control": [],
                "made_in": None,
            }
        )
    arguments = [
        {"name": op.name, "shape": _shape(op.outputs[0])}
        for op in step.graph.get_operations()
        if op.name in step.arguments and op.type != "VarHandleOp"
    ]
    consumed = {t["op"] for op in ops for t in op["inputs"]}
    consumed |= {name for op in ops for name in op["control"]}
    sinks = [op["name"] for op in ops if op["name"] not in consumed and op["type"] != RESULT]
    results = [op["name"] for op in ops if op["type"] == RESULT]
    trainable = {id(v.handle) for v in loop.concrete.graph.trainable_variables}
    return {
        "program": program,
        "order": [op["name"] for op in ops],
        "ops": ops,
        "clients": [
            {
                "thread": loop.thread,
                "name": "main",
                "fetches": list(dict.fromkeys([*returned, *sinks, *results])),
                # what each call passes, as large as it is (a batch's first dimension)
                "feeds": {
                    f"{op['name']}:0": op["shape"]
                    for op in arguments
                    if op["shape"] is not None and None not in op["shape"]
                },
            }
        ],
        "trainable": sorted(
            name for name, variable in step.variables.items() if id(variable.handle) in trainable
        ),
        "queue_runners": [],
        "queue_sizes": {},
        "collections": {"update_ops": [], "train_op": [], "global_step": []},
        "logical_devices": gpus == 0,
        "cores": os.cpu_count() or 1,
        "runs_before_loop": loop.calls_before,
    }


def scheduled_on(
    workers: list[str],
    data: dict[str, Any],
    machine: dict[str, Any],
    profile: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """A ``ParameterServerStrategy``'s step (its graph ``data`` and ``profile`` as the first
    worker runs it) as each of its ``workers`` runs it: the answers of a cluster's tasks
    that train, for :func:`~simsync.tf_backend.program.cluster.join`, each worker's ops on
    its own device, the variables on their parameter servers shared. The coordinator gives
    each worker a thread that runs one scheduled step after another: each is a client.

    >>> data = {"ops": [{"name": "m", "device": "/job:worker/task:0"}], "clients": []}
    >>> [a["graph"]["ops"][0]["device"] for a in scheduled_on(
    ...     ["/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"], data, {})]
    ['/job:worker/task:0', '/job:worker/task:1']
    """
    first = worker_device("", workers[0])
    answers = []
    for worker in workers:
        own = worker_device("", worker)

        def moved(device: str, own: str = own) -> str:
            inside = device == first or device.startswith(f"{first}/")
            return own + device[len(first) :] if inside else device

        graph = {**data, "ops": [{**op, "device": moved(op["device"])} for op in data["ops"]]}
        answer: dict[str, Any] = {"graph": graph, "machine": machine}
        if profile is not None:
            ops = {n: {**c, "device": moved(c["device"])} for n, c in profile["ops"].items()}
            answer["profile"] = {**profile, "ops": ops}
        answers.append(answer)
    return answers


def _made_ops(graph: Any, prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """The ops of ``graph`` as TensorFlow made them (with their tracebacks), by the names
    their inlined copies have in the step's graph: a called function's ops under the call's
    name (``StatefulPartitionedCall/sgd/CollectiveReduceV2``, Keras' step inside ``fit``'s)."""
    made = {}
    for op in graph.get_operations():
        made[prefix + op.name] = op
        if op.type in FUNCTION_CALLS and depth < 8:
            try:  # TensorFlow's own record of the function called (``Graph._get_function``)
                called = graph._get_function(op.get_attr("f").name).graph
            except Exception:
                continue
            made.update(_made_ops(called, f"{prefix}{op.name}/", depth + 1))
    return made


def _collective_keys(step: ImportedStep, loop: FunctionLoop) -> dict[str, str]:
    """The key of each collective op of the step, by name, alike for the ops of one
    collective (within the process, and across a cluster's processes): the
    replicas' ops of a ``MirroredStrategy``'s all-reduce meet by their group and instance
    keys, not by an edge of the graph (research/tf2.md §1a). A key is a constant, or an
    argument of the function that carries a captured value (the instance key); NCCL's
    ops meet by their shared name."""
    captured = {id(inside): outside for outside, inside in loop.concrete.graph.captures}
    recorded = {n.name: n for n in loop.recorded.post_optimization_graph.node}

    def value(tensor: Any) -> Any:
        op = tensor.op
        if op.type == "Const":
            from tensorflow.python.framework import tensor_util

            return tensor_util.MakeNdarray(op.get_attr("value")).tolist()
        node = recorded.get(step.arguments.get(op.name, ""))
        if node is None:
            return None
        placeholder = loop.concrete.inputs[node.attr["index"].i]
        outside = captured.get(id(placeholder))
        if outside is None or not hasattr(outside, "numpy") or not outside.dtype.is_integer:
            return None
        return outside.numpy().tolist()

    keys: dict[str, str] = {}
    for op in step.graph.get_operations():
        if op.type in NCCL:
            key: tuple[Any, ...] = (op.type, op.get_attr("shared_name"))
        elif op.type in COLLECTIVES:
            if op.type.endswith(("V2", "V3")):
                said = tuple(value(t) for t in op.inputs[1:4])
            else:
                said = tuple(op.get_attr(a) for a in ("group_size", "group_key", "instance_key"))
            key = (op.type, *said)
        else:
            continue
        keys[op.name] = repr(key)
    return keys


def _shape(tensor: Any) -> list[int | None] | None:
    return tensor.shape.as_list() if tensor.shape.rank is not None else None


def _variables(concrete: Any) -> dict[str, Any]:
    """The variables the step captures, by the name their op has in its graph data: the
    variable's own (``hidden/weights``), made unique as TensorFlow makes names
    (``Variable``, ``Variable_1``)."""
    found: dict[str, Any] = {}
    for variable in concrete.graph.variables:
        stem = str(variable.name).split(":")[0] or "Variable"
        name, number = stem, 0
        while name in found:
            number += 1
            name = f"{stem}_{number}"
        found[name] = variable
    return found


@dataclass
class ImportedStep:
    """The step's post-optimization graph imported into a ``tf.Graph``
    (:func:`imported_step`)."""

    graph: Any
    #: each op that was an argument (``_Arg``) and the node it was
    arguments: dict[str, str]
    #: the variables it captures, by their op's name
    variables: dict[str, Any]
    #: each result (``_Retval``) and the tensor it takes
    #: (:func:`~simsync.tf_backend.program.ops_data.tensor_data`)
    results: list[tuple[Any, dict[str, Any]]]


def imported_step(tf: Any, loop: FunctionLoop) -> ImportedStep:
    """The step's post-optimization graph imported into a ``tf.Graph`` (TensorFlow infers
    its tensors' shapes and types): each argument that carries a captured variable's handle
    a ``VarHandleOp`` named after the variable, each other argument a ``Placeholder`` of
    its type and shape, the results left out (and said apart)."""
    from tensorflow.core.framework import graph_pb2

    from simsync.tf_backend.program.ops_data import tensor_data

    concrete = loop.concrete
    variables = _variables(concrete)
    by_handle = {id(v.handle): name for name, v in variables.items()}
    captured = {internal.op.name: id(external) for external, internal in concrete.graph.captures}
    nodes = list(loop.recorded.post_optimization_graph.node)
    taken = {node.name for node in nodes}
    renamed: dict[str, str] = {}
    arguments: dict[str, str] = {}
    definition = graph_pb2.GraphDef()
    results = []
    for node in nodes:
        if node.op == RESULT:
            results.append(node)
            continue
        new = definition.node.add()
        if node.op != ARGUMENT:
            new.CopyFrom(node)
            new.device = ""  # placed already: the partitions say where
            continue
        placeholder = concrete.inputs[node.attr["index"].i]
        variable = by_handle.get(captured.get(placeholder.op.name, -1))
        if variable is not None and (variable == node.name or variable not in taken):
            renamed[node.name] = variable
            new.name, new.op = variable, "VarHandleOp"
            new.attr["dtype"].type = variables[variable].dtype.as_datatype_enum
            new.attr["shape"].shape.CopyFrom(variables[variable].shape.as_proto())
            new.attr["shared_name"].s = variable.encode()
        else:
            new.name, new.op = node.name, "Placeholder"
            new.attr["dtype"].type = node.attr["T"].type
            shapes = node.attr["_output_shapes"].list.shape if "_output_shapes" in node.attr else []
            if shapes:
                new.attr["shape"].shape.CopyFrom(shapes[0])
        arguments[new.name] = node.name
    for new in definition.node:
        inputs = [_renamed(i, renamed) for i in new.input]
        del new.input[:]
        new.input.extend(inputs)
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(definition, name="")
    said = []
    for node in results:
        op_name, _, slot = _renamed(node.input[0], renamed).partition(":")
        tensor = graph.get_operation_by_name(op_name).outputs[int(slot or 0)]
        said.append((node, tensor_data(tensor)))
    named = {name: variables[name] for name in renamed.values()}
    return ImportedStep(graph, arguments, named, said)


def _renamed(reference: str, renamed: dict[str, str]) -> str:
    """An input of a GraphDef's node (``op``, ``op:1``, ``^op``) with its op renamed."""
    control = reference.startswith("^")
    op, colon, slot = reference.lstrip("^").partition(":")
    return ("^" if control else "") + renamed.get(op, op) + colon + slot


def _free(name: str, taken: set[str]) -> str:
    """``name``, or ``name_1``, ``name_2``, ... when taken (and then taken)."""
    found, number = name, 0
    while found in taken:
        number += 1
        found = f"{name}_{number}"
    taken.add(found)
    return found


def _ordered(operations: list[Any]) -> list[Any]:
    """The ops in a topological order that does not depend on how TensorFlow listed them:
    of the ops ready, the first by name (the graph's key is the same in every run)."""
    import heapq

    waits = {
        op.name: {t.op.name for t in op.inputs} | {c.name for c in op.control_inputs}
        for op in operations
    }
    by_name = {op.name: op for op in operations}
    after: dict[str, list[str]] = {}
    for name, needed in waits.items():
        for other in needed:
            after.setdefault(other, []).append(name)
    ready = [name for name, needed in waits.items() if not needed]
    heapq.heapify(ready)
    order = []
    left = {name: len(needed) for name, needed in waits.items()}
    while ready:
        name = heapq.heappop(ready)
        order.append(by_name[name])
        for other in after.get(name, ()):
            left[other] -= 1
            if not left[other]:
                heapq.heappush(ready, other)
    if len(order) != len(operations):
        raise Ended("its tf.function step's graph has a cycle")
    return order
