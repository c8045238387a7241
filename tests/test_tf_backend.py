"""The TensorFlow backend, run for real on logical CPU devices."""

from __future__ import annotations

import functools
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from simsync.patterns import build
from simsync.scenario import (
    ClusterConfig,
    ComputeConfig,
    ModelConfig,
    Scenario,
    TrainingConfig,
)
from simsync.simulation import simulate

pytestmark = pytest.mark.tf

SCENARIOS = {
    "ps-straggler-softmax": Scenario(
        "ps",
        cluster=ClusterConfig(4, (1.0, 1.0, 1.0, 0.5)),
        compute=ComputeConfig(mean=0.002),
        model=ModelConfig(kind="softmax", features=8, classes=4, batch_size=16),
    ),
    "allreduce-exponential-mlp": Scenario(
        "ar",
        cluster=ClusterConfig(3, (1.0, 1.0, 1.0)),
        compute=ComputeConfig(distribution="exponential", mean=0.002),
        model=ModelConfig(kind="mlp", features=6, classes=3, hidden=(5, 4), batch_size=8),
        training=TrainingConfig(aggregation="allreduce"),
        costs={"apply": 0.0},
    ),
    "ps-linear": Scenario(
        "lin",
        cluster=ClusterConfig(2, (1.0, 1.0)),
        compute=ComputeConfig(mean=0.001),
        model=ModelConfig(kind="linear", features=5, classes=2, batch_size=4, learning_rate=0.05),
    ),
}
WARMUP, STEPS = 2, 3
ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def run_case(name: str):
    """Run a scenario on TensorFlow once per test session, and simulate it."""
    from simsync.tf_backend import run_on_tensorflow

    scenario = SCENARIOS[name].with_run(steps=STEPS, seed=3)
    real = run_on_tensorflow(scenario, warmup=WARMUP)
    simulated = simulate(scenario.with_run(steps=real.total_steps))
    return scenario, real, simulated


@pytest.fixture(params=sorted(SCENARIOS))
def case(request):
    return run_case(request.param)


def test_parameters_and_losses_match_the_simulator(case) -> None:
    _, real, simulated = case
    assert set(real.params) == set(simulated.trace.params)
    for name, value in real.params.items():
        np.testing.assert_allclose(value, simulated.trace.params[name], rtol=0, atol=1e-12)
    np.testing.assert_allclose(real.losses, [s.loss for s in simulated.trace.steps], rtol=1e-12)


def test_every_tensorflow_node_maps_to_an_ir_op_or_known_infrastructure(case) -> None:
    scenario, real, _ = case
    graph = build(scenario)
    assert not real.census.unmapped, real.census.unmapped
    assert real.census.mapped > 0
    ran = defaultdict(set)
    for record in real.trace.ops:
        ran[record.step].add(record.op)
    assert sorted(ran) == list(range(WARMUP, WARMUP + STEPS))
    assert all(ops == set(graph.nx.nodes) for ops in ran.values())


def test_real_trace_respects_every_dependency(case) -> None:
    scenario, real, _ = case
    graph = build(scenario)
    for step in range(WARMUP, WARMUP + STEPS):
        spans = {r.op: r for r in real.trace.ops if r.step == step}
        for src, dst in {(t.src, t.dst) for t in graph.edges()}:
            assert spans[dst].start >= spans[src].end, (step, src, dst)
        run = next(s for s in real.trace.steps if s.step == step)
        assert all(run.start <= r.start and r.end <= run.end for r in spans.values())


def test_versions_count_steps(case) -> None:
    _, real, _ = case
    assert real.trace.accesses
    for access in real.trace.accesses:
        assert access.version == (access.step + 1 if access.write else access.step)


def test_a_slow_device_does_proportionally_more_work() -> None:
    _, real, _ = run_case("ps-straggler-softmax")
    fast, slow = real.work_rows["tower_0/gradients"], real.work_rows["tower_3/gradients"]
    assert all(s == pytest.approx(2 * f, abs=1) for f, s in zip(fast, slow, strict=True))
    if real.devices.split is None:  # no GPU: logical CPU devices
        assert real.devices.kind == "logical-cpu"
        assert real.devices.mapping["/gpu:3"] == "/device:CPU:4"
    else:  # a GPU each, or virtual GPUs
        assert real.devices.kind in ("gpu", "virtual-gpu")
        assert real.devices.mapping["/gpu:3"].startswith("/device:GPU:")


