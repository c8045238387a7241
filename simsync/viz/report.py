"""The summary of a simulation (the dict of ``simsync simulate --json``) for the terminal.

A header naming the scenario and its shape, a table of the measured numbers, the critical path,
and for every sync point who waited for whom: each tower's mean wait and how often it was the
last to arrive. The straggler is highlighted, when one tower is clearly last more often than the
others (:func:`straggler`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from simsync.trace import (
    NOTICEABLE_WAIT,
    Update,
    named_straggler,
    stalest_client,
    straggler,
    together,
)
from simsync.words import ms, plural

if TYPE_CHECKING:
    from simsync.simulation.results import Summary

__all__ = ["LedgerView", "SummaryView", "waited"]


#: The step-time statistics of a summary, in the order they are shown.
_STEP_TIMES: tuple[Literal["mean", "p50", "p95"], ...] = ("mean", "p50", "p95")


#: The note of a tower last clearly most often that is no straggler (it queued).
IN_LINE = "◀ last in line"
#: the note of a sync point where the towers arrived together (no one waited noticeably)
TOGETHER = "together"


class SummaryView:
    """A rich renderable of ``summary`` (see :func:`simsync.simulation.summary`).

    Missing keys are shown as ``–``, so a partial summary (or one read back from JSON) renders.
    At most ``max_towers`` towers are listed per sync point, the straggler always among them.
    The straggler is the tower clearly most often last (:func:`straggler`) whose own work is
    clearly the longest (:func:`~simsync.trace.expected_last`); a tower always last without
    that reason only waited its turn (for a shared core: "last in line"). When no tower
    waited noticeably (every input arrived at once) nobody is marked, as "last" is then only
    the order of a tie.

    Examples
    --------
    >>> s = {"scenario": "two", "mode": "sync", "aggregation": "parameter_server",
    ...      "towers": 2, "steps": 20, "step_time": {"mean": 0.02, "p50": 0.02, "p95": 0.02},
    ...      "wait": {"average_gradients": {"tower_0": 0.01, "tower_1": 0.0}},
    ...      "waited_for": {"average_gradients": {"tower_0": 0, "tower_1": 20}},
    ...      "expected_last": {"average_gradients": "tower_1"}}
    >>> import io
    >>> out = io.StringIO()
    >>> Console(file=out, width=80, color_system=None).print(SummaryView(s).sync_table())
    >>> print("\\n".join(line.rstrip() for line in out.getvalue().splitlines()))
                         Sync points: who waited for whom
    ┌───────────────────┬─────────┬────────────────┬────────────┬─────────────┐
    │ sync point        │ tower   │ mean wait (ms) │ times last │ note        │
    ├───────────────────┼─────────┼────────────────┼────────────┼─────────────┤
    │ average_gradients │ tower_0 │         10.000 │       0/20 │             │
    │                   │ tower_1 │          0.000 │      20/20 │ ◀ straggler │
    └───────────────────┴─────────┴────────────────┴────────────┴─────────────┘
    """

    def __init__(
        self, summary: Summary, max_towers: int = 16, max_sync_points: int | None = None
    ) -> None:
        self.summary, self.max_towers = summary, max(max_towers, 1)
        #: the sync table's sync points at most (None: every one); the rest counted under it
        self.max_sync_points = max_sync_points

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.header()
        yield self.numbers_table()
        if self.summary.get("values_skipped"):  # a generic op stood where values pass
            yield Text(f"{self.summary['values_skipped']}: timing only", style="yellow")
        path = self.summary.get("critical_path") or {}
        if path.get("ops"):
            yield Text(
                f"critical path at mean costs, without contention "
                f"({ms(path.get('seconds'))} ms): "
                + " → ".join(path_by_scope(path["ops"]))
                + _any_tower(self.summary, path["ops"]),
                style="dim",
            )
            note = critical_path_note(  # one SyncReplicas apply of all workers: a step
                path.get("seconds"),
                self.summary.get("step_time"),
                int(self.summary.get("workers") or 1) if _concurrent(self.summary) else 1,
            )
            if note:
                yield Text(note, style="dim")
        if self.summary.get("wait"):
            yield self.sync_table()
        if _concurrent(self.summary):
            yield self.staleness_table()
        if self.summary.get("gradients"):
            yield self.gradients_table()

    def header(self) -> Text:
        """Two lines: the scenario (and its file), then mode, aggregation, towers, steps, seed."""
        s = self.summary
        text = Text()
        text.append(f"Scenario {s.get('scenario', '?')}", style="bold")
        if s.get("source"):
            text.append(f" ({s['source']})", style="dim")
        # a graph imported from a program has no mode or aggregation: left out, not "None"
        mode = [f"mode {s['mode']}"] if s.get("mode") else []
        aggregation = [f"aggregation {s['aggregation']}"] if s.get("aggregation") else []
        workers = s.get("workers", 1)
        if _concurrent(s) or workers > 1:  # several clients train: name them workers
            unit = "update" if _concurrent(s) else "step"
            steps = s.get("steps", "–")
            parts = [*mode, plural(workers, "worker"), f"{steps} {unit}{'' if steps == 1 else 's'}"]
        else:
            towers, steps = s.get("towers"), s.get("steps")
            parts = [*mode, *aggregation]
            parts.append(plural(towers, "tower") if isinstance(towers, int) else "– towers")
            parts.append(plural(steps, "step") if isinstance(steps, int) else "– steps")
        if "seed" in s:
            parts.append(f"seed {s['seed']}")
        text.append("\n" + " · ".join(parts))
        return text

    def numbers_table(self) -> Table:
        """Step time (mean, p50, p95 in ms), throughput, final loss, events and wall time; in
        async mode the time of one worker's update, updates per second and the staleness."""
        s = self.summary
        stats = s.get("step_time")
        asynchronous = _concurrent(s)
        table = Table(title="Step time and throughput", box=box.SIMPLE_HEAD, show_edge=False)
        table.add_column("measure")
        table.add_column("value", justify="right")
        label = "update time" if asynchronous else "step time"
        for key in _STEP_TIMES:
            table.add_row(f"{label} {key} (ms)", ms(stats.get(key) if stats else None))
        throughput, applied = s.get("throughput"), s.get("applied_throughput")
        if applied is not None and throughput is not None and applied < throughput:
            # the batches of dropped gradients were computed, and trained nothing
            table.add_row("samples computed per second", f"{throughput:,.0f}")
            table.add_row("samples applied per second", f"{applied:,.0f}")
        else:
            shown = "–" if throughput is None else f"{throughput:,.0f}"
            table.add_row("throughput (samples/s)", shown)
        if asynchronous:
            rate, staleness = s.get("updates_per_second"), s.get("staleness") or {}
            table.add_row("updates per second", "–" if rate is None else f"{rate:,.1f}")
            table.add_row(
                "staleness mean / max",
                f"{staleness.get('mean', 0):.2f} / {staleness.get('max', '–')}",
            )
            table.add_row(
                "updates applied / dropped",
                f"{s.get('updates_applied', '–')} / {s.get('updates_dropped', '–')}",
            )
        loss = s.get("final_loss")
        table.add_row("final loss", "–" if loss is None else f"{loss:.4f}")
        # the simulator's own work, named as such (a learner read "events" and "wall time"
        # as the training's)
        table.add_row("simulator: events", "–" if s.get("events") is None else f"{s['events']:,}")
        table.add_row(
            "simulator: its own time (s)",
            "–" if s.get("wall_seconds") is None else f"{s['wall_seconds']:.3f}",
        )
        return table

    def staleness_table(self) -> Table:
        """Per worker: updates applied and dropped, mean and max staleness of the applied
        ones; the stalest highlighted (a straggler's updates are the stalest)."""
        rows = self.summary.get("staleness_by_client") or {}
        table = Table(
            title="The ledger: staleness of each worker's applied updates", box=box.SQUARE
        )
        for column in ("worker", "applied", "dropped", "mean staleness", "max"):
            table.add_column(column, justify="left" if column == "worker" else "right")
        stalest = stalest_client(rows)  # marked only when it stands out
        if stalest:
            table.add_column("note")
        names = list(rows)
        shown = names[: self.max_towers]
        shown += [n for n in names[self.max_towers :] if n == stalest]
        for name in shown:
            row = rows[name]
            mark = name == stalest
            mean = "–" if row["mean"] is None else f"{row['mean']:.2f}"
            cells = [
                name,
                str(row["applied"]),
                str(row["dropped"]),
                mean,
                "–" if row["max"] is None else str(row["max"]),
            ]
            cells += ["◀ stalest" if mark else ""] if stalest else []
            table.add_row(*cells, style="bold red" if mark else "")
        if len(names) > len(shown):
            table.add_row(
                f"+{len(names) - len(shown)} more", *[""] * (len(table.columns) - 1), style="dim"
            )
        return table

    def gradients_table(self) -> Table:
        """Per worker: gradients pushed, accepted and dropped as stale (SyncReplicas)."""
        g = self.summary.get("gradients")
        table = Table(title="Gradients pushed to the accumulators", box=box.SQUARE)
        for column in ("worker", "pushed", "accepted", "dropped"):
            table.add_column(column, justify="left" if column == "worker" else "right")
        if g is None:  # nothing was pushed
            return table
        rows = g["by_worker"]
        for name in list(rows)[: self.max_towers]:
            row = rows[name]
            table.add_row(name, str(row["pushed"]), str(row["accepted"]), str(row["dropped"]))
        per_step = g["dropped_per_step"]
        table.add_row("all", str(g["pushed"]), str(g["accepted"]), str(g["dropped"]), style="bold")
        if per_step is not None:
            table.caption = f"{per_step:.2f} gradients dropped per step"
        return table

    def sync_table(self) -> Table:
        """Per sync point and tower: mean wait (ms) and how often it was last."""
        table = Table(
            title="Sync points: who waited for whom", box=box.SQUARE, caption_justify="left"
        )
        table.add_column("sync point", no_wrap=True)
        towers = [t for waits in self.summary["wait"].values() for t in waits]
        # the tally's own names (tower_1, worker_1: the graph's, :func:`simsync.ir.lane_unit`)
        unit = towers[0].rpartition("_")[0] if towers else "tower"
        table.add_column(unit or "tower", no_wrap=True)
        table.add_column("mean wait (ms)", justify="right")
        table.add_column("times last", justify="right", no_wrap=True)
        table.add_column("note")
        waited_for = self.summary.get("waited_for") or {}
        expected = self.summary.get("expected_last")
        every = self.summary["wait"]
        points = list(every.items())
        notes = []
        if self.max_sync_points is not None and len(points) > self.max_sync_points:
            left = len(points) - self.max_sync_points
            # those where the towers waited longest, in the graph's order
            ranked = sorted(every, key=lambda point: -waited(every, point))
            kept = set(ranked[: self.max_sync_points])
            points = [(point, every[point]) for point in every if point in kept]
            notes.append(
                f"… and {plural(left, 'more sync point')} where the waits were no longer "
                "(--verbose shows every one)"
            )
        in_line = a_moment = False
        for point, waits in points:
            reason = None if expected is None else expected.get(point, "")
            last = waited_for.get(point) or {}
            for i, row in enumerate(self._rows(waits, last, reason)):
                shown = scope_lines(point) if i == 0 else ""
                table.add_row(shown, *row[:-1], style=row[-1], end_section=False)
                in_line = in_line or row[3] == IN_LINE
                a_moment = a_moment or (row[3] == TOGETHER and any(last.values()))
            table.add_section()
        if a_moment:
            notes.append(
                f"{TOGETHER}: no one waited as long as {NOTICEABLE_WAIT:.0%} of a step there; "
                "the one counted "
                "last got there only a moment later"
            )
        if in_line:
            notes.append(
                f"{IN_LINE}: last clearly most often, though its own work is not the "
                "longest: it queued (for a shared core or a port), it is no straggler"
            )
        table.caption = "\n".join(notes) or None
        return table

    def _rows(
        self, waits: Mapping[str, float], last: Mapping[str, int], expected: str | None
    ) -> Iterator[tuple[str, str, str, str, str]]:
        """``(tower, wait, times last, note, style)``: the straggler highlighted, long lists
        cut. ``expected``: the tower whose own work is clearly the longest, "" when the
        towers' work is equal (then one always last only waited its turn, e.g. for a shared
        core), None when not known (a summary written before it was kept)."""
        runs = self.summary.get("steps") or sum(last.values())  # one execution per step
        # A straggler makes the others wait noticeably (1 % of a step); below that, "last" is
        # a tie-break of equal towers (e.g. first come at a port).
        step = (self.summary.get("step_time") or {}).get("mean") or 0.0
        anyone_waited = not together(waits, step)
        slowest = straggler(last) if anyone_waited else ""
        in_line = bool(slowest) and named_straggler(last, expected) != slowest
        towers = list(waits)
        shown = towers[: self.max_towers]
        shown += [t for t in towers[self.max_towers :] if t == slowest]
        # nobody ever waited for anybody, or not noticeably (equal towers, one of them later
        # by a transfer's turn at a port: learner trial 60 read lesson 1's "20/20" as a
        # straggler, lesson 7's equal towers "together")
        arrived_together = bool(runs) and (not any(last.values()) or not anyone_waited)
        for i, tower in enumerate(shown):
            count = last.get(tower, 0)
            if arrived_together and i == 0:
                yield tower, ms(waits[tower]), f"{count}/{runs}", TOGETHER, "dim"
            elif tower == slowest and in_line:
                yield tower, ms(waits[tower]), f"{count}/{runs}", IN_LINE, "yellow"
            elif tower == slowest:
                yield tower, ms(waits[tower]), f"{count}/{runs}", "◀ straggler", "bold red"
            else:
                yield tower, ms(waits[tower]), f"{count}/{runs}", "", ""
        if len(towers) > len(shown):
            yield "…", "", "", f"+{len(towers) - len(shown)} towers", "dim"


