"""GPUs without a GPU: who gets which GPU on a machine with 0, 1 and 4 of them (the device plan
of one process's towers, the tasks of a real cluster), and what the simulator makes of virtual
GPUs that share one GPU."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from simsync.errors import ScenarioError
from simsync.patterns import build
from simsync.scenario import ClusterConfig, ComputeConfig, Scenario, load_scenario
from simsync.scenario.profile import Profile, apply_profile, load_profile, save_profile
from simsync.simulation import median_step_time
from simsync.tf_backend.session.gpus import (
    split_gpus,
    task_environment,
    tower_gpus,
    worker_gpu,
    workers_on_gpus,
)
from simsync.tf_backend.session.runtime import gpu_plan

ROOT = Path(__file__).resolve().parent.parent
IR_DEVICES = ["/cpu:0", "/gpu:0", "/gpu:1", "/gpu:2", "/gpu:3"]


# ## the towers of one process -------------------------------------------------------------
@pytest.mark.parametrize(
    ("gpus", "kind", "devices", "described"),
    [
        (1, "virtual-gpu", [0, 1, 2, 3], "4 towers on 1 GPU: 4 virtual GPUs"),
        (4, "gpu", [0, 2, 4, 6], "4 GPUs and the CPU"),
        (8, "gpu", [0, 1, 2, 3], "4 GPUs and the CPU"),
    ],
)
def test_four_towers_on_a_machine_with_gpus(
    gpus: int, kind: str, devices: list[int], described: str
) -> None:
    plan = gpu_plan(IR_DEVICES, 4, split_gpus(gpus, 4))
    assert plan.kind == kind and plan.describe() == described
    assert [plan.mapping[f"/gpu:{t}"] for t in range(4)] == [f"/device:GPU:{d}" for d in devices]
    assert plan.mapping["/cpu:0"] == "/device:CPU:0" and plan.host_cores is None
    # the towers go round the physical GPUs: each has a GPU of its own while there are enough
    physical = [d // plan.split.per_gpu for d in devices] if plan.split else []
    assert physical == [t % gpus for t in range(4)]
    assert plan.gpus == min(gpus, 4)


def test_one_split_serves_every_small_scenario() -> None:
    """TensorFlow fixes a process's GPU devices at its first session: the split made for one
    tower also holds eight."""
    split = split_gpus(1, 1)
    assert split.devices == 8 and tower_gpus(8, split) == list(range(8))
    with pytest.raises(ValueError, match="9 towers on 8 GPU devices"):
        tower_gpus(9, split)


@pytest.mark.tf
def test_the_session_makes_the_virtual_gpus_of_the_plan() -> None:
    from simsync.tf_backend.session.runtime import session_config

    one = session_config(gpu_plan(IR_DEVICES, 4, split_gpus(1, 4)))
    (virtual,) = one.gpu_options.experimental.virtual_devices
    assert list(virtual.memory_limit_mb) == [512.0] * 8 and not one.gpu_options.allow_growth
    four = session_config(gpu_plan(IR_DEVICES, 4, split_gpus(4, 4)))
    assert [len(v.memory_limit_mb) for v in four.gpu_options.experimental.virtual_devices] == [
        2
    ] * 4
    whole = session_config(gpu_plan(IR_DEVICES, 4, split_gpus(8, 4)))
    assert not whole.gpu_options.experimental.virtual_devices and whole.gpu_options.allow_growth


@pytest.mark.tf
def test_without_a_gpu_the_towers_are_logical_cpus() -> None:
    from simsync.tf_backend.session.runtime import load_tensorflow, plan_devices

    if load_tensorflow().config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    plan = plan_devices(IR_DEVICES, 4)
    assert plan.kind == "logical-cpu" and plan.split is None and plan.gpus == 0


# ## the tasks of a real cluster -------------------------------------------------------------
@pytest.mark.parametrize(
    ("gpus", "used", "said"),
    [
        (0, [None, None, None, None], ""),
        (1, [0, 0, 0, 0], "4 workers share 1 GPU"),
        (4, [0, 1, 2, 3], "each worker on a GPU of its own"),
    ],
)
def test_cluster_tasks_on_a_machine_with_gpus(gpus: int, used: list[int | None], said: str) -> None:
    assert task_environment("ps") == {"CUDA_VISIBLE_DEVICES": ""}  # the ps never sees a GPU
    assert task_environment("worker") == {}
    assert [worker_gpu(w, gpus) for w in range(4)] == used
    assert workers_on_gpus(4, gpus) == said


@pytest.mark.tf
def test_a_worker_sees_its_own_gpu_and_grows_into_it() -> None:
    from simsync.tf_backend.cluster.server import server_config
    from simsync.tf_backend.session.runtime import load_tensorflow

    tf = load_tensorflow()
    worker, ps = server_config(tf, "worker", 3), server_config(tf, "ps", 0)
    if tf.config.list_physical_devices("GPU"):
        gpus = len(tf.config.list_physical_devices("GPU"))
        assert worker.gpu_options.visible_device_list == str(3 % gpus)
        assert worker.gpu_options.allow_growth
    else:
        assert worker.gpu_options.visible_device_list == ""
    assert ps.gpu_options.visible_device_list == ""


# ## what the simulator makes of virtual GPUs ------------------------------------------------
def _towers(gpus: int | None, contention: float = 0.0, towers: int = 4) -> Scenario:
    cluster = ClusterConfig(towers, gpus=gpus, gpu_contention=contention)
    return Scenario("towers", cluster=cluster, compute=ComputeConfig(mean=0.01))


def test_virtual_gpus_of_one_gpu_share_its_compute() -> None:
    graph = build(_towers(1, 0.5))
    assert {graph.devices[f"/gpu:{t}"].host for t in range(4)} == {"gpu:0"}
    assert graph.devices["/cpu:0"].host == "localhost"
    assert graph.host_cores == {"gpu:0": 4}
    assert graph.core_efficiency["gpu:0"] == pytest.approx(1 / (1 + 3 * 0.5))
    # GPUs of their own share nothing
    own = build(_towers(4))
    assert own.host_cores == {} and len({own.devices[f"/gpu:{t}"].host for t in range(4)}) == 4


def test_contention_stretches_the_step_from_side_by_side_to_taking_turns() -> None:
    alone = median_step_time(_towers(None), 5)
    side_by_side = median_step_time(_towers(1, 0.0), 5)
    in_turns = median_step_time(_towers(1, 1.0), 5)
    half = median_step_time(_towers(1, 0.5), 5)
    assert side_by_side == pytest.approx(alone)
    assert in_turns == pytest.approx(4 * alone, rel=0.01)
    assert alone < half < in_turns
    # two GPUs of two virtual GPUs each: two towers at a time
    assert median_step_time(_towers(2, 1.0), 5) == pytest.approx(2 * alone, rel=0.01)


def test_gpu_keys_load_from_a_file_and_warn_where_unused(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "four_towers.toml").read_text()
    path = tmp_path / "s.toml"
    path.write_text(text.replace("[cluster]\n", "[cluster]\ngpus = 1\ngpu_contention = 0.25\n"))
    scenario = load_scenario(path)
    assert scenario.cluster.gpus == 1 and scenario.cluster.gpu_contention == 0.25
    path.write_text(text.replace("[cluster]\n", "[cluster]\ngpu_contention = 0.25\n"))
    assert any(
        "gpu_contention is ignored: used only with gpus" in n for n in load_scenario(path).notes
    )


# ## a GPU profile --------------------------------------------------------------------------
GPU_PROFILE = Profile(
    costs={"read": 2e-5, "apply": 5e-5},
    compute_scale=1.1,
    compute_overhead=0.0,
    session_run=3e-4,
    latency_us=40.0,
    host_cores=16,
    gpus=1,
    gpu_contention=0.3,
    bandwidth_gbps=100.0,
    devices="gpu",
    tensorflow="2.21.0",
)


def test_a_gpu_profile_is_complete_and_puts_the_towers_on_its_gpu(tmp_path: Path) -> None:
    saved = save_profile(GPU_PROFILE, tmp_path / "gpu.json")
    data = json.loads((tmp_path / "gpu.json").read_text())
    assert data["host_cores"] == 16 and data["gpus"] == 1
    assert load_profile(tmp_path / "gpu.json") == dataclasses.replace(saved, source="")
    four = apply_profile(load_scenario(ROOT / "examples" / "four_towers.toml"), GPU_PROFILE)
    assert four.cluster.gpus == 1 and four.cluster.gpu_contention == 0.3
    assert four.cluster.link.bandwidth_gbps == 100.0
    assert build(four).host_cores == {"localhost": 16, "gpu:0": 4}


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("gpus", 0, "gpus: expected an integer >= 1, or null"),
        ("gpu_contention", 2, "gpu_contention: expected a number from 0 to 1"),
        ("bandwidth_gbps", -1, "bandwidth_gbps: expected a number from 1e-06 to 1e+09, or null"),
    ],
)
def test_a_bad_gpu_key_of_a_profile_is_one_line(
    tmp_path: Path, key: str, value: float, said: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**GPU_PROFILE.to_json(), key: value}))
    with pytest.raises(ScenarioError, match=re.escape(said)) as error:
        load_profile(path)
    assert "\n" not in str(error.value)
