"""Every file simsync writes, under attack: killed mid-write, a full disk, two writers, and an
output that is also an input. The old file stays whole, no temporary file is left behind, and an
input is never overwritten."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simsync.files import atomic_writer, write_text

ROOT = Path(__file__).resolve().parent.parent
FOUR = ROOT / "examples" / "four_towers.toml"
PNG_START, PNG_END = b"\x89PNG\r\n\x1a\n", b"IEND\xaeB`\x82"


def simsync(*args: str, cwd: Path = ROOT, limit: int | None = None) -> subprocess.CompletedProcess:
    """Run the command line; ``limit``: no file it writes may grow beyond that many bytes
    (as on a full disk, the write fails)."""

    def small_files() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "simsync", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        preexec_fn=small_files,
    )


def scenario(folder: Path, towers: int = 4, name: str = "s.toml") -> Path:
    path = folder / name
    path.write_text(
        f'name = "t{towers}"\n[run]\nsteps = 3\n[cluster]\ndevices = {towers}\n'
        "[compute]\nmean = 0.01\n"
    )
    return path


def leftovers(folder: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


@pytest.mark.parametrize(
    "args",
    [
        ["graph", "{s}", "--format", "png", "-o", "{out}.png"],
        ["graph", "{s}", "--format", "dot", "-o", "{out}.dot"],
        ["graph", "{s}", "-o", "{out}.txt"],
        ["simulate", "{s}", "--trace", "{out}.json"],
        ["compare", "{s}", str(FOUR), "--png", "{out}.png"],
    ],
    ids=["png", "dot", "text", "trace", "compare-png"],
)
def test_a_full_disk_keeps_the_old_file_whole(tmp_path: Path, args: list[str]) -> None:
    """The issue's case: the old PNG became a truncated one; dot and text kept 4 KiB."""
    source = scenario(tmp_path, towers=64)
    suffix = args[-1].rsplit(".", 1)[1]
    out = tmp_path / f"out.{suffix}"
    old = {"png": PNG_START + b"old picture" + PNG_END, "txt": b"old\n" * 20}.get(
        suffix, b"old\n" * 3000
    )
    out.write_bytes(old)
    filled = [a.format(s=source, out=tmp_path / "out") for a in args]
    ran = simsync(*filled, cwd=tmp_path, limit=len(old) + 1)
    assert ran.returncode == 2, ran.stderr
    assert "Traceback" not in ran.stderr
    last = ran.stderr.strip().splitlines()[-1]
    assert last == f"simsync: error: cannot write {out}: File too large", ran.stderr
    assert out.read_bytes() == old
    assert leftovers(tmp_path, {"s.toml", out.name}) == []


@pytest.mark.tf
def test_calibrate_on_a_full_disk_keeps_the_old_profile(tmp_path: Path) -> None:
    """`calibrate -o` truncated its target: on a full disk the old profile was lost."""
    out = tmp_path / "here.json"
    old = b'{"old": "profile"}\n'
    out.write_bytes(old)
    ran = simsync("calibrate", str(FOUR), "-o", str(out), "--steps", "3", limit=len(old) + 1)
    last = ran.stderr.strip().splitlines()[-1]
    assert ran.returncode == 2 and "Traceback" not in ran.stderr, ran.stderr
    assert last == f"simsync: error: cannot write {out}: File too large"
    assert out.read_bytes() == old and leftovers(tmp_path, {"here.json"}) == []


