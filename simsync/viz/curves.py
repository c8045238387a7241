"""Loss against wall-clock time for several runs: a terminal plot and a PNG.

"Who wins the race?" has two halves: time per update (a synchronous step waits for its slowest
tower, an asynchronous update waits for nobody) and progress per update (a stale gradient
helps less). Loss against wall-clock time puts both on one axis. Each run is a :class:`Curve`;
the plot marks every run with its own letter and colour and the table says when each reached
the target loss (the worst of the final losses, so every run reaches it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from simsync.viz.timeline import time_axis

__all__ = ["Curve", "LossCurves", "write_loss_png"]

_MARKS = ("A", "B", "C", "D", "E", "F")
_COLORS = ("cyan", "magenta", "green", "yellow", "blue", "red")
_HEX = ("#1f9bb4", "#b4308f", "#3a9a3a", "#c9a400", "#3050c0", "#c03030")


@dataclass(frozen=True)
class Curve:
    """One run's loss curve: ``points`` are (seconds, loss); ``reached`` is when it first got
    to the target loss; ``mode``, ``updates`` and mean ``staleness`` describe the run."""

    name: str
    points: tuple[tuple[float, float], ...]
    reached: float | None = None
    mode: str = "sync"
    updates: int = 0
    staleness: float = 0.0

    @property
    def label(self) -> str:
        if self.mode == "async":
            return f"{self.name} (async, staleness {self.staleness:.2f})"
        return f"{self.name} ({self.mode})"


class LossCurves:
    """A rich renderable: the curves on one character grid, then a table of the runs.

    >>> import io
    >>> a = Curve("sync", ((0.01, 2.0), (0.02, 1.0)), 0.02)
    >>> b = Curve("async", ((0.005, 2.0), (0.01, 1.5), (0.015, 1.0)), 0.015)
    >>> out = io.StringIO()
    >>> Console(file=out, width=60, color_system=None).print(LossCurves([a, b], target=1.0,
    ...                                                               height=6))
    >>> print(out.getvalue().splitlines()[0])
    Training loss against wall-clock time (┈ target 1.0000)
    """

    def __init__(self, curves: Sequence[Curve], target: float | None = None,
                 height: int = 14) -> None:
        self.curves, self.target, self.height = list(curves), target, max(height, 4)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        title = "Training loss against wall-clock time"
        if self.target is not None:
            title += f" (┈ target {self.target:.4f})"
        yield Text(title, style="bold")
        points = [p for c in self.curves for p in c.points]
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
        if self.target is not None and low <= self.target <= high:  # a dotted target line
            row = round((high - self.target) / (high - low) * (self.height - 1))
            grid[row] = ["┈"] * columns
            styles.update({(row, c): "dim" for c in range(columns)})
        for index, curve in enumerate(self.curves):
            for column, loss in _sampled(curve.points, span, columns):
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

    def table(self) -> Table:
        """One row per run: updates, mean staleness, final loss, when it reached the target
        loss (the first to get there marked) and when it finished."""
        table = Table(box=box.SIMPLE_HEAD, show_edge=False)
        names = [f"{c.name} ({c.mode})" for c in self.curves]
        table.add_column("", no_wrap=True)
        table.add_column("run", overflow="fold")
        for column, width in (("updates", 7), ("staleness", 9), ("final loss", 6),
                              ("at target (ms)", 9), ("finished (ms)", 8)):
            table.add_column(column, justify="right", width=width)
        arrived = [i for i, c in enumerate(self.curves) if c.reached is not None]
        first = min(arrived, key=lambda i: self.curves[i].reached or 0.0, default=None)
        for index, (curve, name) in enumerate(zip(self.curves, names, strict=True)):
            mark = Text(_MARKS[index % len(_MARKS)], style=f"bold {_COLORS[index % 6]}")
            final = curve.points[-1][1] if curve.points else math.nan
            end = curve.points[-1][0] if curve.points else math.nan
            at = "never" if curve.reached is None else f"{curve.reached * 1e3:,.0f}"
            winner = index == first  # the first to get there; on a tie, the first listed
            loss = f"{final:.4f}" if abs(final) < 1000 else f"{final:.3g}"
            table.add_row(mark, Text(name), str(curve.updates),
                          "–" if curve.mode != "async" else f"{curve.staleness:.2f}",
                          loss, Text(at + (" ◀" if winner else "  "),
                                     style="bold green" if winner else ""),
                          f"{end * 1e3:,.0f}")
        return table


def _sampled(points: Sequence[tuple[float, float]], span: float,
             columns: int) -> list[tuple[int, float]]:
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


def write_loss_png(path: str | os.PathLike[str], curves: Sequence[Curve],
                   target: float | None = None) -> None:
    """The same curves as a PNG (matplotlib's Agg canvas; no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.5), dpi=110)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for index, curve in enumerate(curves):
        times = [t * 1e3 for t, _ in curve.points]
        axes.plot(times, [v for _, v in curve.points], color=_HEX[index % len(_HEX)],
                  linewidth=1.6, label=f"{_MARKS[index % len(_MARKS)]}  {curve.label}")
        if curve.reached is not None:
            axes.axvline(curve.reached * 1e3, color=_HEX[index % len(_HEX)], linestyle=":",
                         linewidth=1)
    if target is not None:
        axes.axhline(target, color="#888888", linestyle="--", linewidth=1,
                     label=f"target loss {target:.4f}")
    axes.set_xlabel("wall-clock time (ms)")
    axes.set_ylabel("training loss (moving average)")
    axes.set_title("Who wins the race? Loss against wall-clock time")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    temporary = f"{os.fspath(path)}.part"
    figure.savefig(temporary, format="png")
    os.replace(temporary, path)
