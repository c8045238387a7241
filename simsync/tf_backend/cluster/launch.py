"""The launcher: one small process that starts every task of a cluster, inside its namespace.

``python -m simsync.tf_backend.cluster.launch PLAN.json``, run by the parent through
``unshare --net --map-root-user`` (or directly, with ``open_ports``). In order:

1. die with the parent (``PR_SET_PDEATHSIG``), so a killed parent leaves nothing behind;
2. in a namespace, bring its loopback interface up;
3. pick a free port per task on 127.0.0.1 (unless the plan gives the addresses);
4. start one process per task (:mod:`simsync.tf_backend.cluster.task`), handing each the two
   pipe ends the parent made for it, and its stdout and stderr going to a log file;
5. write one JSON line on stdout: every task's pid and the cluster's addresses;
6. reap the tasks, writing one JSON line per exit, and exit when none is left. On SIGTERM it
   ends its tasks (by pid) first.

It imports no TensorFlow, so it starts in a fraction of a second.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from simsync.files import read_json
from simsync.tf_backend.cluster.config import task_name
from simsync.tf_backend.cluster.namespace import bring_loopback_up, pick_ports

__all__ = ["die_with_parent", "main"]


def die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when its parent ends; exit now if it already has."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(1)


def _addresses(plan: dict[str, Any]) -> dict[str, list[str]]:
    if plan["addresses"] is not None:
        return dict(plan["addresses"])
    counts = {"ps": plan["parameter_servers"], "worker": plan["workers"]}
    ports = iter(pick_ports(sum(counts.values())))
    return {job: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for job, n in counts.items()}


def _start(plan: dict[str, Any], task: dict[str, Any], addresses: str) -> subprocess.Popen[bytes]:
    name = f"{task['job']}_{task['index']}"
    log = open(Path(plan["workdir"]) / f"{name}.log", "wb")  # noqa: SIM115 (the child owns it)
    command = [
        sys.executable,
        "-m",
        "simsync.tf_backend.cluster.task",
        "--config",
        plan["config"],
        "--addresses",
        addresses,
        "--job",
        task["job"],
        "--index",
        str(task["index"]),
        "--commands-fd",
        str(task["commands_fd"]),
        "--messages-fd",
        str(task["messages_fd"]),
        "--parent",
        str(os.getpid()),
    ]
    fds = (task["commands_fd"], task["messages_fd"])
    try:
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=fds
        )
    finally:
        log.close()


def main(argv: list[str] | None = None) -> int:
    """Start the tasks of the plan file ``argv[0]``, report them, and reap them."""
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: python -m simsync.tf_backend.cluster.launch PLAN.json", file=sys.stderr)
        return 2
    plan = read_json(arguments[0], "launch plan")
    die_with_parent(plan["parent"])
    if plan["namespace"]:
        bring_loopback_up()
    addresses = _addresses(plan)
    children: dict[int, str] = {}

    def end_tasks(signum: int, frame: FrameType | None) -> None:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    signal.signal(signal.SIGTERM, end_tasks)
    text = json.dumps(addresses)
    for task in plan["tasks"]:
        process = _start(plan, task, text)
        children[process.pid] = task_name(task["job"], task["index"])
        for fd in (task["commands_fd"], task["messages_fd"]):
            os.close(fd)
    pids = {name: pid for pid, name in children.items()}
    print(json.dumps({"pids": pids, "addresses": addresses}), flush=True)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        name = children.pop(pid, None)
        if name is not None:
            code = os.waitstatus_to_exitcode(status)
            print(json.dumps({"exited": name, "code": code}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
