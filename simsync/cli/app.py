"""The ``simsync`` command line: the top parser, one subcommand per module, and ``main``.

Heavy modules (numpy, networkx, SimPy, rich, matplotlib) are imported inside the commands, so
``simsync --help`` answers at once; TensorFlow only inside the commands that run it.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import signal
import sys
from collections.abc import Sequence

from simsync.cli import calibrate, compare, course, crosscheck, graph, lessons, simulate
from simsync.cli.options import ExamplesFormatter
from simsync.errors import SimsyncError, printable
from simsync.terminal import ascii_fallback, on_ending_signals

__all__ = ["main"]

DESCRIPTION = """\
Simulate TensorFlow's data-parallel execution model: ops placed on devices, tensors between
them, and client loops running sess.run. Sync points, waiting and stragglers follow from the
graph; small models carry real numbers.
"""

EPILOG = """\
examples:
  simsync simulate examples/four_towers.toml             summary and timeline
  simsync simulate examples/four_towers.toml --json      one JSON object
  simsync simulate examples/four_towers.toml --trace out.json   open in ui.perfetto.dev
  simsync simulate examples/async_workers.toml           async workers: staleness ledger
  simsync compare examples/sync_workers.toml examples/async_workers.toml --png race.png
  simsync graph examples/four_towers.toml                towers as lanes, sync points marked
  simsync graph examples/four_towers.toml --format png -o graph.png
  simsync crosscheck examples/four_towers.toml           run it on TensorFlow too, compare
  simsync calibrate                                      measure this machine again
  simsync calibrate examples/four_towers.toml -o here.json   ... on that scenario's model
  simsync crosscheck examples/four_towers.toml --costs here.json
  simsync learn                                          interactive lessons: continue
  simsync lessons list                                   the lessons and your progress
  simsync lessons copy 1 my-lesson1                      lesson 1's scenarios, to change
  simsync assignments start 1 hw1 && simsync grade hw1 --assignment 1   course assignments

Scenario files are TOML; every key is documented in docs/scenarios.md.
"""


def parser() -> argparse.ArgumentParser:
    """The ``simsync`` parser, every subcommand added in the order ``--help`` lists them."""
    top = argparse.ArgumentParser(
        prog="simsync",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=ExamplesFormatter,
        allow_abbrev=False,
    )
    top.add_argument("--version", action="version", version=f"simsync {_version()}")
    commands = top.add_subparsers(dest="command", metavar="COMMAND")
    for command in (simulate, compare, graph, crosscheck, calibrate, lessons, course):
        command.add(commands)
    return top


def _program_args(argv: Sequence[str]) -> tuple[list[str], list[str] | None]:
    """The command line before ``--``, and a program's own after it (None: no ``--``).

    >>> _program_args(["simulate", "train.py", "--towers", "4", "--", "--num_gpus", "4"])
    (['simulate', 'train.py', '--towers', '4'], ['--num_gpus', '4'])
    """
    argv = list(argv)
    if "--" not in argv:
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def _version() -> str:
    from simsync import __version__

    return __version__


# -- entry point ------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (2 for a user error)."""
    if sys.stdout is None:  # `simsync ... >&-`: whatever it printed would be lost
        if sys.stderr is not None:
            print(
                "simsync: error: standard output is closed: give it a terminal, a file or a "
                "pipe (> /dev/null to throw the output away)",
                file=sys.stderr,
            )
        return 2
    ascii_fallback(sys.stdout)  # an ASCII or latin-1 terminal: stand-ins, not a traceback
    top = parser()
    argv, program_args = _program_args(sys.argv[1:] if argv is None else argv)
    if program_args is not None and argv and all(a.startswith("-") for a in argv[1:]):
        top.error(  # `simsync simulate -- train.py`: what follows -- is the program's own
            f"{argv[0]} FILE [-- ITS ARGUMENTS]: the file comes before --, and what follows -- "
            "is the program's own command line (a file named -x.py is ./-x.py)"
        )
    args = top.parse_args(argv)
    if program_args is not None:
        if args.command not in ("simulate", "graph", "crosscheck"):
            top.error("-- ARGS: only simulate, graph and crosscheck take a program's command line")
        args.program_args = program_args
    if args.command is None:
        top.print_help(sys.stderr)
        return 2
    try:
        with on_ending_signals(_Terminated):
            status: int = args.run(args)
        sys.stdout.flush()  # a full disk or device says so now, not at the interpreter's exit
    except BrokenPipeError:  # `simsync ... | head`: the reader has gone; stop quietly
        _drop_stdout()
        return 128 + getattr(signal, "SIGPIPE", 13)
    except OSError as error:
        print(f"simsync: error: {_said(error)}", file=sys.stderr)
        _drop_stdout()
        return 2
    except SimsyncError as error:
        print(f"simsync: error: {printable(str(error), one_line=True)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("simsync: interrupted", file=sys.stderr)
        return 130
    except _Terminated:
        print("simsync: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    return status


def _said(error: OSError) -> str:
    """An error of the system, in one line: one that names no file came from writing the
    output (``--json > /dev/full``: No space left on device).

    >>> import errno
    >>> _said(OSError(errno.ENOSPC, "No space left on device"))
    'cannot write to standard output: No space left on device'
    """
    if error.filename is None and error.errno in (
        errno.ENOSPC,
        errno.EIO,
        errno.EFBIG,
        errno.EBADF,
    ):
        return f"cannot write to standard output: {error.strerror}"
    return printable(str(error), one_line=True)


def _drop_stdout() -> None:
    """Point standard output at the null device, so that Python's last flush into a pipe
    whose reader has gone does not complain."""
    with contextlib.suppress(AttributeError, OSError, ValueError):  # not a system file
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class _Terminated(BaseException):
    """A signal that ends the process arrived (``kill``, a closed terminal:
    :data:`~simsync.terminal.ENDING_SIGNALS`): unwind, so that half-written files are
    removed."""
