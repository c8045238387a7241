"""The command line, run as a user runs it: exit codes, JSON, files written, clean errors."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from simsync.cli import main
from simsync.cli.app import parser

ROOT = Path(__file__).resolve().parent.parent
FOUR = str(ROOT / "examples" / "four_towers.toml")
REQUIRED_KEYS = {
    "scenario",
    "mode",
    "towers",
    "steps",
    "step_time",
    "throughput",
    "applied_throughput",
    "sync_points",
    "wait",
    "loss",
    "final_loss",
    "events",
    "wall_seconds",
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simsync", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_help_lists_commands_and_examples() -> None:
    result = run("--help")
    assert result.returncode == 0
    for word in ("simulate", "graph", "examples:", "docs/scenarios.md"):
        assert word in result.stdout


def test_simulate_json_has_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", FOUR, "--json", "--steps", "7"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result.keys() >= REQUIRED_KEYS
    assert result["steps"] == 7 and len(result["loss"]) == 7
    assert set(result["step_time"]) == {"mean", "p50", "p95"}
    assert result["sync_points"] == ["average_gradients"]
    # the straggler (/gpu:3 at half speed) is the tower everyone waits for
    waits = result["wait"]["average_gradients"]
    assert waits["tower_3"] < min(waits["tower_0"], waits["tower_1"], waits["tower_2"])
    assert result["waited_for"]["average_gradients"]["tower_3"] == 7


def test_simulate_json_is_reproducible() -> None:
    first = json.loads(run("simulate", FOUR, "--json", "--steps", "5").stdout)
    again = json.loads(run("simulate", FOUR, "--json", "--steps", "5").stdout)
    first.pop("wall_seconds"), again.pop("wall_seconds")
    assert first == again


def test_simulate_writes_a_chrome_trace(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    result = run("simulate", FOUR, "--steps", "3", "--trace", str(out))
    assert result.returncode == 0, result.stderr
    events = json.loads(out.read_text())["traceEvents"]
    assert any(e.get("name") == "average_gradients" and e["ph"] == "X" for e in events)
    assert "Chrome trace written" in result.stdout


def test_simulate_prints_summary_and_timeline() -> None:
    result = run("simulate", FOUR, "--steps", "3")
    assert result.returncode == 0, result.stderr
    assert "average_gradients" in result.stdout
    assert "/gpu:3" in result.stdout  # a timeline lane per device


@pytest.mark.parametrize("fmt", ["dot", "png", "text"])
def test_graph_formats(tmp_path: Path, fmt: str) -> None:
    out = tmp_path / f"graph.{fmt}"
    result = run("graph", FOUR, "--format", fmt, "-o", str(out))
    assert result.returncode == 0, result.stderr
    data = out.read_bytes()
    if fmt == "png":
        assert data.startswith(b"\x89PNG")
    else:
        assert b"average_gradients" in data


def test_graph_writes_the_format_its_outputs_suffix_names(tmp_path: Path) -> None:
    """`graph FILE -o graph.png` wrote text into graph.png: the suffix chooses the format."""
    for name, start in (("graph.png", b"\x89PNG"), ("graph.gv", b"digraph")):
        result = run("graph", FOUR, "-o", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
        assert (tmp_path / name).read_bytes().startswith(start)
    result = run("graph", FOUR, "--format", "text", "-o", str(tmp_path / "text.png"))
    assert result.returncode == 2 and not (tmp_path / "text.png").exists()
    assert "--format text writes text, not a PNG" in result.stderr


def test_calibrate_steps_apply_only_to_a_file() -> None:
    # this machine's own profile is measured on fixed steps: --steps there would be ignored
    result = run("calibrate", "--steps", "5")
    assert result.returncode == 2
    assert "--steps applies to calibrate FILE" in result.stderr


def test_graph_png_needs_output() -> None:
    result = run("graph", FOUR, "--format", "png")
    assert result.returncode == 2
    assert result.stderr.strip() == "simsync: error: --format png needs -o OUT.png"


def test_bad_scenario_is_one_line_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[cluster]\ndevices = 2\nspeeds = [1]\n[compute]\nmean = 0.01\n')
    result = run("simulate", str(bad))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"simsync: error: {bad}: [cluster] speeds: expected 2 entries (one per device), got 1"
    )


def test_bad_option_is_a_usage_error() -> None:
    result = run("simulate", FOUR, "--steps", "0")
    assert result.returncode == 2
    assert "must be at least 1" in result.stderr


@pytest.mark.parametrize("command", ["simulate", "graph", "crosscheck"])
def test_program_arguments_after_a_scenario_are_refused_not_ignored(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``-- ARGS`` goes to an imported program; after a scenario nothing would read it."""
    assert main([command, FOUR, "--", "--num_gpus", "4"]) == 2
    error = capsys.readouterr().err
    assert "-- ARGS" in error and "is a scenario" in error and len(error.splitlines()) == 1


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every subcommand's parser under it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _parsers(sub)
    return found


