"""``simsync learn`` and ``simsync lessons``: the arguments; the commands are
:mod:`simsync.tutor.commands`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from simsync.cli.options import ExamplesFormatter, add_command, positive_int

__all__ = ["add"]


def add(commands: Any) -> None:
    _add_learn(commands)
    _add_lessons(commands)


def _add_learn(commands: Any) -> None:
    p = add_command(
        commands,
        "learn",
        help="interactive lessons: predict, simulate, verify on TensorFlow",
        description="Interactive lessons in the terminal. Without N: the menu, continuing where "
        "you stopped. Progress is saved after every step (q or Ctrl-C loses nothing).",
    )
    p.add_argument("lesson", nargs="?", type=positive_int, metavar="N", help="lesson number")
    answers = p.add_mutually_exclusive_group()
    answers.add_argument(
        "--answers",
        type=Path,
        metavar="FILE",
        help="answer from a TOML file ([answers] question-id = value); no keyboard needed",
    )
    answers.add_argument(
        "--no-input",
        action="store_true",
        help="run end to end, showing and using the expected answers",
    )
    p.set_defaults(run=_learn)


def _add_lessons(commands: Any) -> None:
    p = add_command(
        commands,
        "lessons",
        help="list, reset, check or copy the lessons",
        description="List the lessons with your progress, reset progress, copy a lesson's "
        "scenario files to run and change them anywhere, or check every lesson (for "
        "instructors: docs/authoring.md).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_command(actions, "list", help="the lessons and your progress")
    reset = add_command(actions, "reset", help="forget the progress of lesson N, or --all")
    reset.add_argument("lesson", nargs="?", type=positive_int, metavar="N")
    reset.add_argument("--all", action="store_true", help="every lesson")
    reset.add_argument("--yes", action="store_true", help="do not ask to confirm")
    add_command(actions, "check", help="check every lesson: files, scenarios, answers")
    copy = add_command(
        actions,
        "copy",
        help="copy lesson N's scenario and code files into DIR",
        description="Copy lesson N's scenario files (*.toml) and code excerpts (*.py) into\n"
        "DIR, creating it, to change them and run them from any folder:\n\n"
        "  simsync lessons copy 1 my-lesson1\n"
        "  simsync simulate my-lesson1/two_towers.toml\n\n"
        "Files already in DIR are not overwritten without --force.",
        formatter_class=ExamplesFormatter,
    )
    copy.add_argument("lesson", type=positive_int, metavar="N", help="lesson number")
    copy.add_argument("folder", type=Path, metavar="DIR", help="where to copy the files")
    copy.add_argument("--force", action="store_true", help="overwrite files already in DIR")
    p.set_defaults(run=_lessons)


def _learn(args: argparse.Namespace) -> int:
    from simsync.tutor.commands import learn

    return learn(args.lesson, answers_file=args.answers, no_input=args.no_input)


def _lessons(args: argparse.Namespace) -> int:
    from simsync.tutor.commands import copy_lesson, lessons

    if args.action == "copy":
        return copy_lesson(args.lesson, args.folder, force=args.force)

    return lessons(
        args.action,
        getattr(args, "lesson", None),
        every=getattr(args, "all", False),
        yes=getattr(args, "yes", False),
    )
