"""Scenarios and profiles at and beyond their limits, from the hostile user's list: every
accepted scenario runs to the end, everything else is one clear line with status 2, and a
run too large for the machine says so before it starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from helpers import one_clear_line

from simsync.cli import main
from simsync.patterns import build
from simsync.scenario import load_scenario, scenario_from_dict
from simsync.scenario.budget import MAX_CROSSCHECK_TOWERS, cost_of, graph_ops

ROOT = Path(__file__).resolve().parent.parent

BASE = 'name = "x"\n[run]\nsteps = 3\n'


def run(
    *args: str, cwd: Path = ROOT, timeout: float = 120, tripwire: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``simsync ARGS``; with ``tripwire`` (a folder, :func:`tensorflow_tripwire`), in a
    Python where importing TensorFlow fails: a command refused before it started TensorFlow
    never notices."""
    env = None if tripwire is None else {**os.environ, "PYTHONPATH": str(tripwire)}
    return subprocess.run(
        [sys.executable, "-m", "simsync", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def tensorflow_tripwire(folder: Path) -> Path:
    """A folder for ``PYTHONPATH`` whose ``tensorflow`` cannot be imported."""
    package = folder / "tripwire" / "tensorflow"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('TensorFlow was imported')\n")
    return package.parent


def write(folder: Path, body: str, name: str = "s.toml") -> Path:
    """A scenario: ``body`` plus a cluster and a compute table where it has none."""
    if "[cluster]" not in body:
        body += "[cluster]\ndevices = 2\n"
    if "[compute]" not in body:
        body += "[compute]\nmean = 0.01\n"
    path = folder / name
    path.write_text(BASE + body)
    return path


# Each of these passed validation and then overflowed (the list), or sits just inside
# a new limit: refused with one line, or run to the end in every view.
EXTREMES = {
    "tiny mean": ("[compute]\nmean = 5e-324\n", "[compute] mean: must be from 1e-09"),
    "huge exponential mean": (
        '[compute]\ndistribution = "exponential"\nmean = 1e308\n',
        "[compute] mean: must be from 1e-09 to 1e+06",
    ),
    "slow device, huge mean": (
        "[cluster]\ndevices = 2\nspeeds = [1e-300, 1]\n[compute]\nmean = 1e300\n",
        "[cluster] speeds: every entry must be from 0.001 to 1000",
    ),
    "huge session_run": ("[costs]\nsession_run = 1e307\n", "[costs] session_run: must be from 0"),
    "huge overhead": ("[compute]\nmean = 0.01\noverhead = 1.7e308\n", "[compute] overhead"),
    "huge latency": ("[cluster.link]\nlatency_us = 1e308\n", "[cluster.link] latency_us"),
    "tiny bandwidth": ("[cluster.link]\nbandwidth_gbps = 1e-300\n", "bandwidth_gbps"),
    "huge apply": ("[costs]\napply = 1e300\n", "[costs] apply: must be from 0 to 1e+06"),
    "huge batch": ("[model]\nbatch_size = 100000000\n", "[model] batch_size: 100,000,000"),
    "deep mlp": (
        '[model]\nkind = "mlp"\nhidden = [' + ", ".join(["1"] * 101) + "]\n",
        "[model] hidden: at most 100 hidden layers",
    ),
    "a billion steps": ("", "[run] steps: must be from 1 to 1e+06"),
    "escape codes in the name": ("", "name: must not contain control characters"),
}


@pytest.mark.parametrize("case", EXTREMES, ids=list(EXTREMES))
def test_extreme_numbers_are_refused_with_one_line(tmp_path: Path, case: str) -> None:
    body, message = EXTREMES[case]
    path = write(tmp_path, body)
    if case == "a billion steps":
        path.write_text(path.read_text().replace("steps = 3", "steps = 1000000000"))
    if case == "escape codes in the name":
        path.write_text(path.read_text().replace('name = "x"', 'name = "x\\u001b[2J\\u001b]0;t"'))
    for command in (["simulate", str(path)], ["graph", str(path)]):
        line = one_clear_line(run(*command), str(path), message)
        assert "\x1b" not in line


LIMITS = {
    "shortest mean": "[compute]\nmean = 1e-9\n",
    "longest mean, slowest device": (
        '[cluster]\ndevices = 2\nspeeds = [0.001, 1000]\n[compute]\ndistribution = "exponential"'
        "\nmean = 1e6\noverhead = 1e6\n[costs]\nsession_run = 1e6\napply = 1e6\n"
        "[cluster.link]\nlatency_us = 1e12\nbandwidth_gbps = 1e-6\n"
    ),
    "vanishing forward": "[compute]\nmean = 1e-9\nforward_fraction = 5e-324\n",
    "largest batch": "[model]\nbatch_size = 312500\n",  # x 32 features = 10,000,000
}


@pytest.mark.parametrize("case", LIMITS, ids=list(LIMITS))
def test_scenarios_at_the_limits_run_in_every_view(tmp_path: Path, case: str) -> None:
    path = write(tmp_path, LIMITS[case])
    trace = tmp_path / "t.json"
    commands = [
        ["simulate", str(path), "--json", "--trace", str(trace)],
        ["simulate", str(path)],
        ["compare", str(path), str(path)],
        ["graph", str(path), "--format", "dot"],
    ]
    if case == "largest batch":  # the arithmetic is the point: one step, one view
        commands = [commands[0] + ["--steps", "1"]]
    for command in commands:
        ran = run(*command)
        assert ran.returncode == 0, f"{command}: {ran.stderr}"
        assert "Traceback" not in ran.stderr
    json.loads(trace.read_text())


@pytest.mark.parametrize("kind", ["softmax", "linear", "mlp"])
def test_a_diverging_loss_is_one_line_for_every_model(tmp_path: Path, kind: str) -> None:
    # softmax's loss grows like the logits, never to infinity: it used to reach 3e9 unnoticed
    path = write(tmp_path, f'[model]\nkind = "{kind}"\nlearning_rate = 1e300\n')
    for command in (["simulate", str(path)], ["compare", str(path), str(path)]):
        ran = run(*command)
        assert ran.returncode == 2 and "Traceback" not in ran.stderr
        assert "the loss diverged at step" in ran.stderr and "lower [model] learning_rate" in (
            ran.stderr
        )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a = " + "[" * 200_000, "TOML nested too deeply"),
        ("# padding\n" * 120_000, "larger than 1,000,000 bytes"),
        (b"\xff\xfe binary", "not a UTF-8 text file"),
    ],
    ids=["nested", "huge", "binary"],
)
def test_unreadable_scenario_files_are_one_line(
    tmp_path: Path, content: str | bytes, message: str
) -> None:
    path = tmp_path / "s.toml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    one_clear_line(run("simulate", str(path)), str(path), message)


def test_simulating_dev_zero_is_refused_at_once() -> None:
    """The issue's case: `simulate /dev/zero` read until it held 6 GB. A device is not a
    scenario file: refused before a byte is read."""
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero here")
    one_clear_line(run("simulate", "/dev/zero", timeout=60), "a character device, not a regular")


def test_steps_beyond_the_limit_on_the_command_line_are_refused() -> None:
    ran = run("simulate", "examples/four_towers.toml", "--steps", "1000000000")
    assert ran.returncode == 2 and "must be at most 1000000" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_a_run_larger_than_the_memory_is_refused_before_it_starts(tmp_path: Path) -> None:
    path = write(tmp_path, "[cluster]\ndevices = 16384\n")
    line = one_clear_line(run("simulate", str(path), "--steps", "1000000", timeout=60))
    assert "op executions to simulate" in line and "more than this machine's" in line


def test_a_run_of_hours_is_announced_with_an_estimate(tmp_path: Path) -> None:
    """A long run says first what it will take: it starts with a warning, or, on a machine
    with less memory than it needs, is refused. Either way before any work."""
    path = write(tmp_path, "[cluster]\ndevices = 3\n")  # 14 ops a step
    process = subprocess.Popen(
        [sys.executable, "-m", "simsync", "simulate", str(path), "--steps", "1000000"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    watchdog = threading.Timer(60, process.kill)  # no line within a minute: a failure
    watchdog.start()
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
    finally:
        watchdog.cancel()
        process.kill()
        process.wait(timeout=60)
    estimate = "14,000,000 op executions to simulate: about 12 minutes and 8.4 GB of memory"
    assert first.startswith(
        (f"simsync: warning: {estimate}; --steps runs fewer", f"simsync: error: {estimate}, more")
    ), first


@pytest.mark.parametrize(
    "toml",
    [
        "[cluster]\ndevices = 5\n",
        '[cluster]\ndevices = 7\n[training]\naggregation = "allreduce"\n',
        '[cluster]\ndevices = 3\n[training]\nmode = "async"\n',
    ],
    ids=["parameter-server", "allreduce", "async"],
)
def test_the_estimate_counts_the_ops_the_graph_has(toml: str) -> None:
    import tomllib

    scenario = scenario_from_dict(tomllib.loads(BASE + toml + "[compute]\nmean = 0.01\n"))
    assert graph_ops(scenario) == len(build(scenario))
    assert cost_of([scenario]).ops == 3 * len(build(scenario))


def test_crosscheck_beyond_its_documented_limit_is_refused(tmp_path: Path) -> None:
    """1,000 towers ran over 120 s with no output; now one line, before TensorFlow starts."""
    path = write(tmp_path, f"[cluster]\ndevices = {MAX_CROSSCHECK_TOWERS + 1}\n")
    ran = run("crosscheck", str(path), tripwire=tensorflow_tripwire(tmp_path))
    line = one_clear_line(ran, f"at most {MAX_CROSSCHECK_TOWERS} towers")
    assert "imported" not in line  # said before TensorFlow starts
    doc = (ROOT / "docs" / "tensorflow.md").read_text()
    assert f"runs at most {MAX_CROSSCHECK_TOWERS} towers" in doc
    assert f"At most {MAX_CROSSCHECK_TOWERS} towers" in " ".join(
        run("crosscheck", "-h").stdout.split()
    )


def test_a_crosscheck_too_large_for_the_memory_is_refused_before_tensorflow(
    tmp_path: Path,
) -> None:
    """240 GB of simulated trace alone: since issue 24, refused by the steps TensorFlow
    takes, before the simulator's memory is even estimated."""
    path = write(tmp_path, "[cluster]\ndevices = 100\n")
    # a TensorFlow that cannot be imported: refused before it, the command never notices
    tripwire = tensorflow_tripwire(tmp_path)
    done = run("crosscheck", str(path), "--steps", "1000000", tripwire=tripwire)
    line = one_clear_line(done)
    assert "at most 1,000 on TensorFlow" in line and "imported" not in line


def test_dot_output_grows_linearly_with_the_towers(tmp_path: Path) -> None:
    """`graph --format dot` scanned every op once per device: 8,192 towers took 57 s here.
    Four times the towers must take about four times the work, not sixteen: the lines of
    Python it executes (a loop's every pass counts), which no busy machine changes."""
    from simsync.viz import to_dot

    def work(towers: int) -> int:
        graph = build(load_scenario(write(tmp_path, f"[cluster]\ndevices = {towers}\n")))
        lines = 0

        def trace(frame: object, event: str, arg: object) -> object:
            nonlocal lines
            lines += event == "line"
            return trace

        sys.settrace(trace)
        try:
            to_dot(graph)
        finally:
            sys.settrace(None)
        return lines

    small, large = work(256), work(1024)
    assert large < 6 * small, (small, large)


def test_the_profile_is_named_when_it_takes_a_scenario_out_of_range(tmp_path: Path) -> None:
    profile = json.loads((ROOT / "tests" / "fixtures" / "profile.json").read_text())
    profile["compute_scale"] = 1000
    path = tmp_path / "p.json"
    path.write_text(json.dumps(profile))
    slow = write(tmp_path, "[compute]\nmean = 1e5\n")
    one_clear_line(
        run("simulate", str(slow), "--costs", str(path)),
        f"{path}: its costs applied to {slow}: [compute] mean",
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[" * 200_000, "nested too deeply"),
        ('{"simsync_profile": 1, "bogus": 1}', "unknown key 'bogus'"),
        ('{"simsync_profile": 1, "costs": {}}', "compute_scale is required"),
    ],
    ids=["nested", "unknown-key", "missing-key"],
)
def test_bad_profiles_name_the_profile(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(content)
    one_clear_line(
        run("simulate", "examples/four_towers.toml", "--costs", str(path)), str(path), message
    )


def test_compare_a_with_a_marks_no_winner(capsys: pytest.CaptureFixture[str]) -> None:
    four = str(ROOT / "examples" / "four_towers.toml")
    assert main(["compare", four, four, "--steps", "5"]) == 0
    out = capsys.readouterr().out
    assert "◀" not in out
    assert "A tie: A and B reached the target loss at the same time." in " ".join(out.split())


@pytest.mark.parametrize(
    "args, words",
    [
        (["crosscheck", "examples/four_towers.toml", "--warmup", "1000000000"], "--warmup 1,0"),
        (["crosscheck", "examples/four_towers.toml", "--steps", "1000000"], "--steps 1,000,000"),
        (["calibrate", "examples/four_towers.toml", "-o", "p.json", "--steps", "5000"], "5,000"),
    ],
    ids=["crosscheck-warmup", "crosscheck-steps", "calibrate-steps"],
)
def test_tensorflow_steps_beyond_the_limit_are_refused_at_once(
    tmp_path: Path, args: list[str], words: str
) -> None:
    """The issue's case: `crosscheck --warmup 1000000000` ran silently for 10+ minutes, and
    `--steps 1000000` warned about the simulator only."""
    ran = run(*args, timeout=60, tripwire=tensorflow_tripwire(tmp_path))
    line = one_clear_line(ran, words, "at most 1,000")
    assert "TensorFlow" in line and "imported" not in line  # before TensorFlow starts


def test_the_help_says_the_tensorflow_limits() -> None:
    for command in ("crosscheck", "calibrate"):
        said = " ".join(run(command, "--help").stdout.split())
        assert "default 20, at most 1000" in said, said
    assert "default 2, at most 1000" in " ".join(run("crosscheck", "--help").stdout.split())
