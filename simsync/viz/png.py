"""The dataflow graph as a PNG picture, drawn with matplotlib alone (no Graphviz binaries).

Columns are topological generations, horizontal bands are lanes (one per tower, one for the
shared ops); ops are boxes coloured by kind, tensors are arrows (dashed when they cross
devices), sync points are red with a ``SYNC POINT`` tag. Resources (token queues,
accumulators) sit in a band of their own below the lanes, under the ops that use them, with a
dotted arrow from each op that puts into one and to each op that gets from it. matplotlib is
imported only when a picture is drawn, and only its Agg canvas: no pyplot state, no global
backend switch.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from simsync.files import atomic_writer
from simsync.ir import Graph, Op, crosses_devices, generations
from simsync.kinds import resource_users, sync_points
from simsync.viz.dot import RESOURCE_EDGE, RESOURCE_FILL
from simsync.viz.graph_text import (
    PNG_LANES,
    format_devices,
    lane_of,
    lane_unit,
    shared_lane_title,
    short_name,
)
from simsync.viz.timeline import device_sort_key, kind_style, legend_order
from simsync.words import plural

__all__ = ["write_png"]

_SLOT = 1.0  # vertical units per stacked op
_BOX_HEIGHT = 0.62
_BOX_WIDTH = 0.84  # of a generation column


@dataclass
class _Layout:
    """Where every drawn op sits, in data units: x = generation, y = slot (downwards)."""

    lanes: list[tuple[str, float, float]] = field(default_factory=list)  # label, top, bottom
    position: dict[str, tuple[float, float]] = field(default_factory=dict)
    resources: dict[str, tuple[float, float]] = field(default_factory=dict)
    hidden: int = 0
    columns: int = 0


def _lane_key(op: Op) -> int | None:
    return op.tower


def _layout(graph: Graph, max_lanes: int) -> _Layout:
    """Stack each (generation, lane) cell's ops inside the lane's band, lanes top to bottom."""
    towers = graph.towers
    shown = towers[:max_lanes]
    keys: list[int | None] = list(shown)
    if any(op.tower is None for op in graph.ops()):
        keys.append(None)
    rows = generations(graph)
    cells: dict[tuple[int, int | None], list[str]] = defaultdict(list)
    for x, row in enumerate(rows):
        for name in row:
            key = _lane_key(graph.op(name))
            if key in keys:
                cells[x, key].append(name)
    layout = _Layout(hidden=len(towers) - len(shown), columns=len(rows))
    unit = lane_unit(graph)
    top = 0.0
    for key in keys:
        depth = max((len(v) for (_, k), v in cells.items() if k == key), default=1)
        label = "shared" if key is None else f"{unit}_{key}"
        layout.lanes.append((label, top, top + depth * _SLOT))
        for (x, k), names in cells.items():
            if k == key:
                for i, name in enumerate(names):
                    layout.position[name] = (float(x), top + (i + 0.5) * _SLOT)
        top += depth * _SLOT
    _place_resources(graph, layout, top)
    return layout


#: The lane label of the band that holds the resources.
RESOURCES = "resources"


def _place_resources(graph: Graph, layout: _Layout, top: float) -> None:
    """Each resource below the drawn ops that use it (at their mean generation), in a band
    of its own; resources that would overlap go on rows of their own."""
    if not graph.resources:
        return
    rows: dict[int, int] = defaultdict(int)  # per column: resources placed there
    for name, users in resource_users(graph).items():
        xs = [layout.position[op][0] for op in (*users.puts, *users.gets) if op in layout.position]
        x = round(sum(xs) / len(xs)) if xs else 0
        layout.resources[name] = (float(x), top + (rows[x] + 0.5) * _SLOT)
        rows[x] += 1
    layout.lanes.append((RESOURCES, top, top + max(rows.values()) * _SLOT))


def _lane_label(graph: Graph, layout: _Layout, label: str) -> str:
    """The lane's name and its device: where a tower computes (its ops with drawn compute
    time; else its usual device), or all of the shared ops' devices."""
    ops = [graph.op(name) for name in layout.position if _lane_name(graph.op(name)) == label]
    computing = [op for op in ops if op.cost.group is not None] or ops
    counts = Counter(d for op in computing for d in op.devices)
    if label == RESOURCES:
        return "resources\n(queues, accumulators)"
    if not counts:
        return label
    if label == "shared":
        title = shared_lane_title(graph)
        return f"{title}\n{format_devices(sorted(counts, key=device_sort_key))}"
    return f"{label}\n{counts.most_common(1)[0][0]}"


