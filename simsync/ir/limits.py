"""The limits of what an IR object may hold: one rule per field, checked once, where the object
is made.

A graph simulates whatever numbers it holds: a negative cost would run backwards in time, a
NaN speed or an infinite cost makes every step time NaN, ``True`` as a cost is one second and
``steps=-5`` runs nothing. So every IR dataclass checks its fields in its ``__post_init__``
against the tables below (:func:`check_fields`), and an op its :class:`~simsync.ir.Cost`
(:func:`check_cost`): a value is refused the moment it enters the IR, whether it comes from the
API, a pattern builder or :func:`~simsync.ir.graph_from_dict`. The objects are frozen, so
nothing changes afterwards; the graph's own tables (cores and their efficiency per host) are
plain dicts, checked by :func:`~simsync.ir.validate` through :func:`check_host_tables`.

The limits keep every sum of times finite and every allocation small. The scenario schema
(:mod:`simsync.scenario.schema`) reads the same limits from here, so a valid scenario always
builds.

Examples
--------
>>> from simsync.ir import Device
>>> Device("/gpu:0", speed=0)
Traceback (most recent call last):
...
simsync.errors.GraphError: device '/gpu:0': speed 0: must be a number from 0.001 to 1000
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

from simsync.errors import GraphError
from simsync.ir.resources import RESOURCE_KINDS

__all__ = [
    "BATCH",
    "CLIENT",
    "COST",
    "DEVICE",
    "DISTRIBUTIONS",
    "FACTS",
    "LINK",
    "MAX_BYTES",
    "MAX_ELEMENTS",
    "MAX_SECONDS",
    "MAX_SIGMA",
    "MAX_SPEED",
    "MAX_STEPS",
    "MAX_TOKENS",
    "MIN_BANDWIDTH",
    "MIN_CORE_EFFICIENCY",
    "MIN_SPEED",
    "OP",
    "RESOURCE",
    "TENSOR",
    "VARIABLE",
    "Rule",
    "check_cost",
    "check_fields",
    "check_host_tables",
]

#: Seconds of one op, transfer or ``sess.run`` overhead: at most about eleven days.
MAX_SECONDS = 1e6
#: Relative speeds of a device: from a thousand times slower to a thousand times faster.
MIN_SPEED, MAX_SPEED = 1e-3, 1e3
#: The slowest link, in bytes per second (infinity: transfers take no time).
MIN_BANDWIDTH = 1.0
#: The largest tensor, variable or collective contribution: a petabyte.
MAX_BYTES = 10**15
#: Elements of a variable that holds numbers (80 MB of float64).
MAX_ELEMENTS = 10**7
#: Runs of one client.
MAX_STEPS = 1_000_000
#: Tokens a queue starts with or an op enqueues; gradients a take waits for.
MAX_TOKENS = 65536
#: Each core's speed when all of a host's cores are busy, at the least.
MIN_CORE_EFFICIENCY = 0.01
#: The most a lognormal cost's sigma may be: beyond, its mean rests on draws never sampled.
MAX_SIGMA = 4.0
#: How an op's compute time is drawn (:class:`~simsync.ir.Cost`).
DISTRIBUTIONS = ("constant", "exponential", "shifted_exponential", "lognormal")


class Rule:
    """What one field may hold: ``test(value)`` is true when it is allowed; ``allowed`` says
    what is, in a person's words ("a number of seconds from 0 to 1e+06")."""

    __slots__ = ("allowed", "test")

    def __init__(self, allowed: str, test: Callable[[Any], bool]) -> None:
        self.allowed, self.test = allowed, test


def _is_number(value: Any) -> bool:
    """A real number, not a bool (``True`` is an int in Python, never a cost)."""
    kind = type(value)
    if kind is float or kind is int:
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    return type(value) is int or (
        isinstance(value, numbers.Integral) and not isinstance(value, bool)
    )


# The tests below are called for every field of every op a builder makes (a hundred thousand
# for the largest graphs): each tries the common types first.


def _number(low: float, high: float, allowed: str, *, above: bool = False) -> Rule:
    """A real number from ``low`` (excluded when ``above``) to ``high``; NaN never is."""
    if above:
        return Rule(allowed, lambda v: (type(v) is float or _is_number(v)) and low < v <= high)
    return Rule(allowed, lambda v: (type(v) is float or _is_number(v)) and low <= v <= high)


