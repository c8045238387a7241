"""The real SyncReplicasOptimizer on a real cluster of this machine: TensorFlow's own tests
reproduced, a model run's ledger checked (and replayed through numpy), the cluster's isolation,
and broken clusters ending in one error with no process left. No mock: real processes, real
servers, the real optimizer."""

from __future__ import annotations

import functools
import json
import signal
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from simsync.numerics import ModelSpec, backward, forward, init_params, make_batch
from simsync.tf_backend.cluster import (
    ClusterAddresses,
    ClusterError,
    ClusterRun,
    ClusterRunConfig,
    ModelWorkload,
    StartedCluster,
    run_sync_replicas_cluster,
    tensorflow_test_config,
)
from simsync.tf_backend.cluster.processes import process_alive
from simsync.tf_backend.cluster.worker import FAULT

pytestmark = pytest.mark.tf

SPEC = ModelSpec(kind="softmax", features=8, classes=4, batch_size=16, learning_rate=0.2)
MODEL = ClusterRunConfig(
    ModelWorkload(SPEC),
    parameter_servers=1,
    workers=3,
    replicas_to_aggregate=2,
    steps=12,
    seed=3,
    work_seconds=((), (), (0.02,) * 60),  # worker 2 a straggler
    run_timeout=30.0,
)


def close(actual: Any, expected: Any) -> None:
    """TensorFlow's assertAllClose (float32 variables)."""
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)


@pytest.fixture(scope="module")
def two_workers() -> ClusterRun:
    return run_sync_replicas_cluster(tensorflow_test_config("test2Workers"))


@pytest.fixture(scope="module")
def backup_worker() -> ClusterRun:
    return run_sync_replicas_cluster(tensorflow_test_config("test3Workers1Backup"))


def test_two_workers_as_tensorflows_test2workers(two_workers: ClusterRun) -> None:
    """Published values: v0 = -0.4, v1 = -1.0, v_sparse = [[3], [3.6]] after both run once;
    a second round is dropped (global step stays 1, local steps become 1); together: global
    step 2, v0 = -0.8, v1 = -3.0."""
    after = two_workers.observations
    assert after[1].global_step == 1
    close(after[1].params["v0"], 0 - (0.1 + 0.3) / 2 * 2.0)
    close(after[1].params["v1"], 1 - (0.9 + 1.1) / 2 * 2.0)
    close(after[1].params["v_sparse"], [[3.0], [4.0 - (0.1 + 0.3) / 2 * 2.0]])
    assert after[1].local_steps == {"worker_0": 0, "worker_1": 0}
    assert after[3].global_step == 1
    assert after[3].local_steps == {"worker_0": 1, "worker_1": 1}
    close(after[3].params["v0"], -0.4)
    close(after[3].params["v1"], -1.0)
    assert after[4].global_step == 2 == two_workers.global_step
    close(after[4].params["v0"], 0 - 2 * (0.1 + 0.3) / 2 * 2.0)
    close(after[4].params["v1"], 1 - 2 * (0.9 + 1.1) / 2 * 2.0)


def fates(run: ClusterRun) -> dict[tuple[str, int], set[bool]]:
    """(worker, run) -> the fates of its pushes, over every variable."""
    found: dict[tuple[str, int], set[bool]] = defaultdict(set)
    for event in run.events(action="push"):
        found[(event.client, event.step)].add(event.accepted)
    return found


def test_two_workers_ledger(two_workers: ClusterRun) -> None:
    assert fates(two_workers) == {
        ("worker_0", 0): {True},
        ("worker_1", 0): {True},
        ("worker_0", 1): {False},  # local step 0 (the initial tokens), accumulators at 1
        ("worker_1", 1): {False},
        ("worker_0", 2): {True},
        ("worker_1", 2): {True},
    }
    assert [e.amount for e in two_workers.events(action="take")] == [2] * 6


def test_backup_worker_as_tensorflows_test3workers1backup(backup_worker: ClusterRun) -> None:
    """Published values: workers 0 and 2 make global step 1, v0 = -0.6, v1 = -1.2; worker 1's
    gradient is then dropped, and all three next ones; local step 1 of worker 1; worker 0 alone
    waits; with worker 1: global step 2, v0 = -1.0, v1 = -3.2."""
    after = backup_worker.observations
    assert after[1].global_step == 1
    close(after[1].params["v0"], 0 - (0.1 + 0.5) / 2 * 2.0)
    close(after[1].params["v1"], 1 - (0.9 + 1.3) / 2 * 2.0)
    assert after[5].global_step == 1 and after[5].local_steps["worker_1"] == 1
    assert after[6].global_step == 2 == backup_worker.global_step
    close(after[6].params["v0"], -0.6 - (0.1 + 0.3) / 2 * 2.0)
    close(after[6].params["v1"], -1.2 - (0.9 + 1.1) / 2 * 2.0)


