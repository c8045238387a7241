"""Questions: the expected answer (computed from the simulation) and checking what was given."""

from __future__ import annotations

from typing import Any

from simsync.tutor.content import Lesson, Step
from simsync.tutor.facts import (
    ExpressionError,
    evaluate,
    program_facts,
    race_facts,
    scenario_facts,
)

__all__ = ["MAX_TRIES", "choice_label", "expected_answer", "is_right", "readable", "shown"]

#: After this many wrong answers the answer is revealed.
MAX_TRIES = 3


def expected_answer(lesson: Lesson, step: Step) -> Any:
    """The answer of a question step: its expression over its scenario's facts, over the
    facts of a race between the scenarios its ``race`` key lists, or over those of the graph
    its ``program`` builds."""
    expression = step.get("answer")
    if step.get("race"):
        facts = race_facts(tuple(lesson.race_paths(step)))
    elif step.get("program"):  # the graph the program builds: imported, then simulated
        facts = program_facts(*lesson.program_setup(step))
    else:
        facts = scenario_facts(lesson.scenario_path(step), numerics="loss" in expression)
    value = evaluate(expression, facts)
    kind = step.get("type")
    if kind == "numeric" and not isinstance(value, int | float):
        raise ExpressionError(f"{step.get('id')}: a numeric answer, but {value!r}")
    if kind == "choice" and value not in step.get("choices", []):
        raise ExpressionError(
            f"{step.get('id')}: answer {value!r} is not among the choices {step.get('choices')}"
        )
    return value


def is_right(step: Step, expected: Any, given: str) -> bool:
    """Whether ``given`` (as typed) is the expected answer.

    >>> from pathlib import Path
    >>> number = Step("question", {"type": "numeric", "unit": "ms"}, Path("."))
    >>> [is_right(number, 20.0, given) for given in ("20.5", "20 ms", "20ms", "22")]
    [True, True, True, False]
    >>> pick = Step("question", {"type": "choice", "choices": ["tower_0", "tower_1"]}, Path("."))
    >>> [is_right(pick, "tower_1", given) for given in ("b", "tower_1", "1")]
    [True, True, False]
    >>> op = Step("question", {"type": "op"}, Path("."))
    >>> is_right(op, "average_gradients", " average_gradients ")
    True
    >>> is_right(op, "tower_1/loss", "loss")  # which tower's? ambiguous
    False
    """
    given = given.strip()
    kind = step.get("type")
    if kind == "numeric":
        number = _number(step, given)
        if number is None:
            return False
        tolerance = float(step.get("tolerance", 0.05))
        return abs(number - expected) <= tolerance * abs(expected) + 1e-12
    if kind == "choice":
        choices = step.get("choices", [])
        letters = {choice_label(i): choice for i, choice in enumerate(choices)}
        return bool(letters.get(given.lower(), given) == expected)
    # an op: the full name, or the short one when it names a single op (no tower scope)
    given, short = given.lower(), expected.rsplit("/", 1)[-1].lower()
    return given == expected.lower() or (given == short and not expected.startswith("tower_"))


def choice_label(index: int) -> str:
    """Choices are lettered (a, b, ...), so that "2" is never mistaken for "tower 2"."""
    return chr(ord("a") + index)


def _number(step: Step, given: str) -> float | None:
    unit = str(step.get("unit", ""))
    if unit and given.endswith(unit):
        given = given[: -len(unit)].strip()
    try:
        return float(given)
    except ValueError:
        return None


def readable(step: Step, given: str) -> bool:
    """Whether ``given`` is an answer at all (a number, for a numeric question): a blank or
    unreadable answer is asked again without using up a try.

    >>> from pathlib import Path
    >>> readable(Step("question", {"type": "numeric", "unit": "ms"}, Path(".")), "ten")
    False
    >>> pick = Step("question", {"type": "choice", "choices": ["tower_0", "tower_1"]}, Path("."))
    >>> readable(pick, "x"), readable(pick, "B"), readable(pick, "tower_1")
    (False, True, True)
    """
    if not given.strip():
        return False
    if step.get("type") == "choice":  # a letter or one of the choices, nothing else
        choices = step.get("choices", [])
        letters = {choice_label(i) for i in range(len(choices))}
        return given.strip().lower() in letters or given.strip() in choices
    return step.get("type") != "numeric" or _number(step, given.strip()) is not None


def shown(step: Step, expected: Any) -> str:
    """The expected answer as the learner sees it.

    >>> from pathlib import Path
    >>> shown(Step("question", {"type": "numeric", "unit": "ms"}, Path(".")), 20.013)
    '20 ms'
    """
    if step.get("type") == "numeric":
        unit = step.get("unit", "")
        return f"{expected:.3g} {_counted_unit(expected, unit)}".strip()
    return str(expected)


def _counted_unit(count: Any, unit: str) -> str:
    """``unit`` (written for many: ``ops``, ``updates per step``) for ``count``: its noun
    in the singular for exactly one; a symbol (``ms``, ``updates/s``) as it is.

    >>> [_counted_unit(1, u) for u in ("ops", "sync points", "updates per step", "ms")]
    ['op', 'sync point', 'update per step', 'ms']
    >>> _counted_unit(2, "ops"), _counted_unit(1.0, "updates/s")
    ('ops', 'updates/s')
    """
    if count != 1 or "/" in unit or unit in ("ms", "s"):
        return unit
    words = unit.split(" ")
    noun = words.index("per") - 1 if "per" in words else len(words) - 1
    if noun >= 0 and words[noun].endswith("s"):
        words[noun] = words[noun][:-1]
    return " ".join(words)
