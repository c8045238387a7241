"""`simsync crosscheck` and `simsync calibrate` as a user runs them, on real TensorFlow."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typed_dicts import problems

from simsync.crosscheck.report import AsyncReport, SyncReplicasReport, SyncReport

pytestmark = pytest.mark.tf

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))
REQUIRED = {
    "sync": [
        "structure.checked",
        "structure.violations",
        "values.max_abs_diff",
        "values.ok",
        "timing.predicted_step_time",
        "timing.measured_step_time",
        "timing.error",
        "devices",
        "tensorflow",
    ],
    "async": [
        "structure.checked",
        "structure.violations",
        "values.max_abs_diff",
        "values.ok",
        "staleness.predicted.mean",
        "staleness.measured.histogram",
        "staleness.distance",
        "throughput.predicted",
        "throughput.measured",
        "throughput.error",
        "devices",
        "tensorflow",
    ],
    "sync_replicas": [
        "structure.checked",
        "structure.violations",
        "values.max_abs_diff",
        "values.ok",
        "protocol.predicted.gradients.dropped",
        "protocol.measured.gradients.dropped",
        "protocol.measured.applies",
        "cluster.addresses",
        "timing.predicted_step_time",
        "timing.measured_step_time",
        "devices",
        "tensorflow",
    ],
}

#: The report of each mode's check (the JSON leaves out the report's ``check``).
TYPES = {"sync": SyncReport, "async": AsyncReport, "sync_replicas": SyncReplicasReport}


def simsync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simsync", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


def lookup(report: dict, dotted: str):
    node = report
    for part in dotted.split("."):
        node = node[part]
    return node


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_crosscheck_of_the_bundled_scenarios_agrees(example: Path) -> None:
    result = simsync("crosscheck", str(example), "--json", "--steps", "3")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    for key in REQUIRED[report.get("mode", "sync")]:
        lookup(report, key)
    typed = TYPES[report.get("mode", "sync")]
    assert problems(report, typed, leave_out=frozenset({"check"})) == []
    assert report["structure"]["checked"] > 0
    assert report["structure"]["violations"] == []
    assert report["values"]["ok"] and report["values"]["max_abs_diff"] < 1e-12
    if "cluster" in report:  # SyncReplicasOptimizer: TensorFlow's own graph, on processes
        assert report["protocol"]["measured"]["one_apply_per_step"]
        assert "private loopback-only network" in report["devices"]
    else:  # simsync's graph in one session: every TensorFlow op maps to an IR op
        assert report["unmapped_tensorflow_ops"] == {}
        # logical CPU devices, GPUs of their own, or virtual GPUs of the GPUs there are
        assert re.search(
            r"logical devices sharing|GPUs? and the CPU|virtual GPUs", report["devices"]
        )


def test_calibrate_then_predict_with_the_profile(tmp_path: Path) -> None:
    profile, trace = tmp_path / "here.json", tmp_path / "both.json"
    four = str(ROOT / "examples" / "four_towers.toml")
    made = simsync("calibrate", four, "-o", str(profile), "--steps", "5")
    assert made.returncode == 0, made.stderr[-3000:]
    data = json.loads(profile.read_text())
    assert data["simsync_profile"] == 1 and data["calibrated_on"]["towers"] == 1
    assert data["host_cores"] >= 1 and 0 < data["core_efficiency"] <= 1
    assert f"Calibration on {data['devices']}" in made.stdout  # logical-cpu, or gpu

    simulated = simsync("simulate", four, "--costs", str(profile), "--json", "--steps", "3")
    assert simulated.returncode == 0, simulated.stderr
    step = json.loads(simulated.stdout)["step_time"]["mean"]
    # the straggler's 20 ms of compute as this machine runs it (the profile's measured scale),
    # plus the measured overheads: more than the compute alone
    assert step > 0.02 * data["compute_scale"]

    checked = simsync(
        "crosscheck", four, "--costs", str(profile), "--steps", "3", "--trace", str(trace)
    )
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "✓ agree" in checked.stdout and "calibration profile" in checked.stdout
    events = json.loads(trace.read_text())["traceEvents"]
    processes = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert processes == {"simulated", "tensorflow"}


def test_a_bad_profile_is_one_clear_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"costs": {}}')
    result = simsync("simulate", str(ROOT / "examples" / "four_towers.toml"), "--costs", str(bad))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"simsync: error: {bad}: not a simsync profile (version 1); make one with "
        "`simsync calibrate SCENARIO -o PROFILE.json`"
    )


def test_a_programs_simulation_writes_its_trace_and_timeline(tmp_path: Path) -> None:
    """``--trace`` and ``--timeline`` of ``simulate PROGRAM.py`` are written as a scenario's
    are (they were once silently ignored): a Chrome trace with the program's own ops, and a
    PNG."""
    program = ROOT / "tests" / "fixtures" / "programs" / "towers_cpu_variables.py"
    trace, picture = tmp_path / "t.json", tmp_path / "t.png"
    ran = simsync("simulate", str(program), "--steps", "3", "--trace", str(trace),
                  "--timeline", str(picture))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "Chrome trace written to" in ran.stdout and "Timeline picture written" in ran.stdout
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {e["name"] for e in events if e.get("ph") == "X"}
    assert any("average_gradients" in name or "tower_0" in name for name in names), names
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # on standard output, the trace alone
    alone = simsync("simulate", str(program), "--steps", "3", "--trace", "-")
    assert alone.returncode == 0, alone.stderr
    json.loads(alone.stdout)