_lane_name = lane_of


def _draw_lanes(ax: Any, graph: Graph, layout: _Layout) -> None:
    for i, (label, top, bottom) in enumerate(layout.lanes):
        ax.axhspan(top, bottom, color="#f2f2f2" if i % 2 == 0 else "white", zorder=0)
        ax.text(
            -0.58,
            (top + bottom) / 2,
            _lane_label(graph, layout, label),
            ha="right",
            va="center",
            fontsize=8,
            fontweight="bold",
        )
    for x in range(layout.columns):
        ax.text(x, -0.15, f"gen {x}", ha="center", va="bottom", fontsize=7, color="#555555")


def _box(ax: Any, x: float, y: float, face: str, edge: str, width: float, rounding: float) -> None:
    """One op's or resource's rounded box, centred on ``(x, y)``."""
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(
        FancyBboxPatch(
            (x - _BOX_WIDTH / 2, y - _BOX_HEIGHT / 2),
            _BOX_WIDTH,
            _BOX_HEIGHT,
            boxstyle=f"round,pad=0.02,rounding_size={rounding}",
            facecolor=face,
            edgecolor=edge,
            linewidth=width,
            zorder=3,
        )
    )


def _draw_ops(ax: Any, graph: Graph, layout: _Layout, syncs: set[str]) -> None:
    for name, (x, y) in layout.position.items():
        op = graph.op(name)
        is_sync = name in syncs
        face = "#ffd6d6" if is_sync else kind_style(op.kind).hex + "55"
        edge = "red" if is_sync else kind_style(op.kind).hex
        _box(ax, x, y, face, edge, 2.4 if is_sync else 1.0, rounding=0.08)
        label = f"{'◆ ' if is_sync else ''}{short_name(op)}\n{format_devices(op.devices)}"
        ax.text(
            x,
            y,
            label,
            ha="center",
            va="center",
            fontsize=7,
            zorder=4,
            color="#b00000" if is_sync else "black",
            fontweight="bold" if is_sync else "normal",
        )
        if is_sync:
            ax.text(
                x,
                y - _BOX_HEIGHT / 2 - 0.04,
                "SYNC POINT",
                ha="center",
                va="bottom",
                fontsize=6.5,
                color="red",
                fontweight="bold",
                zorder=4,
            )


def _draw_tensors(ax: Any, graph: Graph, layout: _Layout) -> None:
    from matplotlib.patches import FancyArrowPatch

    for src, dst in dict.fromkeys((t.src, t.dst) for t in graph.edges()):
        if src not in layout.position or dst not in layout.position:
            continue
        (x0, y0), (x1, y1) = layout.position[src], layout.position[dst]
        tensor = graph.tensor(src, dst)
        travels = crosses_devices(graph, tensor)
        ax.add_patch(
            FancyArrowPatch(
                (x0 + _BOX_WIDTH / 2, y0),
                (x1 - _BOX_WIDTH / 2, y1),
                arrowstyle="-|>",
                mutation_scale=9,
                linewidth=1.0,
                color="#444444" if travels else "#888888",
                linestyle=(0, (4, 2)) if travels or tensor.control else "solid",
                zorder=2,
                shrinkA=1,
                shrinkB=1,
            )
        )


def _draw_resources(ax: Any, graph: Graph, layout: _Layout) -> None:
    """Each resource as a rounded yellow box with what it is; dotted arrows from the ops that
    put into it and to those that get from it, named by the action."""
    from matplotlib.patches import FancyArrowPatch

    users = resource_users(graph)
    for name, (x, y) in layout.resources.items():
        resource = graph.resource(name)
        _box(ax, x, y, RESOURCE_FILL, RESOURCE_EDGE, 1.4, rounding=0.25)
        noun = resource.noun.removeprefix("a ").removeprefix("an ")
        ax.text(x, y, f"{name}\n({noun})", ha="center", va="center", fontsize=6.5, zorder=4)
        for ops, puts in ((users[name].puts, True), (users[name].gets, False)):
            for op in ops:
                if op not in layout.position:
                    continue
                ends = [layout.position[op], (x, y)]
                (x0, y0), (x1, y1) = ends if puts else ends[::-1]
                ax.add_patch(
                    FancyArrowPatch(
                        (x0, y0 + (_BOX_HEIGHT / 2 if y1 > y0 else -_BOX_HEIGHT / 2)),
                        (x1, y1 - (_BOX_HEIGHT / 2 if y1 > y0 else -_BOX_HEIGHT / 2)),
                        arrowstyle="-|>",
                        mutation_scale=8,
                        linewidth=0.9,
                        color=RESOURCE_EDGE,
                        linestyle=(0, (1, 1.5)),
                        zorder=2,
                        shrinkA=1,
                        shrinkB=1,
                    )
                )


