"""A lesson's claims are facts of its run: values in its text, and checked assertions.

Whatever a lesson says about a result (who came last, which run ended lower, how many sync
points, a maximum, a count of steps) is either **computed** or **checked**:

- ``{{ EXPRESSION }}`` in any text a learner reads (a Markdown file, a step's ``text``, a
  question's ``prompt``, ``hints`` and ``explain``) is replaced by its value over the step's
  facts; ``{{ EXPRESSION :FORMAT }}`` formats it (``{{ step_time.mean * 1000 :.1f }}``);
- a step's ``claims`` list expressions that must hold over the same facts, for a statement in
  words ("the three fast towers wait half of every step": ``max_wait * 2 == ...``).

The facts of a step are those of its scenario (:func:`simsync.tutor.facts.scenario_facts`),
or, for a question with ``program``, of the graph that program builds
(:func:`~simsync.tutor.facts.program_facts`), plus ``race`` (the facts of the race its
``race`` key, or the lesson's race step, lists) and ``scenarios`` (any scenario of the
lesson's folder by file name: ``scenarios["bounded.toml"].staleness.max``). ``simsync
lessons check`` and the lessons' test fail on a claim that does not hold; a learner who runs
a lesson whose claim does not hold is told so, under the text, rather than shown it as true.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from simsync.errors import SimsyncError
from simsync.tutor.content import Lesson, Step
from simsync.tutor.facts import (
    ExpressionError,
    evaluate,
    program_facts,
    race_facts,
    scenario_facts,
)

__all__ = ["PLACEHOLDER", "StepFacts", "broken_claims", "lesson_problems", "render", "texts"]

#: ``{{ expression }}`` or ``{{ expression :format }}``.
PLACEHOLDER = re.compile(r"\{\{(.+?)\}\}", re.S)
#: The keys of a step whose text a learner reads.
TEXT_KEYS = ("text", "prompt", "explain")


class StepFacts(Mapping[str, Any]):
    """The facts a step's text and claims may use, simulated only when first asked for: the
    scenario's timing facts, its loss facts (a slower simulation) only when a text names one."""

    def __init__(self, lesson: Lesson, step: Step) -> None:
        self.lesson, self.step = lesson, step

    def _timing(self) -> dict[str, Any]:
        if self.step.get("program"):  # a question about the graph a program builds
            return program_facts(*self.lesson.program_setup(self.step))
        return scenario_facts(self.lesson.scenario_path(self.step))

    def _extra(self, key: str) -> Any:
        if key == "race":
            return race_facts(tuple(self.lesson.race_paths(self._race_step())))
        if key == "scenarios":
            return _Scenarios(self.lesson)
        if key in ("loss", "final_loss") and not self.step.get("program"):
            return scenario_facts(self.lesson.scenario_path(self.step), numerics=True)[key]
        raise KeyError(key)

    def _race_step(self) -> Step:
        if self.step.get("race"):
            return self.step
        found = next((s for s in self.lesson.steps if s.get("race")), None)
        if found is None:
            raise ExpressionError(f"{self.lesson.slug}: 'race' facts, but no step races")
        return found

    def __getitem__(self, key: str) -> Any:
        try:
            return self._extra(key)
        except KeyError:
            return self._timing()[key]

    def __contains__(self, key: object) -> bool:
        return key in ("race", "scenarios", "loss", "final_loss") or key in self._timing()

    def __iter__(self) -> Iterator[str]:
        return iter((*self._timing(), "race", "scenarios"))

    def __len__(self) -> int:
        return len(self._timing()) + 2


class _Scenarios(Mapping[str, Any]):
    """The lesson's scenarios by file name, each simulated (with losses) when first named."""

    def __init__(self, lesson: Lesson) -> None:
        self.lesson = lesson

    def __getitem__(self, name: str) -> Any:
        path = self.lesson.folder / name
        if name == "lesson.toml" or not path.is_file():
            raise KeyError(name)
        return scenario_facts(path, numerics=True)

    def __iter__(self) -> Iterator[str]:
        names = (p.name for p in sorted(self.lesson.folder.glob("*.toml")))
        return iter([n for n in names if n != "lesson.toml"])

    def __len__(self) -> int:
        return sum(1 for _ in self)


def render(text: str, facts: Mapping[str, Any]) -> str:
    """``text`` with every ``{{ expression }}`` replaced by its value over ``facts``.

    >>> render("{{ slowest_tower }} came last, {{ max_wait * 1000 :.1f }} ms.",
    ...        {"slowest_tower": "tower_2", "max_wait": 0.01})
    'tower_2 came last, 10.0 ms.'
    >>> render("{{ 2 / 3 }} and {{ 7 }} and {{ 'x' }}", {})
    '0.667 and 7 and x'
    """

    def value(match: re.Match[str]) -> str:
        expression, spec = _split(match.group(1))
        result = evaluate(expression, facts)  # type: ignore[arg-type]
        if spec:
            try:
                return format(result, spec)
            except (TypeError, ValueError) as error:
                raise ExpressionError(f"cannot format {expression} as {spec!r}: {error}") from None
        if isinstance(result, float):
            return f"{result:.3g}"
        return str(result)

    return PLACEHOLDER.sub(value, text)


def _split(inside: str) -> tuple[str, str]:
    """``" x * 2 :.1f "`` → ``("x * 2", ".1f")``: a format is what follows the last colon."""
    expression, colon, spec = inside.rpartition(":")
    if not colon or not re.fullmatch(r"[<>^=+\- #0-9,._a-zA-Z%]*", spec.strip()):
        return inside.strip(), ""
    return expression.strip(), spec.strip()


def broken_claims(step: Step, facts: Mapping[str, Any]) -> list[str]:
    """The step's ``claims`` that do not hold over ``facts``, each with the values it read."""
    broken = []
    for claim in step.get("claims", []):
        if not evaluate(claim, facts):  # type: ignore[arg-type]
            broken.append(claim)
    return broken


def texts(lesson: Lesson, step: Step) -> list[str]:
    """Every text of ``step`` a learner reads (its Markdown file's too)."""
    found = [step.get(key) for key in TEXT_KEYS if step.get(key)]
    found += list(step.get("hints", []))
    if step.kind == "text":
        found.append(step.read())
    return found


def lesson_problems(lesson: Lesson, tensorflow: bool = False) -> list[str]:
    """Every placeholder of ``lesson`` that cannot be computed and every claim that does not
    hold, one line each, naming the step; the steps about the graph a program builds (their
    facts run the program, with TensorFlow) only with ``tensorflow``."""
    problems = []
    for index, step in enumerate(lesson.steps, 1):
        if step.about_program and not tensorflow:
            continue
        where = f"{lesson.slug} step {index} ({step.kind})"
        facts = StepFacts(lesson, step)
        try:
            for text in texts(lesson, step):
                render(text, facts)
            problems += [
                f"{where}: the claim {c!r} does not hold" for c in broken_claims(step, facts)
            ]
        except (SimsyncError, OSError, ValueError) as error:
            problems.append(f"{where}: {error}")
    return problems
