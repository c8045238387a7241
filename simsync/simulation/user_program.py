"""Simulate a user's own TensorFlow program, as written or changed ("what if").

The program is imported (:func:`simsync.simulation.importing.import_program`: run in the
sandbox until its training loop is known, costs from a few traced steps, cached), changed as
asked (:mod:`simsync.tf_backend.program.whatif`), and simulated by the engine as any graph is.
:func:`program_summary` is the JSON of ``simsync simulate PROGRAM.py --json``: the engine's
summary (towers, sync points, step time, who waited for whom) and ``ops``, ``source``, where
the shared ops were made, what was grouped and ignored, and each what-if's line. Its
cross-check against fresh runs is :func:`simsync.crosscheck.user_program.crosscheck_program`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simsync.errors import UsageError
from simsync.ir import Graph, run_orders
from simsync.kinds import resource_feeds
from simsync.simulation import Simulation, summary
from simsync.simulation.fit import simulate_graph
from simsync.simulation.importing import import_program
from simsync.tf_backend.program import Imported
from simsync.tf_backend.program.load import PROGRAM_SUFFIXES
from simsync.tf_backend.program.modes import MODE_CHANGES, ModeChange
from simsync.tf_backend.program.whatif import (
    on_devices_of_their_own,
    towers_meet,
    with_batch,
    with_link,
    with_speeds,
    with_towers,
)
from simsync.trace import StepRecord, slowest_towers

__all__ = [
    "AS_WRITTEN",
    "PREDICTION_STEPS",
    "WhatIf",
    "is_program",
    "program_summary",
    "simulate_program",
    "what_if",
]

#: steps simulated to predict a cross-checked program's step time
PREDICTION_STEPS = 100


@dataclass(frozen=True)
class WhatIf:
    """Changes to an imported graph; None (or empty) leaves it as the program built it."""

    towers: int | None = None
    #: a mode change of :data:`~simsync.tf_backend.program.modes.MODE_CHANGES` ("async",
    #: "sync_replicas")
    mode: str | None = None
    #: the gradients each step aggregates, for a mode that aggregates (sync_replicas)
    replicas: int | None = None
    speeds: tuple[float, ...] = ()
    bandwidth_gbps: float | None = None
    latency_us: float | None = None
    #: examples per step where the program's inputs bring its own batch in
    batch: int | None = None


#: no what-if: the program as written
AS_WRITTEN = WhatIf()


@dataclass
class ProgramRun:
    """An imported program, the graph simulated (changed as asked) and the simulation."""

    imported: Imported
    graph: Graph
    simulation: Simulation
    changes: list[str] = field(default_factory=list)
    #: the values replayed with the program's own ops (:func:`program_values`), or None
    values: dict[str, Any] | None = None
    #: why there are no values, when asked for and there are none
    no_values: str = ""
    #: the same graph simulated as on GPUs, where this machine's cores are fewer than its
    #: towers (:func:`on_gpus`), or None
    on_gpus: dict[str, Any] | None = None


def is_program(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a TensorFlow program (or a MetaGraphDef), not a scenario.

    >>> is_program("train.py"), is_program("model.meta"), is_program("two_towers.toml")
    (True, True, False)
    """
    return Path(path).suffix in PROGRAM_SUFFIXES


def what_if(graph: Graph, changes: WhatIf) -> tuple[Graph, list[str]]:
    """``graph`` changed as ``changes`` asks, and one line per change for the report."""
    lines = []
    if changes.batch is not None:  # before towers: a copied tower copies the new batch
        graph, line = with_batch(graph, changes.batch)
        lines.append(line)
    if changes.towers is not None:
        graph, line = with_towers(graph, changes.towers)
        lines.append(line)
    if changes.mode is not None or changes.replicas is not None:  # a mode change, by name
        graph, line = _mode_change(changes).change(graph, changes.replicas)
        lines.append(line)
    if changes.speeds:
        graph, line = with_speeds(graph, list(changes.speeds))
        lines.append(line)
    if changes.bandwidth_gbps is not None or changes.latency_us is not None:
        graph, line = with_link(graph, changes.bandwidth_gbps, changes.latency_us)
        lines.append(line)
    return graph, lines


def _mode_change(changes: WhatIf) -> ModeChange:
    """The mode change ``--mode`` names (one line if there is none of that name, or if it
    takes no ``--replicas`` and was given one)."""
    takers = sorted(name for name, mode in MODE_CHANGES.items() if mode.takes_replicas)
    if changes.mode is None:
        raise UsageError(
            f"--replicas {changes.replicas}: it goes with --mode " + " or ".join(takers) + ", "
            "the gradients each step of that mode aggregates"
        )
    change = MODE_CHANGES.get(changes.mode)
    if change is None:
        raise UsageError(
            f"--mode {changes.mode}: a program runs as it was written; the only modes it "
            "can be changed to are " + ", ".join(sorted(MODE_CHANGES))
        )
    if changes.replicas is not None and not change.takes_replicas:
        raise UsageError(
            f"--replicas {changes.replicas}: only --mode " + " or ".join(takers) + " "
            "aggregates gradients; --mode " + str(changes.mode) + " takes no --replicas"
        )
    return change


