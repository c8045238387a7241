"""The graph each worker task builds: the real ``SyncReplicasOptimizer`` and what simsync reads.

Every worker builds the same graph (only its worker device differs), as a between-graph
replicated TensorFlow program does:

- **model workload**: under ``replica_device_setter`` (variables round-robin on the parameter
  servers, ``global_step`` first), float64 variables named as simsync names them
  (``layer_0/kernel`` ...); the run reads every variable once, then a work op of ``rows`` rows
  (the compute time made real), then the gradients of ``model_loss`` *of those reads*, released
  only after the work, so the push comes after the compute;
- **TensorFlow's test**: its own variables, devices and constant gradients (sparse included).

Then ``SyncReplicasOptimizer(GradientDescentOptimizer(lr), R, N).apply_gradients`` and the
chief's ops: ``chief_init_op``, ``local_step_init_op``, ``get_init_tokens_op``, and the queue
runner's ``sync_op``. Also the queues simsync adds for its start barrier and its shutdown, on
the parameter servers, so they work across hosts too. :func:`node_roles` finds the optimizer's
own nodes (pushes, takes, the token dequeue and enqueues) by type, and names them by variable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simsync.numerics import init_params
from simsync.tf_backend.cluster.config import (
    TENSORFLOW_TEST_LEARNING_RATE,
    ClusterRunConfig,
    ModelWorkload,
)
from simsync.tf_backend.session.model import model_loss
from simsync.tf_backend.session.work import work_op

__all__ = ["ControlOps", "WorkerGraph", "build_worker_graph", "node_roles", "shutdown_queue"]

PUSH_TYPES = {
    "ResourceAccumulatorApplyGradient",
    "AccumulatorApplyGradient",
    "SparseAccumulatorApplyGradient",
}
TAKE_TYPES = {
    "ResourceAccumulatorTakeGradient",
    "AccumulatorTakeGradient",
    "SparseAccumulatorTakeGradient",
}


def _queue(tf: Any, name: str, dtypes: list[Any], device: str = "/job:ps/task:0") -> Any:
    with tf.compat.v1.device(device):
        shapes: list[list[int]] = [[] for _ in dtypes]
        return tf.queue.FIFOQueue(1024, dtypes, shapes=shapes, shared_name=name, name=name)


def shutdown_queue(tf: Any, parameter_server: int) -> Any:
    """The queue parameter server ``parameter_server`` waits on; the chief fills it last."""
    name = f"simsync/shutdown_{parameter_server}"
    return _queue(tf, name, [tf.int32], f"/job:ps/task:{parameter_server}")


@dataclass
class ControlOps:
    """simsync's start barrier and shutdown, as queue ops (no-ops with a single worker).

    Start: the chief initialises, puts one ``initialised`` token per other worker; each other
    worker takes one, sets its local step, puts ``armed``; the chief takes them all, then puts
    ``go`` tokens carrying the common time base and the seconds per row of work. End: each
    other worker puts ``finished``; the chief takes them all, then fills every shutdown queue.
    """

    others: int
    initialised_put: Any = None
    initialised_get: Any = None
    armed_put: Any = None
    armed_get: Any = None
    go_values: Any = None  # placeholder: [base time, seconds per row]
    go_put: Any = None
    go_get: Any = None
    finished_put: Any = None
    finished_get: Any = None
    shutdown_puts: list[Any] = field(default_factory=list)


def _control_ops(tf: Any, config: ClusterRunConfig) -> ControlOps:
    others = config.workers - 1
    control = ControlOps(others)
    control.shutdown_puts = [
        shutdown_queue(tf, p).enqueue(1) for p in range(config.parameter_servers)
    ]
    if others == 0:
        return control
    initialised = _queue(tf, "simsync/initialised", [tf.int32])
    armed = _queue(tf, "simsync/armed", [tf.int32])
    go = _queue(tf, "simsync/go", [tf.float64, tf.float64])
    finished = _queue(tf, "simsync/finished", [tf.int32])
    with tf.compat.v1.device("/job:ps/task:0"):
        control.initialised_put = initialised.enqueue_many([tf.ones([others], tf.int32)])
        control.initialised_get = initialised.dequeue()
        control.armed_put = armed.enqueue(1)
        control.armed_get = armed.dequeue_many(others)
        control.go_values = tf.compat.v1.placeholder(tf.float64, [2], name="simsync/go_values")
        repeated = tf.tile(tf.reshape(control.go_values, [1, 2]), [others, 1])
        control.go_put = go.enqueue_many([repeated[:, 0], repeated[:, 1]])
        control.go_get = go.dequeue()
        control.finished_put = finished.enqueue(1)
        control.finished_get = finished.dequeue_many(others)
    return control


@dataclass
class WorkerGraph:
    """One worker's graph and the tensors and ops simsync runs and fetches."""

    graph: Any
    variables: dict[str, Any]  # simsync name -> tf.Variable
    values: dict[str, Any]  # simsync name -> its value (the model's gradients use these reads)
    gradients: dict[str, Any]  # a dense tensor, or a sparse one's indices, values and shape
    global_step: Any
    local_step: Any
    train_op: Any
    token: Any  # the token the train op dequeues
    sync_op: Any
    tokens_enqueued: Any  # the values sync_op enqueues
    takes: dict[str, Any]  # simsync name -> the average its take returns (sparse: a dict)
    chief_init_op: Any
    local_step_init_op: Any
    init_tokens_op: Any
    init_op: Any
    local_init_op: Any
    control: ControlOps
    loss: Any = None
    feeds: dict[str, Any] = field(default_factory=dict)  # "x", "y", "rows"


