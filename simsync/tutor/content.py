"""Lessons as files: one folder per lesson, a ``lesson.toml`` and the files it names.

The format is documented for instructors in ``docs/authoring.md``. Loading checks the keys of
every step and names the file and the key on any problem; :mod:`simsync.tutor.lesson_check` goes
further (scenarios load, answers evaluate).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from simsync.errors import SimsyncError, printable
from simsync.files import InputError, read_input, read_toml
from simsync.findings import FINDINGS

__all__ = [
    "STEP_KINDS",
    "Lesson",
    "LessonError",
    "Step",
    "lesson_folders",
    "lessons_root",
    "load_lessons",
]


class LessonError(SimsyncError):
    """A lesson folder that does not follow the format."""


@dataclass(frozen=True)
class StepKind:
    """What a kind of lesson step is: the keys it takes (``kind`` aside; ``required`` first),
    whether showing it always runs TensorFlow, and what is said in its place in a run
    without TensorFlow. The runner shows each kind its own way
    (:data:`simsync.tutor.runner.LessonRunner.SHOWN`)."""

    required: tuple[str, ...]
    optional: tuple[str, ...]
    tensorflow: bool = False
    skipped: str = "(This step runs TensorFlow: skipped here.)"


#: Every kind of step, by the name a lesson's ``kind`` gives it.
STEP_KINDS: dict[str, StepKind] = {
    "text": StepKind(("file",), ("scenario", "claims")),
    "code": StepKind(("file",), ("title", "text", "claims")),
    "program": StepKind(
        ("file",),
        ("text", "towers", "speeds", "try_towers"),
        tensorflow=True,
        skipped="(Running the program needs TensorFlow: skipped in this run.)",
    ),
    "graph": StepKind(
        (),
        ("scenario", "program", "text", "claims"),
        skipped="(Drawing the graph the program builds needs TensorFlow: skipped in this run.)",
    ),
    "timeline": StepKind((), ("scenario", "steps", "text", "claims")),
    "question": StepKind(
        ("id", "type", "prompt", "answer"),
        (
            "unit",
            "tolerance",
            "choices",
            "hints",
            "explain",
            "scenario",
            "race",
            "program",
            "claims",
        ),
        skipped="(This question is about the graph the program builds, and running it needs "
        "TensorFlow: skipped in this run.)",
    ),
    "verify": StepKind(
        (),
        ("scenario", "text", "findings", "claims"),
        tensorflow=True,
        skipped="(The TensorFlow check is skipped in this run.)",
    ),
    "ledger": StepKind((), ("scenario", "rows", "text", "claims")),
    "race": StepKind(("race",), ("text", "claims")),
    "race_verify": StepKind(
        ("race",),
        ("text", "claims"),
        tensorflow=True,
        skipped="(The race on TensorFlow is skipped in this run.)",
    ),
}
QUESTION_TYPES = ("numeric", "choice", "op")
#: The towers a program step and ``lessons copy`` suggest trying the lesson's program with,
#: unless the step says (``try_towers``): see :func:`try_towers`.
TRY_TOWERS = 4
LESSON_KEYS = ("title", "summary", "seed", "scenario", "steps")
_FOLDER = re.compile(r"[0-9]{2}-.+")


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _count(value: Any) -> bool:
    return type(value) is int and 1 <= value <= 1000


def _count_or_none(value: Any) -> bool:
    return type(value) is int and 0 <= value <= 1000


def _positive_number(value: Any) -> bool:
    return type(value) in (int, float) and 0 < value < math.inf


def _speeds(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_positive_number(v) for v in value)


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


#: the findings a verify step may show
FINDINGS_ALLOWED = "a list of the findings to show, of: " + ", ".join(map(repr, FINDINGS))


def _findings(value: Any) -> bool:
    return _texts(value) and set(value) <= set(FINDINGS)


#: What each key of a lesson or a step must hold: a check, and what it says is allowed.
KEY_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    **{
        key: (_text, "a string")
        for key in (
            "title",
            "summary",
            "seed",
            "scenario",
            "file",
            "text",
            "id",
            "type",
            "prompt",
            "answer",
            "unit",
            "explain",
            "program",
        )
    },
    "steps": (_count, "an integer from 1 to 1000"),
    "rows": (_count, "an integer from 1 to 1000"),
    "towers": (_count, "an integer from 1 to 1000"),
    "try_towers": (_count_or_none, "an integer from 0 (suggest no --towers) to 1000"),
    "tolerance": (_positive_number, "a number > 0"),
    "speeds": (_speeds, "a list of numbers > 0 (each tower's device speed)"),
    "choices": (_texts, "a list of strings"),
    "hints": (_texts, "a list of strings"),
    "race": (_texts, "a list of strings"),
    "claims": (_texts, "a list of expressions (strings) that must hold"),
    "findings": (_findings, FINDINGS_ALLOWED),
}


@dataclass(frozen=True)
class Step:
    """One step of a lesson: its kind and its keys as written."""

    kind: str
    data: dict[str, Any]
    folder: Path

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def about_program(self) -> bool:
        """Whether the step's facts are those of the graph a program builds (a question's or
        a graph's ``program``): computing them runs the program, with TensorFlow."""
        return "program" in self.data

    @property
    def needs_tensorflow(self) -> bool:
        """Whether showing the step runs TensorFlow: a check on TensorFlow, a program step,
        and a step about the graph a program builds."""
        return STEP_KINDS[self.kind].tensorflow or self.about_program

    def try_towers(self) -> int:
        """The towers a program step suggests trying its program with (``--towers``)."""
        return int(self.data.get("try_towers", TRY_TOWERS))

    def try_options(self, towers: bool = True) -> list[str]:
        """What a program step suggests simulating its program with: ``--towers`` (unless
        the step's ``try_towers`` is 0, or ``towers`` is False: its program's towers cannot
        be copied), and the step's ``--speeds`` when it sets them (the learner's run then has
        its slow tower)."""
        speeds = self.data.get("speeds")
        shown = ["--speeds", ",".join(f"{v:g}" for v in speeds)] if speeds else []
        more = towers and self.try_towers() > 0
        return [*(["--towers", str(self.try_towers())] if more else []), *shown]

    def path(self, key: str, default: str | None = None) -> Path:
        """A file named by the step (or ``default``), in the lesson's folder."""
        name = self.data.get(key, default)
        if name is None:
            raise LessonError(f"{self.folder}: a {self.kind} step needs '{key}'")
        return self.folder / name

    def read(self, key: str = "file") -> str:
        try:
            return read_input(self.path(key), "lesson file")
        except InputError as error:
            raise LessonError(str(error)) from None


