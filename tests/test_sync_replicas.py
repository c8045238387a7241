"""SyncReplicasOptimizer in the simulator: the token protocol, checked against an independent
Monte Carlo of it, TensorFlow's own start-up behaviour, and deadlocks explained."""

from __future__ import annotations

import dataclasses
import heapq
import random
from collections import deque
from typing import Any

import numpy as np
import pytest
from helpers import watchdog

from simsync.engine import Engine
from simsync.errors import SimulationError
from simsync.ir import Client, Cost, Op
from simsync.patterns import build
from simsync.scenario import ClusterConfig, ComputeConfig, ModelConfig, Scenario, TrainingConfig
from simsync.simulation import simulate, summary


def replicas(
    workers: int, steps: int, *, distribution: str = "exponential", mean: float = 1.0, **training
) -> Scenario:
    return Scenario(
        "sync-replicas",
        cluster=ClusterConfig(workers),
        compute=ComputeConfig(distribution, mean),
        model=ModelConfig(kind="softmax", features=4, classes=3, batch_size=8),
        training=TrainingConfig(mode="sync_replicas", **training),
    ).with_run(steps=steps, seed=7)


def monte_carlo_step_time(workers: int, required: int, steps: int, seed: int) -> float:
    """The protocol written from TensorFlow's description, independently of simsync: each
    worker computes for Exp(1), pushes with its local step (dropped if below the accumulator's
    step), then dequeues a token (waiting in line if there is none); as soon as R fresh
    gradients are in, the chief takes them, applies, and enqueues max(N, R) tokens of the new
    global step. Coordination costs nothing. Returns the mean time between applies."""
    rng = random.Random(seed)
    tokens: deque[int] = deque([0] * required)
    waiting: deque[int] = deque()
    local = [0] * workers
    accumulator_step = accepted = global_step = 0
    pushes: list[tuple[float, int]] = [(rng.expovariate(1.0), w) for w in range(workers)]
    heapq.heapify(pushes)
    applies = [0.0]

    def start(worker: int, now: float) -> None:
        local[worker] = tokens.popleft()
        heapq.heappush(pushes, (now + rng.expovariate(1.0), worker))

    while global_step < steps:
        now, worker = heapq.heappop(pushes)
        if local[worker] >= accumulator_step:
            accepted += 1
        waiting.append(worker)  # its dequeue comes right after its push
        while waiting and tokens:
            start(waiting.popleft(), now)
        if accepted >= required:
            accepted, accumulator_step, global_step = 0, accumulator_step + 1, global_step + 1
            applies.append(now)
            tokens.extend([global_step] * max(workers, required))
            while waiting and tokens:
                start(waiting.popleft(), now)
    return float(np.mean(np.diff(applies)))


def harmonic(n: int) -> float:
    return sum(1 / k for k in range(1, n + 1))


@pytest.mark.parametrize(("workers", "required"), [(3, 2), (4, 3), (4, 4), (8, 6)])
def test_mean_step_time_follows_the_token_protocol(workers: int, required: int) -> None:
    sim = simulate(replicas(workers, 6000, replicas_to_aggregate=required), numerics=False)
    simulated = summary(sim)["step_time"]["mean"]
    expected = monte_carlo_step_time(workers, required, 200_000, seed=1)
    assert simulated == pytest.approx(expected, rel=0.03)
    closed_form = harmonic(workers) - harmonic(workers - required)  # K-of-N, stragglers cancelled
    if required == workers:
        assert simulated == pytest.approx(closed_form, rel=0.03)
    else:  # a fast worker can fill two of the R slots: not "the straggler is cancelled"
        assert simulated > 1.05 * closed_form


@pytest.mark.parametrize(("workers", "required"), [(3, 2), (4, 4), (8, 6)])
def test_one_apply_per_step_and_n_minus_r_gradients_dropped(workers: int, required: int) -> None:
    sim = simulate(replicas(workers, 3000, replicas_to_aggregate=required), numerics=False)
    applies = [u for u in sim.trace.updates if u.op == "sync_replicas/apply_gradients"]
    assert [u.before for u in applies] == list(range(3000))  # one apply per global step
    for variable in sim.graph.variables:  # and every variable updated once per step
        if sim.graph.variables[variable].trainable:
            updates = [u for u in sim.trace.updates if u.op == f"sync_replicas/update/{variable}"]
            assert [u.before for u in updates] == list(range(3000))
    assert {u.client for u in sim.trace.updates} == {"queue_runner"}
    gradients = summary(sim)["gradients"]
    assert gradients["pushed"] == gradients["accepted"] + gradients["dropped"]
    assert gradients["accepted"] == 3000 * required  # R per step, exactly
    assert gradients["dropped_per_step"] == pytest.approx(workers - required, abs=0.05)