def test_backup_worker_ledger(backup_worker: ClusterRun) -> None:
    found = fates(backup_worker)
    assert found[("worker_0", 0)] == found[("worker_2", 0)] == {True}
    dropped = [("worker_1", 0), ("worker_0", 1), ("worker_1", 1), ("worker_2", 1)]
    assert all(found[key] == {False} for key in dropped)
    assert found[("worker_0", 2)] == found[("worker_1", 2)] == {True}
    # worker 0 alone waited: its last run ended only after worker 1 (started 0.5 s later) pushed
    (last_0,) = [s for s in backup_worker.trace.steps if (s.client, s.step) == ("worker_0", 2)]
    pushed_1 = min(e.time for e in backup_worker.events(action="push", client="worker_1")
                   if e.step == 2)  # fmt: skip
    assert last_0.start + 0.4 < pushed_1 < last_0.end


def reachable(address: str) -> bool:
    """Whether this process (the host's network namespace) can connect to ``address``."""
    port = int(address.rpartition(":")[2])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def interfaces_of(pid: int) -> list[str]:
    lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
    return sorted(line.split(":")[0].strip() for line in lines)


def listening_on_every_interface(pid: int) -> set[int]:
    """Ports with a socket listening on 0.0.0.0 or :: in ``pid``'s network namespace."""
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port = local.split(":")
            if state == "0A" and set(address) == {"0"}:
                ports.add(int(port, 16))
    return ports


@pytest.fixture(scope="module")
def model() -> tuple[ClusterRun, dict[str, Any]]:
    """A model run, and what a probe saw from outside while its servers listened."""
    seen: dict[str, Any] = {}

    def probe(started: StartedCluster) -> None:
        addresses = [a for job in started.addresses.values() for a in job]
        seen["started"] = started
        seen["reachable"] = [a for a in addresses if reachable(a)]
        seen["interfaces"] = {n: interfaces_of(p) for n, p in started.pids.items()}
        seen["listening"] = {
            n: listening_on_every_interface(p) for n, p in started.pids.items() if n != "launcher"
        }

    return run_sync_replicas_cluster(MODEL, on_start=probe), seen


def test_nothing_is_reachable_from_outside(model: tuple[ClusterRun, dict[str, Any]]) -> None:
    run, seen = model
    assert seen["started"].namespace and run.namespace
    assert seen["reachable"] == []
    assert all(found == ["lo"] for found in seen["interfaces"].values())
    # TensorFlow does listen on all interfaces: only the namespace keeps its ports private
    for name, ports in seen["listening"].items():
        job, index = name.split()
        own = seen["started"].addresses[job][int(index)]
        assert int(own.rpartition(":")[2]) in ports


def test_one_apply_per_global_step(model: tuple[ClusterRun, dict[str, Any]]) -> None:
    run, _ = model
    assert run.global_step == MODEL.steps
    syncs = [s for s in run.trace.steps if s.client == "queue_runner"]
    assert [s.step for s in syncs] == list(range(1, MODEL.steps + 1))
    enqueues = run.events(action="enqueue", client="queue_runner")
    assert [(e.step, e.value, e.amount) for e in enqueues] == [(0, 0, 2)] + [
        (k, k, MODEL.workers) for k in range(1, MODEL.steps + 1)
    ]
    applies = Counter(
        (n.client, n.step) for n in run.nodes if n.node.endswith("ResourceApplyGradientDescent")
    )
    assert applies == {("queue_runner", k): len(run.params) for k in range(1, MODEL.steps + 1)}


def test_takes_average_the_accepted_pushes(model: tuple[ClusterRun, dict[str, Any]]) -> None:
    run, _ = model
    runs = [s for s in run.trace.steps if s.client.startswith("worker")]
    for variable in run.params:
        resource = f"{variable}/grad_accum"
        pushes = run.events(resource, "push")
        assert len(pushes) == len(runs)  # pushed = accepted + dropped, one per run
        accepted = Counter(e.value for e in pushes if e.accepted)
        takes = run.events(resource, "take")
        assert [e.value for e in takes] == list(range(1, MODEL.steps + 1))
        for take in takes:
            assert take.amount == accepted[take.step - 1] >= MODEL.replicas
        assert run.pending[variable] == 0
    assert any(not e.accepted for e in run.events(action="push"))
    assert all(s.start >= 0 for s in runs)  # nobody trained before the start barrier


