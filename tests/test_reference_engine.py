"""The reference executor (one SimPy process per op, no pools, no fast paths) beside the fast
engine: on every bundled scenario, its hosts' cores not shared, the two traces are equal
record for record (exactly, not within a tolerance); on small graphs built here, both give
the times worked out by hand; on random graphs, they agree too."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from simsync.engine import Engine
from simsync.engine.reference import ReferenceEngine
from simsync.errors import GraphError, SimulationError
from simsync.ir import Client, Cost, Device, Graph, Link, Op, Resource, Tensor, Variable
from simsync.patterns import build
from simsync.scenario import load_scenario
from simsync.trace import Read, StepRecord, Trace, TransferRecord, Update
from simsync.tutor.content import load_lessons
from simsync.tutor.progress import Progress
from simsync.tutor.runner import LessonRunner

ROOT = Path(__file__).resolve().parent.parent
#: Every bundled scenario: the examples, the lessons' and the assignments' (as test_results).
SCENARIOS = sorted(
    path
    for pattern in ("examples/*.toml", "lessons/*/*.toml", "assignments/*/scenario.toml")
    for path in ROOT.glob(pattern)
    if path.name != "lesson.toml"
)
#: Everything a trace records but the events SimPy processed (the engines make different
#: events: callbacks against processes; the reference counts none).
RECORDS = ("source", "ops", "transfers", "accesses", "reads", "steps", "updates", "resources")


def run(engine: Engine | ReferenceEngine) -> tuple[Trace, str | None]:
    """The trace of a run, and the error that stopped it (then the trace until then)."""
    try:
        return engine.run(), None
    except SimulationError as error:
        return engine.trace, str(error)


def both(graph: Graph, steps: int = 1, seed: int = 0) -> Trace:
    """Run ``graph`` on both engines; their traces must be equal, record for record."""
    fast, fast_error = run(Engine(graph, steps=steps, seed=seed))
    reference, reference_error = run(ReferenceEngine(graph, steps=steps, seed=seed))
    assert (fast_error is None) == (reference_error is None), (fast_error, reference_error)
    for name in RECORDS:
        assert getattr(reference, name) == getattr(fast, name), name
    return reference


def unshared(path: Path, steps: int) -> Graph:
    """The scenario's graph with no host's cores shared: every device a core of its own (no
    ``host_cores``) and a GPU of its own (no ``gpus``, whose virtual GPUs share one)."""
    scenario = load_scenario(path)
    cluster = dataclasses.replace(scenario.cluster, host_cores=None, gpus=None)
    scenario = dataclasses.replace(scenario, cluster=cluster)
    graph = build(scenario.with_run(steps=min(steps, scenario.run.steps)))
    assert graph.host_cores == {} and graph.core_efficiency == {}
    return graph


# ## every bundled scenario, trace for trace -------------------------------------------------
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_reference_gives_the_fast_engine_s_trace_on_every_bundled_scenario(path) -> None:
    scenario = load_scenario(path)
    steps, seed = min(scenario.run.steps, 30), scenario.run.seed
    graph = unshared(path, steps)
    fast, fast_error = run(Engine(graph, steps=steps, seed=seed))
    reference, reference_error = run(ReferenceEngine(graph, steps=steps, seed=seed))
    if fast_error is not None:  # a lesson's deadlock by design: both stop where it happens
        assert reference_error is not None and "deadlock" in fast_error
        assert "deadlock" in reference_error
    assert reference_error is None or fast_error is not None, reference_error
    assert fast.ops and fast.steps  # something ran
    for name in RECORDS:
        assert getattr(reference, name) == getattr(fast, name), name


def test_the_comparison_sees_a_different_run() -> None:
    """Equal traces are no accident of the comparison: with another seed (other compute
    times), the reference's trace is another."""
    graph = unshared(ROOT / "examples" / "random_stragglers.toml", 5)
    fast = Engine(graph, steps=5, seed=1).run()
    assert ReferenceEngine(graph, steps=5, seed=1).run().ops == fast.ops
    assert ReferenceEngine(graph, steps=5, seed=2).run().ops != fast.ops


