"""A program's own SyncReplicasOptimizer, imported (no TensorFlow here): the graph below is the
one ``SyncReplicasOptimizer.apply_gradients`` builds for each worker of one process (its ops'
types and inputs as TensorFlow 2.21 makes them), and the expected behaviour is its protocol
(``tensorflow/python/training/sync_replicas_optimizer.py``, ../shared/research): a worker
pushes its gradient tagged with its local step, then takes a token, which becomes its local
step; the chief's queue runner takes R gradients, applies them once, moves the global step
and puts ``max(N, R)`` tokens carrying it."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from simsync.ir import Cost
from simsync.kinds import sync_points
from simsync.simulation.fit import fit_costs, simulate_graph
from simsync.tf_backend.program.convert import convert
from simsync.tf_backend.program.values import NoValues, replay_plan
from simsync.tf_backend.program.whatif import with_towers
from simsync.viz import folded_by_scope

CPU = "/device:CPU:0"
TAKE = "tower_0/sync_replicas/AccumulatorTakeGradient"  # made by worker 0's optimizer
WORK, SLOW = 0.001, 0.003  # a worker's gradient, and the slow worker's


def _op(name, kind, inputs=(), device=CPU, control=(), **more):
    return {
        "name": name, "type": kind, "device": device, "colocate": [], "control": list(control),
        "inputs": [{"op": i, "slot": 0, "shape": [4, 4], "dtype": "float32", "bytes": 64}
                   for i in inputs],
        "made_in": None, **more,
    }  # fmt: skip


def _program(workers=2, replicas=2, held=2, slow=SLOW, profile=None):
    """``workers`` threads, each with its own optimizer (worker 0 the chief), one variable
    ``w``; the token queue holds ``held`` tokens as the loop starts; worker 1's gradient
    takes ``slow`` seconds, the others' :data:`WORK`."""
    ops = [
        _op("global_step", "VarHandleOp"),
        _op("w", "VarHandleOp"),
    ]
    for i in range(workers):
        gpu = f"/device:GPU:{i}"
        ops += [
            _op(f"tower_{i}/sync_rep_local_step", "VarHandleOp", device=gpu),
            _op(f"tower_{i}/read", "ReadVariableOp", ["w"], gpu),
            _op(f"tower_{i}/grad", "MatMul", [f"tower_{i}/read"], gpu),
            # each optimizer makes its own accumulator and token queue: one shared name
            _op(f"tower_{i}/conditional_accumulator", "ConditionalAccumulator",
                shared_name="w:0/grad_accum"),
            _op(f"tower_{i}/local_step_read", "ReadVariableOp",
                [f"tower_{i}/sync_rep_local_step"], gpu),
            _op(f"tower_{i}/sync_replicas/AccumulatorApplyGradient",
                "ResourceAccumulatorApplyGradient",
                [f"tower_{i}/conditional_accumulator", f"tower_{i}/local_step_read",
                 f"tower_{i}/grad"]),
            _op(f"sync_token_q_{i}", "FIFOQueueV2", shared_name="sync_token_q", capacity=-1),
            _op(f"sync_token_q_{i}_Dequeue", "QueueDequeueV2", [f"sync_token_q_{i}"],
                control=[f"tower_{i}/sync_replicas/AccumulatorApplyGradient"], elements=1),
            _op(f"tower_{i}/Assign", "AssignVariableOp",
                [f"tower_{i}/sync_rep_local_step", f"sync_token_q_{i}_Dequeue"], gpu),
        ]  # fmt: skip
    ops += [  # the chief's: what its queue runner's enqueue needs
        _op("num_required", "Const"),
        _op(TAKE, "ResourceAccumulatorTakeGradient",
            ["tower_0/conditional_accumulator", "num_required"], elements=replicas),
        _op("apply", "ResourceApplyGradientDescent", ["w", TAKE]),
        _op("step_add", "AssignAddVariableOp", ["global_step"], control=["apply"]),
        _op("step_read", "ReadVariableOp", ["global_step"], control=["step_add"]),
        _op("fill", "Fill", ["step_read"]),
        _op("sync_op", "QueueEnqueueManyV2", ["sync_token_q_0", "fill"],
            elements=max(workers, replicas)),
    ]  # fmt: skip
    data = {
        "program": "sync_replicas.py", "order": [op["name"] for op in ops], "ops": ops,
        "clients": [{"thread": f"Thread-{i}", "name": f"thread_{i}",
                     "fetches": [f"tower_{i}/Assign"]} for i in range(workers)],
        "trainable": ["w"], "queue_sizes": {"sync_token_q_0": held},
        # the chief's runner: SyncReplicasOptimizer hands it the token queue
        "queue_runners": [{"queue": "sync_token_q_0", "threads": 1, "enqueue": ["sync_op"],
                           "enqueue_ops": ["sync_op"]}],
        "collections": {"global_step": ["global_step"]},
    }  # fmt: skip
    graph, report = convert(data, profile)
    if profile is not None:
        return graph, report, data
    for op in graph.ops():
        cost = WORK if op.name.endswith("/grad") else 1e-5
        if op.name == "tower_1/grad":
            cost = slow
        graph.replace_op(dataclasses.replace(op, cost=Cost(cost)))
    return graph, report, data