def test_the_ledger_replays_to_tensorflows_parameters(
    model: tuple[ClusterRun, dict[str, Any]],
) -> None:
    """Each accepted gradient of step k was computed from the parameters its run read, each
    variable at the global step the ledger found for it: numpy, fed the ledger, gives
    TensorFlow's final parameters to 1e-9. A run usually reads every variable at one global
    step, but TensorFlow does not read them at one instant: the chief's apply of one variable
    can land between a worker's two reads (each variable's apply waits only for its own
    accumulator's take), so a variable at step k is worked out from whatever versions the
    gradients it averaged read."""
    run, _ = model
    initial = init_params(SPEC, MODEL.seed)
    accepted = [e for e in run.events(action="push") if e.accepted]
    for event in accepted:
        assert -1 not in run.read_versions[(event.client, event.step)].values()

    @functools.cache
    def value(variable: str, k: int) -> np.ndarray:
        if k == 0:
            return initial[variable]
        resource = f"{variable}/grad_accum"
        gradients = []
        for event in (e for e in accepted if e.value == k - 1 and e.resource == resource):
            worker = int(event.client.split("_")[1])
            batch = make_batch(SPEC, MODEL.seed, (worker, event.step, 0))
            read = run.read_versions[(event.client, event.step)]
            params = {name: value(name, read[name]) for name in initial}
            _, activations = forward(SPEC, params, batch)
            gradients.append(backward(SPEC, params, batch, activations)[variable])
        return value(variable, k - 1) - SPEC.learning_rate * np.mean(gradients, axis=0)

    for variable, final in run.params.items():
        np.testing.assert_allclose(value(variable, run.global_step), final, rtol=0, atol=1e-9)


def test_start_up_with_initial_tokens(model: tuple[ClusterRun, dict[str, Any]]) -> None:
    """R initial tokens of value 0: R runs get one, and their next gradients carry local step 0
    while take 1 may already be done: wasted. Every worker's first push has local step 0."""
    run, _ = model
    dequeued = run.events(action="dequeue")
    assert sum(e.value == 0 for e in dequeued) == MODEL.replicas
    first = [e for e in run.events(action="push") if e.step == 0]
    assert {e.value for e in first} == {0}
    holders = {(e.client, e.step + 1) for e in dequeued if e.value == 0}
    assert {e.value for e in run.events(action="push") if (e.client, e.step) in holders} == {0}


def test_every_process_ended(model: tuple[ClusterRun, dict[str, Any]]) -> None:
    run, _ = model
    assert set(run.pids) == {"launcher", "ps 0", "worker 0", "worker 1", "worker 2"}
    assert not any(process_alive(pid) for pid in run.pids.values())


def broken(config: ClusterRunConfig, match: str) -> ClusterError:
    """Run a cluster that must fail: one error line saying why (not a timeout's), no
    process left."""
    with pytest.raises(ClusterError, match=match) as caught:
        run_sync_replicas_cluster(config)
    assert "\n" not in str(caught.value)
    assert caught.value.pids and not any(process_alive(p) for p in caught.value.pids.values())
    return caught.value


def test_a_task_dying_mid_run(monkeypatch) -> None:
    monkeypatch.setenv(FAULT, "worker:1:3")  # worker 1 SIGKILLs itself after its third run
    config = ClusterRunConfig(ModelWorkload(SPEC), workers=2, steps=200, run_timeout=20.0)
    broken(config, "worker 1 was killed by SIGKILL")


def test_a_port_taken() -> None:
    """Every task's port is held by this process (without SO_REUSEPORT), so no server can
    start: with open ports, since the taken ports are the host's; nothing ever listens."""
    held = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(2)]
    try:
        for sock in held:
            sock.bind(("127.0.0.1", 0))
            sock.listen()
        ps, worker = (f"127.0.0.1:{sock.getsockname()[1]}" for sock in held)
        taken = ClusterAddresses((ps,), (worker,))
        config = ClusterRunConfig(workers=1, cluster=taken, open_ports=True, run_timeout=20.0)
        broken(config, r"could not start its server on 127\.0\.0\.1:\d+ \(is the port taken")
    finally:
        for sock in held:
            sock.close()


INTERRUPTED = """
import json
from simsync.tf_backend.cluster import ClusterRunConfig, run_sync_replicas_cluster
def started(cluster):
    print(json.dumps(cluster.pids), flush=True)
run_sync_replicas_cluster(ClusterRunConfig(workers=2, steps=10**6), on_start=started)
"""


def test_ctrl_c_ends_every_process() -> None:
    """Ctrl-C in the middle of training: the parent ends every process it started, by pid."""
    parent = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        # as from a terminal: a test run started in the background (a shell's `&`) ignores
        # SIGINT, and its children would inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert parent.stdout is not None
        pids = json.loads(parent.stdout.readline())
        assert all(process_alive(pid) for pid in pids.values())
        time.sleep(2.0)  # starting or training: either way, everything must end
        parent.send_signal(signal.SIGINT)
        parent.wait(timeout=30)
    finally:
        parent.kill()
        parent.wait()
    assert not any(process_alive(pid) for pid in pids.values())
