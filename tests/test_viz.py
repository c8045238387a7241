"""Renderings: terminal views compared as text, DOT structure, PNG files, Chrome traces."""

from __future__ import annotations

import io
import json
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from simsync.engine import Engine
from simsync.ir import Client, Cost, Device, Graph, Op, Tensor, crosses_devices
from simsync.kinds import sync_points
from simsync.patterns import build, build_towers
from simsync.scenario import ClusterConfig, ComputeConfig, LinkConfig, Scenario, TrainingConfig
from simsync.simulation import Simulation, simulate, summary
from simsync.trace import OpRecord, StepRecord, Trace
from simsync.viz import (
    GraphView,
    SummaryView,
    Timeline,
    chrome_trace,
    overlaps,
    to_dot,
    write_chrome_trace,
    write_png,
)

WIDTH = 80
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def render(renderable: Any, width: int = WIDTH) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(renderable)
    return out.getvalue()


def scenario(
    speeds: tuple[float, ...],
    aggregation: str = "parameter_server",
    distribution: str = "constant",
    bandwidth_gbps: float = float("inf"),
    latency_us: float = 0.0,
    steps: int = 3,
    **costs: float,
) -> Scenario:
    return Scenario(
        "viz",
        cluster=ClusterConfig(len(speeds), speeds, link=LinkConfig(bandwidth_gbps, latency_us)),
        compute=ComputeConfig(mean=0.01, distribution=distribution),
        training=TrainingConfig(aggregation=aggregation),
        costs=dict(costs),
    ).with_run(steps=steps)


def run(speeds: tuple[float, ...], **kwargs: Any) -> Simulation:
    return simulate(scenario(speeds, **kwargs), numerics=False)


def graph_of(towers: int, aggregation: str = "parameter_server") -> Graph:
    return build(scenario((1.0,) * towers, aggregation))


def line_with(text: str, needle: str) -> str:
    return next(line for line in text.splitlines() if needle in line)


def bar(text: str, device: str) -> str:
    """The chart part of a device's row of a Timeline rendering."""
    return line_with(text, device + " ").split(" ", 1)[1].strip()


# ## GraphView ---------------------------------------------------------------------------


def test_graph_view_has_one_lane_per_tower_and_the_sync_point_in_the_shared_lane() -> None:
    text = render(GraphView(graph_of(2)))
    header = line_with(text, "gen")
    assert re.search(r"gen\s+│ tower_0\s+│ tower_1\s+│ shared", header)
    shared_column = header.index("shared")
    sync_line = line_with(text, "◆ average_gradients")
    assert sync_line.index("◆") == shared_column
    # The sync point's row: generation 3, nothing in the tower lanes.
    cells = [cell.strip() for cell in sync_line.split("│")[1:-1]]
    assert cells == ["3", "", "", "◆ average_gradients"]
    assert "SYNC POINT: waits" in text and "for tower_0..1" in text
    assert "◆ SYNC POINT: an op whose inputs come from more than one" in text
    # One row per topological generation: read/dequeue, loss, gradients, average, apply.
    assert [
        line.split("│")[1].strip() for line in text.splitlines() if re.match(r"│\s+\d+ │", line)
    ] == ["0", "1", "2", "3", "4"]


def test_graph_view_drops_the_tower_scope_and_shows_devices() -> None:
    text = render(GraphView(graph_of(2)))
    assert "tower_0/loss" not in text
    loss_row = line_with(text, "loss")
    assert loss_row.count("loss") == 2
    device_row = text.splitlines()[text.splitlines().index(loss_row) + 1]
    assert "/gpu:0" in device_row and "/gpu:1" in device_row
    read_device_row = text.splitlines()[
        text.splitlines().index(line_with(text, "read_variables")) + 1
    ]
    assert read_device_row.count("/cpu:0") == 2  # parameter server: variables on the CPU


def test_graph_view_allreduce_is_shared_on_all_gpus_and_apply_is_per_tower() -> None:
    text = render(GraphView(graph_of(2, "allreduce")))
    assert "◆ allreduce_gradients" in text and "/gpu:0-1" in text
    assert line_with(text, "apply_gradients").count("apply_gradients") == 2