def test_a_graph_whose_hosts_share_cores_is_refused() -> None:
    graph = build(
        load_scenario(ROOT / "lessons" / "01-building-is-not-running" / "two_towers.toml")
    )
    graph.host_cores["localhost"] = 2
    with pytest.raises(SimulationError, match="localhost"):
        ReferenceEngine(graph, steps=1)


# ## small graphs, times worked out by hand ---------------------------------------------------
def times(trace: Trace) -> dict[tuple[str, int], tuple[float, float, float]]:
    """(ready, start, end) of every op execution, by (op, step)."""
    return {(r.op, r.step): (r.ready, r.start, r.end) for r in trace.ops}


def devices(graph: Graph, *specs: tuple[str, float] | tuple[str, float, bool]) -> None:
    for name, speed, *concurrent in specs:
        kind = "cpu" if "cpu" in name else "gpu"
        graph.add_device(Device(name, kind, speed, concurrent=bool(concurrent and concurrent[0])))


def test_ops_on_one_device_take_turns_and_devices_run_side_by_side() -> None:
    """``a`` (1 s) and ``b`` (0.5 s) share /gpu:0, so ``b`` waits for ``a``; ``c`` (1 s of
    work) runs beside them on /gpu:1, at half speed: 2 s. ``join`` (0.25 s) waits for all
    three: each step takes 2 + 0.25 = 2.25 s, and the next starts when it ends."""
    graph = Graph()
    devices(graph, ("/cpu:0", 1.0), ("/gpu:0", 1.0), ("/gpu:1", 0.5))
    for name, device, seconds in (("a", "/gpu:0", 1.0), ("b", "/gpu:0", 0.5),
                                  ("c", "/gpu:1", 1.0), ("join", "/cpu:0", 0.25)):  # fmt: skip
        graph.add_op(Op(name, "generic", device, Cost(seconds)))
    for name in ("a", "b", "c"):
        graph.connect(name, "join")
    graph.add_client(Client("main", ("join",)))
    trace = both(graph, steps=2)
    assert times(trace) == {
        ("a", 0): (0, 0, 1.0), ("b", 0): (0, 1.0, 1.5), ("c", 0): (0, 0, 2.0),
        ("join", 0): (2.0, 2.0, 2.25),
        ("a", 1): (2.25, 2.25, 3.25), ("b", 1): (2.25, 3.25, 3.75), ("c", 1): (2.25, 2.25, 4.25),
        ("join", 1): (4.25, 4.25, 4.5),
    }  # fmt: skip
    assert trace.steps == [StepRecord("main", 0, 0, 2.25), StepRecord("main", 1, 2.25, 4.5)]


def test_tensors_to_another_device_queue_at_the_sender_s_port() -> None:
    """Two tensors of 500 bytes leave ``src`` (0.5 s on /gpu:0) over a link of 1,000 bytes/s
    and 0.25 s of latency: the first holds the ports from 0.5 to 1 s and arrives at 1.25 s;
    the second waits for /gpu:0's out-port, holds it from 1 to 1.5 s, arrives at 1.75 s."""
    graph = Graph(link=Link(bytes_per_second=1000, latency=0.25))
    devices(graph, ("/gpu:0", 1.0), ("/gpu:1", 1.0))
    graph.add_op(Op("src", "generic", "/gpu:0", Cost(0.5)))
    for name in ("first", "second"):
        graph.add_op(Op(name, "generic", "/gpu:1", Cost(0.5)))
        graph.add_tensor(Tensor("src", name, nbytes=500))
    graph.add_client(Client("main", ("first", "second")))
    trace = both(graph)
    assert [(t.dst, t.start, t.end, t.arrival) for t in trace.transfers] == [
        ("first", 0.5, 1.0, 1.25),
        ("second", 1.0, 1.5, 1.75),
    ]
    assert trace.transfers[0] == TransferRecord(
        "src", "first", "/gpu:0", "/gpu:1", 500, "main", 0, 0.5, 1.0, 1.25
    )
    assert times(trace)[("first", 0)] == (1.25, 1.25, 1.75)
    assert times(trace)[("second", 0)] == (1.75, 1.75, 2.25)


