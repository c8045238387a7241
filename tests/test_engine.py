"""The engine: exact step times by hand, order-statistics theory, seeds, versions and numerics."""

from __future__ import annotations

import itertools
import math
import random
import weakref
from collections import defaultdict
from collections.abc import Generator

import numpy as np
import pytest
import simpy
from helpers import collector_paused
from hypothesis import given, settings
from hypothesis import strategies as st

from simsync.engine import Engine
from simsync.engine.resources import Cores
from simsync.errors import SimulationError
from simsync.ir import critical_path
from simsync.numerics import backward, forward, init_params, make_batch
from simsync.patterns import build_towers
from simsync.scenario import (
    ClusterConfig,
    ComputeConfig,
    LinkConfig,
    Scenario,
    TrainingConfig,
)
from simsync.simulation import simulate, summary


def scenario(
    n: int = 4,
    *,
    speeds=None,
    mean=0.01,
    distribution="constant",
    steps=5,
    seed=0,
    aggregation="parameter_server",
    link=None,
    costs=None,
    host_cores=None,
    **compute,
) -> Scenario:
    return Scenario(
        name="t",
        cluster=ClusterConfig(
            devices=n,
            speeds=tuple(speeds or (1.0,) * n),
            host_cores=host_cores,
            link=link or LinkConfig(),
        ),
        compute=ComputeConfig(distribution=distribution, mean=mean, **compute),
        costs=costs or {},
        training=TrainingConfig(aggregation=aggregation),
    ).with_run(steps=steps, seed=seed)


def step_times(s: Scenario, numerics: bool = False) -> np.ndarray:
    return np.array([r.duration for r in simulate(s, numerics=numerics).trace.steps])


def harmonic(n: int) -> float:
    return sum(1 / k for k in range(1, n + 1))


# -- constant costs: exact step times ---------------------------------------------------------
def test_straggler_sets_the_step_time() -> None:
    times = step_times(scenario(4, speeds=(1, 1, 1, 0.5)))
    assert times == pytest.approx([0.02] * 5, abs=1e-15)


def test_parameter_server_step_by_hand() -> None:
    # softmax 32x10: 330 parameters, 1320 bytes; bandwidth chosen so one transfer takes 1 ms.
    t, latency, c, a, p = 0.001, 100e-6, 0.01, 0.002, 0.003
    link = LinkConfig(bandwidth_gbps=1320 * 8 / t / 1e9, latency_us=latency * 1e6)
    s = scenario(2, link=link, costs={"aggregate": a, "apply": p}, mean=c)
    # Reads leave /cpu:0 one after the other (its out-port): arrivals at T+L and 2T+L.
    # Gradients queue at /cpu:0's in-port: the second arrives at 3T+2L+c; then aggregate, apply.
    expected = 3 * t + 2 * latency + c + a + p
    assert step_times(s) == pytest.approx([expected] * 5, rel=1e-12)


def test_allreduce_step_by_hand() -> None:
    n, c = 4, 0.01
    link = LinkConfig(bandwidth_gbps=1320 * 8 / 0.004 / 1e9, latency_us=50)  # 4 ms for it all
    s = scenario(n, link=link, aggregation="allreduce", mean=c, costs={"apply": 0.001})
    ring = 2 * (n - 1) * (50e-6 + 0.004 / n)
    assert step_times(s) == pytest.approx([c + ring + 0.001] * 5, rel=1e-12)


