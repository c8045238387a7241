"""A lesson's claims are facts of its run: every lesson, run with the expected answers on its
bundled scenarios (the simulated parts; the TensorFlow checks are ``tf`` tests of their own),
shows no claim its own results contradict, and the checker catches one that is reintroduced."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from simsync.tutor.claims import lesson_problems
from simsync.tutor.content import load_lesson, load_lessons
from simsync.tutor.lesson_check import check_lesson
from simsync.tutor.progress import Progress
from simsync.tutor.runner import LessonRunner

LESSONS = load_lessons()


def shown(lesson) -> str:
    """What ``simsync learn N --no-input`` shows of ``lesson``, TensorFlow checks skipped."""
    console = Console(record=True, width=80, force_terminal=False)
    outcome = LessonRunner(lesson, Progress.scratch(), console, no_input=True, verify=False).run()
    assert outcome.right == outcome.asked == outcome.first_try
    return console.export_text()


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_every_claim_of_a_lesson_holds_on_its_run(lesson) -> None:
    assert lesson_problems(lesson) == []
    out = shown(lesson)
    assert "{{" not in out and "}}" not in out  # every value computed
    assert "does not bear out" not in out
    # a code box's title whole at 80 columns (a panel's title is cut, never wrapped)
    flat = " ".join(out.split())
    for step in (s for s in lesson.steps if s.kind == "code" and s.get("title")):
        assert " ".join(step.get("title").split()) in flat, step.get("title")


def test_the_checker_catches_lesson_5s_old_claim(tmp_path: Path) -> None:
    """Lesson 5 once said async "ended a little higher than the others", beside a table that
    showed it lowest: written as a claim, the check and the learner's screen both say so."""
    source = next(lesson for lesson in LESSONS if lesson.number == 5)
    folder = tmp_path / source.slug
    shutil.copytree(source.folder, folder)
    toml = folder / "lesson.toml"
    text = toml.read_text(encoding="utf-8")
    old = re.search(r'^ *"race\.final_loss.*",$', text, re.M)
    assert old is not None
    toml.write_text(text.replace(old[0], "\"highest(race.final_loss) == 'async'\","), "utf-8")
    (folder / "summary.md").write_text(
        "- Look at the final losses, where `async` ended a little higher than the others.\n",
        encoding="utf-8",
    )
    lesson = load_lesson(folder)
    problems = check_lesson(lesson)
    assert problems == [
        f"{lesson.slug} step {len(lesson.steps)} (text): "
        "the claim \"highest(race.final_loss) == 'async'\" does not hold"
    ]
    assert "does not bear out the lesson's claim" in shown(lesson)


def test_a_value_in_the_text_is_the_runs(tmp_path: Path) -> None:
    """``{{ expression }}`` shows the run's own value, and a wrong expression is caught."""
    source = next(lesson for lesson in LESSONS if lesson.number == 2)
    folder = tmp_path / source.slug
    shutil.copytree(source.folder, folder)
    (folder / "summary.md").write_text(
        "`{{ slowest_tower }}` came last, and the others waited up to "
        "{{ max_wait * 1000 :.1f }} ms.\n",
        encoding="utf-8",
    )
    lesson = load_lesson(folder)
    assert lesson_problems(lesson) == []
    assert "tower_2 came last, and the others waited up to 10.0 ms." in shown(lesson)
    (folder / "summary.md").write_text("{{ slowest_towr }}\n", encoding="utf-8")
    problems = lesson_problems(load_lesson(folder))
    assert len(problems) == 1 and "unknown fact 'slowest_towr'" in problems[0], problems


#: "more than 10.8 ms", "less than the 18.3 ms", "below 20": a hint's direction and its number.
DIRECTION = re.compile(
    r"\b(more than|less than|above|below|longer than|shorter than|at least|at most)\s+"
    r"(?:[a-z']+\s+){0,3}?([0-9]+(?:\.[0-9]+)?)"
)
HOLDS = {
    "more than": float.__gt__,
    "above": float.__gt__,
    "longer than": float.__gt__,
    "at least": float.__ge__,
    "less than": float.__lt__,
    "below": float.__lt__,
    "shorter than": float.__lt__,
    "at most": float.__le__,
}


def wrong_directions(hint: str, answer: float) -> list[str]:
    """The directions ``hint`` gives ("more than 10.8") that ``answer`` contradicts."""
    return [
        match[0]
        for match in DIRECTION.finditer(hint)
        if not HOLDS[match[1]](float(answer), float(match[2]))
    ]


def test_the_direction_check_catches_a_hint_pointing_away() -> None:
    """Lesson 6's hints once pointed below the textbook's 10.8 ms; the answer is 12.5 ms."""
    assert wrong_directions("The answer is below the textbook's 10.8 ms.", 12.5) == [
        "below the textbook's 10.8"
    ]
    assert wrong_directions("more than 10.8 ms, and less than the 18.3 ms", 12.5) == []


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_hints_point_toward_the_answer_and_units_are_named(lesson) -> None:
    from simsync.tutor.claims import StepFacts, render
    from simsync.tutor.questions import expected_answer

    numeric = [q for q in lesson.questions if q.get("type") == "numeric"]
    for question in numeric:
        answer = expected_answer(lesson, question)
        for hint in question.get("hints", []):
            shown = render(hint, StepFacts(lesson, question))
            assert wrong_directions(shown, answer) == [], (question.get("id"), shown, answer)
        unit = question.get("unit", "")
        # "(answer in ms)": a unit is a thing counted or measured, never "per step" alone
        assert unit and not unit.startswith("per "), (question.get("id"), unit)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.slug)
def test_the_tensorflow_check_runs_the_set_up_the_questions_asked(lesson) -> None:
    """Lesson 6 once asked about 4 workers with R = 3 and checked 3 workers with R = 2: a
    verify step's scenario is one a question (or its race) asked about, but for its length."""
    from simsync.scenario import load_scenario

    def set_up(path: Path) -> str:
        s = load_scenario(path)
        return repr((s.cluster, s.compute, sorted(s.costs.items()), s.model, s.training))

    asked = set()
    for question in lesson.questions:
        paths = lesson.race_paths(question) if question.get("race") else []
        asked |= {set_up(p) for p in [*paths, lesson.scenario_path(question)]}
    for step in (s for s in lesson.steps if s.kind == "verify"):
        assert set_up(lesson.scenario_path(step)) in asked, lesson.scenario_path(step).name


def test_a_claim_of_a_check_on_tensorflow_is_checked_without_it(tmp_path: Path) -> None:
    """A verify step's claims are of its scenario's simulation: the lesson's check computes
    them with no TensorFlow, as it does every step's but those about a program's graph."""
    source = next(lesson for lesson in LESSONS if lesson.number == 6)
    folder = tmp_path / source.slug
    shutil.copytree(source.folder, folder)
    toml = folder / "lesson.toml"
    text = toml.read_text(encoding="utf-8")
    toml.write_text(
        text.replace('"gradients.dropped_per_step > 0",', '"gradients.dropped_per_step > 1e6",'),
        "utf-8",
    )
    problems = lesson_problems(load_lesson(folder))
    assert len(problems) == 1 and "gradients.dropped_per_step > 1e6" in problems[0], problems
    assert "(verify)" in problems[0]