@dataclass(frozen=True)
class Lesson:
    """A lesson: its number (from the folder name), title, and steps."""

    number: int
    slug: str
    title: str
    summary: str
    seed: str
    folder: Path
    scenario: str | None
    steps: list[Step] = field(default_factory=list)

    def scenario_path(self, step: Step) -> Path:
        """The scenario a step works on: its own, or the lesson's."""
        return step.path("scenario", self.scenario)

    def program_setup(self, step: Step) -> tuple[Path, int | None, tuple[float, ...]]:
        """The program a step is about (its ``program``: a question's, a graph's), with the
        towers and speeds of the lesson's program step that shows it: the graph the step is
        about is the one that step simulated."""
        path = step.path("program")
        shows = [s for s in self.steps if s.kind == "program" and s.path("file") == path]
        setup = shows[0] if shows else step
        return path, setup.get("towers"), tuple(setup.get("speeds", ()))

    def race_paths(self, step: Step) -> list[Path]:
        """The scenarios a ``race`` key lists, in the lesson's folder."""
        names = step.get("race")
        if (
            not isinstance(names, list)
            or len(names) < 2
            or not all(isinstance(n, str) for n in names)
        ):
            raise LessonError(f"{self.folder}: 'race' must list at least two scenario files")
        return [self.folder / name for name in names]

    @property
    def questions(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "question"]


def lessons_root() -> Path:
    """Where the lessons are: ``$SIMSYNC_LESSONS``, or the ones installed with simsync."""
    override = os.environ.get("SIMSYNC_LESSONS")
    return Path(override) if override else Path(str(files("simsync.lessons")))


