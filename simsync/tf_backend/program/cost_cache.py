"""The costs of imported programs, cached like the machine's profile (no TensorFlow here).

One file per program, graph and machine, ``program-costs/KEY.json`` in simsync's cache folder
(:func:`simsync.tf_backend.profile.machine.cache_dir`). ``KEY`` is made here, by the parent,
never by the program's process: :func:`graph_key` hashes the program's files as the parent
copied them (and which of them is the program), the graph its process reported (its ops,
their inputs and devices, the loop's fetches) and the machine (TensorFlow's version, its
devices, the processor and its cores). Editing the program, or moving to another machine,
profiles it again; a program can only ever write the costs of its own files. A file holds
``{"key", "machine", "profile"}`` (:class:`~simsync.sandbox.wire.CostsFile`); ``--costs FILE``
uses such a file measured elsewhere (a GPU box), read as any answer of a program's process is
(:mod:`simsync.sandbox.wire`). The grader keeps no costs: each grading measures its
submission's and its reference's afresh (:mod:`simsync.grading.graphs`).

The program's process is told which keys are cached only as salted hashes
(:func:`known_keys`): it can check whether its own graph's key is there, and learns nothing
else of the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from simsync.errors import UsageError, printable
from simsync.files import read_json, write_text
from simsync.sandbox.wire import CostsFile, Profile, WireError, read
from simsync.tf_backend.profile.machine import cache_dir

__all__ = [
    "cached_costs",
    "costs_folder",
    "costs_path",
    "digest",
    "graph_key",
    "is_known",
    "known_keys",
    "load_costs",
    "save_costs",
]

_FOLDER = "program-costs"
#: what a key made here looks like (and nothing else names a file of the cache)
_KEY = re.compile(r"[0-9a-f]{32}")


def costs_folder() -> Path:
    """The user's cost cache."""
    return cache_dir() / _FOLDER


def digest(files: Mapping[str, bytes], program: str, args: Sequence[str] = ()) -> str:
    """A hash of a program's files (name and bytes), as the parent copied them, of which of
    them is the program (another program of the same folder keeps costs of its own), and of
    its command line (``args``: the twentieth attack's ``-- 3000`` read the costs ``-- 2``
    measured, its graph's ops the same, its step 700 times as long).

    >>> digest({"a.py": b"x"}, "a.py") == digest({"a.py": b"x"}, "a.py")
    True
    >>> digest({"a.py": b"x"}, "a.py") != digest({"a.py": b"y"}, "a.py")
    True
    >>> len(digest({chr(0xDCFF) + ".py": b"x"}, "a.py"))  # a name not UTF-8, as on disk
    64
    >>> digest({"a.py": b"x"}, "a.py", ["2"]) != digest({"a.py": b"x"}, "a.py", ["3000"])
    True
    """
    hashed = hashlib.sha256(program.encode("utf-8", "surrogateescape") + b"\0")
    for name in sorted(files):
        for part in (name.encode("utf-8", "surrogateescape"), files[name]):
            hashed.update(len(part).to_bytes(8, "big") + part)
    if args:  # a program run with no arguments keeps the key it had
        hashed.update(b"\0args")
        for arg in args:
            part = arg.encode("utf-8", "surrogateescape")
            hashed.update(len(part).to_bytes(8, "big") + part)
    return hashed.hexdigest()


#: how costs are measured: a change of it measures every program again (2: a collective's
#: asynchronous kernel is not timed, research/tf2.md §2)
MEASURED_AS = 2


def graph_key(source: str, data: Mapping[str, Any], machine: Mapping[str, Any]) -> str:
    """What a profile is kept under: the program's files (``source``, their :func:`digest`),
    the graph's ops, their inputs and devices, the loop's fetches and the shapes it feeds,
    and the machine (not where the ops were made, nor the program's name).

    >>> data = {"ops": [{"name": "t", "type": "NoOp", "device": "", "inputs": [],
    ...                  "control": ["b", "a"]}], "clients": [{"fetches": ["t"]}]}
    >>> len(graph_key("d", data, {"cores": 2}))
    32
    """
    ops = [
        # control inputs as a set: tf.group orders them by Python's hash of their names,
        # which differs from one process to the next
        [op["name"], op["type"], op["device"], op["inputs"], sorted(op["control"])]
        for op in data["ops"]
    ]
    # what its loop feeds, as large as it is: a placeholder's batch is not in the graph
    clients = [[client["fetches"], client.get("feeds", {})] for client in data["clients"]]
    text = json.dumps([MEASURED_AS, source, ops, clients, machine], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def costs_path(key: str, folder: Path) -> Path:
    """Where the costs of graph ``key`` (made by :func:`graph_key`) are kept in ``folder``."""
    if not _KEY.fullmatch(key):
        raise ValueError(f"not a key of the cost cache: {key!r}")  # a bug: keys are made here
    return folder / f"{key}.json"


def known_keys(salt: bytes, folder: Path) -> list[str]:
    """The cached graphs' keys, each hashed with ``salt`` (:func:`is_known` checks one)."""
    try:
        keys = [p.stem for p in folder.glob("*.json") if _KEY.fullmatch(p.stem)]
    except OSError:
        return []
    return sorted(_salted(salt, key) for key in keys)


def is_known(key: str, salt: bytes, known: list[str]) -> bool:
    """Whether ``key`` is among the salted ``known`` keys (:func:`known_keys`).

    >>> is_known("a" * 32, b"s", [_salted(b"s", "a" * 32)]), is_known("b" * 32, b"s", [])
    (True, False)
    """
    return _salted(salt, key) in known


def _salted(salt: bytes, key: str) -> str:
    return hashlib.sha256(salt + key.encode()).hexdigest()


def save_costs(key: str, machine: Mapping[str, Any], profile: Profile, folder: Path) -> Path:
    """Keep ``profile`` for graph ``key`` (written atomically); a cache that cannot be
    written is not an error: the costs are used, and measured again next time."""
    path = costs_path(key, folder)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps({"key": key, "machine": machine, "profile": profile}))
    except (OSError, UsageError):
        pass
    return path


def cached_costs(key: str, folder: Path) -> CostsFile | None:
    """The cached costs of graph ``key``, or None."""
    path = costs_path(key, folder)
    if not path.exists():
        return None
    try:
        return load_costs(path)
    except UsageError:
        return None


def load_costs(path: str | os.PathLike[str]) -> CostsFile:
    """A costs file (``simsync simulate PROGRAM --costs FILE``, or the cache's), checked
    whole (:class:`~simsync.sandbox.wire.CostsFile`)."""
    shown = printable(str(path), one_line=True)
    data = read_json(path, "costs file", name=shown, limit=64 * 2**20)
    if not isinstance(data, dict) or not {"key", "profile"} <= set(data):
        raise UsageError(
            f"{shown}: not a costs file of simsync (it needs key, machine and profile.ops; "
            f"simsync keeps them in {costs_folder()})"
        )
    data.setdefault("machine", {})
    if isinstance(data["profile"], dict):  # a file of an older simsync may lack these
        for name, empty in (("tensors", {}), ("clients", {}), ("steps", 0)):
            data["profile"].setdefault(name, empty)
    try:
        found: CostsFile = read(CostsFile, data, "")
    except WireError as error:
        raise UsageError(
            f"{shown}: not a costs file of simsync: {str(error).lstrip('.')}"
        ) from None
    return found
