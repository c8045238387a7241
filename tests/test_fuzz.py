"""The hostile user, automated: random mutations of valid scenarios, progress files, profiles
and answer files, fed to the command line. Whatever the input, `simsync` finishes with status
0, 1 or 2 and one clear line for an error: never a traceback, never a hang.

Each example runs the real command in this process (the same ``main`` the ``simsync`` script
calls) under a watchdog alarm that fails it if it does not finish in time. Bounded so the four
tests add well under a minute.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import watchdog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simsync.cli import main
from simsync.scenario.schema import (
    AGGREGATIONS,
    APPLY_MODES,
    DISTRIBUTIONS,
    FIELDS,
    MODEL_KINDS,
    MODES,
    Field,
)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))
WATCHDOG_SECONDS = 30

FUZZ = settings(
    max_examples=100,
    derandomize=True,  # the same examples every run: CI cannot fail by chance
    deadline=None,  # the watchdog below bounds each example instead
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


def simsync(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``simsync ARGS`` in this process: (status, stdout, stderr). Any exception is a bug."""
    out, err = io.StringIO(), io.StringIO()
    saved = {key: os.environ.get(key) for key in env or {}}
    os.environ.update(env or {})
    try:
        with (
            watchdog(WATCHDOG_SECONDS),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            status = main(list(args))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return status, out.getvalue(), err.getvalue()


def assert_clean(status: int, err: str, allowed: tuple[int, ...] = (0, 2)) -> None:
    assert status in allowed, err
    if status == 2:
        errors = [line for line in err.splitlines() if line.startswith("simsync: error: ")]
        assert len(errors) == 1, err
        assert "\x1b" not in err


# -- values a hostile user types ------------------------------------------------------------
numbers = st.one_of(
    st.integers(-3, 70),
    st.sampled_from([0, -1, 65536, 65537, 10**6, 10**9, 2**63 - 1, -(2**63), 312_500]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([5e-324, 1e-300, 1e-9, 1e6, 1e300, 1e308, 1.7e308, -0.0, 0.5]),
)
texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "inf", "nan", "\x1b[2J", "constant", "async", "allreduce", "mlp"]),
)
scalars = st.one_of(numbers, texts, st.booleans())
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=6),
    st.dictionaries(texts, scalars, max_size=3),
)


def toml_key(key: str) -> str:
    return json.dumps(key, ensure_ascii=False)


def toml_value(value: Any) -> str:
    """A TOML value: strings escaped as JSON escapes them (a subset of TOML's escapes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    inner = ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items())
    return "{" + inner + "}"


def to_toml(data: dict[str, Any], prefix: str = "") -> str:
    """A TOML document: scalars first, then one [table] per nested dict."""
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in data.items() if not _table(v)]
    for key, value in data.items():
        if _table(value):
            name = f"{prefix}.{toml_key(key)}" if prefix else toml_key(key)
            lines += ["", f"[{name}]", to_toml(value, name)]
    return "\n".join(lines) + "\n"


def _table(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) for k in value)


# Any number from the smallest subnormal to the largest float, either sign.
magnitudes = st.builds(
    lambda sign, mantissa, exponent: sign * mantissa * 10.0**exponent,
    st.sampled_from([1, 1, 1, -1]),
    st.floats(1.0, 9.99),
    st.one_of(st.integers(-12, 9), st.integers(-325, 308)),  # mostly plausible sizes
)
CHOICES = {
    "distribution": DISTRIBUTIONS,
    "kind": MODEL_KINDS,
    "mode": MODES,
    "aggregation": AGGREGATIONS,
    "apply": APPLY_MODES,
}
#: Sizes are kept small where a valid value would only make the run long, not different:
#: 65,536 devices is a known slow case of the engine, measured and reported, not fuzzed.
SIZES = {"devices": 64, "batch_size": 4096, "features": 4096, "classes": 4096}


def value_for(field: Field) -> st.SearchStrategy[Any]:
    """Mostly a value of the key's own type, often at or past its limits; sometimes anything."""
    if field.kind == "float":
        typed: st.SearchStrategy[Any] = st.one_of(magnitudes, numbers)
    elif field.kind == "int":
        top = SIZES.get(field.key, 10**6)
        typed = st.one_of(st.integers(-2, min(top, 70)), st.integers(-2, top), numbers)
        if field.key in SIZES:  # past the limit, so refused at once
            typed = st.one_of(st.integers(-2, top), st.sampled_from([0, -1, 10**9, 2**63 - 1]))
    elif field.kind == "str":
        typed = st.one_of(st.sampled_from(CHOICES.get(field.key, ("x",))), texts)
    elif field.kind == "floats":
        typed = st.lists(st.one_of(magnitudes, numbers), max_size=10)
    else:
        typed = st.lists(st.one_of(st.integers(-1, 64), numbers), max_size=4)
    return st.one_of(typed, typed, typed, values)


KEYS = [(f.table, f.key, value_for(f)) for f in FIELDS]
KEYS += [("", "extra", values), ("cluster", "speed", values), ("", "run", values)]


