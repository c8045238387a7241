"""The terminal simsync prints to, as it comes: the one place rich consoles are made, and
standard streams that cannot encode every character.

- **Width** (:func:`make_console`). ``COLUMNS`` counts when it is a whole number from
  :data:`MIN_WIDTH` to :data:`MAX_WIDTH`; otherwise (``0``, negative, not a number, absurd)
  the terminal's own width, else 80. rich took ``COLUMNS=0`` as a width of 0 and printed
  nothing at all. Without ``COLUMNS``: the terminal's width, else 80 (rich's own rule, which
  follows a terminal being resized).
- **Encoding** (:func:`ascii_fallback`). A terminal or a pipe set to latin-1 or ASCII
  (``PYTHONIOENCODING=latin-1``, an old ``LANG``) raised ``UnicodeEncodeError`` at the first
  mark: ``✓``, ``→``, ``◀``, a box-drawing line. Such a stream gets an error handler that writes
  an ASCII stand-in instead: one character for one, so that tables and timelines stay aligned
  (``✓`` is ``+``, ``✗`` is ``x``, box drawing is ``-``, ``|`` and ``+``, a block is ``#``); a
  character with no stand-in is written as its code (``\\xe9``), as Python writes it to
  standard error. rich draws its own boxes and rules in ASCII there by itself. A stream that
  encodes everything (UTF-8) is left as it is.

- **Ending signals** (:func:`on_ending_signals`). ``kill`` (SIGTERM), a closed terminal
  (SIGHUP) and the user signals, whose default is to end the process where it stands, become
  an exception that unwinds it: its temporary folders, half-written files and sandboxes go
  with it. Only SIGKILL cannot be caught (a later run removes what it left).

Small and below every package, so that the command line sets its streams up before anything
heavy is imported; rich itself is imported only when a console is made.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import sys
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "ENDING_SIGNALS",
    "HANDLER",
    "MAX_WIDTH",
    "MIN_WIDTH",
    "ascii_fallback",
    "make_console",
    "on_ending_signals",
    "pasteable",
    "stand_in",
    "usable_width",
]

#: ``COLUMNS`` outside these bounds is not a terminal's width.
MIN_WIDTH, MAX_WIDTH = 20, 1000

#: The name of the error handler, for ``str.encode(..., errors=HANDLER)``.
HANDLER = "simsync-ascii"

_MARKS = {
    "✓": "+",
    "✗": "x",
    "→": ">",
    "←": "<",
    "▶": ">",
    "◀": "<",
    "◆": "*",
    "•": "*",
    "·": ".",
    "…": ".",
    "–": "-",
    "—": "-",
    "−": "-",
    "×": "x",
    "≈": "~",
    "±": "+",
    "µ": "u",
    "²": "2",
    "≤": "<",
    "≥": ">",
}


def pasteable(words: list[str], width: int, first: str = "", indent: str = "    ") -> list[str]:
    """A shell command (its ``words``, each quoted as the shell needs) in lines of at most
    ``width`` characters where its words allow: broken only between words, each line but
    the last ending in `` \\``, so that the lines pasted into a shell are the one command (a
    terminal that wraps a long line breaks it anywhere: ``--speeds 1,0.8,`` / ``0.5,1``); an
    option and its value stay together.
    ``first`` begins the first line, ``indent`` the others.

    >>> for line in pasteable(["simsync", "simulate", "a.py", "--speeds", "1,0.8,0.5,1"], 30):
    ...     print(line)
    simsync simulate a.py \\
        --speeds 1,0.8,0.5,1
    >>> pasteable(["cd", "my lesson"], 80, first="  ")
    ["  cd 'my lesson'"]
    """
    import shlex

    units: list[str] = []  # an option and its value stay on one line
    for word in (shlex.quote(w) for w in words):
        option = bool(units) and units[-1].startswith("-") and " " not in units[-1]
        if option and not word.startswith("-"):
            units[-1] += " " + word
        else:
            units.append(word)
    lines: list[str] = []
    line = ""
    for word in units:
        if not line:
            line = first + word
        elif len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = indent + word
        else:
            line = f"{line} {word}"
    return [*lines, line]


def stand_in(character: str) -> str:
    """The ASCII that stands for ``character`` on a stream that cannot encode it.

    >>> [stand_in(c) for c in "✓✗─│┼█→é"]
    ['+', 'x', '-', '|', '+', '#', '>', 'e']
    >>> stand_in("字")
    '\\\\u5b57'
    """
    if character in _MARKS:
        return _MARKS[character]
    code = ord(character)
    if 0x2500 <= code <= 0x257F:  # box drawing
        name = unicodedata.name(character, "")
        if "HORIZONTAL" in name and "VERTICAL" not in name and "AND" not in name:
            return "-"
        if "VERTICAL" in name and "HORIZONTAL" not in name and "AND" not in name:
            return "|"
        return "+"
    if 0x2580 <= code <= 0x259F:  # block elements
        return "#"
    if 0x2800 <= code <= 0x28FF:  # braille: a spinner's frames
        return "*"
    plain = unicodedata.normalize("NFKD", character).encode("ascii", "ignore").decode()
    return plain if len(plain) == 1 else character.encode("ascii", "backslashreplace").decode()


def _handler(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(stand_in(character) for character in text), error.end


codecs.register_error(HANDLER, _handler)


def ascii_fallback(stream: IO[str] | Any) -> None:
    """Give ``stream`` the ASCII stand-ins when its encoding cannot write simsync's marks
    (a stream that is not a text file of the system, such as ``io.StringIO``, is left)."""
    encoding = getattr(stream, "encoding", None)
    if not encoding or not hasattr(stream, "reconfigure"):
        return
    try:
        "✓─◀".encode(encoding)
    except UnicodeEncodeError:
        stream.reconfigure(errors=HANDLER)
    except LookupError:  # an encoding Python does not know: leave the stream alone
        return


def make_console(
    *, stderr: bool = False, file: IO[str] | None = None, width: int | None = None
) -> Console:
    """A console on standard output (``stderr``: standard error, ``file``: that file), of
    ``width`` or the terminal's usable width, writing ASCII stand-ins where the stream
    cannot encode a mark."""
    from rich.console import Console

    ascii_fallback(file if file is not None else sys.stderr if stderr else sys.stdout)
    if width is None and file is None:
        width = usable_width(os.environ, (sys.stderr if stderr else sys.stdout))
    return Console(file=file, stderr=stderr, width=width)


def usable_width(environ: Mapping[str, str], stream: IO[str] | None = None) -> int | None:
    """The width to print at where ``COLUMNS`` is set but unusable; None where rich's own
    choice is right (``COLUMNS`` unset, or a usable width).

    >>> usable_width({}), usable_width({"COLUMNS": "100"}), usable_width({"COLUMNS": "0"})
    (None, None, 80)
    >>> usable_width({"COLUMNS": "-5"}), usable_width({"COLUMNS": "wide"})
    (80, 80)
    """
    columns = environ.get("COLUMNS")
    if columns is None:
        return None
    if columns.isascii() and columns.isdigit() and MIN_WIDTH <= int(columns) <= MAX_WIDTH:
        return None
    try:
        width = os.get_terminal_size(stream.fileno()).columns if stream is not None else 0
    except (AttributeError, OSError, ValueError):  # not a terminal, or no descriptor
        width = 0
    return width if MIN_WIDTH <= width <= MAX_WIDTH else 80


#: the signals whose default ends the process where it stands, and that can be caught
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


@contextlib.contextmanager
def on_ending_signals(make: Callable[[], BaseException]) -> Iterator[None]:
    """While inside, each of :data:`ENDING_SIGNALS` raises ``make()`` in the main thread, so
    the process unwinds (its ``finally`` blocks run); the handlers before are put back after.
    Outside the main thread, where Python allows no handler, nothing is installed.

    >>> import os
    >>> class Ended(Exception): ...
    >>> with on_ending_signals(Ended):
    ...     try:
    ...         os.kill(os.getpid(), signal.SIGHUP)
    ...     except Ended:
    ...         print("unwound")
    unwound
    """

    def end(number: int, frame: object) -> None:
        raise make()

    previous = {}
    try:
        for number in ENDING_SIGNALS:
            previous[number] = signal.signal(number, end)
    except ValueError:  # not the main thread: nothing to install
        pass
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
