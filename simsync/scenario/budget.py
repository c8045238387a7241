"""What a run will cost before it starts: ops to execute, seconds and memory, roughly.

The simulator keeps a record of every op it runs, so time and memory both grow with the number
of op executions: ``[run] steps`` times the ops of the graph (every op runs once per step in
synchronous training; in asynchronous training each worker's update runs its five ops, and
the workers make ``steps`` x ``devices`` updates). The rates below were measured with
``simsync simulate examples/four_towers.toml --steps 100000 --json`` (91 s, 1.0 GB for 1.8
million op executions) and ``examples/async_workers.toml`` (80 s, 1.1 GB for 2.0 million):
about 50 microseconds and 600 bytes each, numerics on. A faster or slower machine shifts the
seconds, not the memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from simsync.scenario.model import Scenario

__all__ = [
    "BYTES_PER_OP",
    "MAX_CROSSCHECK_TOWERS",
    "MAX_TENSORFLOW_STEPS",
    "MAX_TENSORFLOW_WARMUP",
    "SECONDS_PER_OP",
    "Estimate",
    "cost_of",
    "duration",
    "graph_ops",
    "physical_memory",
]

SECONDS_PER_OP = 50e-6
BYTES_PER_OP = 600
#: ``crosscheck`` runs the graph on TensorFlow, which needs about 9 MB and 0.1 s per tower on
#: top of its start: 128 towers took 23 s and 1.3 GB, 256 towers 45 s and 2.1 GB.
MAX_CROSSCHECK_TOWERS = 128
#: Steps ``crosscheck`` and ``calibrate`` run on TensorFlow, at most: ``--steps`` traced ones
#: (and as many timed), ``--warmup`` before them. Each is a real TensorFlow step, from
#: milliseconds to seconds (four towers: about 40 ms here, traced), and a traced one keeps every
#: op's record in memory; the comparison's medians settle within a few dozen steps.
MAX_TENSORFLOW_STEPS = 1_000
MAX_TENSORFLOW_WARMUP = 1_000


def graph_ops(scenario: Scenario) -> int:
    """The ops of the scenario's graph, without building it.

    Per tower: read, dequeue, forward, backward; then one average and one apply (parameter
    server), or one all-reduce and an apply per tower (all-reduce); an asynchronous worker
    has its own read, dequeue, forward, backward and apply.

    >>> from simsync.scenario import ClusterConfig, Scenario, TrainingConfig
    >>> graph_ops(Scenario("s", cluster=ClusterConfig(4)))
    18
    >>> graph_ops(Scenario("s", cluster=ClusterConfig(8),
    ...                    training=TrainingConfig(aggregation="allreduce")))
    41
    """
    towers = scenario.towers
    if scenario.training.mode == "async":
        return 5 * towers
    if scenario.training.aggregation == "allreduce":
        return 5 * towers + 1
    return 4 * towers + 2


@dataclass(frozen=True)
class Estimate:
    """The op executions of a run and what they will take, roughly (an op's own cost is
    :class:`simsync.ir.Cost`)."""

    ops: int
    seconds: float
    bytes: int

    def __str__(self) -> str:
        return f"about {duration(self.seconds)} and {_size(self.bytes)} of memory"


def cost_of(scenarios: list[Scenario]) -> Estimate:
    """What simulating every scenario, one after the other, will take.

    >>> from simsync.scenario import ClusterConfig, Scenario
    >>> s = Scenario("s", cluster=ClusterConfig(4)).with_run(steps=1_000_000)
    >>> str(cost_of([s]))
    'about 15 minutes and 10.8 GB of memory'
    """
    ops = sum(s.run.steps * graph_ops(s) for s in scenarios)
    return Estimate(ops, ops * SECONDS_PER_OP, ops * BYTES_PER_OP)


def physical_memory() -> int | None:
    """Bytes of memory in this machine, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def duration(seconds: float) -> str:
    """``seconds`` in words, as precise as a person needs.

    >>> duration(40), duration(900), duration(3 * 3600), duration(400 * 86400)
    ('40 seconds', '15 minutes', '3.0 hours', '400 days')
    """
    if seconds < 120:
        return f"{seconds:.0f} seconds"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} minutes"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} hours"
    return f"{seconds / 86400:,.0f} days"


def _size(nbytes: float) -> str:
    """
    >>> _size(5e8), _size(1.2e10), _size(3e15)
    ('0.5 GB', '12.0 GB', '3,000,000 GB')
    """
    return f"{nbytes / 1e9:,.1f} GB" if nbytes < 1e12 else f"{nbytes / 1e9:,.0f} GB"
