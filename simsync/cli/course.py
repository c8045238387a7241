"""``simsync assignments`` and ``simsync grade`` (docs/assignments.md): the arguments; the
commands are :mod:`simsync.grading.commands`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from simsync.cli.options import add_command, at_least, common
from simsync.outputs import output_path, refuse_stdout

__all__ = ["add"]


def add(commands: Any) -> None:
    p = add_command(
        commands,
        "assignments",
        help="course assignments: list, start, check, pack",
        description="Course assignments: students write the graph, simsync grades it by "
        "structure, simulation and TensorFlow (docs/assignments.md).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_command(actions, "list", help="the assignments, their tasks and points")
    start = add_command(actions, "start", help="copy assignment N's starter files into DIR")
    start.add_argument("number", type=at_least(1), metavar="N")
    start.add_argument("folder", type=Path, metavar="DIR", help="a new or empty folder")
    start.add_argument(
        "--solution", action="store_true", help="copy the reference solution (instructors)"
    )
    add_command(
        actions,
        "check",
        parents=[common("no-tensorflow", "unsafe")],
        help="prove every assignment: the reference gets full marks, the starter not",
    )
    pack = add_command(actions, "pack", help="build a Gradescope autograder zip for assignment N")
    pack.add_argument("number", type=at_least(1), metavar="N")
    pack.add_argument("-o", "--output", type=output_path, required=True, help="the zip to write")
    p.set_defaults(run=_assignments)

    g = add_command(
        commands,
        "grade",
        parents=[common("no-tensorflow", "unsafe")],
        help="grade a submission folder",
        description="Grade the submission in DIR against assignment N: one line per check, "
        "with what it found. Hidden checks run only with --hidden. The submission's code, "
        "its graph and its files are read only inside a sandbox made by bubblewrap (no "
        "network, no other processes, writes only to a copy, CPU, memory and time limits); "
        "where it cannot start, grade refuses and says why.",
    )
    g.add_argument("folder", type=Path, metavar="DIR")
    g.add_argument("--assignment", type=at_least(1), required=True, metavar="N")
    g.add_argument("--hidden", action="store_true", help="run the hidden checks too")
    g.add_argument(
        "--task",
        action="append",
        metavar="ID",
        help="grade only task ID's checks, e.g. 4.2 (`simsync assignments list` names the "
        "tasks); give it again for more tasks",
    )
    g.add_argument(
        "--gradescope",
        type=Path,
        metavar="OUT",
        help="also write Gradescope's results.json to OUT, outside the submission, the "
        "assignment and simsync's own folders "
        "(-: to standard output, the report then to standard error)",
    )
    g.set_defaults(run=_grade)


def _assignments(args: argparse.Namespace) -> int:
    from simsync.grading import commands

    if args.action == "list":
        return commands.assignments_list()
    if args.action == "start":
        return commands.assignments_start(args.number, args.folder, solution=args.solution)
    if args.action == "check":
        return commands.assignments_check(
            tensorflow=not args.no_tensorflow, unsafe=args.unsafe_no_sandbox
        )
    from simsync.grading.pack import pack

    refuse_stdout(args.output, "-o", "a zip")
    return pack(args.number, args.output)


def _grade(args: argparse.Namespace) -> int:
    from simsync.grading.commands import grade_command

    return grade_command(
        args.folder,
        args.assignment,
        hidden=args.hidden,
        tensorflow=not args.no_tensorflow,
        gradescope=args.gradescope,
        unsafe=args.unsafe_no_sandbox,
        tasks=args.task,
    )
