"""A program's values in a simulated order: its own ops compute, simsync orders (in the
sandbox's child, once the program's training loop is known).

The parent simulates the program (as written, or changed by a what-if) and turns the
simulated order of reads and writes into a plan (:mod:`simsync.tf_backend.program.values`).
Here, in the program's own session, with its variables as the program initialised them and
its input pipeline running:

- every version of every variable the simulation made is kept (numpy), from version 0, the
  variables as they are when the loop is known; a version is dropped once no later run
  reads it;
- ``compute`` of a run: each variable it reads is set to the version the simulation says it
  read, and one ``sess.run`` of the client's fetches computes the inputs of the run's
  writes (the gradients, averaged or not) and its losses, with the program's own feeds and
  its own batch from its queue (the writes' constant inputs are taken by value: running a
  constant runs what it waits for). What else that ``sess.run`` runs on its way (an
  ``UPDATE_OPS`` gate's updates, under ``tf.control_dependencies``) changes the variables
  only until the next compute or write sets them again;
- ``write`` of a run: each variable the op writes is set to its latest version, and a copy of
  the program's op (the same type and attributes, without its control inputs: what it
  waited for has been replayed already) runs with the values the run computed; what it
  wrote becomes the next version.

A write that comes before its run's last read (nothing in a step's order forbids it) uses
the run's values as computed at that moment: the plan computes a run at the first of its
last read and its first write.
"""

from __future__ import annotations

from typing import Any

from simsync.tf_backend.program.capture import VARIABLE_OPS
from simsync.tf_backend.program.convert import CONSTANTS

__all__ = ["replay_loop"]


def replay_loop(tf: Any, loop: Any, plan: dict[str, Any]) -> dict[str, Any]:
    """Replay ``plan`` (see the module's docstring) in the program's session; return
    ``{"losses": {client: [[step, loss], ...]}, "final": {variable: [norm, mean]},
    "versions": {variable: count}}``."""
    graph, session = loop.graph, loop.session
    if graph.finalized:  # a MonitoredTrainingSession's graph: the replay's ops go in too
        graph._unsafe_unfinalize()
    with graph.as_default():
        state = _State(tf, graph, session, plan["variables"])
        copies = {name: _copy_op(tf, graph, name) for name in plan["write_ops"]}
        fetches = {client: _fetches(tf, graph, spec) for client, spec in plan["clients"].items()}
    last_read = _last_reads(plan["events"])
    writes_left: dict[tuple[str, int], int] = {}
    for event in plan["events"]:
        if event[0] == "write":
            key = (event[1], int(event[2]))
            writes_left[key] = writes_left.get(key, 0) + 1
    computed: dict[tuple[str, int], dict[str, Any]] = {}
    losses: dict[str, list[list[float]]] = {client: [] for client in plan["clients"]}
    for index, event in enumerate(plan["events"]):
        kind, client, step = event[0], event[1], int(event[2])
        spec = plan["clients"][client]
        if kind == "compute":
            state.set({var: state.version(var, int(v)) for var, v in event[3].items()})
            (names, tensors), scalars, constants = fetches[client]
            call = loop.calls[spec["thread"]]
            values = session.run(tensors + scalars, feed_dict=call.feed_dict)
            computed[(client, step)] = {
                **constants,
                **dict(zip(names, values[: len(tensors)], strict=True)),
            }
            if scalars:
                losses[client].append([step, float(values[len(tensors)])])
            state.forget(index, last_read)
        else:
            write = spec["writes"][event[3]]
            copy, placeholders, written = copies[write["op"]]
            state.set({var: state.latest(var) for var in written})
            values = computed.get((client, step), {})
            feed = {
                placeholders[int(slot)]: _shaped(values[tensor], placeholders[int(slot)])
                for slot, tensor in write["inputs"].items()
            }
            session.run(copy, feed_dict=feed)
            state.made(written)
            writes_left[(client, step)] -= 1
            if not writes_left[(client, step)]:  # its values are no longer needed
                computed.pop((client, step), None)
    return {
        "losses": losses,
        "final": {var: state.summary(var) for var in plan["variables"]},
        "versions": {var: state.count(var) for var in plan["variables"]},
    }