def test_samples_applied_per_second_leave_the_dropped_gradients_out() -> None:
    """A learner read lesson 6's throughput, which counts the batch of the backup worker's
    dropped gradient: it trains nothing. With R of N gradients per step, R batches a step are
    applied (R x steps of them), N computed per step."""
    result = summary(simulate(replicas(4, 400, replicas_to_aggregate=3), numerics=False))
    computed, applied = result["throughput"], result["applied_throughput"]
    assert computed is not None and applied is not None
    assert applied / computed == pytest.approx(3 * 400 / result["gradients"]["pushed"])
    assert applied / computed == pytest.approx(3 / 4, abs=0.02)
    towers = Scenario("towers", cluster=ClusterConfig(2), compute=ComputeConfig(mean=0.01))
    every = summary(simulate(towers.with_run(steps=20)))  # one step, every tower's batch
    assert every["applied_throughput"] == every["throughput"] is not None


def test_the_start_up_round_drops_each_workers_second_gradient() -> None:
    # TF's test2Workers: the initial tokens carry global step 0, so the second push of every
    # worker (local step 0, accumulator already at step 1) is dropped
    sim = simulate(replicas(2, 4, distribution="constant", mean=0.01), numerics=False)
    pushes = [e for e in sim.trace.resources if e.action == "push"]
    by_run = {(e.client, e.step): e.accepted for e in pushes}
    for worker in ("worker_0", "worker_1"):
        assert [by_run[worker, step] for step in range(3)] == [True, False, True]
        tags = [e.value for e in pushes if e.client == worker and e.resource == pushes[0].resource]
        assert tags[:3] == [0, 0, 1]  # the local steps pushed with


def test_the_values_follow_the_ledger_step_by_step() -> None:
    # an oracle written from the protocol, apart from simsync's replay: walk one accumulator's
    # events; each take averages the gradients accepted since the last one, each computed on
    # its worker's batch at the version its run read; one SGD step per take
    from simsync.numerics import backward, forward, init_params, make_batch

    scenario = replicas(3, 40, replicas_to_aggregate=2, mean=0.01)
    sim = simulate(scenario)
    spec, seed = scenario.model, scenario.run.seed
    read = {
        (r.client, r.step): r.versions[0]
        for r in sim.trace.reads
        if r.op.endswith("read_variables")
    }
    versions = [init_params(spec, seed)]
    pending: list[tuple[str, int]] = []
    first = next(e.resource for e in sim.trace.resources if e.action == "take")
    dropped = 0
    for event in (e for e in sim.trace.resources if e.resource == first):
        if event.action == "push" and event.accepted:
            pending.append((event.client, event.step))
        elif event.action == "push":
            dropped += 1
        elif event.action == "take":
            grads = []
            for client, step in pending:
                params = versions[read[client, step]]
                batch = make_batch(spec, seed, (int(client.split("_")[1]), step, 0))
                grads.append(backward(spec, params, batch, forward(spec, params, batch)[1]))
            current = versions[-1]
            versions.append({n: current[n] - spec.learning_rate * np.mean([g[n] for g in grads],
                                                                         axis=0)
                             for n in current})  # fmt: skip
            pending = []
    assert len(versions) == 41 and dropped > 0  # the run dropped gradients on the way
    for name, value in sim.trace.params.items():
        np.testing.assert_allclose(value, versions[-1][name], rtol=1e-12, atol=1e-15)
    losses = [s.loss for s in sim.trace.steps if s.client.startswith("worker_")]
    assert np.mean(losses[-10:]) < np.mean(losses[:10])


def test_each_applied_gradient_is_the_mean_of_the_accepted_pushes() -> None:
    # one step by hand: with R = N = 2 and constant compute both first pushes are accepted,
    # and the first apply moves the variables by the mean of the two workers' gradients
    from simsync.numerics import backward, forward, init_params, make_batch

    scenario = replicas(2, 1, distribution="constant", mean=0.01)
    sim = simulate(scenario)
    spec, seed = scenario.model, scenario.run.seed
    params = init_params(spec, seed)
    grads = []
    for worker in (0, 1):
        batch = make_batch(spec, seed, (worker, 0, 0))  # a worker's run: one batch
        grads.append(backward(spec, params, batch, forward(spec, params, batch)[1]))
    for name, value in sim.trace.params.items():
        expected = params[name] - spec.learning_rate * (grads[0][name] + grads[1][name]) / 2
        np.testing.assert_allclose(value, expected, rtol=1e-12, atol=1e-15)


