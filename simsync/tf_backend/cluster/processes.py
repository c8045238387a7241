"""The parent's side of a cluster: the processes it started, their pipes, their messages.

The parent makes two pipes per task (commands in, messages out), starts the launcher
(:mod:`simsync.tf_backend.cluster.launch`) in a new session, inside a private network namespace
unless ``open_ports``, and hands it the task ends. From then on it only reads messages
(:meth:`ClusterProcesses.pump`, with a deadline) and writes commands. A task whose message pipe
closes before its last message died: that is one :class:`ClusterError`. Whatever happens,
:meth:`ClusterProcesses.stop` ends every task and the launcher **by pid**, after checking that
the pid still is the process it started (same start time), and reaps the launcher.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simsync.tf_backend.cluster.config import ClusterRunConfig, task_name
from simsync.tf_backend.cluster.namespace import namespace_command
from simsync.tf_backend.session.runtime import BackendError

__all__ = ["ClusterError", "ClusterProcesses", "StartedCluster", "process_alive"]


class ClusterError(BackendError):
    """A cluster run that failed; ``pids`` are the processes it had started (all ended)."""

    def __init__(self, message: str, pids: dict[str, int] | None = None) -> None:
        super().__init__(message)
        self.pids = dict(pids or {})


@dataclass(frozen=True)
class StartedCluster:
    """A cluster whose servers are all listening: its processes and addresses."""

    pids: dict[str, int]  # "launcher", "ps 0", "worker 1" ...
    addresses: dict[str, list[str]]  # "ps" / "worker" -> host:port
    namespace: bool  # True: inside one private network namespace


@dataclass
class _Task:
    job: str
    index: int
    commands: int  # parent's write end
    messages: int  # parent's read end
    buffer: bytes = b""
    closed: bool = False
    last: str = ""  # kind of its last message
    replies: list[dict[str, Any]] = field(default_factory=list)
    report: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return task_name(self.job, self.index)


def _identity(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks since boot), None if it is gone or a
    zombie: with the pid, it names one process even if the pid is reused later."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return None if fields[0] in "ZX" else int(fields[19])


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie)."""
    return _identity(pid) is not None


