"""Calibration profiles: what ops really cost on one machine, measured by ``simsync calibrate``.

A profile replaces a scenario's guessed costs with measured ones, so the simulator predicts what
this machine's TensorFlow will do:

- ``costs``: seconds of each fixed-cost op kind (read, dequeue, aggregate, apply, allreduce);
- ``compute_scale`` and ``compute_overhead``: a forward or backward op that should take ``t``
  seconds takes ``compute_overhead + compute_scale * t``;
- ``session_run``: what each ``sess.run`` spends outside the ops;
- ``latency_us``: the delay of a tensor between two devices; ``host_cores``: how many ops the
  devices can run at once, and ``core_efficiency``: how fast each runs when all do;
- ``gpus``, ``gpu_contention`` and ``bandwidth_gbps`` (a profile measured on GPUs): the
  physical GPUs the towers go round (as virtual GPUs when there are fewer GPUs than
  towers), how much the virtual GPUs of one GPU slow each other, and the bandwidth of a copy
  between the host and a GPU;
- ``seconds_per_row``: how fast the work op ran when calibrating. A cross-check sizes its work
  at the speed it measures then (this machine's speed drifts by several per cent over
  minutes), so ``compute_scale``, real seconds per second the work was sized for, still
  holds.

Applying a profile never changes what is computed, only how long it takes.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simsync.errors import ScenarioError, printable
from simsync.files import InputError, read_json, write_text
from simsync.scenario.load import check_scenario
from simsync.scenario.model import LinkConfig, Scenario
from simsync.scenario.schema import COST_KINDS, MAX_SECONDS

__all__ = [
    "PROFILE_VERSION",
    "SHIPPED",
    "Profile",
    "apply_profile",
    "load_profile",
    "profile_file",
    "save_profile",
    "shipped_profiles",
]

PROFILE_VERSION = 1


@dataclass(frozen=True)
class Profile:
    costs: dict[str, float]
    compute_scale: float
    compute_overhead: float
    session_run: float
    latency_us: float
    host_cores: int | None
    core_efficiency: float = 1.0
    seconds_per_row: float | None = None
    gpus: int | None = None
    gpu_contention: float = 0.0
    bandwidth_gbps: float | None = None
    devices: str = ""
    tensorflow: str = ""
    calibrated_on: dict[str, Any] = field(default_factory=dict)
    #: the file it was read from, for messages (not saved in the file)
    source: str = field(default="", compare=False)

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data.pop("source")
        return {"simsync_profile": PROFILE_VERSION, **data}


def save_profile(profile: Profile, path: str | Path) -> Profile:
    """Write ``profile`` to ``path`` atomically (a reader never sees half a file); the profile
    as read back from there (its ``source`` is the path)."""
    write_text(path, json.dumps(profile.to_json(), indent=2) + "\n")
    return dataclasses.replace(profile, source=str(path))


#: The profiles that come with simsync, measured on real machines: ``--costs h100``.
SHIPPED = Path(__file__).parent / "profiles"


def shipped_profiles() -> list[str]:
    """The names of the profiles that come with simsync.

    >>> "h100" in shipped_profiles()
    True
    """
    return sorted(p.stem for p in SHIPPED.glob("*.json"))


def profile_file(name_or_path: str | Path) -> Path:
    """The file of a profile given by path, or by the name of one that comes with simsync
    (``h100``) where no such file is here.

    >>> profile_file("h100").name, str(profile_file("here.json"))
    ('h100.json', 'here.json')
    """
    path = Path(name_or_path)
    shipped = SHIPPED / f"{path.name}.json"
    if not path.exists() and str(path) == path.name and shipped.is_file():
        return shipped
    return path


def load_profile(path: str | Path) -> Profile:
    """Read a profile written by ``simsync calibrate`` (a file, or the name of one that comes
    with simsync); errors name the file and the key."""
    path = profile_file(path)
    try:
        data = read_json(path, "profile")
    except InputError as error:
        if error.reason == "missing":
            names = ", ".join(shipped_profiles())
            raise ScenarioError(
                f"{path}: no such profile (those that come with simsync: {names})"
            ) from None
        raise ScenarioError(str(error)) from None
    if not isinstance(data, dict) or data.get("simsync_profile") != PROFILE_VERSION:
        raise ScenarioError(
            f"{path}: not a simsync profile (version {PROFILE_VERSION}); make one with "
            "`simsync calibrate SCENARIO -o PROFILE.json`"
        )
    data.pop("simsync_profile")
    _check(data, path)
    return dataclasses.replace(Profile(**data), source=str(path))


#: Each key of a profile: whether it is required, its check, and what is allowed.
_KEYS: dict[str, tuple[bool, Any, str]] = {
    "costs": (True, None, "a table of op kind -> seconds from 0 to 1e+06"),
    "compute_scale": (True, (1e-3, 1e3), "a number from 0.001 to 1000"),
    "compute_overhead": (True, (0.0, MAX_SECONDS), "a number of seconds from 0 to 1e+06"),
    "session_run": (True, (0.0, MAX_SECONDS), "a number of seconds from 0 to 1e+06"),
    "latency_us": (True, (0.0, MAX_SECONDS * 1e6), "a number from 0 to 1e+12"),
    "host_cores": (True, "cores", "an integer >= 1, or null"),
    "core_efficiency": (False, "efficiency", "a number from 0.01 to 1"),
    "seconds_per_row": (False, "row", "a number from 1e-09 to 1, or null"),
    "gpus": (False, "cores", "an integer >= 1, or null"),
    "gpu_contention": (False, (0.0, 1.0), "a number from 0 to 1"),
    "bandwidth_gbps": (False, "bandwidth", "a number from 1e-06 to 1e+09, or null"),
    "devices": (False, str, "a string"),
    "tensorflow": (False, str, "a string"),
    "calibrated_on": (False, dict, "a table"),
}


def _check(data: dict[str, Any], path: Path) -> None:
    """Every key known and present when required, every value of its type and in range."""
    for key in data:
        if key not in _KEYS:
            raise ScenarioError(
                f"{path}: unknown key {printable(str(key))!r}; allowed: {', '.join(_KEYS)}"
            )
    for key, (required, check, allowed) in _KEYS.items():
        if key not in data:
            if required:
                raise ScenarioError(f"{path}: {key} is required ({allowed})")
            continue
        value = data[key]
        if not _allowed(value, check):
            shown = printable(repr(value))[:80]
            raise ScenarioError(f"{path}: {key}: expected {allowed}, got {shown}")
    for kind, seconds in data["costs"].items():
        if kind not in COST_KINDS:
            raise ScenarioError(
                f"{path}: costs: unknown op kind {printable(str(kind))!r}; "
                f"allowed: {', '.join(COST_KINDS)}"
            )
        if not _number(seconds) or not 0 <= seconds <= MAX_SECONDS:
            shown = printable(repr(seconds))[:80]
            raise ScenarioError(
                f"{path}: costs.{kind}: expected a number of seconds from 0 to 1e+06, got {shown}"
            )


def _allowed(value: Any, check: Any) -> bool:
    if check is None:
        return isinstance(value, dict)
    if isinstance(check, tuple):
        return _number(value) and check[0] <= value <= check[1]
    if check == "cores":
        return value is None or (type(value) is int and value >= 1)
    if check == "efficiency":  # below 1 %, busy cores would slow ops without bound
        return _number(value) and 0.01 <= value <= 1
    if check == "bandwidth":
        return value is None or (_number(value) and 1e-6 <= value <= 1e9)
    if check == "row":
        return value is None or (_number(value) and 1e-9 <= value <= 1)
    return isinstance(value, check)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def apply_profile(scenario: Scenario, profile: Profile) -> Scenario:
    """``scenario`` with the profile's measured costs in place of its own.

    >>> from simsync.scenario import ClusterConfig, ComputeConfig
    >>> s = Scenario("s", cluster=ClusterConfig(2, (1.0, 1.0)), compute=ComputeConfig(mean=0.01))
    >>> p = Profile({"apply": 2e-4}, 1.1, 1e-4, 5e-4, 30.0, 2)
    >>> t = apply_profile(s, p)
    >>> round(t.compute.mean, 6), t.compute.overhead, t.costs, t.cluster.host_cores
    (0.011, 0.0001, {'apply': 0.0002, 'session_run': 0.0005}, 2)
    """
    compute = dataclasses.replace(
        scenario.compute,
        mean=scenario.compute.mean * profile.compute_scale,
        shift=scenario.compute.shift * profile.compute_scale,
        overhead=profile.compute_overhead,
    )
    cluster = dataclasses.replace(
        scenario.cluster,
        host_cores=profile.host_cores,
        core_efficiency=profile.core_efficiency,
        link=LinkConfig(
            bandwidth_gbps=profile.bandwidth_gbps or math.inf, latency_us=profile.latency_us
        ),
        gpus=profile.gpus,
        gpu_contention=profile.gpu_contention,
    )
    costs = {**scenario.costs, **profile.costs, "session_run": profile.session_run}
    applied = dataclasses.replace(scenario, compute=compute, cluster=cluster, costs=costs)
    try:
        return check_scenario(applied)
    except ScenarioError as error:  # the scenario was valid: the profile took it out of range
        raise ScenarioError(
            f"{profile.source or 'the profile'}: its costs applied to {error}"
        ) from None
