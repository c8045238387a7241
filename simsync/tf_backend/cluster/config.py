"""What a real SyncReplicasOptimizer cluster run is asked to do: frozen, JSON-able settings.

The parent process and every task read the same :class:`ClusterRunConfig` (the tasks get it as a
JSON file), so a task started by hand on another host follows the same settings. Two workloads:

- :class:`ModelWorkload`: a :class:`~simsync.numerics.ModelSpec` trained by every worker,
  worker ``i``'s run ``s`` on ``make_batch(spec, seed, (i, s, 0))`` (its run's one batch);
- :class:`TensorFlowTestWorkload`: the exact setup of TensorFlow's own
  ``sync_replicas_optimizer_test.py`` (``test2Workers``, ``test3Workers1Backup``), with the
  test's sequence of runs as a schedule of :class:`Round` s.

Workers either train freely until the global step reaches ``steps`` (no schedule), or run one
``train_op`` per worker named in each :class:`Round` of a schedule, rounds one after the other.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from simsync.numerics import ModelSpec
from simsync.tf_backend.session.runtime import BackendError

__all__ = [
    "TENSORFLOW_TESTS",
    "ClusterAddresses",
    "ClusterRunConfig",
    "ModelWorkload",
    "Round",
    "TensorFlowTestWorkload",
    "task_name",
    "tensorflow_test_config",
]


def task_name(job: str, index: int) -> str:
    """How messages and errors name a task.

    >>> task_name("worker", 1)
    'worker 1'
    """
    return f"{job} {index}"


@dataclass(frozen=True)
class Round:
    """One round of a schedule: each worker in ``workers`` runs ``train_op`` once.

    They start ``stagger`` seconds apart, in the order given (0: together); the round ends when
    all their runs have returned. With ``settle_global_step``, the round then waits until the
    global step has reached it (the apply runs in the chief's queue runner, after the runs
    return; TensorFlow's test waits the same way)."""

    workers: tuple[int, ...]
    stagger: float = 0.0
    settle_global_step: int | None = None


@dataclass(frozen=True)
class ModelWorkload:
    """Train ``spec`` (float64 variables from ``init_params(spec, seed)``, plain SGD at
    ``spec.learning_rate``)."""

    spec: ModelSpec = field(default_factory=ModelSpec)
    kind: str = "model"

    @property
    def learning_rate(self) -> float:
        return self.spec.learning_rate


#: the learning rate of TensorFlow's sync_replicas_optimizer_test.py
TENSORFLOW_TEST_LEARNING_RATE = 2.0


@dataclass(frozen=True)
class TensorFlowTestWorkload:
    """TensorFlow's own test setup: ``v0`` and ``global_step`` on ps 0, ``v1`` and the sparse
    ``v_sparse`` on ps 1, worker ``w``'s constant gradients ``0.1 + 0.2 w`` and ``0.9 + 0.2 w``
    (and ``[[0.1 + 0.2 w]]`` at row 1 of ``v_sparse``), SGD with learning rate 2.0."""

    test: str = "test2Workers"
    kind: str = "tensorflow_test"

    @property
    def learning_rate(self) -> float:
        """The tests' own: ``GradientDescentOptimizer(2.0)``."""
        return TENSORFLOW_TEST_LEARNING_RATE


#: TensorFlow's tests: (workers, replicas_to_aggregate, schedule). The schedules are the tests'
#: own sequences of ``sess.run(train_op)`` calls, round by round.
TENSORFLOW_TESTS: dict[str, tuple[int, int, tuple[Round, ...]]] = {
    "test2Workers": (
        2,
        2,
        (
            Round((0,)),
            Round((1,), settle_global_step=1),  # both gradients averaged: global step 1
            Round((0,)),
            Round((1,)),  # their local step was 0: both dropped
            Round((0, 1)),  # together: global step 2
        ),
    ),
    "test3Workers1Backup": (
        3,
        2,
        (
            Round((0,)),
            Round((2,), settle_global_step=1),  # workers 0 and 2 make global step 1
            Round((1,)),  # worker 1's stale gradient is dropped
            Round((0,)),
            Round((1,)),
            Round((2,)),  # all three dropped (local step 0), local steps become 1
            Round((0, 1), stagger=0.5),  # worker 0 alone waits; worker 1 completes step 2
        ),
    ),
}


@dataclass(frozen=True)
class ClusterAddresses:
    """A user-given ClusterSpec: ``host:port`` of every parameter server and worker."""

    ps: tuple[str, ...]
    worker: tuple[str, ...]

    @classmethod
    def from_tf_config(cls, text: str) -> ClusterAddresses:
        """The ``cluster`` of a ``TF_CONFIG`` JSON (``{"cluster": {"ps": [...], ...}}``)."""
        try:
            data = json.loads(text)
        except ValueError:
            raise BackendError("TF_CONFIG has no usable cluster (not JSON)") from None
        if not isinstance(data, dict) or "cluster" not in data:
            raise BackendError("TF_CONFIG has no usable cluster (no 'cluster')")
        try:
            return cls.from_data(data)
        except BackendError as error:
            raise BackendError(f"TF_CONFIG has no usable cluster ({error})") from None

    @classmethod
    def from_data(cls, data: Any) -> ClusterAddresses:
        """A ClusterSpec as parsed JSON (``{"ps": [...], "worker": [...]}``), or a whole
        ``TF_CONFIG`` (its ``cluster``); :class:`BackendError` says which key is wrong.

        >>> ClusterAddresses.from_data({"cluster": {"ps": ["h:1"], "worker": ["h:2"]}}).worker
        ('h:2',)
        >>> try:
        ...     ClusterAddresses.from_data({"ps": ["h:1"], "worker": "h:2"})
        ... except BackendError as error:
        ...     print(error)
        'worker': expected a list of "host:port" strings
        """
        cluster = data.get("cluster", data) if isinstance(data, dict) else data
        if not isinstance(cluster, dict):
            raise BackendError("expected a JSON object")
        for job in ("ps", "worker"):
            addresses = cluster.get(job)
            if addresses is None:
                raise BackendError(f"no key '{job}'")
            if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
                raise BackendError(f"'{job}': expected a list of \"host:port\" strings")
        return cls(tuple(cluster["ps"]), tuple(cluster["worker"]))

    def as_dict(self) -> dict[str, list[str]]:
        return {"ps": list(self.ps), "worker": list(self.worker)}

    def loopback_only(self) -> bool:
        """Whether every address is on this host's loopback (a private namespace can run it)."""
        hosts = {address.rpartition(":")[0] for address in (*self.ps, *self.worker)}
        return hosts <= {"127.0.0.1", "localhost"}


@dataclass(frozen=True)
class ClusterRunConfig:
    """Settings of one cluster run (see :mod:`simsync.tf_backend.cluster`).

    ``replicas_to_aggregate`` None means all workers; ``init_tokens`` None means TensorFlow's
    default (-1, i.e. ``replicas_to_aggregate`` tokens of value 0). ``steps`` is the global step
    to reach when no ``schedule`` is given: every worker stops at its first token of value
    ``steps`` or more. ``work_seconds[i][s]`` is the compute time made real between worker
    ``i``'s read and its push in its run ``s`` (missing: 0). ``start_timeout`` bounds the start
    of all tasks (each imports TensorFlow); ``run_timeout`` every other wait (a run, a barrier).
    ``open_ports`` runs without a private network namespace: the ports are then open on all
    interfaces. ``cluster`` gives the addresses instead of picking free loopback ports.
    """

    workload: ModelWorkload | TensorFlowTestWorkload = field(default_factory=ModelWorkload)
    parameter_servers: int = 1
    workers: int = 2
    replicas_to_aggregate: int | None = None
    init_tokens: int | None = None
    steps: int = 10
    schedule: tuple[Round, ...] | None = None
    seed: int = 0
    work_seconds: tuple[tuple[float, ...], ...] = ()
    seconds_per_row: float | None = None
    start_timeout: float = 300.0
    run_timeout: float = 60.0
    open_ports: bool = False
    cluster: ClusterAddresses | None = None

    def __post_init__(self) -> None:
        problem = self._problem()
        if problem:
            raise BackendError(f"cluster config: {problem}")

    @property
    def replicas(self) -> int:
        """``replicas_to_aggregate``, resolved."""
        return self.workers if self.replicas_to_aggregate is None else self.replicas_to_aggregate

    def work(self, worker: int, step: int) -> float:
        """Seconds of compute worker ``worker`` makes real in its run ``step``."""
        row = self.work_seconds[worker] if worker < len(self.work_seconds) else ()
        return float(row[step]) if step < len(row) else 0.0

    def _problem(self) -> str | None:
        if self.parameter_servers < 1 or self.workers < 1:
            return "needs at least one parameter server and one worker"
        if self.replicas < 1:
            return "replicas_to_aggregate must be at least 1"
        if self.init_tokens is not None and self.init_tokens < self.replicas - self.workers:
            return (
                f"init_tokens {self.init_tokens} is below replicas_to_aggregate - workers "
                f"= {self.replicas - self.workers}: the first step could never finish"
            )
        if self.schedule is None and self.steps < 1:
            return "steps (the global step to reach) must be at least 1"
        for round_ in self.schedule or ():
            if not round_.workers or not all(0 <= w < self.workers for w in round_.workers):
                return f"a round names workers {round_.workers}, not within 0..{self.workers - 1}"
        if any(s < 0 for row in self.work_seconds for s in row):
            return "work_seconds must not be negative"
        if self.cluster and (len(self.cluster.ps), len(self.cluster.worker)) != (
            self.parameter_servers,
            self.workers,
        ):
            return "the given cluster addresses do not match parameter_servers and workers"
        if self.cluster and len(set(self.cluster.ps + self.cluster.worker)) < (
            self.parameter_servers + self.workers
        ):
            return "the given cluster addresses give one address to two tasks"
        if isinstance(self.workload, TensorFlowTestWorkload):
            return _test_problem(self)
        return None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ClusterRunConfig:
        """The config :meth:`to_json` wrote."""
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterRunConfig:
        """The config :meth:`to_json` wrote, parsed (as :func:`simsync.files.read_json` gives
        it)."""
        data = dict(data)
        workload = data.pop("workload")
        if workload["kind"] == "model":
            spec = workload["spec"]
            data["workload"] = ModelWorkload(ModelSpec(**{**spec, "hidden": tuple(spec["hidden"])}))
        else:
            data["workload"] = TensorFlowTestWorkload(workload["test"])
        if data["schedule"] is not None:
            data["schedule"] = tuple(
                Round(tuple(r["workers"]), r["stagger"], r["settle_global_step"])
                for r in data["schedule"]
            )
        data["work_seconds"] = tuple(tuple(row) for row in data["work_seconds"])
        if data["cluster"] is not None:
            data["cluster"] = ClusterAddresses(
                tuple(data["cluster"]["ps"]), tuple(data["cluster"]["worker"])
            )
        return cls(**data)


def _test_problem(config: ClusterRunConfig) -> str | None:
    assert isinstance(config.workload, TensorFlowTestWorkload)
    name = config.workload.test
    if name not in TENSORFLOW_TESTS:
        return f"unknown TensorFlow test {name!r} (known: {', '.join(TENSORFLOW_TESTS)})"
    workers, replicas, _ = TENSORFLOW_TESTS[name]
    if (config.parameter_servers, config.workers, config.replicas) != (2, workers, replicas):
        return f"{name} runs 2 parameter servers and {workers} workers aggregating {replicas}"
    return None


def tensorflow_test_config(test: str, **settings: Any) -> ClusterRunConfig:
    """The config that reproduces TensorFlow's own test ``test``: its cluster (2 parameter
    servers), its workers and replicas to aggregate, ``num_tokens = workers`` initial tokens,
    and its sequence of runs as the schedule. ``settings`` override other fields.

    >>> config = tensorflow_test_config("test3Workers1Backup")
    >>> config.workers, config.replicas, config.init_tokens, len(config.schedule)
    (3, 2, 3, 7)
    """
    if test not in TENSORFLOW_TESTS:
        raise BackendError(
            f"unknown TensorFlow test {test!r} (known: {', '.join(TENSORFLOW_TESTS)})"
        )
    workers, replicas, schedule = TENSORFLOW_TESTS[test]
    config = ClusterRunConfig(
        workload=TensorFlowTestWorkload(test),
        parameter_servers=2,
        workers=workers,
        replicas_to_aggregate=replicas,
        init_tokens=workers,
        schedule=schedule,
    )
    return replace(config, **settings)
