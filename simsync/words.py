"""Words in messages: the one place for counting nouns ("1 lesson", "2 lessons"), for
their article ("a queue", "an element") and for listing names ("a, b and c")."""

from __future__ import annotations

__all__ = ["article", "listed", "ms", "plural"]


def plural(count: float, noun: str, many: str | None = None) -> str:
    """``count`` and ``noun``, the noun in the plural unless the count is exactly one.

    ``many`` is the plural where adding an "s" is wrong. Integers get thousands separators;
    other numbers are shown as ``:g`` shows them.

    >>> plural(1, "lesson"), plural(7, "lesson"), plural(0, "problem")
    ('1 lesson', '7 lessons', '0 problems')
    >>> plural(1.0, "point"), plural(2.5, "point"), plural(1200, "step")
    ('1 point', '2.5 points', '1,200 steps')
    >>> plural(3, "sync point"), plural(2, "policy", "policies")
    ('3 sync points', '2 policies')
    """
    shown = f"{count:,}" if isinstance(count, int) else f"{count:g}"
    return f"{shown} {noun if count == 1 else many or noun + 's'}"


def article(noun: str) -> str:
    """``noun`` with its indefinite article.

    >>> article("queue"), article("element")
    ('a queue', 'an element')
    """
    return f"an {noun}" if noun[:1] in "aeiou" else f"a {noun}"


def listed(names: list[str]) -> str:
    """``names`` in a sentence.

    >>> listed(["tower_0"]), listed(["tower_0", "tower_2"]), listed(["a", "b", "c"])
    ('tower_0', 'tower_0 and tower_2', 'a, b and c')
    """
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds, to the microsecond; ``–`` for none.

    >>> ms(0.00177), ms(None)
    ('1.770', '–')
    """
    return "–" if seconds is None else f"{seconds * 1e3:.3f}"
