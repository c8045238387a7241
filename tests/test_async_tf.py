"""Asynchronous training on real TensorFlow: worker threads on one session, the real ledger,
and its replay through numpy reproducing TensorFlow's parameters."""

from __future__ import annotations

import pytest
from typed_dicts import problems

from simsync.crosscheck import crosscheck
from simsync.crosscheck.report import AsyncReport
from simsync.patterns import build
from simsync.replay import replay
from simsync.scenario import (
    ClusterConfig,
    ComputeConfig,
    ModelConfig,
    Scenario,
    TrainingConfig,
)
from simsync.tf_backend import run_on_tensorflow

pytestmark = pytest.mark.tf


def workers(n: int = 4, steps: int = 6, **training) -> Scenario:
    return Scenario(
        "async",
        cluster=ClusterConfig(n),
        costs={"apply": 0.0002},
        compute=ComputeConfig(distribution="exponential", mean=0.002),
        model=ModelConfig(kind="softmax", features=8, classes=4, batch_size=16),
        training=TrainingConfig(mode="async", **training),
    ).with_run(steps=steps, seed=2)


def replayed_difference(scenario: Scenario, run) -> float:
    params = replay(build(scenario), run.trace, scenario.model, scenario.run.seed).params
    return max(float(abs(params[name] - value).max()) for name, value in run.params.items())


@pytest.mark.parametrize(
    "training",
    [{}, {"max_staleness": 1}, {"staleness_bound": 1}],
    ids=["locked", "max_staleness", "bounded"],
)
def test_replaying_the_real_ledger_reproduces_tensorflows_parameters(training) -> None:
    scenario = workers(**training)
    run = run_on_tensorflow(scenario, warmup=1, timing_steps=2)
    updates = run.trace.updates
    assert len(updates) == 4 * (1 + 6 + 2)
    # locked: every update found its own version, each landed once
    assert sorted(u.before for u in updates if u.applied) == list(
        range(sum(u.applied for u in updates))
    )
    assert replayed_difference(scenario, run) <= 1e-12
    if "max_staleness" in training:
        assert all(u.staleness <= 1 for u in updates if u.applied)
        assert all(u.staleness > 1 for u in updates if not u.applied)


def test_a_staleness_bound_of_zero_gives_rounds_on_tensorflow() -> None:
    run = run_on_tensorflow(workers(3, steps=4, staleness_bound=0), warmup=0, timing_steps=0)
    # round k starts only when all 3 updates of every earlier round have landed; threads
    # start at different moments, so a read may also see updates of its own round
    assert all(3 * u.step <= u.read < 3 * (u.step + 1) for u in run.trace.updates)
    assert sorted({u.step for u in run.trace.updates}) == [0, 1, 2, 3]


def test_crosscheck_of_async_training() -> None:
    report = crosscheck(workers(steps=5), warmup=1).report
    assert report["check"] == "racing_clients" and problems(report, AsyncReport) == []
    assert report["mode"] == "async"
    assert report["structure"]["ok"] and report["structure"]["runs"] > 0
    assert report["values"]["replayed"] and report["values"]["ok"]
    staleness = report["staleness"]
    assert staleness["measured"]["updates_applied"] == report["updates"]
    assert 0 <= staleness["distance"] <= 1
    assert report["throughput"]["measured"] > 0 and report["throughput"]["predicted"] > 0
    assert report["unmapped_tensorflow_ops"] == {}


def test_lock_free_apply_is_replayed_but_not_required_to_agree() -> None:
    report = crosscheck(workers(steps=5, apply="lock_free"), warmup=1).report
    values = report["values"]
    assert values["exact"] is False and values["ok"] is True
    assert "lock-free" in values["note"]
    assert report["structure"]["ok"]


def test_async_workers_report_their_runs() -> None:
    said: list[str] = []
    run_on_tensorflow(workers(3, steps=2), warmup=1, timing_steps=1, on_progress=said.append)
    assert said and said[-1] == "TensorFlow: step 12 of 12", said