def lesson_folders(root: Path | None = None) -> list[Path]:
    """Every lesson folder (``NN-slug``: two digits, a dash, a name) under ``root``, in order."""
    root = root or lessons_root()
    try:
        found = [p for p in root.iterdir() if p.is_dir() and _FOLDER.fullmatch(p.name)]
    except OSError as error:
        raise LessonError(f"{root}: cannot list the lessons: {_reason(error)}") from None
    return sorted(found)


def load_lessons(root: Path | None = None) -> list[Lesson]:
    """Every lesson folder (``NN-slug``) under ``root``, in order."""
    return [load_lesson(folder) for folder in lesson_folders(root)]


def load_lesson(folder: Path) -> Lesson:
    """Read and check ``folder/lesson.toml``."""
    source = folder / "lesson.toml"
    try:
        data = read_toml(source, "lesson file")
    except InputError as error:
        raise LessonError(str(error)) from None
    _check_keys(source, "lesson", data, ("title",), LESSON_KEYS)
    if not isinstance(data.get("steps", []), list):
        raise LessonError(f"{source}: 'steps' must be a list of [[steps]] tables")
    steps = [_step(source, i, raw, folder) for i, raw in enumerate(data.get("steps", []), 1)]
    if not steps:
        raise LessonError(f"{source}: a lesson needs at least one [[steps]]")
    number = int(folder.name[:2])
    return Lesson(
        number,
        folder.name,
        data["title"],
        data.get("summary", ""),
        data.get("seed", ""),
        folder,
        data.get("scenario"),
        steps,
    )


def _step(source: Path, index: int, raw: Any, folder: Path) -> Step:
    where = f"step {index}"
    if (
        not isinstance(raw, dict)
        or not isinstance(raw.get("kind"), str)
        or raw["kind"] not in STEP_KINDS
    ):
        kind = raw.get("kind") if isinstance(raw, dict) else raw
        raise LessonError(f"{source}: {where}: kind {kind!r} is not one of {', '.join(STEP_KINDS)}")
    required, optional = STEP_KINDS[raw["kind"]].required, STEP_KINDS[raw["kind"]].optional
    data = {k: v for k, v in raw.items() if k != "kind"}
    _check_keys(source, f"{where} ({raw['kind']})", data, required, (*required, *optional))
    if raw["kind"] == "question" and data["type"] not in QUESTION_TYPES:
        raise LessonError(
            f"{source}: {where}: type {data['type']!r} is not one of {', '.join(QUESTION_TYPES)}"
        )
    if raw["kind"] == "program" and not data["file"].endswith(".py"):
        raise LessonError(f"{source}: {where}: a program step's 'file' is a Python program (*.py)")
    if not str(data.get("program", ".py")).endswith(".py"):
        raise LessonError(f"{source}: {where}: 'program' names a Python program (*.py)")
    if raw["kind"] == "question" and data["type"] == "choice" and not data.get("choices"):
        raise LessonError(f"{source}: {where}: a choice question needs 'choices'")
    return Step(raw["kind"], data, folder)


def _check_keys(
    source: Path,
    where: str,
    data: dict[str, Any],
    required: tuple[str, ...],
    allowed: tuple[str, ...],
) -> None:
    for key in required:
        if key not in data:
            raise LessonError(f"{source}: {where}: '{key}' is required")
    for key in data:
        if key not in allowed:
            raise LessonError(
                f"{source}: {where}: unknown key {printable(key)!r}; allowed: {', '.join(allowed)}"
            )
        if key == "steps" and where == "lesson":
            continue  # the [[steps]] tables, checked one by one
        check, wanted = KEY_TYPES[key]
        if not check(data[key]):
            shown = printable(repr(data[key]))[:80]  # a value, not the message, is cut short
            raise LessonError(f"{source}: {where}: '{key}' must be {wanted}, got {shown}")


def _reason(error: BaseException) -> str:
    if isinstance(error, RecursionError):
        return "nested too deeply"
    if isinstance(error, UnicodeDecodeError):
        return "not a UTF-8 text file"
    return str(getattr(error, "strerror", None) or error)