def waited(waits: Mapping[str, Mapping[str, float]], point: str) -> float:
    """How long the towers waited at sync point ``point`` in a mean step, all together
    (``waits``: each sync point's mean wait by tower, a summary's ``wait``).

    >>> waited({"concat": {"tower_0": 0.002, "tower_1": 0.0}}, "concat")
    0.002
    """
    return sum((waits.get(point) or {}).values())


#: a critical path of more ops than this is shown by scope, and at most this many of them
PATH_SHOWN = 12


def path_by_scope(ops: list[str], most: int = PATH_SHOWN) -> list[str]:
    """A critical path as a screen can show it: as it is when short; else the ops one after
    another in one scope as that scope (``gradients (14 ops)``; a tower's own scope with the
    one below it, ``tower_0/gradients``), and at most ``most`` of those, the middle left out.

    >>> path_by_scope(["a", "b"])
    ['a', 'b']
    >>> path_by_scope(["x/MatMul", *[f"gradients/g{i}/Mul" for i in range(12)], "Apply"])
    ['x/MatMul', 'gradients (12 ops)', 'Apply']
    >>> path_by_scope([f"s{i}/op" for i in range(20)], most=5)
    ['s0/op', 's1/op', 's2/op', '… 16 more …', 's19/op']
    """
    if len(ops) <= most:
        return list(ops)
    scopes: list[tuple[str, int, str]] = []  # scope, ops in a row, the first of them
    for op in ops:
        parts = op.split("/")
        scope = "/".join(parts[:2] if len(parts) > 2 and _TOWER.match(parts[0]) else parts[:1])
        if scopes and scopes[-1][0] == scope:
            scopes[-1] = (scope, scopes[-1][1] + 1, scopes[-1][2])
        else:
            scopes.append((scope, 1, op))
    shown = [f"{scope} ({count} ops)" if count > 1 else op for scope, count, op in scopes]
    if len(shown) <= most:
        return shown
    head = most // 2 + 1
    tail = most - head - 1
    return [*shown[:head], f"… {len(shown) - head - tail} more …", *shown[len(shown) - tail :]]