def _integer(low: int, high: float = math.inf, *, allowed: str) -> Rule:
    """An integer from ``low`` to ``high`` (not a float, not a bool)."""
    return Rule(allowed, lambda v: (type(v) is int or _is_integer(v)) and low <= v <= high)


def _optional(rule: Rule) -> Rule:
    """``rule``, or None."""
    test = rule.test
    return Rule(f"{rule.allowed}, or None", lambda v: v is None or test(v))


def _is_finite(value: Any) -> bool:
    try:
        return _is_number(value) and math.isfinite(value)
    except OverflowError:  # an int beyond any float
        return False


def _dims(value: Any, elements: float) -> bool:
    """A tuple (or list) of integers >= 0 whose product is at most ``elements``."""
    if not isinstance(value, tuple | list):
        return False
    return all(_is_integer(d) and d >= 0 for d in value) and math.prod(value) <= elements


_EMPTY: tuple[()] = ()


def _names(value: Any) -> bool:
    """A tuple (or list) of strings; a lone string is not (its letters would be names)."""
    if value is _EMPTY:  # the default, most often
        return True
    return isinstance(value, tuple | list) and all(isinstance(name, str) for name in value)


TEXT = Rule("a string", lambda v: type(v) is str or isinstance(v, str))
FLAG = Rule("True or False", lambda v: v is False or v is True)
SECONDS = _number(0, MAX_SECONDS, f"a number of seconds from 0 to {MAX_SECONDS:g}")
SPEED = _number(MIN_SPEED, MAX_SPEED, f"a number from {MIN_SPEED:g} to {MAX_SPEED:g}")
BANDWIDTH = _number(
    MIN_BANDWIDTH, math.inf, f"a number of bytes per second >= {MIN_BANDWIDTH:g}, or inf"
)
BYTES = _integer(0, MAX_BYTES, allowed="an integer number of bytes from 0 to 10**15")
COUNT = _integer(0, allowed="an integer >= 0")
TOKENS = _integer(0, MAX_TOKENS, allowed=f"an integer from 0 to {MAX_TOKENS}")
NAMES = Rule("a tuple of strings", _names)

DEVICE: dict[str, Rule] = {
    "name": TEXT,
    "kind": TEXT,
    "speed": SPEED,
    "host": TEXT,
    "concurrent": FLAG,
}
LINK: dict[str, Rule] = {"bytes_per_second": BANDWIDTH, "latency": SECONDS}
VARIABLE: dict[str, Rule] = {
    "name": TEXT,
    "device": TEXT,
    "shape": Rule(
        f"a tuple of integers >= 0, at most {MAX_ELEMENTS:g} elements in all",
        lambda v: _dims(v, MAX_ELEMENTS),
    ),
    "nbytes": BYTES,
    "trainable": FLAG,
    "parameter": TEXT,
    "initial": _optional(Rule("a finite number", _is_finite)),
}
RESOURCE: dict[str, Rule] = {
    "name": TEXT,
    "kind": Rule(
        f"one of {', '.join(RESOURCE_KINDS)}", lambda v: isinstance(v, str) and v in RESOURCE_KINDS
    ),
    "device": TEXT,
    "initial": TOKENS,
    "note": TEXT,
    "capacity": TOKENS,
    "item": TEXT,
}
OP: dict[str, Rule] = {
    "name": TEXT,
    "kind": TEXT,
    "device": TEXT,
    "tower": _optional(COUNT),
    "reads": NAMES,
    "writes": NAMES,
    "participants": NAMES,
    "nbytes": BYTES,
    "locks": NAMES,
    "max_staleness": _optional(COUNT),
    "resource": _optional(TEXT),
    "amount": TOKENS,
    "gradient": _optional(TEXT),
}
COST: dict[str, Rule] = {
    "mean": SECONDS,
    "distribution": Rule(
        "one of " + ", ".join(DISTRIBUTIONS), lambda v: isinstance(v, str) and v in DISTRIBUTIONS
    ),
    "group": _optional(TEXT),
    "fraction": _number(0, 1, "a number from 0 to 1"),
    "shift": SECONDS,
    "sigma": _number(0, MAX_SIGMA, f"a number > 0 and <= {MAX_SIGMA:g}", above=True),
    "overhead": SECONDS,
}
TENSOR: dict[str, Rule] = {
    "src": TEXT,
    "dst": TEXT,
    "nbytes": BYTES,
    "control": FLAG,
    "shape": _optional(Rule("a tuple of integers >= 0", lambda v: _dims(v, math.inf))),
    "dtype": _optional(TEXT),
}
CLIENT: dict[str, Rule] = {
    "name": TEXT,
    "fetches": NAMES,
    "steps": _optional(_integer(1, MAX_STEPS, allowed=f"an integer from 1 to {MAX_STEPS}")),
    "overhead": SECONDS,
    "run_work": SECONDS,
    "run_latency": SECONDS,
    "staleness_bound": _optional(COUNT),
    "shared_steps": FLAG,
    "until": _optional(TEXT),
    "daemon": FLAG,
}

