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


def made_in_lines(made_in: Mapping[str, str | None], shown: int = 3) -> list[str]:
    """The sync points grouped by where the program made them (function, file and line),
    a few names each: a gate such as ``control_dependencies(update_ops)`` makes one per op
    under it, and one line per op would bury the point.

    >>> for line in made_in_lines({"concat_1": "average_gradients (t.py:9)",
    ...                            "concat": "average_gradients (t.py:9)", "apply": None}):
    ...     print(line)
    2 sync points made in average_gradients (t.py:9): concat_1, concat
    1 sync point made in the graph: apply
    >>> made_in_lines({f"c{i}": "f (t.py:1)" for i in range(5)}, shown=2)
    ['5 sync points made in f (t.py:1): c0, c1, and 3 more']
    """
    groups: dict[str, list[str]] = {}
    for name, made in made_in.items():
        groups.setdefault(made or "the graph", []).append(name)
    lines = []
    for where, names in groups.items():
        more = f", and {len(names) - shown} more" if len(names) > shown else ""
        count = f"{len(names)} sync point{'s' if len(names) != 1 else ''}"
        lines.append(f"{count} made in {where}: {', '.join(names[:shown])}{more}")
    return lines


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
      1 sync point made in average_gradients: concat
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
        lines += [Text(f"  {line}") for line in made_in_lines(result["sync_points_made_in"])]
        lines.append(Text(f"  costs: {imported['costs']}"))
        lines += [Text(f"  what if: {line}") for line in result["what_if"]]
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from self.lines()
        if self.summary:
            yield SummaryView(self.result)  # type: ignore[arg-type]
