"""Hostile and broken submissions, graded for real in the real sandbox (bubblewrap), under
small limits: nothing written outside the copy, nothing of the solution seen, nothing left
running, and each one costs only its own checks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simsync.grading import grade, load_assignments
from simsync.grading.grader import Grade
from simsync.sandbox.bubblewrap import Limits, find_sandbox

ASSIGNMENT = load_assignments()[0]
TINY = Limits(cpu_seconds=4, memory_bytes=1536 * 2**20, file_bytes=2**20, wall_seconds=12)


def submit(folder: Path, body: str) -> Path:
    """A towers.py whose build(scenario) runs ``body`` first, then builds the reference."""
    folder.mkdir(parents=True, exist_ok=True)
    reference = (ASSIGNMENT.solution / "towers.py").read_text()
    code = reference.replace(
        "def build(scenario: Scenario) -> Graph:\n",
        "def build(scenario: Scenario) -> Graph:\n"
        + "".join(f"    {line}\n" for line in body.splitlines()),
    )
    (folder / "towers.py").write_text(code)
    return folder


def graded(folder: Path, limits: Limits = TINY) -> Grade:
    """The visible checks, without TensorFlow: one build and one evaluation of the graph."""
    return grade(ASSIGNMENT, folder, tensorflow=False, limits=limits)


def outputs(result: Grade) -> str:
    return "\n".join(r.output for r in result.results)


def test_the_reference_gets_its_points_in_the_sandbox(tmp_path: Path) -> None:
    result = graded(submit(tmp_path, "pass"))
    assert result.score == result.max_score > 0, outputs(result)
    assert result.protections["sandbox"].startswith("bubblewrap")
    assert {"CPU time", "memory", "wall clock", "processes", "network", "files"} <= set(
        result.protections
    )


def test_an_endless_loop_is_stopped_by_the_cpu_limit(tmp_path: Path) -> None:
    result = graded(submit(tmp_path, "while True:\n    pass"))
    assert "stopped: used more than 4 s of CPU time" in outputs(result)
    assert all(r.score == 0 for r in result.results if r.check.graph.endswith(":build"))


def test_sleeping_forever_is_stopped_by_the_wall_clock(tmp_path: Path) -> None:
    limits = Limits(cpu_seconds=5, memory_bytes=TINY.memory_bytes, wall_seconds=3)
    result = graded(submit(tmp_path, "import time\ntime.sleep(600)"), limits)
    assert "stopped: took longer than 3 s" in outputs(result)


def test_a_12_gib_allocation_fails_at_once(tmp_path: Path) -> None:
    result = graded(submit(tmp_path, "hoard = bytearray(12 * 2**30)"))
    assert "MemoryError" in outputs(result) and "towers.py" in outputs(result)


def test_a_socket_is_refused_and_there_is_only_loopback(tmp_path: Path) -> None:
    body = "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)"
    assert "PermissionError" in outputs(graded(submit(tmp_path / "a", body)))
    # the kernel's wall, whatever the audit hook does: no interface but the loopback
    body = "import socket\nraise RuntimeError(sorted(n for _, n in socket.if_nameindex()))"
    assert "RuntimeError: ['lo']" in outputs(graded(submit(tmp_path / "b", body)))


def test_writes_go_to_a_copy_and_nowhere_else(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    body = (
        "open('notes.txt', 'w').write('fine')\n"
        "import os\n"
        "try:\n"
        f"    d = os.open({str(outside)!r}, os.O_RDONLY)\n"  # not even there inside
        "    os.close(os.open('planted', os.O_WRONLY | os.O_CREAT, dir_fd=d))\n"
        "except OSError:\n"
        "    pass\n"
        f"open({str(outside / 'x')!r}, 'w').write('gotcha')"
    )
    folder = submit(tmp_path / "submission", body)
    before = sorted(p.name for p in folder.iterdir())
    result = graded(folder)
    assert "PermissionError: not allowed while grading: writing" in outputs(result)
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in folder.iterdir()) == before  # the submission untouched


FORK_EXEC = """
import _posixsubprocess, os
r, w = os.pipe()
_posixsubprocess.fork_exec(["/bin/sh", "-c", {command!r}], [b"/bin/sh"], True, (), None, None,
    -1, -1, -1, -1, -1, -1, r, w, True, {setsid}, -1, None, None, None, -1, None, False)
