"""Where the command line's outputs go: a file, written through :mod:`simsync.files`, or, for
an output option given ``-``, standard output.

``-`` means standard output for the outputs that are text (a Chrome trace, DOT, the graph as
text, a profile); an output that is binary (a PNG, a zip) refuses it in one line. A file named
``-`` is still ``./-``. Every check an output needs is made before the work starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from simsync.errors import UsageError, printable
from simsync.files import refuse_overwriting_inputs, refuse_writing_into_simsync, write_text

__all__ = ["STDOUT", "Stdout", "check_writable", "output_path", "refuse_stdout", "write_or_print"]


class Stdout:
    """The ``-`` of an output option: standard output."""

    def __str__(self) -> str:
        return "standard output"

    def __repr__(self) -> str:
        return "STDOUT"


STDOUT = Stdout()


def output_path(text: str) -> Path | Stdout:
    """An argparse type for an output option: :data:`STDOUT` for ``-``, else a path.

    >>> output_path("-"), output_path("./-"), output_path("out.json")
    (STDOUT, PosixPath('-'), PosixPath('out.json'))
    """
    return STDOUT if text == "-" else Path(text)


def refuse_stdout(output: Path | Stdout | None, option: str, what: str) -> None:
    """Refuse ``-`` for an output that is binary (``what``: ``"a PNG"``).

    >>> try:
    ...     refuse_stdout(STDOUT, "--png", "a PNG")
    ... except UsageError as error:
    ...     print(error)
    --png -: a PNG is binary, not for standard output; name a file (a file named - is ./-)
    """
    if output is STDOUT:
        raise UsageError(
            f"{option} -: {what} is binary, not for standard output; name a file "
            "(a file named - is ./-)"
        )


def write_or_print(text: str, output: Path | Stdout | None) -> None:
    """``text`` to standard output (no output, or ``-``), or atomically to a file, said on
    standard output."""
    if output is None or isinstance(output, Stdout):
        sys.stdout.write(text)
        return
    write_text(output, text)
    print(f"wrote {printable(str(output), one_line=True)}")


def check_writable(output: Path | Stdout | None, inputs: Sequence[Path | None]) -> None:
    """Fail before the work, not after it, when an output file cannot be written or is one
    of the command's inputs."""
    if output is None or isinstance(output, Stdout):
        return
    refuse_overwriting_inputs(output, list(inputs))
    refuse_writing_into_simsync(output)
    folder = output.parent if str(output.parent) else Path(".")
    try:
        why = _why_not_writable(output, folder)
    except OSError as error:  # a name longer than the system allows, a loop of links
        why = error.strerror or str(error)
    if why is not None:
        raise UsageError(f"cannot write {output}: {why}")


def _why_not_writable(path: Path, folder: Path) -> str | None:
    if not folder.is_dir():
        return f"no folder {folder}"
    if path.is_dir():
        return "it is a folder"
    if path.exists() and not os.access(path, os.W_OK):  # renaming over it would still work
        return "it is read-only"
    if (path.is_file() or not path.exists()) and not os.access(folder, os.W_OK):
        return f"the folder {folder} is not writable"  # a device is written into, not replaced
    return None
