"""Every TOML and JSON input is read through ``simsync.files`` (``read_toml``, ``read_json``):
the same four problems (malformed, too large, not a regular file, missing) give the same one
line, naming the file, where in it and what is wrong, through every command that reads one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import one_clear_line

ROOT = Path(__file__).resolve().parent.parent
FOUR = str(ROOT / "examples" / "four_towers.toml")
LESSONS = ROOT / "tests" / "fixtures" / "lessons"
#: read_text's limit (simsync.files.MAX_INPUT_BYTES), written out: the documented 1,000,000
TOO_LARGE = "larger than 1,000,000 bytes"
SYNC_REPLICAS = """\
name = "sr"
[cluster]
devices = 2
[compute]
mean = 0.01
[training]
mode = "sync_replicas"
"""


def simsync(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simsync", *args],
        capture_output=True,
        text=True,
        timeout=120,  # a FIFO waited on would hang: fail here instead
        cwd=cwd,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
    )


def make(path: Path, problem: str, syntax: str) -> None:
    """Put ``problem`` at ``path``: bad ``syntax``, over the size limit, a FIFO, or nothing."""
    if problem == "malformed":
        path.write_text(syntax)
    elif problem == "too large":
        path.write_text("# padding\n" * 100_001)  # 1,000,010 bytes, comments only: valid
    elif problem == "fifo":
        os.mkfifo(path)


#: what each problem says, after the file's name; {what} is what the file should be
SAID = {
    "too large": "{what} " + TOO_LARGE,
    "fifo": "a FIFO (named pipe), not a regular file",
    "missing": "no such {what}",
}
TOML_SYNTAX = ("a = \n", "TOML syntax error: Invalid value (at line 1, column 5)")
JSON_SYNTAX = ('{"a": }', "JSON syntax error: Expecting value (at line 1, column 7)")


def expected(problem: str, what: str, syntax: tuple[str, str] = TOML_SYNTAX) -> str:
    """What ``problem`` says of a ``what`` after the file's name."""
    return syntax[1] if problem == "malformed" else SAID[problem].format(what=what)


#: input -> (file name, its syntax error and what it says, what the file is, the command)
INPUTS: dict[str, tuple[str, tuple[str, str], str, Callable[[Path], list[str]]]] = {
    "scenario": ("s.toml", TOML_SYNTAX, "scenario file", lambda x: ["simulate", str(x)]),
    "profile": ("p.json", JSON_SYNTAX, "profile", lambda x: ["simulate", FOUR, "--costs", str(x)]),
    "answers": (
        "a.toml",
        TOML_SYNTAX,
        "answers file",
        lambda x: ["learn", "1", "--answers", str(x)],
    ),
    "cluster": (
        "c.json",
        JSON_SYNTAX,
        "cluster file",
        lambda x: ["crosscheck", str(x.parent / "sr.toml"), "--cluster", str(x)],
    ),
}
PROBLEMS = ["malformed", "too large", "fifo", "missing"]


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("name", INPUTS)
def test_every_input_file_says_what_is_wrong_in_one_line(
    tmp_path: Path, name: str, problem: str
) -> None:
    if problem == "fifo" and not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes here")
    file, syntax, what, command = INPUTS[name]
    path = tmp_path / file
    (tmp_path / "sr.toml").write_text(SYNC_REPLICAS)
    make(path, problem, syntax[0])
    ran = simsync(*command(path), SIMSYNC_LESSONS=str(LESSONS), SIMSYNC_DATA_DIR=str(tmp_path))
    line = one_clear_line(ran, f"{path}: {expected(problem, what, syntax)}")
    if name == "cluster":  # and what a cluster file may hold
        assert line.endswith('"worker": ["host:port", ...]}) or a TF_CONFIG'), line


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ('["h:1"]', "expected a JSON object"),
        ('{"ps": ["h:1"]}', "no key 'worker'"),
        ('{"cluster": {"ps": "h:1", "worker": []}}', "'ps': expected a list of \"host:port\""),
    ],
)
def test_a_cluster_file_names_the_key_that_is_wrong(
    tmp_path: Path, content: str, said: str
) -> None:
    path = tmp_path / "c.json"
    path.write_text(content)
    (tmp_path / "sr.toml").write_text(SYNC_REPLICAS)
    ran = simsync("crosscheck", str(tmp_path / "sr.toml"), "--cluster", str(path))
    one_clear_line(ran, f"{path}: {said}", "expected a ClusterSpec as JSON")
    assert "tensorflow" not in ran.stderr.lower()