def test_logical_devices_share_host_cores() -> None:
    # four towers on two cores: two rounds of compute per step
    times = step_times(scenario(4, host_cores=2, mean=0.01))
    assert times == pytest.approx([0.02] * 5)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([0.25, 0.5, 1.0, 2.0]), min_size=1, max_size=6),
    st.sampled_from([0.0, 0.001]),
    st.sampled_from([0.0, 0.002]),
)
def test_constant_step_equals_slowest_tower_plus_tail(speeds, a, p) -> None:
    s = scenario(len(speeds), speeds=speeds, costs={"aggregate": a, "apply": p})
    graph = build_towers(s)
    expected = 0.01 / min(speeds) + a + p
    assert step_times(s) == pytest.approx([expected] * 5)
    assert critical_path(graph)[1] == pytest.approx(expected)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 5),
    st.sampled_from(["constant", "exponential"]),
    st.sampled_from([math.inf, 0.01]),
    st.sampled_from(["parameter_server", "allreduce"]),
    st.integers(0, 3),
)
def test_no_device_runs_two_ops_at_once(n, distribution, gbps, aggregation, seed) -> None:
    s = scenario(
        n,
        distribution=distribution,
        link=LinkConfig(gbps, 3.0),
        aggregation=aggregation,
        seed=seed,
        costs={"read": 1e-4, "apply": 1e-4},
    )
    trace = simulate(s, numerics=False).trace
    lanes = defaultdict(list)
    for record in trace.ops:
        for device in record.devices:
            lanes[device].append((record.start, record.end))
    for intervals in lanes.values():
        intervals.sort()
        for (_, end), (start, _) in itertools.pairwise(intervals):
            assert start >= end - 1e-15
    # steps never overlap either: one client runs one sess.run at a time
    for before, after in zip(trace.steps, trace.steps[1:], strict=False):
        assert after.start >= before.end
    # a step is never shorter than the critical path
    path_seconds = critical_path(build_towers(s))[1]
    if distribution == "constant":
        assert min(r.duration for r in trace.steps) >= path_seconds * (1 - 1e-12)


# -- random costs: order statistics ----------------------------------------------------------
@pytest.mark.parametrize("n", [1, 4, 8])
def test_exponential_step_is_expected_maximum(n: int) -> None:
    times = step_times(scenario(n, distribution="exponential", mean=1.0, steps=4000, seed=7))
    assert times.mean() == pytest.approx(harmonic(n), rel=0.03)


def test_shifted_exponential_expected_maximum() -> None:
    s = scenario(6, distribution="shifted_exponential", mean=1.0, shift=0.4, steps=4000, seed=3)
    assert step_times(s).mean() == pytest.approx(0.4 + 0.6 * harmonic(6), rel=0.02)


def test_heterogeneous_expected_maximum_by_integration() -> None:
    speeds = (1.0, 1.0, 0.5)
    times = step_times(
        scenario(3, speeds=speeds, distribution="exponential", mean=1.0, steps=4000, seed=11)
    )
    # E[max] = integral of 1 - prod_i F_i(t), with F_i the CDF of Exp(mean 1/speed_i)
    t = np.linspace(0, 60, 200_001)
    cdf = np.prod([1 - np.exp(-t * s) for s in speeds], axis=0)
    expected = np.trapezoid(1 - cdf, t)
    assert times.mean() == pytest.approx(expected, rel=0.03)


def test_lognormal_mean_is_the_configured_mean() -> None:
    times = step_times(scenario(1, distribution="lognormal", mean=0.01, sigma=0.5, steps=4000))
    assert times.mean() == pytest.approx(0.01, rel=0.03)


# -- seeds -----------------------------------------------------------------------------------
def without_wall(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "wall_seconds"}


def test_same_seed_same_summary_different_seed_different_draws() -> None:
    s = scenario(4, distribution="exponential", steps=30, seed=5)
    first, again = summary(simulate(s)), summary(simulate(s))
    assert without_wall(first) == without_wall(again)
    other = summary(simulate(s.with_run(seed=6)))
    assert other["step_time"] != first["step_time"]
    assert other["loss"] != first["loss"]


# -- versions and numerics -------------------------------------------------------------------
def test_sync_reads_see_the_previous_steps_write() -> None:
    trace = simulate(scenario(3, steps=4), numerics=False).trace
    for access in trace.accesses:
        if access.write:
            assert access.version == access.step + 1
        else:
            assert access.version == access.step  # staleness 0: version at apply - read - 1


def reference_sgd(s: Scenario) -> dict[str, np.ndarray]:
    """Synchronous SGD written directly: average every tower's gradient, apply once."""
    spec = s.model
    params = init_params(spec, s.run.seed)
    for step in range(s.run.steps):
        grads = []
        for tower in range(s.towers):
            batch = make_batch(spec, s.run.seed, (0, step, tower))
            _, activations = forward(spec, params, batch)
            grads.append(backward(spec, params, batch, activations))
        for name in params:
            params[name] = params[name] - spec.learning_rate * np.mean(
                [g[name] for g in grads], axis=0
            )
    return params


