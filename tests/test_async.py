"""Asynchronous training in the simulator: the ledger, staleness theory, stale-synchronous
bounds, dropped gradients, locks, and a replay of the ledger that reproduces the parameters."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter

import numpy as np
import pytest
import simpy
from helpers import watchdog

from simsync.engine import Engine
from simsync.engine.clocks import Clocks
from simsync.errors import ScenarioError, SimsyncError, SimulationError
from simsync.ir import Client, Cost, Op
from simsync.patterns import build_async
from simsync.replay import replay, values
from simsync.scenario import (
    ClusterConfig,
    ComputeConfig,
    Scenario,
    TrainingConfig,
    scenario_from_dict,
)
from simsync.simulation import simulate, summary
from simsync.trace import (
    histogram_distance,
    staleness_by_client,
    staleness_stats,
    throughput,
    unpaired_staleness,
    variable_staleness,
)


def workers(
    n: int = 4, *, speeds=None, distribution="exponential", steps=50, seed=0, costs=None, **training
) -> Scenario:
    return Scenario(
        name="a",
        cluster=ClusterConfig(devices=n, speeds=tuple(speeds or (1.0,) * n)),
        compute=ComputeConfig(distribution=distribution, mean=0.01),
        costs=costs or {},
        training=TrainingConfig(mode="async", **training),
    ).with_run(steps=steps, seed=seed)


def test_constant_workers_in_lockstep_have_staleness_of_their_position() -> None:
    # identical constant times keep the workers in lockstep: each round all read one version,
    # then worker k's update lands k-th: staleness k, mean (N-1)/2
    trace = simulate(workers(4, distribution="constant", steps=20), numerics=False).trace
    assert {c: r["mean"] for c, r in staleness_by_client(trace).items()} == {
        "worker_0": 0.0,
        "worker_1": 1.0,
        "worker_2": 2.0,
        "worker_3": 3.0,
    }
    assert staleness_stats(trace)["mean"] == 1.5


@pytest.mark.parametrize("n", [2, 4, 8])
def test_homogeneous_random_workers_have_mean_staleness_n_minus_one(n: int) -> None:
    # between a worker's read and its apply (one whole cycle) each of the N-1 others, an
    # independent renewal process of the same mean cycle, applies once on average
    trace = simulate(workers(n, steps=4000 // n, seed=3), numerics=False).trace
    stats = staleness_stats(trace)
    assert stats["updates_applied"] == 4000
    assert stats["mean"] == pytest.approx(n - 1, rel=0.03)


def test_the_stragglers_updates_are_the_stalest() -> None:
    # 2,000 updates per worker: the straggler makes a few hundred, enough for its mean (the
    # staleness of one of its updates varies by about as much as the mean itself)
    trace = simulate(workers(4, speeds=(1, 1, 1, 0.25), steps=2000), numerics=False).trace
    rows = staleness_by_client(trace)
    # in one cycle of the straggler (4x longer) the 3 others apply about 4 times each
    assert rows["worker_3"]["mean"] == pytest.approx(12, rel=0.15)
    assert all(rows["worker_3"]["mean"] > 3 * rows[f"worker_{i}"]["mean"] for i in range(3))
    # and it makes fewer of the updates: the steps are a common pool, as a global step limit
    assert rows["worker_3"]["applied"] < rows["worker_0"]["applied"] / 2
    assert sum(r["applied"] for r in rows.values()) == 4 * 2000


def test_staleness_bound_zero_runs_synchronous_rounds() -> None:
    n, steps = 4, 1000
    trace = simulate(workers(n, steps=steps, staleness_bound=0, seed=5), numerics=False).trace
    assert Counter(s.client for s in trace.steps) == {f"worker_{i}": steps for i in range(n)}
    # every update of round k read the version all n updates of round k-1 made
    assert all(u.read == n * u.step for u in trace.updates)
    # a round lasts as long as its slowest worker: E[max of n Exp(mean)] = mean * H_n,
    # the step time of synchronous training with the same compute
    rounds = trace.makespan / steps
    harmonic = sum(1 / k for k in range(1, n + 1))
    assert rounds == pytest.approx(0.01 * harmonic, rel=0.04)
    sync = dataclasses.replace(workers(n, steps=steps, seed=5), training=TrainingConfig())
    sync_step = simulate(sync, numerics=False).trace.makespan / steps
    assert rounds == pytest.approx(sync_step, rel=0.05)


def test_a_staleness_bound_keeps_workers_within_it() -> None:
    bound = 2
    trace = simulate(
        workers(4, speeds=(1, 1, 1, 0.25), steps=100, staleness_bound=bound), numerics=False
    ).trace
    finished = Counter()
    for record in sorted(trace.steps, key=lambda s: s.start):
        # starting run k needs every worker to have finished k - bound runs
        assert min(finished[f"worker_{i}"] for i in range(4)) >= record.step - bound
        finished[record.client] = max(finished[record.client], record.step + 1)
    unbounded = simulate(workers(4, speeds=(1, 1, 1, 0.25), steps=100), numerics=False).trace
    assert staleness_stats(trace)["max"] < staleness_stats(unbounded)["max"]


def test_max_staleness_drops_what_is_too_stale() -> None:
    trace = simulate(workers(4, steps=200, max_staleness=1), numerics=True).trace
    stats = staleness_stats(trace)
    assert stats["max"] <= 1 and stats["updates_dropped"] > 0
    assert all(u.staleness > 1 for u in trace.updates if not u.applied)
    assert stats["updates_applied"] + stats["updates_dropped"] == 800
    # a dropped update writes nothing: the version counts the applied ones only
    last = max(a.version for a in trace.accesses if a.write)
    assert last == stats["updates_applied"]


def test_locked_apply_takes_turns_and_lock_free_does_not() -> None:
    costs = {"read": 0.002, "apply": 0.004}

    def overlaps(apply: str) -> int:
        trace = simulate(workers(4, steps=50, costs=costs, apply=apply), numerics=False).trace
        spans = sorted((r.start, r.end) for r in trace.ops if r.kind in ("read", "apply"))
        return sum(1 for (_, end), (start, _) in itertools.pairwise(spans) if start < end - 1e-12)

    assert overlaps("locked") == 0
    assert overlaps("lock_free") > 10


def test_replaying_the_simulated_ledger_gives_the_simulated_parameters() -> None:
    for training in ({}, {"max_staleness": 2}, {"staleness_bound": 1, "apply": "lock_free"}):
        sim = simulate(workers(3, steps=30, **training))
        params = replay(sim.graph, sim.trace, sim.scenario.model, 0).params
        for name, value in sim.trace.params.items():
            assert np.array_equal(params[name], value), (training, name)


def test_chained_applies_give_the_parameters_and_losses_of_one_apply_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replay lands many workers' applies in one numpy pass (the apply kind's
    ``numpy_chain``): bit for bit what applying them one at a time gives."""
    sim = simulate(workers(16, steps=20), numerics=False, detail=False)
    model, chain, chained_runs = sim.scenario.model, values._Replay._chain, []

    def counted(*args: object) -> int:
        chained_runs.append(chain(*args))  # type: ignore[arg-type]
        return chained_runs[-1]

    monkeypatch.setattr(values._Replay, "_chain", counted)
    chained = replay(sim.graph, sim.trace, model, 0)
    assert max(chained_runs) > 2  # it did land several applies at once
    monkeypatch.setattr(values._Replay, "_chain", lambda *args: 0)
    one_at_a_time = replay(sim.graph, sim.trace, model, 0)
    for name, value in chained.params.items():
        assert np.array_equal(one_at_a_time.params[name], value), name
    assert chained.losses == one_at_a_time.losses