def test_too_few_initial_tokens_with_more_replicas_than_workers_is_explained() -> None:
    with pytest.raises(SimulationError) as error:
        simulate(replicas(3, 10, replicas_to_aggregate=5, init_tokens=1), numerics=False)
    message = str(error.value)
    assert message.startswith("deadlock, nothing can move:")
    assert "queue_runner waits in sync_replicas/take_gradients/" in message
    assert "for 5 gradient(s)" in message
    assert "worker_0 waits in worker_0/dequeue_token for a token from sync_token_q (empty)" in (
        message
    )
    assert "init_tokens must be at least 2 (it is 1)" in message


def test_enough_initial_tokens_with_more_replicas_than_workers_runs() -> None:
    sim = simulate(replicas(3, 10, replicas_to_aggregate=5, init_tokens=2), numerics=False)
    assert summary(sim)["updates_applied"] == 10


def test_no_chief_queue_runner_is_explained() -> None:
    with pytest.raises(SimulationError) as error:
        simulate(replicas(2, 5, chief_queue_runner=False), numerics=False)
    message = str(error.value)
    assert "waits in worker_0/dequeue_token for a token from sync_token_q (empty)" in message
    assert "no client runs an op that puts into sync_token_q" in message


def test_a_resource_no_one_fills_is_explained_though_a_daemon_loops_beside_it() -> None:
    """Workers waiting for tokens no client puts, beside a thread whose runs take time and
    loop until the others are done: the simulation used to run for ever."""
    graph = build(replicas(2, 5, chief_queue_runner=False))
    graph.add_op(Op("runner/work", "generic", next(iter(graph.devices)), Cost(0.001)))
    graph.add_client(Client("runner", ("runner/work",), daemon=True))
    with watchdog(60), pytest.raises(SimulationError) as error:
        Engine(graph, steps=5).run()
    message = str(error.value)
    assert "worker_0 waits in worker_0/dequeue_token for a token from sync_token_q" in message
    assert "no client runs an op that puts into sync_token_q" in message


def test_a_daemon_that_fills_the_resource_is_no_deadlock() -> None:
    """The chief's queue runner, a daemon, puts the tokens the workers wait for: each of its
    runs sees workers waiting on a resource a client left fills, and goes on."""
    graph = build(replicas(2, 5))
    graph.add_op(Op("runner/work", "generic", next(iter(graph.devices)), Cost(0.001)))
    graph.add_client(Client("runner", ("runner/work",), daemon=True))
    with watchdog(60):
        trace = Engine(graph, steps=5).run()
    assert len({(u.client, u.step) for u in trace.updates if u.applied}) == 5


def test_summary_reports_the_protocol() -> None:
    result = summary(simulate(replicas(3, 30, replicas_to_aggregate=2)))
    assert result["mode"] == "sync_replicas" and result["workers"] == 3
    assert result["steps"] == 30 and result["updates_applied"] == 30
    by_worker = result["gradients"]["by_worker"]
    assert set(by_worker) == {"worker_0", "worker_1", "worker_2"}
    assert sum(row["pushed"] for row in by_worker.values()) == result["gradients"]["pushed"]
    assert result["gradients"]["staleness"]["max"] == 0  # an accepted gradient is never stale


