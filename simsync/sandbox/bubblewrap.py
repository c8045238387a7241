"""Run a child process on untrusted input in a sandbox made by bubblewrap, and bring back what
it says.

Everything of a grading that touches the student's input runs in such a child (see
:mod:`simsync.grading.child`): importing and calling the student's code, simulating the graph
it returns, running it on TensorFlow, reading ``training.toml`` and ``answers.toml``. So does
the import of a user's TensorFlow program (:mod:`simsync.tf_backend.program`). The parent
outside reads only the JSON lines the child writes, at most ``Limits.file_bytes``.

The sandbox is bubblewrap (``bwrap``, the one Flatpak uses), run with:

* ``--unshare-all --unshare-user --disable-userns``: its own user, PID, network (loopback
  only), IPC and UTS namespaces, and no further user namespace inside;
* ``--cap-drop ALL`` (and bubblewrap's ``no_new_privs``): the mounts it made cannot be undone;
* ``--die-with-parent``, its own PID namespace and ``--new-session``: when the child ends, or
  the grader dies (even by ``kill -9``), every process inside ends with it;
* a seccomp filter (:mod:`simsync.sandbox.seccomp`): no new processes at all, no mounts, no
  namespaces;
* a file system holding only the system's ``/usr``, the Python interpreter and the installed
  packages (read-only; the assignments' folders are hidden under empty ones), the copy of the
  submission (read-only; the child copies it into its working folder), an ``/etc/hosts``
  that names ``localhost`` alone (a program's own servers listen there), and a ``/tmp`` in
  memory of ``Limits.scratch_bytes``;
* the limits of :class:`Limits` (``setrlimit`` before bubblewrap starts, inherited), and the
  grader's wall clock.

Where bubblewrap is missing or cannot start (a container without user namespaces),
:func:`find_sandbox` says so in one line; an instructor may choose :data:`NO_SANDBOX` on
purpose (``--unsafe-no-sandbox``), which keeps the limits and the child's audit hook only.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simsync.errors import UsageError
from simsync.sandbox import seccomp
from simsync.sandbox.channel import KEY_BYTES, parse_line, unseal

__all__ = [
    "ENDED",
    "NO_SANDBOX",
    "TOO_LARGE",
    "Limits",
    "Network",
    "Outcome",
    "Sandbox",
    "SandboxUnavailable",
    "find_sandbox",
    "locked_folder",
    "remove_stale_folders",
    "run_child",
]

#: the exit status a child gives when its answer was larger than the file size limit
TOO_LARGE = 3
#: what :func:`_wait` returns for a task of a cluster ended once its cluster was done
ENDED = "ended: its cluster was done"
#: how often a task of a cluster is asked whether its cluster is done, and what of its
#: answer is looked at then
POLL_SECONDS, TAIL_BYTES = 0.2, 4096
#: the prefix of the grader's temporary folders, one per sandboxed run (and one per grading,
#: ``simsync-grade-``), with the grader's process id: a grader killed with ``kill -9`` cannot
#: remove its own, the next one removes them (:func:`remove_stale_folders`)
SCRATCH_PREFIX = f"simsync-grading-{os.getpid()}-"
#: the lock file in each of them
LOCK = ".simsync-lock"
#: the temporary folders :func:`remove_stale_folders` removes once their maker is gone: the
#: grader's, and a program import's (its copy, its exported graph)
STALE_PREFIXES = ("simsync-grade-", "simsync-grading-", "simsync-program-", "simsync-export-")
#: how the build stage's graph line begins (the child writes it so); lines of anything else
#: longer than this are not read
GRAPH_LINE = b'{"graph": '
MAX_LINE = 2 * 2**20
#: open files at once (sockets and pipes hold memory no other limit counts)
OPEN_FILES = 256
#: the size of the sandbox's /dev/shm
SHARED_MEMORY_BYTES = 16 * 2**20
#: where things are inside the sandbox
INSIDE_REQUEST = "/tmp/grader/request.json"
INSIDE_SUBMISSION = "/tmp/grader/submission"
INSIDE_WORK = "/tmp/work"


@dataclass(frozen=True)
class Limits:
    """What one run of the child may use. The submission's copy has limits of its own
    (:mod:`simsync.grading.submission`)."""

    cpu_seconds: int = 60
    #: address space: TensorFlow alone reserves about 1.6 GiB
    memory_bytes: int = 4 * 2**30
    #: any one file written, the child's answer and its messages included
    file_bytes: int = 16 * 2**20
    #: one line of the answer (but a build's graph, which the next process reads): a longer
    #: one is not read (parsing it could cost the parent far more memory than its size)
    line_bytes: int = 2 * 2**20
    wall_seconds: float = 120.0
    #: the sandbox's /tmp, in memory: the working copy and anything written there
    scratch_bytes: int = 64 * 2**20
    #: every run of one grading together (each run's wall clock is cut to what is left)
    grading_seconds: float = 600.0


class SandboxUnavailable(UsageError):
    """The sandbox cannot start here: one line saying what is missing."""


@dataclass(frozen=True)
class Sandbox:
    """How the child is contained: ``bubblewrap`` (its path in ``bwrap``) or nothing."""

    name: str
    bwrap: str | None = None
    version: str = ""

    def protections(self, limits: Limits) -> dict[str, str]:
        """What contained the student's code, for the report: one phrase per protection."""
        common = {
            "CPU time": f"{limits.cpu_seconds} s",
            "memory": f"{limits.memory_bytes / 2**30:g} GiB",
            "wall clock": f"{limits.wall_seconds:g} s",
        }
        if self.bwrap is None:
            return {
                "sandbox": "NONE (graded with --unsafe-no-sandbox)",
                **common,
                "network": "NOT isolated; sockets refused by an audit hook only",
                "files": "NOT isolated; writes outside a copy refused by an audit hook only",
            }
        filtered = "no new ones" if seccomp.program() else "no seccomp filter on this machine"
        return {
            "sandbox": f"bubblewrap {self.version}".strip(),
            **common,
            "processes": f"{filtered}; all ended with the grading",
            "network": "none (loopback only)",
            "files": "the interpreter and its packages, read-only; writes only to a copy of "
            f"the submission ({limits.scratch_bytes // 2**20} MiB in memory)",
        }


