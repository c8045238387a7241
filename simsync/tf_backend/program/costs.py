"""The costs of imported programs, cached like the machine's profile (no TensorFlow here).

One file per graph and machine, ``program-costs/KEY.json`` in simsync's cache folder
(:func:`simsync.tf_backend.profile.machine.cache_dir`), where ``KEY`` hashes the program's
graph (its ops, their inputs and devices, the loop's fetches) and the machine
(TensorFlow's version, its devices, the processor and its cores): editing the program's
graph, or moving to another machine, profiles it again. A file holds ``{"key", "machine",
"profile"}``; ``--costs FILE`` uses such a file measured elsewhere (a GPU box).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from simsync.errors import UsageError, printable
from simsync.files import read_json, write_text
from simsync.tf_backend.profile.machine import cache_dir

__all__ = ["cached_costs", "costs_path", "known_keys", "load_costs", "save_costs"]

_FOLDER = "program-costs"


def costs_path(key: str) -> Path:
    """Where the costs of graph ``key`` are kept."""
    return cache_dir() / _FOLDER / f"{key}.json"


def known_keys() -> list[str]:
    """The graphs whose costs are cached."""
    try:
        return sorted(p.stem for p in (cache_dir() / _FOLDER).glob("*.json"))
    except OSError:
        return []


def save_costs(key: str, machine: dict[str, Any], profile: dict[str, Any]) -> Path:
    """Keep ``profile`` for graph ``key`` (written atomically); a cache that cannot be
    written is not an error: the costs are used, and measured again next time."""
    path = costs_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps({"key": key, "machine": machine, "profile": profile}))
    except (OSError, UsageError):
        pass
    return path


def cached_costs(key: str) -> dict[str, Any] | None:
    """The cached costs of graph ``key``, or None."""
    path = costs_path(key)
    if not path.exists():
        return None
    try:
        return load_costs(path)
    except UsageError:
        return None


def load_costs(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A costs file (``simsync simulate PROGRAM --costs FILE``), checked for its shape."""
    shown = printable(str(path), one_line=True)
    data = read_json(path, "costs file", name=shown, limit=64 * 2**20)
    profile = data.get("profile") if isinstance(data, dict) else None
    if (
        not isinstance(profile, dict)
        or not isinstance(profile.get("ops"), dict)
        or not isinstance(data.get("key"), str)
    ):
        raise UsageError(
            f"{shown}: not a costs file of simsync (it needs key, machine and profile.ops; "
            f"simsync keeps them in {cache_dir() / _FOLDER})"
        )
    for name, op in profile["ops"].items():
        seconds = op.get("seconds") if isinstance(op, dict) else None
        if not isinstance(seconds, int | float) or not 0 <= seconds < 1e6:
            raise UsageError(f"{shown}: op '{name}': seconds must be a number from 0 to 1e6")
        if not isinstance(op.get("device"), str):
            raise UsageError(f"{shown}: op '{name}': device must be a string")
    data.setdefault("machine", {})
    profile.setdefault("tensors", {})
    profile.setdefault("clients", {})
    profile.setdefault("steps", 0)
    return data