@pytest.mark.parametrize("aggregation", ["parameter_server", "allreduce"])
@pytest.mark.parametrize("kind", ["linear", "softmax", "mlp"])
def test_numerics_equal_plain_synchronous_sgd(aggregation: str, kind: str) -> None:
    s = scenario(3, distribution="exponential", steps=6, aggregation=aggregation)
    s = Scenario(
        **{**s.__dict__, "model": s.model.__class__(kind=kind, features=5, classes=3, hidden=(4,))}
    )
    trace = simulate(s).trace
    expected = reference_sgd(s)
    for variable, value in trace.params.items():
        name = variable.split("/", 1)[1] if variable.startswith("tower_") else variable
        np.testing.assert_allclose(value, expected[name], rtol=0, atol=1e-13)


def test_loss_goes_down() -> None:
    losses = [r.loss for r in simulate(scenario(4, steps=150)).trace.steps]
    assert np.mean(losses[-20:]) < 0.8 * np.mean(losses[:5])


def test_overheads_by_hand() -> None:
    # per step: sess.run overhead, then the straggler's 20 ms plus a fixed 1 ms on each of its
    # forward and backward ops (not slowed by its speed)
    s = scenario(2, speeds=(1.0, 0.5), overhead=0.001, costs={"session_run": 0.004})
    times = step_times(s)
    assert times == pytest.approx([0.004 + 0.02 + 2 * 0.001] * 5)
    assert critical_path(build_towers(s))[1] == pytest.approx(0.02 + 2 * 0.001)


def test_adding_towers_keeps_the_draws_of_existing_towers() -> None:
    def compute_times(n: int) -> dict[str, float]:
        trace = simulate(
            scenario(n, distribution="exponential", steps=1, seed=4), numerics=False
        ).trace
        return {r.op: r.end - r.start for r in trace.ops if r.kind == "backward"}

    few, many = compute_times(3), compute_times(12)
    assert all(many[op] == few[op] for op in few)


def test_a_diverging_loss_is_explained() -> None:
    from simsync.errors import SimulationError

    s = scenario(2, steps=60)
    s = Scenario(**{**s.__dict__, "model": s.model.__class__(kind="linear", learning_rate=1e4)})
    with pytest.raises(SimulationError, match=r"the loss diverged at step \d+ on tower_\d/loss"):
        simulate(s)


def test_events_per_step_are_constant() -> None:
    # every step of a constant scenario processes the same events: counting is per event
    counts = [Engine(build_towers(scenario(3)), steps=n).run().events for n in (1, 2, 5)]
    per_step = counts[1] - counts[0]
    assert per_step > 0 and counts[2] - counts[1] == 3 * per_step


def _cores_run(devices: int, speeds: tuple[float, ...], cores: int, efficiency: float) -> list:
    s = scenario(devices, mean=0.01, costs={"read": 1e-3, "aggregate": 2e-3, "apply": 1e-3})
    cluster = s.cluster.__class__(
        devices=devices, speeds=speeds, host_cores=cores, core_efficiency=efficiency
    )
    return simulate(Scenario(**{**s.__dict__, "cluster": cluster}), numerics=False).trace.ops


def test_an_op_alone_on_the_cores_takes_its_own_time() -> None:
    # forward 1/3 and backward 2/3 of 10 ms, on a host of two cores at efficiency 0.8
    alone = [r for r in _cores_run(1, (1.0,), 2, 0.8) if r.step == 0]
    computed = sorted(round(r.end - r.start, 9) for r in alone if r.kind in ("forward", "backward"))
    assert computed == [pytest.approx(0.01 / 3), pytest.approx(0.02 / 3)]