def _draw_legend(fig: Any, ax: Any, graph: Graph, layout: _Layout, syncs: set[str]) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    kinds = {graph.op(n).kind for n in layout.position}
    handles: list[Any] = [
        Patch(facecolor=kind_style(k).hex + "55", edgecolor=kind_style(k).hex, label=k)
        for k in legend_order(kinds)
    ]
    if syncs & set(layout.position):
        handles.append(
            Patch(
                facecolor="#ffd6d6",
                edgecolor="red",
                linewidth=2.4,
                label=f"◆ sync point: the {lane_unit(graph)}s meet here",
            )
        )
    handles.append(
        Line2D([], [], color="#444444", linestyle=(0, (4, 2)), label="tensor crossing devices")
    )
    if layout.resources:
        handles.append(
            Line2D([], [], color=RESOURCE_EDGE, linestyle=(0, (1, 1.5)), label="put / get")
        )
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.02),
        ncol=min(len(handles), 4),
        fontsize=7,
        frameon=False,
    )
    if layout.hidden:
        fig.text(
            0.5,
            1 - 0.42 / fig.get_figheight(),
            f"… and {layout.hidden} more lanes, not drawn (the same ops on their own devices)",
            ha="center",
            va="top",
            fontsize=9,
            style="italic",
            color="#555555",
        )


def write_png(graph: Graph, path: str | os.PathLike[str], max_lanes: int = PNG_LANES) -> None:
    """Draw ``graph`` to the PNG file ``path``: generations left to right, towers as lanes.

    At most ``max_lanes`` tower lanes are drawn (plus the shared lane); a note counts the rest.
    The figure grows with the graph, so 1-8 towers stay legible.

    Examples
    --------
    >>> import os, tempfile
    >>> from simsync.patterns import tiny_example
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny.png")
    >>> write_png(tiny_example(), path)
    >>> open(path, "rb").read(8) == b"\\x89PNG\\r\\n\\x1a\\n"
    True
    """
    import matplotlib

    # names are text, not TeX: a "$" in a scenario's name must not start a formula
    with matplotlib.rc_context({"text.parse_math": False}):
        _draw(graph, path, max_lanes)


def _draw(graph: Graph, path: str | os.PathLike[str], max_lanes: int) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    layout = _layout(graph, max(max_lanes, 1))
    syncs = set(sync_points(graph))
    longest = max((len(short_name(graph.op(n))) for n in layout.position), default=8)
    columns = max(layout.columns, 1)
    height = layout.lanes[-1][2] if layout.lanes else 1.0
    labels = [_lane_label(graph, layout, label) for label, _, _ in layout.lanes]
    widest = max((len(line) for text in labels for line in text.splitlines()), default=8)
    # room for the lanes' labels: about 0.075 in a character at 8 points, bold
    left, right, top, bottom = (
        max(1.05, 0.075 * widest + 0.3),
        0.15,
        0.95 if layout.hidden else 0.7,
        0.75,
    )
    plot_width = max(1.3, 0.075 * longest + 0.35) * columns
    plot_height = 0.62 * (height + 0.35)
    fig = Figure(figsize=(left + plot_width + right, top + plot_height + bottom), dpi=130)
    FigureCanvasAgg(fig)
    width_in, height_in = fig.get_figwidth(), fig.get_figheight()
    ax = fig.add_axes(
        (left / width_in, bottom / height_in, plot_width / width_in, plot_height / height_in)
    )
    ax.set_xlim(-0.55, columns - 0.45)
    ax.set_ylim(height, -0.35)
    ax.axis("off")
    _draw_lanes(ax, graph, layout)
    _draw_tensors(ax, graph, layout)
    _draw_ops(ax, graph, layout, syncs)
    _draw_resources(ax, graph, layout)
    _draw_legend(fig, ax, graph, layout, syncs)
    towers = len(graph.towers)
    fig.suptitle(
        f"Dataflow graph '{graph.name}': {len(graph)} ops, {plural(towers, lane_unit(graph))}"
        + (f" ({towers - layout.hidden} drawn)" if layout.hidden else ""),
        y=1 - 0.12 / height_in,
        va="top",
        fontsize=11,
        fontweight="bold",
    )
    with atomic_writer(path, binary=True) as file:
        fig.savefig(file, format="png")
