"""The lesson commands: ``simsync learn`` and ``simsync lessons`` (list, reset, check, copy).

Nothing here imports the simulator or TensorFlow: the menu shows at once, and a lesson loads
them only when a step needs them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from simsync.errors import UsageError, printable
from simsync.files import (
    read_text,
    read_toml,
    refuse_overwriting_inputs,
    refuse_writing_into_simsync,
    write_text,
)
from simsync.terminal import make_console, pasteable
from simsync.tutor.content import (
    Lesson,
    LessonError,
    lesson_folders,
    load_lesson,
    load_lessons,
)
from simsync.tutor.progress import Progress
from simsync.tutor.runner import LessonRunner, Quit
from simsync.tutor.views import LessonsView, current_lesson
from simsync.words import plural

__all__ = ["copy_lesson", "learn", "lessons"]


def learn(number: int | None, *, answers_file: Path | None = None, no_input: bool = False) -> int:
    """``simsync learn [N]``: the menu, or lesson N; continue where the learner stopped."""
    interactive = answers_file is None and not no_input
    if interactive and sys.stdin is None:  # `simsync learn 1 <&-`
        raise UsageError(
            "standard input is closed, and a lesson asks you questions: run it in a terminal, "
            "or with --no-input (the expected answers) or --answers FILE"
        )
    console, lessons = make_console(), load_lessons()
    progress = Progress() if interactive else Progress.scratch()
    _warn(console, progress)
    if number is None and not interactive:
        raise UsageError("say which lesson to run: simsync learn N --no-input")
    answers = _read_answers(answers_file) if answers_file else None
    lesson = _pick(number, lessons, progress, console)
    if lesson is None:  # quit at the menu, which is on the screen
        return 0
    progress.check_writable()
    if answers_file is not None and answers is not None:
        _warn_unknown_questions(answers_file, answers, lesson)
    start = (
        0 if progress.done(lesson.slug) else min(progress.step(lesson.slug), len(lesson.steps) - 1)
    )
    runner = LessonRunner(lesson, progress, console, answers=answers, no_input=no_input)
    try:
        outcome = runner.run(start)
    except (Quit, KeyboardInterrupt, EOFError):
        console.print("\nStopped; your progress is saved. `simsync learn` continues here.")
        return 0
    last = lesson.number == max(other.number for other in lessons)
    if not interactive:  # a scripted run keeps no progress
        how = "with the expected answers" if no_input else "with the answers file"
        console.print(
            f"[bold]Lesson {lesson.number} shown {how}: {outcome.score}.[/] "
            "Your own progress is unchanged."
        )
    else:
        console.print(
            f"[bold]Lesson {lesson.number} done: {outcome.score}.[/] "
            + ("That was the last lesson." if last else "`simsync learn` for the next one.")
        )
    return 0 if interactive or outcome.right == outcome.asked else 1


def _pick(
    number: int | None, lessons: list[Lesson], progress: Progress, console: Console
) -> Lesson | None:
    """Lesson ``number``, or the learner's choice from the menu (None: quit)."""
    if number is not None:
        return _numbered(number, lessons)
    console.print(LessonsView(lessons, progress))
    current = current_lesson(lessons, progress)
    default = str(current.number) if current else ""
    choice = _ask(console, f"Lesson number [dim](Enter: {default or 'quit'}; q: quit)[/] ", "q")
    choice = choice.strip() or default
    if choice in ("", "q"):
        return None
    if not (choice.isascii() and choice.isdigit()):  # "²" is a digit, but not a number
        raise UsageError(f"expected a lesson number, got {choice!r}")
    return _pick(int(choice), lessons, progress, console)


def _numbered(number: int, lessons: list[Lesson]) -> Lesson:
    found = [lesson for lesson in lessons if lesson.number == number]
    if not found:
        raise UsageError(
            f"no lesson {number}; lessons: {', '.join(str(lesson.number) for lesson in lessons)}"
        )
    return found[0]