def test_the_workers_share_one_accumulator_and_one_token_queue():
    graph, report, _ = _program()
    # two ConditionalAccumulator ops and two FIFOQueueV2 of one shared name each: one each
    assert {name: r.kind for name, r in graph.resources.items()} == {
        "tower_0/conditional_accumulator": "accumulator", "sync_token_q_0": "queue"
    }  # fmt: skip
    assert report["accumulators"] == ["tower_0/conditional_accumulator"]
    assert report["token_queues"] == ["sync_token_q_0"]
    assert graph.resources["sync_token_q_0"].initial == 2
    assert graph.resources["sync_token_q_0"].item == "token"
    for i in (0, 1):
        push = graph.op(f"tower_{i}/sync_replicas/AccumulatorApplyGradient")
        assert (push.kind, push.resource) == ("push_gradients", "tower_0/conditional_accumulator")
        assert push.reads == (f"tower_{i}/sync_rep_local_step",)  # tagged with its local step
        dequeue = graph.op(f"sync_token_q_{i}_Dequeue")
        assert (dequeue.kind, dequeue.resource) == ("dequeue_token", "sync_token_q_0")
        assert dequeue.writes == (f"tower_{i}/sync_rep_local_step",)  # the token is the step
        assert graph.op(f"tower_{i}/Assign").writes == ()  # it adds no second write
    take, enqueue = graph.op(TAKE), graph.op("sync_op")
    assert (take.kind, take.amount) == ("take_gradients", 2)
    assert (enqueue.kind, enqueue.amount, enqueue.reads) == ("enqueue_tokens", 2, ("global_step",))
    chief = [c for c in graph.clients if c.daemon]
    assert [c.fetches for c in chief] == [("sync_op",)]
    assert sorted(c.name for c in graph.clients if not c.daemon) == ["thread_0", "thread_1"]
    # the take waits for every worker's push: where the workers meet
    assert sync_points(graph) == [TAKE]
    assert take.tower is None  # made in tower 0's scope, but every worker's meeting


def test_each_step_applies_once_and_waits_for_the_slow_worker():
    graph, _, _ = _program()
    trace = simulate_graph(graph, 20).trace
    takes = [e for e in trace.resources if e.action == "take"]
    applies = [u for u in trace.updates if u.op == "apply" and u.applied]
    assert len(applies) == len(takes) >= 18  # one apply per take
    # R = N = 2: each take has both workers' gradients (or more, after a dropped round)
    assert all(e.amount == 2 for e in takes)
    # the fast worker waits for the slow one's push every step: its steps last as long
    fast = [s.duration for s in trace.steps if s.client == "thread_0"][5:]
    assert min(fast) >= SLOW


def test_the_first_tokens_carry_step_0_so_each_workers_second_gradient_is_dropped():
    # TensorFlow's own test (sync_replicas_optimizer_test.test2Workers): the initial tokens
    # carry global step 0, so a worker that takes one after the first apply pushes with a
    # local step below the accumulator's, and its gradient is dropped; workers of one speed
    graph, _, _ = _program(slow=WORK)
    trace = simulate_graph(graph, 10).trace
    pushes = [e for e in trace.resources if e.action == "push"]
    dropped = Counter((e.client, e.step) for e in pushes if not e.accepted)
    assert dropped == {("thread_0", 1): 1, ("thread_1", 1): 1}


def test_a_fast_worker_fills_the_slow_ones_slot_with_the_first_tokens():
    # tokens limit how many gradients a step takes, not whose (../shared/research): with the
    # two first tokens the fast worker pushes twice before the slow one pushes once, so its
    # two gradients are the first step's, and the slow one's first is dropped
    graph, _, _ = _program()
    trace = simulate_graph(graph, 10).trace
    first = next(e for e in trace.resources if e.action == "push" and e.client == "thread_1")
    assert not first.accepted
    (take, *_) = (e for e in trace.resources if e.action == "take")
    pushed = [e.client for e in trace.resources if e.action == "push" and e.time <= take.time]
    assert pushed == ["thread_0", "thread_0"]