def build_worker_graph(tf: Any, config: ClusterRunConfig, cluster: Any, worker: int) -> WorkerGraph:
    """Build worker ``worker``'s graph for ``config`` on the ClusterSpec ``cluster``."""
    graph = tf.Graph()
    if isinstance(config.workload, ModelWorkload):
        placement: Any = tf.compat.v1.train.replica_device_setter(
            ps_tasks=config.parameter_servers,
            worker_device=f"/job:worker/task:{worker}",
            cluster=cluster,
        )
    else:  # the test's own placement: its variables name their ps, the rest is the worker's
        placement = f"/job:worker/task:{worker}"
    with graph.as_default(), tf.compat.v1.device(placement):
        if isinstance(config.workload, ModelWorkload):
            parts = _model_part(tf, config)
        else:
            parts = _test_part(tf, worker)
        variables, values, gradients, global_step, learning_rate = parts[:5]
        optimizer = tf.compat.v1.train.SyncReplicasOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(learning_rate),
            replicas_to_aggregate=config.replicas,
            total_num_replicas=config.workers,
        )
        pairs = [(_as_gradient(tf, gradients[n]), variables[n]) for n in variables]
        train_op = optimizer.apply_gradients(pairs, global_step=global_step)
        # simsync's barrier replaces the hook's readiness check; silence its "never used"
        optimizer.ready_for_local_init_op.mark_used()
        init_tokens = -1 if config.init_tokens is None else config.init_tokens
        init_tokens_op = optimizer.get_init_tokens_op(init_tokens)
        (sync_op,) = optimizer.get_chief_queue_runner().enqueue_ops
        built = WorkerGraph(
            graph=graph,
            variables=variables,
            values=values,
            gradients=gradients,
            global_step=global_step.read_value(),
            local_step=optimizer._local_step.read_value(),
            train_op=train_op,
            token=_token_dequeue(graph),
            sync_op=sync_op,
            tokens_enqueued=sync_op.inputs[1],
            takes=_takes(graph),
            chief_init_op=optimizer.chief_init_op,
            local_step_init_op=optimizer.local_step_init_op,
            init_tokens_op=init_tokens_op,
            init_op=tf.compat.v1.global_variables_initializer(),
            local_init_op=tf.compat.v1.local_variables_initializer(),
            control=_control_ops(tf, config),
        )
        if len(parts) > 5:
            built.loss, built.feeds = parts[5], parts[6]
    return built


def _as_gradient(tf: Any, gradient: Any) -> Any:
    if isinstance(gradient, dict):
        return tf.IndexedSlices(gradient["values"], gradient["indices"], gradient["shape"])
    return gradient


