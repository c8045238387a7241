"""Lowering: build the TensorFlow graph of an IR graph, one name scope per IR op.

Every IR op becomes real TensorFlow ops under ``tf.name_scope(op.name)`` on the op's device, all
created under ``tf.control_dependencies`` on the op's inputs, so no node of the scope can start
before the IR op's inputs are there. Its results then pass through a gate: a ``done`` no-op that
waits for all of them, and ``output/`` identities after it. TensorFlow runs node by node, so
without the gate a consumer could start on one finished tensor (a kernel's gradient) while the op
still computes another (the bias's); with it an IR op is one unit, as in the simulator, and a
real trace maps back to IR ops one for one.

What each kind becomes is its own lowering rule, declared with the kind in
:mod:`simsync.kinds` (``OpKind.lower``); this module gives the rules what they build with (this
:class:`Builder`: the TensorFlow module, the device plan, feeds, version counters, the model's
loss, the work ops that make compute time real, the ring all-reduce). The graph is checked
first as the simulator checks it for values (:func:`simsync.kinds.check_graph` with the model);
a kind without a rule fails here with the registry's reason, and so does a graph whose values
would pass through a ``generic`` op (it computes none: lowered, it only waits for its inputs).

An op with ``locks`` runs inside a ``tf.CriticalSection`` per lock: a read then sees one version
of all variables, and an apply lands whole. Variables live under ``variables/``, version
counters under ``versions/``, critical sections under ``locks/``, fed tensors under ``feeds/``;
none of them is an IR op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from simsync.ir import Graph, Op, topological_order
from simsync.kinds import Inputs, check_graph, kind_of, values_skipped
from simsync.kinds.contract import OpLike
from simsync.kinds.forward import Ungated
from simsync.numerics import ModelSpec, init_params
from simsync.numerics.batch_norm import Statistics
from simsync.tf_backend.session.model import model_loss, normalized_loss, pre_activation
from simsync.tf_backend.session.ring import ring_allreduce
from simsync.tf_backend.session.runtime import BackendError, DevicePlan, load_tensorflow
from simsync.tf_backend.session.work import WORK_WIDTH, work_op

__all__ = ["Builder", "Lowered", "lower"]


@dataclass
class Lowered:
    """The TensorFlow graph of an IR graph, and the handles a run needs."""

    graph: Any
    init: Any
    fetches: dict[str, list[Any]]  # client -> its train op(s)
    losses: dict[int, Any] = field(default_factory=dict)  # tower -> loss tensor
    batches: dict[int, tuple[Any, Any]] = field(default_factory=dict)  # tower -> (x, y) feeds
    work_rows: dict[str, Any] = field(default_factory=dict)  # IR op -> rows feed
    variables: dict[str, Any] = field(default_factory=dict)  # IR variable -> tf.Variable
    read_versions: dict[str, dict[str, Any]] = field(default_factory=dict)
    write_versions: dict[str, dict[str, Any]] = field(default_factory=dict)  # before the apply
    applied: dict[str, Any] = field(default_factory=dict)  # apply op -> kept (max_staleness)
    #: moving-average update op -> variable -> the value it read and the batch statistic
    moving: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)


def lower(graph: Graph, spec: ModelSpec, seed: int, plan: DevicePlan) -> Lowered:
    """Build the TensorFlow graph of ``graph`` with the model ``spec`` initialised from ``seed``.

    Raises :class:`~simsync.errors.GraphError` when the graph's values cannot be computed with
    ``spec``, and :class:`BackendError` when a kind has no lowering or a ``generic`` op stands
    where values pass.
    """
    check_graph(graph, spec)
    skipped = values_skipped(graph)
    if skipped is not None:
        raise BackendError(f"the TensorFlow backend computes the values, but {skipped}")
    tf = load_tensorflow()
    tf_graph = tf.Graph()
    with tf_graph.as_default():
        builder = Builder(tf, graph, spec, plan)
        builder.add_variables(init_params(spec, seed))
        for name in topological_order(graph):
            builder.add_op(graph.op(name))
        lowered = builder.lowered
        lowered.graph = tf_graph
        lowered.init = tf.compat.v1.global_variables_initializer()
        lowered.fetches = {
            client.name: [builder.outputs[f] for f in client.fetches] for client in graph.clients
        }
    return lowered


class Builder:
    """What the kinds' lowering rules build with."""

    def __init__(self, tf: Any, graph: Graph, spec: ModelSpec, plan: DevicePlan) -> None:
        self.tf, self.graph, self.spec, self.plan = tf, graph, spec, plan
        self.outputs: dict[str, Any] = {}
        self.versions: dict[str, Any] = {}
        self.locks: dict[str, Any] = {}
        self.lowered = Lowered(graph=None, init=None, fetches={})

    def device(self, ir_device: str) -> Any:
        return self.tf.device(self.plan.mapping[ir_device])

    def scope(self, name: str | None) -> Any:
        """An exact name scope (``"a/b/"``), or the top level (``None``)."""
        return self.tf.compat.v1.get_default_graph().name_scope(name)

    def parameter(self, variable: str) -> str:
        """The model parameter ``variable`` holds."""
        return self.graph.variables[variable].model_parameter

    def feed(self, dtype: Any, shape: list[int], name: str) -> Any:
        """A placeholder under ``feeds/``, outside every IR op and its dependencies."""
        tf = self.tf
        with self.scope(None), tf.control_dependencies(None):
            return tf.compat.v1.placeholder(dtype, shape, name=f"feeds/{name}")

    def model_loss(self, params: dict[str, Any], x: Any, y: Any) -> Any:
        return model_loss(self.tf, self.spec, params, x, y)

    def normalized_loss(
        self, params: dict[str, Any], x: Any, y: Any, given: Statistics | None
    ) -> tuple[Any, Statistics]:
        return normalized_loss(self.tf, self.spec, params, x, y, given)

    def pre_activation(self, params: dict[str, Any], x: Any) -> Any:
        return pre_activation(self.tf, params, x)

    def work(self, op: OpLike) -> Any:
        """A matmul whose row count is fed each step: the op's compute time made real."""
        rows = self.feed(self.tf.int32, [], f"{op.name}/rows")
        self.lowered.work_rows[op.name] = rows
        return work_op(self.tf, rows, WORK_WIDTH)

    def ring_allreduce(self, devices: tuple[str, ...], grads: list[Any]) -> dict[str, Any]:
        return ring_allreduce(self.tf, devices, self.plan.mapping, grads)

    def read_version(self, op: OpLike) -> Any:
        """The version of ``op``'s first written variable, as read earlier in the same run."""
        variable = op.writes[0]
        for name in nx.ancestors(self.graph.nx, op.name):
            if variable in self.graph.op(name).reads:
                return self.lowered.read_versions[name][variable]
        raise BackendError(
            f"'{op.name}' has max_staleness but no read of '{variable}' before it in the same run"
        )

    def add_variables(self, initial: dict[str, np.ndarray]) -> None:
        tf = self.tf
        for name, variable in self.graph.variables.items():
            with self.device(variable.device):
                if variable.trainable:
                    value = initial[variable.model_parameter]
                else:  # numbers no gradient moves (moving statistics), or a counter
                    value = np.full(variable.shape, variable.initial or 0.0)
                self.lowered.variables[name] = tf.Variable(
                    value, dtype=tf.float64, name=f"variables/{name}"
                )
                self.versions[name] = tf.Variable(
                    0, dtype=tf.int64, name=f"versions/{name}", trainable=False
                )
        for lock in sorted({lock for op in self.graph.ops() for lock in op.locks}):
            with self.device(next(iter(self.graph.variables.values())).device):
                self.locks[lock] = tf.CriticalSection(name=f"locks/{lock}")

    def add_op(self, op: Op) -> None:
        tf, kind = self.tf, kind_of(op.kind)
        if kind.lower is None:
            raise BackendError(
                f"the TensorFlow backend cannot lower op '{op.name}': {kind.name}: {kind.unlowered}"
            )
        rule = kind.lower
        inputs = Inputs(
            op,
            [
                (self.graph.op(t.src), self.outputs[t.src])
                for t in self.graph.inputs(op.name)
                if not t.control
            ],
        )
        waits = [self.outputs[t.src] for t in self.graph.inputs(op.name)]
        dependencies = [leaf for value in waits for leaf in _leaves(tf, value)]
        with (
            self.device(op.device),
            self.scope(op.name + "/"),
            tf.control_dependencies(dependencies),
        ):
            self.outputs[op.name] = self.gate(self.locked(op, lambda: rule(self, op, inputs)))

    def locked(self, op: Op, run: Any) -> Any:
        """``run()`` inside the critical sections of ``op``'s locks (in sorted order)."""
        for lock in sorted(op.locks, reverse=True):
            run = (lambda inner, section: lambda: section.execute(inner))(run, self.locks[lock])
        return run()

    def gate(self, value: Any) -> Any:
        """Release an op's results together, once all of them are computed."""
        tf = self.tf
        with tf.control_dependencies(_leaves(tf, value)):
            done = tf.no_op(name="done")
        if not any(isinstance(leaf, tf.Tensor) for leaf in _leaves(tf, value)):
            return done
        with tf.control_dependencies([done]), tf.name_scope("output"):
            if isinstance(value, Ungated):
                return value.with_gated(tf.identity(value.gated))
            return tf.nest.map_structure(tf.identity, value)


def _leaves(tf: Any, value: Any) -> list[Any]:
    """The tensors and ops a consumer waits for."""
    return [value.gated] if isinstance(value, Ungated) else tf.nest.flatten(value)