def test_a_collective_takes_every_participant_and_adds_its_ring() -> None:
    """An all-reduce over /gpu:0 and /gpu:1 (half speed) starts when both are free (1 s, after
    ``y``), computes 0.5 s of work at the slowest speed (1 s), then its ring: 2 (n - 1) = 2
    rounds of 0.125 s latency + 500 bytes at 1,000 bytes/s: 1.25 s. It ends at 3.25 s."""
    graph = Graph(link=Link(bytes_per_second=1000, latency=0.125))
    devices(graph, ("/gpu:0", 1.0), ("/gpu:1", 0.5))
    graph.add_op(Op("x", "generic", "/gpu:0", Cost(0.25)))
    graph.add_op(Op("y", "generic", "/gpu:1", Cost(0.5)))
    participants = ("/gpu:0", "/gpu:1")
    graph.add_op(Op("reduce", "allreduce", "/gpu:0", Cost(0.5), participants=participants,
                    nbytes=1000))  # fmt: skip
    graph.connect("x", "reduce")
    graph.connect("y", "reduce")
    graph.add_client(Client("main", ("reduce",)))
    assert times(both(graph))[("reduce", 0)] == (1.0, 1.0, 3.25)


def test_a_lock_makes_ops_of_a_concurrent_device_take_turns() -> None:
    """/cpu:0 runs many ops at once: two clients' 0.5 s ops overlap, unless both hold the
    lock ``parameters``; then the second waits for the first."""
    for locks, second in (((), (0, 0, 0.5)), (("parameters",), (0, 0.5, 1.0))):
        graph = Graph()
        devices(graph, ("/cpu:0", 1.0, True))
        for client in ("one", "two"):
            graph.add_op(Op(f"{client}/apply", "generic", "/cpu:0", Cost(0.5), locks=locks))
            graph.add_client(Client(client, (f"{client}/apply",)))
        trace = both(graph)
        assert times(trace) == {("one/apply", 0): (0, 0, 0.5), ("two/apply", 0): second}


def test_a_ready_op_starts_at_once_on_the_thread_that_made_it_ready() -> None:
    """``first`` (no time, on a concurrent device) and ``second`` start the run, in that
    order; ``first`` makes ``after_first`` ready at once, before ``second`` asks for the lock
    they both need: ``after_first`` holds it from 0 to 1 s, and ``second`` from 1 to 2 s."""
    graph = Graph()
    devices(graph, ("/cpu:0", 1.0, True))
    graph.add_op(Op("first", "generic", "/cpu:0"))
    for name in ("second", "after_first"):
        graph.add_op(Op(name, "generic", "/cpu:0", Cost(1.0), locks=("parameters",)))
    graph.connect("first", "after_first")
    graph.add_client(Client("main", ("after_first", "second")))
    assert times(both(graph)) == {
        ("first", 0): (0, 0, 0), ("after_first", 0): (0, 0, 1.0), ("second", 0): (0, 1.0, 2.0)
    }  # fmt: skip


def asynchronous(max_staleness: int | None) -> Graph:
    """Two workers read ``w``, compute (1 s and 1.5 s) and apply to it, two runs each."""
    graph = Graph()
    devices(graph, ("/cpu:0", 1.0, True), ("/gpu:0", 1.0), ("/gpu:1", 1.0))
    graph.add_variable(Variable("w", "/cpu:0"))
    for worker, device, seconds in (("a", "/gpu:0", 1.0), ("b", "/gpu:1", 1.5)):
        graph.add_op(Op(f"{worker}/read", "read", "/cpu:0", reads=("w",)))
        graph.add_op(Op(f"{worker}/work", "generic", device, Cost(seconds)))
        graph.add_op(Op(f"{worker}/apply", "apply", "/cpu:0", writes=("w",),
                        max_staleness=max_staleness if worker == "b" else None))  # fmt: skip
        graph.connect(f"{worker}/read", f"{worker}/work", f"{worker}/apply")
        graph.add_client(Client(worker, (f"{worker}/apply",), steps=2))
    return graph


