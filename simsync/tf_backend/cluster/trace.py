"""A real cluster run as the Trace every executor emits, mapped onto the IR of the pattern.

The real ``SyncReplicasOptimizer`` names its nodes itself, so its nodes map to the IR's ops by
what TensorFlow calls them (:data:`NODE_OPS`): in a worker's run, ``read/...`` is the run's read
of the variables, the model's ops its forward pass, ``gradients/...`` its backward pass,
``sync_replicas/ResourceAccumulatorApplyGradient_k`` its push to the k-th variable's
accumulator and ``sync_token_q_Dequeue`` its dequeue of a token; in the queue runner's run,
``ResourceAccumulatorTakeGradient_k`` the take from the k-th accumulator,
``GradientDescent/update_v/...`` the update of variable v, ``GradientDescent`` the global
step's increment after them, and ``sync_token_q_EnqueueMany`` the tokens. The
k-th variable is the k-th trainable one, in the order the optimizer was given them (the IR's).

The ledger becomes the replay's input: a :class:`~simsync.trace.Read` per worker run (the
global step whose values it read), an :class:`~simsync.trace.Update` per apply (one per global
step), and the accumulators' and the queue's events as the cluster recorded them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from simsync.ir import Graph
from simsync.patterns.sync_replicas import (
    APPLY_GRADIENTS,
    ENQUEUE_TOKENS_OP,
    QUEUE_RUNNER,
    update_op,
)
from simsync.tf_backend.cluster.ledger import NodeTiming
from simsync.trace import OpRecord, Read, Trace, Update

__all__ = ["NODE_OPS", "cluster_trace", "map_node"]

#: TensorFlow node names (a regular expression on the node's name) -> the IR op they belong to,
#: as a template over ``{scope}`` (the client) and ``{variable}`` (from the ``_k`` suffix).
NODE_OPS: tuple[tuple[str, str], ...] = (
    (r"^read/", "{scope}/read_variables"),
    (r"^gradients/", "{scope}/gradients"),
    (r"^sync_replicas/ResourceAccumulatorApplyGradient(?P<k>_\d+)?$",
     "{scope}/push_gradients/{variable}"),
    (r"^sync_token_q_Dequeue$", "{scope}/dequeue_token"),
    (r"^sync_replicas/ResourceAccumulatorTakeGradient(?P<k>_\d+)?$",
     "sync_replicas/take_gradients/{variable}"),
    (r"^GradientDescent/update_(?P<v>.+)/ResourceApplyGradientDescent$",
     update_op("{named}")),
    (r"^GradientDescent(/update)?$", APPLY_GRADIENTS),
    (r"^sync_token_q_EnqueueMany$", ENQUEUE_TOKENS_OP),
    (r"^(MatMul|add|Relu|Max|sub|Exp|Sum|Log|GatherV2|Neg|Mean|Square)(_\d+)?$", "{scope}/loss"),
)  # fmt: skip
_COMPILED = [(re.compile(pattern), template) for pattern, template in NODE_OPS]


def map_node(node: str, client: str, variables: list[str]) -> str | None:
    """The IR op a TensorFlow node of ``client``'s run belongs to (None: infrastructure).

    >>> map_node("sync_replicas/ResourceAccumulatorApplyGradient_1", "worker_2", ["w", "b"])
    'worker_2/push_gradients/b'
    >>> map_node("gradients/MatMul_grad/MatMul", "worker_0", ["w"]), map_node("Const", "w", [])
    ('worker_0/gradients', None)
    """
    for pattern, template in _COMPILED:
        match = pattern.match(node)
        if match:
            suffix = match.groupdict().get("k")
            variable = (
                variables[int(suffix[1:]) if suffix else 0] if "{variable}" in template else ""
            )
            named = match.groupdict().get("v") or ""
            return template.format(scope=client, variable=variable, named=named)
    return None


def cluster_trace(run: Any, graph: Graph) -> Trace:
    """The Trace of cluster run ``run`` over the IR ``graph`` of the same scenario."""
    variables = [name for name, v in graph.variables.items() if v.trainable]
    trace = Trace(source="tensorflow cluster", steps=list(run.trace.steps))
    trace.resources = list(run.trace.resources)
    trace.ops = _op_records(run.nodes, graph, variables)
    for (client, step), versions in sorted(run.read_versions.items()):
        read = f"{client}/read_variables"
        if read in graph.nx and all(versions.get(v, -1) >= 0 for v in variables):
            reads = graph.op(read).reads
            trace.reads.append(Read(client, step, read, tuple(versions[v] for v in reads)))
    # the applies TensorFlow really ran: an update of a variable, or the global step's
    # increment, for every node of it in a queue runner's run (run k made global step k), in
    # the order they ended. Each variable's update waits only for its own take, so one can land
    # while another's take still waits for pushes, and a worker can read the first variable's
    # new value and push to the second's take: the ledger must make that value first.
    ran = {(r.client, r.step, r.op): r for r in trace.ops if r.client == QUEUE_RUNNER}
    for record in run.trace.steps:
        if record.client != QUEUE_RUNNER:
            continue
        before = record.step - 1
        spans = [ran.get((record.client, record.step, update_op(v))) for v in variables]
        applies = sorted((s for s in spans if s is not None), key=lambda s: s.end)
        last = ran.get((record.client, record.step, APPLY_GRADIENTS))
        for span in [*applies, *([last] if last is not None else [])]:
            trace.updates.append(Update(record.client, record.step, span.op, before, before,
                                        True, span.end))  # fmt: skip
    trace.params = dict(run.params)
    return trace


def _op_records(nodes: list[NodeTiming], graph: Graph, variables: list[str]) -> list[OpRecord]:
    """One record per IR op and run: from its first node's start to its last node's end."""
    spans: dict[tuple[str, int, str], list[float]] = defaultdict(lambda: [float("inf"), 0.0])
    for node in nodes:
        op = map_node(node.node, node.client, variables)
        if op is None or op not in graph.nx:
            continue
        span = spans[node.client, node.step, op]
        span[0], span[1] = min(span[0], node.start), max(span[1], node.end)
    return [
        OpRecord(op, graph.op(op).kind, graph.op(op).devices, client, step, start, start, end)
        for (client, step, op), (start, end) in sorted(spans.items(), key=lambda kv: kv[1][0])
    ]