def test_no_option_is_abbreviated(capsys: pytest.CaptureFixture[str]) -> None:
    """``--jso`` is not ``--json`` in any parser: a new option never changes what an old
    abbreviation meant."""
    parsers = _parsers(parser())
    names = {p.prog for p in parsers}
    assert {"simsync simulate", "simsync lessons copy", "simsync assignments pack"} <= names
    assert [p.prog for p in parsers if p.allow_abbrev] == []
    with pytest.raises(SystemExit) as stopped:
        main(["simulate", FOUR, "--jso"])
    assert stopped.value.code == 2
    assert "unrecognized arguments: --jso" in capsys.readouterr().err


def test_every_help_answers(capsys: pytest.CaptureFixture[str]) -> None:
    """Every command's --help prints its usage and exits 0."""
    for sub in _parsers(parser()):
        words = sub.prog.split()[1:]
        with pytest.raises(SystemExit) as stopped:
            main([*words, "--help"])
        assert stopped.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: {sub.prog}")


def test_tensorflow_is_never_imported() -> None:
    code = (
        "import sys; from simsync.cli import main; "
        f"main(['simulate', {FOUR!r}, '--json', '--steps', '2']); "
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'; "
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


def test_help_does_not_import_the_heavy_modules() -> None:
    commands = [p.prog.split()[1:] for p in _parsers(parser())]
    code = (
        "import sys; from simsync.cli import main\n"
        f"for words in {commands!r}:\n"
        "    try:\n        main([*words, '--help'])\n    except SystemExit:\n        pass\n"
        "heavy = {'numpy', 'networkx', 'simpy', 'rich', 'tensorflow'} & set(sys.modules)\n"
        "assert not heavy, heavy"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


def test_names_are_text_not_markup(tmp_path: Path) -> None:
    odd = tmp_path / "odd.toml"
    odd.write_text(
        Path(FOUR).read_text().replace('name = "four-towers"', 'name = "[/x] cost $\\\\foo{x}$"')
    )
    for args in (
        ["graph", str(odd)],
        ["graph", str(odd), "--format", "png", "-o", str(tmp_path / "g.png")],
        ["simulate", str(odd)],
    ):
        result = run(*args, "--steps", "2") if args[0] == "simulate" else run(*args)
        assert result.returncode == 0, result.stderr
    assert "[/x] cost" in run("graph", str(odd)).stdout


def test_unwritable_output_fails_before_the_work(tmp_path: Path) -> None:
    result = run("simulate", FOUR, "--trace", str(tmp_path / "missing" / "t.json"))
    assert result.returncode == 2
    assert "cannot write" in result.stderr and "no folder" in result.stderr


def test_ignored_settings_are_warned_on_stderr(tmp_path: Path) -> None:
    odd = tmp_path / "odd.toml"
    odd.write_text(Path(FOUR).read_text().replace("mean = 0.010", "mean = 0.010\nsigma = 2.0"))
    result = run("simulate", str(odd), "--json", "--steps", "2")
    assert result.returncode == 0
    assert result.stderr.strip() == (
        f"simsync: warning: {odd}: [compute] sigma is ignored: "
        'used only with distribution = "lognormal"'
    )
    json.loads(result.stdout)  # stdout stays one clean JSON object


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("costs", 5, "costs: expected a table of op kind -> seconds from 0 to 1e+06, got 5"),
        (
            "seconds_per_row",
            0,
            "seconds_per_row: expected a number from 1e-09 to 1, or null, got 0",
        ),
        ("host_cores", 0, "host_cores: expected an integer >= 1, or null, got 0"),
        ("host_cores", True, "host_cores: expected an integer >= 1, or null, got True"),
        ("core_efficiency", 5, "core_efficiency: expected a number from 0.01 to 1, got 5"),
        (  # found by the fuzz test: busy cores slowed every op to infinity
            "core_efficiency",
            5e-324,
            "core_efficiency: expected a number from 0.01 to 1, got 5e-324",
        ),
        (
            "compute_scale",
            "fast",
            "compute_scale: expected a number from 0.001 to 1000, got 'fast'",
        ),
        ("compute_scale", 1e308, "compute_scale: expected a number from 0.001 to 1000, got 1e+308"),
    ],
)
def test_bad_profiles_are_one_clear_line(
    tmp_path: Path, field: str, value: object, message: str
) -> None:
    profile = {
        "simsync_profile": 1,
        "costs": {"apply": 1e-4},
        "compute_scale": 1.0,
        "compute_overhead": 0.0,
        "session_run": 1e-3,
        "latency_us": 50.0,
        "host_cores": 2,
        "core_efficiency": 0.9,
        "seconds_per_row": 2e-6,
    }
    profile[field] = value
    path = tmp_path / "p.json"
    path.write_text(json.dumps(profile))
    result = run("simulate", FOUR, "--costs", str(path), "--steps", "2")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"simsync: error: {path}: {message}"


