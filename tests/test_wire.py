"""What a sandboxed process says is an attacker's data: every field of every message, of any
wrong type or size, is one clear line, never a crash further on (no TensorFlow here: the
answers are forged as a hostile program's process would write them)."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from simsync.errors import SimsyncError
from simsync.grading.graphs import _checked as checked_grading
from simsync.sandbox.bubblewrap import Outcome
from simsync.sandbox.wire import Measured, Values, WireError, read, read_graph
from simsync.tf_backend.program.cost_cache import graph_key
from simsync.tf_backend.program.load import (
    ProgramError,
    _Answer,
    _checked,
    _Copied,
    _imported,
    _Runner,
)

#: the program the forged answers claim to come from, as the parent copied it
FILES = {"two.py": b"import tensorflow as tf\nx = tf.concat([a, b], 0)\ny = a + b\n"}
#: values of every wrong kind a forged field may hold
WRONG = [
    "x",
    "",
    -1,
    0,
    1e300,
    math.nan,
    math.inf,
    None,
    True,
    [],
    {},
    [1],
    {"a": 1},
    2**70,
    10**400,
    "\x1b[2J",
    "lone \ud800",  # half a UTF-16 pair: JSON's escape gives it, no terminal prints it
]


def _op(name: str, kind: str, inputs: tuple[str, ...] = (), device: str = "") -> dict[str, Any]:
    return {
        "name": name, "type": kind, "device": device, "colocate": [], "control": [],
        "inputs": [{"op": i, "slot": 0, "shape": [4, 4], "dtype": "float32", "bytes": 64}
                   for i in inputs],
        "made_in": ["two.py", 2],
    }  # fmt: skip


def _said() -> dict[str, Any]:
    """A program's honest answer: two towers meeting in a concat, timed."""
    ops = [_op("w", "VarHandleOp", device="/device:CPU:0")]
    for i in (0, 1):
        ops += [
            _op(f"tower_{i}/read", "ReadVariableOp", ("w",), f"/device:CPU:{i + 1}"),
            _op(f"tower_{i}/grad", "MatMul", (f"tower_{i}/read",), f"/device:CPU:{i + 1}"),
        ]
    ops += [
        _op("concat", "ConcatV2", ("tower_0/grad", "tower_1/grad"), "/device:CPU:0"),
        _op("apply", "ResourceApplyGradientDescent", ("w", "concat"), "/device:CPU:0"),
    ]
    ops[-1]["shape"], ops[-1]["bytes"], ops[-1]["elements"] = None, None, None
    graph = {
        "program": "two.py", "order": [op["name"] for op in ops], "ops": ops,
        "clients": [{"thread": "MainThread", "name": "main", "fetches": ["apply"]}],
        "trainable": ["w"], "queue_runners": [], "queue_sizes": {},
        "collections": {"update_ops": [], "train_op": ["apply"], "global_step": []},
        "logical_devices": True, "cores": 2, "runs_before_loop": 1,
    }  # fmt: skip
    profile = {
        "ops": {
            op["name"]: {"device": f"/gpu:{op['name'][6]}" if "tower" in op["name"] else "/cpu:0",
                         "seconds": 1e-4, "busy": 5e-5}
            for op in ops
        },
        "tensors": {"concat:0": 128},
        "clients": {"MainThread": {"wall": 1e-3, "span": 9e-4, "walls": [1e-3] * 3,
                                   "overhead": 5e-5, "python": 2e-5, "cpu": 3e-5}},
        "steps": 5,
    }  # fmt: skip
    machine = {"tensorflow": "2.21.0", "devices": "logical CPU devices", "processor": "x",
               "cores": 2, "profile_form": 6}  # fmt: skip
    # how the second process of a graded program measured its update's weights
    averaging = {"towers": 2, "problem": None, "updates": [
        {"op": "apply", "weights": [0.5, 0.5], "joint": False, "finite": True, "residual": 0.0,
         "permuted": 0.0, "repeated": 0.0}
    ]}  # fmt: skip
    return {
        "started": True,
        "graph": graph,
        "machine": machine,
        "profile": profile,
        "averaging": averaging,
    }