"""


def test_the_remount_escape_writes_nothing_outside(tmp_path: Path) -> None:
    """The escape that beat the old sandbox: a process started past the audit hook, then a
    remount of / read-write. No process starts at all."""
    target = tmp_path / "escaped"
    command = f"mount -o remount,bind,rw / && echo out > {target}"
    result = graded(submit(tmp_path / "s", FORK_EXEC.format(command=command, setsid=False)))
    assert "PermissionError" in outputs(result) and "Operation not permitted" in outputs(result)
    assert not target.exists()


def test_a_process_left_behind_cannot_forge_the_results(tmp_path: Path) -> None:
    """A session of its own, waiting for results.json to rewrite it: it never starts, and
    the file written is the grader's."""
    results = tmp_path / "results.json"
    forge = (
        f"for i in $(seq 100); do sleep 0.05; [ -f {results} ] && "
        f'echo \'{{"score": 100, "output": "FORGED"}}\' > {results}; done'
    )
    folder = submit(tmp_path / "s", FORK_EXEC.format(command=forge, setsid=True))
    from simsync.grading.commands import grade_command

    grade_command(folder, ASSIGNMENT.number, tensorflow=False, gradescope=results)
    # no process of the submission is left to forge it later
    assert not [pid for pid in _processes() if "FORGED" in _command_line(pid)]
    written = json.loads(results.read_text())
    assert "FORGED" not in results.read_text() and written["score"] < 100


def test_many_background_processes_are_refused(tmp_path: Path) -> None:
    body = (
        "import subprocess\n"
        "for _ in range(100):\n"
        "    subprocess.Popen(['sleep', '7777.25'], start_new_session=True)"
    )
    result = graded(submit(tmp_path, body))
    assert "PermissionError" in outputs(result)
    assert not [pid for pid in _processes() if "7777.25" in _command_line(pid)]


def test_the_solution_is_not_in_the_sandbox(tmp_path: Path) -> None:
    """The solution, the assignment's folder and the installed assignments are not there,
    and the request names none of them."""
    from importlib.resources import files

    places = [ASSIGNMENT.solution / "towers.py", ASSIGNMENT.folder, files("simsync.assignments")]
    body = (
        "import os\n"
        f"seen = [os.path.exists(str(p)) for p in {[str(p) for p in places]!r}]\n"
        f"named = {str(ASSIGNMENT.folder)!r} in open('/tmp/grader/request.json').read()\n"
        "raise RuntimeError(f'seen {seen} named {named}')"
    )
    assert "seen [False, False, False] named False" in outputs(graded(submit(tmp_path, body)))


def test_links_fifos_and_devices_are_left_out(tmp_path: Path) -> None:
    """``ln -s / root``, a FIFO, a link to /dev/zero, a link to the solution: not copied,
    named in the report; the grading neither blocks nor reads them."""
    folder = submit(tmp_path / "s", "pass")
    (folder / "root").symlink_to("/")
    (folder / "zero").symlink_to("/dev/zero")
    (folder / "solution.py").symlink_to(ASSIGNMENT.solution / "towers.py")
    os.mkfifo(folder / "answers.toml")
    result = graded(folder)
    assert result.score == result.max_score
    assert sorted(result.left_out) == [
        "answers.toml (a FIFO)",
        "root (a link)",
        "solution.py (a link)",
        "zero (a link)",
    ]


def test_an_exit_status_of_3_is_no_answer_too_large(tmp_path: Path) -> None:
    """The eleventh attack: os._exit(3) was told 'its answer is larger than 256 MiB' (the
    status the child gives for that); only a full answer file is one."""
    text = outputs(graded(submit(tmp_path / "exit", "import os\nos._exit(3)")))
    assert "exit status 3" in text and "larger than" not in text
    from simsync.sandbox.bubblewrap import TOO_LARGE, _stopped

    full = _stopped(TOO_LARGE, {}, "", TINY, True, began=True, too_large=True)
    assert full == "stopped: its answer is larger than 1 MiB"


def test_a_graded_file_that_is_a_link_is_said_not_to_be_graded(tmp_path: Path) -> None:
    """The tenth attack's minor item: towers.py linked to the solution was 'missing from
    your submission', which a student who sees the file cannot make sense of."""
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "towers.py").symlink_to(ASSIGNMENT.solution / "towers.py")
    result = graded(folder)
    assert result.score == 0 and result.left_out == ["towers.py (a link)"]
    assert (
        "towers.py: the file is missing from your submission (only regular files are "
        "graded: not a link, a folder or a pipe)" in outputs(result)
    )


def test_a_linked_training_file_is_not_graded() -> None:
    """Assignment 3 with training.toml and answers.toml linked to the solution's: 0 points."""
    assignment = load_assignments()[2]
    folder = Path(os.environ.get("TMPDIR", "/tmp"))
    import tempfile

    with tempfile.TemporaryDirectory(dir=folder) as name:
        for file in assignment.files:
            Path(name, file).symlink_to(assignment.solution / file)
        result = grade(assignment, Path(name), hidden=True, tensorflow=False, limits=TINY)
    assert result.score == 0, outputs(result)
    assert "missing" in outputs(result)


