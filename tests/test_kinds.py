"""The registry of op kinds: each kind declared once, and everything reads it from there."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from simsync.errors import GraphError
from simsync.ir.resources import ACTIONS
from simsync.kinds import KINDS, cost_keys, kind_of
from simsync.kinds.aggregate import LARGE_GRADIENT, mean_gradients
from simsync.scenario.schema import fields_of
from simsync.viz import kind_style

ROOT = Path(__file__).resolve().parent.parent


def test_every_kind_has_a_look_a_meaning_and_a_way_to_run() -> None:
    letters = [kind.style.letter for kind in KINDS.values()]
    assert len(set(letters)) == len(letters)  # the timeline tells kinds apart by letter
    for kind in KINDS.values():
        assert kind.doc and kind.style.hex.startswith("#")
        assert kind.lower is not None or kind.unlowered  # TensorFlow, or why not
        assert kind.action is None or ACTIONS[kind.action.name] is kind.action
        assert kind_style(kind.name).letter == kind.style.letter  # the views read the registry


def test_the_costs_table_is_the_registrys_cost_keys() -> None:
    # besides the kinds' costs, the clients' own time per run (a worker's, the queue runner's)
    costs = set(fields_of("costs")) - {"session_run", "queue_runner_run"}
    assert costs == set(cost_keys())
    assert {"push_gradients", "take_gradients", "enqueue_tokens", "dequeue_token"} <= costs


def test_an_unknown_kind_is_one_clear_error() -> None:
    with pytest.raises(GraphError, match=r"^unknown op kind 'shuffle'; known kinds: read, "):
        kind_of("shuffle")


def test_no_kind_name_is_switched_on_outside_its_own_module() -> None:
    # an op kind's meaning lives in simsync/kinds/<kind>.py; elsewhere nothing compares
    # op.kind with a name (kinds are looked up in the registry instead)
    pattern = re.compile(r"\b(op|record|node\.op|src)\.kind\s*(==|!=|in)\s*[\"'(]")
    offenders = []
    for path in (ROOT / "simsync").rglob("*.py"):
        if path.parent.name == "kinds":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_no_training_mode_is_switched_on_downstream() -> None:
    # a training mode is a pattern: only scenario loading and pattern selection read its name
    pattern = re.compile(r"""(mode\s*(==|!=)|==\s*["'](sync|async|sync_replicas)["'])""")
    allowed = {"scenario", "patterns"}
    offenders = []
    for path in (ROOT / "simsync").rglob("*.py"):
        if path.parent.name in allowed:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and ">>>" not in line:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


@pytest.mark.parametrize("shape", [(8, 4, 10), (8, 64, 64)])  # below and above LARGE_GRADIENT
def test_the_mean_of_a_batched_passs_rows_is_that_of_their_stacked_copy(
    shape: tuple[int, int, int],
) -> None:
    """The towers' gradients of one batched backward pass are rows of one array: their mean
    is bit for bit the same whether that array is averaged or the rows are stacked again."""
    stacked = np.random.default_rng(0).normal(size=shape)
    rows = [{"w": row} for row in stacked]
    assert (stacked[0].nbytes >= LARGE_GRADIENT) == (shape[1] == 64)
    mean = mean_gradients(rows)["w"]
    assert mean.tobytes() == np.mean(np.array(stacked), axis=0).tobytes()
    assert mean.tobytes() == stacked.mean(axis=0).tobytes()
