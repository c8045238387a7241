"""The answer of a sandboxed child to its parent: JSON lines on the child's standard output.

The child keeps its standard output for the answer (a copy of the descriptor) and sends
descriptor 1 and ``sys.stdout`` to standard error, so whatever the code it runs prints never
mixes into the answer. That keeps honest code apart, not hostile code: code in the same process
can still find the descriptor, or replace ``json.dumps``, and write any line. The parent
therefore reads every answer through :mod:`simsync.sandbox.wire`.

A child that runs no one else's code, but does run what someone else made (a graph exported by
a student's program holds ops that write files, ``/proc/self/fd/N`` among them), answers
**sealed**: the parent hands it a secret key on its standard input, which the child reads and
closes before it runs anything, and every line it says carries an HMAC of the line under that
key. The parent keeps only lines whose HMAC holds (:func:`unseal`): nothing the graph's ops
write can pass for the child's answer, as they never see the key.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import sys
from collections.abc import Callable
from typing import Any

from simsync.files import MAX_VALUES, loads_bounded

__all__ = ["KEY_BYTES", "MAX_ITEMS", "answer_channel", "parse_line", "seal", "unseal"]

#: the secret key's length
KEY_BYTES = 32
#: the most values one line may hold (:data:`simsync.files.MAX_VALUES`)
MAX_ITEMS = MAX_VALUES


def parse_line(line: bytes | str) -> Any:
    """One line of an answer, parsed (:func:`simsync.files.loads_bounded`): ``ValueError``
    when it is not JSON, or holds more than :data:`MAX_ITEMS` values.

    >>> parse_line(b'{"a": [1, 2]}')
    {'a': [1, 2]}
    >>> parse_line(b"[" + b"[]," * MAX_ITEMS + b"[]]")
    Traceback (most recent call last):
    ...
    ValueError: more than 4,000,000 values
    """
    return loads_bounded(line)


def answer_channel(
    sealed: bool, default: Callable[[Any], Any] | None = None, started: int | None = None
) -> Callable[..., None]:
    """In the child: ``say(**line)``, which writes ``line`` as one JSON line of the answer
    (``default`` turns what JSON lacks into what it has); standard output goes to standard
    error from now on. ``sealed``: the key is read from standard input first, which is then
    closed, and every line is sealed with it. ``started``: the descriptor of the parent's
    pipe that ``say(started=True)`` writes one byte to (and closes), before any user code
    runs: what that code does to the answer later cannot take it back."""
    result = os.dup(1)
    # every line at the end of the answer, whole, whatever else appends to it
    fcntl.fcntl(result, fcntl.F_SETFL, fcntl.fcntl(result, fcntl.F_GETFL) | os.O_APPEND)
    os.dup2(2, 1)  # whatever is printed goes to stderr, never into the answer
    sys.stdout = sys.stderr
    key = _read_key() if sealed else None

    def say(**line: Any) -> None:
        if line.get("started") is True and started is not None:
            with contextlib.suppress(OSError):
                os.write(started, b"S")
                os.close(started)
        text = json.dumps(line, default=default)
        data = ((seal(key, text) if key is not None else text) + "\n").encode()
        while data:
            data = data[os.write(result, data) :]

    return say


def seal(key: bytes, text: str) -> str:
    """``text`` with its HMAC in front.

    >>> seal(b"k" * 32, '{"started": true}')[64:]
    ' {"started": true}'
    """
    return f"{_mac(key, text.encode())} {text}"


def unseal(key: bytes, line: bytes) -> bytes | None:
    """The line without its HMAC, when the HMAC holds under ``key``; else None.

    >>> key = b"k" * 32
    >>> unseal(key, seal(key, '{"a": 1}').encode()), unseal(key, b'{"a": 1}')
    (b'{"a": 1}', None)
    """
    mac, _, text = line.partition(b" ")
    if hmac.compare_digest(mac, _mac(key, text).encode()):
        return text
    return None


def _mac(key: bytes, text: bytes) -> str:
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def _read_key() -> bytes:
    """The key the parent wrote on standard input; standard input is closed then, so nothing
    run later can read it there."""
    key = bytes.fromhex(os.read(0, 2 * KEY_BYTES + 1).decode().strip())
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = open(os.devnull)  # noqa: SIM115 (the process's standard input from now on)
    if len(key) != KEY_BYTES:
        raise SystemExit("the sealed answer's key did not come on standard input")
    return key
