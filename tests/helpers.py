"""Helpers several test modules share (imported as ``helpers``: the tests folder is on the
path, as pytest puts it there)."""

from __future__ import annotations

import contextlib
import gc
import signal
import subprocess
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off in the block, as the engine runs: what the block
    drops must be freed by reference counts alone."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class Hang(Exception):
    """Code ran past the watchdog."""


@contextlib.contextmanager
def watchdog(seconds: int) -> Iterator[None]:
    """Raise :class:`Hang` in the block after ``seconds`` (SIGALRM: the main thread only)."""

    def expire(signum: int, frame: Any) -> None:
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def one_clear_line(ran: subprocess.CompletedProcess[str], *words: str) -> str:
    """The run failed with status 2 and one line on stderr holding ``words``: no traceback."""
    lines = ran.stderr.strip().splitlines()
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert len(lines) == 1 and lines[0].startswith("simsync: error: "), ran.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]
