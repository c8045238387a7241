"""A program's source in a box, numbered by its own lines, that fits the terminal without
breaking a word: a line too long for the box goes on under its number, cut where Python allows
a break (after a comma, an opening bracket, an ``=`` or a space, or before a ``.``), never
inside a name unless the name alone is wider than the box."""

from __future__ import annotations

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

__all__ = ["CodeView", "break_points"]

#: how much further than its own line a cut line's rest is indented
CONTINUED = 4


class CodeView:
    """``source`` (Python) highlighted in a box titled ``title``, each line numbered as in
    the file, long lines cut at :func:`break_points` to the box's width.

    >>> import io
    >>> source = "x = 1\\nvalues = dict(initializer=tf.truncated_normal_initializer(stddev=0.1))\\n"
    >>> out = io.StringIO()
    >>> Console(file=out, width=50, color_system=None).print(CodeView(source))
    >>> print("\\n".join(line.rstrip() for line in out.getvalue().splitlines()))
    ╭────────────────────────────────────────────────╮
    │ 1 x = 1                                        │
    │ 2 values = dict(initializer=tf                 │
    │       .truncated_normal_initializer(stddev=    │
    │       0.1))                                    │
    ╰────────────────────────────────────────────────╯
    """

    def __init__(self, source: str, title: str = "") -> None:
        self.source, self.title = source, title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = self.source.splitlines() or [""]
        number_width = len(str(len(lines)))
        inner = max(options.max_width - 4 - number_width - 1, 10)  # borders, padding, number
        highlighted = Syntax(self.source, "python").highlight(self.source).split("\n")
        grid = Table.grid(padding=(0, 1, 0, 0))
        grid.add_column(justify="right", style="dim", no_wrap=True)
        grid.add_column(no_wrap=True, overflow="crop")
        for number, (line, text) in enumerate(zip(lines, highlighted, strict=False), start=1):
            indent = len(line) - len(line.lstrip(" "))
            pieces = _cut(text, line, inner, indent)
            grid.add_row(str(number), pieces[0])
            for piece in pieces[1:]:
                grid.add_row("", Text(" " * min(indent + CONTINUED, inner // 2)) + piece)
        yield Panel(grid, title=self.title or None, title_align="left", box=box.ROUNDED)


def _cut(text: Text, line: str, width: int, indent: int) -> list[Text]:
    """``text`` (the highlighted ``line``) in pieces: the first ``width`` wide at most, the
    others as wide less their indent."""
    rest = min(indent + CONTINUED, width // 2)
    pieces, start, room = [], 0, width
    while len(line) - start > room:
        cut = start + _last_break(line[start : start + room])
        piece = text[start:cut]
        piece.rstrip()
        pieces.append(piece)
        start, room = cut, width - rest
        while start < len(line) and line[start] == " ":
            start += 1
    pieces.append(text[start:])
    return pieces


def _last_break(part: str) -> int:
    """Where to cut ``part`` (a line's first characters, as many as fit): after its last
    break point in its second half, else at its end (a name wider than half the box)."""
    points = [p for p in break_points(part) if p >= len(part) // 2]
    return points[-1] if points else len(part)


def break_points(line: str) -> list[int]:
    """The places a line of Python may be cut for show, as offsets: after a comma, an
    opening bracket, an ``=`` or a space, and before a ``.``.

    >>> line = "a = f(x, y.z)"
    >>> [line[:p] for p in break_points(line)]
    ['a ', 'a =', 'a = ', 'a = f(', 'a = f(x,', 'a = f(x, ', 'a = f(x, y']
    """
    found = []
    for index, char in enumerate(line):
        if char in ",([{= " and index + 1 < len(line):
            found.append(index + 1)
        elif char == "." and index > 0 and not line[index - 1].isdigit():
            found.append(index)
    return sorted(set(found))
