"""Questions: the expected answer (computed from the simulation) and checking what was given."""

from __future__ import annotations

from typing import Any

from simsync.tutor.content import Lesson, Step
from simsync.tutor.facts import ExpressionError, evaluate, scenario_facts

__all__ = ["MAX_TRIES", "expected_answer", "is_right", "shown"]

#: After this many wrong answers the answer is revealed.
MAX_TRIES = 3


def expected_answer(lesson: Lesson, step: Step) -> Any:
    """The answer of a question step: its expression over its scenario's facts."""
    expression = step.get("answer")
    facts = scenario_facts(lesson.scenario_path(step), numerics="loss" in expression)
    value = evaluate(expression, facts)
    kind = step.get("type")
    if kind == "numeric" and not isinstance(value, int | float):
        raise ExpressionError(f"{step.get('id')}: a numeric answer, but {value!r}")
    if kind == "choice" and value not in step.get("choices", []):
        raise ExpressionError(f"{step.get('id')}: answer {value!r} is not among the choices "
                              f"{step.get('choices')}")
    return value


def is_right(step: Step, expected: Any, given: str) -> bool:
    """Whether ``given`` (as typed) is the expected answer.

    >>> from pathlib import Path
    >>> number = Step("question", {"type": "numeric", "tolerance": 0.05}, Path("."))
    >>> is_right(number, 20.0, "20.5"), is_right(number, 20.0, "22"), is_right(number, 20.0, "x")
    (True, False, False)
    >>> pick = Step("question", {"type": "choice", "choices": ["a", "b"]}, Path("."))
    >>> is_right(pick, "b", "2"), is_right(pick, "b", "b"), is_right(pick, "b", "1")
    (True, True, False)
    >>> op = Step("question", {"type": "op"}, Path("."))
    >>> is_right(op, "average_gradients", " average_gradients ")
    True
    >>> is_right(op, "tower_1/loss", "loss")  # which tower's? ambiguous
    False
    """
    given = given.strip()
    kind = step.get("type")
    if kind == "numeric":
        try:
            number = float(given)
        except ValueError:
            return False
        tolerance = float(step.get("tolerance", 0.05))
        return abs(number - expected) <= tolerance * abs(expected) + 1e-12
    if kind == "choice":
        choices = step.get("choices", [])
        if given.isdigit() and 1 <= int(given) <= len(choices):
            given = choices[int(given) - 1]
        return bool(given == expected)
    # an op: the full name, or the short one when it names a single op (no tower scope)
    short = expected.rsplit("/", 1)[-1]
    return given == expected or (given == short and not expected.startswith("tower_"))


def shown(step: Step, expected: Any) -> str:
    """The expected answer as the learner sees it.

    >>> from pathlib import Path
    >>> shown(Step("question", {"type": "numeric", "unit": "ms"}, Path(".")), 20.013)
    '20 ms'
    """
    if step.get("type") == "numeric":
        unit = step.get("unit", "")
        return f"{expected:.3g} {unit}".strip()
    return str(expected)