class _State:
    """The variables' versions, and ops to read and set them."""

    def __init__(self, tf: Any, graph: Any, session: Any, names: list[str]) -> None:
        import numpy as np

        self.np, self.session = np, session
        self.read: dict[str, Any] = {}
        self.assign: dict[str, tuple[Any, Any]] = {}
        for name in names:
            op = graph.get_operation_by_name(name)
            handle, dtype = op.outputs[0], op.get_attr("dtype")
            with tf.device(op.device), tf.name_scope("simsync_replay"):
                value = tf.compat.v1.placeholder(dtype, shape=tf.TensorShape(op.get_attr("shape")))
                if op.type == "VarHandleOp":
                    self.read[name] = tf.raw_ops.ReadVariableOp(resource=handle, dtype=dtype)
                    self.assign[name] = (
                        value,
                        tf.raw_ops.AssignVariableOp(resource=handle, value=value),
                    )
                else:
                    self.read[name] = tf.identity(handle)
                    self.assign[name] = (value, tf.compat.v1.assign(handle, value).op)
        first = session.run([self.read[name] for name in names])
        self.versions: dict[str, dict[int, Any]] = {
            n: {0: v} for n, v in zip(names, first, strict=True)
        }
        self.newest = dict.fromkeys(names, 0)

    def version(self, name: str, version: int) -> Any:
        found = self.versions[name].get(version)
        if found is None:
            raise RuntimeError(f"version {version} of {name} was read before it was made")
        return found

    def latest(self, name: str) -> Any:
        return self.versions[name][self.newest[name]]

    def set(self, values: dict[str, Any]) -> None:
        if values:
            ops = [self.assign[name][1] for name in values]
            self.session.run(ops, feed_dict={self.assign[n][0]: v for n, v in values.items()})

    def made(self, names: list[str]) -> None:
        """The op has written ``names``: their values now are their next versions."""
        values = self.session.run([self.read[name] for name in names])
        for name, value in zip(names, values, strict=True):
            self.newest[name] += 1
            self.versions[name][self.newest[name]] = value

    def forget(self, index: int, last_read: dict[tuple[str, int], int]) -> None:
        """Drop the versions no run after event ``index`` reads (never the newest)."""
        for name, kept in self.versions.items():
            for version in [v for v in kept if v != self.newest[name]]:
                if last_read.get((name, version), -1) <= index:
                    del kept[version]

    def count(self, name: str) -> int:
        return self.newest[name] + 1

    def summary(self, name: str) -> list[float]:
        value = self.np.asarray(self.latest(name), dtype=float)
        return [float(self.np.linalg.norm(value)), float(value.mean()) if value.size else 0.0]


def _last_reads(events: list[list[Any]]) -> dict[tuple[str, int], int]:
    """The index of the last event that reads each (variable, version)."""
    last: dict[tuple[str, int], int] = {}
    for index, event in enumerate(events):
        if event[0] == "compute":
            for name, version in event[3].items():
                last[(name, int(version))] = index
    return last


def _fetches(
    tf: Any, graph: Any, spec: dict[str, Any]
) -> tuple[tuple[list[str], list[Any]], list[Any], dict[str, Any]]:
    """What a client's compute fetches (names and tensors), its loss (the first scalar of a
    floating type among the outputs of the ops its loop fetched), and the inputs that are
    constants, by value: a constant is never run, since running one runs what it waits for
    (``GradientDescent/Const`` waits for the program's own update)."""
    names, tensors, constants = [], [], {}
    for name in spec["fetch"]:
        tensor = graph.get_tensor_by_name(name)
        if tensor.op.type in CONSTANTS:
            constants[name] = tf.make_ndarray(tensor.op.get_attr("value"))
        else:
            names.append(name)
            tensors.append(tensor)
    for name in spec["losses"]:
        for output in graph.get_operation_by_name(name).outputs:
            if output.dtype.is_floating and output.shape.rank == 0:
                return (names, tensors), [output], constants
    return (names, tensors), [], constants


def _copy_op(tf: Any, graph: Any, name: str) -> tuple[Any, dict[int, Any], list[str]]:
    """A copy of the program's op ``name``, without control inputs, its data inputs fed:
    the copy, a placeholder per data input (by index) and the variables it writes."""
    op = graph.get_operation_by_name(name)
    inputs: list[Any] = []
    placeholders: dict[int, Any] = {}
    written: list[str] = []
    with tf.name_scope("simsync_replay"):
        for index, tensor in enumerate(op.inputs):
            if tensor.dtype == tf.resource or tensor.dtype._is_ref_dtype:
                inputs.append(tensor)
                if tensor.op.type in VARIABLE_OPS and tensor.op.name not in written:
                    written.append(tensor.op.name)
            else:
                placeholder = tf.compat.v1.placeholder(tensor.dtype, shape=tensor.shape)
                placeholders[index] = placeholder
                inputs.append(placeholder)
        attrs = {key: value for key, value in op.node_def.attr.items() if key != "_class"}
        with tf.device(op.device):
            copy = graph.create_op(
                op.type,
                inputs,
                dtypes=[output.dtype for output in op.outputs],
                name=op.name.replace("/", "_"),
                attrs=attrs,
            )
    return copy, placeholders, written


def _shaped(value: Any, placeholder: Any) -> Any:
    """``value`` in the placeholder's shape when it holds as many numbers (a tower's gradient
    fed where the average of every tower's went: ``ExpandDims`` took it to ``[1, ...]``)."""
    import numpy as np

    shape = placeholder.shape
    if shape.rank is None or not shape.is_fully_defined():
        return value
    array = np.asarray(value)
    wanted = tuple(shape.as_list())
    if array.shape != wanted and array.size == int(np.prod(wanted)):
        return array.reshape(wanted)
    return array
