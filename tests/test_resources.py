"""The resource protocol, defined once (simsync.ir.resources): the token queue and the
ConditionalAccumulator as pure state machines, the engine's SimPy wrapper of them, and the
reading of a trace's events through the same accumulator.

Expected values are worked out by hand from TensorFlow's kernels
(``conditional_accumulator_base.cc``): ``apply_grad(g, local_step)`` drops g silently when
local_step is below the accumulator's global step; ``take_grad(R)`` blocks until at least R
gradients were accepted, returns the mean of *all* of them (it divides by its counter), resets
the counter and adds one to the global step.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import simpy

from simsync.engine.resources import Waitable
from simsync.ir import Resource
from simsync.ir.resources import ACTIONS, Accumulator, Got, Put, TokenQueue, new_state
from simsync.kinds.aggregate import mean_gradients
from simsync.trace import ResourceEvent, takes

ROOT = Path(__file__).resolve().parent.parent


def test_stale_gradients_are_dropped_and_the_step_moves_on_with_each_take() -> None:
    acc: Accumulator[str] = Accumulator()
    # step 0: two workers push with local step 0: both accepted
    assert acc.push(0, "w0 @0") and acc.push(0, "w1 @0")
    assert acc.take() == Got(1, 2, ("w0 @0", "w1 @0"))  # the global step is 1 now
    # a straggler still on local step 0 is stale now: dropped, not kept for the next take
    assert acc.push(0, "w2 @0") is False
    assert acc.push(1, "w0 @1") and acc.push(2, "w1 @2")  # not below the step: accepted
    assert acc.take() == Got(2, 2, ("w0 @1", "w1 @2"))
    assert acc.step == 2 and not acc.fresh(1) and acc.fresh(2)


def test_a_take_blocks_until_r_were_accepted_then_takes_them_all() -> None:
    acc: Accumulator[int] = Accumulator()
    acc.push(0, 1)
    acc.push(0, 2)
    assert acc.do_get(3) is None  # 2 of the 3 it waits for: it blocks, nothing changes
    assert acc.step == 0 and acc.accepted == [1, 2]
    acc.push(0, 3)
    acc.push(0, 4)  # a fourth landed before the take came back
    assert acc.do_get(3) == Got(1, 4, (1, 2, 3, 4))  # all four, as TensorFlow divides by 4
    assert acc.do_get(1) is None  # empty again


def test_the_mean_a_take_returns_is_of_every_accepted_gradient() -> None:
    acc: Accumulator[dict[str, np.ndarray]] = Accumulator()
    for local_step, value in ((0, 1.0), (0, 2.0), (0, 6.0)):
        acc.push(local_step, {"w": np.array([value])})
    stale = {"w": np.array([100.0])}
    got = acc.do_get(2)
    assert got is not None and got.amount == 3
    assert acc.push(0, stale) is False
    assert mean_gradients(list(got.items))["w"].tolist() == [3.0]  # (1 + 2 + 6) / 3


def test_a_push_records_one_gradient_and_a_drop() -> None:
    acc: Accumulator[None] = Accumulator(step=3)
    assert acc.do_put(2, 0, None) == Put(2, 1, False)
    assert acc.do_put(3, 0, None) == Put(3, 1, True)
    assert (acc.wants(2), acc.describe()) == ("2 gradient(s)", "it has 1")


def test_the_token_queue_is_first_in_first_out() -> None:
    queue: TokenQueue[None] = TokenQueue(initial=2)
    assert queue.start() == Put(0, 2, True)  # the initial tokens: value 0, before any run
    assert queue.do_put(7, 3, None) == Put(7, 3, True)  # enqueue_many: three of value 7
    taken = [queue.do_get(1) for _ in range(6)]
    assert [t.value if t else None for t in taken] == [0, 0, 7, 7, 7, None]
    assert queue.describe() == "empty" and queue.wants(1) == "a token"
    assert TokenQueue().start() is None and Accumulator().start() is None


def test_the_engine_serves_waiting_gets_in_order_when_a_put_lets_it() -> None:
    env = simpy.Environment()
    queue = Waitable(env, Resource("q", "queue", "/cpu:0"))
    first, second = queue.get(1, "w0", "w0/dequeue"), queue.get(1, "w1", "w1/dequeue")
    queue.put(4, 1)
    assert first.triggered and not second.triggered  # one token: the first waiter's
    assert queue.waiting() == ["w1 waits in w1/dequeue for a token from q (empty)"]
    queue.put(5, 2)
    assert second.triggered and queue.state.describe() == "1 token"
    env.run()
    assert (first.value.value, second.value.value) == (4, 5)

    acc = Waitable(env, Resource("a", "accumulator", "/cpu:0"))
    take = acc.get(2, "chief", "take")
    assert acc.put(0, 0) == Put(0, 1, True) and not take.triggered
    acc.put(0, 0)
    env.run()
    assert take.value == Got(1, 2, (None, None)) and acc.put(0, 0).accepted is False


def test_a_traces_takes_average_what_their_accumulator_accepted_since_the_take_before() -> None:
    def push(resource: str, client: str, accepted: bool = True) -> ResourceEvent:
        return ResourceEvent(resource, "push", f"{client}/push", client, 0, 0.0, 0, 1, accepted)

    def take(resource: str, amount: int) -> ResourceEvent:
        return ResourceEvent(resource, "take", "take", "chief", 0, 0.0, 1, amount)

    events = [
        push("a", "w0"),
        push("b", "w0"),
        push("a", "w1", accepted=False),  # dropped: in no take
        push("a", "w2"),
        take("a", 2),
        push("a", "w1"),
        take("b", 1),
        take("a", 1),
    ]
    found = [(t.resource, [p.client for p in pushes]) for t, pushes in takes(events)]
    assert found == [("a", ["w0", "w2"]), ("b", ["w0"]), ("a", ["w1"])]


def test_every_action_acts_on_a_kind_of_resource_that_exists() -> None:
    for action in ACTIONS.values():
        assert new_state(action.resource) is not None
        assert action.sets_counter <= (not action.puts)  # only a get can set a counter


def test_no_resource_action_is_switched_on_by_name() -> None:
    # what push, take, enqueue and dequeue do is defined in simsync/ir/resources.py; elsewhere
    # code reads the Action (puts, resource, sets_counter) or compares with ACTION.name
    names = "push|take|enqueue|dequeue"
    pattern = re.compile(
        rf"""(action\s*(==|!=)\s*["']({names})["'])|(["']({names})["']\s*(==|!=|in)\b)"""
        rf"""|(action\s+in\s*[(\[{{]\s*["']({names})["'])"""
    )
    offenders = []
    for path in (ROOT / "simsync").rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line) and ">>>" not in line:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []
