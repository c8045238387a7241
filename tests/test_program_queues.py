"""A program's input queue, imported (no TensorFlow here): a ``tf.queue.FIFOQueue`` becomes a
queue with the program's capacity, its queue runner's threads daemon clients, its dequeues
wait while it holds too few and its enqueues while it is full."""

from __future__ import annotations

import dataclasses

import pytest

from simsync.errors import SimulationError
from simsync.ir import Cost, Resource
from simsync.simulation.fit import simulate_graph
from simsync.tf_backend.program.convert import convert
from simsync.tf_backend.program.whatif import with_towers

MAKE, TOWER = 0.004, 0.001  # seconds a queue runner's run makes a batch in; a tower's work


def _op(name, kind="MatMul", inputs=(), device="", **more):
    return {
        "name": name, "type": kind, "device": device, "colocate": [], "control": [],
        "inputs": [{"op": i, "slot": 0, "shape": [4, 4], "dtype": "float32", "bytes": 64}
                   for i in inputs],
        "made_in": None, **more,
    }  # fmt: skip


def _queued(capacity=2, held=2, threads=1, runner=True, simulated=True):
    """Two towers, each dequeuing one batch from a FIFO queue of ``capacity`` on the CPU that
    holds ``held`` batches as the loop starts; a queue runner of ``threads`` threads makes
    each batch (``make``) and enqueues it (its threads ``simulated``, or not)."""
    cpu = "/device:CPU:0"
    ops = [
        _op("w", "VarHandleOp", device=cpu),
        _op("fifo_queue", "FIFOQueueV2", device=cpu, capacity=capacity),
        _op("make", "RandomStandardNormal", device=cpu),
        _op("fifo_queue_enqueue", "QueueEnqueueV2", ["fifo_queue", "make"], cpu, elements=1),
    ]
    for i in (0, 1):
        gpu = f"/device:GPU:{i}"
        ops += [
            _op(f"tower_{i}/fifo_queue_Dequeue", "QueueDequeueV2", ["fifo_queue"], gpu,
                elements=1),
            _op(f"tower_{i}/read", "ReadVariableOp", ["w"], gpu),
            _op(f"tower_{i}/grad", "MatMul", [f"tower_{i}/read", f"tower_{i}/fifo_queue_Dequeue"],
                gpu),
        ]  # fmt: skip
    ops += [
        _op("concat", "ConcatV2", ["tower_0/grad", "tower_1/grad"], cpu),
        _op("apply", "ResourceApplyGradientDescent", ["w", "concat"], cpu),
    ]
    runners = [
        {"queue": "fifo_queue", "threads": threads, "enqueue": ["fifo_queue_enqueue"],
         "enqueue_ops": ["fifo_queue_enqueue"] * threads}
    ] if runner else []  # fmt: skip
    graph, report = convert(
        {
            "program": "queued.py", "order": [op["name"] for op in ops], "ops": ops,
            "clients": [{"thread": "MainThread", "name": "main", "fetches": ["apply"]}],
            "trainable": ["w"], "queue_runners": runners, "queue_sizes": {"fifo_queue": held},
        },
        None,
        queue_runners=simulated,
    )  # fmt: skip
    for op in graph.ops():
        cost = MAKE if op.name == "make" else TOWER if op.name.endswith("/grad") else 1e-5
        graph.replace_op(dataclasses.replace(op, cost=Cost(cost)))
    return graph, report


def _lengths(trace, resource="fifo_queue"):
    """How many elements the queue held after each of its events, in order."""
    held, lengths = 0, []
    for event in trace.resources:
        if event.resource != resource:
            continue
        held += event.amount if event.action == "enqueue" else -event.amount
        lengths.append(held)
    return lengths


def test_a_fifo_queue_becomes_a_queue_with_its_capacity_and_its_runner_a_daemon():
    graph, report = _queued(threads=2)
    queue = graph.resources["fifo_queue"]
    assert (queue.kind, queue.capacity, queue.initial, queue.item) == ("queue", 2, 2, "element")
    assert "2 queue runner threads fill 'fifo_queue'" in queue.note
    assert graph.op("tower_1/fifo_queue_Dequeue").kind == "dequeue_elements"
    assert graph.op("tower_1/fifo_queue_Dequeue").resource == "fifo_queue"
    assert graph.op("fifo_queue_enqueue").kind == "enqueue_elements"
    runners = [c for c in graph.clients if c.daemon]
    assert [(c.name, c.fetches) for c in runners] == [
        ("fifo_queue_runner_0", ("fifo_queue_enqueue",)),
        ("fifo_queue_runner_1", ("fifo_queue_enqueue",)),
    ]
    assert report["ignored"]["FIFO queues (kept as queues, not ops)"] == 1
    # the runner's own ops are run (by its threads), not ignored as never run
    assert "not run by the training loop" not in report["ignored"]
    assert graph.op("make").tower is None


def test_by_default_a_queue_its_runners_fill_is_never_short():
    """Not simulating the runners' threads (the default), their queue is none: its dequeues
    never wait; a queue nothing fills still is one. The report says which is which."""
    graph, report = _queued(threads=2, simulated=False)
    assert not graph.resources and not [c for c in graph.clients if c.daemon]
    assert graph.op("tower_0/fifo_queue_Dequeue").kind == "generic"
    assert "make" not in graph.nx  # the runners' work is not run
    assert (
        report["ignored"][
            "FIFO queues filled by queue runners (their threads are not simulated: a dequeue "
            "never waits)"
        ]
        == 1
    )
    assert report["input_queues"] == {"fifo_queue": {"takes": 2, "simulated": False}}
    steps = [s for s in simulate_graph(graph, 5).trace.steps if s.client == "main"]
    assert max(step.duration for step in steps) < 2 * TOWER
    once, report = _queued(capacity=10, held=10, runner=False, simulated=False)
    assert once.resources["fifo_queue"].initial == 10
    assert report["input_queues"] == {"fifo_queue": {"takes": 2, "simulated": True}}


def test_a_slow_queue_runner_sets_the_pace_of_the_steps():
    """Each step takes two batches; one thread makes one in MAKE: once the two held at the
    start are gone, a step takes 2 * MAKE on average, not the towers' TOWER."""
    graph, _ = _queued()
    steps = [s for s in simulate_graph(graph, 12).trace.steps if s.client == "main"]
    assert steps[0].duration < 2 * TOWER  # the two held at the start: no wait
    later = [step.duration for step in steps[4:]]
    assert 1.9 * MAKE < sum(later) / len(later) < 2.1 * MAKE
    # two threads make them side by side: about twice as fast
    two, _ = _queued(threads=2)
    runs = simulate_graph(two, 12).trace.steps
    faster = [step.duration for step in runs if step.client == "main"][4:]
    assert 0.9 * MAKE < sum(faster) / len(faster) < 1.2 * MAKE


def test_a_full_queue_makes_its_runner_wait():
    """A runner faster than the steps fills the queue and waits: the queue never holds more
    than its capacity, and the runner puts no more than the steps take, and the capacity."""
    graph, _ = _queued(capacity=3, held=0, threads=2)
    fast = dataclasses.replace(graph.op("make"), cost=Cost(1e-5))
    graph.replace_op(fast)
    trace = simulate_graph(graph, 10).trace
    lengths = _lengths(trace)
    assert max(lengths) == 3 and min(lengths) >= 0
    puts = sum(e.amount for e in trace.resources if e.action == "enqueue")
    takes = sum(e.amount for e in trace.resources if e.action == "dequeue_elements")
    assert takes == 20 and puts <= takes + 3


def test_a_queue_nothing_fills_runs_dry_and_says_why():
    """Three batches held, none made during training: the second step waits for ever."""
    graph, _ = _queued(capacity=10, held=3, runner=False)
    assert not [c for c in graph.clients if c.daemon]
    with pytest.raises(SimulationError) as error:
        simulate_graph(graph, 2)
    said = str(error.value)
    assert "main waits in tower_1/fifo_queue_Dequeue for an element from fifo_queue" in said
    assert "(0 of 10 elements)" in said
    assert "nothing fills 'fifo_queue' while the program trains: it held 3" in said


def test_more_towers_take_from_the_same_queue():
    graph, _ = _queued(threads=2)
    four, _ = with_towers(graph, 4)
    dequeues = [op for op in four.ops() if op.kind == "dequeue_elements"]
    assert len(dequeues) == 4 and {op.resource for op in dequeues} == {"fifo_queue"}
    assert [c.name for c in four.clients if c.daemon] == [
        "fifo_queue_runner_0",
        "fifo_queue_runner_1",
    ]
    takes = [e for e in simulate_graph(four, 3).trace.resources if e.action == "dequeue_elements"]
    assert len(takes) == 12