def test_a_huge_graph_is_refused_without_the_graders_paths(tmp_path: Path) -> None:
    """6,000 ops: refused before it is simulated, in one line that shows no path of the
    grader's machine."""
    body = (
        "graph = device_graph(scenario)\n"
        "for i in range(6000):\n"
        "    graph.add_op(Op(f'op{i}', 'aggregate', PARAMETER_DEVICE))\n"
        "graph.add_client(Client('main', fetches=('op0',)))\n"
        "return graph"
    )
    text = outputs(graded(submit(tmp_path, body)))
    assert "the graph has 6000 ops; at most 5000 are graded" in text
    assert "Traceback" not in text and "site-packages" not in text and "/simsync/" not in text


def test_an_exception_at_import_costs_only_that_submission(tmp_path: Path) -> None:
    (tmp_path / "towers.py").write_text("raise RuntimeError('broken at import')\n")
    result = grade(ASSIGNMENT, tmp_path, hidden=True, tensorflow=False, limits=TINY)
    assert result.score == 0 and len(result.results) == len(
        [c for c in ASSIGNMENT.checks if c.kind != "tensorflow"]
    )
    assert all("RuntimeError: broken at import" in r.output for r in result.results)


def test_printing_does_not_corrupt_the_result(tmp_path: Path) -> None:
    body = 'print("{\\"graph\\": null}")\nimport os\nos.write(1, b"noise\\n" * 1000)'
    result = graded(submit(tmp_path, body))
    assert result.score == result.max_score


def test_the_unsafe_mode_says_so(tmp_path: Path) -> None:
    result = grade(
        ASSIGNMENT, submit(tmp_path, "pass"), tensorflow=False, sandbox=find_sandbox(unsafe=True)
    )
    assert result.score == result.max_score
    assert result.protections["sandbox"].startswith("NONE")


def _processes() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_too_many_files_refuse_the_submission_in_one_line(tmp_path: Path) -> None:
    folder = submit(tmp_path, "pass")
    for i in range(250):
        (folder / f"f{i}.txt").write_text("x")
    result = graded(folder)
    assert result.score == 0
    assert {r.output for r in result.results} == {
        "more than 200 files and folders; at most 200 are graded"
    }


def test_a_graph_that_would_never_end_is_refused(tmp_path: Path) -> None:
    """Every client a daemon: the simulation would loop for ever; it is refused in one line."""
    tmp_path.mkdir(exist_ok=True)
    code = (ASSIGNMENT.solution / "towers.py").read_text()
    code = code.replace(
        'fetches=("apply_gradients",))', 'fetches=("apply_gradients",), daemon=True)'
    )
    (tmp_path / "towers.py").write_text(code)
    text = outputs(graded(tmp_path))
    assert "every client is a daemon" in text  # said, not stopped by the wall-clock limit


def test_no_threads_no_shared_memory_no_writes_to_the_roots(tmp_path: Path) -> None:
    """What no memory limit counts, refused: threads (8,000 filled the host's process table),
    anonymous shared memory, a large /dev/shm, files in / or /dev (in memory, unlimited)."""
    body = (
        "import os, threading\n"
        "refused = []\n"
        "try:\n"
        "    threading.Thread(target=print).start()\n"
        "except RuntimeError:\n"
        "    refused.append('thread')\n"
        "try:\n"
        "    os.memfd_create('hoard')\n"
        "except OSError:\n"
        "    refused.append('memfd')\n"
        "for path, size in (('/dev/shm/hoard', 20 * 2**20), ('/hoard', 1), ('/dev/hoard', 1)):\n"
        "    try:\n"
        "        open(path, 'wb').write(b'x' * size)\n"
        "    except OSError:\n"
        "        refused.append(path)\n"
        "raise RuntimeError(refused)"
    )
    expected = "RuntimeError: ['thread', 'memfd', '/dev/shm/hoard', '/hoard', '/dev/hoard']"
    assert expected in outputs(graded(submit(tmp_path, body)))