#: a scope that numbers a tower's copy of the model (``tower_0``)
_TOWER = re.compile(r".+_\d+$")


def scope_lines(name: str, width: int = 30) -> str:
    """An op's name broken after a ``/`` into lines of at most ``width`` characters where it
    can be (a take's name is long; a table cell must not squeeze the numbers beside it).

    >>> print(scope_lines("sync_replicas/take_gradients/layer_0/kernel"))
    sync_replicas/take_gradients/
    layer_0/kernel
    >>> scope_lines("average_gradients")
    'average_gradients'
    """
    lines, line = [], ""
    for part in name.split("/"):
        piece = part if not line else f"/{part}"
        if line and len(line) + len(piece) > width:
            lines.append(line + "/")
            line = part
        else:
            line += piece
    return "\n".join([*lines, line])


def _any_tower(summary: Summary, ops: list[str]) -> str:
    """Where the critical path runs through one tower of several and another tower's work up
    to each sync point on it is about as long (equal towers, or two towers at the same
    speed): the path could run through that one as well, and which one is not who comes
    last.

    >>> s = {"towers": 2, "expected_last": {"concat": ""}}
    >>> print(_any_tower(s, ["tower_0/read", "tower_0/grad", "concat", "apply"]))
     (through tower_0 here; another tower's work is about as long: it could run there too)
    >>> _any_tower({**s, "expected_last": {"concat": "tower_0"}}, ["tower_0/grad", "concat"])
    ''
    """
    towers = {m[1] for name in ops if (m := re.match(r"(tower_\d+)/", name))}
    points = [name for name in ops if name in (summary.get("expected_last") or {})]
    if len(towers) != 1 or int(summary.get("towers") or 1) < 2 or not points:
        return ""
    if any(summary["expected_last"][point] for point in points):
        return ""
    return (
        f" (through {towers.pop()} here; another tower's work is about as long: it could run "
        "there too)"
    )