def test_stale_updates_are_read_off_the_versions_and_dropped_when_too_stale() -> None:
    """``a`` applies at 1 and 2 s, ``b`` at 1.5 and 3 s. ``b``'s first run read version 0,
    and ``a``'s update landed before its own: staleness 1; its second read version 1 (at
    1.5 s) and lands on version 2. With ``max_staleness = 0`` both of ``b``'s are dropped."""
    trace = both(asynchronous(None), steps=2)
    assert trace.reads == [Read("a", 0, "a/read", (0,)), Read("b", 0, "b/read", (0,)),
                           Read("a", 1, "a/read", (1,)), Read("b", 1, "b/read", (2,))]  # fmt: skip
    assert trace.updates == [
        Update("a", 0, "a/apply", 0, 0, True, 1.0), Update("b", 0, "b/apply", 0, 1, True, 1.5),
        Update("a", 1, "a/apply", 1, 2, True, 2.0), Update("b", 1, "b/apply", 2, 3, True, 3.0),
    ]  # fmt: skip
    dropped = both(asynchronous(0), steps=2)
    assert dropped.updates == [
        Update("a", 0, "a/apply", 0, 0, True, 1.0), Update("b", 0, "b/apply", 0, 1, False, 1.5),
        Update("a", 1, "a/apply", 1, 1, True, 2.0), Update("b", 1, "b/apply", 1, 2, False, 3.0),
    ]  # fmt: skip


def two_workers(seconds: tuple[float, float], **client: Any) -> Graph:
    graph = Graph()
    devices(graph, ("/gpu:0", 1.0), ("/gpu:1", 1.0))
    for index, worker in enumerate(("a", "b")):
        graph.add_op(Op(f"{worker}/work", "generic", f"/gpu:{index}", Cost(seconds[index])))
        graph.add_client(Client(worker, (f"{worker}/work",), **client))
    return graph


def test_a_staleness_bound_of_0_makes_rounds() -> None:
    """Bound 0: nobody starts run k before everyone finished k runs, so ``a`` (1 s a run)
    waits for ``b`` (2 s) every time: runs start at 0, 2 and 4 s."""
    trace = both(two_workers((1.0, 2.0), staleness_bound=0), steps=3)
    assert sorted((s.client, s.start, s.end) for s in trace.steps) == [
        ("a", 0, 1.0), ("a", 2.0, 3.0), ("a", 4.0, 5.0),
        ("b", 0, 2.0), ("b", 2.0, 4.0), ("b", 4.0, 6.0),
    ]  # fmt: skip


def test_a_shared_pool_of_runs_gives_the_fast_worker_more() -> None:
    """Two workers share 2 + 2 runs: ``a`` (1 s) takes runs at 0, 1 and 2 s, ``b`` (3 s) one
    at 0 s; at 3 s the pool is empty and both stop."""
    trace = both(two_workers((1.0, 3.0), shared_steps=True), steps=2)
    assert sorted((s.client, s.start, s.end) for s in trace.steps) == [
        ("a", 0, 1.0), ("a", 1.0, 2.0), ("a", 2.0, 3.0), ("b", 0, 3.0)
    ]  # fmt: skip


def test_workers_stop_at_the_global_step_and_a_daemon_when_they_are_done() -> None:
    """Workers ``until = "global_step"`` run until its version reaches the steps (3): ``a``
    (1 s a run) counts at 1 and 2 s, ``b`` (1.5 s) at 1.5 s, and its second run, begun at
    1.5 s before the end, at 3 s. A daemon ticking every 0.25 s beside a worker of 0.875 s
    stops after the tick that ends once the worker is done (at 1 s)."""
    graph = two_workers((1.0, 1.5))
    graph.add_variable(Variable("global_step", "/cpu:0", trainable=False))
    devices(graph, ("/cpu:0", 1.0, True))
    for worker in ("a", "b"):
        graph.add_op(Op(f"{worker}/count", "apply", "/cpu:0", writes=("global_step",)))
        graph.connect(f"{worker}/work", f"{worker}/count")
    graph.clients = [Client(w, (f"{w}/count",), until="global_step") for w in ("a", "b")]
    trace = both(graph, steps=3)
    assert sorted((s.client, s.start, s.end) for s in trace.steps) == [
        ("a", 0, 1.0), ("a", 1.0, 2.0), ("b", 0, 1.5), ("b", 1.5, 3.0)
    ]  # fmt: skip
    daemon = two_workers((0.875, 0.25))
    daemon.clients[1] = Client("b", ("b/work",), daemon=True)
    trace = both(daemon, steps=1)
    assert [(s.client, s.start, s.end) for s in trace.steps if s.client == "b"] == [
        ("b", 0, 0.25), ("b", 0.25, 0.5), ("b", 0.5, 0.75), ("b", 0.75, 1.0)
    ]  # fmt: skip