ASYNC = str(ROOT / "examples" / "async_workers.toml")


def test_simulate_async_prints_the_ledger(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", ASYNC, "--steps", "10"]) == 0
    out = capsys.readouterr().out
    assert "mode async · 4 workers · 40 updates" in out
    assert "The ledger: staleness of each worker's applied updates" in out
    assert "staleness mean / max" in out
    assert main(["simulate", ASYNC, "--steps", "10", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["updates_applied"] + result["updates_dropped"] == 40
    assert set(result["staleness"]) == {"mean", "max", "histogram"}


def test_compare_plots_loss_against_wall_clock(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "race.png"
    assert main(["compare", FOUR, ASYNC, "--steps", "30", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "Training loss against wall-clock time" in out
    assert "four-towers" in out and "async_workers" in out and "◀" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["compare", FOUR, ASYNC, "--steps", "30", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    runs = {r["scenario"]: r for r in result["runs"]}
    assert runs["async_workers"]["updates"] == 4 * 30 and runs["four-towers"]["updates"] == 30
    # the target is the worst final loss, so every run reaches it
    assert result["target_loss"] == max(r["final_loss"] for r in result["runs"])
    assert all(r["reached_target_seconds"] is not None for r in result["runs"])


def test_compare_needs_two_scenarios() -> None:
    result = run("compare", FOUR)
    assert result.returncode == 2
    assert "2 to 6 scenario files" in result.stderr and "Traceback" not in result.stderr


def test_compare_shows_names_as_text_and_names_a_failing_file(tmp_path: Path) -> None:
    odd = tmp_path / "odd.toml"
    odd.write_text(
        (ROOT / "examples" / "async_workers.toml")
        .read_text()
        .replace('name = "async_workers"', 'name = "run [/fast]"')
    )
    result = run("compare", str(odd), FOUR, "--steps", "5")
    assert result.returncode == 0, result.stderr
    assert "run [/fast]" in result.stdout and "not comparable" not in result.stderr
    other = tmp_path / "other.toml"
    other.write_text(odd.read_text().replace('kind = "softmax"', 'kind = "linear"'))
    result = run("compare", str(other), FOUR, "--steps", "5")
    assert "not comparable" in result.stderr  # a different model
    diverging = tmp_path / "div.toml"
    diverging.write_text(other.read_text().replace("learning_rate = 0.1", "learning_rate = 1e200"))
    result = run("compare", str(diverging), FOUR, "--steps", "20")
    assert result.returncode == 2
    assert f"{diverging}: the loss diverged" in result.stderr
