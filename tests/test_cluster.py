"""The cluster harness without TensorFlow: its config, the acceptance of pushes by an
accumulator (on made-up kernel times and gradients), the refusal to open ports, and the
ledger's order of a global step's updates."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from simsync.kinds.apply import sgd_step
from simsync.numerics import ModelSpec
from simsync.numerics.data import make_batch
from simsync.numerics.models import backward, forward, init_params
from simsync.patterns import build
from simsync.replay import replay
from simsync.scenario import ClusterConfig, ComputeConfig, ModelConfig, Scenario, TrainingConfig
from simsync.tf_backend.cluster import (
    ClusterAddresses,
    ClusterRunConfig,
    ModelWorkload,
    Round,
    run_sync_replicas_cluster,
    tensorflow_test_config,
)
from simsync.tf_backend.cluster.acceptance import LedgerError, Push, Take, settle
from simsync.tf_backend.cluster.ledger import Ledger, NodeTiming
from simsync.tf_backend.cluster.namespace import FORCE_NO_NAMESPACE
from simsync.tf_backend.cluster.trace import cluster_trace
from simsync.tf_backend.session.runtime import BackendError
from simsync.trace import ResourceEvent, StepRecord, Trace


def push(client: str, local_step: int, start: float, gradient: float, step: int = 0) -> Push:
    """A push whose kernel runs 1 ms from ``start``; run ``step`` of ``client``."""
    return Push(client, step, local_step, start, start + 0.001, [gradient])


def fates(events) -> dict[str, bool]:
    return {e.client: e.accepted for e in events if e.action == "push"}


def test_first_r_pushes_are_averaged_and_a_late_one_dropped() -> None:
    pushes = [push("a", 0, 1.0, 1.0), push("b", 0, 2.0, 3.0), push("c", 0, 3.0, 10.0)]
    takes = [Take(1, 0.5, 2.0005, [2.0])]  # issued before any push; completed by b's
    settled = settle("v", pushes, takes, 2, "float64")
    assert fates(settled.events) == {"a": True, "b": True, "c": False}
    (take,) = [e for e in settled.events if e.action == "take"]
    assert (take.value, take.amount) == (1, 2)
    assert settled.disagreements == 0


def test_a_take_issued_late_averages_every_gradient_already_in() -> None:
    """TakeGrad completes once counter_ >= R and divides by counter_: all of them."""
    pushes = [push("a", 0, 1.0, 1.0), push("b", 0, 2.0, 3.0), push("c", 0, 3.0, 8.0)]
    takes = [Take(1, 4.0, 4.001, [4.0])]
    settled = settle("v", pushes, takes, 2, "float64")
    assert fates(settled.events) == {"a": True, "b": True, "c": True}
    assert [e.amount for e in settled.events if e.action == "take"] == [3]


def test_a_race_is_settled_by_the_average_the_take_returned() -> None:
    """b's and c's kernels overlap the take's end: only the value says c got in too."""
    pushes = [push("a", 0, 1.0, 1.0), push("b", 0, 2.0, 3.0), push("c", 0, 2.0002, 8.0)]
    takes = [Take(1, 0.5, 2.0004, [4.0])]
    settled = settle("v", pushes, takes, 2, "float64")
    assert fates(settled.events) == {"a": True, "b": True, "c": True}
    assert settled.uncertain == 3 and settled.disagreements == 1


def test_an_average_no_set_of_pushes_gives_is_an_error() -> None:
    pushes = [push("a", 0, 1.0, 1.0), push("b", 0, 2.0, 3.0)]
    with pytest.raises(LedgerError, match="no set of the 2 gradients"):
        settle("v", pushes, [Take(1, 0.5, 2.0005, [2.5])], 2, "float64")


def test_a_gradient_before_the_previous_take_is_an_error() -> None:
    pushes = [push("a", 0, 1.0, 1.0), push("b", 0, 1.1, 1.0), push("a", 1, 1.5, 2.0, step=1)]
    pushes.append(push("b", 1, 3.0, 2.0, step=1))
    takes = [Take(1, 0.5, 2.0, [1.0]), Take(2, 2.1, 3.0005, [2.0])]
    with pytest.raises(LedgerError, match="before take 1 ended"):
        settle("v", pushes, takes, 2, "float64")


def test_pushes_after_the_last_take_are_pending_and_accepted() -> None:
    pushes = [push("a", 0, 1.0, 1.0), push("b", 0, 2.0, 3.0), push("a", 1, 3.0, 5.0, step=1)]
    settled = settle("v", pushes, [Take(1, 0.5, 2.0005, [2.0])], 2, "float64")
    assert settled.pending == 1
    assert [e.accepted for e in settled.events if e.action == "push"] == [True, True, True]


