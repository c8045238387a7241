"""Stopping the grader: Ctrl-C, SIGTERM, a closed terminal (SIGHUP) and kill -9 of ``simsync
grade`` in the middle of a submission's run leave no process of the sandbox running (and, but
for kill -9, no temporary folder: the thirty-second attack's SIGHUP left two)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simsync.grading import load_assignments

ASSIGNMENT = load_assignments()[0]


def descendants(pid: int) -> set[int]:
    """Every process below ``pid``, from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize(
    "stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGKILL]
)
def test_stopping_the_grader_leaves_nothing_running(tmp_path: Path, stop: int) -> None:
    folder = tmp_path / "hw"
    folder.mkdir()
    code = (ASSIGNMENT.solution / "towers.py").read_text()
    (folder / "towers.py").write_text("import time\ntime.sleep(600)\n" + code)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    grader = subprocess.Popen(
        [sys.executable, "-m", "simsync", "grade", str(folder), "--assignment", "1"],
        # a grader that hangs dumps where it is when aborted (faulthandler), for the report
        env={**os.environ, "TMPDIR": str(scratch), "PYTHONFAULTHANDLER": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # as from a terminal: a test run started in the background (a shell's `&`, as CI
        # may be) ignores SIGINT, and the grader would inherit that and never see Ctrl-C
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    inside: set[int] = set()
    while time.monotonic() < deadline and len(inside) < 3:  # bwrap, its init, the child
        time.sleep(0.2)
        inside = descendants(grader.pid)
    assert len(inside) >= 3, "the sandbox never started"
    grader.send_signal(stop)
    try:
        grader.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        grader.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack
        _, err = grader.communicate(timeout=30)
        pytest.fail(f"the grader still ran 60 s after {stop!r}; it was in:\n{err.decode()}")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(pid) for pid in inside):
        time.sleep(0.1)
    assert not [pid for pid in inside if alive(pid)]
    if stop != signal.SIGKILL:
        assert list(scratch.iterdir()) == []
        assert grader.returncode != 0