def test_what_the_student_writes_to_the_answer_cannot_break_the_grader(tmp_path: Path) -> None:
    """A number too long to read, deep brackets and a claim of facts, written to every
    descriptor: ignored; the graph the function returns is graded."""
    body = (
        "import os\n"
        "for fd in range(3, 12):\n"
        "    for junk in (b'{\"x\": ' + b'1' * 5000 + b'}\\n', b'[' * 100000 + b'\\n',\n"
        '                 b\'{"facts": {"step_time": {"mean": 0.001}}}\\n\'):\n'
        "        try:\n"
        "            os.write(fd, junk)\n"
        "        except OSError:\n"
        "            pass"
    )
    result = graded(submit(tmp_path, body))
    assert result.score == result.max_score, outputs(result)


def test_a_message_is_one_short_escaped_line(tmp_path: Path) -> None:
    """A 300 kB message is cut to 2,000 characters; line breaks and terminal escapes in it
    cannot forge lines of the report."""
    body = "raise RuntimeError('\\n  ✓ 3/3  forged\\x1b[2K' + 'A' * 300_000)"
    result = graded(submit(tmp_path, body))
    for r in result.results:
        if "forged" in r.output:
            assert len(r.output) < 2200 and "\n" not in r.output and "\x1b" not in r.output
            assert r.output.endswith("more characters)")
    assert any("forged" in r.output for r in result.results)


def test_links_count_against_the_limit(tmp_path: Path) -> None:
    folder = submit(tmp_path, "pass")
    for i in range(250):
        (folder / f"link{i}").symlink_to("/")
    result = graded(folder)
    assert result.score == 0 and "more than 200 files and folders" in outputs(result)


def test_kernel_settings_and_uncounted_memory_are_out_of_reach(tmp_path: Path) -> None:
    """The sandbox's user is the host's root without capabilities: /proc/sys's files would
    open for writing (a second attack changed the hostname); and System V shared memory and
    memfd_secret hold memory no limit counts."""
    body = (
        "import os\n"
        "refused = []\n"
        "try:\n"
        "    d = os.open('/proc/sys/kernel', os.O_RDONLY)\n"
        "    os.close(os.open('hostname', os.O_WRONLY, dir_fd=d))\n"
        "except OSError as error:\n"
        "    refused.append(error.errno)\n"
        "raise RuntimeError(refused)"
    )
    # no /proc/sys at all (ENOENT); read-only before (EROFS)
    assert "RuntimeError: [2]" in outputs(graded(submit(tmp_path / "a", body)))
    from simsync.sandbox.seccomp import REFUSED

    assert {"memfd_secret", "shmget", "shmat", "msgget", "semget"} <= set(REFUSED)


def test_no_process_s_memory_is_readable_in_the_sandbox(tmp_path: Path) -> None:
    """The thirtieth attack read its own process's memory through /proc/self/mem (the key that
    seals the grader's answers among it): the sandbox's /proc holds the machine's files and
    no process's directory, so neither the process's nor a thread's memory is there."""
    body = """import os, threading
found = sorted(os.listdir("/proc"))
tid = threading.get_native_id()
for path in ("/proc/self/mem", f"/proc/{os.getpid()}/mem", f"/proc/thread-self/mem",
             f"/proc/self/task/{tid}/mem", f"/proc/{tid}/mem", "/proc/self/maps"):
    try:
        open(path, "rb").close()
        raise RuntimeError("opened " + path)
    except FileNotFoundError:
        pass
with open("/proc/cpuinfo") as cpus:
    assert "processor" in cpus.read()
raise RuntimeError(repr(found))"""
    said = outputs(graded(submit(tmp_path, body)))
    assert "opened" not in said
    listed = said.split("RuntimeError: ", 1)[1]
    assert "'cpuinfo'" in listed and "'self'" in listed
    assert not any(name.isdigit() for name in re.findall(r"'([^']*)'", listed)), listed


def test_the_installations_record_of_the_solutions_is_not_in_the_sandbox(tmp_path: Path) -> None:
    # a wheel's RECORD lists every file of simsync with its hash and size, the solutions' too
    body = """import glob, sys
found = [p for d in sys.path for p in glob.glob(d + "/simsync-*.dist-info/*")]
if found:
    raise RuntimeError("found " + found[0])"""
    result = graded(submit(tmp_path, body))
    assert result.score == result.max_score, outputs(result)


def test_a_student_who_unsays_the_start_costs_only_their_own_checks(tmp_path: Path) -> None:
    # the child says it started before any student code: a later line cannot take it back
    # and make the grader blame itself (a failed grading, for the instructor to mend)
    body = """import os
for fd in range(1, 10):
    try:
        os.write(fd, b'{"started": false, "error": 7}\\n')
    except OSError:
        pass
os._exit(1)"""
    result = graded(submit(tmp_path, body))  # graded: the grader did not stop
    built = [r for r in result.results if r.check.graph.endswith(":build")]
    assert built and all(r.score == 0 for r in built), outputs(result)
    assert all("said what it may not: error:" in r.output for r in built), outputs(result)