def lessons_with(tmp_path: Path, problem: str) -> Path:
    """The fixture lessons, their first lesson.toml given ``problem``."""
    root = tmp_path / "lessons"
    shutil.copytree(LESSONS, root)
    source = next(root.glob("01-*")) / "lesson.toml"
    source.unlink()
    make(source, problem, TOML_SYNTAX[0])
    return source


@pytest.mark.parametrize("problem", PROBLEMS)
def test_a_lesson_file_says_what_is_wrong_in_one_line(tmp_path: Path, problem: str) -> None:
    source = lessons_with(tmp_path, problem)
    ran = simsync("lessons", "list", SIMSYNC_LESSONS=str(source.parent.parent))
    one_clear_line(ran, f"{source}: {expected(problem, 'lesson file')}")


@pytest.mark.parametrize("problem", PROBLEMS)
def test_an_assignment_file_says_what_is_wrong_in_one_line(tmp_path: Path, problem: str) -> None:
    folder = tmp_path / "01-the-tower-loop"
    shutil.copytree(ROOT / "assignments" / folder.name, folder)
    source = folder / "assignment.toml"
    source.unlink()
    make(source, problem, TOML_SYNTAX[0])
    ran = simsync("assignments", "list", SIMSYNC_ASSIGNMENTS=str(tmp_path))
    one_clear_line(ran, f"{source}: {expected(problem, 'assignment file')}")


@pytest.mark.parametrize("problem", ["malformed", "too large"])
def test_a_progress_file_that_cannot_be_read_says_why_as_it_is_set_aside(
    tmp_path: Path, problem: str
) -> None:
    make(tmp_path / "progress.json", problem, JSON_SYNTAX[0])
    ran = simsync("lessons", "list", SIMSYNC_LESSONS=str(LESSONS), SIMSYNC_DATA_DIR=str(tmp_path))
    said = expected(problem, "progress file", JSON_SYNTAX)
    assert ran.returncode == 0, ran.stderr
    assert f"({said})" in " ".join(ran.stdout.split()), ran.stdout
    assert len(list(tmp_path.glob("progress.json.corrupt-*"))) == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_progress_file_that_is_a_fifo_is_one_line(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "progress.json")
    ran = simsync("lessons", "list", SIMSYNC_LESSONS=str(LESSONS), SIMSYNC_DATA_DIR=str(tmp_path))
    one_clear_line(
        ran, f"your progress file {tmp_path / 'progress.json'} is a FIFO (named pipe), not a"
    )


@pytest.mark.parametrize(
    ("file", "problem", "said"),
    [
        ("answers.toml", "malformed", "answers.toml: " + expected("malformed", "answers file")),
        ("answers.toml", "too large", "answers.toml: " + expected("too large", "answers file")),
        ("training.toml", "malformed", "training.toml: " + expected("malformed", "training file")),
    ],
)
def test_a_students_file_is_named_as_the_student_named_it(
    tmp_path: Path, file: str, problem: str, said: str
) -> None:
    """Read inside the sandbox, through the same reader: the report names the submitted
    file, never the sandbox's path to it."""
    folder = tmp_path / "hw"
    assert simsync("assignments", "start", "3", str(folder)).returncode == 0
    (folder / file).unlink()
    make(folder / file, problem, TOML_SYNTAX[0])
    ran = simsync("grade", str(folder), "--assignment", "3", "--no-tensorflow")
    assert ran.returncode == 0, ran.stderr
    lines = [line.strip() for line in ran.stdout.splitlines()]
    assert said in lines, ran.stdout
