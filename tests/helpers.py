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


#: how much longer than its CPU time a watched block may take on the clock: a busy machine
#: (other work on its cores) slows a block's clock, never its CPU time
CLOCK_FACTOR = 10


@contextlib.contextmanager
def watchdog(seconds: int) -> Iterator[None]:
    """Raise :class:`Hang` in the block after ``seconds`` of this process's CPU time, or
    :data:`CLOCK_FACTOR` times as long on the clock (a block that waits rather than runs):
    signals, so the main thread only."""

    def expire(signum: int, frame: Any) -> None:
        spent = "CPU time" if signum == signal.SIGPROF else "on the clock"
        limit = seconds if signum == signal.SIGPROF else seconds * CLOCK_FACTOR
        raise Hang(f"no answer within {limit} s {spent}")

    previous = {
        number: signal.signal(number, expire) for number in (signal.SIGPROF, signal.SIGALRM)
    }
    signal.setitimer(signal.ITIMER_PROF, seconds)
    signal.alarm(seconds * CLOCK_FACTOR)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.alarm(0)
        for number, handler in previous.items():
            signal.signal(number, handler)


def one_clear_line(ran: subprocess.CompletedProcess[str], *words: str) -> str:
    """The run failed with status 2 and one line on stderr holding ``words``: no traceback."""
    lines = ran.stderr.strip().splitlines()
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert len(lines) == 1 and lines[0].startswith("simsync: error: "), ran.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]
