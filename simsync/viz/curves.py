"""Loss against wall-clock time for several runs: a terminal plot and a PNG.

"Who wins the race?" has two halves: time per update (a synchronous step waits for its slowest
tower, an asynchronous update waits for nobody) and progress per update (a stale gradient
helps less). Loss against wall-clock time puts both on one axis. A contest
(:func:`simsync.simulation.contest`) holds the runs; the plot marks every run with its own letter
and colour and the table says when each reached the target loss (the worst of the final
losses, so every run reaches it).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from simsync.files import atomic_writer
from simsync.trace import Contest, Entrant
from simsync.viz.timeline import time_axis

__all__ = ["LossCurves", "RaceTable", "write_loss_png"]

_MARKS = ("A", "B", "C", "D", "E", "F")
_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red")
_HEX = ("#1f9bb4", "#b4308f", "#3a9a3a", "#c9a400", "#3050c0", "#c03030")


class LossCurves:
    """A rich renderable of a :class:`~simsync.trace.Contest`: the runs' curves on one
    character grid, then a table of the runs.

    >>> import io
    >>> from simsync.trace import Contest, Entrant
    >>> a = Entrant("sync", "sync", [(0.01, 2.0), (0.02, 1.0)], 0.02, 2, 0.0)
    >>> b = Entrant("async", "async", [(0.005, 2.0), (0.01, 1.5), (0.015, 1.0)], 0.015, 3, 1.0)
    >>> out = io.StringIO()
    >>> Console(file=out, width=60, color_system=None).print(LossCurves(Contest(1.0, [a, b]),
    ...                                                                 height=6))
    >>> print(out.getvalue().splitlines()[0])
    Training loss against wall-clock time (┈ target 1.0000)
    """

    def __init__(self, contest: Contest, height: int = 14) -> None:
        self.contest, self.height = contest, max(height, 4)
        self.entrants, self.target = contest.entrants, contest.target

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        title = "Training loss against wall-clock time"
        title += f" (┈ target {self.target:.4f})"
        yield Text(title, style="bold")
        points = [p for r in self.entrants for p in r.curve]
        if not points:
            yield Text("no losses to plot (run with numerics)", style="yellow")
            return
        label_width = 8
        columns = max(options.max_width - label_width, 10)
        span = max(t for t, _ in points) or 1e-3
        low, high = min(v for _, v in points), max(v for _, v in points)
        if high - low < 1e-12:
            low, high = low - 0.5, high + 0.5
        grid = [[" "] * columns for _ in range(self.height)]
        styles: dict[tuple[int, int], str] = {}
        if low <= self.target <= high:  # a dotted target line
            row = round((high - self.target) / (high - low) * (self.height - 1))
            grid[row] = ["┈"] * columns
            styles.update({(row, c): "dim" for c in range(columns)})
        for index, entrant in enumerate(self.entrants):
            for column, loss in _sampled(entrant.curve, span, columns):
                row = round((high - loss) / (high - low) * (self.height - 1))
                grid[row][column] = _MARKS[index % len(_MARKS)]
                styles[row, column] = _COLORS[index % len(_COLORS)]
        for row in range(self.height):
            value = high - (high - low) * row / (self.height - 1)
            label = f"{value:.3f}" if row in (0, self.height // 2, self.height - 1) else ""
            line = Text(label.rjust(label_width - 1) + "│")
            for column, char in enumerate(grid[row]):
                line.append(char, style=styles.get((row, column), ""))
            yield line
        ticks, labels = time_axis(0.0, span, columns)
        yield Text(" " * (label_width - 1) + "└") + ticks
        yield Text("ms".ljust(label_width)) + labels
        yield self.table()
        if self.contest.winner is not None and self.contest.clear_winner is None:
            when = self.contest.entrants[self.contest.winner].reached
            tied = [
                _MARKS[i % len(_MARKS)] for i, r in enumerate(self.entrants) if r.reached == when
            ]
            yield Text(
                f"A tie: {' and '.join(tied)} reached the target loss at the same time.",
                style="bold",
            )

    def table(self) -> Table:
        """One row per run: updates, mean staleness, final loss, when it reached the target
        loss (the first to get there marked) and when it finished."""
        table = Table(box=box.SIMPLE_HEAD, show_edge=False)
        table.add_column("curve", no_wrap=True)
        table.add_column("run", overflow="fold")
        for column, width in (
            ("updates", 7),
            ("staleness mean/max", 9),
            ("final loss", 6),
            ("at target (ms)", 9),
            ("finished (ms)", 8),
        ):
            table.add_column(column, justify="right", width=width)
        first = self.contest.clear_winner
        for index, entrant in enumerate(self.entrants):
            mark = Text(_MARKS[index % len(_MARKS)], style=f"bold {_COLORS[index % 6]}")
            final = entrant.final_loss
            at = "never" if entrant.reached is None else f"{entrant.reached * 1e3:,.0f}"
            winner = index == first
            loss = f"{final:.4f}" if abs(final) < 1000 else f"{final:.3g}"
            table.add_row(
                mark,
                Text(f"{entrant.name} ({entrant.mode})" if entrant.mode else entrant.name),
                str(entrant.updates),
                _stale(entrant),
                loss,
                Text(at + (" ◀" if winner else "  "), style="bold green" if winner else ""),
                f"{entrant.finished * 1e3:,.0f}",
            )
        return table


class RaceTable:
    """A race run on TensorFlow beside its prediction: one row per run, when it reached the
    target loss as predicted for this machine and in each round measured (the first of each
    marked), then the verdict and the rule that decided it.

    >>> import io
    >>> from simsync.trace import Contest, Entrant
    >>> a = Entrant("sync", "sync", [(0.02, 1.0)], 0.02, 2, None)
    >>> b = Entrant("async", "async", [(0.01, 1.0)], 0.01, 4, 1.0)
    >>> out = io.StringIO()
    >>> Console(file=out, width=80, color_system=None).print(RaceTable(Contest(1.0, [a, b]),
    ...     [Contest(1.0, [a, b])], "as predicted", "predicted first: async"))
    >>> print(out.getvalue().splitlines()[4].rstrip())
     async             10 ◀           10 ◀
    """

    def __init__(
        self, predicted: Contest, rounds: Sequence[Contest], verdict: str, rule: str
    ) -> None:
        self.predicted, self.rounds, self.verdict, self.rule = predicted, rounds, verdict, rule

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, title_justify="left")
        table.add_column("run", no_wrap=True)
        table.add_column("predicted (ms)", justify="right")
        for number in range(1, len(self.rounds) + 1):
            table.add_column(f"round {number} (ms)", justify="right")
        races = [self.predicted, *self.rounds]
        firsts = [race.clear_winner for race in races]
        for index, entrant in enumerate(self.predicted.entrants):
            cells = []
            for race, first in zip(races, firsts, strict=True):
                reached = race.entrants[index].reached
                at = "never" if reached is None else f"{reached * 1e3:,.0f}"
                won = index == first
                cells.append(Text(at + (" ◀" if won else "  "), style="bold green" if won else ""))
            table.add_row(entrant.name, *cells)
        yield Text("When each run reached the target loss (◀ first)", style="bold")
        yield table
        targets = ", ".join(f"{race.target:.3f}" for race in self.rounds)
        yield Text(
            f"Target loss: {self.predicted.target:.3f} predicted, {targets} measured (the worst "
            "final loss of the runs)."
        )
        style = {"as predicted": "bold green", "not as predicted": "bold red"}.get(
            self.verdict, "bold yellow"
        )
        yield Text.assemble(("Who is first: ", "bold"), (self.verdict, style), f" ({self.rule}).")


def _stale(entrant: Entrant) -> str:
    """An entrant's mean staleness and its stalest update: ``1.94/9``; "–" for none."""
    if entrant.staleness is None:
        return "–"
    most = "" if entrant.stalest is None else f"/{entrant.stalest}"
    return f"{entrant.staleness:.2f}{most}"