NO_SANDBOX = Sandbox("none")


@dataclass
class Outcome:
    """What the child said, line by line merged into one dict, or why it said nothing;
    ``dropped``: why lines were not read (too long, :attr:`Limits.line_bytes`, or holding
    too many values, :data:`~simsync.sandbox.channel.MAX_ITEMS`)."""

    said: dict[str, Any]
    error: str | None = None
    stderr: str = ""
    dropped: list[str] = field(default_factory=list)
    #: the child started (it wrote so on a pipe of its own before any user code ran: a
    #: byte the code it runs then cannot take back, unlike a line of the answer)
    started: bool = False

    def too_long(self, limits: Limits) -> str:
        """Why an answer is missing that came on a line too long, or ``""``."""
        return f"its answer came on a line {self.dropped[0]}" if self.dropped else ""


def find_sandbox(unsafe: bool = False) -> Sandbox:
    """The sandbox of this machine: bubblewrap when it starts here, :data:`NO_SANDBOX` when
    ``unsafe``; else :class:`SandboxUnavailable` saying what is missing."""
    if unsafe:
        return NO_SANDBOX
    found = _probe()
    if isinstance(found, str):
        raise SandboxUnavailable(found)
    return found


@functools.cache
def _probe() -> Sandbox | str:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return (
            "grading runs student code in a sandbox made by bubblewrap, which is not "
            "installed: install it (Debian/Ubuntu: apt-get install bubblewrap), or pass "
            "--unsafe-no-sandbox to grade trusted code without one"
        )
    with tempfile.TemporaryDirectory(prefix="simsync-probe-") as folder:
        command = _bwrap_command(bwrap, Path(folder), Path(folder), (), 2**20)
        try:
            done = subprocess.run(
                [*command, "/bin/true"], capture_output=True, timeout=20, stdin=subprocess.DEVNULL
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"bubblewrap ({bwrap}) could not start: {error}"
    if done.returncode != 0:
        why = (done.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
        return (
            f"bubblewrap ({bwrap}) cannot make a sandbox here: {why} (it needs user "
            "namespaces, which this system or container forbids); grade on a machine that "
            "allows them, or pass --unsafe-no-sandbox to grade trusted code without one"
        )
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout
    return Sandbox("bubblewrap", bwrap, version.split()[-1] if version.split() else "")


def remove_stale_folders(folder: str | None = None) -> None:
    """Remove the temporary folders of graders and program imports that no longer run
    (``kill -9`` left them; their names begin with :data:`STALE_PREFIXES`):
    a grader's folder holds :data:`LOCK` locked for as long as it is used, so a folder is
    removed only when it has that file and its lock can be taken (a grader in another PID
    namespace, or a student's folder named alike, is never touched)."""
    folder = folder or tempfile.gettempdir()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if entry.name.startswith(STALE_PREFIXES) and entry.is_dir(follow_symlinks=False):
                _remove_if_unlocked(Path(entry.path))


def _remove_if_unlocked(folder: Path) -> None:
    try:
        handle = os.open(folder / LOCK, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return  # not a grader's folder, or not yours to open
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(handle)
        return  # in use
    shutil.rmtree(folder, ignore_errors=True)
    os.close(handle)


@contextlib.contextmanager
def locked_folder(prefix: str) -> Iterator[Path]:
    """A temporary folder that holds its :data:`LOCK` locked until it is removed."""
    with tempfile.TemporaryDirectory(prefix=prefix) as name:
        handle = os.open(Path(name, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield Path(name)
        finally:
            os.close(handle)


@dataclass(frozen=True)
class Network:
    """A child that is one task of a cluster: it runs in the cluster's private network
    namespace (``enter``: the command that enters it, such as ``nsenter``), where bubblewrap
    shares that network with it (loopback only, the cluster's own), and it ends when
    ``done`` says so (asked with the end of what it has said so far, its last
    :data:`TAIL_BYTES`), what it said kept."""

    enter: tuple[str, ...]
    done: Callable[[bytes], bool]
    #: asked as ``done`` is: once it says so, the child is told to go on (``go`` and a
    #: newline on its standard input, which is then closed)
    ready: Callable[[bytes], bool] | None = None


def run_child(
    sandbox: Sandbox,
    request: dict[str, Any],
    submission: Path,
    limits: Limits,
    hidden: tuple[Path, ...] = (),
    *,
    module: str = "simsync.grading.child",
    threads: bool = False,
    sealed: bool = False,
    network: Network | None = None,
) -> Outcome:
    """Run ``python -I -m MODULE REQUEST SUBMISSION WORK`` (by default the grader's
    :mod:`simsync.grading.child`) on ``request`` with ``submission`` (a clean copy, see
    :mod:`simsync.grading.submission`) in ``sandbox``; ``hidden`` folders are empty inside.
    The child's JSON lines are merged into :attr:`Outcome.said`, also when a limit stopped it
    (what it said before stays); :attr:`Outcome.error` says why it stopped. It may start
    threads only with ``threads`` (TensorFlow needs them); new processes never. A ``sealed``
    child (one that runs nobody's code) gets a key on its standard input, and only its lines
    sealed with that key are read (:mod:`simsync.sandbox.channel`); the request says so to
    it (``"sealed": true``). A task of a cluster runs in its ``network``."""
    key = os.urandom(KEY_BYTES) if sealed else None
    with locked_folder(SCRATCH_PREFIX) as scratch, _started_pipe() as started:
        request_file = scratch / "request.json"
        said = {**request, "sealed": sealed, "started_fd": started[1]}
        request_file.write_text(json.dumps(said))
        child = [_interpreter(), "-I", "-m", module]
        if sandbox.bwrap is None:
            work = scratch / "work"
            work.mkdir()
            command = [*child, str(request_file), str(submission), str(work)]
            return _run(
                command, work, scratch, limits, started, sandboxed=False, key=key, network=network
            )
        inside = [*child, INSIDE_REQUEST, INSIDE_SUBMISSION, INSIDE_WORK]
        hosts = scratch / "hosts"
        hosts.write_text(HOSTS)
        cmdline = scratch / "cmdline"  # /proc/self/cmdline inside, as TensorFlow reads it
        cmdline.write_bytes(b"\0".join(a.encode() for a in inside) + b"\0")
        bwrap = _bwrap_command(
            sandbox.bwrap,
            request_file,
            submission,
            hidden,
            limits.scratch_bytes,
            share_net=network is not None,
            hosts=hosts,
            cmdline=cmdline,
        )
        code = seccomp.program(threads=threads)
        command = [*bwrap, *inside]
        return _run(
            command,
            scratch,
            scratch,
            limits,
            started,
            sandboxed=True,
            filter_code=code,
            key=key,
            network=network,
        )


@contextlib.contextmanager
def _started_pipe() -> Iterator[tuple[int, int]]:
    """A pipe whose write end the child gets: it writes one byte there once it started."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        yield read_end, write_end
    finally:
        for fd in (read_end, write_end):
            with contextlib.suppress(OSError):
                os.close(fd)


def _bwrap_command(
    bwrap: str,
    request: Path,
    submission: Path,
    hidden: tuple[Path, ...],
    scratch_bytes: int,
    share_net: bool = False,
    hosts: Path | None = None,
    cmdline: Path | None = None,
) -> list[str]:
    """bubblewrap's arguments, up to the ``--`` before the command; ``share_net``: the
    network namespace it is started in (a cluster's private one), not one of its own;
    ``hosts``: its ``/etc/hosts``; ``cmdline``: its process's command line, as
    ``/proc/self/cmdline`` (TensorFlow stops without it)."""
    command = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns"]
    if share_net:
        command.append("--share-net")
    command += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    # first the sandbox's own /tmp, in memory: what is bound after it may lie under /tmp
    command += ["--size", str(scratch_bytes), "--tmpfs", "/tmp", "--dir", INSIDE_WORK]
    command += ["--ro-bind", str(request), INSIDE_REQUEST]
    command += ["--ro-bind", str(submission), INSIDE_SUBMISSION, "--chdir", INSIDE_WORK]
    command += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            command += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            command += ["--ro-bind", top, top]
    for path in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        if os.path.exists(path):
            command += ["--ro-bind", path, path]
    if hosts is not None:  # localhost has a name: a program's own servers listen there
        command += ["--ro-bind", str(hosts), "/etc/hosts"]
    for path in _python_paths():
        command += ["--ro-bind", path, path]
    for path in _inside(hidden, _python_paths()):
        command += ["--tmpfs", path]
    for path in _site_folders():  # any other simsync installed there: its assignments too
        if os.path.isdir(os.path.join(path, "simsync", "assignments")):
            command += ["--tmpfs", os.path.join(path, "simsync", "assignments")]
        # and its installation's record: a wheel's RECORD holds each solution file's hash
        for record in sorted(Path(path).glob("simsync-*.dist-info")):
            command += ["--tmpfs", str(record)]
    # /proc: the machine's own files, read-only, and no process's directory: a process reads
    # its own memory through /proc/self/mem (or a thread's, /proc/<tid>/mem) whatever else
    # holds it, and the graded program's process holds the key that seals its answers (the
    # thirtieth attack read it there); the sandbox's user is the host's root without
    # capabilities, and /proc/sys's files would let it write whatever their mode allows
    command += ["--tmpfs", "/proc"]
    for name in PROC_FILES:
        command += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    # of its own process, only what TensorFlow stops without: the interpreter's path, the
    # command line (a file, not the process's)
    command += ["--dir", "/proc/self", "--symlink", os.path.realpath(sys.executable)]
    command += ["/proc/self/exe"]
    if cmdline is not None:
        command += ["--ro-bind", str(cmdline), "/proc/self/cmdline"]
    command += ["--remount-ro", "/proc", "--dev", "/dev"]
    # /dev, and the root bubblewrap makes, are in memory with no size: read-only; shared
    # memory gets a small tmpfs of its own
    command += ["--size", str(SHARED_MEMORY_BYTES), "--tmpfs", "/dev/shm"]
    command += ["--remount-ro", "/dev", "--remount-ro", "/"]
    return command


#: the files of the sandbox's /proc, the machine's own (what Python, numpy and TensorFlow read
#: of the machine: its processors and memory)
PROC_FILES = ("cpuinfo", "meminfo", "stat", "loadavg", "uptime", "version")

#: the sandbox's /etc/hosts: localhost, and no other name
HOSTS = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"


def _interpreter() -> str:
    """This interpreter by a path that holds inside: its folder resolved (the sandbox has no
    links above it), its own name kept (a venv's ``python`` is a link whose name matters)."""
    folder, name = os.path.split(sys.executable)
    return os.path.join(os.path.realpath(folder), name)


@functools.cache
def _python_paths() -> tuple[str, ...]:
    """The folders the child's interpreter needs: its installation, the environment's
    packages (with the package folders its ``.pth`` files add), and simsync's own package
    folder (outside them in an editable install: that folder alone, not the project around
    it)."""
    import simsync

    paths = sysconfig.get_paths()
    wanted = {sys.base_prefix, sys.prefix, paths["stdlib"], *_site_folders()}
    # (and the package folders the environment's .pth files add, which an isolated child
    # reads too); never a project's own folder, which a .pth may add too (the solutions)
    wanted.add(str(Path(simsync.__file__).resolve().parent))
    wanted.add(str(Path(os.path.realpath(sys.executable)).parent))
    real = sorted({os.path.realpath(p) for p in wanted if p and os.path.isdir(p)})
    # a folder inside another one already bound needs no bind of its own
    return tuple(p for p in real if not any(p.startswith(q + os.sep) for q in real if q != p))


@functools.cache
def _site_folders() -> tuple[str, ...]:
    """The folders packages are installed in (inside :func:`_python_paths`)."""
    paths = sysconfig.get_paths()
    found = {paths["purelib"], paths["platlib"]}
    found |= {p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")}
    return tuple(sorted(os.path.realpath(p) for p in found if os.path.isdir(p)))


def _inside(hidden: tuple[Path, ...], bound: tuple[str, ...]) -> list[str]:
    """The hidden folders that would be visible: those inside a bound folder."""
    real = sorted({os.path.realpath(p) for p in hidden if p.is_dir()})
    return [p for p in real if any(p == q or p.startswith(q + os.sep) for q in bound)]


def _run(
    command: list[str],
    cwd: Path,
    scratch: Path,
    limits: Limits,
    started: tuple[int, int],
    *,
    sandboxed: bool,
    filter_code: bytes | None = None,
    key: bytes | None = None,
    network: Network | None = None,
) -> Outcome:
    work = INSIDE_WORK if sandboxed else str(cwd)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": work,
        "TMPDIR": "/tmp" if sandboxed else work,
        "PYTHONDONTWRITEBYTECODE": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MPLCONFIGDIR": work,
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "LANG": "C.UTF-8",
    }
    out_path, err_path = scratch / "out", scratch / "err"
    with _filter_fd(filter_code) as fds, open(out_path, "w+b") as out, open(err_path, "w+b") as err:
        if fds:
            command = [command[0], "--add-seccomp-fd", str(fds[0]), *command[1:]]
        if network is not None:
            command = [*network.enter, *command]
        status = _wait(command, cwd, env, out, err, (*fds, started[1]), limits, key, network)
        # its answer over the limit: the child says so by TOO_LARGE, and the file is full
        # (the code it ran may exit 3 itself: os._exit(3) is no answer too large)
        too_large = status == TOO_LARGE and os.fstat(out.fileno()).st_size >= limits.file_bytes
        out.seek(0)
        err.seek(0)
        said, dropped = _merge(out.read(limits.file_bytes), limits.line_bytes, key)
        stderr = err.read(1 << 16).decode(errors="replace")
    try:
        began = bool(os.read(started[0], 1))
    except BlockingIOError:  # nothing written: it never started
        began = False
    stopped = _stopped(status, said, stderr, limits, sandboxed, began, too_large)
    return Outcome(said, stopped, stderr, dropped, began)


def _stopped(
    status: int | str,
    said: dict[str, Any],
    stderr: str,
    limits: Limits,
    sandboxed: bool,
    began: bool = False,
    too_large: bool = False,
) -> str | None:
    """Why the child stopped before its work was done, or None when it finished
    (``too_large``: its answer went over the file size limit)."""
    if status == ENDED:  # its cluster was done: what it said stands
        return None if said else "its cluster ended before it said anything"
    if isinstance(status, str):  # the wall clock
        return status
    signalled = -status if status < 0 else status - 128 if sandboxed and status > 128 else 0
    if signalled:  # bubblewrap exits 128 + the signal of its child
        return _signal_message(signalled, limits)
    if too_large:
        return f"stopped: its answer is larger than {limits.file_bytes / 2**20:g} MiB"
    if status != 0 or not said:
        if began:  # the code it ran ended it (what it printed is its own, not said here)
            return f"its process ended with exit status {status}"
        # before it started: bubblewrap's own message says what is wrong with the sandbox;
        # anything else the child printed may show this machine's paths
        last = (stderr.strip().splitlines() or [""])[-1]
        why = f": {last}" if last.startswith("bwrap:") else ""
        return f"the grader's process failed (exit status {status}){why}"
    return None


def _wait(
    command: list[str],
    cwd: Path,
    env: dict[str, str],
    out: Any,
    err: Any,
    fds: tuple[int, ...],
    limits: Limits,
    key: bytes | None = None,
    network: Network | None = None,
) -> int | str:
    """Start the child, wait for it within the wall clock, and leave nothing running: its
    process group is killed whatever happens (a timeout, Ctrl-C, an exception here). A
    ``key`` is written on its standard input (a pipe holds it whole), which is then closed.
    A task of a cluster (``network``) is also ended, :data:`ENDED`, once its cluster is
    done, asked every :data:`POLL_SECONDS` with what it said so far."""
    told = network is None or network.ready is None  # nothing to tell it
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL if key is None and told else subprocess.PIPE,
        stdout=out,
        stderr=err,
        pass_fds=fds,
        start_new_session=True,
        preexec_fn=functools.partial(_set_limits, limits),
    )
    try:
        if key is not None and process.stdin is not None:
            with contextlib.suppress(OSError):  # a child that ended at once
                process.stdin.write(key.hex().encode() + b"\n")
            with contextlib.suppress(OSError):
                process.stdin.close()
        if network is None:
            return process.wait(timeout=limits.wall_seconds)
        began = time.monotonic()
        while True:
            try:
                return process.wait(timeout=POLL_SECONDS)
            except subprocess.TimeoutExpired:
                if time.monotonic() - began > limits.wall_seconds:
                    raise
            with open(out.name, "rb") as so_far:  # its last line, at most
                so_far.seek(max(0, os.fstat(so_far.fileno()).st_size - TAIL_BYTES))
                tail = so_far.read(TAIL_BYTES)
            if network.done(tail):
                return ENDED
            if not told and network.ready is not None and network.ready(tail):
                told = True
                with contextlib.suppress(OSError):
                    if process.stdin is not None:
                        process.stdin.write(b"go\n")
                        process.stdin.close()
    except subprocess.TimeoutExpired:
        return f"stopped: took longer than {limits.wall_seconds:g} s"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _set_limits(limits: Limits) -> None:
    """In the new process, before bubblewrap: inherited by everything it starts (never
    above a limit the grader itself was started with: ``ulimit -n 12`` holds)."""
    for which, soft, hard in (
        (resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1),
        (resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes),
        (resource.RLIMIT_FSIZE, limits.file_bytes, limits.file_bytes),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NOFILE, OPEN_FILES, OPEN_FILES),
    ):
        _, ceiling = resource.getrlimit(which)
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        resource.setrlimit(which, (soft, hard))


class _filter_fd:
    """The seccomp program in an anonymous file, open for bubblewrap to read."""

    def __init__(self, code: bytes | None) -> None:
        self.code, self.fd = code, -1

    def __enter__(self) -> tuple[int, ...]:
        if self.code is None:
            return ()
        self.fd = os.memfd_create("simsync-seccomp", 0)
        os.write(self.fd, self.code)
        os.lseek(self.fd, 0, os.SEEK_SET)
        return (self.fd,)

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)


def _merge(
    result: bytes, line_bytes: int, key: bytes | None = None
) -> tuple[dict[str, Any], list[str]]:
    """The child's JSON lines, later keys over earlier ones, and the sizes of the lines
    dropped for their length. A line that is not a JSON object is ignored (a student's code
    may write anything to any descriptor), and so, with a ``key``, is a line not sealed with
    it. A ``graph`` line is kept as text, not parsed here: the next process, in the sandbox,
    reads it. Any other line longer than ``line_bytes`` is ignored unread (parsing it could
    cost the grader far more memory than its size)."""
    said: dict[str, Any] = {}
    dropped: list[str] = []
    for sealed in result.splitlines():
        line = sealed if key is None else unseal(key, sealed)
        if line is None:
            continue
        if line.startswith(GRAPH_LINE):
            said["graph"] = line.decode("utf-8", "replace")
            continue
        if len(line) > line_bytes:
            dropped.append(
                f"of {len(line) / 2**20:.1f} MiB, and a line may hold {line_bytes / 2**20:g} MiB"
            )
            continue
        try:
            data = parse_line(line)
        except ValueError as error:  # not JSON, a number too long to read, too many values
            if "values" in str(error):
                dropped.append(f"that holds {error}")
            continue
        if isinstance(data, dict):
            data.pop("graph", None)
            if said.get("started") is True:  # said before any code of the user's ran
                data.pop("started", None)
            said.update(data)
    return said, dropped


def _signal_message(number: int, limits: Limits) -> str:
    if number == signal.SIGXCPU:
        return f"stopped: used more than {limits.cpu_seconds} s of CPU time"
    if number == signal.SIGKILL:  # the CPU time's hard limit, or a kill (by itself, the system)
        return (
            f"stopped by signal SIGKILL (killed: by itself, by the system, or past "
            f"{limits.cpu_seconds} s of CPU time)"
        )
    if number == signal.SIGXFSZ:
        return f"stopped: wrote a file larger than {limits.file_bytes // 2**20} MiB"
    if number == signal.SIGSYS:
        return "stopped: made a system call the sandbox forbids"
    try:
        return f"stopped by signal {signal.Signals(number).name}"
    except ValueError:
        return f"stopped by signal {number}"