BATCH: dict[str, Rule] = {
    "size": _integer(1, allowed="an integer >= 1"),
    "ops": NAMES,
    "carry": NAMES,
    "per_tower": FLAG,
}
FACTS: dict[str, Rule] = {
    "mode": _optional(TEXT),
    "aggregation": _optional(TEXT),
    "batch_norm": _optional(TEXT),
    "apply": _optional(TEXT),
    "workers": _optional(COUNT),
    "replicas_to_aggregate": _optional(TOKENS),
    "init_tokens": _optional(TOKENS),
    "source": _optional(TEXT),
    "global_step": _optional(TEXT),
    "session_run": SECONDS,
    "session_run_work": SECONDS,
    "session_run_latency": SECONDS,
}


def check_fields(item: Any, owner: str, rules: Mapping[str, Rule], prefix: str = "") -> None:
    """Raise :class:`GraphError` for the first field of ``item`` its rule refuses.

    ``item`` is an IR dataclass; ``owner`` names it in the message (``op 'tower_0/loss'``),
    and ``prefix`` goes before the field's name (``cost.``).

    Raises
    ------
    GraphError
        ``op 'tower_0/loss': cost.mean -1.0: must be a number of seconds from 0 to 1e+06``
    """
    for field, rule in rules.items():
        value = getattr(item, field)
        if not rule.test(value):
            raise GraphError(f"{owner}: {prefix}{field} {_shown(value)}: must be {rule.allowed}")


def check_cost(cost: Any, owner: str) -> None:
    """Check an op's cost: every field, then what its distribution needs (a lognormal's
    logarithm of the mean, a shifted exponential's shift within the mean).

    >>> from simsync.ir import Cost
    >>> check_cost(Cost(0.0, "lognormal"), "op 'a'")
    Traceback (most recent call last):
    ...
    simsync.errors.GraphError: op 'a': cost.mean 0.0: must be > 0 for a lognormal cost
    """
    check_fields(cost, owner, COST, prefix="cost.")
    if cost.distribution == "lognormal" and cost.mean <= 0:
        shown = _shown(cost.mean)
        raise GraphError(f"{owner}: cost.mean {shown}: must be > 0 for a lognormal cost")
    if cost.distribution == "shifted_exponential" and cost.shift > cost.mean:
        raise GraphError(
            f"{owner}: cost.shift {_shown(cost.shift)}: must be at most cost.mean "
            f"({_shown(cost.mean)}) for a shifted_exponential cost"
        )


CORES = _integer(1, allowed="an integer >= 1")
EFFICIENCY = _number(MIN_CORE_EFFICIENCY, 1, f"a number from {MIN_CORE_EFFICIENCY:g} to 1")


def check_host_tables(host_cores: Mapping[Any, Any], core_efficiency: Mapping[Any, Any]) -> None:
    """Check a graph's ``host_cores`` and ``core_efficiency`` tables, host by host.

    >>> check_host_tables({"localhost": 0}, {})
    Traceback (most recent call last):
    ...
    simsync.errors.GraphError: host 'localhost': host_cores 0: must be an integer >= 1
    """
    tables = (("host_cores", host_cores, CORES), ("core_efficiency", core_efficiency, EFFICIENCY))
    for name, table, rule in tables:
        for host, value in table.items():
            if not isinstance(host, str):
                raise GraphError(f"{name}: host {_shown(host)}: must be a string")
            if not rule.test(value):
                raise GraphError(f"host '{host}': {name} {_shown(value)}: must be {rule.allowed}")


def _shown(value: Any) -> str:
    """A value as a message quotes it: its repr, cut short (a megabyte string is refused in
    one line too)."""
    text = repr(value.item() if hasattr(value, "item") and _is_number(value) else value)
    return text if len(text) <= 60 else text[:57] + "..."