def test_graph_view_elides_towers_that_do_not_fit() -> None:
    text = render(GraphView(graph_of(1024)))
    assert all(len(line) <= WIDTH for line in text.splitlines())
    header = line_with(text, "gen")
    assert "tower_0" in header and "tower_1023" not in text
    assert "… 1,022 more" in text or "… 1,023 more" in text
    assert "for tower_0..1023" in text
    assert "+1022 ops" in text or "+1023 ops" in text


def test_graph_view_respects_max_towers() -> None:
    text = render(GraphView(graph_of(4), max_towers=1), width=200)
    header = line_with(text, "gen")
    assert "tower_0" in header and "tower_1" not in header
    assert "… 3 more towers" in header
    wide = render(GraphView(graph_of(4)), width=200)
    assert all(f"tower_{t}" in line_with(wide, "gen") for t in range(4))


# ## Timeline ----------------------------------------------------------------------------


def test_timeline_has_one_row_per_device_cpu_first_then_gpus_in_numeric_order() -> None:
    sim = run((1.0,) * 12, steps=1)
    text = render(Timeline(sim.trace, sync_points=sim.sync_points, steps=1))
    rows = [line.split()[0] for line in text.splitlines() if line.startswith("/")]
    assert rows == ["/cpu:0"] + [f"/gpu:{i}" for i in range(12)]
    assert all(len(line) <= WIDTH for line in text.splitlines())


def test_timeline_straggler_bar_is_twice_as_long() -> None:
    sim = run((1.0, 0.5), steps=2)
    text = render(Timeline(sim.trace, sync_points=sim.sync_points, steps=2))
    fast, slow = bar(text, "/gpu:0"), bar(text, "/gpu:1")
    busy = [sum(c in "FB" for c in row) for row in (fast, slow)]
    assert 1.8 <= busy[1] / busy[0] <= 2.2
    # The fast tower waits at the sync point for about as long as it computed.
    assert 0.8 <= fast.count("-") / busy[0] <= 1.2
    assert "-" not in slow
    assert line_with(text, "sync ").count("◆") == 2  # one sync point per step
    assert "steps 0–1" in text


def test_timeline_axis_is_in_milliseconds() -> None:
    sim = run((1.0, 0.5), steps=2)  # two steps of 20 ms
    text = render(Timeline(sim.trace, sync_points=sim.sync_points, steps=2))
    labels = next(line for line in text.splitlines() if line.startswith("ms ")).split()
    assert labels[0] == "ms" and labels[1] == "0"
    assert {"10", "20", "30"} <= set(labels)
    assert "40 ms" in text.splitlines()[0]


def test_timeline_shows_only_the_first_steps() -> None:
    sim = run((1.0, 1.0), steps=5)
    two = render(Timeline(sim.trace, sync_points=sim.sync_points, steps=2))
    assert "├step 1" in two and "step 2" not in two
    four = render(Timeline(sim.trace, sync_points=sim.sync_points, steps=4))
    assert line_with(four, "sync ").count("◆") == 4


def test_timeline_with_one_device() -> None:
    trace = Trace(
        ops=[
            OpRecord("f", "forward", ("/gpu:0",), "main", 0, 0.0, 0.0, 0.01),
            OpRecord("b", "backward", ("/gpu:0",), "main", 0, 0.01, 0.01, 0.03),
        ],
        steps=[StepRecord("main", 0, 0.0, 0.03)],
    )
    text = render(Timeline(trace))
    assert [line.split()[0] for line in text.splitlines() if line.startswith("/")] == ["/gpu:0"]
    row = bar(text, "/gpu:0")
    assert set(row) == {"F", "B"} and 1.8 <= row.count("B") / row.count("F") <= 2.2
    assert "sync" not in text  # no sync points, no sync row


def test_timeline_with_zero_duration_ops_does_not_divide_by_zero() -> None:
    # a scenario may not say mean = 0, but a hand-built graph may have free ops only
    graph = build_towers(
        Scenario("zero", cluster=ClusterConfig(2, (1.0, 1.0)), compute=ComputeConfig(mean=0.0))
    )
    trace = Engine(graph, steps=2).run()
    assert trace.makespan == 0
    text = render(Timeline(trace, sync_points=sync_points(graph)))
    assert "lowercase: op shorter than a character" in text
    assert bar(text, "/cpu:0")[0] in "ra"  # an instant drawn in lower case
    empty = render(Timeline(Trace()))
    assert "no steps" in empty


