"""What simsync made of a TensorFlow program: the import, its sync points, its step.

The view of ``simsync simulate PROGRAM.py`` (and of a lesson's program step), read from the
JSON summary of :func:`simsync.programs.program_summary`: how many TensorFlow ops the program
built and how many a step runs, how towers were found, what was ignored and why, each sync
point with the function and line of the program that made it, where the costs came from and
what was changed, then the simulation's summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from simsync.viz.report import SummaryView

__all__ = ["ProgramView"]


def _count(why: str, count: int) -> str:
    """``constants (why)`` and 68 as ``constants: 68 (why)``: it reads right for any count.

    >>> _count("queues and accumulators (kept as resources)", 1)
    'queues and accumulators: 1 (kept as resources)'
    """
    what, _, note = why.partition(" (")
    return f"{what}: {count}" + (f" ({note}" if note else "")


class ProgramView:
    """A rich renderable of a program's summary (``simulate PROGRAM.py --json``).

    >>> import io
    >>> result = {"source": "train.py", "imported": {"tensorflow_ops": 308, "ops": 150,
    ...     "tower_rule": "name scope tower_<i>", "ignored": {"constants": 68},
    ...     "costs": "measured now"}, "sync_points_made_in": {"concat": "average_gradients"},
    ...     "what_if": [], "scenario": "train", "steps": 2, "towers": 2,
    ...     "wait": {}, "step_time": {"mean": 0.002, "p50": 0.002, "p95": 0.002}}
    >>> out = io.StringIO()
    >>> Console(file=out, width=80, color_system=None).print(ProgramView(result, summary=False))
    >>> print("\\n".join(line.rstrip() for line in out.getvalue().splitlines()))
    train.py: imported
      308 TensorFlow ops; a step runs 150 of them; towers found by name scope
    tower_<i>
      ignored: constants: 68
      sync point concat: made in average_gradients
      costs: measured now
    """

    def __init__(self, result: Mapping[str, Any], summary: bool = True) -> None:
        self.result, self.summary = result, summary

    def lines(self) -> list[Text]:
        """The import's lines, as plain text (names are the program's, never markup)."""
        result, imported = self.result, self.result["imported"]
        ignored = ", ".join(_count(why, count) for why, count in imported["ignored"].items())
        lines = [
            Text.assemble((str(result["source"]), "bold"), ": imported"),
            Text(
                f"  {imported['tensorflow_ops']} TensorFlow ops; a step runs {imported['ops']} of "
                f"them; towers found by {imported['tower_rule']}"
            ),
            Text(f"  ignored: {ignored or 'nothing'}"),
        ]
        for name, made in result["sync_points_made_in"].items():
            lines.append(Text(f"  sync point {name}: made in {made or 'the graph'}"))
        lines.append(Text(f"  costs: {imported['costs']}"))
        lines += [Text(f"  what if: {line}") for line in result["what_if"]]
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.lines()
        if self.summary:
            yield SummaryView(self.result)  # type: ignore[arg-type]