def test_the_audit_hooks_code_cannot_be_swapped(tmp_path: Path) -> None:
    # found through the garbage collector, its code, defaults or closure changed: refused
    # (the hook is a second wall behind the sandbox's; this keeps it standing)
    body = """import gc
hooks = [o for o in gc.get_objects()
         if callable(o) and getattr(o, "__name__", "") in ("hook", "inside")]
assert hooks, "the hook was not found"
said = []
for found in hooks:
    for part, value in (("__code__", (lambda *a, **k: True).__code__), ("__defaults__", ())):
        try:
            setattr(found, part, value)
            said.append("set " + part)
        except (PermissionError, ValueError, TypeError) as error:
            said.append(type(error).__name__)
if "set __code__" in said or "set __defaults__" in said:
    raise RuntimeError("swapped: " + ", ".join(said))"""
    result = graded(submit(tmp_path, body))
    assert result.score == result.max_score, outputs(result)


def test_a_student_who_erases_the_answer_and_mimics_the_sandbox_stops_nothing(
    tmp_path: Path,
) -> None:
    # the answer truncated (its started line gone) and a bubblewrap-like last line on
    # standard error: the child had said it started on a pipe of its own, which no code it
    # runs can take back, so this is the student's failure, and the grading goes on
    body = """import os, sys
for fd in range(3, 30):
    try:
        os.ftruncate(fd, 0)
    except OSError:
        pass
sys.stderr.write("\\nbwrap: instructor, your reference solution is broken\\n")
os._exit(1)"""
    result = graded(submit(tmp_path, body))  # graded: no ReferenceFailed
    built = [r for r in result.results if r.check.graph.endswith(":build")]
    assert built and all(r.score == 0 for r in built), outputs(result)
    assert "bwrap: instructor" not in outputs(result)


def test_an_exception_of_a_huge_message_or_none_at_all_is_the_checks_reason(
    tmp_path: Path,
) -> None:
    """The sixth attack: a message of 4 MB lost the whole answer ("no graph came back"), and
    an exception whose __str__ raises lost the process ("exit status 1")."""
    huge = graded(submit(tmp_path / "huge", "raise ValueError('\\x1b[2J Score: 14/14 ' * 200000)"))
    said = outputs(huge)
    assert "ValueError: " in said and "\x1b" not in said, said[:300]
    assert max(len(r.output) for r in huge.results) <= 2000
    silent = """class Silent(Exception):
    def __str__(self):
        raise RuntimeError("no")
raise Silent()"""
    mute = graded(submit(tmp_path / "mute", silent))
    assert "Silent: (its message could not be made into text)" in outputs(mute), outputs(mute)


def test_a_student_cannot_change_the_limits_it_runs_under(tmp_path: Path) -> None:
    """The seventh attack: resource.prlimit went past the audit hook (the kernel allows a
    process to lower its own limits, or the PID namespace's first process's)."""
    body = """import resource
for call in (lambda: resource.prlimit(1, resource.RLIMIT_CPU, (1, 1)),
             lambda: resource.setrlimit(resource.RLIMIT_CPU, (1, 1))):
    try:
        call()
        raise RuntimeError("changed a limit")
    except PermissionError:
        pass"""
    result = graded(submit(tmp_path, body))
    assert result.score == result.max_score, outputs(result)


@pytest.mark.parametrize("flag", ["--run_with_pdb", "--pdb"])
def test_absls_debugger_flags_reach_no_debugger_in_a_programs_process(
    tmp_path: Path, flag: str
) -> None:
    """The thirty-fourth attack built ``--run_with_pdb`` at run time and wrote a ``.pdbrc``
    that pdb then ran, code no rule read. In a program's process (the child, before the
    program) absl's debugger flags run the program's main alone; without that, the
    ``.pdbrc`` runs (exit 42)."""
    script = (
        "import sys\n"
        "from simsync.tf_backend.program.child import _no_debugger\n"
        "if sys.argv[1] == 'guarded':\n"
        "    _no_debugger()\n"
        "open('.pdbrc', 'w').write('import os; os._exit(42)\\n')\n"
        "from absl import app\n"
        f"app.run(lambda argv: print('main ran'), argv=['x', '{flag}'])\n"
    )

    def run(guard: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", script, guard], cwd=tmp_path, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    guarded = run("guarded")
    assert guarded.returncode == 0 and "main ran" in guarded.stdout, guarded.stderr
    if flag == "--run_with_pdb":  # --pdb's post-mortem starts on a terminal only
        assert run("bare").returncode == 42