def simulate_program(
    path: str | os.PathLike[str],
    changes: WhatIf = AS_WRITTEN,
    *,
    steps: int = 100,
    seed: int = 0,
    costs: str | os.PathLike[str] | None = None,
    refresh: bool = False,
    imported: Imported | None = None,
    args: Sequence[str] = (),
    values: bool = False,
    tasks: Mapping[str, int] | None = None,
    task_flags: bool = True,
    gpus: bool = True,
    devices: int | None = None,
) -> ProgramRun:
    """Import the program at ``path`` (unless ``imported`` is given; ``args`` are its command
    line), change it, and simulate ``steps`` steps; with ``values``, replay the simulated
    order with the program's own ops (:func:`program_values`: one more sandboxed run of the
    program). A program written for a cluster runs as its cluster of ``tasks``
    (:mod:`~simsync.tf_backend.program.cluster`). With ``gpus``, also as on GPUs where this
    machine's cores are fewer than its towers (:func:`on_gpus`; a prediction to cross-check
    is of this machine only). With ``devices``, the program runs on that many logical
    devices (``--devices``: a strategy that takes every device has as many replicas)."""
    if changes.mode is not None or changes.replicas is not None:
        _mode_change(changes)  # a mode that is none: said before the program runs
    imported = imported or import_program(
        path, args=args, costs=costs, refresh=refresh, tasks=tasks, task_flags=task_flags,
        devices=devices,
    )  # fmt: skip
    graph, lines = what_if(imported.graph, changes)
    sim = simulate_graph(graph, steps, name=Path(path).stem, source=str(path), seed=seed)
    run = ProgramRun(imported, graph, sim, lines)
    run.on_gpus = on_gpus(graph, steps, seed, str(path)) if gpus else None
    if values:
        program_values(path, run, args=args, devices=devices)
    return run


def on_gpus(graph: Graph, steps: int, seed: int, source: str) -> dict[str, Any] | None:
    """Where this machine's cores are fewer than the towers of ``graph`` (so its logical
    devices take turns on them, which GPUs would not): the same graph simulated with each
    tower's device its own (:func:`~simsync.tf_backend.program.whatif.on_devices_of_their_own`),
    its mean step and how often each tower came last at a sync point, of ``meetings`` (the
    sync points' steps). None elsewhere."""
    own = on_devices_of_their_own(graph)
    if own is None:
        return None
    alone, line = own
    found = summary(simulate_graph(alone, steps, name=graph.name, source=source, seed=seed))
    last: dict[str, int] = {}
    for counts in found["waited_for"].values():
        for tower, count in counts.items():
            last[tower] = last.get(tower, 0) + int(count)
    meetings = steps * len(found["waited_for"])  # a sync point in a step
    feeds = resource_feeds(alone)
    # the towers with the most work at each sync point: of towers as slow as each other, the
    # one the simulation has last is its order's, not theirs
    slowest = {  # not where the question does not apply (a take of R of N gradients)
        point: towers
        for point in found["waited_for"]
        if (towers := slowest_towers(alone, point, feeds)) is not None
    }
    return {"line": line, "step_time": found["step_time"]["mean"], "last": last,
            "meetings": meetings, "slowest": slowest}  # fmt: skip


def program_values(
    path: str | os.PathLike[str],
    run: ProgramRun,
    *,
    args: Sequence[str] = (),
    devices: int | None = None,
) -> None:
    """The values of ``run``: its simulated order of reads and writes replayed with the
    program's own ops, TensorFlow computing (:mod:`simsync.tf_backend.program.values`,
    :mod:`~simsync.tf_backend.program.replay`), in ``run.values``; or why not, in
    ``run.no_values``."""
    from simsync.tf_backend.program.load import ProgramError, replay_program
    from simsync.tf_backend.program.values import NoValues, replay_plan

    imported = run.imported
    try:
        plan = replay_plan(run.graph, run.simulation.trace, imported.data, imported.graph)
    except NoValues as why:
        run.no_values = str(why)
        return
    try:
        run.values = replay_program(path, plan, imported.key, args=args, devices=devices)
    except ProgramError as error:  # the simulation stands; its values could not be made
        run.no_values = str(error)


