"""Whether a value is what its TypedDict says, at run time: every required key, no other key,
the keys in the order the type declares them (the order the JSON prints them), and each value of
its declared type, all the way down. mypy checks a dict where the program builds it; this checks
what the program really made, including values that came through ``Any`` or back from JSON."""

from __future__ import annotations

import types
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

__all__ = ["problems"]


def problems(
    value: Any, hint: Any, where: str = "", leave_out: frozenset[str] = frozenset()
) -> list[str]:
    """Where ``value`` is not a ``hint`` (a TypedDict or any type inside one), one line each;
    ``leave_out``: keys of the outer TypedDict that ``value`` may lack (``check``, which the
    JSON leaves out)."""
    where = where or getattr(hint, "__name__", str(hint))
    if is_typeddict(hint):
        return _typed_dict(value, hint, where, leave_out)
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        arms = [arm for arm in args if arm is not type(None)]
        if value is None and len(arms) < len(args):
            return []
        if len(arms) == 1:  # X | None, and not None: what is wrong with it as an X
            return problems(value, arms[0], where)
        found = [problems(value, arm, where) for arm in arms]
        return [] if any(not f for f in found) else [f"{where}: {value!r} is none of {args}"]
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r} is not one of {args}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [p for i, item in enumerate(value) for p in problems(item, args[0], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a dict"]
        found = [f"{where}: key {k!r} is not a str" for k in value if not isinstance(k, str)]
        return found + [
            p for k, v in value.items() for p in problems(v, args[1], f"{where}[{k!r}]")
        ]
    return _plain(value, hint, where)


def _typed_dict(value: Any, hint: Any, where: str, leave_out: frozenset[str]) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: {type(value).__name__}, not a {hint.__name__}"]
    # which keys are NotRequired, read off the hints: ``__required_keys__`` cannot tell under
    # ``from __future__ import annotations`` before Python 3.14
    declared = get_type_hints(hint, include_extras=True)
    required = {k for k, t in declared.items() if _required(t, hint.__total__)} - leave_out
    found = [f"{where}: no {k!r}" for k in declared if k in required and k not in value]
    found += [f"{where}: {k!r} is not a key of {hint.__name__}" for k in value if k not in declared]
    order = [k for k in declared if k in value]
    if [k for k in value if k in declared] != order:
        found.append(f"{where}: keys {list(value)} not in the declared order {order}")
    for key in order:
        found += problems(value[key], _bare(declared[key]), f"{where}.{key}")
    return found


def _required(hint: Any, total: bool) -> bool:
    origin = get_origin(hint)
    return origin is Required or (total and origin is not NotRequired)


def _bare(hint: Any) -> Any:
    """``hint`` without its ``Required``, ``NotRequired`` or ``Annotated``."""
    while get_origin(hint) in (Required, NotRequired, Annotated):
        hint = get_args(hint)[0]
    return hint


def _plain(value: Any, hint: Any, where: str) -> list[str]:
    if hint is Any or hint is object:
        return []
    if hint is type(None):
        ok = value is None
    elif hint is float:  # an int is a float too, as in a type hint (and in JSON)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(hint, type):
        ok = isinstance(value, hint)
    else:
        raise TypeError(f"{where}: cannot check {hint!r}")
    return [] if ok else [f"{where}: {value!r} is not a {getattr(hint, '__name__', hint)}"]
