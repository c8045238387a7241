"""A private network namespace for the cluster: nothing it listens on is reachable from outside.

TensorFlow's gRPC server listens on ``0.0.0.0:port`` whatever host its ClusterSpec names, and has
no authentication: anyone who reaches the port can run any op. So simsync runs every task of a
cluster inside one new network namespace that has only a loopback interface, made by an
unprivileged user namespace (``unshare --net --map-root-user``, the ``unshare -rn`` of
util-linux). The launcher, already inside, brings ``lo`` up (:func:`bring_loopback_up`, one
``ioctl``) and picks free ports there. Whether this machine allows it is probed once per process
(:func:`namespace_available`); setting ``SIMSYNC_NO_NAMESPACE=1`` makes the probe fail, to see
what happens on a machine that forbids user namespaces.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys

__all__ = [
    "FORCE_NO_NAMESPACE",
    "bring_loopback_up",
    "interfaces",
    "namespace_available",
    "namespace_command",
    "pick_ports",
]

#: Environment variable that makes :func:`namespace_available` answer no (for tests).
FORCE_NO_NAMESPACE = "SIMSYNC_NO_NAMESPACE"

_PROBE = (
    "from simsync.tf_backend.cluster.namespace import bring_loopback_up, interfaces, pick_ports\n"
    "bring_loopback_up(); pick_ports(1)\n"
    "assert interfaces() == ['lo'], interfaces()\n"
)
_ANSWER: dict[str, str | None] = {}


def namespace_command() -> list[str]:
    """The command prefix that runs a program in a new user and network namespace."""
    return ["unshare", "--net", "--map-root-user"]


def namespace_available() -> str | None:
    """None when a private network namespace can be made here, else why not (one line).

    Probed once per process: ``unshare`` runs a small Python program that brings loopback up,
    binds a port and checks it sees no interface but ``lo`` (about 0.1 s)."""
    if os.environ.get(FORCE_NO_NAMESPACE):
        return f"{FORCE_NO_NAMESPACE} is set"
    if "answer" not in _ANSWER:
        _ANSWER["answer"] = _probe()
    return _ANSWER["answer"]


def _probe() -> str | None:
    if not sys.platform.startswith("linux"):
        return "network namespaces exist only on Linux"
    if shutil.which("unshare") is None:
        return "the unshare command (util-linux) is not installed"
    command = [*namespace_command(), sys.executable, "-c", _PROBE]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unshare failed ({error})"
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        return f"unshare failed: {lines[-1] if lines else f'exit status {result.returncode}'}"
    return None


_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def bring_loopback_up() -> None:
    """Set the ``lo`` interface of this process's network namespace up (``ip link set lo up``).

    Needs ``CAP_NET_ADMIN`` in the namespace, which the namespace's own root has."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(probe, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(probe, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def interfaces() -> list[str]:
    """The network interfaces this process sees (from ``/proc/self/net/dev``)."""
    with open("/proc/self/net/dev") as table:
        return sorted(line.split(":")[0].strip() for line in table.readlines()[2:])


def pick_ports(count: int) -> list[int]:
    """``count`` distinct free ports on 127.0.0.1, found by binding port 0 (all held at once,
    so they differ), then released for the servers."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for held in sockets:
            held.bind(("127.0.0.1", 0))
        return [held.getsockname()[1] for held in sockets]
    finally:
        for held in sockets:
            held.close()