def test_with_a_backup_worker_the_slow_ones_gradients_are_dropped():
    graph, _, _ = _program(workers=3, replicas=2, held=2)
    trace = simulate_graph(graph, 30).trace
    pushes = [e for e in trace.resources if e.action == "push"]
    dropped = Counter(e.client for e in pushes if not e.accepted)
    # tokens per step max(N, R) = 3, but each take needs 2: the slow worker's come too late
    assert dropped["thread_1"] > dropped["thread_0"] and dropped["thread_1"] > 5


def test_its_values_are_refused_with_the_reason():
    graph, _, data = _program()
    trace = simulate_graph(graph, 3).trace
    with pytest.raises(NoValues, match="accumulator"):
        replay_plan(graph, trace, data, graph)


def test_more_towers_are_more_workers_with_a_token_each():
    graph, _, _ = _program()  # N = R = 2: 2 tokens a step
    bigger, line = with_towers(graph, 4)
    assert line.endswith("; 4 tokens a step, each step still applying 2 gradients")
    assert bigger.op("sync_op").amount == 4
    # the chief's take is made in tower 0's scope but is nobody's tower: not copied
    assert [op.name for op in bigger.ops() if op.kind == "take_gradients"] == [TAKE]
    assert len([c for c in bigger.clients if not c.daemon]) == 4
    trace = simulate_graph(bigger, 20).trace
    takes = [e for e in trace.resources if e.action == "take"]
    # four workers, each step two of their gradients: the others' are dropped as stale
    pushes = [e for e in trace.resources if e.action == "push"]
    assert sum(not e.accepted for e in pushes) >= len(takes) > 0


def test_drawn_by_scope_the_chiefs_take_is_a_box_of_its_own():
    graph, _, _ = _program()
    folded = folded_by_scope(graph)
    boxes = {op.name: op.tower for op in folded.ops()}
    # each worker's push in its own tower's box; the take, made in tower 0's scope, apart
    assert boxes[TAKE] is None
    assert boxes["tower_0/sync_replicas"] == 0 and boxes["tower_1/sync_replicas"] == 1


def test_a_queue_whose_element_a_model_variable_takes_is_no_token_queue():
    # an input queue's dequeue assigned to a trained variable: not a step, not a token
    ops = [
        _op("w", "VarHandleOp"),
        _op("fifo_queue", "FIFOQueueV2", capacity=4),
        _op("fifo_queue_Dequeue", "QueueDequeueV2", ["fifo_queue"], elements=1),
        _op("assign", "AssignVariableOp", ["w", "fifo_queue_Dequeue"]),
    ]
    graph, report = convert(
        {
            "program": "p.py", "order": [op["name"] for op in ops], "ops": ops,
            "clients": [{"thread": "MainThread", "name": "main", "fetches": ["assign"]}],
            "trainable": ["w"], "queue_sizes": {"fifo_queue": 4},
        },
        None,
    )  # fmt: skip
    assert report["token_queues"] == []
    assert graph.resources["fifo_queue"].item == "element"
    assert graph.op("fifo_queue_Dequeue").kind == "dequeue_elements"


def test_workers_timed_together_are_fitted_to_their_step():
    graph, _, _ = _program(slow=WORK)
    step = 0.01  # the profile's untraced step of each worker, longer than the ops as traced
    fitted, found = fit_costs(graph, {"thread_0": step, "thread_1": step}, together=True)
    assert found["per_run"] > 0 and abs(found["simulated"] - step) <= 0.02 * step
    steps = [s.duration for s in simulate_graph(fitted, 10).trace.steps]
    assert abs(sorted(steps)[len(steps) // 2] - step) <= 0.05 * step
    # timed alone, threads are not fitted
    alone = fit_costs(graph, {"thread_0": step, "thread_1": step})[1]
    assert alone["scale"] == 1.0 and "timed alone" in alone["why"]


def test_a_take_and_a_token_dequeue_cost_a_copy_not_their_traced_wait():
    # traced, the take held its wait for the pushes, the dequeue its wait for the token
    traced = {
        "tower_0/sync_replicas/AccumulatorApplyGradient": 3e-5,
        "tower_1/sync_replicas/AccumulatorApplyGradient": 3e-5,
        TAKE: 1e-3,
        "sync_op": 4e-5,  # two tokens
        "sync_token_q_0_Dequeue": 5e-4,
        "sync_token_q_1_Dequeue": 5e-4,
    }
    profile = {"ops": {name: {"device": "/cpu:0", "seconds": t} for name, t in traced.items()}}
    graph, _, _ = _program(profile=profile)
    assert graph.op(TAKE).cost.mean == pytest.approx(3e-5)  # as a push of one gradient
    assert graph.op("sync_token_q_1_Dequeue").cost.mean == pytest.approx(2e-5)  # a token's
