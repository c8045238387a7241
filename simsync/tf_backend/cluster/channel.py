"""How a task talks to whoever started it: JSON lines, one object each, over two file descriptors.

The messages a task sends and the commands it reads are listed in
:mod:`~simsync.tf_backend.cluster.task`.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from simsync.tf_backend.session.runtime import BackendError

__all__ = ["Channel"]


class Channel:
    """JSON lines out (messages) and in (commands) over two file descriptors."""

    def __init__(self, messages_fd: int, commands_fd: int | None) -> None:
        self._out = os.fdopen(messages_fd, "w", buffering=1)
        self._in = os.fdopen(commands_fd, "r") if commands_fd is not None else None
        self._lock = threading.Lock()

    def send(self, kind: str, **fields: Any) -> None:
        """One message; safe from several threads (one line each)."""
        with self._lock:
            self._out.write(json.dumps({"kind": kind, **fields}) + "\n")
            self._out.flush()

    def progress(self, text: str) -> None:
        self.send("progress", text=text)

    def command(self) -> dict[str, Any]:
        """The next command; a closed pipe reads as ``finish``."""
        if self._in is None:
            raise BackendError("a schedule needs a command pipe (--commands-fd)")
        line = self._in.readline()
        return json.loads(line) if line else {"command": "finish"}