def test_timeline_respects_device_order() -> None:
    sim = run((1.0, 1.0), steps=1)
    text = render(
        Timeline(sim.trace, sync_points=sim.sync_points, steps=1, device_order=["/gpu:1", "/gpu:0"])
    )
    assert [line.split()[0] for line in text.splitlines() if line.startswith("/")] == [
        "/gpu:1",
        "/gpu:0",
    ]


@pytest.mark.parametrize("width", [40, 80, 132])
def test_timeline_fits_the_console(width: int) -> None:
    sim = run((1.0, 0.5, 1.0), aggregation="allreduce", steps=2)
    text = render(Timeline(sim.trace, sync_points=sim.sync_points), width=width)
    assert all(len(line) <= width for line in text.splitlines())
    assert "= allreduce" in text


# ## DOT ---------------------------------------------------------------------------------


@pytest.mark.parametrize("aggregation", ["parameter_server", "allreduce"])
def test_dot_structure(aggregation: str) -> None:
    graph = build(scenario((1.0, 1.0, 0.5), aggregation))
    dot = to_dot(graph)
    assert dot.startswith('digraph "viz" {') and dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}")
    assert dot.count('"') % 2 == 0
    placed = {op.device for op in graph.ops() if len(op.devices) == 1}
    assert len(re.findall(r"subgraph cluster_\d+ \{", dot)) == len(placed)
    assert {f'label="{d}"' for d in placed} <= set(re.findall(r'label="/[^"]+"', dot))
    edges = set(re.findall(r'^\s*"([^"]+)" -> "([^"]+)"', dot, flags=re.MULTILINE))
    assert edges == {(t.src, t.dst) for t in graph.edges()}
    assert dot.count("doubleoctagon") == len(sync_points(graph)) == 1
    crossing = [t for t in graph.edges() if crosses_devices(graph, t)]
    assert len(re.findall(r'-> "[^"]+" \[label="[\d.]+ [KMG]?B"', dot)) == len(crossing)


def sync_replicas(workers: int = 3, required: int | None = None) -> Graph:
    """SyncReplicasOptimizer's graph: a token queue and one accumulator per variable."""
    return build(
        Scenario(
            "replicas",
            cluster=ClusterConfig(workers),
            training=TrainingConfig(mode="sync_replicas", replicas_to_aggregate=required),
        )
    )


def test_dot_draws_each_resource_in_its_devices_cluster_with_who_puts_and_gets() -> None:
    graph = sync_replicas()
    dot = to_dot(graph)
    nodes = re.findall(r'^\s+"([^"]+) \(resource\)" \[[^]]*shape=cylinder', dot, re.MULTILINE)
    assert sorted(nodes) == sorted(graph.resources)  # three: the queue, two accumulators
    # inside the parameter server's cluster, the one device that holds them
    cluster = dot[dot.index('label="/job:ps/task:0"') :]
    assert all(f'"{name} (resource)" [' in cluster[: cluster.index("  }")] for name in nodes)
    dotted = re.findall(r'^\s+"([^"]+)" -> "([^"]+)" \[style=dotted[^]]*label="(\w+)"', dot, re.M)
    kernel = "layer_0/kernel/grad_accum (resource)"
    pushes = {(src, label) for src, dst, label in dotted if dst == kernel}
    assert pushes == {(f"worker_{w}/push_gradients/layer_0/kernel", "push") for w in range(3)}
    takes = {(dst, label) for src, dst, label in dotted if src == kernel}
    assert takes == {("sync_replicas/take_gradients/layer_0/kernel", "take")}
    queue = "sync_token_q (resource)"
    assert {(d, lab) for s, d, lab in dotted if s == queue} == {
        (f"worker_{w}/dequeue_token", "dequeue") for w in range(3)
    }
    assert {(s, lab) for s, d, lab in dotted if d == queue} == {
        ("sync_replicas/enqueue_tokens", "enqueue")
    }
    # every op is still drawn once; the takes are the sync points
    assert dot.count("doubleoctagon") == 2


