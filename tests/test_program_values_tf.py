"""Values of an imported program, replayed with its own ops in the simulated order: checked
against numpy working out the same training by hand (the program's fixed batches, its plain
gradient descent), never against simsync's own output."""

from __future__ import annotations

import importlib.util
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from simsync.simulation.user_program import WhatIf, program_summary, simulate_program

pytestmark = pytest.mark.tf
PROGRAM = Path(__file__).parent / "fixtures" / "programs" / "towers_fixed_batches.py"
STEPS = 12


@pytest.fixture(scope="module")
def program():
    """The program's constants (its batches, rate, towers), read from its own module."""
    spec = importlib.util.spec_from_file_location("towers_fixed_batches", PROGRAM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines constants and functions; trains only as __main__
    return module


def _gradient(p, tower, w):
    x, y = p.X[tower].astype(np.float64), p.Y[tower].astype(np.float64)
    return 2.0 / len(y) * x.T @ (x @ w - y)


def _loss(p, tower, w):
    x, y = p.X[tower].astype(np.float64), p.Y[tower].astype(np.float64)
    return float(np.mean((x @ w - y) ** 2))


def test_the_program_as_written_trains_as_tensorflow_would(program):
    run = simulate_program(PROGRAM, steps=STEPS, values=True)
    values = program_summary(run)["values"]
    assert values["computed"], values
    # by hand: every step averages both towers' gradients at the same w, from w = 0
    w, expected = np.zeros(program.FEATURES), []
    for _ in range(STEPS + 5):
        expected.append(np.mean([_loss(program, t, w) for t in range(program.NUM_GPUS)]))
        w = w - program.RATE * np.mean([_gradient(program, t, w) for t in range(2)], axis=0)
    # the program ran one step of its own before its loop was known (its loop is known at
    # its second call of the same fetches); the global step counts every apply
    before = int(values["final"]["global_step"][1]) - STEPS
    assert before == 1
    assert values["versions"]["w"] == STEPS + 1
    np.testing.assert_allclose(values["loss"]["main"], expected[before : before + STEPS], rtol=1e-4)
    w = np.zeros(program.FEATURES)
    for _ in range(before + STEPS):
        w = w - program.RATE * np.mean([_gradient(program, t, w) for t in range(2)], axis=0)
    norm, mean = values["final"]["w"]
    assert norm == pytest.approx(np.linalg.norm(w), rel=1e-4)
    assert mean == pytest.approx(w.mean(), rel=1e-4)


def test_async_threads_apply_their_own_gradients_in_the_simulated_order(program):
    # a slow link: each thread reads the weights long before its gradient comes back, so
    # the threads' updates are stale, and the order matters
    run = simulate_program(
        PROGRAM, WhatIf(mode="async", latency_us=300.0), steps=STEPS, values=True
    )
    values = program_summary(run)["values"]
    assert values["computed"], values
    assert any(u.before > u.read for u in run.simulation.trace.updates if u.applied)
    assert sorted(values["loss"]) == ["thread_0", "thread_1"]
    # by hand, in the order the simulation gave: each thread's gradient of its own tower's
    # batch, at the version of w it read, applied to the newest w
    before = int(values["final"]["global_step"][1]) - 2 * STEPS
    assert before == 1
    w = np.zeros(program.FEATURES)
    for _ in range(before):  # the program's own steps before its loop was known
        w = w - program.RATE * np.mean([_gradient(program, t, w) for t in range(2)], axis=0)
    versions, read = [w], {}
    losses = defaultdict(list)
    for access in run.simulation.trace.accesses:
        if access.variable != "w":
            continue
        tower = int(access.client.rsplit("_", 1)[1])
        if not access.write:
            if (access.client, access.step) not in read:
                read[(access.client, access.step)] = access.version
                losses[access.client].append(_loss(program, tower, versions[access.version]))
            continue
        seen = versions[read[(access.client, access.step)]]
        versions.append(versions[-1] - program.RATE * _gradient(program, tower, seen))
        assert access.version == len(versions) - 1
    for client, expected in losses.items():
        np.testing.assert_allclose(values["loss"][client], expected, rtol=1e-4)
    norm, mean = values["final"]["w"]
    assert norm == pytest.approx(np.linalg.norm(versions[-1]), rel=1e-4)
    assert mean == pytest.approx(versions[-1].mean(), rel=1e-4)


def test_copied_towers_have_no_values_and_say_why():
    run = simulate_program(PROGRAM, WhatIf(towers=4), steps=3, values=True)
    values = program_summary(run)["values"]
    assert values["computed"] is False
    assert "ops the program does not have" in values["why"]
    assert "run the program built that way" in values["why"]


def test_the_program_wrapped_in_sync_replicas_applies_once_a_step_and_says_why_no_values():
    """--mode sync_replicas --replicas 1 on the real program, tower 1 a thousand times slower
    (its few microseconds of work must outweigh a run's own time, whatever this machine's
    profile says): one apply of the program's own update per step, counted by the program's
    global step, each of tower 0's gradient; tower 1's come too late and are dropped; no
    values yet, and the summary says so."""
    changes = WhatIf(mode="sync_replicas", replicas=1, speeds=(1.0, 0.001))
    run = simulate_program(PROGRAM, changes, steps=10, values=True)
    result = program_summary(run)
    assert {c.until for c in run.graph.clients if not c.daemon} == {"global_step"}
    apply = "GradientDescent/update_w/ResourceApplyGradientDescent"
    applied = [u for u in run.simulation.trace.updates if u.op == apply and u.applied]
    assert len(applied) == 10
    by = result["gradients"]["by_worker"]
    assert by["thread_0"]["accepted"] == 10 and by["thread_1"]["accepted"] == 0
    assert by["thread_1"]["dropped"] == by["thread_1"]["pushed"] >= 1
    assert result["values"]["computed"] is False
    assert "has none for these yet" in result["values"]["why"]
