"""The dataflow graph in the terminal, with towers as lanes.

One column per tower (``tower_0``, ``tower_1``, ...) and one for the shared ops (those of no
tower: ``average_gradients`` on ``/cpu:0``, a collective ``allreduce_gradients``); one row per
topological generation, so everything in a row could run at the same time. A sync point is
marked ``◆`` with the towers it waits for. Lanes that do not fit the console are summarised in
an elision column.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from simsync.ir import Graph, Op, generations, lane_unit, op_speed, run_orders
from simsync.kinds import input_towers, resource_users, sync_points
from simsync.viz.fold import ops_in_box
from simsync.viz.timeline import SYNC_MARK, kind_style, legend_order, wrap_items
from simsync.words import plural

__all__ = [
    "GraphView",
    "format_devices",
    "lane_of",
    "lane_unit",
    "shared_lane_title",
    "short_name",
    "tower_range",
]

_GEN_WIDTH = 6  # "gen" column: three characters, padding and a border
#: The tower lanes a graph picture (``--format png``) draws at most.
PNG_LANES = 8


def short_name(op: Op) -> str:
    """The op's name without its lane's scope (``tower_<i>/``, ``worker_<i>/``).

    >>> short_name(Op("tower_3/loss", "forward", "/gpu:3", tower=3))
    'loss'
    >>> short_name(Op("worker_1/apply_gradients", "apply", "/cpu:0", tower=1))
    'apply_gradients'
    >>> short_name(Op("average_gradients", "aggregate", "/cpu:0"))
    'average_gradients'
    """
    head, _, rest = op.name.partition("/")
    if op.tower is not None and rest and head.endswith(f"_{op.tower}"):
        return rest
    return op.name


def lane_of(op: Op) -> str:
    """The name of the op's lane: its scope (``tower_2``, ``worker_2``), or ``shared``.

    >>> lane_of(Op("worker_2/loss", "forward", "/gpu:2", tower=2))
    'worker_2'
    """
    if op.tower is None:
        return "shared"
    head, _, rest = op.name.partition("/")
    return head if rest and head.endswith(f"_{op.tower}") else f"tower_{op.tower}"


def format_devices(devices: Iterable[str]) -> str:
    """Devices in short form: a run of numbered devices of one kind becomes a range.

    >>> format_devices(["/gpu:0", "/gpu:1", "/gpu:2"]), format_devices(["/cpu:0"])
    ('/gpu:0-2', '/cpu:0')
    >>> format_devices(["/gpu:0", "/gpu:2"])
    '/gpu:0,/gpu:2'
    """
    names = list(devices)
    parts = [re.match(r"^(.*?)(\d+)$", d) for d in names]
    if len(names) > 1 and all(parts):
        heads = {p.group(1) for p in parts if p}
        numbers = [int(p.group(2)) for p in parts if p]
        if len(heads) == 1 and numbers == list(range(numbers[0], numbers[0] + len(numbers))):
            return f"{heads.pop()}{numbers[0]}-{numbers[-1]}"
    return ",".join(names)


def tower_range(towers: Iterable[int], unit: str = "tower") -> str:
    """Towers in short form: ``tower_0..3`` for a contiguous run, else a list.

    >>> tower_range([0, 1, 2, 3]), tower_range([1, 4]), tower_range([2], "worker")
    ('tower_0..3', 'tower_1, tower_4', 'worker_2')
    """
    ordered = sorted(towers)
    if len(ordered) > 1 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"{unit}_{ordered[0]}..{ordered[-1]}"
    return ", ".join(f"{unit}_{t}" for t in ordered)


def _elision_width(towers: int) -> int:
    """Characters the elision column needs: ``… N more`` (``towers`` wraps below), ops count,
    padding and a border."""
    return max(len(f"… {towers} more"), len(f"+{2 * towers} ops")) + 3


class GraphView:
    """A rich renderable of ``graph``: towers as lanes, topological generations as rows.

    Shows at most ``max_towers`` tower lanes, fewer if the console is too narrow, and an
    elision column counting the ops of the towers left out. Sync points are marked ``◆`` with
    the towers they wait for; a legend explains the marker.

    Examples
    --------
    >>> import io
    >>> from simsync.patterns import tiny_example
    >>> out = io.StringIO()
    >>> Console(file=out, width=64, color_system=None).print(GraphView(tiny_example()))
    >>> print("\\n".join(line.rstrip() for line in out.getvalue().splitlines()))
               Graph 'tiny': 10 ops, 3 devices, 2 towers
    ┌─────┬────────────────┬────────────────┬─────────────────────┐
    │ gen │ tower_0        │ tower_1        │ shared              │
    ├─────┼────────────────┼────────────────┼─────────────────────┤
    │   0 │ read_variables │ read_variables │                     │
    │     │   /cpu:0       │   /cpu:0       │                     │
    │     │ dequeue        │ dequeue        │                     │
    │     │   /gpu:0       │   /gpu:1       │                     │
    ├─────┼────────────────┼────────────────┼─────────────────────┤
    │   1 │ loss           │ loss           │                     │
    │     │   /gpu:0       │   /gpu:1       │                     │
    ├─────┼────────────────┼────────────────┼─────────────────────┤
    │   2 │ gradients      │ gradients      │                     │
    │     │   /gpu:0       │   /gpu:1       │                     │
    ├─────┼────────────────┼────────────────┼─────────────────────┤
    │   3 │                │                │ ◆ average_gradients │
    │     │                │                │   /cpu:0            │
    │     │                │                │   SYNC POINT: waits │
    │     │                │                │   for tower_0..1    │
    ├─────┼────────────────┼────────────────┼─────────────────────┤
    │   4 │                │                │ apply_gradients     │
    │     │                │                │   /cpu:0            │
    └─────┴────────────────┴────────────────┴─────────────────────┘
      rows: topological generations; a row's ops may run at once
    names coloured by kind:  read  dequeue  forward  backward
    aggregate  apply
    ◆ SYNC POINT: an op whose inputs come from more than one tower;
    it cannot start until the last tower's input has arrived.
    """

    def __init__(self, graph: Graph, max_towers: int = 4, keep: Iterable[int] = ()) -> None:
        self.graph, self.max_towers = graph, max(max_towers, 1)
        #: towers never folded: those on the slowest devices (a straggler: the one a lesson
        #: asks about) and ``keep``; and whether names are cut at their scopes
        #: (``batch_norm/`` on a line of its own) to fit the width
        kept = set(keep) | set(slow_towers(graph))
        self.keep = [t for t in graph.towers if t in kept]
        self.compact = False
        #: in a compact view, the longest line a name may take (None: cut at scopes only)
        self.cap: int | None = None
        self.unit = lane_unit(graph)
        self.rows = generations(graph)
        self.sync_points = set(sync_points(graph))
        #: per sync point, the towers it waits for (through tensors or a resource)
        self.meets = {p: set(input_towers(graph, p).values()) for p in self.sync_points}
        self.towers = graph.towers
        self.cells: list[dict[int | None, list[Op]]] = []
        for row in self.rows:
            lanes: dict[int | None, list[Op]] = defaultdict(list)
            for name in row:
                op = graph.op(name)
                lanes[op.tower].append(op)
            self.cells.append(lanes)
        self.shared_title = shared_lane_title(graph)
        # shared ops all in one scope (``sync_replicas/``): shown without it, the scope in the title
        shared = [op.name for op in graph.ops() if op.tower is None]
        heads = {name.partition("/")[0] for name in shared if "/" in name}
        self.shared_scope = (
            f"{heads.pop()}/" if len(heads) == 1 and all("/" in name for name in shared) else ""
        )

    def _lines(self, op: Op) -> list[tuple[str, str]]:
        """The lines of one op's entry: name (kind colour), device, and the sync note."""
        style = kind_style(op.kind).color
        name = short_name(op)
        if op.tower is None and self.shared_scope and name.startswith(self.shared_scope):
            name = name[len(self.shared_scope) :]
        if op.name not in self.sync_points:
            return [*self._name(name, style), *self._note(format_devices(op.devices), "dim")]
        towers = tower_range(self.meets[op.name], self.unit)
        if op.resource and 0 < op.amount < len(self.meets[op.name]):  # a take of R of N
            towers = f"{op.amount} of {towers}"
        return [
            *self._name(f"{SYNC_MARK} {short_name(op)}", "bold red"),
            *self._note(format_devices(op.devices), "dim"),
            *self._note("SYNC POINT: waits", "bold red"),
            *self._note(f"for {towers}", "red"),
        ]

    def _note(self, note: str, style: str) -> list[tuple[str, str]]:
        """A line under an op's name, indented; cut after a ``/`` or a space as a name is
        when the view has a cap (``/job:worker/`` and ``task:0`` on lines of their own)."""
        cap = None if self.cap is None else self.cap - 2
        return [(f"  {line}", style) for line in _wrapped(note, cap)]

    def _name(self, name: str, style: str) -> list[tuple[str, str]]:
        """An op's name on one line, or, when the view is compact, cut after each ``/`` and
        then, where a line is longer than the view's cap, after a ``_`` or a space."""
        if not self.compact:
            return [(name, style)]
        parts = re.findall(r"[^/]*/|[^/]+$", name)
        return [(line, style) for part in parts for line in _wrapped(part, self.cap)]

    def _cell(self, ops: list[Op]) -> Text:
        text = Text()
        for i, op in enumerate(ops):
            for j, (line, style) in enumerate(self._lines(op)):
                if i or j:
                    text.append("\n")
                text.append(line, style=style)
        return text

    def _lane_width(self, lane: int | None) -> int:
        """Characters the lane needs: its longest line, padding and a border."""
        longest = max(
            (
                len(line)
                for cells in self.cells
                for op in cells.get(lane, [])
                for line, _ in self._lines(op)
            ),
            default=0,
        )
        return max(longest, len(f"{self.unit}_{lane}"), 6) + 3

    def _fit(self, width: int) -> list[int]:
        """The towers whose lanes fit into ``width`` beside the shared lane (at least one):
        the kept ones first, then the others in order. Names are cut at their scopes when that
        shows more towers; where even that leaves fewer than two towers' lanes (the lanes a
        lesson teaches), long names are cut further, to a width that two lanes fit."""
        self.compact, self.cap = False, None
        want = min(len(self.towers), self.max_towers)
        shown = self._fit_lanes(width)
        if len(shown) < want:
            self.compact = True
            compact = self._fit_lanes(width)
            if len(compact) < min(want, 2):
                self.cap = self._cap(width, min(want, 2))
                compact = self._fit_lanes(width)
            if len(compact) > len(shown):
                return compact
            self.compact, self.cap = False, None
        return shown

    def _cap(self, width: int, lanes: int) -> int:
        """The longest line that lets ``lanes`` tower lanes and the shared lane (each cut
        alike) fit into ``width``, with the elision column if towers are left out."""
        spare = _elision_width(len(self.towers)) if lanes < len(self.towers) else 0
        shared = 1 if any(None in cells for cells in self.cells) else 0
        room = width - _GEN_WIDTH - 1 - spare
        return max(room // (lanes + shared) - 3, 12)

    def _fit_lanes(self, width: int) -> list[int]:
        used = _GEN_WIDTH + 1
        if any(None in cells for cells in self.cells):
            used += self._lane_width(None)
        candidates = self.keep + [t for t in self.towers if t not in set(self.keep)]
        limit = max(self.max_towers, len(self.keep))
        shown: list[int] = []
        for tower in candidates[:limit]:
            spare = _elision_width(len(self.towers)) if len(shown) + 1 < len(self.towers) else 0
            lane = self._lane_width(tower)
            if shown and used + lane + spare > width:
                break
            shown.append(tower)
            used += lane
        return sorted(shown)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        shown = self._fit(options.max_width)
        hidden = [t for t in self.towers if t not in set(shown)]
        used = _GEN_WIDTH + 1 + sum(self._lane_width(t) for t in shown)
        if any(None in cells for cells in self.cells):
            used += self._lane_width(None)
        if hidden and used + _elision_width(len(self.towers)) > options.max_width:
            # not even the "… more" column fits beside one lane: say it under the table
            yield self._table(shown, [])
        else:
            yield self._table(shown, hidden)
        if hidden:
            yield from wrap_items([(self._folded_note(hidden, options.max_width), "dim")],
                                  options.max_width)  # fmt: skip
        yield from self._legend(options.max_width)

    def _folded_note(self, hidden: list[int], width: int) -> str:
        """Which lanes are folded, why, and how to see them."""
        names = tower_range(hidden, self.unit)
        if len(self.towers) > self.max_towers and len(hidden) == len(self.towers) - self.max_towers:
            why = f"--towers {self.max_towers} shows at most {self.max_towers}"
        else:
            why = f"to fit {width} columns; a wider terminal shows more"
        lanes = "every lane" if len(self.towers) <= PNG_LANES else f"{PNG_LANES} of them"
        see = f"`simsync graph FILE --format png -o graph.png` draws {lanes}"
        return f"… folded: {names} ({why}; {see})"

    def _table(self, shown: list[int], hidden: list[int]) -> Table:
        g = self.graph
        table = Table(
            title=escape(
                f"Graph {g.name!r}: {_counted(g)}, {len(g.devices)} devices, "
                f"{len(self.towers)} {self.unit}s"
            ),
            caption="rows: topological generations; a row's ops may run at once",
            box=box.SQUARE,
            show_lines=True,
            padding=(0, 1),
        )
        table.add_column("gen", justify="right", style="dim", no_wrap=True, min_width=3)
        for tower in shown:
            table.add_column(f"{self.unit}_{tower}", no_wrap=True)
        if hidden:
            table.add_column(
                f"… {plural(len(hidden), 'more ' + self.unit, 'more ' + self.unit + 's')}",
                style="dim",
                min_width=_elision_width(len(self.towers)) - 3,
            )
        has_shared = any(None in cells for cells in self.cells)
        if has_shared:
            table.add_column(self.shared_title, no_wrap=True)
        hidden_set = set(hidden)
        for number, cells in enumerate(self.cells):
            row: list[Text | str] = [str(number)]
            row += [self._cell(cells.get(t, [])) for t in shown]
            if hidden:
                # ops, not boxes: two folded towers' `hidden (5 ops)` are +10 ops
                count = sum(ops_in_box(op.name) for t in hidden_set for op in cells.get(t, []))
                row.append(f"+{count} ops" if count else "")
            if has_shared:
                row.append(self._cell(cells.get(None, [])))
            table.add_row(*row)
        return table

    def _legend(self, width: int) -> Iterable[Text]:
        kinds = {op.kind for op in self.graph.ops()}
        if len(kinds) > 1:  # one kind (an imported program's, all generic) tells nothing
            items = [(k, kind_style(k).color) for k in legend_order(kinds)]
            yield from wrap_items([("names coloured by kind:", ""), *items], width)
        yield from wrap_items([(line, "") for line in resource_lines(self.graph)], width)
        if self.sync_points:
            through = any(self.graph.op(p).resource for p in self.sync_points)
            yield Text(
                f"{SYNC_MARK} SYNC POINT: an op whose inputs come from more than one "
                f"{self.unit}{' (or through a resource they put into)' if through else ''}; it "
                f"cannot start until the last {self.unit}'s input has arrived"
                f"{' (a take: the last one it needs)' if through else ''}.",
                style="red",
            )


def _wrapped(text: str, cap: int | None) -> list[str]:
    """``text`` in lines of at most ``cap`` characters, cut after a ``_``, a ``/`` or a space
    where it can be (mid-word only where a word alone is longer).

    >>> _wrapped("sparse_softmax_cross_entropy_loss (13 ops)", 20)
    ['sparse_softmax_', 'cross_entropy_loss', '(13 ops)']
    >>> _wrapped("softmax_linear (4 ops)", 21)
    ['softmax_linear', '(4 ops)']
    >>> _wrapped("gradients [tower_0] (40 ops)", 18)
    ['gradients', '[tower_0] (40 ops)']
    >>> _wrapped("/job:worker/task:0", 14)
    ['/job:worker/', 'task:0']
    >>> _wrapped("gradients", None)
    ['gradients']
    """
    if cap is None or len(text) <= cap:
        return [text]
    lines, line = [], ""
    # a box's count of ops, and the tower in brackets, are one piece each: "softmax_linear (4"
    # above "ops)", and "gradients [tower_" above "0]", read as two things
    for piece in re.findall(r"\(\d+ ops?\)|\[[^\]]*\] ?|[^_ /\[]*[_ /]|[^_ /\[]+|\[", text):
        while len(piece) > cap:  # a word longer than a line: cut it
            room = cap - len(line)
            lines.append(line + piece[:room])
            line, piece = "", piece[room:]
        if len(line) + len(piece) > cap:
            lines.append(line)
            line = ""
        line += piece
    return [part.rstrip(" ") for part in [*lines, line] if part.strip()]


def shared_lane_title(graph: Graph) -> str:
    """The shared lane's title: the client that alone runs its ops (the chief's queue runner),
    or ``shared``.

    >>> from simsync.patterns import tiny_example
    >>> shared_lane_title(tiny_example())
    'shared'
    """
    orders = run_orders(graph, [client.fetches for client in graph.clients])
    shared = {op.name for op in graph.ops() if op.tower is None}
    runners = [
        c.name for c, order in zip(graph.clients, orders, strict=True) if shared & set(order)
    ]
    return runners[0] if len(runners) == 1 and len(graph.clients) > 1 else "shared"


def slow_towers(graph: Graph) -> list[int]:
    """The towers on the slowest devices, when the devices differ: the stragglers a view
    never folds. A tower's speed is its slowest op's (:func:`~simsync.ir.op_speed`).

    >>> from simsync.patterns import build
    >>> from simsync.scenario import ClusterConfig, Scenario
    >>> slow_towers(build(Scenario("s", cluster=ClusterConfig(4, (1, 0.8, 0.5, 1)))))
    [2]
    >>> slow_towers(build(Scenario("s", cluster=ClusterConfig(2))))
    []
    """
    speeds: dict[int, float] = {}
    for op in graph.ops():
        if op.tower is not None:
            speed = op_speed(graph, op)
            speeds[op.tower] = min(speeds.get(op.tower, speed), speed)
    slowest = min(speeds.values(), default=1.0)
    return [t for t, speed in sorted(speeds.items()) if speed == slowest < max(speeds.values())]


def resource_lines(graph: Graph) -> list[str]:
    """One line per stateful resource: what it is, where, and which ops put and take.

    >>> from simsync.patterns import tiny_example
    >>> resource_lines(tiny_example())
    []
    """
    lines = []
    users = resource_users(graph)
    for name, resource in graph.resources.items():
        putters = _scopes(graph.op(op) for op in users[name].puts)
        takers = _scopes(graph.op(op) for op in users[name].gets)
        what = resource.noun
        start = ""
        if resource.kind == "queue":
            most = f" (at most {resource.capacity})" if resource.capacity else ""
            start = f", {plural(resource.initial, resource.item)} at start{most}"
        lines.append(
            f"{name}: {what} on {resource.device}{start}; put by {putters or 'nobody'}, "
            f"taken by {takers or 'nobody'}"
        )
    return lines


def _scopes(ops: Iterable[Op]) -> str:
    """Op names, with a run of numbered scopes folded (``worker_0..2/dequeue_token``)."""
    names = [op.name for op in ops]
    folded: dict[str, list[int]] = defaultdict(list)
    for name in names:
        head, _, rest = name.partition("/")
        stem, _, number = head.rpartition("_")
        if rest and number.isdecimal():
            folded[f"{stem}_*/{rest}"].append(int(number))
        else:
            folded[name] = []
    shown = []
    for key, numbers in folded.items():
        if numbers:
            low, high = min(numbers), max(numbers)
            shown.append(key.replace("*", str(low) if low == high else f"{low}..{high}", 1))
        else:
            shown.append(key)
    return ", ".join(shown)


def _counted(graph: Graph) -> str:
    """How many ops the graph shows, and how many it holds where boxes fold several.

    >>> from simsync.patterns import tiny_example
    >>> _counted(tiny_example())
    '10 ops'
    """
    held = sum(ops_in_box(name) for name in graph.nx.nodes)
    shown = len(graph)
    return f"{shown} ops" if held == shown else f"{shown} boxes of {held} ops"