def test_the_config_travels_as_json() -> None:
    config = ClusterRunConfig(
        ModelWorkload(ModelSpec(kind="mlp", hidden=(8, 4))),
        workers=3,
        replicas_to_aggregate=2,
        schedule=(Round((0, 1), stagger=0.5, settle_global_step=1),),
        work_seconds=((0.01, 0.02), ()),
        cluster=ClusterAddresses(("127.0.0.1:1",), ("127.0.0.1:2", "127.0.0.1:3", "[::1]:4")),
    )
    assert ClusterRunConfig.from_json(config.to_json()) == config
    assert config.work(0, 1) == 0.02 and config.work(1, 0) == 0.0 and config.work(2, 9) == 0.0
    test = tensorflow_test_config("test2Workers")
    assert ClusterRunConfig.from_json(test.to_json()) == test


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"workers": 0}, "at least one parameter server and one worker"),
        ({"workers": 1, "replicas_to_aggregate": 3, "init_tokens": 0}, "init_tokens 0"),
        ({"schedule": (Round((2,)),)}, "not within 0..1"),
        ({"cluster": ClusterAddresses(("a:1",), ("b:2",))}, "do not match"),
        ({"workers": 1, "cluster": ClusterAddresses(("a:1",), ("a:1",))}, "one address to two"),
    ],
)
def test_a_bad_config_is_one_line(settings: dict, message: str) -> None:
    with pytest.raises(BackendError, match=message) as caught:
        ClusterRunConfig(**settings)
    assert "\n" not in str(caught.value)


def test_tensorflow_tests_keep_their_own_cluster() -> None:
    with pytest.raises(BackendError, match="2 parameter servers and 3 workers"):
        tensorflow_test_config("test3Workers1Backup", workers=2, schedule=None)


