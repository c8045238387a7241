"""A real GPU step, read right without a GPU.

``fixtures/gpu/h100_step_stats.json.gz`` is the ``RunMetadata.step_stats`` of one traced step of
examples/four_towers.toml on 4 virtual GPUs of an NVIDIA H100, captured by
``fixtures/gpu/capture_step_stats.py`` (its provenance is in the file). On a GPU TensorFlow
lists each op several times: on its executor's device (the launch), as kernels on each stream
and again on ``stream:all``, copies on ``stream:N<Memcpy...>`` and again on ``memcpy``.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from simsync.patterns import build
from simsync.scenario import Scenario, load_scenario
from simsync.tf_backend.session.step_stats import read_step_stats, tracer_lane

pytestmark = pytest.mark.tf

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "gpu" / "h100_step_stats.json.gz"


@pytest.fixture(scope="module")
def captured() -> tuple[Any, dict[str, Any]]:
    from google.protobuf import json_format
    from tensorflow.core.framework.step_stats_pb2 import StepStats

    data = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    return json_format.ParseDict(data["step_stats"], StepStats()), data["provenance"]


def scenario_of(provenance: dict[str, Any]) -> Scenario:
    scenario = load_scenario(ROOT / provenance["scenario"])
    compute = dataclasses.replace(scenario.compute, mean=provenance["compute_mean"])
    return dataclasses.replace(scenario, compute=compute).with_run(steps=1)


def lanes(step_stats: Any) -> Counter[str]:
    """Records per kind of lane: executor, stream (one CUDA stream), all, copy, memcpy, sync."""
    found: Counter[str] = Counter()
    for device in step_stats.dev_stats:
        lane = tracer_lane(device.device)
        if lane is None:
            kind = "executor"
        elif lane[1] is not None:
            kind = "copy"
        else:
            kind = lane[0] if lane[0] in ("stream:all", "memcpy", "sync") else "stream"
        found[kind] += len(device.node_stats)
    return found


def test_the_fixture_is_a_gpu_step_with_its_provenance(captured: tuple[Any, dict]) -> None:
    step_stats, provenance = captured
    assert "H100" in provenance["device"] and provenance["tensorflow"]
    assert provenance["devices"] == "4 towers on 1 GPU: 4 virtual GPUs"
    found = lanes(step_stats)
    # the same kernels twice, the same copies twice: what must be read once
    assert found["stream"] == found["stream:all"] > 0
    assert found["copy"] == found["memcpy"] > 0


def test_each_execution_is_read_once(captured: tuple[Any, dict]) -> None:
    step_stats, _ = captured
    read = read_step_stats(step_stats)
    assert len(read.nodes) == lanes(step_stats)["executor"]
    assert len(read.copies) == lanes(step_stats)["copy"]
    assert read.on_gpu
    # kernels time the ops that launched some, on the virtual GPUs only
    for node in read.nodes:
        if node.timed_by == "kernels":
            assert "/device:GPU:" in node.device
        assert node.start <= node.end


def test_every_ir_op_once_kernel_timed_on_the_gpus(captured: tuple[Any, dict]) -> None:
    from simsync.tf_backend.session.tracing import NodeCensus, traced_step

    step_stats, provenance = captured
    graph = build(scenario_of(provenance))
    census = NodeCensus()
    records, transfers = traced_step(step_stats, graph, 0, 0.0, census, {})
    assert Counter(r.op for r in records) == Counter(list(graph.nx.nodes))  # each op once
    assert (
        census.mapped
        + sum(census.infrastructure.values())
        - census.infrastructure["copies"]
        + sum(census.unmapped.values())
        == lanes(step_stats)["executor"]
    )
    assert census.unmapped == Counter()
    for kind in ("forward", "backward"):  # the towers' work: kernels of the GPUs' streams
        assert census.timing_source(kind) == "kernels"
    for kind in ("aggregate", "apply"):  # on /cpu:0: the executor's records
        assert census.timing_source(kind) == "executor"
    # the copies of the towers' results to /cpu:0, as transfers on the link
    assert {(t.src, t.dst) for t in transfers} >= {
        (f"tower_{t}/gradients", "average_gradients") for t in range(4)
    }
    for transfer in transfers:
        assert graph.op(transfer.src).device != graph.op(transfer.dst).device
        assert transfer.start <= transfer.end


def test_the_step_keeps_the_graphs_order(captured: tuple[Any, dict]) -> None:
    """Every IR edge is a happens-before relation on the GPU step too, with the ops timed by
    their kernels."""
    from simsync.crosscheck.compare import structure
    from simsync.tf_backend.session.tracing import NodeCensus, traced_step
    from simsync.trace import StepRecord, Trace

    step_stats, provenance = captured
    graph = build(scenario_of(provenance))
    records, _ = traced_step(step_stats, graph, 0, 0.0, NodeCensus(), {})
    trace = Trace(source="tensorflow", ops=records)
    trace.steps.append(StepRecord("main", 0, min(r.start for r in records), 0.0))
    result = structure(graph, trace)
    assert result["ok"], result["violations"][:3]
    assert result["checked"] > 0


def test_a_cluster_node_is_counted_once(captured: tuple[Any, dict]) -> None:
    """What a cluster worker records of a run: every execution once (the ledger counts each
    apply once per global step)."""
    from tensorflow.core.protobuf.config_pb2 import RunMetadata

    from simsync.tf_backend.cluster.worker import node_timings

    step_stats, _ = captured
    metadata = RunMetadata()
    metadata.step_stats.CopyFrom(step_stats)
    timings = node_timings(metadata)
    assert len(timings) == lanes(step_stats)["executor"]
    once = Counter((device, name, start) for device, name, start, _ in timings)
    assert max(once.values()) == 1
