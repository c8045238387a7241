"""A terminal Gantt chart of a trace: one row per device, time to the right.

Each op execution is a run of its kind's letter (``F`` forward, ``B`` backward, ...) in its
kind's colour, so the chart reads the same with or without colour. Idle time is ``·``; the
time a device spent waiting at a sync point for the other towers is ``-``; a ``◆`` in the
``sync`` row marks where each sync point started. Ops that took no time are drawn as their
lowercase letter where the lane is otherwise idle. A client that blocked on a resource (a
worker waiting for a token, the chief for gradients) gets a lane of its own below the
devices, ``~`` while it waited.

The looks of the kinds (:func:`kind_style`, from the registry of kinds) and the device order
(:func:`device_sort_key`) are shared by the other renderers of this package.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from simsync.ir import natural_key
from simsync.kinds import KINDS, Style
from simsync.trace import Trace, came_last
from simsync.words import plural

__all__ = ["Timeline", "device_sort_key", "kind_style", "legend_order"]

IDLE, WAIT, SYNC_MARK, BLOCKED = "·", "-", "◆", "~"
#: a lane past its client's last drawn run, while a run the window does not draw goes on
UNDRAWN = " "
#: The device lanes a timeline picture (``--timeline out.png``) draws at most.
PICTURE_LANES = 32


def kind_style(kind: str) -> Style:
    """The look of ``kind``, as its registry entry declares it; unknown kinds get their
    initial in white.

    >>> kind_style("forward").letter, kind_style("shuffle").letter
    ('F', 'S')
    """
    known = KINDS.get(kind)
    return (
        known.style if known is not None else Style((kind[:1] or "?").upper(), "white", "#7f7f7f")
    )


def legend_order(kinds: Iterable[str]) -> list[str]:
    """``kinds`` in the order legends list them: the registry's, then unknown ones sorted.

    >>> legend_order(["shuffle", "backward", "forward"])
    ['forward', 'backward', 'shuffle']
    """
    present = set(kinds)
    return [k for k in KINDS if k in present] + sorted(present - set(KINDS))


def device_sort_key(device: str) -> tuple[int, list[Any]]:
    """Sort key for device names: CPUs, then GPUs, then the rest; numbers in numeric order.

    >>> sorted(["/gpu:10", "/gpu:2", "/cpu:0", "/tpu:0"], key=device_sort_key)
    ['/cpu:0', '/gpu:2', '/gpu:10', '/tpu:0']
    """
    lowered = device.lower()
    rank = 0 if "cpu" in lowered else 1 if "gpu" in lowered else 2
    return rank, natural_key(device)


class _Grid:
    """Per device and column: how many seconds each kind (or waiting) covered, and instants."""

    def __init__(self, devices: Sequence[str], t0: float, dt: float, columns: int) -> None:
        self.t0, self.dt, self.columns = t0, dt, columns
        self.cover: dict[str, list[dict[str, float]]] = {
            d: [defaultdict(float) for _ in range(columns)] for d in devices
        }
        self.instants: dict[str, dict[int, str]] = {d: {} for d in devices}
        self.drew_instant = False
        #: per device, when a later run of its one client begins, which the window does not
        #: draw: its columns from there on are no idle time, only not shown
        self.undrawn: dict[str, float] = {}
        self.drew_undrawn = False

    def column(self, time: float) -> int:
        return min(max(int((time - self.t0) / self.dt), 0), self.columns - 1)

    def paint(self, device: str, key: str, start: float, end: float) -> None:
        """Add the interval ``[start, end)`` to ``key``'s coverage of ``device``'s columns."""
        cells = self.cover.get(device)
        if cells is None:
            return
        if end - start < self.dt:  # shorter than a column: a mark, whatever else covers it
            self.instants[device].setdefault(self.column(start), key)
        if end <= start:
            return
        for col in range(self.column(start), self.column(end) + 1):
            left = self.t0 + col * self.dt
            overlap = min(end, left + self.dt) - max(start, left)
            if overlap > 0:
                cells[col][key] += overlap

    def row(self, device: str) -> Text:
        """The device's lane: each column shows whatever covered most of it."""
        text = Text()
        for col, cover in enumerate(self.cover[device]):
            busy = sum(v for k, v in cover.items() if k != WAIT)
            idle = max(self.dt - busy, 0.0)
            wait = min(cover.get(WAIT, 0.0), idle)
            choices = {k: v for k, v in cover.items() if k != WAIT}
            choices[WAIT], choices[IDLE] = wait, idle - wait
            best = max(choices, key=lambda k: choices[k])
            if best in (IDLE, WAIT) and col in self.instants[device]:
                style = kind_style(self.instants[device][col])
                self.drew_instant = True
                text.append(style.letter.lower(), style=style.color)
            elif best == IDLE and self.t0 + col * self.dt >= self.undrawn.get(device, math.inf):
                self.drew_undrawn = True
                text.append(UNDRAWN)
            elif best == IDLE:
                text.append(IDLE, style="dim")
            elif best == WAIT:
                text.append(WAIT, style="red")
            elif best == BLOCKED:
                text.append(BLOCKED, style="yellow")
            else:
                style = kind_style(best)
                text.append(style.letter, style=f"bold {style.color}")
        return text


