"""The command line's arguments: the options several commands share, each declared once.

A command takes shared options through one parent parser, ``common("file", "json", ...)``,
which declares each named option as :data:`COMMON` says (a tuple of names is a mutually
exclusive group). Every parser is made with ``allow_abbrev=False``: ``--jso`` is an error, never
``--json``, so that a new option cannot change what an old abbreviation means.

>>> parser = argparse.ArgumentParser(prog="x", parents=[common("json", "seed")], allow_abbrev=False)
>>> parser.parse_args(["--json", "--seed", "3"])
Namespace(json=True, seed=3)
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simsync.outputs import output_path

__all__ = [
    "COMMON",
    "add_command",
    "at_least",
    "common",
    "non_negative_int",
    "picture_path",
    "positive_int",
    "run_steps",
]


def at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer no smaller than ``minimum`` (and no larger than
    ``maximum``).

    >>> at_least(1, 10)("7")
    7
    >>> at_least(1, 10)("11")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be at most 10, got 11
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value

    return parse


positive_int, non_negative_int = at_least(1), at_least(0)
run_steps = at_least(1, 1_000_000)  # as [run] steps in a scenario file


def picture_path(text: str) -> Path:
    """An argparse type: a file to draw a picture in, ``.png`` or ``.svg``.

    >>> picture_path("t.svg")
    PosixPath('t.svg')
    >>> picture_path("t.jpg")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 't.jpg' is neither .png nor .svg: the picture's format is its suffix
    """
    path = output_path(text)
    if not isinstance(path, Path) or path.suffix.lower() not in (".png", ".svg"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither .png nor .svg: the picture's format is its suffix"
        )
    return path


#: Every option more than one command takes: name -> (flags, ``add_argument``'s keywords).
COMMON: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "file": (
        ("file",),
        {
            "type": Path,
            "help": "scenario file (TOML); simulate, graph and crosscheck also take your "
            "TensorFlow program (PROGRAM.py, .meta, .pbtxt: docs/importing.md)",
        },
    ),
    "steps": (
        ("--steps",),
        {
            "type": run_steps,
            "help": "override [run] steps (at most 1000000; asynchronous workers: steps x "
            "workers updates in all, from a shared pool)",
        },
    ),
    "seed": (("--seed",), {"type": non_negative_int, "help": "override [run] seed"}),
    "json": (
        ("--json",),
        {"action": "store_true", "help": "print one JSON object instead of the tables"},
    ),
    "costs": (
        ("--costs",),
        {
            "type": Path,
            "metavar": "PROFILE.json",
            "help": "predict with the costs of this calibration profile "
            "(`simsync calibrate FILE -o PROFILE.json`) or of one that comes with simsync "
            "(h100: an NVIDIA H100); for a program, its costs file measured on another machine "
            "(from simsync's cache, program-costs/)",
        },
    ),
    "scenario-costs": (
        ("--scenario-costs",),
        {
            "action": "store_true",
            "help": "predict with the scenario's own costs (only the host's cores added), "
            "not this machine's measured ones",
        },
    ),
    "trace": (
        ("--trace",),
        {
            "type": output_path,
            "metavar": "OUT.json",
            "help": "write the timeline as a Chrome trace (open it in https://ui.perfetto.dev); "
            "- prints it on standard output instead of the tables",
        },
    ),
    "timeline": (
        ("--timeline",),
        {
            "type": picture_path,
            "metavar": "OUT.png|OUT.svg",
            "help": "draw the first steps' timeline as a picture (PNG or SVG, by the suffix): "
            "devices as lanes, ops coloured by kind, waits at sync points and blocking shaded",
        },
    ),
    "no-tensorflow": (
        ("--no-tensorflow",),
        {"action": "store_true", "help": "skip the checks that run TensorFlow"},
    ),
    "unsafe": (
        ("--unsafe-no-sandbox",),
        {
            "action": "store_true",
            "help": "run the code graded without the sandbox (bubblewrap), with its limits "
            "only: for trusted code on a machine where the sandbox cannot start",
        },
    ),
}


def common(*names: str | tuple[str, ...]) -> argparse.ArgumentParser:
    """The parent parser of a command's shared options, in the order named; a tuple of names
    is a group of which at most one may be given."""
    parent = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for name in names:
        if isinstance(name, tuple):
            group = parent.add_mutually_exclusive_group()
            for member in name:
                flags, keywords = COMMON[member]
                group.add_argument(*flags, **keywords)
        else:
            flags, keywords = COMMON[name]
            parent.add_argument(*flags, **keywords)
    return parent


class ExamplesFormatter(argparse.RawDescriptionHelpFormatter):
    """Help whose description and epilog keep their blocks of examples (``  command   what
    it does``) and fill their other paragraphs to the terminal's width. A block wider than
    the terminal has what each command does in the column the most of them fit in, or on a
    line of its own below it; a command too wide breaks between its words, never inside one
    (at 80 columns, raw lines of 90 broke ``ui.perfe`` / ``tto.dev``).

    >>> rows = ["Ops placed on devices.", "", "examples:", "  simsync graph a.toml   lanes",
    ...         "  simsync simulate b.toml --json   one JSON object"]
    >>> print(ExamplesFormatter("simsync")._fill_text("\\n".join(rows), 30, ""))
    Ops placed on devices.
    <BLANKLINE>
    examples:
      simsync graph a.toml  lanes
      simsync simulate b.toml
        --json
          one JSON object
    """

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        width = max(width, 20)
        lines: list[str] = []
        for paragraph in text.strip("\n").split("\n\n"):
            if lines:
                lines.append("")
            rows = paragraph.splitlines()
            if any(row.startswith("  ") for row in rows):
                lines += _examples(rows, width)
            else:  # prose: filled
                lines += _wrapped(" ".join(rows), width, "", "")
        return "\n".join(indent + line if line else line for line in lines)


def _examples(rows: list[str], width: int) -> list[str]:
    """A block of examples laid out in ``width`` columns (see :class:`ExamplesFormatter`)."""
    import re

    if all(len(row) <= width for row in rows):
        return rows
    pairs: list[tuple[str, str | None]] = []
    for row in rows:
        found = re.match(r"\s*(.*?\S)\s{3,}(\S.*)$", row)  # the command, then what it does
        pairs.append((found.group(1), found.group(2)) if found else (row.strip(), ""))
        if not row.startswith("  "):  # the block's title
            pairs[-1] = (row, None)
    fitting = [
        len(command) for command, said in pairs if said and len(command) + len(said) + 4 <= width
    ]
    column = 2 + max(fitting, default=0) + 2
    lines: list[str] = []
    for command, said in pairs:
        if said is None:
            lines += _wrapped(command, width, "", "")
            continue
        if said and len(command) + 4 <= column and column + len(said) <= width:
            lines.append(f"  {command}".ljust(column) + said)
            continue
        lines += _wrapped(command, width, "  ", "    ")
        if said:
            lines += _wrapped(said, width, "      ", "      ")
    return lines


def _wrapped(text: str, width: int, first: str, rest: str) -> list[str]:
    import textwrap

    return textwrap.wrap(
        text, width, initial_indent=first, subsequent_indent=rest,
        break_long_words=False, break_on_hyphens=False,
    )  # fmt: skip


def add_command(commands: Any, name: str, **settings: Any) -> argparse.ArgumentParser:
    """A subcommand's parser (``commands`` from ``add_subparsers``), never abbreviating."""
    parser: argparse.ArgumentParser = commands.add_parser(name, allow_abbrev=False, **settings)
    return parser