def test_too_many_towers_for_a_started_tensorflow_is_explained() -> None:
    code = """
from simsync.scenario import Scenario, ClusterConfig, ComputeConfig
from simsync.tf_backend import run_on_tensorflow, BackendError
small = Scenario("s", cluster=ClusterConfig(2, (1.0, 1.0)), compute=ComputeConfig(mean=0.001))
run_on_tensorflow(small.with_run(steps=1), warmup=0)
big = Scenario("b", cluster=ClusterConfig(12, (1.0,) * 12), compute=ComputeConfig(mean=0.001))
try:
    run_on_tensorflow(big.with_run(steps=1), warmup=0)
except BackendError as error:
    print(error)
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]
    said = {  # without a GPU, logical CPU devices; with one, (virtual) GPU devices
        "12 towers need 13 logical CPU devices, but TensorFlow already started in this "
        "process with 9; run the scenario in a new process",
        "12 towers need 12 GPU devices, but TensorFlow already started in this process with "
        "8; run the scenario in a new process",
    }
    assert result.stdout.strip() in said


def test_an_op_kind_the_backend_cannot_lower_is_named() -> None:
    from simsync.ir import Client, Cost, Device, Graph, Op, Resource
    from simsync.tf_backend import BackendError
    from simsync.tf_backend.session.lower import lower
    from simsync.tf_backend.session.runtime import plan_devices

    graph = Graph()
    for device in ("/cpu:0", "/gpu:0"):
        graph.add_device(Device(device))
    graph.add_resource(Resource("q", "queue", "/cpu:0"))
    graph.add_op(Op("tower_0/enqueue_token", "enqueue_tokens", "/gpu:0", Cost(0.001), tower=0,
                    resource="q", amount=1))  # fmt: skip
    graph.add_client(Client("main", ("tower_0/enqueue_token",)))
    scenario = SCENARIOS["ps-linear"]
    with pytest.raises(
        BackendError,
        match=r"cannot lower op 'tower_0/enqueue_token': enqueue_tokens: it runs on a real "
        r"cluster",
    ):
        lower(graph, scenario.model, 0, plan_devices(list(graph.devices), 1))


def test_an_unknown_op_kind_fails_alike_in_the_simulator_and_on_tensorflow() -> None:
    from simsync.engine import Engine
    from simsync.errors import GraphError
    from simsync.ir import Client, Cost, Device, Graph, Op
    from simsync.tf_backend.session.lower import lower
    from simsync.tf_backend.session.runtime import plan_devices

    graph = Graph()
    graph.add_device(Device("/gpu:0"))
    graph.add_op(Op("shuffle", "shuffle", "/gpu:0", Cost(0.001)))
    graph.add_client(Client("main", ("shuffle",)))
    scenario = SCENARIOS["ps-linear"]
    messages = []
    for run in (
        lambda: Engine(graph, steps=1).run(),
        lambda: lower(graph, scenario.model, 0, plan_devices(list(graph.devices), 1)),
    ):
        with pytest.raises(GraphError) as error:
            run()
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith("op 'shuffle' has unknown kind 'shuffle'; known kinds: read, ")


def test_a_generic_op_lowers_as_a_wait_and_values_never_go_through_one() -> None:
    from simsync.ir import Tensor, graph_from_dict, graph_to_dict
    from simsync.tf_backend import BackendError
    from simsync.tf_backend.session.lower import lower
    from simsync.tf_backend.session.runtime import plan_devices

    scenario = SCENARIOS["ps-linear"]
    data = graph_to_dict(build(scenario))
    data["ops"].append({"name": "summary", "kind": "generic", "device": "/cpu:0"})
    data["tensors"] += [
        {"src": "tower_0/loss", "dst": "summary"},
        {"src": "summary", "dst": "apply_gradients", "control": True},
    ]
    graph = graph_from_dict(data)
    plan = plan_devices(list(graph.devices), 1)
    lowered = lower(graph, scenario.model, 0, plan)
    waits = [op for op in lowered.graph.get_operations() if op.name.startswith("summary/")]
    assert {op.type for op in waits} == {"NoOp"}  # it computes nothing, only waits
    assert any("tower_0/loss" in dep.name for op in waits for dep in op.control_inputs)
    graph.add_tensor(Tensor("summary", "tower_1/loss"))  # values would go through it
    with pytest.raises(BackendError, match=r"values are not computed: op 'tower_1/loss'"):
        lower(graph, scenario.model, 0, plan)


def test_missing_tensorflow_is_explained() -> None:
    # a Python where `import tensorflow` fails, as on a machine without it
    code = (
        "import sys; sys.modules['tensorflow'] = None\n"
        "from simsync.cli import main\n"
        "raise SystemExit(main(['crosscheck', 'examples/four_towers.toml', '--steps', '1']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 2
    assert result.stderr.strip().endswith("install it with: pip install tensorflow")
    assert "simsync: error: TensorFlow is not installed" in result.stderr


def test_step_times_come_from_untraced_steps() -> None:
    _, real, _ = run_case("ps-linear")
    traced = [s.step for s in real.trace.steps]
    timed = [step for step, _ in real.timed]
    assert traced == list(range(WARMUP, WARMUP + STEPS))
    assert timed == list(range(WARMUP + STEPS, WARMUP + 2 * STEPS))
    assert real.total_steps == WARMUP + 2 * STEPS and all(t > 0 for _, t in real.timed)


def test_a_run_reports_its_steps_and_the_time_left() -> None:
    """A long cross-check ran silently: the steps are counted as they go, with an estimate."""
    from simsync.tf_backend import run_on_tensorflow

    said: list[str] = []
    scenario = SCENARIOS["ps-linear"].with_run(steps=STEPS)
    run_on_tensorflow(scenario, warmup=WARMUP, on_progress=said.append)
    steps = [m for m in said if m.startswith("TensorFlow: step ")]
    total = WARMUP + 2 * STEPS
    assert steps and steps[-1] == f"TensorFlow: step {total} of {total}", said
    assert all("left" in m for m in steps[:-1])
