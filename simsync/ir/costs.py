"""Expected durations of ops and transfers, from the graph alone (no randomness).

The engine draws random compute times; these functions give their expectations, which the
critical path and the tests use.
"""

from __future__ import annotations

from simsync.ir.graph import Graph
from simsync.ir.objects import Link, Op, Tensor

__all__ = [
    "communication_time",
    "expected_duration",
    "op_speed",
    "ring_allreduce_time",
    "tensor_link",
    "transfer_duration",
]


def ring_allreduce_time(participants: int, nbytes: int, link: Link) -> float:
    """Seconds for a ring all-reduce of ``nbytes`` per participant.

    Reduce-scatter then all-gather: ``2 (n - 1)`` steps, each sending ``nbytes / n`` to the
    next device on the ring and paying one latency.

    Examples
    --------
    >>> ring_allreduce_time(4, 4 * 10**9, Link(bytes_per_second=1e9))
    6.0
    >>> ring_allreduce_time(1, 10**9, Link(bytes_per_second=1e9))
    0.0
    """
    if participants <= 1:
        return 0.0
    steps = 2 * (participants - 1)
    return steps * (link.latency + link.transfer_time(nbytes) / participants)


def transfer_duration(graph: Graph, tensor: Tensor) -> float:
    """Seconds from the producer's end to the tensor's arrival (0 on one device).

    >>> from simsync.ir.objects import Device
    >>> g = Graph(link=Link(bytes_per_second=1e6, latency=0.001))
    >>> for d in ("/cpu:0", "/gpu:0"): g.add_device(Device(d))
    >>> a, b = g.add_op(Op("a", "read", "/cpu:0")), g.add_op(Op("b", "forward", "/gpu:0"))
    >>> g.connect(a, b, nbytes=1000)
    >>> transfer_duration(g, g.tensor("a", "b"))
    0.002
    """
    if not crosses_devices(graph, tensor):
        return 0.0
    link = tensor_link(graph, tensor)
    return link.transfer_time(tensor.nbytes) + link.latency


def tensor_link(graph: Graph, tensor: Tensor) -> Link:
    """The link ``tensor`` crosses: the one between its producer's and consumer's hosts."""
    return graph.link_between(graph.op(tensor.src).device, graph.op(tensor.dst).device)


def crosses_devices(graph: Graph, tensor: Tensor) -> bool:
    """Whether ``tensor`` must travel: control edges and same-device edges do not."""
    if tensor.control:
        return False
    src, dst = graph.op(tensor.src), graph.op(tensor.dst)
    return src.device not in dst.devices and dst.device not in src.devices


def op_speed(graph: Graph, op: Op) -> float:
    """The speed ``op`` computes at: its slowest participant's."""
    return min(graph.devices[d].speed for d in op.devices)


def communication_time(graph: Graph, op: Op) -> float:
    """Seconds a collective (an op with participants) spends communicating around its ring;
    0 for other ops."""
    if not op.participants:
        return 0.0
    return ring_allreduce_time(len(op.devices), op.nbytes, graph.link)


def expected_duration(graph: Graph, op: Op) -> float:
    """Expected seconds ``op`` occupies its device(s): its cost at the slowest participant's
    speed, plus its fixed overhead, plus the ring time for a collective. The engine charges the
    same, with a drawn cost in place of the expected one."""
    return op.cost.expected / op_speed(graph, op) + op.cost.overhead + communication_time(graph, op)