@pytest.mark.parametrize(
    ("devices", "cores", "efficiency"), [(2, 2, 0.8), (4, 2, 0.5), (4, 3, 0.6)]
)
def test_busy_cores_slow_every_op_running_by_the_efficiency(
    devices: int, cores: int, efficiency: float
) -> None:
    # Independently of the engine: integrate each op's rate over its run. While k ops hold a
    # core, each progresses at 1 - (k - 1) / (cores - 1) * (1 - efficiency); the integral over
    # [start, end] must be the op's own time (its work). A straggler makes the counts vary.
    speeds = (1.0,) * (devices - 1) + (0.5,)
    records = [r for r in _cores_run(devices, speeds, cores, efficiency) if r.end > r.start]
    assert max(_busy(records, (r.start + r.end) / 2) for r in records) == cores  # all shared
    work = {"forward": 0.01 / 3, "backward": 0.02 / 3, "read": 1e-3, "aggregate": 2e-3}
    work["apply"] = 1e-3
    checked = 0
    for record in records:
        expected = work[record.kind] / (0.5 if record.devices == (f"/gpu:{devices - 1}",) else 1)
        moments = sorted({record.start, record.end} | {
            t for r in records for t in (r.start, r.end) if record.start < t < record.end
        })  # fmt: skip
        done = sum(
            (b - a) * (1 - (_busy(records, (a + b) / 2) - 1) / (cores - 1) * (1 - efficiency))
            for a, b in itertools.pairwise(moments)
        )
        assert done == pytest.approx(expected, rel=1e-9, abs=1e-12), record
        checked += 1
    assert checked > 10 * devices


def _busy(records: list, t: float) -> int:
    return sum(1 for r in records if r.start < t < r.end)


def test_a_run_goes_on_on_the_core_that_finished_its_last_input() -> None:
    # TensorFlow runs the op an op makes ready on the same thread, before queued work: with
    # four workers on two shared cores, a backward starts the moment its forward ends, while
    # the ops that start a run (the reads) queue for a core.
    s = Scenario(
        "four on two",
        cluster=ClusterConfig(4, host_cores=2, core_efficiency=0.7),
        compute=ComputeConfig(distribution="exponential", mean=0.01),
        costs={"read": 2e-4, "apply": 5e-4, "session_run": 3e-4},
        training=TrainingConfig(mode="async", apply="locked"),
    ).with_run(steps=30)
    ops = simulate(s, numerics=False).trace.ops
    by_run = {(r.client, r.step, r.kind): r for r in ops}
    backwards = [r for r in ops if r.kind == "backward"]
    assert backwards and all(r.start == by_run[r.client, r.step, "forward"].end for r in backwards)
    assert sum(1 for r in ops if r.kind == "read" and r.start > r.ready) > 10  # they queued


def _event_log(
    env, plan: list[list[tuple[int, float]]], pause: float | None = None
) -> list[tuple[float, int, int]]:
    """Processes that each wait for timeouts, a succeeded event or the next process's end,
    from ``plan`` (per process: kind, delay); the order in which they resume. ``pause``: run
    until then first (SimPy's ``run(until)``, event by event through ``step``)."""
    log: list[tuple[float, int, int]] = []
    processes: list = []

    def worker(index: int, steps: list[tuple[int, float]]):
        for i, (kind, delay) in enumerate(steps):
            if kind == 0:
                yield env.timeout(delay)
            elif kind == 1:
                yield env.event().succeed(i)
            elif index + 1 < len(processes):
                yield processes[index + 1] | env.timeout(delay)
            log.append((env.now, index, i))

    for index, steps in enumerate(plan):
        processes.append(env.process(worker(index, steps)))
    if pause is not None:
        env.run(until=pause)
    env.run()
    return log


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(0, 2), st.sampled_from([0, 0, 0.5, 1.0, 1.5])),
            max_size=6,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_engine_environment_keeps_simpy_order(plan) -> None:
    """The engine's environment processes exactly SimPy's events in SimPy's order, ties at
    one time included (they decide lessons' answers)."""
    import simpy

    from simsync.engine.environment import CountingEnvironment, EngineEnvironment

    ours, counting, theirs = EngineEnvironment(), CountingEnvironment(), simpy.Environment()
    expected = _event_log(theirs, plan)
    assert _event_log(ours, plan) == _event_log(counting, plan) == expected
    assert ours.events == counting.events and ours.now == theirs.now
    paused = EngineEnvironment()
    assert _event_log(paused, plan, pause=1.0) == expected
    assert paused.events == ours.events + 1  # the event that stopped run(until)