def test_replay_refuses_a_ledger_with_a_hole() -> None:
    sim = simulate(workers(2, steps=5))
    sim.trace.updates = [u for u in sim.trace.updates if u.before != 3]
    with pytest.raises(SimsyncError, match="cannot be replayed"):
        replay(sim.graph, sim.trace, sim.scenario.model, 0)


def test_summary_reports_the_ledger() -> None:
    result = summary(simulate(workers(4, steps=25, max_staleness=2)))
    assert result["updates_applied"] + result["updates_dropped"] == 100
    assert set(result["staleness"]) == {"mean", "max", "histogram"}
    assert sum(result["staleness"]["histogram"].values()) == result["updates_applied"]
    assert result["updates_per_second"] > 0
    sync = summary(simulate(dataclasses.replace(workers(2, steps=3), training=TrainingConfig())))
    assert sync["staleness"] == {"mean": 0.0, "max": 0, "histogram": {"0": 3}}


def test_a_bound_that_can_never_be_met_is_explained() -> None:
    graph = build_async(workers(2, staleness_bound=1))
    graph.clients = [
        dataclasses.replace(c, shared_steps=False, steps=2 if i == 0 else 10)
        for i, c in enumerate(graph.clients)
    ]
    with pytest.raises(
        SimulationError,
        match=r"worker_1 can never start run 4.*worker_0 "
        r"stopped after 2",
    ):
        Engine(graph, steps=10).run()


def test_a_bound_never_met_is_explained_though_a_daemon_loops_beside_it() -> None:
    """A queue runner's thread whose runs take time loops until the others are done: it
    used to keep the simulation going for ever once they could not go on (found by the
    reference executor's random graphs)."""
    graph = build_async(workers(2, staleness_bound=1))
    graph.clients = [
        dataclasses.replace(c, shared_steps=False, steps=2 if i == 0 else 10)
        for i, c in enumerate(graph.clients)
    ]
    graph.add_op(Op("runner/work", "generic", next(iter(graph.devices)), Cost(0.001)))
    graph.add_client(Client("runner", ("runner/work",), daemon=True))
    with watchdog(60), pytest.raises(SimulationError, match=r"worker_1 can never start run 4"):
        Engine(graph, steps=10).run()


