"""The errors simsync raises on purpose: each carries one message meant for a person.

The command line prints the message of a :class:`SimsyncError` and exits with status 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "GraphError",
    "ScenarioError",
    "SimsyncError",
    "SimulationError",
    "UsageError",
    "printable",
]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: Also what splits a line: line feeds, tabs, and Unicode's line and paragraph separators.
_CONTROL_OR_BREAK = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: str, *, one_line: bool = False) -> str:
    r"""``text`` safe to show in a terminal: control characters (escape sequences that could
    recolour, retitle or clear the terminal) are shown as their codes, as ``repr`` shows them;
    line breaks and tabs stay, unless ``one_line`` (an error message: one line, whatever the
    paths in it hold).

    >>> printable("four\x1b[2Jtowers")
    'four\\x1b[2Jtowers'
    >>> print(printable("cannot write a\nb.json: Read-only file system", one_line=True))
    cannot write a\nb.json: Read-only file system
    >>> printable("evil\u202egpj.py"), printable("lone\ud800")
    ('evil\\u202egpj.py', 'lone\\ud800')
    """
    pattern = _CONTROL_OR_BREAK if one_line else _CONTROL
    text = pattern.sub(lambda match: ascii(match.group())[1:-1], text)
    if text.isascii():
        return text
    # line and paragraph separators, and format characters (a right-to-left override)
    # and half of a UTF-16 pair alone (Cs), which no terminal's encoding takes
    return "".join(
        ascii(c)[1:-1] if unicodedata.category(c) in ("Zl", "Zp", "Cf", "Cs") else c for c in text
    )


class SimsyncError(Exception):
    """Base class: an error whose message is complete enough to show a user as is."""


class ScenarioError(SimsyncError):
    """A scenario file that cannot be read or does not follow the schema.

    The message names the file, the key and what is allowed.
    """


class GraphError(SimsyncError):
    """A dataflow graph that is not well formed (cycle, unknown device, dangling input)."""


class SimulationError(SimsyncError):
    """A simulation that cannot go on, e.g. a deadlock: ops still waiting with nothing to run.

    For a deadlock, ``blocked`` maps each blocked client to the resource it waits on."""

    def __init__(self, message: str, blocked: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.blocked = dict(blocked or {})


class UsageError(SimsyncError):
    """A combination of command-line options or inputs that cannot work."""
