"""Inputs and outputs that are not plain files (issue 24): FIFOs, devices and folders as
inputs, a byte order mark, devices and very long names as targets, read-only folders, ``-``
for standard output, and paths that hold control characters. Every case is one clear line or
a correct result, never a hang or a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from simsync.files import NotRegularFile, read_text

ROOT = Path(__file__).resolve().parent.parent
FOUR = ROOT / "examples" / "four_towers.toml"
PROFILE = ROOT / "tests" / "fixtures" / "profile.json"
FIXTURES = ROOT / "tests" / "fixtures" / "lessons"


def simsync(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "simsync", *args],
        capture_output=True,
        text=True,
        timeout=120,  # a hang fails the test here
        cwd=cwd,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
    )


def one_clear_line(ran: subprocess.CompletedProcess[str], *words: str) -> str:
    lines = ran.stderr.strip().splitlines()
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert len(lines) == 1 and lines[0].startswith("simsync: error: "), ran.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")


@needs_fifo
@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "{x}"],
        ["graph", "{x}"],
        ["compare", "{x}", str(FOUR)],
        ["simulate", str(FOUR), "--costs", "{x}"],
        ["learn", "1", "--answers", "{x}"],
    ],
    ids=["scenario", "graph", "compare", "costs", "answers"],
)
def test_a_fifo_as_an_input_is_refused_at_once(tmp_path: Path, args: list[str]) -> None:
    """A named pipe with no writer: `open` waited for one forever."""
    fifo = tmp_path / "in.toml"
    os.mkfifo(fifo)
    ran = simsync(*(a.format(x=fifo) for a in args), SIMSYNC_LESSONS=str(FIXTURES))
    one_clear_line(ran, str(fifo), "a FIFO (named pipe), not a regular file")


@pytest.mark.parametrize("kind", ["folder", "device"])
def test_a_folder_or_a_device_as_an_input_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path if kind == "folder" else Path("/dev/null")
    if not path.exists():
        pytest.skip("no /dev/null here")
    wanted = "a folder, not a file" if kind == "folder" else "a character device"
    one_clear_line(simsync("simulate", str(path)), str(path), wanted)
    with pytest.raises(NotRegularFile, match=wanted):
        read_text(path)


def test_a_scenario_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Saved by an editor that writes a UTF-8 BOM: was "Invalid statement (line 1, column 1)"."""
    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + FOUR.read_bytes())
    ran = simsync("simulate", str(path), "--json")
    assert ran.returncode == 0, ran.stderr
    assert '"scenario": "four-towers"' in ran.stdout