def token_graph(chief: bool) -> Graph:
    """A worker computes 0.5 s, then dequeues a token; the chief counts a global step and
    enqueues it as a token, which takes 1 s."""
    graph = Graph()
    devices(graph, ("/cpu:0", 1.0, True), ("/gpu:0", 1.0))
    for name in ("global_step", "local_step"):
        graph.add_variable(Variable(name, "/cpu:0", trainable=False))
    graph.add_resource(Resource("tokens", "queue", "/cpu:0"))
    graph.add_op(Op("work", "generic", "/gpu:0", Cost(0.5)))
    graph.add_op(Op("take_token", "dequeue_token", "/cpu:0", resource="tokens",
                    writes=("local_step",)))  # fmt: skip
    graph.connect("work", "take_token")
    graph.add_client(Client("worker", ("take_token",), steps=2))
    if chief:
        graph.add_op(Op("count", "apply", "/cpu:0", writes=("global_step",)))
        graph.add_op(Op("give_token", "enqueue_tokens", "/cpu:0", Cost(1.0), resource="tokens",
                        amount=1, reads=("global_step",)))  # fmt: skip
        graph.connect("count", "give_token")
        graph.add_client(Client("chief", ("give_token",), steps=2))
    return graph


def test_an_op_blocked_on_a_queue_waits_holding_nothing() -> None:
    """The worker's dequeue is ready at 0.5 s and gets the chief's first token at 1 s
    (blocked 0.5 s): the token carries global step 1, the next one 2."""
    trace = both(token_graph(chief=True), steps=2)
    take = [r for r in trace.ops if r.op == "take_token"]
    assert [(r.ready, r.start, r.end, r.blocked) for r in take] == [
        (0.5, 1.0, 1.0, 0.5),
        (1.5, 2.0, 2.0, 0.5),
    ]
    assert [(e.action, e.time, e.value) for e in trace.resources] == [
        ("enqueue", 1.0, 1), ("dequeue", 1.0, 1), ("enqueue", 2.0, 2), ("dequeue", 2.0, 2)
    ]  # fmt: skip


def test_a_queue_nobody_fills_is_a_deadlock_in_both() -> None:
    graph = token_graph(chief=False)
    with pytest.raises(SimulationError, match="deadlock: worker"):
        ReferenceEngine(graph, steps=2).run()
    trace = both(graph, steps=2)  # the same until nothing could move
    assert [r.op for r in trace.ops] == ["work"]


