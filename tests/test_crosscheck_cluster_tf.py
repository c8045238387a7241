"""`simsync crosscheck` of a SyncReplicasOptimizer scenario: the real optimizer on a real
1 ps + 3 worker cluster of this machine, R = 2, checked against the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.tf

SCENARIO = """
name = "one-backup"
[run]
steps = 15
[cluster]
devices = 3
speeds = [1, 1, 0.5]
[compute]
distribution = "exponential"
mean = 0.004
[model]
kind = "softmax"
features = 8
classes = 3
batch_size = 8
[training]
mode = "sync_replicas"
replicas_to_aggregate = 2
"""


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("cluster") / "one_backup.toml"
    path.write_text(SCENARIO)
    result = subprocess.run(
        [sys.executable, "-m", "simsync", "crosscheck", str(path), "--json", "--steps", "15"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)  # how long it took is no test's: the machine may be busy


def test_structure_values_and_protocol_agree(checked: dict[str, Any]) -> None:
    report = checked
    assert report["structure"]["ok"] and report["structure"]["checked"] > 100
    assert report["values"]["ok"] and report["values"]["max_abs_diff"] < 1e-9
    assert "layer_0/kernel" in report["values"]["compared"]
    for side in ("predicted", "measured"):
        protocol = report["protocol"][side]
        assert protocol["global_step"] == protocol["applies"] == 15
        assert protocol["one_apply_per_step"]
        g = protocol["gradients"]
        assert g["pushed"] == g["accepted"] + g["dropped"] + g["split"]
        assert g["accepted"] + g["split"] >= 15 * 2  # R gradients in every step, at least


def test_the_prediction_is_priced_for_this_machine(
    checked: dict[str, Any],
) -> None:
    """The cluster's own ops at the costs a reference cluster measured here once (kept in the
    cache folder), every task on this machine's cores: closer to the measured time between
    applies than the scenario's own costs, a task per host."""
    report = checked
    timing = report["timing"]
    priced = timing["priced"]
    costs = priced["costs"]
    ops = {"read", "push_gradients", "dequeue_token", "apply", "enqueue_tokens"}
    overheads = {"session_run", "queue_runner_run"}
    assert ops | overheads | {"take_gradients", "overhead_scale"} == set(costs)
    assert all(0 < costs[k] < 0.01 for k in ops) and 0 <= costs["take_gradients"] < 0.01
    assert all(0 < costs[k] < 0.1 for k in overheads) and 0.05 <= costs["overhead_scale"] <= 2
    assert priced["host_cores"] >= 1 and 0 < priced["core_efficiency"] <= 1
    (kept,) = (Path(os.environ["SIMSYNC_CACHE_DIR"]) / "cluster-costs").glob("*.json")
    assert json.loads(kept.read_text())["costs"] == priced["costs"]
    measured = timing["measured_step_time"]
    unpriced = abs(priced["unpriced_step_time"] - measured)
    assert abs(timing["predicted_step_time"] - measured) < unpriced


def test_the_report_names_the_cluster(checked: dict[str, Any]) -> None:
    report = checked
    cluster = report["cluster"]
    assert (cluster["parameter_servers"], cluster["workers"]) == (1, 3)
    addresses = [*cluster["addresses"]["ps"], *cluster["addresses"]["worker"]]
    assert len(addresses) == 4 and all(a.startswith("127.0.0.1:") for a in addresses)
    assert cluster["private_network"] is True


def test_the_chrome_trace_holds_both_timelines(tmp_path: Path) -> None:
    path, trace = tmp_path / "s.toml", tmp_path / "both.json"
    path.write_text(SCENARIO)
    result = subprocess.run(
        [sys.executable, "-m", "simsync", "crosscheck", str(path), "--steps", "4",
         "--trace", str(trace)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "SyncReplicasOptimizer" in result.stdout and "✓ agree" in result.stdout
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["pid"] for e in events if e.get("ph") == "X"} == {1, 2}


def test_a_bad_cluster_file_or_no_private_network_is_one_line(tmp_path: Path) -> None:
    path, bad = tmp_path / "s.toml", tmp_path / "cluster.json"
    path.write_text(SCENARIO)
    bad.write_text("not json")
    for args, env, said in (
        (["--cluster", str(bad)], {}, f"{bad}: JSON syntax error: Expecting value (at line 1"),
        ([], {"SIMSYNC_NO_NAMESPACE": "1"}, "cannot make a private network namespace here"),
    ):
        result = subprocess.run(
            [sys.executable, "-m", "simsync", "crosscheck", str(path), *args],
            capture_output=True, text=True, timeout=120, env={**os.environ, **env},
        )  # fmt: skip
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("simsync: error: ") and said in lines[0]
    assert "--open-ports" in lines[0]


def test_a_given_cluster_spec_runs_on_its_addresses(tmp_path: Path) -> None:
    # --cluster, as for real hosts, tested on loopback only: the tasks listen where the
    # ClusterSpec says (inside the private network, where these ports are free)
    path, spec = tmp_path / "s.toml", tmp_path / "cluster.json"
    path.write_text(SCENARIO)
    addresses = {
        "ps": ["127.0.0.1:23456"],
        "worker": [f"127.0.0.1:{p}" for p in (23457, 23458, 23459)],
    }
    spec.write_text(json.dumps(addresses))
    result = subprocess.run(
        [sys.executable, "-m", "simsync", "crosscheck", str(path), "--steps", "3", "--json",
         "--cluster", str(spec)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    assert report["cluster"]["addresses"] == addresses
    assert report["values"]["ok"] and report["structure"]["ok"]
