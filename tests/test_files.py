"""Inputs and outputs that are not plain files (issue 24): FIFOs, devices and folders as
inputs, a byte order mark, devices and very long names as targets, read-only folders, ``-``
for standard output, and paths that hold control characters. Every case is one clear line or
a correct result, never a hang or a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import one_clear_line

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


# -- targets --------------------------------------------------------------------------------
def test_a_full_device_as_a_target_is_named_and_stays_a_device(tmp_path: Path) -> None:
    """`--trace /dev/full`: the error named the hidden temporary file; as root the device
    itself could be replaced by a file."""
    full = Path("/dev/full")
    if not full.is_char_device():
        pytest.skip("no /dev/full here")
    ran = simsync("simulate", str(FOUR), "--trace", str(full), cwd=tmp_path)
    one_clear_line(ran, f"cannot write {full}: No space left on device")
    assert full.is_char_device()
    ran = simsync("graph", str(FOUR), "--format", "dot", "-o", "/dev/null", cwd=tmp_path)
    assert ran.returncode == 0 and Path("/dev/null").is_char_device(), ran.stderr


@needs_fifo
def test_a_fifo_as_a_target_is_written_into(tmp_path: Path) -> None:
    """A named pipe is written into (a reader gets the trace) and stays a pipe; with no
    reader, one line at once instead of a hang."""
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open before the writer starts
    command = [sys.executable, "-m", "simsync", "simulate", str(FOUR), "--trace", str(fifo)]
    writer = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        received = read_until_done(reader, writer)
    finally:
        os.close(reader)
    err = writer.communicate(timeout=120)[1]
    assert writer.returncode == 0, err
    assert b'"traceEvents"' in received and fifo.is_fifo()
    ran = simsync("simulate", str(FOUR), "--trace", str(fifo))
    one_clear_line(ran, f"cannot write {fifo}: a FIFO (named pipe) that no process reads")


def read_until_done(reader: int, writer: subprocess.Popen[bytes]) -> bytes:
    """What comes through the pipe ``reader`` until ``writer`` has ended (never blocks)."""
    chunks, deadline = [], time.monotonic() + 120
    while time.monotonic() < deadline:
        ended = writer.poll() is not None
        try:
            chunk = os.read(reader, 1 << 16)
        except BlockingIOError:
            chunk = None
        if chunk:
            chunks.append(chunk)
        elif ended:
            break
        else:
            time.sleep(0.01)
    return b"".join(chunks)


def test_a_target_name_as_long_as_the_system_allows_is_written(tmp_path: Path) -> None:
    """A legal 250-character name failed: the temporary file's name was longer than 255."""
    name = "t" * 245 + ".json"
    ran = simsync("simulate", str(FOUR), "--trace", name, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert os.listdir(tmp_path) == [name] and '"traceEvents"' in (tmp_path / name).read_text()
    ran = simsync("simulate", str(FOUR), "--trace", "t" + name + "xxxxxx", cwd=tmp_path)
    one_clear_line(ran, "cannot write t" + name, "File name too long")


def test_a_write_that_cannot_start_names_the_target(tmp_path: Path) -> None:
    """The temporary file cannot be made: the error names the file asked for."""
    from simsync.errors import UsageError
    from simsync.files import write_text

    target = tmp_path / "gone" / "r.json"
    with pytest.raises(UsageError) as raised:
        write_text(target, "{}")
    assert str(raised.value) == f"cannot write {target}: No such file or directory"


def run_in_read_only(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``simsync args`` with ``folder`` read-only: its permissions for a user; for root, who
    ignores them, a read-only bind mount in a mount namespace of its own (skipped where the
    system allows none)."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            return simsync(*args)
        finally:
            folder.chmod(0o755)
    mount = f'mount --bind "{folder}" "{folder}" && mount -o remount,bind,ro "{folder}"'
    script = f'{mount} || exit 99; exec "$@"'
    command = ["unshare", "-m", "sh", "-c", script, "sh", sys.executable, "-m", "simsync"]
    try:
        ran = subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        pytest.skip("root ignores permissions, and there is no unshare for a read-only mount")
    if ran.returncode == 99:
        pytest.skip(f"root ignores permissions, and no read-only mount here: {ran.stderr}")
    return ran


@pytest.mark.parametrize("command", ["trace", "copy"])
def test_a_read_only_folder_is_named_with_the_target(tmp_path: Path, command: str) -> None:
    """`simulate --trace` checks the folder first; `lessons copy` found it out when making
    its temporary file, and named that file."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if command == "trace":
        target = folder / "r.json"
        ran = run_in_read_only(folder, "simulate", str(FOUR), "--trace", str(target))
        one_clear_line(ran, f"cannot write {target}: the folder {folder} is not writable")
    else:
        ran = run_in_read_only(folder, "lessons", "copy", "1", str(folder))
        line = one_clear_line(ran, f"cannot write {folder}/")
        assert ".tmp" not in line and ("Read-only" in line or "Permission denied" in line)
    assert os.listdir(folder) == []


# -- paths that hold control characters -----------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [["simulate", "new\nline.toml"], ["simulate", str(FOUR), "--trace", "no\tfolder\u2028/x.json"]],
    ids=["scenario", "trace"],
)
def test_a_path_with_a_line_break_stays_on_one_error_line(args: list[str]) -> None:
    """A newline in a path split the one error line in two; it is shown escaped."""
    line = one_clear_line(simsync(*args))
    assert "new\\nline.toml" in line or "no\\tfolder\\u2028/x.json" in line, line


# -- `-` for standard output ----------------------------------------------------------------
@pytest.mark.parametrize(
    "args, printed",
    [
        (["simulate", str(FOUR), "--trace", "-"], '{"traceEvents": '),
        (["graph", str(FOUR), "-o", "-"], "Graph 'four-towers'"),
        (["graph", str(FOUR), "--format", "dot", "-o", "-"], 'digraph "four-towers"'),
    ],
    ids=["trace", "graph-text", "graph-dot"],
)
def test_dash_prints_a_text_output_on_standard_output(
    tmp_path: Path, args: list[str], printed: str
) -> None:
    """`--trace -` wrote a file named `-`."""
    ran = simsync(*args, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith(printed) or printed in ran.stdout.splitlines()[0], ran.stdout
    assert os.listdir(tmp_path) == []
    if "--trace" in args:
        import json

        assert "traceEvents" in json.loads(ran.stdout)  # the trace alone: no summary


@pytest.mark.parametrize(
    "args, said",
    [
        (["graph", str(FOUR), "--format", "png", "-o", "-"], "-o -: a PNG is binary"),
        (["compare", str(FOUR), str(FOUR), "--png", "-"], "--png -: a PNG is binary"),
        (["assignments", "pack", "1", "-o", "-"], "-o -: a zip is binary"),
        (["simulate", str(FOUR), "--trace", "-", "--json"], "both print on standard output"),
    ],
    ids=["graph-png", "compare-png", "pack", "trace-and-json"],
)
def test_dash_is_refused_where_it_cannot_be_standard_output(
    tmp_path: Path, args: list[str], said: str
) -> None:
    one_clear_line(simsync(*args, cwd=tmp_path), said)
    assert os.listdir(tmp_path) == []


def test_a_file_named_dash_is_still_written_as_dot_slash_dash(tmp_path: Path) -> None:
    ran = simsync("graph", str(FOUR), "--format", "dot", "-o", "./-", cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout == "wrote -\n", ran.stderr
    assert (tmp_path / "-").read_text().startswith('digraph "four-towers"')


@pytest.mark.tf
def test_calibrate_prints_its_profile_with_dash(tmp_path: Path) -> None:
    import json

    ran = simsync("calibrate", str(FOUR), "-o", "-", "--steps", "3", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "costs" in json.loads(ran.stdout) and os.listdir(tmp_path) == []


def _gone_pid() -> int:
    """A process id no process has here."""
    pid = 4_000_000
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except OSError:
            pass
        pid -= 1


def test_a_temporary_file_a_killed_writer_left_is_removed_by_the_next_write(
    tmp_path: Path,
) -> None:
    from simsync.files import STALE_SECONDS, write_text

    target = tmp_path / "t.json"
    old = time.time() - STALE_SECONDS - 60
    left = tmp_path / f".t.json.{_gone_pid()}-abcdefgh.tmp"  # kill -9 while writing
    young = tmp_path / f".t.json.{_gone_pid()}-ijklmnop.tmp"  # maybe another namespace's
    running = tmp_path / f".t.json.{os.getpid()}-qrstuvwx.tmp"  # a writer still at it
    other = tmp_path / f".u.json.{_gone_pid()}-abcdefgh.tmp"  # another target's
    for path in (left, young, running, other):
        path.write_text("half")
    for path in (left, running, other):
        os.utime(path, (old, old))
    write_text(target, "whole")
    assert target.read_text() == "whole"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["t.json", young.name, running.name, other.name]
    )


def test_a_closed_standard_output_or_input_and_a_full_device_are_one_line() -> None:
    def run(command: list[str], **streams: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "simsync", *command],
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            cwd=ROOT,
            **streams,  # type: ignore[call-overload]
        )

    def closed(fd: int):  # the stream closed in the child, as `>&-` and `<&-` close them
        return lambda: os.close(fd)

    for command, streams, said in (
        (["simulate", str(FOUR)], {"preexec_fn": closed(1)}, "standard output is closed"),
        (["learn", "1"], {"preexec_fn": closed(0), "stdout": subprocess.DEVNULL},
         "standard input is closed"),
        (["simulate", str(FOUR), "--json"], {"stdout": subprocess.DEVNULL}, None),
    ):  # fmt: skip
        done = run(command, **streams)
        if said is None:
            assert done.returncode == 0, done.stderr
            continue
        assert done.returncode == 2 and said in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    if Path("/dev/full").exists():
        with open("/dev/full", "w") as full:
            done = run(["simulate", str(FOUR), "--json"], stdout=full)
        assert done.returncode == 2 and done.stderr == (
            "simsync: error: cannot write to standard output: No space left on device\n"
        )


def test_a_json_input_that_gives_a_key_twice_is_one_line(tmp_path) -> None:
    from simsync.files import InputError, read_json

    path = tmp_path / "costs.json"
    path.write_text('{"key": "a", "key": "b", "profile": {"ops": {}}}')
    with pytest.raises(InputError) as raised:
        read_json(path, "costs file", name="costs.json")
    assert str(raised.value) == "costs.json: JSON holds the key 'key' twice in one table"