def children() -> set[int]:
    """This process's child processes, from /proc."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == os.getpid():
                found.add(int(entry.name))
    return found


def test_without_a_namespace_it_refuses_and_starts_nothing(monkeypatch) -> None:
    monkeypatch.setenv(FORCE_NO_NAMESPACE, "1")
    before = children()
    with pytest.raises(BackendError) as caught:
        run_sync_replicas_cluster(ClusterRunConfig())
    message = str(caught.value)
    assert "open_ports=True" in message and "open on all interfaces" in message
    assert "\n" not in message
    assert children() <= before  # nothing started


def test_a_cluster_beyond_this_host_needs_open_ports() -> None:
    remote = ClusterAddresses(("10.0.0.2:2222",), ("10.0.0.3:2222",))
    with pytest.raises(BackendError, match="open_ports=True"):
        run_sync_replicas_cluster(ClusterRunConfig(workers=1, cluster=remote))


def test_the_average_of_sparse_gradients_is_per_row() -> None:
    """SparseConditionalAccumulator divides each row by the gradients that had it."""
    from simsync.tf_backend.cluster.acceptance import average

    rows = average(
        [
            {"indices": [1], "values": [[1.0]], "shape": [2, 1]},
            {"indices": [0, 1], "values": [[4.0], [3.0]], "shape": [2, 1]},
        ]
    )
    assert rows["indices"] == [0, 1]
    np.testing.assert_allclose(rows["values"], [[4.0], [2.0]])


def test_a_variable_updated_before_another_take_is_made_first_in_the_replay() -> None:
    """Each variable's update waits only for its own take. In global step 1 the bias's take
    gets worker_0's push and the bias is updated while the kernel's take still waits; worker_1
    then reads the new bias, and its kernel push (its bias push is stale) is the one the kernel's
    take averages. The ledger must make bias version 1 before the kernel update that needs it,
    whatever order the variables are listed in."""
    scenario = Scenario(
        "race",
        cluster=ClusterConfig(2),
        compute=ComputeConfig("constant", 1.0),
        model=ModelConfig(kind="softmax", features=4, classes=3, batch_size=8),
        training=TrainingConfig(mode="sync_replicas", replicas_to_aggregate=1),
    ).with_run(steps=1, seed=7)
    graph, spec, seed = build(scenario), scenario.model, scenario.run.seed
    kernel, bias = "layer_0/kernel", "layer_0/bias"
    assert [n for n, v in graph.variables.items() if v.trainable] == [kernel, bias]
    index = {client.name: i for i, client in enumerate(graph.clients)}

    def gradients(client: str, params: dict) -> dict:
        batch = make_batch(spec, seed, (index[client], 1, 0))
        return backward(spec, params, batch, forward(spec, params, batch)[1])

    start = init_params(spec, seed)
    bias_1 = sgd_step(start[bias], gradients("worker_0", start)[bias], spec.learning_rate)
    kernel_1 = sgd_step(
        start[kernel], gradients("worker_1", {kernel: start[kernel], bias: bias_1})[kernel],
        spec.learning_rate,
    )  # fmt: skip

    def event(resource, action, op, client, time, value=0, amount=1, accepted=True):
        return ResourceEvent(resource, action, op, client, 1, time, value, amount, accepted)

    take = "sync_replicas/take_gradients/"
    trace = Trace(source="tensorflow-cluster")
    trace.steps = [StepRecord("worker_0", 1, 0.0, 5.0), StepRecord("worker_1", 1, 3.0, 6.0),
                   StepRecord("queue_runner", 1, 1.0, 7.0)]  # fmt: skip
    trace.resources = [
        event(f"{bias}/grad_accum", "push", f"worker_0/push_gradients/{bias}", "worker_0", 1.0),
        event(f"{bias}/grad_accum", "take", take + bias, "queue_runner", 1.5, 1),
        event(f"{kernel}/grad_accum", "push", f"worker_1/push_gradients/{kernel}", "worker_1",
              4.0),
        event(f"{bias}/grad_accum", "push", f"worker_1/push_gradients/{bias}", "worker_1", 4.0,
              accepted=False),
        event(f"{kernel}/grad_accum", "take", take + kernel, "queue_runner", 4.5, 1),
        event(f"{kernel}/grad_accum", "push", f"worker_0/push_gradients/{kernel}", "worker_0",
              4.8, accepted=False),
    ]  # fmt: skip
    update = "GradientDescent/update_layer_0/{}/ResourceApplyGradientDescent"
    nodes = [
        NodeTiming("queue_runner", 1, "/job:ps/task:0", update.format("kernel"), 4.6, 4.7),
        NodeTiming("queue_runner", 1, "/job:ps/task:0", update.format("bias"), 2.0, 2.1),
        NodeTiming("queue_runner", 1, "/job:ps/task:0", "GradientDescent", 4.8, 4.9),
    ]
    params = {kernel: kernel_1, bias: bias_1}
    read_versions = {("worker_0", 1): {kernel: 0, bias: 0}, ("worker_1", 1): {kernel: 0, bias: 1}}
    ledger = Ledger(trace, params, 1, {}, nodes, {}, read_versions)

    replayed = replay(graph, cluster_trace(ledger, graph), spec, seed)

    assert np.allclose(replayed.params[bias], bias_1)
    assert np.allclose(replayed.params[kernel], kernel_1)
    assert not np.allclose(kernel_1, sgd_step(start[kernel], gradients("worker_1", start)[kernel],
                                              spec.learning_rate))  # fmt: skip


def test_a_clusters_costs_come_from_its_trace() -> None:
    """The reference cluster's trace priced: plain ops by their median; a take from the last
    push it averaged to its end; the overheads from one run's token (or tokens) to the next
    run's first push (or take)."""
    from simsync.crosscheck.pricing import costs_of
    from simsync.trace import OpRecord

    def op(client: str, step: int, name: str, kind: str, start: float, end: float) -> OpRecord:
        return OpRecord(name, kind, (), client, step, start, start, end)

    records, events = [], []
    for step in range(2, 6):
        t = step * 0.1
        push = f"worker_0/push_gradients/{KERNEL}"
        records += [
            op("worker_0", step, "worker_0/read_variables", "read", t, t + 0.001),
            op("worker_0", step, push, "push_gradients", t + 0.010, t + 0.011),
            op("worker_0", step, "worker_0/dequeue_token", "dequeue_token", t + 0.011, t + 0.08),
            op("queue_runner", step, TAKE, "take_gradients", t + 0.002, t + 0.013),
            op("queue_runner", step, "sync_replicas/enqueue_tokens", "enqueue_tokens",
               t + 0.014, t + 0.015),
        ]  # fmt: skip
        events += [
            ResourceEvent(f"{KERNEL}/grad_accum", "push", push, "worker_0", step, t + 0.010),
            ResourceEvent(
                f"{KERNEL}/grad_accum", "take", TAKE, "queue_runner", step, t + 0.013, step
            ),
        ]
    trace = Trace(ops=records, resources=events)
    costs = costs_of(trace, {r.op: r.kind for r in records})
    assert costs["read"] == 0.001 and costs["push_gradients"] == pytest.approx(0.001)
    assert costs["take_gradients"] == pytest.approx(0.002)  # from the push's end at +0.011
    assert costs["enqueue_tokens"] == pytest.approx(0.001)
    # token at +0.08, next run's push at +0.11: 30 ms, less the read's 1 ms
    assert costs["session_run"] == pytest.approx(0.029)
    # tokens enqueued at +0.015, the next take at +0.102: 87 ms
    assert costs["queue_runner_run"] == pytest.approx(0.087)


KERNEL = "layer_0/kernel"
TAKE = f"sync_replicas/take_gradients/{KERNEL}"