def _sampled(
    points: Sequence[tuple[float, float]], span: float, columns: int
) -> list[tuple[int, float]]:
    """Per column up to the curve's end, its last value at or before that column's time."""
    result, index, last = [], 0, None
    end = points[-1][0] if points else 0.0
    for column in range(columns):
        until = (column + 1) / columns * span
        if column / columns * span > end:
            break  # the run is over: nothing more to draw
        while index < len(points) and points[index][0] <= until + 1e-15:
            last = points[index][1]
            index += 1
        if last is not None:
            result.append((column, last))
    return result


def write_loss_png(path: str | os.PathLike[str], contest: Contest) -> None:
    """The same contest as a PNG (matplotlib's Agg canvas; no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.5), dpi=110)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for index, entrant in enumerate(contest.entrants):
        times = [t * 1e3 for t, _ in entrant.curve]
        axes.plot(
            times,
            [v for _, v in entrant.curve],
            color=_HEX[index % len(_HEX)],
            linewidth=1.6,
            label=f"{_MARKS[index % len(_MARKS)]}  {entrant.label}",
        )
        if entrant.reached is not None:
            axes.axvline(
                entrant.reached * 1e3, color=_HEX[index % len(_HEX)], linestyle=":", linewidth=1
            )
    axes.axhline(
        contest.target,
        color="#888888",
        linestyle="--",
        linewidth=1,
        label=f"target loss {contest.target:.4f}",
    )
    axes.set_xlabel("wall-clock time (ms)")
    axes.set_ylabel("training loss (moving average)")
    axes.set_title("Who wins the race? Loss against wall-clock time")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    with atomic_writer(path, binary=True) as file:
        figure.savefig(file, format="png")