def test_a_killed_png_write_leaves_the_old_file_or_the_whole_new_one(tmp_path: Path) -> None:
    """The issue's case: `graph --format png -o kill.png`, killed mid-write, left a 0-byte file
    (8 of 8 tries). Killed at moments spread over a whole run: SIGTERM removes the temporary
    file; SIGKILL cannot, but the target is never a partial file either."""
    source = scenario(tmp_path, towers=8)
    out = tmp_path / "kill.png"
    old = PNG_START + b"old picture" + PNG_END
    command = [sys.executable, "-m", "simsync", "graph", str(source), "--format", "png"]
    command += ["-o", str(out)]
    started = time.monotonic()
    subprocess.run(command, check=True, capture_output=True, timeout=180, cwd=tmp_path)
    whole = time.monotonic() - started
    outcomes = set()
    for attempt in range(8):
        for kill in (signal.SIGTERM, signal.SIGKILL):
            out.write_bytes(old)
            process = subprocess.Popen(
                command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            time.sleep(whole * (0.5 + attempt / 14))  # from half-way to just past the end
            process.send_signal(kill)
            process.wait(timeout=60)
            content = out.read_bytes()
            assert content == old or (
                content.startswith(PNG_START) and content.endswith(PNG_END) and content != old
            ), f"attempt {attempt}: {len(content)} bytes"
            outcomes.add("old" if content == old else "new")
            temporary = leftovers(tmp_path, {"s.toml", "kill.png"})
            if kill == signal.SIGTERM:
                assert temporary == [], temporary
            for name in temporary:  # SIGKILL: the hidden temporary file may stay
                assert name.startswith(".kill.png.") and name.endswith(".tmp")
                (tmp_path / name).unlink()
    assert outcomes  # at least one kill landed; the content was checked each time


def test_two_writers_of_one_target_never_share_a_temporary_file(tmp_path: Path) -> None:
    """Chrome traces written by two processes at once into one file: both succeed, the file is
    one whole trace, and nothing else is left."""
    source = scenario(tmp_path)
    out = tmp_path / "t.json"
    command = [sys.executable, "-m", "simsync", "simulate", str(source), "--trace", str(out)]
    for _ in range(3):
        writers = [
            subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for _ in range(4)
        ]
        errors = [w.communicate(timeout=180)[1] for w in writers]
        assert [w.returncode for w in writers] == [0, 0, 0, 0], errors
    import json

    assert "traceEvents" in json.loads(out.read_text())
    assert leftovers(tmp_path, {"s.toml", "t.json"}) == []


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "{s}", "--trace", "{s}"],
        ["simulate", "{s}", "--trace", "./sub/../s.toml"],
        ["simulate", "{s}", "--costs", "{p}", "--trace", "{p}"],
        ["graph", "{s}", "--format", "dot", "-o", "{s}"],
        ["graph", "{s}", "-o", "{link}"],
        ["compare", "{s}", "{b}", "--png", "{s}"],
        ["compare", "{s}", "{b}", "--png", "{b}"],
        ["calibrate", "{s}", "-o", "{s}"],
        ["crosscheck", "{s}", "--costs", "{p}", "--trace", "{p}"],
    ],
    ids=[
        "trace",
        "trace-spelled-otherwise",
        "trace-over-profile",
        "dot",
        "text-through-link",
        "compare-first",
        "compare-second",
        "calibrate",
        "crosscheck-profile",
    ],
)
def test_an_output_that_is_an_input_is_refused(tmp_path: Path, args: list[str]) -> None:
    source, other = scenario(tmp_path), scenario(tmp_path, name="b.toml")
    (tmp_path / "sub").mkdir()
    profile = tmp_path / "p.json"
    shutil.copy(ROOT / "tests" / "fixtures" / "profile.json", profile)
    (tmp_path / "link.toml").symlink_to(source)
    inputs = {path: path.read_bytes() for path in (source, other, profile)}
    names = {"s": source, "b": other, "p": profile, "link": tmp_path / "link.toml"}
    ran = simsync(*(a.format(**names) for a in args), cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    lines = ran.stderr.strip().splitlines()
    assert "refusing to overwrite it" in lines[-1] and "Traceback" not in ran.stderr
    assert {path: path.read_bytes() for path in inputs} == inputs


@pytest.mark.parametrize("option", ["--trace", "--timeline"])
@pytest.mark.parametrize("folder", ["simsync", "lessons"])
def test_no_output_is_written_into_simsync_s_own_folder(
    tmp_path: Path, option: str, folder: str
) -> None:
    """The thirty-second attack wrote a trace into simsync's package folder, the thirty-third
    found its lessons' folder unguarded; through ``..`` too, it is refused before any work,
    and nothing is written."""
    source = scenario(tmp_path)
    package = ROOT / folder
    target = (
        package
        / "01-building-is-not-running"
        / ".."
        / f"x{'.json' if option == '--trace' else '.png'}"
    )
    if folder == "simsync":
        target = package / "cli" / ".." / target.name
    before = sorted(p.name for p in package.iterdir())
    ran = simsync("simulate", str(source), option, str(target), cwd=tmp_path)
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "inside simsync's" in ran.stderr and "Traceback" not in ran.stderr
    assert sorted(p.name for p in package.iterdir()) == before


def test_the_writer_keeps_permissions_and_removes_its_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    write_text(target, "one")
    target.chmod(0o640)
    write_text(target, "two")
    assert target.read_text() == "two" and (target.stat().st_mode & 0o777) == 0o640
    with pytest.raises(KeyboardInterrupt), atomic_writer(target) as file:
        file.write("three")
        raise KeyboardInterrupt
    assert target.read_text() == "two" and os.listdir(tmp_path) == ["out.txt"]


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes anything")
def test_a_read_only_output_stays_read_only(tmp_path: Path) -> None:
    """Renaming over a file needs only the folder's permission: a read-only target is still
    refused, as writing into it was."""
    source, out = scenario(tmp_path), tmp_path / "g.dot"
    out.write_text("keep")
    out.chmod(0o444)
    ran = simsync("graph", str(source), "--format", "dot", "-o", str(out), cwd=tmp_path)
    assert ran.returncode == 2 and f"cannot write {out}: it is read-only" in ran.stderr
    assert out.read_text() == "keep"