def critical_path_note(
    path: float | None, step_time: Mapping[str, Any] | None, clients: int = 1
) -> str:
    """Why the mean step is not the critical path, when the two differ by more than 1 %, from
    what the run shows: whether its steps varied (p50 against p95), and how many clients'
    steps the mean mixes.

    >>> critical_path_note(0.010, {"mean": 0.026858, "p50": 0.026, "p95": 0.03})[:60]
    'The mean step (26.858 ms) is longer than this path: a step w'
    >>> "vary" in critical_path_note(0.010, {"mean": 0.02, "p50": 0.02, "p95": 0.02})
    False
    >>> critical_path_note(0.020, {"mean": 0.0201})
    ''
    >>> critical_path_note(0.020, {"mean": 0.013, "p50": 0.01, "p95": 0.02}, clients=4)[:82]
    'The mean update (13.000 ms) is shorter than this path: it is the mean of 4 workers'
    """
    step = (step_time or {}).get("mean")
    if not path or not step or abs(step - path) <= 0.01 * path:
        return ""
    p50, p95 = (step_time or {}).get("p50") or step, (step_time or {}).get("p95") or step
    varied = p95 > 1.01 * p50
    if clients > 1:  # several clients update the model: asynchronous workers' updates
        mean = f"The mean update ({ms(step)} ms)"
        if step > path:
            vary = " (their times vary from update to update)" if varied else ""
            return (
                f"{mean} is longer than this path: an update waits for devices and links "
                f"busy with the other workers' work{vary}, which this path, at mean costs and "
                "alone on the machine, leaves out."
            )
        return (
            f"{mean} is shorter than this path: it is the mean of {clients} workers' "
            "updates, and this path is the longest of them: the others' updates are shorter."
        )
    if step > path:
        vary = " (its times vary from step to step)" if varied else ""
        return (
            f"The mean step ({ms(step)} ms) is longer than this path: a step waits for its "
            f"slowest compute{vary} and for devices and links busy with other work, which this "
            "path, at mean costs and alone on the machine, leaves out."
        )
    return f"The mean step ({ms(step)} ms) is shorter than this path: " + (
        "its compute times were shorter than their mean." if varied else "its runs overlapped."
    )


