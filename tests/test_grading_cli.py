"""The course commands, run as an instructor and a student run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simsync", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_list_names_every_assignment() -> None:
    done = run("assignments", "list")
    assert done.returncode == 0, done.stderr
    for title in ("The tower loop", "Stale gradients", "Backup workers"):
        assert title in done.stdout


def test_start_then_grade_the_starter_with_results_json(tmp_path: Path) -> None:
    folder = tmp_path / "hw"
    assert run("assignments", "start", "3", str(folder)).returncode == 0
    assert sorted(p.name for p in folder.iterdir()) == [
        "README.md",
        "answers.toml",
        "scenario.toml",
        "training.toml",
    ]
    out = tmp_path / "results.json"
    done = run("grade", str(folder), "--assignment", "3", "--gradescope", str(out))
    assert done.returncode == 0, done.stderr
    assert "✗ 0/3  Task 3.1  training keeps up at least 4,000 samples per second" in done.stdout
    assert "Score: 2/8 (not run: 1 hidden" in done.stdout
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~current_umask())
    results = json.loads(out.read_text())
    assert results["score"] == 2
    assert [t["max_score"] for t in results["tests"]] == [3, 2, 3]
    assert {t["visibility"] for t in results["tests"]} == {"visible"}


def test_hidden_checks_run_with_hidden(tmp_path: Path) -> None:
    folder = tmp_path / "hw"
    run("assignments", "start", "3", str(folder), "--solution")
    done = run("grade", str(folder), "--assignment", "3", "--hidden")
    assert "one apply per step" in done.stdout and "Score: 9/9" in done.stdout


def test_a_task_is_graded_alone(tmp_path: Path) -> None:
    folder = tmp_path / "hw"
    run("assignments", "start", "3", str(folder), "--solution")
    out = tmp_path / "results.json"
    done = run(
        "grade", str(folder), "--assignment", "3", "--task", "3.1", "--hidden", "--gradescope",
        str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    tasks = [line.split()[2:4] for line in done.stdout.splitlines() if line.startswith("  ✓")]
    assert tasks == [["Task", "3.1"]] * 3, done.stdout
    assert "Score: 6/6 (not run: 1 check you did not ask for)" in done.stdout
    # results.json says so too (the twenty-eighth attack found it silent)
    results = json.loads(out.read_text())
    assert results["output"].startswith("Backup workers: 6/6 (not run: 1 check you did not ask")
    assert len(results["tests"]) == 3
    # a check of a task not asked for is counted as such, hidden or not
    done = run("grade", str(folder), "--assignment", "3", "--task", "3.2")
    assert "(not run: 3 checks you did not ask for)" in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("grade", "nowhere", "--assignment", "1"), "nowhere: no such folder"),
        (("grade", "README.md", "--assignment", "1"), "README.md: a file, not a folder"),
        (("grade", ".", "--assignment", "99"), "no assignment 99; assignments: 1, 2, 3"),
        (("assignments", "start", "1", "."), "exists and is not an empty folder"),
        (("assignments", "start", "0", "x"), "must be at least 1"),
        (("grade", ".", "--assignment", "3", "--task", "3.3"), "its tasks: 3.1 and 3.2"),
    ],
)
def test_bad_input_is_one_line_and_status_2(args: tuple[str, ...], message: str) -> None:
    done = run(*args)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) <= 3


def test_a_temporary_folder_inside_the_submission_is_one_line(tmp_path: Path) -> None:
    """The twenty-seventh attack set TMPDIR inside the submission: the grader copied it into
    itself, and the reference scored 0/9 with 'folders nested more than 8 deep'."""
    folder = tmp_path / "hw"
    assert run("assignments", "start", "1", str(folder), "--solution").returncode == 0
    (folder / "tmp").mkdir()
    env = {**os.environ, "TMPDIR": str(folder / "tmp")}
    done = subprocess.run(
        [sys.executable, "-m", "simsync", "grade", str(folder), "--assignment", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 2, done.stdout
    assert "holds the temporary folder" in done.stderr and "TMPDIR" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert sorted(p.name for p in (folder / "tmp").iterdir()) == []  # nothing copied there


def test_check_proves_every_assignment_without_tensorflow() -> None:
    done = run("assignments", "check", "--no-tensorflow")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("reference") == 3 and "all assignments check" in done.stdout


def test_results_are_never_written_into_the_submission(tmp_path: Path) -> None:
    folder = tmp_path / "hw"
    assert run("assignments", "start", "1", str(folder)).returncode == 0
    towers = (folder / "towers.py").read_bytes()
    for target in (folder / "towers.py", folder / "results.json", folder / "."):
        done = run("grade", str(folder), "--assignment", "1", "--gradescope", str(target))
        assert done.returncode == 2, done.stdout
        assert "cannot write" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert (folder / "towers.py").read_bytes() == towers
    assert not (folder / "results.json").exists()


def test_results_are_never_written_over_the_assignment_and_their_name_is_shown_safely(
    tmp_path: Path,
) -> None:
    """The twenty-ninth attack's M2 wrote results.json over the reference solution and
    assignment.toml of a course folder; its M1 printed a control character of the file's
    name to the terminal."""
    import shutil

    from simsync.grading import load_assignments

    source = load_assignments()[0].folder
    course = tmp_path / "course"
    shutil.copytree(source, course / source.name)
    folder = tmp_path / "hw"
    assert run("assignments", "start", "1", str(folder)).returncode == 0
    env = {**os.environ, "SIMSYNC_ASSIGNMENTS": str(course)}
    kept = {p: p.read_bytes() for p in (course / source.name).rglob("*") if p.is_file()}
    grading = [sys.executable, "-m", "simsync", "grade", str(folder), "--assignment", "1"]
    for target in (
        course / source.name / "solution" / "towers.py",
        course / source.name / "x.json",
    ):
        done = subprocess.run(
            [*grading, "--no-tensorflow", "--gradescope", str(target)],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert done.returncode == 2 and "inside assignment 1's own folder" in done.stderr
    assert {p: p.read_bytes() for p in (course / source.name).rglob("*") if p.is_file()} == kept
    named = tmp_path / "a\x1b[2Jb.json"
    done = subprocess.run(
        [*grading, "--no-tensorflow", "--gradescope", str(named)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0 and named.exists(), done.stderr
    assert "\x1b" not in done.stdout and "a\\x1b[2Jb.json" in done.stdout


def test_results_json_to_standard_output(tmp_path: Path) -> None:
    folder = tmp_path / "hw"
    run("assignments", "start", "3", str(folder))
    done = run("grade", str(folder), "--assignment", "3", "--gradescope", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["score"] == 2 and "Score: 2/8" in done.stderr
    assert not (tmp_path / "-").exists()


def test_without_bubblewrap_grading_refuses_in_one_line(tmp_path: Path) -> None:
    """A PATH with Python but no bwrap: grade says what is missing and grades nothing;
    --unsafe-no-sandbox grades, and says it was not sandboxed."""
    folder = tmp_path / "hw"
    run("assignments", "start", "3", str(folder))
    bare = {**os.environ, "PATH": str(tmp_path / "empty")}
    command = [sys.executable, "-m", "simsync", "grade", str(folder), "--assignment", "3"]
    done = subprocess.run(command, capture_output=True, text=True, env=bare, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert "bubblewrap, which is not installed" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    done = subprocess.run(
        [*command, "--unsafe-no-sandbox"], capture_output=True, text=True, env=bare, timeout=120
    )
    assert done.returncode == 0 and "sandbox: NONE" in done.stdout


def test_start_makes_its_folder_whole_or_not_at_all(tmp_path: Path) -> None:
    """Files limited to 100 bytes, as a full disk would stop them: no folder, nothing left
    beside it, and the retry works."""
    import resource

    folder = tmp_path / "hw"

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))

    done = subprocess.run(
        [sys.executable, "-m", "simsync", "assignments", "start", "1", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=small_files,
    )
    assert done.returncode == 2 and f"cannot make {folder}" in done.stderr
    assert list(tmp_path.iterdir()) == []
    assert run("assignments", "start", "1", str(folder)).returncode == 0
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "scenario.toml", "towers.py"]


def test_results_json_is_never_written_through_a_link_or_into_a_fifo(tmp_path: Path) -> None:
    folder = tmp_path / "hw"
    run("assignments", "start", "3", str(folder))
    kept = tmp_path / "kept.txt"
    kept.write_text("mine")
    (tmp_path / "link.json").symlink_to(kept)
    os.mkfifo(tmp_path / "fifo.json")
    for target in ("link.json", "fifo.json"):
        done = run("grade", str(folder), "--assignment", "3", "--gradescope", target, cwd=tmp_path)
        assert done.returncode == 2 and "not a regular file" in done.stderr
    assert kept.read_text() == "mine" and (tmp_path / "link.json").is_symlink()


def test_a_failing_reference_stops_the_grading_for_the_instructor(tmp_path: Path) -> None:
    """A reference that raises: grade exits 2 and says so, instead of 0 points for everyone."""
    import shutil

    from simsync.grading import load_assignments

    source = load_assignments()[0].folder
    course = tmp_path / "course"
    shutil.copytree(source, course / source.name)
    solution = course / source.name / "solution" / "towers.py"
    solution.write_text("raise RuntimeError('the reference is broken')\n")
    env = {**os.environ, "SIMSYNC_ASSIGNMENTS": str(course)}
    command = [sys.executable, "-m", "simsync", "grade", str(source / "solution")]
    done = subprocess.run(
        [*command, "--assignment", "1", "--hidden", "--no-tensorflow"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout
    assert "the reference solution fails" in done.stderr and "reference is broken" in done.stderr


def test_folders_a_killed_grader_left_are_removed(tmp_path: Path) -> None:
    """kill -9 leaves the grader's temporary folders; the next grading removes those whose
    lock nobody holds, and never a folder in use or one that is not a grader's."""
    import fcntl

    scratch = tmp_path / "tmp"
    for name in ("simsync-grade-1-left", "simsync-grade-2-in-use", "simsync-grade-3-student"):
        (scratch / name).mkdir(parents=True)
    (scratch / "simsync-grade-1-left" / ".simsync-lock").touch()
    in_use = os.open(scratch / "simsync-grade-2-in-use" / ".simsync-lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(in_use, fcntl.LOCK_EX)
    folder = tmp_path / "hw"
    run("assignments", "start", "3", str(folder))
    env = {**os.environ, "TMPDIR": str(scratch)}
    done = subprocess.run(
        [sys.executable, "-m", "simsync", "grade", str(folder), "--assignment", "3"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    os.close(in_use)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in scratch.iterdir()) == [
        "simsync-grade-2-in-use",
        "simsync-grade-3-student",
    ]


def test_a_line_for_a_terminal_breaks_between_words(monkeypatch) -> None:
    import io

    from simsync.grading.commands import wrapped

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", "80")
    line = (
        " 4  Your own TensorFlow towers  (9 points; tasks: 4.1 The tower loop, 4.2 "
        "average_gradients)"
    )
    shown = wrapped(line, "    ", Terminal())
    assert shown.splitlines() == [
        " 4  Your own TensorFlow towers  (9 points; tasks: 4.1 The tower loop, 4.2",
        "    average_gradients)",
    ]
    assert wrapped(line, "    ", io.StringIO()) == line  # a file or a pipe: one line