@pytest.mark.parametrize("start", [2e4, 1e5, 1e7])
def test_shared_cores_finish_far_from_time_zero(start: float) -> None:
    # Far from time 0, a few picoseconds of work left are below the resolution of the clock:
    # the op must still end (it once rescheduled itself at the same moment for ever).
    env, ended = simpy.Environment(initial_time=start), []
    cores, rng = Cores(env, 2, 0.7), random.Random(0)

    def op(work: float, delay: float) -> Generator[simpy.Event, None, None]:
        yield env.timeout(delay)
        granted = env.event()
        cores.request(lambda e: granted.succeed(e.value))
        thread = yield granted
        done = env.event()
        cores.run(work, lambda _e: done.succeed())
        yield done
        cores.release(thread)
        ended.append(env.now)

    for _ in range(200):
        env.process(op(rng.uniform(1e-4, 1e-2), rng.uniform(0, 0.05)))
    for _ in range(100_000):  # a bounded number of events: a loop at one moment fails here
        if env.peek() == float("inf"):
            break
        env.step()
    assert len(ended) == 200


@pytest.mark.parametrize("mode", ["sync", "async", "sync_replicas"])
def test_a_dropped_simulation_frees_its_trace_without_the_collector(mode: str) -> None:
    # The engine runs with the cyclic collector paused, as its records make no cycles: nothing
    # of a finished run (a queue runner left blocked, its loop) may keep the trace alive.
    scenario = Scenario(
        "z",
        cluster=ClusterConfig(4),
        compute=ComputeConfig("exponential", 0.01),
        training=TrainingConfig(mode=mode),
    ).with_run(steps=20)
    with collector_paused():
        sim = simulate(scenario)
        trace = weakref.ref(sim.trace)
        del sim
        assert trace() is None


def _loop_graph(daemon_cost: float, until: bool = False):
    """A worker that applies once per run, and a second client: a daemon that waits for
    nothing (``daemon_cost`` a run), or a worker running until the global step (``until``)."""
    from simsync.ir import Client, Cost, Device, Graph, Op, Variable

    graph = Graph()
    graph.add_device(Device("/cpu:0", kind="cpu", concurrent=True))
    graph.add_variable(Variable("global_step", "/cpu:0", trainable=False))
    graph.add_op(Op("step", "apply", "/cpu:0", Cost(0.001), writes=("global_step",)))
    graph.add_op(Op("idle", "generic", "/cpu:0", Cost(daemon_cost)))
    graph.add_client(Client("worker", ("step",), steps=1))
    graph.add_client(Client("other", ("idle",), daemon=not until,
                            until="global_step" if until else None))  # fmt: skip
    return graph


def test_a_daemon_stops_when_the_others_are_done() -> None:
    trace = Engine(_loop_graph(0.0004), steps=3).run()
    runs = [s for s in trace.steps if s.client == "other"]
    assert len(runs) == 3 and max(s.end for s in runs) <= 0.0013  # 1 ms of work at most


@pytest.mark.parametrize(
    ("cost", "until", "why"),
    [
        (0.0, False, r"^client 'other' \(a daemon\) ran 1000 times without time passing"),
        (0.001, True, r"^client 'other' ran 1000 times while 'global_step' stayed at version 1"),
    ],
)
def test_an_endless_client_that_moves_nothing_is_an_error_not_a_hang(
    cost: float, until: bool, why: str
) -> None:
    with pytest.raises(SimulationError, match=why):
        Engine(_loop_graph(cost, until), steps=3).run()


def test_the_engine_records_when_and_the_replay_what() -> None:
    # two stages: the engine's trace has no values; the replay stage gives it exactly those a
    # simulation reports (the replay reads nothing but the trace)
    from simsync.replay import add_values

    s = Scenario(
        "a",
        cluster=ClusterConfig(3, (1.0, 0.7, 0.4)),
        compute=ComputeConfig("exponential", 0.01),
        training=TrainingConfig(mode="async"),
    ).with_run(steps=30, seed=3)
    sim = simulate(s)
    trace = Engine(sim.graph, steps=s.run.steps, seed=s.run.seed).run()
    assert trace.params == {} and all(step.loss is None for step in trace.steps)
    add_values(sim.graph, trace, s.model, s.run.seed)
    assert [step.loss for step in trace.steps] == [step.loss for step in sim.trace.steps]
    assert all(step.loss is not None for step in trace.steps)
    assert trace.params.keys() == sim.trace.params.keys()
    for name, value in trace.params.items():
        assert np.array_equal(value, sim.trace.params[name])