def copy_lesson(number: int, folder: Path, *, force: bool = False) -> int:
    """``simsync lessons copy N DIR``: lesson N's scenarios (``*.toml`` but ``lesson.toml``)
    and code excerpts (``*.py``) into ``DIR``, to run and change from any folder.

    ``DIR`` is created if need be. Nothing is written when a file is already there (unless
    ``force``), nor over the lesson's own files; each file is written atomically.
    """
    lesson = _numbered(number, load_lessons())
    sources = sorted(
        path
        for pattern in ("*.toml", "*.py")
        for path in lesson.folder.glob(pattern)
        if path.name != "lesson.toml" and not path.name.startswith(("_", "."))
    )
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{folder} is a file, not a folder: name a new or existing folder")
    real = os.path.realpath(folder)
    if real != os.path.normpath(os.path.abspath(folder)):  # a link on the way: anywhere (/etc)
        raise UsageError(
            f"{folder} leads through a link to {real}: name the folder itself, not a link"
        )
    for source in sources:
        target = folder / source.name
        refuse_overwriting_inputs(target, [source])
        refuse_writing_into_simsync(target)
        if target.exists() and not force:
            raise UsageError(f"{target} already exists; add --force to overwrite it")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cannot create {folder}: {error.strerror or error}") from None
    for source in sources:
        write_text(folder / source.name, read_text(source))
    console = make_console()
    console.print(
        Text(
            f"Copied {plural(len(sources), 'file')} of lesson {number} into {folder}: "
            + ", ".join(source.name for source in sources)
        )
    )
    scenarios = [s.name for s in sources if s.suffix == ".toml"]
    scenario = lesson.scenario if lesson.scenario in scenarios else next(iter(scenarios), None)
    commands = [] if scenario is None else [[str(folder / scenario)]]
    for step in lesson.steps:  # a program the lesson imports: the learner's copy, edited
        if step.kind == "program":
            commands.append([str(folder / step.get("file")), *step.try_options()])
    for command in commands:  # broken between words only: the lines paste as one command
        for line in pasteable(["simsync", "simulate", *command], console.width, first="Try: "):
            console.print(Text(line), soft_wrap=True)
    return 0


def _read_answers(path: Path) -> dict[str, Any]:
    data = read_toml(path, "answers file")
    answers = data.get("answers")
    if not isinstance(answers, dict):
        raise UsageError(f"{path}: expected an [answers] table of question-id = value")
    return answers


def _warn_unknown_questions(path: Path, answers: dict[str, Any], lesson: Lesson) -> None:
    """Answers to questions the lesson does not ask are not graded: say so."""
    ids = [str(q.get("id")) for q in lesson.questions]
    for unknown in (key for key in answers if key not in ids):
        line = (
            f"{path}: lesson {lesson.number} has no question {unknown!r}; its questions: "
            f"{', '.join(ids) or 'none'}"
        )
        print(f"simsync: warning: {printable(line, one_line=True)}", file=sys.stderr)


def lessons(
    action: str, number: int | None = None, *, every: bool = False, yes: bool = False
) -> int:
    """``simsync lessons list | reset N | reset --all | check``."""
    console = make_console()
    if action == "check":
        return _check_lessons(console)
    found = load_lessons()
    progress = Progress()
    _warn(console, progress)
    if action == "reset":
        if every == (number is not None):
            raise UsageError("say which: simsync lessons reset N, or --all")
        chosen = found if every else [_pick(number, found, progress, console)]
        what = "all lessons" if every else f"lesson {number}"
        if not yes and _ask(
            console, Text(f"Forget your progress in {what}? [y/N] "), "n"
        ).strip().lower() not in ("y", "yes"):
            console.print("Nothing changed.")
            return 0
        for lesson in chosen:
            if lesson is not None:
                progress.reset(lesson.slug)
        console.print(f"Progress in {what} forgotten.")
    console.print(LessonsView(found, progress))
    return 0


def _check_lessons(console: Console) -> int:
    """Every lesson folder: it loads (a problem there is reported, and the others are still
    checked), and :func:`check_lesson` finds nothing."""
    from simsync.tutor.lesson_check import check_lesson

    lessons, problems = [], []
    for folder in lesson_folders():
        try:
            lessons.append(load_lesson(folder))
        except LessonError as error:
            problems.append(str(error))
    problems += [p for lesson in lessons for p in check_lesson(lesson)]
    for problem in problems:
        # one line each, however long (a path is not folded in the middle)
        console.print(Text.assemble(("✗", "red"), " ", printable(problem)), soft_wrap=True)
    count = sum(len(lesson.questions) for lesson in lessons)
    console.print(
        f"{plural(len(lesson_folders()), 'lesson')}, {plural(count, 'question')}: "
        + ("all good" if not problems else plural(len(problems), "problem"))
    )
    return 1 if problems else 0


def _warn(console: Console, progress: Progress) -> None:
    if progress.warning:
        console.print(Text(progress.warning, style="yellow"), soft_wrap=True)


def _ask(console: Console, prompt: str | Text, on_end: str) -> str:
    """Ask (a string's markup is read: give a ``Text`` to show ``[y/N]``); a closed input
    (no terminal, end of file) answers ``on_end``."""
    try:
        return console.input(prompt)
    except EOFError:
        console.print()  # end the prompt's line
        return on_end