def _nice_step(raw: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is at least ``raw``."""
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def time_axis(t0: float, span: float, columns: int) -> tuple[Text, Text]:
    """Two lines: ticks (``┬``) and their labels in milliseconds, at a 1-2-5 spacing.

    >>> ticks, labels = time_axis(0.0, 0.02, 40)
    >>> labels.plain
    '0         5         10        15'
    """
    tick_ms = _nice_step(max(span * 1e3 / max(columns // 8, 1), 1e-9))
    ticks, labels = ["─"] * columns, [" "] * columns
    first = math.ceil(t0 * 1e3 / tick_ms - 1e-9)
    end_of_last = -1
    value = first * tick_ms
    while value <= (t0 + span) * 1e3 + 1e-9:
        col = round((value / 1e3 - t0) / span * columns)
        label = f"{value:.6g}"
        if col < columns:
            ticks[col] = "┬"
            if col > end_of_last and col + len(label) <= columns:
                labels[col : col + len(label)] = label
                end_of_last = col + len(label)
        first += 1
        value = first * tick_ms
    return Text("".join(ticks), style="dim"), Text("".join(labels).rstrip())


class Timeline:
    """A rich renderable Gantt chart of the first ``steps`` steps of ``trace``.

    One row per device (``device_order`` or CPUs then GPUs in numeric order), time scaled to
    the console width, a ``sync`` row marking where sync points started, a millisecond axis
    and a legend. ``sync_points`` names the meeting ops (``simsync.kinds.sync_points`` of the
    graph); without them no waits or sync marks are drawn. It never divides by zero: an
    empty window or one made only of instant ops is drawn over a nominal 1 ms.

    Examples
    --------
    >>> from simsync.trace import OpRecord, StepRecord
    >>> t = Trace(ops=[OpRecord("f", "forward", ("/gpu:0",), "main", 0, 0.0, 0.0, 0.01),
    ...                OpRecord("b", "backward", ("/gpu:0",), "main", 0, 0.01, 0.01, 0.03)],
    ...           steps=[StepRecord("main", 0, 0.0, 0.04)])
    >>> Console(width=40, color_system=None).print(Timeline(t))
    Timeline: step 0, 40 ms (simulator)
    step   ├step 0
    /gpu:0 FFFFFFFFBBBBBBBBBBBBBBBBB········
           ┬───────┬───────┬────────┬───────
    ms     0       10      20       30
    F forward  B backward  · idle
    """

    def __init__(
        self,
        trace: Trace,
        steps: int = 2,
        device_order: Sequence[str] | None = None,
        *,
        sync_points: Iterable[str] | None = None,
        max_devices: int = 16,
        keep: Iterable[str] = (),
    ) -> None:
        self.trace, self.steps = trace, steps
        self.records = [r for r in trace.ops if r.step < steps]
        self.sync_points = set(sync_points or ())
        order = (
            list(device_order)
            if device_order is not None
            else sorted({d for r in self.records for d in r.devices}, key=device_sort_key)
        )
        #: lanes never folded: ``keep``, the devices of whoever came last at a sync point (the
        #: stragglers) and of the sync points themselves
        self.named = set(keep) | self._stragglers_and_sync_points()
        self.device_order = self._shown(order, max(max_devices, 2))
        self.folded = [d for d in order if d not in self.device_order]
        self.hidden = len(self.folded)
        blocked = {r.client for r in self.records if r.blocked > 0}
        self.blocked_lanes = [f"{c} waits" for c in sorted(blocked, key=natural_key)]

    def _stragglers_and_sync_points(self) -> set[str]:
        """The devices of the sync points and of the inputs that came last to them (whether
        slower or only last in line for a shared core)."""
        named: set[str] = set()
        by_key = {(r.client, r.step, r.op): r for r in self.records}
        for record in self.records:
            if record.op not in self.sync_points:
                continue
            named.update(record.devices)
            arrived = {src: at for src, at in record.arrivals}
            for src in came_last(arrived):
                source = by_key.get((record.client, record.step, src))
                if source is not None:
                    named.update(source.devices)
        return named

    def _shown(self, order: list[str], limit: int) -> list[str]:
        """Up to ``limit`` devices: the named ones (stragglers, sync points, ``keep``), the
        busiest, then the first; in their order."""
        if len(order) <= limit:
            return order
        busy: dict[str, float] = {}
        for record in self.records:
            for device in record.devices:
                busy[device] = busy.get(device, 0.0) + record.end - record.start
        named = [d for d in order if d in self.named]
        busiest = [d for d in sorted(order, key=lambda d: -busy.get(d, 0.0)) if d not in named]
        kept = set(named[:limit]) | set(busiest[: max(min(2, limit - len(named)), 0)])
        kept |= set([d for d in order if d not in kept][: max(limit - len(kept), 0)])
        return [d for d in order if d in kept]

    def window(self) -> tuple[float, float]:
        """``(t0, span)`` in seconds: from the first step's start to the last one's end."""
        runs = [(s.start, s.end) for s in self.trace.steps if s.step < self.steps]
        runs += [(r.start, r.end) for r in self.records]
        if not runs:
            return 0.0, 1e-3
        t0 = min(start for start, _ in runs)
        span = max(end for _, end in runs) - t0
        return t0, span if span > 0 else 1e-3

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lanes = self.device_order + self.blocked_lanes
        label_width = max([len(d) for d in lanes] + [4]) + 1
        columns = max(options.max_width - label_width, 10)
        t0, span = self.window()
        grid = _Grid(lanes, t0, span / columns, columns)
        self._paint(grid)
        yield Text(self._title(span), style="bold")
        clients = {s.client for s in self.trace.steps}
        if len(clients) <= 1:  # with many clients, their steps overlap: the lanes tell
            yield Text("step".ljust(label_width)) + self._step_row(grid)
        if self.sync_points:
            yield Text("sync".ljust(label_width)) + self._sync_row(grid)
        for device in self.device_order:
            yield Text(device.ljust(label_width)) + grid.row(device)
        if self.folded:
            yield from wrap_items([(self._folded_note(), "dim")], options.max_width)
        for lane in self.blocked_lanes:
            yield Text(lane.ljust(label_width), style="yellow") + grid.row(lane)
        ticks, labels = time_axis(t0, span, columns)
        yield Text(" " * label_width) + ticks
        yield Text("ms".ljust(label_width)) + labels
        yield from self._legend(grid, options.max_width)

    def _folded_note(self) -> str:
        """Which lanes are folded, and how to see every one."""
        named = (  # "stragglers" would contradict a table's "last in line: no straggler"
            "lanes last at sync points are shown; " if self.named else ""
        )
        lanes = len(self.folded) + len(self.device_order)
        see = (
            "`simsync simulate FILE --timeline out.png` draws every lane"
            if lanes <= PICTURE_LANES
            else "`simsync simulate FILE --trace out.json` saves every lane, to open in "
            "ui.perfetto.dev"
        )
        return (
            f"… {plural(self.hidden, 'more device')} folded to fit the screen: "
            f"{format_lanes(self.folded)} ({named}{see})"
        )

    def _title(self, span: float) -> str:
        shown = sorted(
            {s.step for s in self.trace.steps if s.step < self.steps}
            | {r.step for r in self.records}
        )
        which = (
            f"step {shown[0]}"
            if len(shown) == 1
            else f"steps {shown[0]}–{shown[-1]}"
            if shown
            else "no steps"
        )
        clients = {s.client for s in self.trace.steps}
        if len(clients) > 1:
            which = f"{which.replace('step', 'run')} of each of {_loops(clients)}"
        return f"Timeline: {which}, {span * 1e3:.3g} ms ({self.trace.source})"

    def _paint(self, grid: _Grid) -> None:
        # a device of one client only: from the start of that client's first run past the
        # window, its lane is not drawn (a worker lane read as idle while it computed its
        # third run, in a learner's trial of lesson 6's backup workers)
        clients: dict[str, set[str]] = {}
        for record in self.records:
            for device in record.devices:
                clients.setdefault(device, set()).add(record.client)
        later: dict[str, float] = {}
        for step in self.trace.steps:
            if step.step >= self.steps:
                later[step.client] = min(later.get(step.client, math.inf), step.start)
        for device, owners in clients.items():
            if len(owners) == 1 and (owner := next(iter(owners))) in later:
                grid.undrawn[device] = later[owner]
        for record in self.records:
            for device in record.devices:
                grid.paint(device, record.kind, record.start, record.end)
            if record.blocked > 0:
                lane = f"{record.client} waits"
                grid.paint(lane, BLOCKED, record.ready, record.ready + record.blocked)
        by_key = {(r.client, r.step, r.op): r for r in self.records}
        for record in self.records:
            if record.op not in self.sync_points:
                continue
            for src, arrived in record.arrivals:
                source = by_key.get((record.client, record.step, src))
                if source is None:
                    continue
                # from the input's arrival (after any transfer) until the sync point starts
                for device in source.devices:
                    grid.paint(device, WAIT, arrived, record.start)

    def _step_row(self, grid: _Grid) -> Text:
        cells = [" "] * grid.columns
        for step in sorted(self.trace.steps, key=lambda s: s.start):
            if step.step >= self.steps:
                continue
            col = grid.column(step.start)
            label = f"├step {step.step}"
            cells[col : col + len(label)] = label[: grid.columns - col]
        return Text("".join(cells).rstrip(), style="dim")

    def _sync_row(self, grid: _Grid) -> Text:
        cells = [" "] * grid.columns
        for record in self.records:
            if record.op in self.sync_points:
                cells[grid.column(record.start)] = SYNC_MARK
        return Text("".join(cells).rstrip(), style="bold red")

    def _legend(self, grid: _Grid, width: int) -> Iterator[Text]:
        kinds = {r.kind for r in self.records}
        items = [(f"{kind_style(k).letter} {k}", kind_style(k).color) for k in legend_order(kinds)]
        items.append((f"{IDLE} idle", "dim"))
        if self.sync_points:
            items.append((f"{WAIT} waiting at a sync point", "red"))
            items.append((f"{SYNC_MARK} sync point starts", "bold red"))
        if self.blocked_lanes:
            items.append((f"{BLOCKED} blocked on a queue or on gradients", "yellow"))
        if grid.drew_instant:
            items.append(("lowercase: op shorter than a character", ""))
        if grid.drew_undrawn:
            items.append(("blank: a later run, not drawn", ""))
        yield from wrap_items(items, width)


def format_lanes(lanes: Sequence[str]) -> str:
    """Lanes in short form, runs of numbered devices of one kind as ranges.

    >>> format_lanes(["/gpu:1", "/gpu:2", "/gpu:3", "/gpu:7", "/cpu:1"])
    '/gpu:1-3, /gpu:7, /cpu:1'
    """
    runs: list[tuple[str, int, int]] = []
    out: list[str] = []
    for lane in lanes:
        head, number = lane.rstrip("0123456789"), lane[len(lane.rstrip("0123456789")) :]
        if number and runs and runs[-1][0] == head and runs[-1][2] + 1 == int(number):
            runs[-1] = (head, runs[-1][1], int(number))
            out[-1] = f"{head}{runs[-1][1]}-{int(number)}"
            continue
        runs.append((head, int(number), int(number)) if number else (lane, -2, -2))
        out.append(lane)
    return ", ".join(out)


def wrap_items(items: Sequence[tuple[str, str]], width: int) -> Iterator[Text]:
    """Lines of styled ``(text, style)`` items two spaces apart, never splitting an item.

    >>> [line.plain for line in wrap_items([("F forward", ""), ("B backward", "")], 12)]
    ['F forward', 'B backward']
    """
    line = Text()
    for label, style in items:
        if line.plain and len(line.plain) + 2 + len(label) > width:
            yield line
            line = Text()
        if line.plain:
            line.append("  ")
        line.append(label, style=style)
    if line.plain:
        yield line


def _loops(clients: set[str]) -> str:
    """The loops whose runs a timeline shows, named as the graph names them (``4 workers``;
    a queue runner's thread aside), else ``N loops``.

    >>> _loops({"worker_0", "worker_1", "queue_runner"}), _loops({"main", "other"})
    ('2 workers and a queue runner', '2 loops')
    """
    named = [name for name in clients if re.fullmatch(r"[a-z]+_\d+", name)]
    units = {name.rpartition("_")[0] for name in named}
    if len(units) != 1:
        return plural(len(clients), "loop")
    (unit,) = units
    rest = len(clients) - len(named)
    runners = "queue_runner" in clients and rest == 1
    return plural(len(named), unit) + (
        " and a queue runner" if runners else f" and {plural(rest, 'loop')}" if rest else ""
    )
