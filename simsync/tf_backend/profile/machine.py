"""This machine's profile, measured once and cached: what cross-checks and lessons predict with.

A prediction of TensorFlow's timing needs this machine's costs: how fast its cores multiply,
what ``sess.run`` costs, how much two busy cores slow each other. ``simsync calibrate`` measures
them (:mod:`simsync.simulation.calibrate`) on a small reference scenario, never on one
that is being predicted. The result is kept in the user's cache folder and reused as long as it
describes the same machine:

- the TensorFlow version;
- the devices TensorFlow runs on (GPUs, or logical CPU devices sharing the host's cores);
- the host (name, processor, number of cores).

Anything else changed means another file: a profile never predicts a machine it was not measured
on. Where: ``$SIMSYNC_CACHE_DIR``, else ``$XDG_CACHE_HOME/simsync``, else ``~/.cache/simsync``,
in ``profiles/``. Two processes that need it at once measure it once: the second waits for the
first under a lock, then reads its file.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from simsync.errors import ScenarioError
from simsync.files import locked
from simsync.scenario import ClusterConfig, ComputeConfig, LinkConfig, ModelConfig, Scenario
from simsync.scenario.profile import Profile, load_profile

__all__ = [
    "REFERENCE",
    "cache_dir",
    "cached_efficiency",
    "cached_profile",
    "kept",
    "machine_key",
    "profile_path",
]

#: What the machine is measured on: one tower of a small softmax model, 10 ms of compute per
#: step, parameter-server aggregation. No lesson, example or benchmark scenario is this one.
REFERENCE = Scenario(
    "machine reference",
    description="one tower, softmax 32x10, batch 32, 10 ms of compute per step",
    cluster=ClusterConfig(1, link=LinkConfig(bandwidth_gbps=16, latency_us=5)),
    compute=ComputeConfig(mean=0.010),
    model=ModelConfig(kind="softmax", features=32, classes=10, batch_size=32),
)


T = TypeVar("T")


def cache_dir() -> Path:
    """The folder simsync keeps measurements of this machine in."""
    if os.environ.get("SIMSYNC_CACHE_DIR"):
        return Path(os.environ["SIMSYNC_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "simsync"


def machine_key() -> dict[str, Any]:
    """What a profile is valid for: TensorFlow's version, its devices, and this host."""
    from simsync.tf_backend.session.runtime import load_tensorflow, native_stderr_filtered

    tf = load_tensorflow()
    with native_stderr_filtered():
        gpus = [d.name for d in tf.config.list_physical_devices("GPU")]
    return {
        "tensorflow": tf.__version__,
        "devices": f"{len(gpus)} GPU(s)" if gpus else "logical CPU devices",
        "host": socket.gethostname(),
        "processor": processor(),
        "cores": os.cpu_count() or 1,
    }


def profile_path(key: dict[str, Any]) -> Path:
    """The cache file of the profile for ``key``."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir() / "profiles" / f"{digest}.json"


def kept(
    path: Path,
    what: str,
    cached: Callable[[], T | None] | None,
    measure: Callable[[], T],
    message: str,
    on_progress: Callable[[str], None] | None,
) -> T:
    """What ``cached`` finds at ``path``, else ``measure()`` (which writes it there; ``on_progress``
    is told ``message`` first), under a lock: two processes that need it at once measure it
    once. ``cached`` None measures it again. ``what`` names it in the error when its folder
    cannot be made."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ScenarioError(
            f"cannot keep {what} in {path.parent}: {error.strerror or error}; "
            "set SIMSYNC_CACHE_DIR to a writable folder"
        ) from None
    with locked(path.with_name(path.name + ".lock")):
        if cached is not None:
            found = cached()
            if found is not None:
                return found
        if on_progress is not None:
            on_progress(message)
        return measure()


def cached_efficiency() -> float | None:
    """How fast this machine's cores run when all are busy, from a profile of it already
    measured on logical CPU devices (by its host, processor and cores: TensorFlow is not
    imported to ask), or None when there is none."""
    here = {
        "devices": "logical CPU devices",
        "host": socket.gethostname(),
        "processor": processor(),
        "cores": os.cpu_count() or 1,
    }
    try:
        paths = sorted((cache_dir() / "profiles").glob("*.json"))
    except OSError:
        return None
    for path in paths:
        try:
            profile = load_profile(path)
        except ScenarioError:
            continue
        machine = profile.calibrated_on.get("machine") or {}
        if all(machine.get(k) == v for k, v in here.items()) and profile.host_cores:
            return float(profile.core_efficiency)
    return None


def cached_profile(path: Path, key: dict[str, Any]) -> Profile | None:
    """The profile at ``path`` if it is readable and measured for ``key``; else None (it is
    measured again and replaced)."""
    if not path.exists():
        return None
    try:
        profile = load_profile(path)
    except ScenarioError:
        return None
    return profile if profile.calibrated_on.get("machine") == key else None


def processor() -> str:
    """The processor's model name (Linux), or what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
