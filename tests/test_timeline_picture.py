"""Timelines as pictures: what each lane holds, in PNG and SVG, for each way of training."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simsync.errors import UsageError
from simsync.scenario import load_scenario
from simsync.simulation import simulate
from simsync.viz.timeline_picture import write_timeline_picture

ROOT = Path(__file__).resolve().parent.parent


def _texts(svg: Path) -> list[str]:
    """The text elements of an SVG written with its text as text."""
    return [
        re.sub(r"<[^>]+>", "", t).strip()
        for t in re.findall(r"<text[^>]*>.*?</text>", svg.read_text(), re.S)
    ]


@pytest.mark.parametrize(
    ("scenario", "lanes", "legend"),
    [
        # towers: one lane per GPU, the straggler's partners wait at the sync point
        (
            "lessons/03-as-slow-as-the-slowest-tower/straggler.toml",
            ["sync", "/cpu:0", "/gpu:0", "/gpu:1", "/gpu:2", "/gpu:3"],
            {"forward", "backward", "waiting at a sync point"},
        ),
        # SyncReplicas: the chief's queue runner blocks on the accumulators
        (
            "examples/backup_worker.toml",
            ["/job:ps/task:0", "/job:worker/task:0", "queue_runner waits"],
            {"push_gradients", "take_gradients", "blocked on a queue or accumulator"},
        ),
        # asynchronous workers: no sync point, so no sync lane and no waiting
        ("examples/async_workers.toml", ["/gpu:0"], {"forward", "apply"}),
    ],
)
def test_each_mode_draws_its_lanes_and_legend(tmp_path, scenario, lanes, legend) -> None:
    sim = simulate(load_scenario(ROOT / scenario))
    svg, png = tmp_path / "t.svg", tmp_path / "t.png"
    for out in (svg, png):
        write_timeline_picture(out, [("simulated", sim.trace)], sync_points=sim.sync_points)
    texts = _texts(svg)
    assert all(lane in texts for lane in lanes), (lanes, texts)
    assert legend <= set(texts), (legend, texts)
    assert ("sync" in texts) == bool(sim.sync_points)
    if not sim.sync_points:
        assert "waiting at a sync point" not in texts
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.png", "t.svg"]  # no temporary left


def test_a_crosscheck_draws_one_panel_per_trace_and_the_same_bytes_twice(tmp_path) -> None:
    sim = simulate(load_scenario(ROOT / "examples/four_towers.toml"))
    first, second = tmp_path / "a.svg", tmp_path / "b.svg"
    for out in (first, second):
        traces = [("simulated", sim.trace), ("TensorFlow", sim.trace)]
        write_timeline_picture(out, traces, sync_points=sim.sync_points)
    titles = [t for t in _texts(first) if t.startswith(("simulated:", "TensorFlow:"))]
    assert [t.split(":")[0] for t in titles] == ["simulated", "TensorFlow"]
    assert first.read_bytes() == second.read_bytes()


def test_another_suffix_is_one_clear_error(tmp_path) -> None:
    sim = simulate(load_scenario(ROOT / "examples/four_towers.toml"))
    with pytest.raises(
        UsageError, match=r"t\.jpg: a timeline picture is written as \.png or \.svg"
    ):
        write_timeline_picture(tmp_path / "t.jpg", [("simulated", sim.trace)])
    assert list(tmp_path.iterdir()) == []


def test_simulate_draws_its_timeline_with_the_option_spelt_out(tmp_path) -> None:
    import subprocess
    import sys

    def simsync(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "simsync", "simulate", "examples/four_towers.toml"]
        return subprocess.run(
            [*command, *args], capture_output=True, text=True, timeout=120, cwd=ROOT
        )

    out = tmp_path / "steps.svg"
    done = simsync("--steps", "3", "--timeline", str(out))
    assert done.returncode == 0, done.stderr
    assert f"Timeline picture written to {out}" in done.stdout
    assert {"sync", "/gpu:3"} <= set(_texts(out))
    refused = simsync("--timeline", str(tmp_path / "steps.jpg"))
    assert refused.returncode == 2 and "neither .png nor .svg" in refused.stderr
    # an abbreviation is not taken for --timeline-steps, nor for --timeline
    abbreviated = simsync("--timeli", str(tmp_path / "t.png"))
    assert abbreviated.returncode == 2 and "unrecognized arguments: --timeli" in abbreviated.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["steps.svg"]
