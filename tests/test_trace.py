"""Numbers read off traces: step-time statistics and who waited for whom."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simsync.kinds import sync_points
from simsync.scenario import ClusterConfig, ComputeConfig, Scenario
from simsync.simulation import simulate
from simsync.trace import (
    StepRecord,
    Trace,
    came_last,
    step_time_stats,
    straggler,
    sync_waits,
    unpaired_staleness,
)


def test_waits_by_hand() -> None:
    # towers at speeds 1, 1, 0.5: gradients arrive at 10, 10 and 20 ms; the fast ones wait 10 ms
    s = Scenario(
        "t", cluster=ClusterConfig(3, (1.0, 1.0, 0.5)), compute=ComputeConfig(mean=0.01)
    ).with_run(steps=4)
    sim = simulate(s, numerics=False)
    (wait,) = sync_waits(sim.graph, sim.trace, sync_points(sim.graph))
    assert wait.sync_point == "average_gradients" and wait.executions == 4
    assert wait.mean_wait == pytest.approx({"tower_0": 0.01, "tower_1": 0.01, "tower_2": 0.0})
    assert wait.last == {"tower_0": 0, "tower_1": 0, "tower_2": 4}
    assert straggler(wait.last) == ""  # last in 4 of 4 of 3 towers: chance allows it (p 0.04)


def test_step_time_percentiles() -> None:
    trace = Trace(steps=[StepRecord("main", i, float(i), i + (i + 1) / 100) for i in range(100)])
    stats = step_time_stats(trace)
    assert stats["mean"] == pytest.approx(0.505)
    assert stats["p50"] == pytest.approx(0.505)
    assert stats["p95"] == pytest.approx(0.9505)
    assert trace.makespan == pytest.approx(99 + 1.0)


def test_empty_trace_has_zero_stats() -> None:
    assert step_time_stats(Trace()) == {"mean": 0.0, "p50": 0.0, "p95": 0.0}
    assert Trace().makespan == 0.0


def test_towers_that_arrive_together_are_never_all_last() -> None:
    # equal towers arrive at the same instant: nobody waited for anybody, so nobody was last
    s = Scenario(
        "t", cluster=ClusterConfig(3, (1.0, 1.0, 1.0)), compute=ComputeConfig(mean=0.01)
    ).with_run(steps=2)
    sim = simulate(s, numerics=False)
    (wait,) = sync_waits(sim.graph, sim.trace, sync_points(sim.graph))
    assert wait.mean_wait == {"tower_0": 0.0, "tower_1": 0.0, "tower_2": 0.0}
    assert wait.last == {"tower_0": 0, "tower_1": 0, "tower_2": 0}


def test_who_came_last_ties_and_all_together() -> None:
    assert came_last({"tower_0": 3.0, "tower_1": 5.0, "tower_2": 5.0}) == ["tower_1", "tower_2"]
    assert came_last({"tower_0": 5.0, "tower_1": 5.0}) == []
    assert came_last({"tower_0": 1.0, "tower_1": 0.5}) == ["tower_0"]


def test_a_simulated_trace_read_as_evidence_gives_the_summarys_waits() -> None:
    # free transfers: an input arrives as its op ends, so the cross-check's reading of a trace
    # (input ops' ends) and the summary's (arrivals at the sync point) are the same instants;
    # one tally (waits_at) makes the same numbers of them, bit for bit
    from simsync.crosscheck.evidence import arrivals

    s = Scenario(
        "t", cluster=ClusterConfig(3, (1.0, 0.5, 1.0)), compute=ComputeConfig("exponential", 0.01)
    ).with_run(steps=30)
    sim = simulate(s, numerics=False)
    (wait,) = sync_waits(sim.graph, sim.trace, sync_points(sim.graph))
    (found,) = arrivals(sim.graph, sim.trace)
    assert found["steps"] == wait.executions == 30
    assert found["last"] == wait.last and sum(wait.last.values()) == 30
    assert found["mean_wait"] == wait.mean_wait


@given(
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(1, 5_000)), min_size=1, max_size=40
    ).filter(lambda steps: len({r for r, _ in steps} | {r + d for r, d in steps}) == 2 * len(steps))
)
def test_staleness_unpaired_is_the_paired_mean(steps) -> None:
    """Each step reads at ``r`` and lands its update ``d`` later (times all distinct): the
    updates that landed between a step's read and its own, counted step by step, have the
    mean that the times alone give, unpaired and in any order."""
    landed = [r + d for r, d in steps]
    paired = sum(sum(1 for u in landed if r < u < r + d) for r, d in steps) / len(steps)
    reads = sorted(r for r, _ in steps)
    assert unpaired_staleness(reads, sorted(landed, reverse=True)) == pytest.approx(paired)