def test_graph_view_says_a_take_waits_for_r_of_the_workers() -> None:
    text = render(GraphView(sync_replicas(4, required=3)), width=120)
    assert "SYNC POINT: waits" in text and "for 3 of worker_0..3" in text
    assert "a token queue on /job:ps/task:0" in text  # the resources, listed


def test_dot_quotes_awkward_names() -> None:
    graph = Graph(name='my "graph"')
    graph.add_device(Device("/gpu:0"))
    graph.add_op(Op('a"b', "forward", "/gpu:0", Cost(0.1)))
    graph.add_op(Op("c\\d", "backward", "/gpu:0", Cost(0.1)))
    graph.add_tensor(Tensor('a"b', "c\\d", nbytes=4))
    graph.add_client(Client("main", ("c\\d",)))
    dot = to_dot(graph)
    assert 'digraph "my \\"graph\\"" {' in dot
    assert '"a\\"b" -> "c\\\\d";' in dot


# ## PNG ---------------------------------------------------------------------------------


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.parametrize("towers", [1, 2, 8])
def test_png_is_a_real_picture(tmp_path: Path, towers: int) -> None:
    path = tmp_path / "graph.png"
    write_png(graph_of(towers), path)
    width, height = png_size(path)
    assert path.stat().st_size > 20_000
    assert width >= 800 and height >= 300


def test_png_draws_a_few_lanes_of_many_towers(tmp_path: Path) -> None:
    eight, many = tmp_path / "eight.png", tmp_path / "many.png"
    write_png(graph_of(8), eight)
    write_png(graph_of(64), many)
    # Both draw eight tower lanes; the many-tower picture only adds a line of note.
    assert png_size(many)[0] == png_size(eight)[0]
    assert 0 < png_size(many)[1] - png_size(eight)[1] < 60


def test_png_draws_the_resources_in_a_band_of_their_own(tmp_path: Path) -> None:
    from simsync.viz.png import RESOURCES, _layout

    graph = sync_replicas()
    layout = _layout(graph, 8)
    assert set(layout.resources) == set(graph.resources)
    label, top, bottom = layout.lanes[-1]
    assert label == RESOURCES
    assert all(top < y < bottom for _, y in layout.resources.values())
    assert all(y < top for _, y in layout.position.values())  # below every op
    path = tmp_path / "replicas.png"
    write_png(graph, path)
    assert png_size(path)[1] > 300
    assert _layout(graph_of(2), 8).resources == {}  # the tower loop has none


