"""The packed autograder, run as Gradescope runs it: unzipped into source/, setup.sh once, the
submission in submission/, run_autograder, results/results.json; in a fresh venv, offline."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from simsync.grading import load_assignments

VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}


def gradescope_problems(results: dict) -> list[str]:
    """Where ``results`` departs from Gradescope's documented results.json format."""
    problems = []
    allowed = {"score", "execution_time", "output", "visibility", "stdout_visibility",
               "extra_data", "tests", "leaderboard", "output_format"}  # fmt: skip
    problems += [f"unknown key {k}" for k in results if k not in allowed]
    if "score" not in results and not all("score" in t for t in results.get("tests", [])):
        problems.append("no score, neither overall nor on every test")
    for test in results.get("tests", []):
        known = {"score", "max_score", "status", "name", "name_format", "number", "output",
                 "output_format", "tags", "visibility", "extra_data"}  # fmt: skip
        problems += [f"test key {k}" for k in test if k not in known]
        if not isinstance(test.get("score"), int | float):
            problems.append(f"test {test.get('name')}: score is not a number")
        if not isinstance(test.get("max_score"), int | float):
            problems.append(f"test {test.get('name')}: max_score is not a number")
        if test.get("visibility", "visible") not in VISIBILITY:
            problems.append(f"test {test.get('name')}: visibility {test['visibility']}")
        if test.get("status", "passed") not in ("passed", "failed"):
            problems.append(f"test {test.get('name')}: status {test['status']}")
        if not isinstance(test.get("output", ""), str):
            problems.append(f"test {test.get('name')}: output is not text")
    return problems


@pytest.fixture(scope="module")
def autograder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Gradescope-like /autograder with assignment 3 set up in a fresh venv."""
    root = tmp_path_factory.mktemp("autograder")
    archive = root / "autograder.zip"
    done = subprocess.run(
        [sys.executable, "-m", "simsync", "assignments", "pack", "3", "-o", str(archive)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    with zipfile.ZipFile(archive) as packed:
        assert {"setup.sh", "run_autograder"} <= set(packed.namelist())
        packed.extractall(root / "source")
    for script in ("setup.sh", "run_autograder"):
        (root / "source" / script).chmod(0o755)
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    env = {
        **os.environ,
        "AUTOGRADER_ROOT": str(root),
        "SIMSYNC_PYTHON": sys.executable,
        "SIMSYNC_PIP_OPTIONS": "--no-index --no-deps",  # offline: simsync from the zip only
    }
    done = subprocess.run(
        ["bash", str(root / "source" / "setup.sh")], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # the dependencies (TensorFlow, SimPy, ...) from this environment; Gradescope's from PyPI
    packages = next(root.glob("venv/lib/python*/site-packages"))
    (packages / "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return root


def run_autograder(root: Path, submission: Path) -> dict:
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.rmtree(root / "results", ignore_errors=True)
    shutil.copytree(submission, root / "submission")
    env = {k: v for k, v in os.environ.items() if k != "SIMSYNC_ASSIGNMENTS"}
    env["AUTOGRADER_ROOT"] = str(root)
    done = subprocess.run(
        [str(root / "run_autograder")], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((root / "results" / "results.json").read_text())


def test_simsync_in_the_autograder_is_the_packed_wheel(autograder: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run(
        [str(autograder / "venv/bin/python"), "-c", "import simsync; print(simsync.__file__)"],
        capture_output=True,
        text=True,
        cwd=autograder,
        env=env,  # as run_autograder runs it
    )
    assert done.stdout.startswith(str(autograder / "venv")), done.stdout + done.stderr


def test_the_reference_gets_full_marks_in_results_json(autograder: Path) -> None:
    assignment = load_assignments()[2]
    results = run_autograder(autograder, assignment.solution)
    assert gradescope_problems(results) == []
    assert results["score"] == sum(c.points for c in assignment.checks) == 9
    assert len(results["tests"]) == len(assignment.checks)  # hidden ones included
    assert "after_published" in {t["visibility"] for t in results["tests"]}


def test_the_starter_gets_less(autograder: Path) -> None:
    results = run_autograder(autograder, load_assignments()[2].starter)
    assert gradescope_problems(results) == [] and results["score"] < 9


def test_an_empty_submission_still_writes_results(autograder: Path, tmp_path: Path) -> None:
    results = run_autograder(autograder, tmp_path)
    assert gradescope_problems(results) == [] and results["score"] == 0
    assert "missing from your submission" in results["tests"][0]["output"]


def test_the_format_check_can_fail() -> None:
    bad = {"score": 1, "tests": [{"name": "x", "score": "1", "visibility": "public"}]}
    assert len(gradescope_problems(bad)) == 3


INSIDE = """
import subprocess, sys, tempfile
from importlib.resources import files
from pathlib import Path
from simsync.grading import load_assignments
from simsync.sandbox import bubblewrap as sandbox
from simsync.grading.graphs import _hidden

packaged = Path(str(files("simsync.assignments")))
assignment = load_assignments()[0]
with tempfile.TemporaryDirectory() as folder:
    bwrap = sandbox.find_sandbox().bwrap
    command = sandbox._bwrap_command(bwrap, Path(folder), Path(folder), _hidden(assignment), 2**20)
    look = "import os, sys; print([os.path.exists(p) for p in sys.argv[1:]])"
    paths = [str(packaged), str(packaged / assignment.slug / "solution"), str(assignment.folder)]
    done = subprocess.run([*command, sandbox._interpreter(), "-I", "-c", look, *paths],
                          capture_output=True, text=True)
print(packaged.is_dir(), str(assignment.folder).startswith(sys.argv[1]), done.stdout.strip())
"""


def test_the_sandbox_of_the_autograder_shows_no_solution(autograder: Path) -> None:
    """In the packed autograder the solutions are twice on disk (the wheel's copy in the
    venv, the assignment in source/): the sandbox shows neither."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["SIMSYNC_ASSIGNMENTS"] = str(autograder / "source" / "assignments")
    done = subprocess.run(
        [str(autograder / "venv/bin/python"), "-I", "-c", INSIDE, str(autograder)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.stdout.strip() == "True True [True, False, False]", done.stdout + done.stderr


def test_an_autograder_is_never_written_inside_what_it_packs(tmp_path: Path) -> None:
    """The thirty-first attack's C47d: packed into an assignment's own folder, each pack held
    the one before (769, 1537, 2306 KiB). Refused in one line, nothing written; beside the
    assignments, it is written."""
    from simsync.errors import UsageError
    from simsync.grading.pack import pack

    (assignment,) = [a for a in load_assignments() if a.number == 1]
    inside = assignment.folder / "auto.zip"
    with pytest.raises(UsageError, match="inside the assignments' folder"):
        pack(1, inside)
    assert not inside.exists()
    assert pack(1, tmp_path / "auto.zip") == 0 and zipfile.is_zipfile(tmp_path / "auto.zip")