def test_the_take_of_each_accumulator_is_a_sync_point_and_waits_for_the_slow_worker() -> None:
    """The chief's take has no tensor from the workers: it waits for their pushes, through
    the accumulator, so each take is where the workers meet; the dequeue of a token, which
    the chief puts, is no meeting. R = N = 3, worker 2 at half speed (10 ms of compute
    against 20), coordination free; worked out by hand:

    - step 0: workers 0 and 1 push at 10 ms, worker 2 at 20: the take waits 10 ms for it;
    - step 1 (start-up): at 10 ms workers 0 and 1 took two of the R initial tokens (value 0),
      so their pushes at 20 ms are stale; worker 2 took the third, so its push at 40 ms is
      stale too. The take of step 1 averages worker 1's push at 30 and worker 0's at 30 and
      40 (it got the third token of step 1 before worker 2 asked): worker 0 came last, and
      worker 1 waited 10 ms;
    - steps 2 to 11: workers 0 and 1 push at 10 ms into the step, worker 2 at 20: 10 ms each.
    """
    from simsync.kinds import sync_points
    from simsync.scenario import LinkConfig

    scenario = Scenario(
        "slow-replica",
        cluster=ClusterConfig(3, (1.0, 1.0, 0.5), link=LinkConfig(float("inf"), 0.0)),
        compute=ComputeConfig("constant", 0.01),
        model=ModelConfig(kind="softmax", features=4, classes=3, batch_size=8),
        training=TrainingConfig(mode="sync_replicas"),
    ).with_run(steps=12, seed=7)
    sim = simulate(scenario, numerics=False)
    takes = [
        "sync_replicas/take_gradients/layer_0/kernel",
        "sync_replicas/take_gradients/layer_0/bias",
    ]
    assert sync_points(sim.graph) == takes
    result = summary(sim)
    assert result["sync_points"] == takes
    for take in takes:
        assert result["waited_for"][take] == {"worker_0": 1, "worker_1": 0, "worker_2": 11}
        waits = result["wait"][take]
        assert waits["worker_0"] == pytest.approx(0.01 * 11 / 12, rel=1e-9)
        assert waits["worker_1"] == pytest.approx(0.01, rel=1e-9)
        assert waits["worker_2"] == 0.0
        assert result["expected_last"][take] == "worker_2"  # its own work is twice theirs


def test_a_take_of_one_is_no_meeting_and_a_take_of_r_of_n_expects_no_straggler() -> None:
    """R = 1: one push is enough, nobody meets at the take. R = 2 of 4 with worker 3 at
    half speed: the take goes on without the slowest, so the graph expects nobody last."""
    from simsync.kinds import sync_points
    from simsync.patterns import build

    def graph(required: int, speeds: tuple[float, ...]) -> Any:
        return build(
            Scenario(
                "takes",
                cluster=ClusterConfig(len(speeds), speeds),
                training=TrainingConfig(mode="sync_replicas", replicas_to_aggregate=required),
            )
        )

    assert sync_points(graph(1, (1.0, 1.0, 0.5))) == []
    two_of_four = graph(2, (1.0, 1.0, 1.0, 0.5))
    takes = sync_points(two_of_four)
    assert len(takes) == 2
    from simsync.kinds import resource_feeds
    from simsync.trace import expected_last

    feeds = resource_feeds(two_of_four)
    assert [expected_last(two_of_four, t, feeds) for t in takes] == ["", ""]
    all_four = graph(4, (1.0, 1.0, 1.0, 0.5))
    feeds = resource_feeds(all_four)
    assert {expected_last(all_four, t, feeds) for t in sync_points(all_four)} == {"worker_3"}


def test_with_host_cores_every_task_is_a_process_of_one_machine() -> None:
    """A cluster on loopback: the parameter server and the workers share the machine's cores
    (busy ones slowing each other); without host_cores each task has a host of its own."""
    from simsync.patterns import build

    apart = build(replicas(3, 5))
    assert len({d.host for d in apart.devices.values()}) == 4 and not apart.host_cores
    shared = replicas(3, 5)
    shared = dataclasses.replace(
        shared, cluster=dataclasses.replace(shared.cluster, host_cores=2, core_efficiency=0.5)
    )
    graph = build(shared)
    (host,) = {d.host for d in graph.devices.values()}
    assert graph.host_cores == {host: 2} and graph.core_efficiency == {host: 0.5}

    # three workers' compute on two cores: a step takes longer than with a host each
    def mean_step(scenario: Scenario) -> float:
        steps = simulate(scenario, numerics=False).trace.steps
        return sum(s.duration for s in steps) / len(steps)

    assert mean_step(shared) > mean_step(replicas(3, 5))


def test_the_queue_runner_has_its_own_overhead_else_the_workers() -> None:
    from simsync.patterns import build

    base = replicas(3, 5)
    own = dataclasses.replace(base, costs={"session_run": 0.002, "queue_runner_run": 0.007})
    same = dataclasses.replace(base, costs={"session_run": 0.002})
    overheads = {c.name: c.overhead for c in build(own).clients}
    assert overheads.pop("queue_runner") == 0.007 and set(overheads.values()) == {0.002}
    assert {c.overhead for c in build(same).clients} == {0.002}