class ClusterProcesses:
    """Start, talk to and end the processes of one cluster run."""

    def __init__(
        self,
        config: ClusterRunConfig,
        workdir: Path,
        namespace: bool,
        on_progress: Callable[[str], None],
    ) -> None:
        self.config, self.workdir, self.namespace = config, workdir, namespace
        self.on_progress = on_progress
        self.tasks: dict[str, _Task] = {}
        self.launcher: subprocess.Popen[bytes] | None = None
        self.launcher_buffer = b""
        self.launcher_open = False
        self.pids: dict[str, int] = {}
        self.identities: dict[str, int] = {}
        self.addresses: dict[str, list[str]] = {}
        self.exits: dict[str, int] = {}
        self.selector = selectors.DefaultSelector()

    def start(self) -> None:
        """Make the pipes, write the plan and start the launcher (no waiting)."""
        config = self.config
        (self.workdir / "config.json").write_text(config.to_json())
        jobs = [("ps", p) for p in range(config.parameter_servers)]
        jobs += [("worker", w) for w in range(config.workers)]
        plan_tasks, child_ends = [], []
        for job, index in jobs:
            commands_read, commands_write = os.pipe()
            messages_read, messages_write = os.pipe()
            task = _Task(job, index, commands_write, messages_read)
            self.tasks[task.name] = task
            self.selector.register(messages_read, selectors.EVENT_READ, task)
            plan_tasks.append(
                {"job": job, "index": index, "commands_fd": commands_read,
                 "messages_fd": messages_write}
            )  # fmt: skip
            child_ends += [commands_read, messages_write]
        plan = {
            "parent": os.getpid(),
            "namespace": self.namespace,
            "tasks": plan_tasks,
            "config": str(self.workdir / "config.json"),
            "addresses": config.cluster.as_dict() if config.cluster else None,
            "parameter_servers": config.parameter_servers,
            "workers": config.workers,
            "workdir": str(self.workdir),
        }
        (self.workdir / "plan.json").write_text(json.dumps(plan))
        prefix = namespace_command() if self.namespace else []
        command = [*prefix, sys.executable, "-m", "simsync.tf_backend.cluster.launch"]
        with open(self.workdir / "launcher.log", "wb") as log:
            try:
                self.launcher = subprocess.Popen(
                    [*command, str(self.workdir / "plan.json")],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    pass_fds=child_ends,
                    start_new_session=True,  # Ctrl-C reaches the parent only; it ends them
                )
            finally:
                for fd in child_ends:
                    os.close(fd)
        assert self.launcher.stdout is not None
        self.pids["launcher"] = self.launcher.pid
        self.selector.register(self.launcher.stdout, selectors.EVENT_READ, None)
        self.launcher_open = True

    def pump(self, until: Callable[[], bool], timeout: float, what: str) -> None:
        """Handle messages until ``until()`` holds; a :class:`ClusterError` after ``timeout``
        seconds, or as soon as a task reports an error or dies."""
        deadline = time.monotonic() + timeout
        while not until():
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClusterError(f"timed out after {timeout:g} s {what}", self.pids)
            self._dispatch(min(left, 1.0))

    def wait(self, seconds: float) -> None:
        """Handle messages for ``seconds``."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self._dispatch(left)

    def wait_for_exit(self, seconds: float) -> None:
        """Handle messages until the launcher has ended (so every task has), at most
        ``seconds``; :meth:`stop` ends whatever is still running then."""
        deadline = time.monotonic() + seconds
        while self.launcher_open and (left := deadline - time.monotonic()) > 0:
            self._dispatch(min(left, 1.0))

    def _dispatch(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout):
            if key.data is None:
                self._read_launcher()
            else:
                self._read_task(key.data)

    def send(self, name: str, command: dict[str, Any]) -> None:
        """Write one command line to task ``name``."""
        task = self.tasks[name]
        try:
            os.write(task.commands, (json.dumps(command) + "\n").encode())
        except OSError as error:
            raise ClusterError(f"{name} cannot take commands ({error})", self.pids) from None

    def reply(self, name: str, kind: str, timeout: float) -> dict[str, Any]:
        """Wait for task ``name``'s next message of ``kind``; return it."""
        task = self.tasks[name]

        def arrived() -> bool:
            return any(r["kind"] == kind for r in task.replies)

        self.pump(arrived, timeout, f"waiting for {name} ({kind})")
        index = next(i for i, r in enumerate(task.replies) if r["kind"] == kind)
        return task.replies.pop(index)

    def all_sent(self, kind: str, job: str | None = None) -> bool:
        """Whether every task (of ``job``) has sent a message of ``kind``."""
        tasks = [t for t in self.tasks.values() if job is None or t.job == job]
        return all(any(r["kind"] == kind for r in t.replies) or t.last == kind for t in tasks)

    def _read_launcher(self) -> None:
        assert self.launcher is not None and self.launcher.stdout is not None
        chunk = os.read(self.launcher.stdout.fileno(), 65536)
        if not chunk:
            self.selector.unregister(self.launcher.stdout)
            self.launcher_open = False
            if not self.pids.keys() - {"launcher"}:
                raise ClusterError(f"the launcher failed: {self._log_tail('launcher')}", self.pids)
            return
        self.launcher_buffer += chunk
        *lines, self.launcher_buffer = self.launcher_buffer.split(b"\n")
        for line in lines:
            message = json.loads(line)
            if "pids" in message:
                self.pids.update(message["pids"])
                self.addresses = message["addresses"]
                for name, pid in message["pids"].items():
                    self.identities[name] = _identity(pid) or -1
            elif "exited" in message:
                self.exits[message["exited"]] = message["code"]

    def _read_task(self, task: _Task) -> None:
        chunk = os.read(task.messages, 1 << 20)
        if not chunk:
            self.selector.unregister(task.messages)
            task.closed = True
            if task.last not in ("report", "done"):
                raise ClusterError(self._death(task), self.pids)
            return
        task.buffer += chunk
        *lines, task.buffer = task.buffer.split(b"\n")
        for line in lines:
            self._handle(task, json.loads(line))

    def _handle(self, task: _Task, message: dict[str, Any]) -> None:
        kind = message["kind"]
        task.last = kind
        if kind == "progress":
            self.on_progress(f"{task.name}: {message['text']}")
        elif kind == "error":
            raise ClusterError(f"{task.name}: {message['text']}", self.pids)
        elif kind == "report":
            task.report = message["report"]
        else:
            task.replies.append(message)

    def _death(self, task: _Task) -> str:
        """One line on a task that ended without its last message."""
        deadline = time.monotonic() + 2.0  # the launcher reports the exit status soon after
        while task.name not in self.exits and self.launcher_open and time.monotonic() < deadline:
            assert self.launcher is not None and self.launcher.stdout is not None
            if select.select([self.launcher.stdout], [], [], 0.1)[0]:
                self._read_launcher()
        code = self.exits.get(task.name)
        if code is None:
            how = "ended unexpectedly"
        elif code < 0:
            how = f"was killed by {signal.Signals(-code).name}"
        else:
            how = f"exited with status {code}"
        tail = self._log_tail(f"{task.job}_{task.index}")
        return f"{task.name} {how}" + (f" ({tail})" if tail else "")

    def _log_tail(self, name: str) -> str:
        """The last line of a process's log that says something (not TensorFlow's chatter)."""
        try:
            lines = (self.workdir / f"{name}.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        noise = ("W0000", "I0000", "E0000", "WARNING", "To enable", "oneDNN", "Instructions")
        kept = [line.strip() for line in lines if line.strip() and not line.startswith(noise)]
        return kept[-1][:300] if kept else ""

    def stop(self) -> None:
        """End every process still running, by pid (tasks first), and reap the launcher."""
        for name, pid in self.pids.items():
            if name != "launcher" and self._is_ours(name, pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if self.launcher is not None:
            try:
                self.launcher.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.launcher.kill()
                self.launcher.wait()
            if self.launcher.stdout:
                self.launcher.stdout.close()
        for task in self.tasks.values():
            for fd in (task.commands, task.messages):
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.selector.close()

    def _is_ours(self, name: str, pid: int) -> bool:
        known = self.identities.get(name)
        return known is not None and known == _identity(pid)