def test_a_queue_holds_no_more_than_its_capacity():
    with pytest.raises(Exception, match="initial 3: must be at most its capacity 2"):
        Resource("q", "queue", "/cpu:0", initial=3, capacity=2)


def test_the_fit_is_of_the_loop_not_of_its_queue_runners():
    """The profile timed the loop's steps with the queue runner's threads beside it: the fit
    holds the loop's median step to that wall, and gives the runners no work of the loop's
    runs."""
    from simsync.simulation.fit import fit_costs

    graph, _ = _queued(capacity=4, held=4, threads=2)
    graph.replace_op(dataclasses.replace(graph.op("make"), cost=Cost(1e-4)))
    wall = 0.003
    fitted, found = fit_costs(graph, {"main": wall})
    assert "why" not in found and found["per_run"] > 0
    assert abs(found["simulated"] - wall) < 1e-6
    assert {c.name: c.run_work for c in fitted.clients} == {
        "main": found["per_run"],
        "fifo_queue_runner_0": 0.0,
        "fifo_queue_runner_1": 0.0,
    }


def test_an_enqueue_of_nothing_gives_its_room_back():
    from simsync.ir.resources import TokenQueue

    queue = TokenQueue(capacity=2, item="element")
    for _ in range(3):
        assert queue.do_room(0)
        queue.do_put(0, 0, None)
    assert queue.do_room(2) and not queue.do_room(1)


def test_a_dropped_simulation_with_runners_waiting_for_room_frees_its_trace():
    """The runners end blocked on a full queue: nothing of theirs may keep the trace alive
    once the simulation is dropped (the engine runs with the cyclic collector paused)."""
    import weakref

    from helpers import collector_paused

    graph, _ = _queued(capacity=2, held=2, threads=2)
    graph.replace_op(dataclasses.replace(graph.op("make"), cost=Cost(1e-6)))
    with collector_paused():
        sim = simulate_graph(graph, 5)
        assert max(_lengths(sim.trace)) >= 2  # the queue filled: the runners ended waiting
        trace = weakref.ref(sim.trace)
        del sim
        assert trace() is None


def test_a_runner_of_a_group_of_enqueues_is_read():
    """QueueRunner(queue, [tf.group(enqueue_a, enqueue_b)]): its thread loops over the
    group, an op with no input of its own; read either way, never a traceback."""
    cpu = "/device:CPU:0"
    ops = [
        _op("w", "VarHandleOp", device=cpu),
        _op("fifo_queue", "FIFOQueueV2", device=cpu, capacity=4),
        _op("make", "RandomStandardNormal", device=cpu),
        _op("enqueue_a", "QueueEnqueueV2", ["fifo_queue", "make"], cpu, elements=1),
        _op("enqueue_b", "QueueEnqueueV2", ["fifo_queue", "make"], cpu, elements=1),
        {**_op("both", "NoOp", device=cpu), "control": ["enqueue_a", "enqueue_b"]},
        _op("tower_0/deq", "QueueDequeueV2", ["fifo_queue"], "/device:GPU:0", elements=1),
        _op("tower_0/grad", "MatMul", ["w", "tower_0/deq"], "/device:GPU:0"),
        _op("apply", "ResourceApplyGradientDescent", ["w", "tower_0/grad"], cpu),
    ]
    data = {
        "program": "group.py", "order": [op["name"] for op in ops], "ops": ops,
        "clients": [{"thread": "MainThread", "name": "main", "fetches": ["apply"]}],
        "trainable": ["w"], "queue_sizes": {"fifo_queue": 4},
        "queue_runners": [{"queue": "fifo_queue", "threads": 1, "enqueue": ["both"],
                           "enqueue_ops": ["both"]}],
    }  # fmt: skip
    graph, report = convert(data, None)
    assert not graph.resources and graph.op("tower_0/deq").kind == "generic"
    assert report["input_queues"] == {"fifo_queue": {"takes": 1, "simulated": False}}
    graph, _ = convert(data, None, queue_runners=True)
    assert [(c.name, c.fetches) for c in graph.clients if c.daemon] == [
        ("fifo_queue_runner_0", ("both",))
    ]
    assert graph.op("enqueue_a").kind == graph.op("enqueue_b").kind == "enqueue_elements"
    takes = [e for e in simulate_graph(graph, 6).trace.resources if e.action == "dequeue_elements"]
    assert len(takes) == 6