def _pool_log(arrivals: list[tuple[float, str, float, bool]]) -> list[tuple[str, int, float]]:
    """Ops on a pool of 2 threads: (when it asks, name, work, made ready by the op before it
    on the same thread); returns (name, thread, start) in start order."""
    env, started = simpy.Environment(), []
    cores = Cores(env, 2, 1.0, seed=0)
    threads: dict[str, int] = {}

    def op(at: float, name: str, work: float, after: str | None) -> Generator:
        yield env.timeout(at)
        granted = env.event()
        cores.request(lambda e: granted.succeed(e.value), threads.get(after or ""))
        thread = yield granted
        threads[name] = thread
        started.append((name, thread, env.now))
        done = env.event()
        cores.run(work, lambda _e: done.succeed())
        yield done
        cores.release(thread)

    for at, name, work, after in arrivals:
        env.process(op(at, name, work, after))
    env.run()
    return started


def test_the_pool_runs_what_a_thread_made_ready_on_that_thread_first() -> None:
    # a and b take both threads; c is made ready by a's thread while both are busy: it waits
    # at the front of that thread's queue and runs there next, before the op x that came from
    # outside the pool earlier (at the back of a queue), whichever thread frees first.
    started = _pool_log(
        [(0, "a", 2.0, None), (0, "b", 1.0, None), (0.5, "x", 1.0, None), (1.5, "c", 1.0, "a")]
    )
    by_name = {name: (thread, start) for name, thread, start in started}
    assert by_name["c"] == (by_name["a"][0], 2.0)
    assert by_name["x"] == (by_name["b"][0], 1.0)  # b's thread freed first: it takes x


def test_a_free_thread_steals_the_back_of_a_busy_threads_queue() -> None:
    # Both threads busy; c and d are made ready by a's thread (each goes to the front of its
    # queue: d before c). b's thread frees first, finds its own queue empty and steals the
    # back of a's: c, the older one.
    started = _pool_log(
        [(0, "a", 3.0, None), (0, "b", 1.0, None), (0.2, "c", 1.0, "a"), (0.4, "d", 1.0, "a")]
    )
    order = [(name, start) for name, _, start in started]
    assert order[2:] == [("c", 1.0), ("d", 2.0)]


def test_fewer_cores_than_towers_the_threads_order_decides_who_is_last() -> None:
    # Lesson 3's straggler on a 2-core host: towers of work 1, 1, 1 and 2 (the slow one).
    # Each tower's forward and backward pass runs on one thread to its end, two towers at a
    # time. Worked out by hand: if the slow tower starts among the first two, the other thread
    # runs two fast towers (ends 2) and the fourth starts at 2 and ends at 3, after the slow
    # one (2); if it starts third (at 1), it ends at 3 and is last. So the slow tower is last
    # exactly when it starts third or fourth, and the tower handed to the pool first, tower_0,
    # starts first and is never last.
    # The reads of the variables and the dequeues cost what they do on a CPU (tens of us):
    # the pool hands them to its threads in the random order that decides the rest.
    scenario = Scenario(
        "pool",
        cluster=ClusterConfig(4, (1.0, 1.0, 1.0, 0.5), host_cores=2, core_efficiency=1.0),
        compute=ComputeConfig("constant", 0.01),
        costs={"read": 4e-5, "dequeue": 2e-5, "session_run": 7e-4},
    ).with_run(steps=200, seed=3)
    sim = simulate(scenario, numerics=False)
    starts: dict[int, dict[str, float]] = defaultdict(dict)
    ends: dict[int, dict[str, float]] = defaultdict(dict)
    ops = {(r.step, r.op): r for r in sim.trace.ops}
    for (step, name), record in ops.items():
        tower, _, kind = name.partition("/")
        if kind == "loss":
            starts[step][tower] = record.start
            # forward and backward on one thread, one after the other
            assert ops[step, f"{tower}/gradients"].start == record.end
        elif kind == "gradients":
            ends[step][tower] = record.end
    slow_last = 0
    for step in starts:
        order = sorted(starts[step], key=starts[step].__getitem__)
        last = max(ends[step], key=ends[step].__getitem__)
        assert order[0] == "tower_0" and last != "tower_0"
        assert (last == "tower_3") == (order.index("tower_3") >= 2), (step, order, last)
        slow_last += last == "tower_3"
    # which tower the second thread starts first is the pool's random pick: both happen
    assert 0.2 * len(starts) < slow_last < 0.8 * len(starts)