def test_importing_viz_imports_neither_matplotlib_nor_simpy() -> None:
    code = (
        "import sys, simsync.viz; "
        "print(sorted(m for m in ('matplotlib', 'simpy', 'tensorflow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ## Chrome trace --------------------------------------------------------------------------


def lane_names(doc: dict[str, Any]) -> dict[tuple[int, int], str]:
    return {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }


def complete(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def test_chrome_trace_processes_threads_and_events() -> None:
    sim = run((1.0, 0.5), bandwidth_gbps=1.0, latency_us=10, steps=2)
    doc = json.loads(
        json.dumps(chrome_trace([("simulated", sim.trace), ("tensorflow", sim.trace)]))
    )
    assert doc["displayTimeUnit"] == "ms"
    processes = {
        e["pid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    assert processes == {1: "simulated", 2: "tensorflow"}
    lanes = lane_names(doc)
    assert sorted(name for (pid, _), name in lanes.items() if pid == 1) == sorted(
        ["/cpu:0", "/gpu:0", "/gpu:1", "send /cpu:0", "send /gpu:0", "send /gpu:1", "client main"]
    )
    events = complete(doc)
    assert all((e["pid"], e["tid"]) in lanes for e in events)
    per_process = [e for e in events if e["pid"] == 1]
    ops = [e for e in per_process if e["cat"] not in ("transfer", "step")]
    assert len(ops) == len(sim.trace.ops)
    transfers = [e for e in per_process if e["cat"] == "transfer"]
    assert len(transfers) == len(sim.trace.transfers) > 0
    assert all(lanes[1, e["tid"]].startswith("send ") for e in transfers)
    assert all(e["args"]["arrival"] >= e["ts"] + e["dur"] for e in transfers)
    steps = [e for e in per_process if e["cat"] == "step"]
    assert [e["name"] for e in steps] == ["step 0", "step 1"]
    assert all(lanes[1, e["tid"]] == "client main" for e in steps)


def test_chrome_trace_times_are_microseconds_with_op_args() -> None:
    sim = run((1.0, 0.5), steps=1)
    doc = chrome_trace([("simulated", sim.trace)])
    lanes = lane_names(doc)
    slow = next(e for e in complete(doc) if e["name"] == "tower_1/gradients")
    assert lanes[1, slow["tid"]] == "/gpu:1"
    assert slow["dur"] == pytest.approx(0.01 * 2 / 3 / 0.5 * 1e6, abs=0.01)
    assert slow["args"]["step"] == 0 and slow["args"]["kind"] == "backward"
    assert slow["args"]["ready"] == slow["ts"] and slow["args"]["queued"] == 0


def test_chrome_trace_puts_a_collective_on_every_device_lane() -> None:
    sim = run((1.0, 1.0, 1.0), aggregation="allreduce", steps=2)
    doc = chrome_trace([("simulated", sim.trace)])
    lanes = lane_names(doc)
    collective = [e for e in complete(doc) if e["name"] == "allreduce_gradients"]
    assert sorted(lanes[1, e["tid"]] for e in collective) == sorted(
        ["/gpu:0", "/gpu:1", "/gpu:2"] * 2
    )


def test_write_chrome_trace(tmp_path: Path) -> None:
    sim = run((1.0, 0.5), steps=2)
    path = tmp_path / "trace.json"
    write_chrome_trace(path, [("simulated", sim.trace)])
    assert json.loads(path.read_text()) == chrome_trace([("simulated", sim.trace)])


def test_overlaps_finds_an_overlap() -> None:
    sim = run((1.0, 0.5), steps=2)
    events = complete(chrome_trace([("simulated", sim.trace)]))
    assert overlaps(events) == []
    forward = next(e for e in events if e["name"] == "tower_0/loss")
    moved = dict(forward, ts=forward["ts"] + forward["dur"] / 2)
    found = overlaps([*events, moved])
    assert found and all(moved in pair for pair in found)


@settings(max_examples=40, deadline=None)
@given(
    speeds=st.lists(st.sampled_from([0.25, 0.5, 1.0, 2.0]), min_size=1, max_size=6),
    distribution=st.sampled_from(["constant", "exponential"]),
    bandwidth_gbps=st.sampled_from([float("inf"), 0.05, 10.0]),
    latency_us=st.sampled_from([0.0, 25.0]),
    aggregation=st.sampled_from(["parameter_server", "allreduce"]),
    seed=st.integers(0, 1000),
)
def test_chrome_trace_never_overlaps_on_a_lane(
    speeds: list[float],
    distribution: str,
    bandwidth_gbps: float,
    latency_us: float,
    aggregation: str,
    seed: int,
) -> None:
    sim = simulate(
        scenario(
            tuple(speeds),
            aggregation,
            distribution,
            bandwidth_gbps,
            latency_us,
            steps=4,
            read=0.0005,
            aggregate=0.001,
        ).with_run(seed=seed),
        numerics=False,
    )
    doc = chrome_trace([("simulated", sim.trace), ("again", sim.trace)])
    assert overlaps(doc["traceEvents"]) == []
    assert len(complete(doc)) == 2 * (
        sum(len(r.devices) for r in sim.trace.ops) + len(sim.trace.transfers) + len(sim.trace.steps)
    )


# ## SummaryView ---------------------------------------------------------------------------


def test_summary_view_shows_numbers_and_who_waited_for_whom() -> None:
    sim = simulate(scenario((1.0, 0.5), steps=20))
    text = render(SummaryView(summary(sim)))
    assert "Scenario viz" in text
    assert "mode sync · aggregation parameter_server · 2 towers · 20 steps" in text
    assert re.search(r"step time mean \(ms\)\s+20\.000", text)
    assert re.search(r"step time p95 \(ms\)\s+20\.000", text)
    assert "throughput (samples/s)" in text and "final loss" in text
    assert "Sync points: who waited for whom" in text
    fast, slow = line_with(text, "tower_0 "), line_with(text, "tower_1 ")
    assert "average_gradients" in fast and "10.000" in fast and "0/20" in fast
    assert "0.000" in slow and "20/20" in slow and "straggler" in slow
    assert "straggler" not in fast


def test_summary_view_marks_no_straggler_when_nobody_waited() -> None:
    text = render(SummaryView(summary(simulate(scenario((1.0, 1.0), steps=2)))))
    assert "Sync points: who waited for whom" in text and "straggler" not in text


def test_summary_view_renders_a_summary_read_back_from_json() -> None:
    data = json.loads(
        json.dumps(summary(simulate(scenario((1.0,) * 39 + (0.5,), "allreduce", steps=10))))
    )
    text = render(SummaryView(data, max_towers=5))
    assert "allreduce_gradients" in text
    assert "◀ straggler" in line_with(text, "│ tower_39")
    assert "straggler" not in line_with(text, "│ tower_4")
    assert re.search(r"│ …\s+│.*│ \+34 towers\s+│", text)


def test_summary_view_marks_a_tower_last_only_for_its_turn_at_a_port_last_in_line() -> None:
    """16 equal towers behind one parameter server's port (lesson 3): tower_15 gets the
    variables last and is last every step, yet its work is the others': it queued, and the
    table says so instead of calling it a straggler."""
    from simsync.scenario import load_scenario

    path = Path(__file__).resolve().parent.parent / "lessons/03-as-slow-as-the-slowest-tower"
    result = summary(simulate(load_scenario(path / "ps_16.toml").with_run(steps=6)))
    assert result["waited_for"]["average_gradients"]["tower_15"] == 6
    assert result["expected_last"]["average_gradients"] == ""
    text = render(SummaryView(result), width=100)
    assert (
        "◀ last in line" in line_with(text, "│ tower_15")
        and "straggler" not in text.split("last in line:")[0]
    )
    assert "it queued (for a shared core or a port)" in " ".join(text.split())


def test_one_tower_and_one_step_are_singular_and_no_tower_rule_is_said_plainly() -> None:
    from simsync.viz.import_report import ProgramView
    from simsync.viz.report import SummaryView

    header = SummaryView({"scenario": "s", "mode": "sync", "towers": 1, "steps": 1}).header()
    assert "1 tower · 1 step" in header.plain and "towers" not in header.plain
    result = {
        "source": "one.py",
        "imported": {
            "tensorflow_ops": 10,
            "ops": 5,
            "tower_rule": "none: no tower scopes, at most one GPU",
            "ignored": {},
            "costs": "measured now",
        },
        "sync_points_made_in": {},
        "what_if": [],
    }
    text = " ".join(line.plain for line in ProgramView(result, summary=False).lines())
    assert "no towers (no tower scopes, at most one GPU)" in text and "found by none" not in text


def test_a_programs_lines_wrapped_at_80_columns_keep_their_indent() -> None:
    """A learner read 'towers found by name scope' above 'tower_<i>' at the left margin, as
    if it were the next item: a wrapped line keeps its indent, and no line ends in spaces."""
    from rich.console import Console

    from simsync.viz.import_report import ProgramView

    result = {
        "source": "tower_loop.py",
        "imported": {
            "tensorflow_ops": 308,
            "ops": 150,
            "tower_rule": "name scope tower_<i>",
            "ignored": {"constants": 68, "FIFO queues filled by queue runners": 1},
            "costs": "measured now",
        },
        "sync_points_made_in": {},
        "what_if": [],
    }
    console = Console(width=80, record=True, color_system=None)
    console.print(ProgramView(result, summary=False))
    lines = console.export_text().splitlines()
    assert len(lines) > 3  # the long lines wrapped
    assert lines[0] == "tower_loop.py: imported"
    assert all(line.startswith("  ") and line[2] != " " for line in lines[1:]), lines
    assert all(line == line.rstrip() for line in lines), lines


def test_a_programs_table_of_waits_shows_1_sync_point_and_4_towers_unless_verbose() -> None:
    """simulate PROGRAM.py printed 150 lines for a 32-sync-point trainer (issue: output that
    fits two screens, details behind --verbose), then 70 for lesson 2's program at 3 sync
    points; whoever came last is always shown."""
    from rich.console import Console

    from simsync.viz import ProgramView

    towers = [f"tower_{i}" for i in range(8)]
    points = [f"concat_{k}" for k in range(5)]
    result = {
        "source": "train.py", "what_if": [], "sync_points_made_in": {}, "towers": 8,
        "imported": {"tensorflow_ops": 300, "ops": 150, "tower_rule": "name scope tower_<i>",
                     "ignored": {}, "costs": "measured now"},
        "scenario": "train", "steps": 20, "step_time": {"mean": 0.002, "p50": 0.002, "p95": 0.002},
        "wait": {p: {t: 0.001 * (7 - i) for i, t in enumerate(towers)} for p in points},
        "waited_for": {p: {t: 20 if t == "tower_7" else 0 for t in towers} for p in points},
        "expected_last": {p: "tower_7" for p in points},
    }  # fmt: skip

    def shown(verbose: bool) -> str:
        console = Console(width=80, record=True, color_system=None)
        console.print(ProgramView(result, verbose=verbose))
        return console.export_text()

    short, every = shown(False), shown(True)
    assert "concat_0" in short and not any(p in short for p in points[1:])
    assert "… and 4 more sync points where the waits were no longer" in " ".join(short.split())
    assert short.count("tower_7") == 1 and short.count("tower_5") == 0  # the straggler kept
    assert all(p in every for p in points) and every.count("tower_5") == 5
    assert "more sync points" not in every


def test_the_last_in_line_note_is_said_once_under_the_table() -> None:
    """Lesson 1's program with --towers 8 printed the note three times, once per sync point
    with a tower last in line."""
    from rich.console import Console

    from simsync.viz import SummaryView

    points = [f"concat_{k}" for k in range(3)]
    summary = {
        "scenario": "s", "towers": 2, "steps": 20,
        "step_time": {"mean": 0.002, "p50": 0.002, "p95": 0.002},
        "wait": {p: {"tower_0": 0.001, "tower_1": 0.0} for p in points},
        "waited_for": {p: {"tower_0": 0, "tower_1": 20} for p in points},
        "expected_last": {p: "" for p in points},  # equal work: last only by the order
    }  # fmt: skip
    console = Console(width=80, record=True, color_system=None)
    console.print(SummaryView(summary, max_sync_points=2).sync_table())  # type: ignore[arg-type]
    text = console.export_text()
    assert text.count("◀ last in line: last clearly most often") == 1
    assert "… and 1 more sync point where the waits were no longer" in " ".join(text.split())


def test_a_cut_table_keeps_the_sync_points_where_the_towers_waited_longest() -> None:
    """A strategy's step meets first at the reads of a variable its replicas update (a few
    microseconds) and then at its all-reduce (where they wait): a table cut to two rows
    showed the reads and hid the all-reduce."""
    from rich.console import Console

    from simsync.viz import SummaryView

    waits = {"read_a": 1e-6, "read_b": 2e-6, "all_reduce": 1e-4, "assign": 3e-6}
    summary = {
        "scenario": "s", "towers": 2, "steps": 20,
        "step_time": {"mean": 0.002, "p50": 0.002, "p95": 0.002},
        "wait": {p: {"tower_0": w, "tower_1": 0.0} for p, w in waits.items()},
        "waited_for": {p: {"tower_0": 0, "tower_1": 20} for p in waits},
        "expected_last": {p: "tower_1" for p in waits},
    }  # fmt: skip
    console = Console(width=80, record=True, color_system=None)
    console.print(SummaryView(summary, max_sync_points=2).sync_table())  # type: ignore[arg-type]
    text = console.export_text()
    assert "all_reduce" in text and "assign" in text  # the two longest waits
    assert "read_a" not in text and "read_b" not in text
    assert text.index("all_reduce") < text.index("assign")  # in the graph's order
    assert "… and 2 more sync points where the waits were no longer" in " ".join(text.split())


def test_a_programs_report_keeps_the_cache_file_and_the_fit_for_verbose() -> None:
    """A learner read a cache path split mid-hash and 'timed: ops as traced, and 0.578 ms of
    TensorFlow's own work...' at 80 columns: both are details, shown with --verbose."""
    from simsync.viz import ProgramView

    result = {
        "source": "train.py",
        "imported": {
            "tensorflow_ops": 308, "ops": 150, "tower_rule": "name scope tower_<i>",
            "ignored": {}, "costs": "cached",
            "costs_file": "/home/a/.cache/simsync/program-costs/6e11c59a82f5269bbd.json",
            "fit": {"scale": 1.0, "per_run": 5.78e-4, "wall": 1.1e-3},
        },
        "sync_points_made_in": {}, "what_if": [],
    }  # fmt: skip

    def shown(verbose: bool) -> str:
        out = io.StringIO()
        view = ProgramView(result, summary=False, verbose=verbose)
        Console(file=out, width=200, color_system=None).print(view)
        return out.getvalue()

    brief, verbose = shown(False), shown(True)
    assert "costs: cached\n" in brief and "6e11c59a" not in brief and "timed:" not in brief
    assert "costs: cached, kept in /home/a/.cache/simsync/program-costs/6e11c59a82f5" in verbose
    assert "timed: ops as traced, and 0.578 ms of TensorFlow's own work" in verbose


def test_an_op_kind_predicted_at_the_scenario_s_own_cost_says_so() -> None:
    """Lesson 7's moving-average update costs 0.5 ms in its scenario, a stand-in the
    machine's profile never measured: a learner read "0.924 predicted, 0.025 measured,
    +3583.7 %" with no word of why (trial 58's C8)."""
    from simsync.viz.crosscheck import CrossCheckView

    row = {"predicted": 9.24e-4, "measured": 2.5e-5, "error": 35.837, "timed_by": "executor"}
    report = {
        "costs": "this machine's profile",
        "timing": {
            "predicted_step_time": 0.01, "measured_step_time": 0.01, "error": 0.0,
            "predicted_median_step_time": 0.01, "measured_median_step_time": 0.01,
            "measured_interval": [0.009, 0.011], "error_median": 0.0,
            "ops": {"moving_average": {**row, "stand_in": True},
                    "apply": {**row, "stand_in": False}},
        },
    }  # fmt: skip
    out = render(CrossCheckView._timing(report), width=200)  # type: ignore[arg-type]
    lines = {line.split()[1]: line for line in out.splitlines() if " op" in line}
    assert (
        "predicted at the scenario's own cost: this machine's profile has none"
        in lines["moving_average"]
    )
    assert "scenario" not in lines["apply"]


def test_a_lane_past_its_workers_drawn_runs_is_not_drawn_as_idle() -> None:
    """Lesson 6's backup workers, runs 0-1 of each: a worker whose third run began inside the
    window computed there, which a learner read as idle ('·'). Its lane is blank from that
    run's start, said in the legend; a lane several workers share (the parameter server)
    and a worker blocked in its second run keep their idle marks."""
    from simsync.scenario import load_scenario
    from simsync.viz import Timeline

    path = Path(__file__).parent.parent / "lessons" / "06-one-apply-per-step" / "backup.toml"
    sim = simulate(load_scenario(path), numerics=False)
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(
        Timeline(sim.trace, steps=2, sync_points=sim.sync_points)
    )
    lines = out.getvalue().splitlines()
    lanes = {line[:19].strip(): line[19:] for line in lines if line.startswith("/job:")}
    later = {  # each worker's third run, begun inside the window
        s.client
        for s in sim.trace.steps
        if s.step == 2 and s.start < max(r.end for r in sim.trace.steps if r.step < 2)
    }
    assert later, "some worker began its third run while others' second ran"
    for k in range(4):
        lane = lanes[f"/job:worker/task:{k}"]
        assert lane.endswith(" ") == (f"worker_{k}" in later), (k, lane)
    assert " " not in lanes["/job:ps/task:0"].rstrip("\n")
    assert "blank: a later run, not drawn" in out.getvalue()
