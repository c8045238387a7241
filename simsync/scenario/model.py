"""The validated scenario: plain frozen dataclasses, one per table of the file."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from simsync.errors import ScenarioError
from simsync.ir.limits import MAX_STEPS
from simsync.numerics import ModelSpec

#: The ``[model]`` table is the numerics' own description of the model.
ModelConfig = ModelSpec

__all__ = [
    "ClusterConfig",
    "ComputeConfig",
    "LinkConfig",
    "ModelConfig",
    "RunConfig",
    "Scenario",
    "TrainingConfig",
]


@dataclass(frozen=True)
class RunConfig:
    steps: int = 100
    seed: int = 0

    def __post_init__(self) -> None:
        """Steps and seed as a scenario file may give them (``with_run(steps=nan)`` too)."""
        for key, value, high in (("steps", self.steps, MAX_STEPS), ("seed", self.seed, 2**63)):
            low = 1 if key == "steps" else 0
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ScenarioError(
                    f"[run] {key}: must be from {low} to {high:g}, a whole number (got {value!r})"
                )


@dataclass(frozen=True)
class LinkConfig:
    bandwidth_gbps: float = float("inf")
    latency_us: float = 0.0

    @property
    def bytes_per_second(self) -> float:
        return self.bandwidth_gbps * 1e9 / 8

    @property
    def latency(self) -> float:
        """Latency in seconds."""
        return self.latency_us * 1e-6


@dataclass(frozen=True)
class ClusterConfig:
    """Devices, their speeds (default: all 1), shared host cores, the link, and the GPUs the
    devices are on."""

    devices: int = 1
    speeds: tuple[float, ...] = ()
    host_cores: int | None = None
    core_efficiency: float = 1.0
    link: LinkConfig = field(default_factory=LinkConfig)
    #: physical GPUs the devices are on (fewer than devices: virtual GPUs sharing them)
    gpus: int | None = None
    gpu_contention: float = 0.0

    def __post_init__(self) -> None:
        if not self.speeds:  # in Python, leaving speeds out means all 1
            object.__setattr__(self, "speeds", (1.0,) * self.devices)


@dataclass(frozen=True)
class ComputeConfig:
    distribution: str = "constant"
    mean: float = 0.01
    shift: float = 0.0
    sigma: float = 0.5
    forward_fraction: float = 1 / 3
    overhead: float = 0.0


@dataclass(frozen=True)
class TrainingConfig:
    mode: str = "sync"
    aggregation: str = "parameter_server"
    staleness_bound: int | None = None
    max_staleness: int | None = None
    apply: str = "locked"
    replicas_to_aggregate: int | None = None
    init_tokens: int | None = None
    chief_queue_runner: bool = True


@dataclass(frozen=True)
class Scenario:
    """A whole scenario. Build one from a file with :func:`simsync.scenario.load_scenario`,
    or directly in Python.

    Examples
    --------
    >>> s = Scenario(name="two", cluster=ClusterConfig(devices=2, speeds=(1.0, 0.5)))
    >>> s.towers, s.with_run(steps=3).run.steps
    (2, 3)
    """

    name: str
    description: str = ""
    source: str = "<python>"
    #: settings the file gives that cannot take effect (shown as warnings, never compared)
    notes: tuple[str, ...] = field(default=(), compare=False)
    run: RunConfig = field(default_factory=RunConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    compute: ComputeConfig = field(default_factory=ComputeConfig)
    costs: dict[str, float] = field(default_factory=dict)
    model: ModelConfig = field(default_factory=ModelConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)

    @property
    def towers(self) -> int:
        return self.cluster.devices

    def with_run(self, steps: int | None = None, seed: int | None = None) -> Scenario:
        """A copy with ``[run]`` values overridden (``None`` keeps the file's value)."""
        run = dataclasses.replace(
            self.run,
            steps=self.run.steps if steps is None else steps,
            seed=self.run.seed if seed is None else seed,
        )
        return dataclasses.replace(self, run=run)
