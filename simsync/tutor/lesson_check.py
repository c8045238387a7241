"""``simsync lessons check``: every lesson loads, its files exist, its scenarios run, every
answer evaluates to something the question can accept, and every claim of its text holds."""

from __future__ import annotations

from typing import Any

from simsync.errors import SimsyncError
from simsync.tutor.claims import lesson_problems
from simsync.tutor.content import Lesson, LessonError, Step
from simsync.tutor.facts import program_run
from simsync.tutor.questions import expected_answer

__all__ = ["check_lesson"]


def check_lesson(lesson: Lesson, tensorflow: bool = False) -> list[str]:
    """Problems found in ``lesson``, one line each (empty: all good). A question about the
    graph a program builds has its program checked to be there, and its answer and claims
    computed only with ``tensorflow`` (the program is run, in the sandbox)."""
    from simsync.patterns import build
    from simsync.scenario import load_scenario

    problems: list[str] = []
    ids = [q.get("id") for q in lesson.questions]
    problems += [f"question id '{i}' is used twice" for i in set(ids) if ids.count(i) > 1]
    for index, step in enumerate(lesson.steps, 1):
        where = f"{lesson.slug} step {index} ({step.kind})"
        try:
            if step.kind in ("text", "code"):
                step.read()
            elif step.kind == "program":
                _check_program(step)
            elif step.about_program:
                if not step.path("program").is_file():
                    raise LessonError(f"its program {step.path('program')} is not there")
                if tensorflow and step.kind == "question":
                    built = program_run(*lesson.program_setup(step)).graph
                    _check_question(step, expected_answer(lesson, step), set(built.nx))
            elif step.kind == "race" or step.get("race"):
                for path in lesson.race_paths(step):
                    build(load_scenario(path))
                if step.kind == "question":
                    _check_question(step, expected_answer(lesson, step), set())
            else:
                path = lesson.scenario_path(step)
                graph = build(load_scenario(path))
                if step.kind == "question":
                    _check_question(step, expected_answer(lesson, step), set(graph.nx))
        except (SimsyncError, OSError, ValueError) as error:
            problems.append(f"{where}: {error}")
    return problems + (lesson_problems(lesson, tensorflow) if not problems else [])


def _check_question(step: Step, expected: Any, ops: set[str]) -> None:
    if step.get("type") == "op" and expected not in ops:
        raise LessonError(f"answer {expected!r} is not an op of the scenario's graph")
    if step.get("type") == "numeric" and step.get("tolerance", 0.05) <= 0:
        raise LessonError("tolerance must be greater than 0")


def _check_program(step: Step) -> None:
    """A program step's program is there, and what it suggests trying is allowed."""
    from simsync.tf_backend.program.whatif import MAX_TOWERS

    if not step.path("file").is_file():
        raise LessonError(f"its program {step.path('file')} is not there")
    if step.try_towers() > MAX_TOWERS:
        raise LessonError(
            f"try_towers {step.try_towers()}: simulate's --towers takes at most {MAX_TOWERS}"
        )