# ## random graphs ---------------------------------------------------------------------------
KINDS = ["generic"] * 6 + ["apply"] * 3 + [
    "push_gradients", "take_gradients", "enqueue_tokens", "dequeue_token"
]  # fmt: skip
RESOURCE_OF = {"push_gradients": "acc", "take_gradients": "acc"} | dict.fromkeys(
    ("enqueue_tokens", "dequeue_token"), "queue"
)
DEVICES = ["/cpu:0", "/gpu:0", "/gpu:1"]


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    """Small random graphs: zero and equal costs (ties), concurrent devices, locks, links,
    collectives, stale updates, queues (some with a capacity) and accumulators, several
    clients with bounds or a shared pool. No daemon and no ``until``: a run always ends (the
    reference does not stop an endless client that changes nothing)."""
    graph = Graph(link=draw(st.sampled_from([Link(1e6, 0.001), Link(1e6), Link()])))
    hosts = draw(st.sampled_from([("a", "b", "c"), ("a", "a", "a")]))
    for name, host in zip(DEVICES, hosts, strict=True):
        graph.add_device(Device(name, speed=draw(st.sampled_from([1.0, 0.5])), host=host,
                                concurrent=draw(st.booleans())))  # fmt: skip
    for name in ("w", "v"):
        graph.add_variable(Variable(name, "/cpu:0"))
    for name in ("global_step", "local_step"):
        graph.add_variable(Variable(name, "/cpu:0", trainable=False))
    capacity = draw(st.sampled_from([0, 2]))
    graph.add_resource(Resource("queue", "queue", "/cpu:0", draw(st.integers(0, 2)),
                                capacity=capacity))  # fmt: skip
    graph.add_resource(Resource("acc", "accumulator", "/cpu:0"))
    names = [f"op{i}" for i in range(draw(st.integers(1, 7)))]
    for name in names:
        kind = draw(st.sampled_from(KINDS))
        writes = {"apply": ("w",), "dequeue_token": ("local_step",)}.get(kind, ())
        resource = RESOURCE_OF.get(kind)
        group = draw(st.sampled_from([None, "g0", "g1"]))
        collective = kind == "generic" and draw(st.booleans())
        graph.add_op(Op(
            name, kind, draw(st.sampled_from(DEVICES)),
            Cost(draw(st.sampled_from([0.001, 0.0])), "exponential" if group else "constant",
                 group, overhead=draw(st.sampled_from([0.0, 0.0005]))),
            reads=tuple(draw(st.lists(st.sampled_from(["w", "global_step"]), unique=True))),
            writes=writes,
            participants=tuple(DEVICES[1:]) if collective else (),
            nbytes=1000 if collective else 0,
            locks=tuple(draw(st.lists(st.sampled_from(["l1", "l2"]), unique=True))),
            max_staleness=draw(st.sampled_from([None, 0])) if writes else None,
            resource=resource, amount=draw(st.integers(1, 2)) if resource else 0,
            gradient="w" if kind == "push_gradients" else None,
        ))  # fmt: skip
    for j, name in enumerate(names):
        for i in draw(st.lists(st.integers(0, j - 1), max_size=2, unique=True)) if j else []:
            graph.add_tensor(Tensor(names[i], name, draw(st.sampled_from([500, 0])),
                                    control=draw(st.integers(0, 3)) == 3))  # fmt: skip
    bound, shared = draw(st.sampled_from([None, 0, 1])), draw(st.booleans())
    ends = tuple(name for name in names if not graph.outputs(name))
    for index in range(draw(st.integers(1, 3))):
        fetches = ends if index == 0 else (draw(st.sampled_from(names)),)
        graph.add_client(Client(f"c{index}", fetches, overhead=draw(st.sampled_from([0, 1e-3])),
                                staleness_bound=bound, shared_steps=shared))  # fmt: skip
    return graph


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
@given(graphs(), st.integers(0, 2))
def test_the_engines_agree_on_random_graphs(graph: Graph, seed: int) -> None:
    try:
        ReferenceEngine(graph, steps=3, seed=seed)
    except GraphError:  # the check refuses it, as the fast engine's
        with pytest.raises(GraphError):
            Engine(graph, steps=3, seed=seed)
        return
    both(graph, steps=3, seed=seed)


# ## where a learner and a reader meet it ------------------------------------------------------
LESSON = ROOT / "lessons" / "01-building-is-not-running"
ASIDE = LESSON / "how_simsync_works.md"
SOURCE = (ROOT / "simsync" / "engine" / "reference.py").read_text(encoding="utf-8")


def code_lines(markdown: str, language: str = "python") -> list[str]:
    """The lines of ``markdown``'s code blocks, without their comments, ``...`` left out."""
    blocks = re.findall(rf"```{language}\n(.*?)```", markdown, re.S)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and line != "..." and not line.startswith("#")]


@pytest.mark.parametrize("path", [ASIDE, ROOT / "docs" / "architecture.md"], ids=["lesson", "docs"])
def test_the_code_shown_is_the_reference_s_own(path: Path) -> None:
    shown = code_lines(path.read_text(encoding="utf-8"))
    assert len(shown) >= 8
    source = {line.split("  #")[0].strip() for line in SOURCE.splitlines()}
    assert [line for line in shown if line not in source] == []


def test_the_lesson_s_aside_renders_before_the_summary() -> None:
    lesson = next(lesson for lesson in load_lessons() if lesson.number == 1)
    kinds_and_files = [(step.kind, step.get("file")) for step in lesson.steps]
    index = kinds_and_files.index(("text", "how_simsync_works.md"))
    assert kinds_and_files[index + 1] == ("text", "summary.md")
    console = Console(record=True, width=80, force_terminal=False)
    LessonRunner(lesson, Progress.scratch(), console, no_input=True, verify=False).run(index)
    shown = console.export_text()
    assert "How simsync works" in shown and "yield place.request()" in shown
    assert "a readable model of TensorFlow's" in " ".join(shown.split()) and "{{" not in shown