def test_a_client_woken_is_no_longer_waiting_though_it_resumes_later() -> None:
    """Clients woken by the slowest's run wait no more, though they resume later in the same
    instant: a daemon looking at them in between must not see a deadlock."""
    env = simpy.Environment()
    clocks = Clocks(env, [Client("a", ("x",)), Client("b", ("x",))])
    env.process(clocks.wait("a", 1, 1))
    env.run()
    assert clocks.blocked == {"a": (1, 1)}
    clocks.tick("a")
    clocks.tick("b")  # the slowest has finished 1 run: a's wake is due, not yet run
    assert clocks.blocked == {}
    env.run()
    assert clocks.blocked == {}


def test_async_settings_in_a_scenario_file() -> None:
    base = {"name": "x", "cluster": {"devices": 2}, "compute": {"mean": 0.01}}
    s = scenario_from_dict({**base, "training": {"mode": "async", "staleness_bound": 0}})
    assert s.training.staleness_bound == 0 and s.training.apply == "locked"
    with pytest.raises(ScenarioError, match=r"\[training\] max_staleness: must not be negative"):
        scenario_from_dict({**base, "training": {"mode": "async", "max_staleness": -1}})
    with pytest.raises(ScenarioError, match=r'\[training\] apply: .*"locked", "lock_free"'):
        scenario_from_dict({**base, "training": {"mode": "async", "apply": "hogwild"}})
    notes = scenario_from_dict({**base, "training": {"staleness_bound": 2}}).notes
    assert notes == (
        '<dict>: [training] staleness_bound is ignored: used only with mode = "async"',
    )


def test_throughput_and_histogram_distance() -> None:
    trace = simulate(workers(4, distribution="constant", steps=10), numerics=False).trace
    assert throughput(trace) == pytest.approx(4 / 0.01)
    same = staleness_stats(trace)["histogram"]
    assert histogram_distance(same, same) == 0.0
    assert histogram_distance(same, {"9": 1}) == 1.0


def test_a_concurrent_device_gets_lanes_enough_in_the_chrome_trace() -> None:
    from simsync.viz import chrome_trace, overlaps

    costs = {"read": 0.002, "apply": 0.004}
    trace = simulate(workers(4, steps=20, costs=costs, apply="lock_free"), numerics=False).trace
    events = chrome_trace([("simulated", trace)])["traceEvents"]
    assert overlaps(events) == []
    lanes = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert "/cpu:0 #2" in lanes


def test_a_synchronous_allreduce_step_is_one_update() -> None:
    s = dataclasses.replace(workers(4, steps=5), training=TrainingConfig(aggregation="allreduce"))
    stats = staleness_stats(simulate(s, numerics=False).trace)
    assert stats["updates_applied"] == 5 and stats["histogram"] == {"0": 5}


def test_per_worker_staleness_counts_applied_updates_like_the_total() -> None:
    trace = simulate(
        workers(4, speeds=(1, 1, 1, 0.25), steps=100, max_staleness=2), numerics=False
    ).trace
    rows = staleness_by_client(trace)
    assert all(r["max"] is None or r["max"] <= 2 for r in rows.values())
    assert sum(r["dropped"] for r in rows.values()) == staleness_stats(trace)["updates_dropped"]


def test_staleness_read_off_unpaired_times_is_the_ledgers() -> None:
    """What a cluster's kernels allow (when each step first read a variable and when each
    update of it landed, not which step did which) gives the ledger's own mean staleness:
    the simulated workers' reads and writes, their times alone, against the versions."""
    sim = simulate(workers(3, steps=40, seed=4), numerics=False)
    accesses = sim.trace.accesses
    assert accesses, "a simulation with detail records its variables' reads and writes"
    exact_of: dict[str, float] = {}
    for variable in {a.variable for a in accesses if a.write}:
        # times as the order the accesses happened in (a run reads as its last write lands:
        # the same time, after it), as a profiler's picoseconds order kernels
        first: dict[tuple[str, int], int] = {}
        for order, access in enumerate(accesses):
            if access.variable == variable and not access.write:
                first.setdefault((access.client, access.step), order)
        writes = [(o, a) for o, a in enumerate(accesses) if a.variable == variable and a.write]
        landed = [order for order, _ in writes]
        reads = [first[(a.client, a.step)] for _, a in writes]
        # the versions each update read and found, from the ledger
        ledger = [u for u in sim.trace.updates if variable in sim.graph.op(u.op).writes]
        exact = sum(u.before - u.read for u in ledger) / len(ledger)
        assert exact > 0.5  # 3 workers: stale updates to read off
        assert unpaired_staleness(sorted(reads), landed) == pytest.approx(exact)
        exact_of[variable] = exact
    assert variable_staleness(sim.graph, sim.trace) == pytest.approx(
        staleness_stats(sim.trace)["mean"]
    )
    # only the variables a measuring read off, as the cross-check compares them
    alone = {v: variable_staleness(sim.graph, sim.trace, {v}) for v in exact_of}
    assert any(found is not None for found in alone.values())
    for variable, found in alone.items():
        assert found is None or found == pytest.approx(exact_of[variable])
    assert variable_staleness(sim.graph, sim.trace, set()) is None