def _model_part(tf: Any, config: ClusterRunConfig) -> tuple[Any, ...]:
    """The model's variables, reads, work and gradients (inside the replica device setter)."""
    assert isinstance(config.workload, ModelWorkload)
    spec = config.workload.spec
    global_step = tf.compat.v1.train.get_or_create_global_step()
    variables = {
        name: tf.compat.v1.Variable(value, dtype=tf.float64, name=name)
        for name, value in init_params(spec, config.seed).items()
    }
    values = {n: tf.identity(v.read_value(), name=f"read/{n}") for n, v in variables.items()}
    x = tf.compat.v1.placeholder(tf.float64, [None, spec.features], name="feeds/x")
    if spec.kind == "linear":
        y = tf.compat.v1.placeholder(tf.float64, [None, spec.classes], name="feeds/y")
    else:
        y = tf.compat.v1.placeholder(tf.int64, [None], name="feeds/y")
    rows = tf.compat.v1.placeholder(tf.int32, [], name="feeds/rows")
    with tf.control_dependencies(list(values.values())):
        work = work_op(tf, rows)
    loss = model_loss(tf, spec, values, x, y)
    names = list(variables)
    raw = tf.gradients(loss, [values[n] for n in names])
    with tf.control_dependencies([work]):
        gradients = {
            n: tf.identity(g, name=f"after_work/{n}") for n, g in zip(names, raw, strict=True)
        }
    feeds = {"x": x, "y": y, "rows": rows}
    # A Python float would become a float32 tensor, cast to float64 at each apply: 0.1 would be
    # 0.10000000149011612. A float64 tensor keeps the simulator's rate exactly.
    rate = tf.constant(spec.learning_rate, tf.float64, name="learning_rate")
    return variables, values, gradients, global_step, rate, loss, feeds


def _test_part(tf: Any, worker: int) -> tuple[Any, ...]:
    """``get_workers`` of TensorFlow's sync_replicas_optimizer_test.py, for one worker."""
    with tf.compat.v1.device("/job:ps/task:0"):
        global_step = tf.compat.v1.Variable(0, name="global_step", trainable=False)
        v0 = tf.compat.v1.Variable(0.0, name="v0")
    with tf.compat.v1.device("/job:ps/task:1"):
        v1 = tf.compat.v1.Variable(1.0, name="v1")
        v_sparse = tf.compat.v1.Variable([[3.0], [4.0]], name="v_sparse")
    variables = {"v0": v0, "v1": v1, "v_sparse": v_sparse}
    with tf.compat.v1.device(f"/job:worker/task:{worker}"):
        gradients = {
            "v0": tf.constant(0.1 + worker * 0.2),
            "v1": tf.constant(0.9 + worker * 0.2),
            "v_sparse": {
                "indices": tf.constant([1]),
                "values": tf.constant([0.1 + worker * 0.2], shape=[1, 1]),
                "shape": tf.constant([2, 1]),
            },
        }
    values = {n: v.read_value() for n, v in variables.items()}
    return variables, values, gradients, global_step, TENSORFLOW_TEST_LEARNING_RATE


def _token_dequeue(graph: Any) -> Any:
    (op,) = [
        op
        for op in graph.get_operations()
        if op.type == "QueueDequeueV2" and op.inputs[0].op.name == "sync_token_q"
    ]
    return op.outputs[0]


def _variable_of(op: Any) -> str:
    """``layer_0/kernel`` for an accumulator op of ``layer_0/kernel:0/grad_accum``."""
    shared = op.inputs[0].op.get_attr("shared_name").decode()
    return shared.removesuffix("/grad_accum").rpartition(":")[0]


def _takes(graph: Any) -> dict[str, Any]:
    takes: dict[str, Any] = {}
    for op in graph.get_operations():
        if op.type in TAKE_TYPES:
            if op.type.startswith("Sparse"):
                takes[_variable_of(op)] = {"indices": op.outputs[0], "values": op.outputs[1]}
            else:
                takes[_variable_of(op)] = op.outputs[0]
    return takes


def node_roles(built: WorkerGraph) -> dict[str, list[str]]:
    """The optimizer's nodes simsync turns into ledger events, by TensorFlow node name:
    ``[role, variable]`` with role ``push``, ``take``, ``dequeue``, ``enqueue`` or
    ``init_tokens`` (variable ``""`` for the token queue)."""
    roles = {
        built.token.op.name: ["dequeue", ""],
        built.sync_op.name: ["enqueue", ""],
        built.init_tokens_op.name: ["init_tokens", ""],
    }
    for op in built.graph.get_operations():
        if op.type in PUSH_TYPES:
            roles[op.name] = ["push", _variable_of(op)]
        elif op.type in TAKE_TYPES:
            roles[op.name] = ["take", _variable_of(op)]
    return roles
