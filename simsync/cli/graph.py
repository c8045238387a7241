"""``simsync graph``: the dataflow graph a scenario builds, as text, DOT or PNG."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from simsync.cli.options import add_command, common, positive_int
from simsync.cli.shared import console, load
from simsync.errors import UsageError, printable
from simsync.outputs import STDOUT, check_writable, output_path, refuse_stdout, write_or_print

__all__ = ["add", "graph"]


def add(commands: Any) -> None:
    p = add_command(
        commands,
        "graph",
        parents=[common("file")],
        help="show the dataflow graph a scenario (or your TensorFlow program) builds",
        description="Show the dataflow graph a scenario builds: in the terminal with towers as "
        "lanes and sync points marked, as Graphviz DOT, or as a PNG (matplotlib; no system "
        "binaries needed). Your TensorFlow program (PROGRAM.py, .meta, .pbtxt) is imported "
        "first (docs/importing.md), and its graph drawn one box per name scope of each tower "
        "(--every-op: one per TensorFlow op).",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default=None,
        help="text, dot or png (default: from OUT's suffix, .png or .dot/.gv; else text)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=output_path,
        metavar="OUT",
        help="write to OUT (required for png; text and dot print on standard output without "
        "it, or with -)",
    )
    p.add_argument(
        "--towers",
        type=positive_int,
        default=4,
        metavar="K",
        help="lanes shown before eliding the rest (text, png; default 4)",
    )
    p.add_argument(
        "--every-op",
        action="store_true",
        help="your TensorFlow program's graph with one box per TensorFlow op (default: one "
        "per name scope of each tower, and one per name scope of the shared ops)",
    )
    from simsync.cli.user_program import add_task_options

    add_task_options(p)
    p.set_defaults(run=graph)


#: what the graph is written as, and the suffixes of OUT that choose each
FORMATS = ("text", "dot", "png")
SUFFIXES = {".png": "png", ".dot": "dot", ".gv": "dot"}


def output_format(chosen: str | None, output: Path | None) -> str:
    """The format to write: ``--format``, else the one ``OUT``'s suffix names, else text;
    a clear line where they disagree (text or DOT into a ``.png``, a PNG into another name).

    >>> [output_format(None, out) for out in (Path("g.png"), Path("g.gv"), None)]
    ['png', 'dot', 'text']
    >>> output_format("text", Path("g.png"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    simsync.errors.UsageError: --format text writes text, not a PNG: ... or give --format png
    """
    if output is None or output is STDOUT:
        return chosen or "text"
    named = SUFFIXES.get(output.suffix.lower())
    if chosen is None:
        return named or "text"
    if named == "png" and chosen != "png":
        raise UsageError(
            f"--format {chosen} writes text, not a PNG: name the output other than "
            f"{output.name}, or give --format png"
        )
    if chosen == "png" and named != "png":
        raise UsageError(f"--format png writes PNG files: name the output *.png, not {output.name}")
    return chosen


def graph(args: argparse.Namespace) -> int:
    from simsync.cli.user_program import graph_program, refuse_program_options
    from simsync.patterns import build
    from simsync.simulation.user_program import is_program

    args.format = output_format(args.format, args.output)  # before a program is imported
    if args.format == "png":
        if args.output is None:
            raise UsageError("--format png needs -o OUT.png")
        refuse_stdout(args.output, "-o", "a PNG")

    if not is_program(args.file):  # graph's --towers counts lanes: only -- ARGS is a program's
        refuse_program_options(args, ["program_args", "tasks", "no_task_flags", "devices"])
        if args.every_op:
            raise UsageError(
                f"--every-op unfolds a TensorFlow program's graph; {args.file} is a scenario, "
                "whose graph has one box per op already"
            )
    built = graph_program(args) if is_program(args.file) else build(load(args.file))
    check_writable(args.output, [args.file])
    if args.format == "png":
        from simsync.viz import write_png

        write_png(built, args.output)
        print(f"wrote {printable(str(args.output), one_line=True)}")
    elif args.format == "dot":
        from simsync.viz import to_dot

        write_or_print(to_dot(built), args.output)
    else:
        from simsync.viz import GraphView

        view = GraphView(built, max_towers=args.towers)
        if args.output is None or args.output is STDOUT:
            console().print(view)
            return 0
        from simsync.files import atomic_writer

        with atomic_writer(args.output) as out:
            console(file=out, width=120).print(view)
        print(f"wrote {printable(str(args.output), one_line=True)}")
    return 0