def _concurrent(summary: Summary) -> bool:
    """Whether several clients update the model, each run an update of its own (stale or not)."""
    return int(summary.get("updating_clients") or 1) > 1


class LedgerView:
    """The first ``rows`` lines of the ledger of updates, in the order they landed: who, which
    version it read, which it made, its staleness, and whether it was applied.

    >>> import io
    >>> from simsync.trace import Update
    >>> out = io.StringIO()
    >>> Console(file=out, width=80, color_system=None).print(LedgerView(
    ...     [Update("worker_1", 0, "worker_1/apply_gradients", 0, 1, True, 0.01)]))
    >>> print(out.getvalue().splitlines()[-2])
    │ 2 │ worker_1 │    0 │            0 │               2 │         1 │ applied │
    """

    def __init__(self, updates: Sequence[Update], rows: int = 12) -> None:
        self.updates, self.rows = list(updates), max(rows, 1)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        ordered = sorted(self.updates, key=lambda u: (u.time, u.before))
        table = Table(title="The ledger: every update, in the order it landed", box=box.SQUARE)
        for column in (
            "#",
            "worker",
            "step",
            "version read",
            "version applied",
            "staleness",
            "outcome",
        ):
            table.add_column(column, justify="left" if column in ("worker", "outcome") else "right")
        for update in ordered[: self.rows]:
            made = str(update.before + 1) if update.applied else "–"
            table.add_row(
                str(update.before + 1) if update.applied else "",
                update.client,
                str(update.step),
                str(update.read),
                made,
                str(update.staleness),
                "applied" if update.applied else "dropped",
                style="" if update.applied else "dim",
            )
        if len(ordered) > self.rows:
            table.add_row("…", f"+{len(ordered) - self.rows} more", "", "", "", "", "", style="dim")
        yield table