@st.composite
def mutated_scenarios(draw: Callable[..., Any]) -> str:
    """A valid example with one or two keys set to a hostile value or removed."""
    data = tomllib.loads(draw(st.sampled_from(EXAMPLES)).read_text())
    for _ in range(draw(st.integers(1, 2))):
        table, key, strategy = draw(st.sampled_from(KEYS))
        node = data
        for part in table.split(".") if table else []:
            node = node.setdefault(part, {}) if isinstance(node, dict) else {}
        if not isinstance(node, dict):
            continue
        if draw(st.integers(0, 5)) == 0:
            node.pop(key, None)
        else:
            node[key] = draw(strategy)
    return to_toml(data)


@settings(FUZZ, max_examples=300)
@given(text=mutated_scenarios(), view=st.sampled_from(["json", "text", "dot", "compare"]))
def test_mutated_scenarios_never_crash(text: str, view: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.toml"
        path.write_text(text, encoding="utf-8")
        args = {
            "json": ["simulate", str(path), "--steps", "2", "--json"],
            "text": ["simulate", str(path), "--steps", "2", "--trace", f"{folder}/t.json"],
            "dot": ["graph", str(path), "--format", "dot"],
            "compare": ["compare", str(path), str(path), "--steps", "2"],
        }[view]
        status, _, err = simsync(*args)
        assert_clean(status, err)
        assert sorted(os.listdir(folder)) in (["s.toml"], ["s.toml", "t.json"])


# -- progress files ---------------------------------------------------------------------------
GOOD_PROGRESS = {
    "version": 1,
    "lessons": {
        "01-tiny": {
            "step": 4,
            "done": False,
            "answers": {"step-time": {"given": "20", "correct": True, "tries": 1}},
        }
    },
}


def mutate_json(draw: Callable[..., Any], data: Any, depth: int = 0) -> Any:
    """``data`` with one value somewhere in it replaced by a hostile one."""
    if isinstance(data, dict) and data and depth < 4 and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(data)))
        return {**data, key: mutate_json(draw, data[key], depth + 1)}
    return draw(values)


@st.composite
def progress_files(draw: Callable[..., Any]) -> bytes:
    kind = draw(st.sampled_from(["mutated", "mutated", "bytes", "nested"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    if kind == "nested":
        return b"[" * draw(st.integers(1, 300_000))
    return json.dumps(mutate_json(draw, GOOD_PROGRESS)).encode()


@FUZZ
@given(content=progress_files())
def test_mutated_progress_files_never_crash(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder)
        (data / "progress.json").write_bytes(content)
        env = {"SIMSYNC_DATA_DIR": folder, "SIMSYNC_LESSONS": str(FIXTURES / "lessons")}
        status, out, err = simsync("lessons", "list", env=env)
        assert_clean(status, err, allowed=(0,))
        assert "1 done" in out or "0/1 done" in out
        left = data / "progress.json"
        if left.exists():  # kept only if it was readable: then it reads back the same
            assert left.read_bytes() == content
        status, _, err = simsync("lessons", "reset", "--all", "--yes", env=env)
        assert_clean(status, err, allowed=(0,))
        assert json.loads(left.read_text())["lessons"] == {}


# -- calibration profiles ---------------------------------------------------------------------
GOOD_PROFILE = json.loads((FIXTURES / "profile.json").read_text())


@st.composite
def profiles(draw: Callable[..., Any]) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=64))
    data = dict(GOOD_PROFILE)
    for _ in range(draw(st.integers(1, 3))):
        data = mutate_json(draw, data)
        if not isinstance(data, dict):
            break
    return json.dumps(data).encode()


@FUZZ
@given(content=profiles())
def test_mutated_profiles_never_crash(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "p.json"
        path.write_bytes(content)
        four = str(ROOT / "examples" / "four_towers.toml")
        status, _, err = simsync("simulate", four, "--costs", str(path), "--steps", "2")
        assert_clean(status, err)
        if status == 2:
            assert str(path) in err  # the profile is named, not the scenario


# -- answer files -----------------------------------------------------------------------------
@st.composite
def answer_files(draw: Callable[..., Any]) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=64))
    ids = st.one_of(st.sampled_from(["step-time", "who", "which-op"]), st.text(max_size=8))
    answers = draw(st.dictionaries(ids, values, max_size=4))
    table = draw(st.sampled_from(["answers", "answers", "answer"]))
    return to_toml({table: answers}).encode("utf-8")


@FUZZ
@given(content=answer_files())
def test_mutated_answer_files_never_crash(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "answers.toml"
        path.write_bytes(content)
        env = {"SIMSYNC_DATA_DIR": folder, "SIMSYNC_LESSONS": str(FIXTURES / "lessons")}
        status, out, err = simsync("learn", "1", "--answers", str(path), env=env)
        assert_clean(status, err, allowed=(0, 1, 2))
        assert "\x1b" not in out
        assert not (Path(folder) / "progress.json").exists()  # answers never touch progress


@pytest.mark.parametrize("value", [1e308, -0.0, "\x1b[2J", [1, "a", {"b": True}], {"k": 5e-324}])
def test_the_fuzzers_toml_reads_back(value: Any) -> None:
    """The fuzz tests write TOML themselves: it must mean what they meant."""
    assert tomllib.loads(to_toml({"t": {"k": value}})) == {"t": {"k": value}}
