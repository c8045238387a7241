"""Terminals as they come (issue 24): odd ``COLUMNS``, no terminal, streams that cannot encode
UTF-8, a reader that leaves early. Every command prints readable output and exits 0: never
nothing at all, never a ``UnicodeEncodeError`` traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from simsync.terminal import HANDLER, usable_width

ROOT = Path(__file__).resolve().parent.parent
FOUR = str(ROOT / "examples" / "four_towers.toml")
FIXTURES = ROOT / "tests" / "fixtures" / "lessons"

COMMANDS = {
    "simulate": ["simulate", FOUR],
    "graph": ["graph", FOUR],
    "lessons": ["lessons", "list"],
    "learn-menu": ["learn"],
    "learn": ["learn", "1", "--no-input"],
}


def simsync(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[bytes]:
    """The command with ``env`` on top of this one's, without ``COLUMNS`` or an encoding
    unless given; output as bytes, to check them against the encoding asked for."""
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "PYTHONIOENCODING")}
    lessons = {"SIMSYNC_LESSONS": str(FIXTURES)} if args[0] == "learn" else {}
    return subprocess.run(
        [sys.executable, "-m", "simsync", *args],
        capture_output=True,
        timeout=180,
        cwd=ROOT,
        env={**base, "SIMSYNC_DATA_DIR": str(tmp_path), **lessons, **env},
        stdin=subprocess.DEVNULL,
    )


def readable(ran: subprocess.CompletedProcess[bytes], encoding: str = "utf-8") -> list[str]:
    """Exit 0, no traceback, and some lines of output (which the encoding can read)."""
    errors = ran.stderr.decode(errors="replace")
    assert ran.returncode == 0, errors
    assert "Traceback" not in errors and "Error" not in errors, errors
    lines = ran.stdout.decode(encoding).splitlines()
    assert len([line for line in lines if line.strip()]) >= 3, lines
    return lines


@pytest.mark.parametrize("columns", ["0", "-5", "wide", "99999999", None])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_any_columns_prints_at_a_usable_width(
    tmp_path: Path, command: str, columns: str | None
) -> None:
    """`COLUMNS=0` printed nothing at all, and exited 0."""
    env = {} if columns is None else {"COLUMNS": columns}
    lines = readable(simsync(COMMANDS[command], tmp_path, **env))
    assert max(len(line) for line in lines) <= 80  # not a terminal: 80 columns


@pytest.mark.parametrize(
    "env, encoding",
    [
        ({"PYTHONIOENCODING": "latin-1"}, "latin-1"),
        ({"PYTHONIOENCODING": "ascii", "LANG": "C", "LC_ALL": "C"}, "ascii"),
    ],
    ids=["latin-1", "ascii"],
)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_stream_that_is_not_utf8_gets_ascii_marks(
    tmp_path: Path, command: str, env: dict[str, str], encoding: str
) -> None:
    """`PYTHONIOENCODING=latin-1 simsync simulate ...` ended in a UnicodeEncodeError."""
    lines = readable(simsync(COMMANDS[command], tmp_path, **env), encoding)
    text = "\n".join(lines)
    assert "\\u" not in text  # every mark has a stand-in: no codes in the middle of a table
    if command in ("simulate", "graph", "lessons"):
        assert "+---" in text or "|" in text  # rich's ASCII boxes


def test_the_stand_ins_keep_tables_aligned() -> None:
    marks = "✓✗→◀◆·…─│┼┬└█"
    assert len(marks.encode("ascii", HANDLER)) == len(marks)


def test_a_usable_columns_is_left_to_rich() -> None:
    assert usable_width({"COLUMNS": "132"}) is None and usable_width({}) is None
    assert usable_width({"COLUMNS": "0"}) == usable_width({"COLUMNS": "5"}) == 80


def test_a_reader_that_leaves_early_stops_the_command_quietly(tmp_path: Path) -> None:
    """`simsync simulate ... --trace - | head -c 10`: no "Broken pipe" error line."""
    command = [sys.executable, "-m", "simsync", "simulate", FOUR, "--trace", "-"]
    env = {**os.environ, "SIMSYNC_DATA_DIR": str(tmp_path)}
    writer = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env
    )
    assert writer.stdout is not None and writer.stderr is not None
    assert writer.stdout.read(10) == b'{"traceEve'
    writer.stdout.close()
    errors = writer.stderr.read().decode()
    assert writer.wait(timeout=120) != 0 and errors == "", errors