def examples_per_second(graph: Graph, runs: Sequence[StepRecord]) -> float | None:
    """Examples a program's loops train on per second: each run of a loop (not a daemon,
    such as a queue runner's thread) takes the program's batch once for each tower it runs
    where each tower brings in its own examples, once where the towers split a batch brought
    in outside them; None without a batch.

    >>> from simsync.ir import BatchFacts, Client, Cost, GraphFacts, Op
    >>> g = Graph()
    >>> g.facts = GraphFacts(batch=BatchFacts(32))
    >>> for i in (0, 1):
    ...     _ = g.add_op(Op(f"tower_{i}/x", "generic", "/cpu:0", Cost(0.001), tower=i))
    >>> g.add_client(Client("main", ("tower_0/x", "tower_1/x")))
    >>> runs = [StepRecord("main", 0, 0.0, 0.5), StepRecord("main", 1, 0.5, 1.0)]
    >>> examples_per_second(g, runs)
    128.0
    >>> g.facts = GraphFacts(batch=BatchFacts(32, per_tower=False))  # split between the towers
    >>> examples_per_second(g, runs)
    64.0
    """
    batch = graph.facts.batch
    loops = [c for c in graph.clients if not c.daemon]
    if not batch or not loops:
        return None
    examples = {}
    for client, order in zip(loops, run_orders(graph, [c.fetches for c in loops]), strict=True):
        towers = {graph.op(name).tower for name in order} - {None}
        examples[client.name] = batch.size * (len(towers) if batch.per_tower else 1)
    timed = [s for s in runs if s.client in examples]
    span = max((s.end for s in timed), default=0.0) - min((s.start for s in timed), default=0.0)
    return sum(examples[s.client] for s in timed) / span if span > 0 else None


def _values(run: ProgramRun) -> dict[str, Any]:
    """``values`` of the summary: the loss of every client's steps (the program's own ops in
    the simulated order), or why there is none."""
    if run.values is None:
        if run.no_values:
            return {"computed": False, "asked": True, "why": run.no_values}
        why = "not asked for (--values replays them: one more run of the program)"
        return {"computed": False, "asked": False, "why": why}
    losses = run.values["losses"]
    return {
        "computed": True,
        "how": "the program's own ops, in the simulated order of reads and writes",
        "loss": {client: [loss for _, loss in pairs] for client, pairs in losses.items()},
        "versions": run.values["versions"],
        "final": run.values["final"],
    }


def program_summary(run: ProgramRun) -> dict[str, Any]:
    """The JSON of ``simsync simulate PROGRAM.py --json``."""
    result: dict[str, Any] = dict(summary(run.simulation))
    result["towers"] = len(run.graph.towers)  # none when the program has none
    batch = run.graph.facts.batch
    result["batch"] = None if batch is None else batch.size  # as simulated
    if result["throughput"] is None:  # its ops compute no loss simsync knows: by its batch
        result["throughput"] = examples_per_second(run.graph, run.simulation.trace.steps)
        result["applied_throughput"] = result["throughput"]  # nothing it computes is dropped
    report = run.imported.report
    result["source"] = report["source"]
    result["ops"] = len(run.graph)
    result["imported"] = {
        "tensorflow_ops": report["tensorflow_ops"],
        "ops": report["ops"],
        "grouped": report["grouped"],
        "ignored": report["ignored"],
        "not_run_by_type": report["not_run_by_type"],
        "folded_by_tensorflow": report["folded_by_tensorflow"],
        "tower_rule": report["tower_rule"],
        "towers_in_program": report["towers"],
        "clients": report["clients"],
        "queue_runners": report["queue_runners"],
        # the threads of the FIFO queues' runners, simulated beside the loop, and their ops
        "queue_runner_threads": report.get("queue_runner_threads", 0),
        "queue_runner_ops": report.get("queue_runner_ops", 0),
        # its own SyncReplicasOptimizer's accumulators and token queue, as resources
        "accumulators": report.get("accumulators", []),
        "token_queues": report.get("token_queues", []),
        # its UPDATE_OPS: how many run, whose towers', which moving averages they race on
        "update_ops": report.get("update_ops"),
        # the examples each input brought in a step (each tower's), or None
        "batch": report.get("batch"),
        "collections": report["collections"],
        "costs": report["costs"],
        "costs_file": report.get("costs_file"),  # the cache's file they are kept in, or None
        "fit": report.get("fit"),
    }
    result["values"] = _values(run)
    result["sync_points_made_in"] = {
        name: report["made_in"].get(name) for name in result["sync_points"]
    }
    result["what_if"] = run.changes
    # whether --towers can change it (a strategy's replicas that meet inside themselves not)
    result["towers_copyable"] = towers_meet(run.imported.graph) is None
    result["on_gpus"] = run.on_gpus
    return result