def _import(said: dict[str, Any]) -> Any:
    """What the parent makes of an answer said so: checked, converted, fitted."""
    said = {**said, "graph": json.dumps({"graph": said["graph"]})}
    checked = _checked(said, "two.py")
    copied = _Copied.of(FILES, "two.py")
    answer = _Answer(
        checked, copied, graph_key(copied.digest, checked["graph"], checked["machine"])
    )
    runner = _Runner(Path("two.py"), "two.py")
    return _imported(runner, answer, checked["profile"], "forged", None)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every field of ``value``, nested: its path of keys and indices."""
    found = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*path, index))
    return found


def _forged(said: dict[str, Any], path: tuple[Any, ...], wrong: Any) -> dict[str, Any]:
    forged = copy.deepcopy(said)
    place = forged
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = wrong
    return forged


def test_the_honest_answer_imports():
    imported = _import(_said())
    assert imported.report["towers"] == 2
    assert imported.averaging["updates"][0]["weights"] == [0.5, 0.5]
    assert imported.report["made_in"]["concat"] == "<module> (two.py:2)"


def test_a_forged_answer_of_every_fields_wrong_type_is_one_line_never_a_crash():
    said = _said()
    paths = [p for p in _paths(said) if p[0] != "started"]
    assert len(paths) > 150
    refused = 0
    for path in paths:
        for wrong in WRONG:
            try:
                _import(_forged(said, path, wrong))
            except ProgramError as error:
                message = str(error)
                assert message.startswith("two.py: ") and "\n" not in message, (path, wrong)
                assert len(message) < 1500, (path, wrong)
                refused += 1
            # any other exception fails the test: a forged answer crashed the parent
    assert refused > len(paths) * len(WRONG) * 0.8


def test_a_key_in_the_answer_is_not_read():
    # a key that climbs out of the cache names no file: the parent keys by its own hash
    said = {**_said(), "key": "../" * 12 + "tmp/x/settings"}
    assert _import(said).key == _import(_said()).key


def test_a_forged_made_in_names_no_line_that_cannot_make_the_op():
    said = _said()
    concat = next(op for op in said["graph"]["ops"] if op["name"] == "concat")
    for claim in (["two.py", 1], ["two.py", 3], ["other.py", 2], ["two.py", 10**6]):
        concat["made_in"] = claim  # an import line, a line of +, no such file or line
        assert "concat" not in _import(said).report["made_in"], claim


def test_a_graph_whose_names_do_not_hold_together_is_one_line():
    said = _said()
    said["graph"]["ops"][1]["inputs"][0]["op"] = "nowhere"
    with pytest.raises(ProgramError, match="is no op of the graph"):
        _import(said)
    said = _said()
    said["graph"]["ops"].append(said["graph"]["ops"][0])
    with pytest.raises(ProgramError, match="named twice"):
        _import(said)


@pytest.mark.parametrize(
    ("kind", "value", "said"),
    [
        (Measured, {"clients": {"t": {"walls": ["x"], "steps": [], "queues": {}}}}, "walls[0]"),
        (Measured, {"clients": {"t": {"walls": [], "steps": [[["a", "d", 1.0]]], "queues": {}}}},
         "a list of 5 items"),
        (Values, {"losses": {"c": [[0, 1.0]]}, "final": {}, "versions": {"v": -1}}, "versions"),
        (Values, {"losses": {"c": [[0.5, 1.0]]}, "final": {}, "versions": {}}, "whole number"),
    ],
)  # fmt: skip
def test_a_measured_run_and_replayed_values_are_checked_whole(kind, value, said):
    with pytest.raises(WireError, match=re.escape(said)):
        read(kind, value, "measured")


def test_nan_losses_are_values_not_errors():
    values = {"losses": {"c": [[0, math.nan]]}, "final": {"w": [math.inf, 0.0]}, "versions": {}}
    assert read(Values, values, "values")["final"]["w"][0] == math.inf


def test_a_graders_process_that_says_wrong_types_gives_a_reason_not_a_crash():
    for said in (
        {"started": True, "structure": {"sync_points": 3}},
        {"started": True, "error": 7},
        {"started": True, "facts": {"x": 10**400}},
        {"started": True, "facts": {"step_time": {"mean": object()}}},
        {"started": True, "answers": {"a": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]}},
    ):
        outcome = checked_grading(Outcome(said))
        assert outcome.said == {"started": True} and outcome.error, said
        assert isinstance(outcome.error, str) and "\n" not in outcome.error


def test_read_graph_refuses_every_wrong_top_level_value():
    for wrong in WRONG:
        with pytest.raises(SimsyncError):
            read_graph(wrong)


def test_a_sealed_answer_keeps_only_its_own_lines():
    from simsync.sandbox.bubblewrap import _merge
    from simsync.sandbox.channel import seal

    key = b"k" * 32
    lines = [
        seal(key, '{"started": true}'),
        '{"profile": {"forged": 1}}',  # written by something that never saw the key
        seal(b"x" * 32, '{"error": "under another key"}'),
        seal(key, '{"facts": {"a": 1}}')[:-3] + "2}}",  # changed after it was sealed
        seal(key, '{"machine": {"cores": 2}}'),
    ]
    said, dropped = _merge("\n".join(lines).encode(), 2**20, key)
    assert said == {"started": True, "machine": {"cores": 2}} and dropped == []


def test_a_line_too_long_is_named_with_its_size_and_the_limit():
    from simsync.sandbox.bubblewrap import Limits, _merge

    said, dropped = _merge(b'{"started": true}\n{"measured": "' + b"x" * 3000 + b'"}\n', 1000)
    assert said == {"started": True} and dropped == [
        "of 0.0 MiB, and a line may hold 0.000953674 MiB"
    ]
    why = Outcome(said, dropped=dropped).too_long(Limits(line_bytes=1000))
    assert why == "its answer came on a line of 0.0 MiB, and a line may hold 0.000953674 MiB"


def test_a_line_of_many_small_values_is_not_parsed():
    # a line of "[]," costs the parent some 28 times its size once parsed: counted first
    from simsync.sandbox.bubblewrap import _merge
    from simsync.sandbox.channel import MAX_ITEMS

    line = b'{"started": true}\n{"x": [' + b"[]," * MAX_ITEMS + b"[]]}\n"
    said, dropped = _merge(line, 2**30)
    assert said == {"started": True} and dropped == ["that holds more than 4,000,000 values"]


def test_true_and_text_are_not_numeric_answers():
    from simsync.grading.assignment import Check
    from simsync.grading.rubric import answer

    check = Check("steps", "1.1", "answer", 1, False, "t.toml", {"answer": "a", "expression": "x"})
    for given in (True, "1", [1]):
        passed, said = answer(check, ({"a": given}, None), {"x": 1.0})
        assert not passed and "not a number" in said, given
    assert answer(check, ({"a": 1}, None), {"x": 1.0})[0]


def test_a_scenarios_run_is_checked_however_it_is_made():
    from simsync.errors import ScenarioError
    from simsync.scenario import Scenario

    for steps in (math.nan, 0, -5, 2.5, True, "10"):
        with pytest.raises(ScenarioError, match=r"\[run\] steps: must be from 1 to 1e\+06"):
            Scenario("s").with_run(steps=steps)
    assert Scenario("s").with_run(steps=7, seed=3).run.steps == 7
