"""The dataflow graph as Graphviz DOT text, for ``dot -Tsvg`` or any DOT viewer.

One ``subgraph cluster_<i>`` per device holds the ops placed on it; a collective op, which runs
on several devices at once, sits outside the clusters. Sync points are red double octagons.
An edge whose tensor crosses devices is labelled with its size; control edges are dashed.
A resource (a token queue, an accumulator) is a cylinder in its device's cluster, with a
dotted arrow from each op that puts into it and to each op that gets from it, named by the
action (push, take, enqueue, dequeue).
"""

from __future__ import annotations

from collections import defaultdict

from simsync.ir import Graph, Op, crosses_devices
from simsync.kinds import kind_of, resource_users, sync_points
from simsync.viz.graph_text import format_devices, lane_of, short_name
from simsync.viz.timeline import device_sort_key, kind_style

__all__ = ["human_bytes", "quote", "to_dot"]

SYNC_STYLE = (
    'shape=doubleoctagon, style="filled,bold", color=red, fontcolor=red, '
    'fillcolor="#ffe0e0", penwidth=2'
)


def quote(text: str) -> str:
    """A DOT quoted string: backslashes and double quotes escaped, newlines as ``\\n``.

    >>> print(quote('tower_0/loss'), quote('say "hi"'), quote("two\\nlines"))
    "tower_0/loss" "say \\"hi\\"" "two\\nlines"
    """
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n") + '"'


def human_bytes(nbytes: int) -> str:
    """A byte count in decimal units.

    >>> human_bytes(0), human_bytes(1320), human_bytes(25_000_000)
    ('0 B', '1.3 KB', '25 MB')
    """
    size = float(nbytes)
    for unit in ("B", "KB", "MB", "GB"):
        if unit == "B" and size < 1000:
            return f"{nbytes} B"
        if size < 1000 or unit == "GB":
            return f"{size:.1f} {unit}" if size < 10 else f"{size:.0f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


def _node(op: Op, is_sync: bool) -> str:
    label = f"{short_name(op)}\n{op.kind}"
    if op.tower is not None:
        label += f" · {lane_of(op)}"
    if len(op.devices) > 1:
        label += f"\non {format_devices(op.devices)}"
    if is_sync:
        label += "\nSYNC POINT"
        return f"{quote(op.name)} [label={quote(label)}, {SYNC_STYLE}];"
    fill = kind_style(op.kind).hex + "40"
    return f'{quote(op.name)} [label={quote(label)}, fillcolor="{fill}"];'


#: A resource's colours in every picture of a graph (DOT here, the PNG too)
RESOURCE_FILL, RESOURCE_EDGE = "#fff4cc", "#b08800"
RESOURCE_STYLE = (
    f'shape=cylinder, style=filled, fillcolor="{RESOURCE_FILL}", color="{RESOURCE_EDGE}"'
)


def resource_id(graph: Graph, name: str) -> str:
    """The DOT identifier of resource ``name``: its name, suffixed until no op has it."""
    node = f"{name} (resource)"
    while node in graph.nx:
        node += "'"
    return quote(node)


def _resource_node(graph: Graph, name: str) -> str:
    resource = graph.resource(name)
    label = f"{name}\n{resource.noun}"
    if resource.note:
        label += f"\n{resource.note}"
    return f"{resource_id(graph, name)} [label={quote(label)}, {RESOURCE_STYLE}];"


def _resource_edges(graph: Graph) -> list[str]:
    """A dotted arrow from each op that puts into a resource, and to each that gets."""
    lines = []
    for name, users in resource_users(graph).items():
        node = resource_id(graph, name)
        for ops, puts in ((users.puts, True), (users.gets, False)):
            for op in ops:
                action = kind_of(graph.op(op).kind).action
                label = quote(action.name if action else "")
                style = f'style=dotted, color="{RESOURCE_EDGE}", label={label}'
                src, dst = (quote(op), node) if puts else (node, quote(op))
                lines.append(f"  {src} -> {dst} [{style}];")
    return lines


def to_dot(graph: Graph) -> str:
    """The DOT text of ``graph``: a ``digraph`` with one cluster per device that hosts ops.

    Every identifier is quoted, so names with ``/`` and ``:`` are safe.

    Examples
    --------
    >>> from simsync.patterns import tiny_example
    >>> dot = to_dot(tiny_example())
    >>> dot.splitlines()[0], dot.count("subgraph cluster_"), "doubleoctagon" in dot
    ('digraph "tiny" {', 3, True)
    >>> '"tower_0/gradients" -> "average_gradients" [label="1.3 KB"' in dot
    True
    """
    syncs = set(sync_points(graph))
    ops = list(graph.ops())
    on_device: dict[str, list[Op]] = defaultdict(list)  # one pass, not one per device
    for op in ops:
        if len(op.devices) == 1:
            on_device[op.device].append(op)
    held: dict[str, list[str]] = defaultdict(list)  # the resources on each device
    for name, resource in graph.resources.items():
        held[resource.device].append(name)
    placed = sorted(set(on_device) | set(held), key=device_sort_key)
    lines = [
        f"digraph {quote(graph.name)} {{",
        "  rankdir=TB;",
        "  compound=true;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    for number, device in enumerate(placed):
        lines.append(f"  subgraph cluster_{number} {{")
        lines.append(f'    label={quote(device)}; style="rounded,dashed"; color=gray40;')
        lines += [f"    {_node(op, op.name in syncs)}" for op in on_device[device]]
        lines += [f"    {_resource_node(graph, name)}" for name in held[device]]
        lines.append("  }")
    lines += [f"  {_node(op, op.name in syncs)}" for op in ops if len(op.devices) > 1]
    for src, dst in dict.fromkeys((t.src, t.dst) for t in graph.edges()):
        tensor = graph.tensor(src, dst)
        attributes = []
        if tensor.control:
            attributes.append("style=dashed")
        elif crosses_devices(graph, tensor):
            attributes += [f"label={quote(human_bytes(tensor.nbytes))}", "penwidth=1.5"]
        suffix = f" [{', '.join(attributes)}]" if attributes else ""
        lines.append(f"  {quote(src)} -> {quote(dst)}{suffix};")
    lines += _resource_edges(graph)
    lines.append("}")
    return "\n".join(lines) + "\n"
